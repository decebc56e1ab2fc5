//! Cross-site request forgery protection: the request's origin
//! (`Sec-Fetch-Site`, `Origin`) and a token tied to the session, checked
//! for every unsafe method.
//!
//! [`Csrf`] is middleware installed after [`Sessions`](crate::session::Sessions)
//! (it keeps its secret in the session), or given to
//! [`Sessions::csrf`](crate::session::Sessions::csrf), which checks it in
//! the session middleware itself (one step of the chain fewer). Safe methods (`GET`, `HEAD`,
//! `OPTIONS`, `TRACE`; RFC 9110 §9.2.1) pass untouched. Any other request
//! must pass both checks, or is answered `403 Forbidden` with the reason:
//!
//! 1. **Origin.** With `Sec-Fetch-Site` (Fetch Metadata), `same-origin` and
//!    `none` (typed by the user) pass; `same-site` and `cross-site` pass
//!    only from an origin listed with [`Csrf::allow_origin`]. Without it,
//!    an `Origin` must name the request's own host (`Host`, or the URI's
//!    authority in HTTP/2) or a listed origin; `Origin: null` is refused.
//!    A request with neither header (not a browser, or a very old one)
//!    goes on to the token.
//! 2. **Token.** The `X-CSRF-Token` header, or the `csrf_token` field of
//!    an `application/x-www-form-urlencoded` body (read under the body
//!    limit and put back for the handler), must be a token from [`token`].
//!    Each token is the session's secret masked with fresh random bytes,
//!    so it differs in every response and a compressed page does not leak
//!    it (BREACH); any token of the session is valid until the session
//!    ends. Multipart forms carry the token in the header.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use celer::session::{MemoryStore, Sessions};
//! use celer::{App, Error, Request};
//!
//! async fn form(req: Request) -> Result<celer::response::Html<String>, Error> {
//!     let token = celer::csrf::token(&req).await?;
//!     Ok(celer::response::Html(format!(
//!         r#"<form method="post"><input type="hidden" name="csrf_token" value="{token}"></form>"#
//!     )))
//! }
//!
//! let mut app = App::new();
//! app.middleware(Sessions::new(MemoryStore::new()).cookie_name("sid").secure(false).layer());
//! app.middleware(celer::csrf::Csrf::new().layer());
//! app.get("/form", form);
//! app.post("/form", |_req: Request| async { "posted" });
//!
//! let client = celer::test::TestClient::new(app);
//! let page = client.get("/form").await;
//! let cookie = page.header("set-cookie").unwrap().split(';').next().unwrap().to_owned();
//! let html = page.text();
//! let token = html.split("value=\"").nth(1).unwrap().split('"').next().unwrap();
//! let ok = client.post("/form").header("cookie", cookie.as_str())
//!     .header("x-csrf-token", token).send().await;
//! assert_eq!(ok.text(), "posted");
//! let refused = client.post("/form").header("cookie", cookie.as_str()).send().await;
//! assert_eq!(refused.status(), 403);
//! # });
//! ```

use std::fmt;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use futures_util::future::BoxFuture;
use http::{HeaderMap, Method, StatusCode, header};
use subtle::ConstantTimeEq;

use crate::handler::{Dispatched, NextFuture};
use crate::response::{IntoResponse, Response};
use crate::session::Session;
use crate::{Error, Handler, Next, Request};

/// The session key under which the CSRF secret is kept.
pub const SESSION_KEY: &str = "_csrf";

/// Bytes of the secret (and of each mask): 32.
const SECRET_BYTES: usize = 32;

/// The default header carrying the token: `X-CSRF-Token`.
pub const DEFAULT_HEADER: &str = "x-csrf-token";

/// The default form field carrying the token: `csrf_token`.
pub const DEFAULT_FIELD: &str = "csrf_token";

/// CSRF middleware and its settings (see the [module](self) docs).
#[derive(Debug, Clone)]
pub struct Csrf {
    config: Arc<Config>,
}

#[derive(Debug)]
struct Config {
    allowed: Vec<String>,
    header: http::HeaderName,
    field: String,
}

impl Default for Csrf {
    fn default() -> Self {
        Csrf::new()
    }
}

impl Csrf {
    /// Same-origin requests only, the token in `X-CSRF-Token` or the
    /// `csrf_token` form field.
    pub fn new() -> Csrf {
        Csrf {
            config: Arc::new(Config {
                allowed: Vec::new(),
                header: http::HeaderName::from_static(DEFAULT_HEADER),
                field: DEFAULT_FIELD.into(),
            }),
        }
    }

    fn config_mut(&mut self) -> &mut Config {
        Arc::get_mut(&mut self.config).expect("Csrf is configured before layer()")
    }

    /// Trusts unsafe requests from another origin, written as browsers
    /// send it (`https://app.example.com`, `http://localhost:3000`); the
    /// token is still checked.
    pub fn allow_origin(mut self, origin: impl Into<String>) -> Csrf {
        let origin = origin.into().trim_end_matches('/').to_ascii_lowercase();
        self.config_mut().allowed.push(origin);
        self
    }

    /// The header carrying the token (default [`DEFAULT_HEADER`]).
    pub fn header_name(mut self, name: http::HeaderName) -> Csrf {
        self.config_mut().header = name;
        self
    }

    /// The form field carrying the token (default [`DEFAULT_FIELD`]).
    pub fn field_name(mut self, name: impl Into<String>) -> Csrf {
        self.config_mut().field = name.into();
        self
    }

    /// The middleware, for [`App::middleware`](crate::App::middleware),
    /// after the session middleware. A request of a safe method goes on
    /// as it came, at no cost beyond the method's check.
    pub fn layer(&self) -> impl Handler<(Request, Next)> + Clone {
        Layer {
            config: self.config.clone(),
        }
    }
}

/// The middleware [`Csrf::layer`] returns. A value of its own rather than
/// a closure so that the app takes the rest of the chain's future back
/// as it is: a closure's future is kept in place and then boxed by the
/// `next.run` before it, one allocation per request.
#[derive(Clone)]
struct Layer {
    config: Arc<Config>,
}

impl Layer {
    fn dispatch(&self, req: Request, next: Next) -> NextFuture {
        check(&self.config, req, next)
    }
}

impl Csrf {
    /// The checks, then the rest of the chain: what [`Csrf::layer`] does,
    /// for the session middleware that runs them in its own step and
    /// whose future holds the chain's (a safe method's handler future
    /// stays in place).
    pub(crate) fn check_in_place(&self, req: Request, next: Next) -> crate::handler::Dispatched {
        if is_safe(req.method()) {
            next.run_in_place(req)
        } else {
            NextFuture::boxed(Box::pin(run(self.config.clone(), req, next))).into()
        }
    }
}

/// RFC 9110 §9.2.1: safe methods change nothing and are not checked.
#[inline]
fn is_safe(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE
    )
}

/// A safe method's request goes on as it came; any other is checked.
fn check(config: &Arc<Config>, req: Request, next: Next) -> NextFuture {
    if is_safe(req.method()) {
        next.run(req)
    } else {
        NextFuture::boxed(Box::pin(run(config.clone(), req, next)))
    }
}

impl Handler<(Request, Next)> for Layer {
    fn call(&self, req: Request, next: Next) -> BoxFuture<'static, Response> {
        Box::pin(self.dispatch(req, next))
    }
}

impl crate::handler::sealed::Dispatch<(Request, Next)> for Layer {
    #[inline]
    fn call_next(&self, req: Request, next: Next) -> Dispatched {
        self.dispatch(req, next).into()
    }
}

/// The checks of a request of an unsafe method.
async fn run(config: Arc<Config>, mut req: Request, next: Next) -> Response {
    if let Err(refused) = check_origin(&config, req.headers(), req.uri()) {
        return refused.into_response();
    }
    match check_token(&config, &mut req).await {
        Ok(()) => next.run(req).await,
        Err(Refusal::Error(err)) => err.into_response(),
        Err(refused) => refused.into_response(),
    }
}

fn check_origin(config: &Config, headers: &HeaderMap, uri: &http::Uri) -> Result<(), Refusal> {
    let origin = headers
        .get(header::ORIGIN)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).to_ascii_lowercase());
    let allowed = |origin: &Option<String>| {
        origin
            .as_deref()
            .is_some_and(|o| config.allowed.iter().any(|a| a == o))
    };
    // Fetch Metadata (W3C), `Sec-Fetch-Site`.
    if let Some(site) = headers.get("sec-fetch-site") {
        let site = site.as_bytes();
        if site == b"same-origin" || site == b"none" || allowed(&origin) {
            return Ok(());
        }
        return Err(Refusal::CrossSite(
            String::from_utf8_lossy(site).chars().take(32).collect(),
        ));
    }
    let Some(origin) = origin else {
        return Ok(());
    };
    if origin == "null" {
        return Err(Refusal::NullOrigin);
    }
    if allowed(&Some(origin.clone())) {
        return Ok(());
    }
    // RFC 6454 §7: scheme "://" host [ ":" port ]; the host (and port)
    // must be the request's own.
    let own = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| uri.authority().map(|a| a.as_str()));
    let theirs = origin.split_once("://").map(|(_, authority)| authority);
    match (own, theirs) {
        (Some(own), Some(theirs)) if own.eq_ignore_ascii_case(theirs) => Ok(()),
        _ => Err(Refusal::CrossOrigin(origin.chars().take(128).collect())),
    }
}

async fn check_token(config: &Config, req: &mut Request) -> Result<(), Refusal> {
    let session = session_of(req).map_err(Refusal::Error)?;
    let mut sent = req
        .headers()
        .get(&config.header)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let is_form = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| {
            ct.split(';').next().is_some_and(|m| {
                m.trim()
                    .eq_ignore_ascii_case("application/x-www-form-urlencoded")
            })
        });
    if sent.is_none() && is_form {
        let body = req
            .bytes()
            .await
            .map_err(|rejection| Refusal::Error(rejection.into()))?;
        sent = form_urlencoded_field(&body, &config.field);
        req.restore_body(crate::Body::from(body));
    }
    let Some(sent) = sent else {
        return Err(Refusal::MissingToken);
    };
    let secret = session
        .get::<String>(SESSION_KEY)
        .await
        .map_err(Refusal::Error)?
        .and_then(|s| B64.decode(s).ok());
    let Some(secret) = secret else {
        return Err(Refusal::NoSessionToken);
    };
    if unmask(&sent).is_some_and(|sent| bool::from(sent.ct_eq(&secret))) {
        Ok(())
    } else {
        Err(Refusal::BadToken)
    }
}

/// The value of `field` in a urlencoded body.
fn form_urlencoded_field(body: &[u8], field: &str) -> Option<String> {
    serde_urlencoded::from_bytes::<Vec<(String, String)>>(body)
        .ok()?
        .into_iter()
        .find_map(|(name, value)| (name == field).then_some(value))
}

/// The request's session, its `Cookie` field read (a `431` over the
/// jar's limits).
fn session_of(req: &Request) -> Result<Session, Error> {
    let session = req.session().cloned().ok_or_else(|| {
        Error::internal("csrf needs the session: install Sessions::layer() before Csrf::layer()")
    })?;
    session.attach(|| crate::cookie::request_text_ref(req))?;
    Ok(session)
}

/// A token for the request's session, masked afresh: put it in forms (the
/// `csrf_token` field) or have scripts send it in `X-CSRF-Token`. The
/// session gets its secret the first time.
pub async fn token(req: &Request) -> Result<String, Error> {
    let session = session_of(req)?;
    let secret = match session
        .get::<String>(SESSION_KEY)
        .await?
        .and_then(|s| B64.decode(s).ok())
        .filter(|s| s.len() == SECRET_BYTES)
    {
        Some(secret) => secret,
        None => {
            let secret = random()?.to_vec();
            session.insert(SESSION_KEY, B64.encode(&secret)).await?;
            secret
        }
    };
    let mask = random()?;
    let mut out = Vec::with_capacity(2 * SECRET_BYTES);
    out.extend_from_slice(&mask);
    out.extend(mask.iter().zip(&secret).map(|(m, s)| m ^ s));
    Ok(B64.encode(out))
}

fn random() -> Result<[u8; SECRET_BYTES], Error> {
    let mut bytes = [0u8; SECRET_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| Error::internal(e.to_string()))?;
    Ok(bytes)
}

/// The secret inside a masked token.
fn unmask(token: &str) -> Option<Vec<u8>> {
    let raw = B64.decode(token.trim()).ok()?;
    if raw.len() != 2 * SECRET_BYTES {
        return None;
    }
    let (mask, masked) = raw.split_at(SECRET_BYTES);
    Some(mask.iter().zip(masked).map(|(m, x)| m ^ x).collect())
}

/// Why an unsafe request was refused: `403 Forbidden` with the reason as
/// the detail.
#[derive(Debug)]
enum Refusal {
    CrossSite(String),
    CrossOrigin(String),
    NullOrigin,
    MissingToken,
    NoSessionToken,
    BadToken,
    /// Not a refusal: the body could not be read, or no session.
    Error(Error),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::CrossSite(site) => {
                write!(f, "cross-site request refused (Sec-Fetch-Site: {site})")
            }
            Refusal::CrossOrigin(origin) => {
                write!(f, "cross-origin request refused (Origin: {origin})")
            }
            Refusal::NullOrigin => {
                f.write_str("request from an opaque origin refused (Origin: null)")
            }
            Refusal::MissingToken => {
                f.write_str("CSRF token missing (X-CSRF-Token header or csrf_token field)")
            }
            Refusal::NoSessionToken => {
                f.write_str("CSRF token not issued to this session (reload the form)")
            }
            Refusal::BadToken => f.write_str("CSRF token invalid for this session"),
            Refusal::Error(err) => write!(f, "{err}"),
        }
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        if let Refusal::Error(err) = self {
            return err.into_response();
        }
        let detail = self.to_string();
        tracing::debug!(target: "celer::csrf", reason = %detail, "refused");
        crate::error::generated(StatusCode::FORBIDDEN, detail.clone(), &detail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_differ_and_unmask_to_the_secret() {
        let secret = [5u8; SECRET_BYTES];
        let mask = [9u8; SECRET_BYTES];
        let mut raw = mask.to_vec();
        raw.extend(mask.iter().zip(&secret).map(|(m, s)| m ^ s));
        assert_eq!(unmask(&B64.encode(&raw)).unwrap(), secret);
        assert!(unmask("short").is_none());
        assert!(unmask(&B64.encode([0u8; 63])).is_none());
    }

    fn check(headers: &[(&str, &str)], allowed: &[&str]) -> Result<(), String> {
        let mut map = HeaderMap::new();
        for (k, v) in headers {
            map.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        let mut csrf = Csrf::new();
        for a in allowed {
            csrf = csrf.allow_origin(*a);
        }
        check_origin(&csrf.config, &map, &"/".parse().unwrap()).map_err(|r| r.to_string())
    }

    #[test]
    fn origin_rules() {
        assert!(check(&[], &[]).is_ok());
        assert!(check(&[("sec-fetch-site", "same-origin")], &[]).is_ok());
        assert!(check(&[("sec-fetch-site", "none")], &[]).is_ok());
        assert!(check(&[("sec-fetch-site", "same-site")], &[]).is_err());
        let cross = [
            ("sec-fetch-site", "cross-site"),
            ("origin", "https://a.example"),
        ];
        assert!(check(&cross, &[]).unwrap_err().contains("cross-site"));
        assert!(check(&cross, &["https://A.example/"]).is_ok());
        let host = ("host", "app.example:8080");
        assert!(check(&[host, ("origin", "http://app.example:8080")], &[]).is_ok());
        assert!(check(&[host, ("origin", "http://app.example")], &[]).is_err());
        assert!(check(&[host, ("origin", "http://evil.example:8080")], &[]).is_err());
        assert!(
            check(&[host, ("origin", "null")], &[])
                .unwrap_err()
                .contains("null")
        );
    }
}
