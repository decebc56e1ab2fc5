//! HTTP authentication: Basic (RFC 7617) against Argon2 hashes, Digest
//! (RFC 7616: SHA-256 and MD5, `qop=auth`, expiring nonces, `nc` replay
//! refused, `userhash`), and bearer API keys (RFC 6750) behind a trait.
//!
//! Each scheme is middleware ([`basic::Basic::layer`],
//! [`digest::Digest::layer`], [`bearer`]); a request that passes carries
//! the user in its extensions as [`User`]; one that does not is answered
//! `401 Unauthorized` with the scheme's `WWW-Authenticate` challenge (RFC
//! 9110 §11.6.1), and the handler is not called.
//!
//! | limit | default |
//! |---|---|
//! | [`basic::MAX_CONCURRENT_HASHES`] | 4 Argon2 checks at once (each takes the hash's memory) |
//! | [`digest::MAX_NONCES`] | 10,000 nonces tracked for `nc` replay |
//! | [`digest::DEFAULT_NONCE_LIFETIME`] | 5 minutes, then `stale=true` |

pub mod basic;
pub mod digest;

use std::sync::Arc;

use futures_util::future::BoxFuture;
use http::{HeaderValue, StatusCode, header};

use crate::response::Response;
use crate::{Next, Request};

/// The authenticated user, in the request's extensions after an
/// authentication middleware let it pass: `req.extensions().get::<User>()`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User(pub String);

/// A `401` with the given challenges, one `WWW-Authenticate` field each.
pub(crate) fn unauthorized(challenges: &[String], detail: &str) -> Response {
    let mut res = crate::error::generated(StatusCode::UNAUTHORIZED, detail.to_owned(), detail);
    for challenge in challenges {
        if let Ok(value) = HeaderValue::from_str(challenge) {
            res.headers_mut().append(header::WWW_AUTHENTICATE, value);
        }
    }
    res
}

/// RFC 9110 §5.6.4 `quoted-string` of `s` (with `"` and `\` escaped).
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// API keys for bearer authentication: the application's lookup (a
/// database, the task API's key table). Implementations should compare
/// keys in constant time or look up a hash of the key.
pub trait ApiKeys: Send + Sync + 'static {
    /// The user a key belongs to, or `None` for an unknown or revoked key.
    fn user_for_key<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Option<String>>;

    /// What the lookup found, for stores that can tell a revoked key from
    /// an unknown one, or fail for a while. The default asks
    /// [`user_for_key`](ApiKeys::user_for_key): valid or unknown.
    fn check_key<'a>(&'a self, key: &'a str) -> BoxFuture<'a, KeyCheck> {
        Box::pin(async move {
            match self.user_for_key(key).await {
                Some(user) => KeyCheck::Valid(user),
                None => KeyCheck::Unknown,
            }
        })
    }
}

/// The outcome of [`ApiKeys::check_key`], and how [`bearer`] answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyCheck {
    /// A live key of this user: the request goes on.
    Valid(String),
    /// No such key: `401` with `error="invalid_token"`.
    Unknown,
    /// A key that was revoked: `403`. The server knows the credentials
    /// and refuses them (RFC 9110 §15.5.4); sending them again cannot help.
    Revoked,
    /// The lookup cannot be made now (its store is busy): `503` with
    /// `Retry-After: 1`.
    Unavailable,
}

/// Middleware accepting `Authorization: Bearer <key>` (RFC 6750 §2.1)
/// for a key `keys` knows; otherwise `401` with
/// `WWW-Authenticate: Bearer realm="…"` (and `error="invalid_token"`
/// when a key was sent, §3.1). A key [`ApiKeys::check_key`] reports
/// revoked is answered `403`, a lookup that cannot be made now `503` with
/// `Retry-After`.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use celer::auth::{ApiKeys, User, bearer};
/// use futures_util::future::BoxFuture;
///
/// struct Keys;
/// impl ApiKeys for Keys {
///     fn user_for_key<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Option<String>> {
///         Box::pin(async move { (key == "k-123").then(|| "ci-bot".to_owned()) })
///     }
/// }
///
/// let mut app = celer::App::new();
/// app.middleware(bearer("api", Keys));
/// app.get("/", |req: celer::Request| async move {
///     req.extensions().get::<User>().unwrap().0.clone()
/// });
/// let client = celer::test::TestClient::new(app);
/// let res = client.get("/").header("authorization", "Bearer k-123").send().await;
/// assert_eq!(res.text(), "ci-bot");
/// let res = client.get("/").header("authorization", "Bearer nope").send().await;
/// assert_eq!(res.status(), 401);
/// assert_eq!(res.header("www-authenticate"), Some(r#"Bearer realm="api", error="invalid_token""#));
/// # });
/// ```
pub fn bearer(
    realm: &str,
    keys: impl ApiKeys,
) -> impl Fn(Request, Next) -> BoxFuture<'static, Response> + Clone + Send + Sync + 'static {
    let keys: Arc<dyn ApiKeys> = Arc::new(keys);
    let realm: Arc<str> = quote(realm).into();
    move |mut req: Request, next: Next| {
        let keys = keys.clone();
        let realm = realm.clone();
        Box::pin(async move {
            let sent = req
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| {
                    let (scheme, token) = v.split_once(' ')?;
                    // RFC 9110 §11.1: the scheme is case-insensitive.
                    scheme
                        .eq_ignore_ascii_case("bearer")
                        .then(|| token.trim().to_owned())
                });
            let Some(key) = sent else {
                return unauthorized(&[format!("Bearer realm={realm}")], "bearer token required");
            };
            match keys.check_key(&key).await {
                KeyCheck::Valid(user) => {
                    req.extensions_mut().insert(User(user));
                    next.run(req).await
                }
                KeyCheck::Unknown => unauthorized(
                    &[format!("Bearer realm={realm}, error=\"invalid_token\"")],
                    "unknown or revoked API key",
                ),
                KeyCheck::Revoked => {
                    let mut res = unauthorized(
                        &[format!("Bearer realm={realm}, error=\"invalid_token\"")],
                        "revoked API key",
                    );
                    *res.status_mut() = StatusCode::FORBIDDEN;
                    res
                }
                KeyCheck::Unavailable => {
                    let detail = "API keys cannot be checked now";
                    let mut res = crate::error::generated(
                        StatusCode::SERVICE_UNAVAILABLE,
                        detail.to_owned(),
                        detail,
                    );
                    res.headers_mut()
                        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                    res
                }
            }
        })
    }
}
