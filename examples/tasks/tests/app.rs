//! The example's kinds through its app, on loopback.

use std::time::{Duration, Instant};

use celer::dispatch::Dispatcher;
use celer::serve::Shutdown;
use celer_tasks::{Tasks, TasksConfig};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn call(addr: std::net::SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    conn.read_to_end(&mut out).await.unwrap();
    let text = String::from_utf8(out).unwrap();
    let status = text[9..12].parse().unwrap();
    let body = text.split_once("\r\n\r\n").unwrap().1.to_owned();
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn primes_run_as_a_task_and_inline_on_the_dispatcher() {
    let dir = tempfile::tempdir().unwrap();
    let tasks = Tasks::open(TasksConfig::new(dir.path()), example_tasks::kinds()).unwrap();
    let app = example_tasks::app(&tasks, Dispatcher::builder().threads(1).build());
    let bound = celer::serve::bind("tcp://127.0.0.1:0").unwrap();
    let addr = bound.tcp_addr().unwrap();
    let shutdown = Shutdown::new();
    let server = tokio::spawn(app.serve(bound, shutdown.clone()));

    let (status, body) = call(addr, "GET", "/primes/100", "").await;
    assert_eq!((status, body.as_str()), (200, "25"));

    let submit = json!({"kind": "primes", "input": {"below": 10_000}}).to_string();
    let (status, body) = call(addr, "POST", "/tasks", &submit).await;
    assert_eq!(status, 201, "{body}");
    let id = serde_json::from_str::<Value>(&body).unwrap()["id"].clone();
    let start = Instant::now();
    loop {
        let (_, body) = call(addr, "GET", &format!("/tasks/{id}"), "").await;
        if serde_json::from_str::<Value>(&body).unwrap()["state"] == "succeeded" {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{body}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (_, body) = call(addr, "GET", &format!("/tasks/{id}/result"), "").await;
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap(),
        json!({"count": 1229, "attempt": 1})
    );

    shutdown.trigger();
    server.await.unwrap().unwrap();
    tokio::task::spawn_blocking(move || tasks.shutdown())
        .await
        .unwrap();
}
