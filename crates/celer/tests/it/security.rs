//! The security headers middleware over the wire: its defaults, a route
//! that sets its own CSP, and HSTS only when the request came over TLS.

use celer::http::HeaderValue;
use celer::security::{DEFAULT_CSP, SecurityHeaders};
use celer::{App, Request, Response};

use crate::wire::Served;

fn app(config: SecurityHeaders) -> App {
    let mut app = App::new();
    app.middleware(config.into_middleware());
    app.get("/", |_req: Request| async { "page" });
    app.get("/embed", |_req: Request| async {
        let mut res = Response::new(celer::Body::from("embeddable"));
        res.headers_mut().insert(
            "content-security-policy",
            HeaderValue::from_static("frame-ancestors https://partner.example"),
        );
        res
    });
    app
}

#[tokio::test]
async fn defaults_should_be_sent_and_hsts_only_over_tls() {
    let served = Served::start(app(SecurityHeaders::new().trust_forwarded_proto(true))).await;
    let res = served
        .one("GET / HTTP/1.1\nHost: t\nConnection: close\n\n", b"")
        .await;
    assert_eq!(res.status, 200);
    assert_eq!(res.header("content-security-policy"), Some(DEFAULT_CSP));
    assert_eq!(res.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(
        res.header("referrer-policy"),
        Some("strict-origin-when-cross-origin")
    );
    assert_eq!(res.header("x-frame-options"), Some("DENY"));
    assert_eq!(
        res.header("cross-origin-opener-policy"),
        Some("same-origin")
    );
    assert_eq!(res.header("strict-transport-security"), None);
    // Also on the framework's own answers.
    let res = served
        .one("GET /nope HTTP/1.1\nHost: t\nConnection: close\n\n", b"")
        .await;
    assert_eq!(res.status, 404);
    assert_eq!(res.header("x-content-type-options"), Some("nosniff"));
    // From a trusted TLS-terminating proxy.
    let res = served
        .one(
            "GET / HTTP/1.1\nHost: t\nX-Forwarded-Proto: https\nConnection: close\n\n",
            b"",
        )
        .await;
    assert_eq!(
        res.header("strict-transport-security"),
        Some("max-age=31536000; includeSubDomains")
    );
    // A route's own CSP wins.
    let res = served
        .one("GET /embed HTTP/1.1\nHost: t\nConnection: close\n\n", b"")
        .await;
    assert_eq!(
        res.header("content-security-policy"),
        Some("frame-ancestors https://partner.example")
    );
    served.stop().await;
}

#[tokio::test]
async fn forwarded_proto_should_be_ignored_unless_trusted() {
    let served = Served::start(app(SecurityHeaders::new())).await;
    let res = served
        .one(
            "GET / HTTP/1.1\nHost: t\nX-Forwarded-Proto: https\nConnection: close\n\n",
            b"",
        )
        .await;
    assert_eq!(res.header("strict-transport-security"), None);
    // Nor is a client's own `https` scheme (absolute-form target).
    let res = served
        .one(
            "GET https://t/ HTTP/1.1\nHost: t\nConnection: close\n\n",
            b"",
        )
        .await;
    assert_eq!(res.status, 200);
    assert_eq!(res.header("strict-transport-security"), None);
    served.stop().await;
}
