//! The notes API, in memory and over a socket, and the binary's graceful
//! shutdown.

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use notes_axum::{BODY_LIMIT, Note, app};
use serde_json::{Value, json};
use tower::ServiceExt;

fn client() -> Router {
    app(concat!(env!("CARGO_MANIFEST_DIR"), "/static"))
}

/// What axum has no test client for: a request and its whole answer.
struct Reply {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    body: Vec<u8>,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
    fn json<T: serde::de::DeserializeOwned>(&self) -> T {
        serde_json::from_slice(&self.body).unwrap()
    }
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

async fn send(
    app: &Router,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> Reply {
    let mut req = Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let body = match body {
        Some(json) => {
            req = req.header("content-type", "application/json");
            Body::from(json.to_string())
        }
        None => Body::empty(),
    };
    let res = app.clone().oneshot(req.body(body).unwrap()).await.unwrap();
    let (parts, body) = res.into_parts();
    let body = body.collect().await.unwrap().to_bytes().to_vec();
    Reply {
        status: parts.status,
        headers: parts.headers,
        body,
    }
}

#[tokio::test]
async fn notes_should_be_created_read_updated_and_deleted() {
    let app = client();
    let res = send(&app, "POST", "/notes", &[], Some(json!({"text": "milk"}))).await;
    assert_eq!(res.status, 201);
    assert_eq!(res.header("location"), Some("/notes/1"));
    assert_eq!(
        res.json::<Note>(),
        Note {
            id: 1,
            text: "milk".into()
        }
    );
    let res = send(
        &app,
        "PUT",
        "/notes/1",
        &[],
        Some(json!({"text": "oat milk"})),
    )
    .await;
    assert_eq!(res.json::<Note>().text, "oat milk");
    assert_eq!(
        send(&app, "GET", "/notes", &[], None)
            .await
            .json::<Vec<Note>>()
            .len(),
        1
    );
    assert_eq!(
        send(&app, "DELETE", "/notes/1", &[], None).await.status,
        204
    );
    let res = send(&app, "GET", "/notes/1", &[], None).await;
    assert_eq!(res.status, 404);
    assert_eq!(res.header("content-type"), Some("application/problem+json"));
    assert_eq!(res.json::<Value>()["detail"], "no note 1");
}

#[tokio::test]
async fn bad_requests_should_get_problems_with_a_request_id() {
    let app = client();
    assert_eq!(send(&app, "GET", "/notes/abc", &[], None).await.status, 404);
    let res = send(&app, "POST", "/notes", &[], Some(json!({"txt": 1}))).await;
    assert_eq!(res.status, 422);
    assert!(res.header("x-request-id").is_some());
    let big = json!({"text": "x".repeat(BODY_LIMIT)});
    let res = send(&app, "POST", "/notes", &[], Some(big)).await;
    assert_eq!(res.status, 413);
    assert_eq!(res.json::<Value>()["title"], "Payload Too Large");
    let res = send(&app, "GET", "/nowhere", &[("x-request-id", "abc")], None).await;
    assert_eq!(
        (res.status.as_u16(), res.header("x-request-id")),
        (404, Some("abc"))
    );
}

#[tokio::test]
async fn the_page_static_files_and_compression_should_work() {
    let app = client();
    for _ in 0..40 {
        send(
            &app,
            "POST",
            "/notes",
            &[],
            Some(json!({"text": "<b>bold</b>"})),
        )
        .await;
    }
    let page = send(&app, "GET", "/", &[], None).await.text();
    assert!(page.contains("<li>&lt;b&gt;bold&lt;/b&gt;</li>"), "{page}");
    let res = send(&app, "GET", "/static/style.css", &[], None).await;
    assert_eq!(res.header("content-type"), Some("text/css"));
    let res = send(&app, "GET", "/notes", &[("accept-encoding", "gzip")], None).await;
    assert_eq!(res.header("content-encoding"), Some("gzip"));
}

#[tokio::test]
async fn the_binary_should_serve_and_stop_gracefully_on_sigterm() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_notes-axum"))
        .args(["--listen", &addr])
        .spawn()
        .unwrap();
    let mut stream = None;
    for _ in 0..100 {
        if let Ok(s) = tokio::net::TcpStream::connect(&addr).await {
            stream = Some(s);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // No client over a socket in axum either: a raw HTTP/1.1 request.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = stream.expect("the server listens");
    let body = r#"{"text":"a"}"#;
    let req = format!(
        "POST /notes HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(req.as_bytes()).await.unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).await.unwrap();
    assert!(reply.starts_with("HTTP/1.1 201"), "{reply}");
    std::process::Command::new("kill")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
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
