//! The notes API, in memory and over a socket, and the binary's graceful
//! shutdown.

use celer::test::{TestClient, TestServer};
use example_notes::{BODY_LIMIT, Note, app};
use serde_json::{Value, json};

fn client() -> TestClient {
    TestClient::new(app(concat!(env!("CARGO_MANIFEST_DIR"), "/static")).unwrap())
}

#[tokio::test]
async fn notes_should_be_created_read_updated_and_deleted() {
    let client = client();
    let res = client.post("/notes").json(&json!({"text": "milk"})).await;
    assert_eq!(res.status(), 201);
    assert_eq!(res.header("location"), Some("/notes/1"));
    assert_eq!(
        res.json::<Note>(),
        Note {
            id: 1,
            text: "milk".into()
        }
    );
    let res = client
        .put("/notes/1")
        .json(&json!({"text": "oat milk"}))
        .await;
    assert_eq!(res.json::<Note>().text, "oat milk");
    assert_eq!(client.get("/notes").await.json::<Vec<Note>>().len(), 1);
    assert_eq!(client.delete("/notes/1").await.status(), 204);
    let res = client.get("/notes/1").await;
    assert_eq!(res.status(), 404);
    assert_eq!(res.header("content-type"), Some("application/problem+json"));
    assert_eq!(res.json::<Value>()["detail"], "no note 1");
}

#[tokio::test]
async fn bad_requests_should_get_problems_with_a_request_id() {
    let client = client();
    // Ids are typed in the rule: not a number is no route at all.
    assert_eq!(client.get("/notes/abc").await.status(), 404);
    let res = client.post("/notes").json(&json!({"txt": 1})).await;
    assert_eq!(res.status(), 422);
    assert!(res.header("x-request-id").is_some());
    let big = json!({"text": "x".repeat(BODY_LIMIT)});
    let res = client.post("/notes").json(&big).await;
    assert_eq!(res.status(), 413);
    assert_eq!(res.json::<Value>()["title"], "Payload Too Large");
    let res = client.get("/nowhere").header("x-request-id", "abc").await;
    assert_eq!(
        (res.status().as_u16(), res.header("x-request-id")),
        (404, Some("abc"))
    );
}

#[tokio::test]
async fn the_page_static_files_and_compression_should_work() {
    let client = client();
    for _ in 0..40 {
        client
            .post("/notes")
            .json(&json!({"text": "<b>bold</b>"}))
            .await;
    }
    let page = client.get("/").await.text();
    assert!(page.contains("<li>&lt;b&gt;bold&lt;/b&gt;</li>"), "{page}");
    let res = client.get("/static/style.css").await;
    assert_eq!(res.header("content-type"), Some("text/css; charset=utf-8"));
    let res = client.get("/notes").header("accept-encoding", "gzip").await;
    assert_eq!(res.header("content-encoding"), Some("gzip"));
}

#[tokio::test]
async fn the_binary_should_serve_and_stop_gracefully_on_sigterm() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_example-notes"))
        .args(["--listen", &format!("tcp://127.0.0.1:{port}")])
        .spawn()
        .unwrap();
    let server = TestServer::at(([127, 0, 0, 1], port).into());
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(server.addr()).await.is_ok() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(
        server
            .post("/notes")
            .json(&json!({"text": "a"}))
            .await
            .status(),
        201
    );
    std::process::Command::new("kill")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    let deadline = std::time::Instant::now() + celer::test::TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the server did not stop"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert!(status.success(), "{status}");
}
