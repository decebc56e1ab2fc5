//! HTTP Basic authentication (RFC 7617) with passwords checked against
//! Argon2 hashes (PHC strings, RFC 9106) in constant time.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use futures_util::future::BoxFuture;
use http::header;
use tokio::sync::Semaphore;

use super::{User, quote, unauthorized};
use crate::response::Response;
use crate::{Error, Next, Request};

/// The most Argon2 checks run at once per [`Basic`]: 4. Each takes the
/// hash's memory (19 MiB with the default parameters) on a blocking
/// thread; more requests wait their turn, so memory stays bounded however
/// many clients send passwords.
pub const MAX_CONCURRENT_HASHES: usize = 4;

/// Where Basic authentication finds a user's password hash.
pub trait PasswordHashes: Send + Sync + 'static {
    /// The Argon2 PHC string (`$argon2id$v=19$m=…`) of `user`, or `None`
    /// for an unknown user.
    fn hash_for<'a>(&'a self, user: &'a str) -> BoxFuture<'a, Option<String>>;
}

/// Users and password hashes held in memory.
///
/// ```
/// let mut users = celer::auth::basic::Users::new();
/// users.add("ada", &celer::auth::basic::hash_password("lovelace").unwrap());
/// ```
#[derive(Debug, Default, Clone)]
pub struct Users {
    hashes: HashMap<String, String>,
}

impl Users {
    /// No users.
    pub fn new() -> Users {
        Users::default()
    }

    /// Adds `user` with a PHC hash (from [`hash_password`] or any Argon2
    /// tool).
    pub fn add(&mut self, user: impl Into<String>, hash: &str) -> &mut Users {
        self.hashes.insert(user.into(), hash.to_owned());
        self
    }
}

impl PasswordHashes for Users {
    fn hash_for<'a>(&'a self, user: &'a str) -> BoxFuture<'a, Option<String>> {
        Box::pin(std::future::ready(self.hashes.get(user).cloned()))
    }
}

/// An Argon2id hash of `password` with the crate's default parameters
/// (RFC 9106's second recommended option: m = 19 MiB, t = 2, p = 1) and a
/// fresh salt, as a PHC string.
pub fn hash_password(password: &str) -> Result<String, Error> {
    let mut salt = [0u8; 16];
    getrandom::fill(&mut salt).map_err(|e| Error::internal(e.to_string()))?;
    let salt = SaltString::encode_b64(&salt).map_err(|e| Error::internal(e.to_string()))?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|e| Error::internal(e.to_string()))
}

/// A hash checked for unknown users, so that they take as long as known
/// ones.
fn dummy_hash() -> &'static str {
    static DUMMY: OnceLock<String> = OnceLock::new();
    DUMMY.get_or_init(|| hash_password("celer-dummy-password").unwrap_or_default())
}

/// Basic authentication middleware.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use celer::auth::basic::{Basic, Users};
/// use celer::auth::User;
///
/// let mut users = Users::new();
/// // The hash of "lovelace" with low-cost parameters for the example;
/// // use `hash_password` in an app.
/// users.add("ada", "$argon2id$v=19$m=8,t=1,p=1$c2FsdHNhbHRzYWx0c2FsdA$AwJjHClrXLDZ+IOrfNSjOLo638v0JC1ANFg3l2Cn/fI");
/// let mut app = celer::App::new();
/// app.middleware(Basic::new("admin area", users).layer());
/// app.get("/", |req: celer::Request| async move {
///     format!("hi {}", req.extensions().get::<User>().unwrap().0)
/// });
/// let client = celer::test::TestClient::new(app);
/// let res = client.get("/").await;
/// assert_eq!(res.status(), 401);
/// assert_eq!(res.header("www-authenticate"), Some(r#"Basic realm="admin area", charset="UTF-8""#));
/// // "ada:lovelace" in base64
/// let res = client.get("/").header("authorization", "Basic YWRhOmxvdmVsYWNl").send().await;
/// assert_eq!(res.text(), "hi ada");
/// # });
/// ```
#[derive(Clone)]
pub struct Basic {
    inner: Arc<Inner>,
}

struct Inner {
    challenge: String,
    users: Box<dyn PasswordHashes>,
    hashing: Semaphore,
}

impl std::fmt::Debug for Basic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Basic")
            .field("challenge", &self.inner.challenge)
            .finish_non_exhaustive()
    }
}

impl Basic {
    /// Basic authentication for `realm` against `users`' hashes.
    pub fn new(realm: &str, users: impl PasswordHashes) -> Basic {
        Basic {
            inner: Arc::new(Inner {
                // RFC 7617 §2.1: `charset="UTF-8"` says user-ids and
                // passwords are sent as UTF-8.
                challenge: format!("Basic realm={}, charset=\"UTF-8\"", quote(realm)),
                users: Box::new(users),
                hashing: Semaphore::new(MAX_CONCURRENT_HASHES),
            }),
        }
    }

    /// The middleware, for [`App::middleware`](crate::App::middleware).
    pub fn layer(
        &self,
    ) -> impl Fn(Request, Next) -> BoxFuture<'static, Response> + Clone + Send + Sync + 'static
    {
        let inner = self.inner.clone();
        move |req, next| Box::pin(run(inner.clone(), req, next))
    }
}

/// The user-id and password of an `Authorization: Basic` field (RFC 7617
/// §2: base64 of `user-id ":" password`; the user-id holds no colon).
fn credentials(req: &Request) -> Option<(String, String)> {
    let value = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = STANDARD.decode(token.trim()).ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (user, password) = decoded.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

async fn run(inner: Arc<Inner>, mut req: Request, next: Next) -> Response {
    let challenge = std::slice::from_ref(&inner.challenge);
    let Some((user, password)) = credentials(&req) else {
        return unauthorized(challenge, "Basic credentials required");
    };
    let known = inner.users.hash_for(&user).await;
    let hash = known.clone().unwrap_or_else(|| dummy_hash().to_owned());
    let Ok(_permit) = inner.hashing.acquire().await else {
        return unauthorized(challenge, "Basic credentials required");
    };
    // Argon2 is deliberately slow: off the runtime's threads.
    let verified = tokio::task::spawn_blocking(move || {
        PasswordHash::new(&hash).is_ok_and(|parsed| {
            Argon2::default()
                .verify_password(password.as_bytes(), &parsed)
                .is_ok()
        })
    })
    .await
    .unwrap_or(false);
    if verified && known.is_some() {
        req.extensions_mut().insert(User(user));
        next.run(req).await
    } else {
        unauthorized(challenge, "wrong user or password")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cheap hash for tests (m = 8 KiB, t = 1).
    pub(crate) fn cheap_hash(password: &str) -> String {
        let params = argon2::Params::new(8, 1, 1, None).unwrap();
        let argon = Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params);
        let salt = SaltString::encode_b64(b"saltsaltsaltsalt").unwrap();
        argon
            .hash_password(password.as_bytes(), &salt)
            .unwrap()
            .to_string()
    }

    #[test]
    fn cheap_hash_verifies_with_its_own_parameters() {
        let hash = cheap_hash("lovelace");
        let parsed = PasswordHash::new(&hash).unwrap();
        assert!(
            Argon2::default()
                .verify_password(b"lovelace", &parsed)
                .is_ok()
        );
        assert!(
            Argon2::default()
                .verify_password(b"Lovelace", &parsed)
                .is_err()
        );
    }
}
