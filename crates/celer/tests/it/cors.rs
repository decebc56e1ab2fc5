//! CORS over the wire, compared with tower-http's `CorsLayer` on the same
//! configuration: the same app served twice, once with `celer::cors` as
//! middleware and once wrapped in the tower layer, asked the same
//! requests over raw TCP.

use std::collections::BTreeSet;
use std::time::Duration;

use celer::cors::Cors;
use celer::serve::Shutdown;
use celer::{App, Request};
use celer_test_support::{Raw, Resp, bounded};
use http::{HeaderValue, Method};
use tower_http::cors::{Any, CorsLayer};

use crate::wire::Served;

fn routes(app: &mut App) {
    app.get("/api", |_req: Request| async { "data" });
    app.post("/api", |_req: Request| async { "posted" });
    app.put("/api", |_req: Request| async { "put" });
}

struct Config {
    ours: Cors,
    theirs: CorsLayer,
}

fn with_credentials() -> Config {
    let origins = ["https://a.example", "https://b.example"];
    let methods = [Method::GET, Method::POST, Method::PUT];
    Config {
        ours: Cors::new()
            .allow_origins(origins)
            .allow_methods(methods.clone())
            .allow_headers(["content-type", "x-token"])
            .expose_headers(["x-total"])
            .allow_credentials(true)
            .max_age(Duration::from_secs(600)),
        theirs: CorsLayer::new()
            .allow_origin(origins.map(HeaderValue::from_static))
            .allow_methods(methods)
            .allow_headers([
                http::header::CONTENT_TYPE,
                http::HeaderName::from_static("x-token"),
            ])
            .expose_headers([http::HeaderName::from_static("x-total")])
            .allow_credentials(true)
            .max_age(Duration::from_secs(600)),
    }
}

fn open() -> Config {
    Config {
        ours: Cors::new()
            .allow_any_origin()
            .allow_any_header()
            .allow_methods([Method::GET, Method::POST])
            .max_age(Duration::from_secs(60)),
        theirs: CorsLayer::new()
            .allow_origin(Any)
            .allow_headers(Any)
            .allow_methods([Method::GET, Method::POST])
            .max_age(Duration::from_secs(60)),
    }
}

/// Request shapes: (method, path, extra header lines).
const SHAPES: &[(&str, &str, &str)] = &[
    ("GET", "/api", "Origin: https://a.example\r\n"),
    ("GET", "/api", ""),
    (
        "POST",
        "/api",
        "Origin: https://b.example\r\nContent-Type: text/plain\r\n",
    ),
    (
        "OPTIONS",
        "/api",
        "Origin: https://a.example\r\nAccess-Control-Request-Method: PUT\r\nAccess-Control-Request-Headers: content-type,x-token\r\n",
    ),
    (
        "OPTIONS",
        "/api",
        "Origin: https://a.example\r\nAccess-Control-Request-Method: POST\r\n",
    ),
    ("GET", "/missing", "Origin: https://a.example\r\n"),
    ("GET", "/api", "Origin: https://evil.example\r\n"),
    (
        "OPTIONS",
        "/api",
        "Origin: https://evil.example\r\nAccess-Control-Request-Method: PUT\r\n",
    ),
];

async fn ask(addr: std::net::SocketAddr, (method, path, extra): (&str, &str, &str)) -> Resp {
    let mut conn = Raw::connect(addr).await;
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: t\r\n{extra}Content-Length: 0\r\nConnection: close\r\n\r\n"
    );
    conn.send(req.as_bytes()).await;
    conn.response_to(method).await
}

/// A field's comma-separated items, lowercased, as a set.
fn items(res: &Resp, name: &str) -> Option<BTreeSet<String>> {
    res.header(name).map(|v| {
        v.split(',')
            .map(|s| s.trim().to_ascii_lowercase())
            .collect()
    })
}

/// Compares the answers; `preflights` is how many preflight shapes the
/// configuration grants.
async fn compare(config: Config, preflights: usize) {
    let mut app = App::new();
    app.middleware(config.ours.into_middleware());
    routes(&mut app);
    let ours = Served::start(app).await;

    let mut app = App::new();
    routes(&mut app);
    let bound = celer::serve::bind("tcp://127.0.0.1:0").expect("bind");
    let theirs_addr = bound.tcp_addr().expect("addr");
    let shutdown = Shutdown::new();
    let theirs = tokio::spawn(app.serve_layered(bound, config.theirs, shutdown.clone()));

    let mut granted_preflights = 0;
    for &shape in SHAPES {
        let a = ask(ours.addr, shape).await;
        let b = ask(theirs_addr, shape).await;
        let what = format!("{shape:?}");
        assert_eq!(a.status, b.status, "{what}");
        assert_eq!(
            a.header("access-control-allow-origin"),
            b.header("access-control-allow-origin"),
            "{what}"
        );
        assert!(
            items(&a, "vary").is_some_and(|v| v.contains("origin")),
            "{what}: {:?}",
            a.header("vary")
        );
        assert!(
            items(&b, "vary").is_some_and(|v| v.contains("origin")),
            "{what}"
        );
        if a.header("access-control-allow-origin").is_none() {
            // Not granted: no field that grants anything.
            for name in [
                "access-control-allow-credentials",
                "access-control-allow-methods",
                "access-control-allow-headers",
            ] {
                assert_eq!(a.header(name), None, "{what}: {name}");
            }
            continue;
        }
        for name in [
            "access-control-allow-credentials",
            "access-control-allow-methods",
            "access-control-allow-headers",
            "access-control-expose-headers",
            "access-control-max-age",
        ] {
            assert_eq!(items(&a, name), items(&b, name), "{what}: {name}");
        }
        if shape.0 == "OPTIONS" && a.header("access-control-allow-methods").is_some() {
            granted_preflights += 1;
        }
    }
    assert_eq!(granted_preflights, preflights, "granted preflights");
    ours.stop().await;
    shutdown.trigger();
    bounded(theirs).await.expect("join").expect("serve");
}

#[tokio::test]
async fn answers_should_match_tower_http_with_credentials_and_listed_origins() {
    compare(with_credentials(), 2).await;
}

#[tokio::test]
async fn answers_should_match_tower_http_with_any_origin_and_header() {
    // Any origin: the one called evil is granted too.
    compare(open(), 3).await;
}

#[test]
#[should_panic(expected = "credentials cannot be allowed with any origin")]
fn credentials_with_any_origin_should_be_refused_at_startup() {
    let _ = Cors::new()
        .allow_any_origin()
        .allow_credentials(true)
        .into_middleware();
}
