//! `celer::serve` and `celer::serve_async`, and the test clients of
//! `celer::test`.

use celer::response::Json;
use celer::test::{TestClient, TestServer};
use celer::{App, Body, Request};
use http::StatusCode;

fn app() -> App {
    let mut app = App::new();
    app.get("/", |_req: Request| async { "home" });
    app.post("/echo", |mut req: Request| async move {
        let value: serde_json::Value = req.json().await?;
        Ok::<_, celer::Error>((StatusCode::CREATED, Json(value)))
    });
    app.get("/stream", |_req: Request| async {
        let chunks = futures_util::stream::iter(
            ["a", "b", "c"]
                .map(|c| Ok::<_, std::io::Error>(bytes::Bytes::from_static(c.as_bytes()))),
        );
        Body::from_stream(chunks)
    });
    app.get("/ip", |req: Request| async move {
        req.remote_addr()
            .map(|a| a.ip().to_string())
            .unwrap_or_default()
    });
    app
}

#[tokio::test(flavor = "current_thread")]
async fn serve_inside_a_runtime_should_be_an_error_not_a_panic() {
    let err = celer::serve("tcp://127.0.0.1:0", app()).unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("cannot be called inside a tokio runtime"),
        "{message}"
    );
    assert!(
        message.contains("celer::serve_async(listen, app).await"),
        "{message}"
    );

    let bound = celer::serve::bind("tcp://127.0.0.1:0").unwrap();
    let err = app().run(bound, std::future::pending()).unwrap_err();
    assert!(
        err.to_string().contains("app.serve(bound, shutdown).await"),
        "{err}"
    );
}

#[test]
fn serve_should_name_a_listen_spec_that_does_not_parse() {
    let err = celer::serve("tcp//nowhere", app()).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(
        err.to_string()
            .contains("cannot listen on \"tcp//nowhere\""),
        "{err}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn serve_async_should_serve_until_sigterm() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen: celer::serve::Listen = format!("tcp://127.0.0.1:{port}").parse().unwrap();
    let server = tokio::spawn(celer::serve_async(listen, app()));
    let addr: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    // Served: the watcher of signals started before the first answer.
    let mut answered = None;
    for _ in 0..200 {
        if let Ok(stream) = tokio::net::TcpStream::connect(addr).await {
            drop(stream);
            answered = Some(());
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    answered.expect("the server listens");
    let res = TestServer::at(addr).get("/").send().await;
    assert_eq!(res.text(), "home");
    // The signal handler is tokio's from here on: SIGTERM no longer ends
    // the test process, it stops the server.
    assert_eq!(send_sigterm(std::process::id()), 0);
    let result = celer_test_support::bounded(server).await.unwrap();
    result.unwrap();
}

/// Sends SIGTERM to `pid` with kill(1).
fn send_sigterm(pid: u32) -> i32 {
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("kill(1)");
    status.code().unwrap_or(-1)
}

#[tokio::test(flavor = "current_thread")]
async fn the_in_memory_client_should_send_json_and_read_it_back() {
    let client = TestClient::new(app());
    let res = client
        .post("/echo")
        .json(&serde_json::json!({"text": "hi"}))
        .send()
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    assert_eq!(res.header("content-type"), Some("application/json"));
    assert_eq!(res.json::<serde_json::Value>()["text"], "hi");
    // `.await` on the request sends it too.
    let res = client
        .post("/echo")
        .body("{")
        .header("content-type", "application/json")
        .await;
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    assert_eq!(client.get("/stream").await.text(), "abc");
    assert_eq!(client.get("/ip").await.text(), "");
}

#[tokio::test(flavor = "current_thread")]
async fn the_socket_client_should_speak_http1_to_a_real_server() {
    let server = TestServer::start(app()).await;
    let res = server
        .post("/echo")
        .json(&serde_json::json!({"n": 1}))
        .send()
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    assert_eq!(res.json::<serde_json::Value>()["n"], 1);
    // A streamed body arrives chunked; the client decodes it.
    let res = server.get("/stream").await;
    assert_eq!(res.header("transfer-encoding"), Some("chunked"));
    assert_eq!(res.text(), "abc");
    let res = server.head("/").await;
    assert_eq!(res.header("content-length"), Some("4"));
    assert!(res.bytes().is_empty());
    assert_eq!(server.get("/ip").await.text(), "127.0.0.1");
    assert_eq!(server.get("/nowhere").await.status(), StatusCode::NOT_FOUND);
    server.stop().await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_layered_app_should_keep_the_connection_addresses() {
    use celer::serve::{ConnInfo, Shutdown};
    use tower::ServiceExt as _;

    // A tower layer that reads the connection facts from the extensions.
    let layer = tower::layer::layer_fn(|inner: celer::serve::AppService| {
        tower::service_fn(move |req: http::Request<celer::serve::Incoming>| {
            let peer = req
                .extensions()
                .get::<ConnInfo>()
                .and_then(|info| info.remote)
                .map(|addr| addr.ip().to_string())
                .unwrap_or_default();
            let inner = inner.clone();
            async move {
                let mut res = inner.oneshot(req).await?;
                res.headers_mut()
                    .insert("x-layer-saw", http::HeaderValue::from_str(&peer).unwrap());
                Ok::<_, std::convert::Infallible>(res)
            }
        })
    });
    let bound = celer::serve::bind("tcp://127.0.0.1:0").unwrap();
    let addr = bound.tcp_addr().unwrap();
    let shutdown = Shutdown::new();
    let server = tokio::spawn(app().serve_layered(bound, layer, shutdown.clone()));
    let res = TestServer::at(addr).get("/ip").await;
    assert_eq!(res.text(), "127.0.0.1");
    assert_eq!(res.header("x-layer-saw"), Some("127.0.0.1"));
    shutdown.trigger();
    celer_test_support::bounded(server).await.unwrap().unwrap();
}
