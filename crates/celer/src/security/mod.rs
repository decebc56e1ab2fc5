//! Security headers: one middleware that adds the response fields that
//! turn on browsers' protections, with defaults that suit an app serving
//! its own pages, scripts and styles.
//!
//! | field | default |
//! |---|---|
//! | `Content-Security-Policy` | [`DEFAULT_CSP`]: own origin only, no plugins, no framing (`frame-ancestors 'none'`) |
//! | `X-Content-Type-Options` | `nosniff` |
//! | `Referrer-Policy` | `strict-origin-when-cross-origin` |
//! | `X-Frame-Options` | `DENY` (for browsers without `frame-ancestors`) |
//! | `Cross-Origin-Opener-Policy` | `same-origin` |
//! | `Strict-Transport-Security` | `max-age=31536000; includeSubDomains`, only over TLS (RFC 6797 §7.2) |
//!
//! A field the handler already set is left alone, so one route can loosen
//! its CSP.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use celer::security::SecurityHeaders;
//!
//! let mut app = celer::App::new();
//! app.middleware(SecurityHeaders::new().into_middleware());
//! app.get("/", |_req: celer::Request| async { "hi" });
//! let res = celer::test::TestClient::new(app).get("/").await;
//! assert_eq!(res.header("x-content-type-options"), Some("nosniff"));
//! assert!(res.header("content-security-policy").unwrap().contains("frame-ancestors 'none'"));
//! // Plain HTTP: no HSTS (a browser ignores it there anyway).
//! assert_eq!(res.header("strict-transport-security"), None);
//! # });
//! ```
//!
//! HSTS goes only on answers to requests that came over TLS, as the
//! engine saw the connection ([`Request::is_tls`]: a TLS listener, or a
//! FastCGI/SCGI front end reporting `HTTPS`), never on what the request
//! claims (its URI's scheme or HTTP/2 `:scheme` are the client's words).
//! Behind a TLS-terminating reverse proxy the app trusts, opt in to
//! `X-Forwarded-Proto: https` ([`SecurityHeaders::trust_forwarded_proto`]).

use std::sync::Arc;
use std::time::Duration;

use http::HeaderValue;
use http::header::{self, HeaderName};

use crate::handler::Handler;
use crate::{Next, Request, Response};

/// The default `Content-Security-Policy`: everything from the page's own
/// origin, no plugins, no `<base>` elsewhere, forms posting only to the
/// origin, and no framing by anyone.
pub const DEFAULT_CSP: &str = "default-src 'self'; base-uri 'self'; object-src 'none'; form-action 'self'; frame-ancestors 'none'";

/// The default HSTS `max-age`: one year.
pub const DEFAULT_HSTS_MAX_AGE: Duration = Duration::from_secs(365 * 24 * 3600);

/// The configuration of the security headers middleware; every setter
/// takes `None` to leave that field out.
#[derive(Debug, Clone)]
pub struct SecurityHeaders {
    fields: Vec<(HeaderName, HeaderValue)>,
    hsts: Option<HeaderValue>,
    forwarded_proto: bool,
}

impl Default for SecurityHeaders {
    fn default() -> Self {
        SecurityHeaders::new()
    }
}

fn value(v: &str) -> HeaderValue {
    HeaderValue::from_str(v).expect("a valid field value")
}

impl SecurityHeaders {
    /// The defaults in the table of the [module](self).
    pub fn new() -> SecurityHeaders {
        SecurityHeaders {
            fields: vec![
                (
                    header::CONTENT_SECURITY_POLICY,
                    HeaderValue::from_static(DEFAULT_CSP),
                ),
                (
                    header::X_CONTENT_TYPE_OPTIONS,
                    HeaderValue::from_static("nosniff"),
                ),
                (
                    header::REFERRER_POLICY,
                    HeaderValue::from_static("strict-origin-when-cross-origin"),
                ),
                (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
                (
                    HeaderName::from_static("cross-origin-opener-policy"),
                    HeaderValue::from_static("same-origin"),
                ),
            ],
            hsts: Some(hsts_value(DEFAULT_HSTS_MAX_AGE, true, false)),
            forwarded_proto: false,
        }
    }

    fn set(mut self, name: HeaderName, v: Option<&str>) -> SecurityHeaders {
        self.fields.retain(|(n, _)| *n != name);
        if let Some(v) = v {
            self.fields.push((name, value(v)));
        }
        self
    }

    /// The `Content-Security-Policy`. Panics on an invalid field value.
    pub fn content_security_policy(self, csp: Option<&str>) -> SecurityHeaders {
        self.set(header::CONTENT_SECURITY_POLICY, csp)
    }

    /// The `Referrer-Policy`.
    pub fn referrer_policy(self, policy: Option<&str>) -> SecurityHeaders {
        self.set(header::REFERRER_POLICY, policy)
    }

    /// The `X-Frame-Options` (keep it in step with the CSP's
    /// `frame-ancestors`).
    pub fn frame_options(self, options: Option<&str>) -> SecurityHeaders {
        self.set(header::X_FRAME_OPTIONS, options)
    }

    /// The `Cross-Origin-Opener-Policy`.
    pub fn cross_origin_opener_policy(self, policy: Option<&str>) -> SecurityHeaders {
        self.set(
            HeaderName::from_static("cross-origin-opener-policy"),
            policy,
        )
    }

    /// `X-Content-Type-Options: nosniff` or not.
    pub fn nosniff(self, on: bool) -> SecurityHeaders {
        self.set(header::X_CONTENT_TYPE_OPTIONS, on.then_some("nosniff"))
    }

    /// HSTS with this `max-age` (RFC 6797 §6.1), `includeSubDomains` and
    /// `preload` as asked; `None` never sends it.
    pub fn hsts(
        mut self,
        max_age: Option<Duration>,
        include_subdomains: bool,
        preload: bool,
    ) -> SecurityHeaders {
        self.hsts = max_age.map(|age| hsts_value(age, include_subdomains, preload));
        self
    }

    /// Also takes `X-Forwarded-Proto: https` as TLS: only behind a reverse
    /// proxy that terminates TLS and sets that field itself (a client can
    /// send any field). Default is false.
    pub fn trust_forwarded_proto(mut self, yes: bool) -> SecurityHeaders {
        self.forwarded_proto = yes;
        self
    }

    /// The middleware.
    pub fn into_middleware(self) -> impl Handler<(Request, Next)> + Clone {
        let config = Arc::new(self);
        move |req: Request, next: Next| {
            let config = config.clone();
            async move { config.handle(req, next).await }
        }
    }

    fn over_tls(&self, req: &Request) -> bool {
        req.is_tls()
            || (self.forwarded_proto
                && req
                    .headers()
                    .get("x-forwarded-proto")
                    .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"https")))
    }

    async fn handle(&self, req: Request, next: Next) -> Response {
        let tls = self.over_tls(&req);
        let mut res = next.run(req).await;
        let fields = res.headers_mut();
        for (name, value) in &self.fields {
            if !fields.contains_key(name) {
                fields.insert(name.clone(), value.clone());
            }
        }
        // RFC 6797 §7.2: not over plain HTTP.
        if let (true, Some(hsts)) = (tls, &self.hsts) {
            if !fields.contains_key(header::STRICT_TRANSPORT_SECURITY) {
                fields.insert(header::STRICT_TRANSPORT_SECURITY, hsts.clone());
            }
        }
        res
    }
}

fn hsts_value(max_age: Duration, include_subdomains: bool, preload: bool) -> HeaderValue {
    let mut v = format!("max-age={}", max_age.as_secs());
    if include_subdomains {
        v.push_str("; includeSubDomains");
    }
    if preload {
        v.push_str("; preload");
    }
    value(&v)
}
