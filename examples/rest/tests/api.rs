//! The API over real sockets: `example_rest::app()` served on loopback by
//! `App::serve`, driven with raw HTTP/1.1.

use std::net::SocketAddr;

use celer::serve::Shutdown;
use celer_test_support::{Raw, Resp, bounded};
use serde_json::{Value, json};

struct Served {
    addr: SocketAddr,
    shutdown: Shutdown,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Served {
    async fn start() -> Served {
        let bound = celer::serve::bind("tcp://127.0.0.1:0").expect("bind");
        let addr = bound.tcp_addr().expect("tcp address");
        let shutdown = Shutdown::new();
        let task = tokio::spawn(example_rest::app().serve(bound, shutdown.clone()));
        Served {
            addr,
            shutdown,
            task,
        }
    }

    /// Sends one request on a fresh connection and reads the answer.
    async fn send(&self, method: &str, target: &str, body: Option<&str>) -> Resp {
        let mut req = format!("{method} {target} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n");
        if let Some(body) = body {
            req.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            ));
        } else {
            req.push_str("\r\n");
        }
        let mut conn = Raw::connect(self.addr).await;
        conn.send(req.as_bytes()).await;
        conn.response_to(method).await
    }

    async fn stop(self) {
        self.shutdown.trigger();
        bounded(self.task).await.expect("join").expect("serve");
    }
}

fn json_of(resp: &Resp) -> Value {
    serde_json::from_slice(&resp.body)
        .unwrap_or_else(|err| panic!("not json ({err}): {:?}", resp.text()))
}

#[tokio::test]
async fn items_should_go_through_their_whole_lifecycle() {
    let served = Served::start().await;

    let created = served
        .send("POST", "/items", Some(r#"{"name":"write docs"}"#))
        .await;
    assert_eq!(created.status, 201);
    assert_eq!(created.header("content-type"), Some("application/json"));
    let location = created.header("location").expect("location").to_owned();
    assert_eq!(location, "/items/1");
    assert_eq!(
        json_of(&created),
        json!({"id": 1, "name": "write docs", "done": false})
    );

    // The Location built by url_for routes back to the item.
    let shown = served.send("GET", &location, None).await;
    assert_eq!(shown.status, 200);
    assert_eq!(json_of(&shown), json_of(&created));

    let second = served
        .send("POST", "/items", Some(r#"{"name":"ship","done":true}"#))
        .await;
    assert_eq!(second.header("location"), Some("/items/2"));

    let patched = served
        .send("PATCH", "/items/1", Some(r#"{"done":true}"#))
        .await;
    assert_eq!(
        json_of(&patched),
        json!({"id": 1, "name": "write docs", "done": true})
    );
    let replaced = served
        .send("PUT", "/items/2", Some(r#"{"name":"ship it"}"#))
        .await;
    assert_eq!(
        json_of(&replaced),
        json!({"id": 2, "name": "ship it", "done": false})
    );

    let all = served.send("GET", "/items", None).await;
    assert_eq!(json_of(&all).as_array().map(Vec::len), Some(2));
    let done = served.send("GET", "/items?done=true", None).await;
    assert_eq!(
        json_of(&done),
        json!([{"id": 1, "name": "write docs", "done": true}])
    );

    let deleted = served.send("DELETE", "/items/1", None).await;
    assert_eq!(deleted.status, 204);
    let gone = served.send("GET", "/items/1", None).await;
    assert_eq!(gone.status, 404);
    assert_eq!(
        gone.header("content-type"),
        Some("application/problem+json")
    );
    assert_eq!(
        json_of(&gone),
        json!({"title": "Not Found", "status": 404, "detail": "no item with this id"})
    );
    served.stop().await;
}

#[tokio::test]
async fn client_errors_should_be_problem_documents() {
    let served = Served::start().await;

    let wrong_shape = served
        .send("POST", "/items", Some(r#"{"title":"x"}"#))
        .await;
    assert_eq!(wrong_shape.status, 422);
    assert_eq!(json_of(&wrong_shape)["status"], 422);

    let malformed = served.send("POST", "/items", Some(r#"{"name":"#)).await;
    assert_eq!(malformed.status, 400);

    let not_json = served.send("POST", "/items", None).await;
    assert_eq!(not_json.status, 415);

    let not_an_int = served.send("GET", "/items/abc", None).await;
    assert_eq!(not_an_int.status, 404);
    assert_eq!(json_of(&not_an_int)["title"], "Not Found");

    let missing = served
        .send("PUT", "/items/99", Some(r#"{"name":"x"}"#))
        .await;
    assert_eq!(missing.status, 404);

    let not_allowed = served.send("DELETE", "/items", None).await;
    assert_eq!(not_allowed.status, 405);
    assert_eq!(
        not_allowed.header("allow"),
        Some("GET, HEAD, POST, OPTIONS")
    );
    assert_eq!(json_of(&not_allowed)["status"], 405);

    let options = served.send("OPTIONS", "/items/7", None).await;
    assert_eq!(options.status, 200);
    assert_eq!(
        options.header("allow"),
        Some("GET, HEAD, PUT, DELETE, OPTIONS, PATCH")
    );

    let big = format!(r#"{{"name":"{}"}}"#, "x".repeat(example_rest::BODY_LIMIT));
    let too_large = served.send("POST", "/items", Some(&big)).await;
    assert_eq!(too_large.status, 413);

    let head = served.send("HEAD", "/items", None).await;
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), Some("2"));
    served.stop().await;
}
