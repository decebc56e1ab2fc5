//! A panicking handler: 500 over HTTP/1.1 and HTTP/2, the connection and
//! the worker go on, and the panic is logged with the route.

use celer::{App, Request};

use crate::logs::Logs;
use crate::wire::{Served, curl};
use bytes::Bytes;
use celer_test_support::{Raw, bounded};
use tokio::net::TcpStream;

fn app() -> App {
    let mut app = App::new();
    app.get("/boom/<int:n>", |req: Request| async move {
        let n: i64 = req.param("n").unwrap_or(0);
        if n > 0 {
            panic!("boom {n}");
        }
        "calm"
    });
    // Panics before its future exists.
    app.get(
        "/early",
        |_req: Request| -> std::future::Ready<&'static str> { panic!("early") },
    );
    app.get("/ok", |_req: Request| async { "ok" });
    app
}

#[tokio::test(flavor = "current_thread")]
async fn http1_should_answer_500_and_keep_the_connection() {
    let (logs, _guard) = Logs::capture();
    let served = Served::start(app()).await;
    let mut conn = Raw::connect(served.addr).await;
    conn.send(b"GET /boom/3 HTTP/1.1\r\nHost: t\r\n\r\nGET /early HTTP/1.1\r\nHost: t\r\n\r\nGET /ok HTTP/1.1\r\nHost: t\r\n\r\n")
        .await;
    let first = conn.response().await;
    assert_eq!(first.status, 500);
    assert_eq!(first.text(), "internal server error");
    let second = conn.response().await;
    assert_eq!(second.status, 500);
    let third = conn.response().await;
    assert_eq!(third.status, 200);
    assert_eq!(third.text(), "ok");
    drop(conn);
    // curl sees a complete reply, not an empty one (its exit 52).
    let out = curl(&[
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        &served.url("/boom/1"),
    ])
    .await;
    assert_eq!(out, "500");
    served.stop().await;
    let logs = logs.text();
    assert!(logs.contains("handler panicked"), "{logs}");
    assert!(logs.contains("panic=boom 3"), "{logs}");
    assert!(
        logs.contains("route=GET /boom/<int:n> (for GET /boom/3)"),
        "{logs}"
    );
    assert!(logs.contains("panic=early"), "{logs}");
    assert!(logs.contains("route=GET /early (for GET /early)"), "{logs}");
}

/// One HTTP/2 request on `client`: the status and the body.
async fn h2_get(client: &h2::client::SendRequest<Bytes>, path: &str) -> (u16, String) {
    let req = http::Request::get(format!("http://celer.test{path}"))
        .body(())
        .unwrap();
    let mut client = bounded(client.clone().ready()).await.unwrap();
    let (response, _) = client.send_request(req, true).unwrap();
    let response = bounded(response).await.unwrap();
    let status = response.status().as_u16();
    let mut body = response.into_body();
    let mut text = Vec::new();
    while let Some(chunk) = bounded(body.data()).await {
        let chunk = chunk.unwrap();
        let _ = body.flow_control().release_capacity(chunk.len());
        text.extend_from_slice(&chunk);
    }
    (status, String::from_utf8(text).unwrap())
}

#[tokio::test(flavor = "current_thread")]
async fn http2_should_answer_500_and_keep_the_connection() {
    let (logs, _guard) = Logs::capture();
    let served = Served::start(app()).await;
    let tcp = bounded(TcpStream::connect(served.addr)).await.unwrap();
    let (client, conn) = bounded(h2::client::handshake(tcp)).await.unwrap();
    let conn = tokio::spawn(conn);
    // Three streams, one after the other, on one connection.
    assert_eq!(
        h2_get(&client, "/boom/2").await,
        (500, "internal server error".to_owned())
    );
    assert_eq!(h2_get(&client, "/early").await.0, 500);
    assert_eq!(h2_get(&client, "/ok").await, (200, "ok".to_owned()));
    drop(client);
    bounded(conn).await.unwrap().unwrap();
    // A single request through curl, which sees a complete 500.
    let out = curl(&[
        "--http2-prior-knowledge",
        "-o",
        "/dev/null",
        "-w",
        "%{http_version} %{http_code}",
        &served.url("/boom/4"),
    ])
    .await;
    assert_eq!(out, "2 500");
    served.stop().await;
    let logs = logs.text();
    assert!(logs.contains("panic=boom 2"), "{logs}");
    assert!(
        logs.contains("route=GET /boom/<int:n> (for GET /boom/2)"),
        "{logs}"
    );
    assert!(logs.contains("panic=early"), "{logs}");
}

#[tokio::test(flavor = "current_thread")]
async fn the_apps_status_handlers_and_problems_should_render_a_panics_500() {
    let mut with_problems = app();
    with_problems.problem_details(true);
    let client = celer::test::TestClient::new(with_problems);
    for path in ["/boom/5", "/early"] {
        let res = client.get(path).await;
        assert_eq!(res.status(), 500);
        assert_eq!(res.header("content-type"), Some("application/problem+json"));
        assert_eq!(res.json::<serde_json::Value>()["status"], 500);
    }
    let mut with_page = app();
    with_page.status(500, |_res: celer::Response| async { "sorry" });
    let client = celer::test::TestClient::new(with_page);
    assert_eq!(client.get("/boom/6").await.text(), "sorry");
    // A status handler that panics too: a plain 500 still.
    let mut twice = App::new();
    twice.get("/boom", |_req: Request| async {
        panic!("first");
        #[allow(unreachable_code)]
        ""
    });
    twice.status(500, |_res: celer::Response| async {
        panic!("second");
        #[allow(unreachable_code)]
        ""
    });
    let res = celer::test::TestClient::new(twice).get("/boom").await;
    assert_eq!(res.status(), 500);
    assert_eq!(client.get("/ok").await.text(), "ok");
}
