//! `celer::files::OffloadLayer`: X-Sendfile and X-Accel-Redirect served from
//! the allowed root with the file semantics, X-Reproxy-URL fetched from a
//! real upstream started here, and the failures (outside the root, upstream
//! not allowed, unreachable, too slow).

use std::time::Duration;

use celer::files::offload::MAX_REPROXY_URLS;
use celer::files::{Files, OffloadLayer};
use celer::serve::Shutdown;
use celer::{App, Body, Request};
use http::{HeaderMap, StatusCode};
use tower::ServiceExt;
use tower_layer::Layer;

use crate::files::{DIGITS, HELLO, site};

/// An app answering with one header (and a Content-Disposition).
fn with_header(
    name: &'static str,
    value: String,
) -> impl Fn(Request) -> std::future::Ready<http::Response<Body>> + Clone + Send + Sync + 'static {
    move |_req: Request| {
        std::future::ready(
            http::Response::builder()
                .header(name, value.as_str())
                .header("content-disposition", "attachment")
                .header("content-type", "application/x-app")
                .body(Body::from("the app's own body"))
                .unwrap(),
        )
    }
}

/// The upstream: `/blob` echoes the Range it got; `/slow` answers late.
fn upstream() -> App {
    let mut app = App::new();
    app.get("/blob", |req: Request| async move {
        let range = req
            .headers()
            .get("range")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        http::Response::builder()
            .header("content-type", "text/x-upstream")
            .header("x-got-range", range)
            .body(Body::from("upstream body"))
            .unwrap()
    });
    app.get("/slow", |_req: Request| async {
        tokio::time::sleep(Duration::from_secs(5)).await;
        "late"
    });
    app.get("/stall", |_req: Request| async {
        use futures_util::stream::{self, StreamExt};
        let first = stream::once(async { Ok::<_, std::io::Error>("partial") });
        Body::from_stream(first.chain(stream::pending()))
    });
    app
}

struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: Vec<u8>,
}

#[tokio::test]
async fn offload_headers_are_served_and_never_leak() {
    let site = site();
    let bound = celer::serve::bind("tcp://127.0.0.1:0").unwrap();
    let up = bound.tcp_addr().unwrap();
    let shutdown = Shutdown::new();
    let task = tokio::spawn(upstream().serve(bound, shutdown.clone()));
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    // Nothing listens there once the listener is dropped.
    let dead = format!("http://{dead}/blob");
    let root = site.root.display().to_string();

    let mut app = App::new();
    app.get(
        "/sendfile",
        with_header("x-sendfile", format!("{root}/hello.txt")),
    );
    app.get(
        "/accel",
        with_header("x-accel-redirect", "/digits.bin".to_owned()),
    );
    app.get(
        "/outside",
        with_header("x-sendfile", "/etc/passwd".to_owned()),
    );
    app.get(
        "/dotdot",
        with_header("x-sendfile", format!("{root}/../outside.txt")),
    );
    app.get(
        "/accel-up",
        with_header("x-accel-redirect", "/%2e%2e/outside.txt".to_owned()),
    );
    app.get(
        "/link-out",
        with_header("x-accel-redirect", "/escape.txt".to_owned()),
    );
    app.get(
        "/reproxy",
        with_header("x-reproxy-url", format!("http://{up}/blob")),
    );
    app.get(
        "/fallback",
        with_header("x-reproxy-url", format!("{dead} http://{up}/blob")),
    );
    app.get("/unreachable", with_header("x-reproxy-url", dead.clone()));
    app.get(
        "/slow",
        with_header("x-reproxy-url", format!("http://{up}/slow")),
    );
    app.get(
        "/not-allowed",
        with_header("x-reproxy-url", "http://192.0.2.1/x".to_owned()),
    );
    let dead_urls = |n: usize| vec![dead.as_str(); n].join(" ");
    let at_limit = format!("{} http://{up}/blob", dead_urls(MAX_REPROXY_URLS - 1));
    let past_limit = format!("{} http://{up}/blob", dead_urls(MAX_REPROXY_URLS));
    app.get("/at-limit", with_header("x-reproxy-url", at_limit));
    app.get("/past-limit", with_header("x-reproxy-url", past_limit));
    app.get(
        "/stall",
        with_header("x-reproxy-url", format!("http://{up}/stall")),
    );
    app.get("/plain", |_req: Request| async { "no offload" });
    let dead_prefix = dead.trim_end_matches("blob").to_owned();
    let service = OffloadLayer::new()
        .files(Files::new(&site.root).unwrap())
        .allow_upstream(&format!("http://{up}/"))
        .allow_upstream(&dead_prefix)
        .timeout(Duration::from_millis(300))
        .layer(app);

    let ask = |path: &'static str, headers: &[(&str, &str)]| {
        let service = service.clone();
        let headers: Vec<(String, String)> = headers
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        async move {
            let mut req = http::Request::get(path);
            for (k, v) in headers {
                req = req.header(k, v);
            }
            let res = service
                .oneshot(req.body(Body::empty()).unwrap())
                .await
                .unwrap();
            let (parts, body) = res.into_parts();
            let body = body.collect_bytes().await.unwrap().to_vec();
            Reply {
                status: parts.status,
                headers: parts.headers,
                body,
            }
        }
    };
    let offload_headers = ["x-sendfile", "x-accel-redirect", "x-reproxy-url"];

    let got = ask("/sendfile", &[]).await;
    assert_eq!((got.status, &got.body[..]), (StatusCode::OK, HELLO));
    assert_eq!(got.headers["content-type"], "text/plain; charset=utf-8");
    assert_eq!(got.headers["content-disposition"], "attachment");
    assert!(got.headers.contains_key("etag"));
    let got = ask("/accel", &[("range", "bytes=10-12")]).await;
    assert_eq!(
        (got.status, &got.body[..]),
        (StatusCode::PARTIAL_CONTENT, &DIGITS[10..=12])
    );
    let etag = ask("/accel", &[]).await.headers["etag"]
        .to_str()
        .unwrap()
        .to_owned();
    let etag: &'static str = Box::leak(etag.into_boxed_str());
    assert_eq!(
        ask("/accel", &[("if-none-match", etag)]).await.status,
        StatusCode::NOT_MODIFIED
    );
    for path in ["/outside", "/dotdot", "/accel-up", "/not-allowed"] {
        let got = ask(path, &[]).await;
        assert_eq!(got.status, StatusCode::INTERNAL_SERVER_ERROR, "{path}");
        assert!(!got.body.windows(7).any(|w| w == b"OUTSIDE"), "{path}");
    }
    assert_eq!(ask("/link-out", &[]).await.status, StatusCode::FORBIDDEN);

    let got = ask("/reproxy", &[("range", "bytes=0-3")]).await;
    assert_eq!(
        (got.status, &got.body[..]),
        (StatusCode::OK, &b"upstream body"[..])
    );
    assert_eq!(got.headers["content-type"], "text/x-upstream");
    assert_eq!(
        got.headers["x-got-range"], "bytes=0-3",
        "request ranges reach the upstream"
    );
    assert_eq!(got.headers["content-disposition"], "attachment");
    assert_eq!(ask("/fallback", &[]).await.body, b"upstream body");
    let got = ask("/unreachable", &[]).await;
    assert_eq!(got.status, StatusCode::BAD_GATEWAY);
    assert!(
        String::from_utf8_lossy(&got.body).contains("cannot connect"),
        "{:?}",
        got.body
    );
    let got = ask("/slow", &[]).await;
    assert_eq!(got.status, StatusCode::GATEWAY_TIMEOUT);
    assert!(String::from_utf8_lossy(&got.body).contains("did not answer in time"));

    // Only the first MAX_REPROXY_URLS URLs are tried.
    assert_eq!(ask("/at-limit", &[]).await.body, b"upstream body");
    assert_eq!(
        ask("/past-limit", &[]).await.status,
        StatusCode::BAD_GATEWAY
    );

    // A body that stalls after the head is cut off after the timeout.
    let req = http::Request::get("/stall").body(Body::empty()).unwrap();
    let res = service.clone().oneshot(req).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let err = res.into_body().collect_bytes().await.unwrap_err();
    assert!(err.to_string().contains("stalled"), "{err}");

    for path in [
        "/sendfile",
        "/accel",
        "/reproxy",
        "/unreachable",
        "/outside",
    ] {
        let got = ask(path, &[]).await;
        for name in offload_headers {
            assert!(!got.headers.contains_key(name), "{path} leaked {name}");
        }
    }
    assert_eq!(ask("/plain", &[]).await.body, b"no offload");
    // The slow handler is still sleeping; the upstream is not waited for.
    shutdown.trigger();
    task.abort();
}

/// Runs curl off the runtime's threads; returns (status line code, headers
/// and body as text).
async fn curl(args: Vec<String>) -> (u16, String) {
    let out = tokio::task::spawn_blocking(move || {
        celer_test_support::run_tool(
            std::process::Command::new("curl")
                .args(["-s", "-i", "--max-time", "10"])
                .args(&args),
        )
    })
    .await
    .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let status = text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offload_over_the_wire_with_curl() {
    let site = site();
    let upstream_bound = celer::serve::bind("tcp://127.0.0.1:0").unwrap();
    let up = upstream_bound.tcp_addr().unwrap();
    let up_shutdown = Shutdown::new();
    let up_task = tokio::spawn(upstream().serve(upstream_bound, up_shutdown.clone()));

    let root = site.root.display().to_string();
    let mut app = App::new();
    app.get(
        "/file",
        with_header("x-sendfile", format!("{root}/digits.bin")),
    );
    app.get(
        "/up",
        with_header("x-reproxy-url", format!("http://{up}/blob")),
    );
    let front = OffloadLayer::new()
        .files(Files::new(&site.root).unwrap())
        .allow_upstream(&format!("http://{up}/"))
        .layer(app);
    let bound = celer::serve::bind("tcp://127.0.0.1:0").unwrap();
    let addr = bound.tcp_addr().unwrap();
    let shutdown = Shutdown::new();
    let task = tokio::spawn(bound.serve(front, shutdown.clone()));

    let (status, text) = curl(vec![
        "-r".into(),
        "5-9".into(),
        format!("http://{addr}/file"),
    ])
    .await;
    assert_eq!(status, 206, "{text}");
    assert!(
        text.to_ascii_lowercase()
            .contains("content-range: bytes 5-9/100"),
        "{text}"
    );
    assert!(text.ends_with("\r\n\r\n56789"), "{text}");
    assert!(!text.to_ascii_lowercase().contains("x-sendfile"), "{text}");
    let (status, text) = curl(vec!["-I".into(), format!("http://{addr}/file")]).await;
    assert_eq!(status, 200, "{text}");
    assert!(
        text.to_ascii_lowercase().contains("content-length: 100"),
        "{text}"
    );
    let (status, text) = curl(vec![format!("http://{addr}/up")]).await;
    assert_eq!(status, 200, "{text}");
    assert!(text.ends_with("upstream body"), "{text}");
    assert!(
        !text.to_ascii_lowercase().contains("x-reproxy-url"),
        "{text}"
    );

    shutdown.trigger();
    up_shutdown.trigger();
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    let _ = tokio::time::timeout(Duration::from_secs(10), up_task).await;
}
