//! HTTP Digest authentication (RFC 7616): SHA-256 and MD5 (for old
//! clients), `qop=auth`, server nonces that expire (`stale=true`), `nc`
//! replay refused, and `userhash`.
//!
//! Nonces are `base64url(time ‖ random ‖ HMAC)`: a forged one is refused
//! without a lookup, an expired one is answered with `stale=true` so the
//! client retries with the fresh nonce without asking its user again
//! (§3.3). Every nonce issued is remembered with the highest `nc` used
//! with it (at most [`MAX_NONCES`], the oldest forgotten first); a
//! request whose `nc` is not above it is a replay and refused, one whose
//! nonce was forgotten is answered `stale=true`.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use futures_util::future::BoxFuture;
use hmac::{Hmac, Mac};
use http::header;
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq;

use super::{User, quote, unauthorized};
use crate::response::Response;
use crate::{Next, Request};

/// The most nonces remembered for replay checks: 10,000 (about 1 MiB).
pub const MAX_NONCES: usize = 10_000;

/// How long a nonce is accepted: 5 minutes; after it the answer is
/// `401` with `stale=true`.
pub const DEFAULT_NONCE_LIFETIME: Duration = Duration::from_secs(300);

/// The most parameters read from an `Authorization: Digest` field: 32.
pub const MAX_PARAMS: usize = 32;

/// A Digest hash algorithm (RFC 7616 §3.2; the `-sess` variants are not
/// offered).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    /// SHA-256, preferred and offered first.
    Sha256,
    /// MD5, for clients that know no other (RFC 2617's).
    Md5,
}

impl Algorithm {
    /// The name in challenges and credentials.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Sha256 => "SHA-256",
            Algorithm::Md5 => "MD5",
        }
    }

    /// `H(data)` in lowercase hex (§3.4.1).
    pub fn hex(self, data: &str) -> String {
        let bytes = match self {
            Algorithm::Sha256 => Sha256::digest(data.as_bytes()).to_vec(),
            Algorithm::Md5 => md5::Md5::digest(data.as_bytes()).to_vec(),
        };
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn parse(name: &str) -> Option<Algorithm> {
        if name.eq_ignore_ascii_case("SHA-256") {
            Some(Algorithm::Sha256)
        } else if name.eq_ignore_ascii_case("MD5") {
            Some(Algorithm::Md5)
        } else {
            None
        }
    }
}

/// `A1`'s hash, `H(username ":" realm ":" password)` (§3.4.2): what a
/// server stores instead of the password.
///
/// ```
/// use celer::auth::digest::{Algorithm, ha1};
/// // RFC 7616 §3.9.1's example, the MD5 response.
/// let alg = Algorithm::Md5;
/// let ha1 = ha1(alg, "Mufasa", "http-auth@example.org", "Circle of Life");
/// let ha2 = alg.hex("GET:/dir/index.html");
/// let nonce = "7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v";
/// let cnonce = "f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ";
/// let response = alg.hex(&format!("{ha1}:{nonce}:00000001:{cnonce}:auth:{ha2}"));
/// assert_eq!(response, "8ca523f5e9506fed4657c9700eebdbec");
/// ```
pub fn ha1(algorithm: Algorithm, user: &str, realm: &str, password: &str) -> String {
    algorithm.hex(&format!("{user}:{realm}:{password}"))
}

/// Where Digest authentication finds a user's `HA1`.
pub trait DigestCredentials: Send + Sync + 'static {
    /// [`ha1`] of `user` for `algorithm` in this realm, or `None`.
    fn ha1_for<'a>(&'a self, user: &'a str, algorithm: Algorithm) -> BoxFuture<'a, Option<String>>;

    /// The user whose `H(username ":" realm)` is `userhash` (§3.4.4), or
    /// `None` when unknown or not supported.
    fn user_for_userhash<'a>(
        &'a self,
        userhash: &'a str,
        algorithm: Algorithm,
    ) -> BoxFuture<'a, Option<String>>;
}

/// Users of one realm held in memory, as `HA1`s and user hashes.
#[derive(Debug, Clone)]
pub struct DigestUsers {
    realm: String,
    /// (user, algorithm) → HA1.
    ha1: HashMap<(String, &'static str), String>,
    /// (userhash, algorithm) → user.
    hashed: HashMap<(String, &'static str), String>,
}

impl DigestUsers {
    /// No users, in `realm` (the one given to [`Digest::new`]).
    pub fn new(realm: &str) -> DigestUsers {
        DigestUsers {
            realm: realm.to_owned(),
            ha1: HashMap::new(),
            hashed: HashMap::new(),
        }
    }

    /// Adds `user`: keeps its `HA1` for each algorithm, not the password.
    pub fn add(&mut self, user: &str, password: &str) -> &mut DigestUsers {
        for alg in [Algorithm::Sha256, Algorithm::Md5] {
            self.ha1.insert(
                (user.to_owned(), alg.name()),
                ha1(alg, user, &self.realm, password),
            );
            self.hashed.insert(
                (alg.hex(&format!("{user}:{}", self.realm)), alg.name()),
                user.to_owned(),
            );
        }
        self
    }
}

impl DigestCredentials for DigestUsers {
    fn ha1_for<'a>(&'a self, user: &'a str, algorithm: Algorithm) -> BoxFuture<'a, Option<String>> {
        let found = self.ha1.get(&(user.to_owned(), algorithm.name())).cloned();
        Box::pin(std::future::ready(found))
    }

    fn user_for_userhash<'a>(
        &'a self,
        userhash: &'a str,
        algorithm: Algorithm,
    ) -> BoxFuture<'a, Option<String>> {
        let found = self
            .hashed
            .get(&(userhash.to_ascii_lowercase(), algorithm.name()))
            .cloned();
        Box::pin(std::future::ready(found))
    }
}

/// Digest authentication middleware.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use celer::auth::digest::{Digest, DigestUsers};
/// let mut users = DigestUsers::new("api");
/// users.add("ada", "lovelace");
/// let mut app = celer::App::new();
/// app.middleware(Digest::new("api", users).layer());
/// app.get("/", |_req: celer::Request| async { "in" });
/// let res = celer::test::TestClient::new(app).get("/").await;
/// assert_eq!(res.status(), 401);
/// let challenges: Vec<_> = res.headers().get_all("www-authenticate").iter().collect();
/// assert!(challenges[0].to_str().unwrap().starts_with(r#"Digest realm="api", qop="auth", algorithm=SHA-256, nonce=""#));
/// assert!(challenges[1].to_str().unwrap().contains("algorithm=MD5"));
/// # });
/// ```
#[derive(Clone)]
pub struct Digest {
    inner: Arc<Inner>,
}

struct Inner {
    realm: String,
    algorithms: Vec<Algorithm>,
    users: Box<dyn DigestCredentials>,
    key: Hmac<Sha256>,
    opaque: String,
    lifetime: Duration,
    nonces: Mutex<Nonces>,
}

#[derive(Default)]
struct Nonces {
    /// Nonce → the highest `nc` accepted with it (0: none yet).
    last_nc: HashMap<String, u32>,
    /// Nonces in the order issued, for eviction.
    order: VecDeque<String>,
}

impl std::fmt::Debug for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Digest")
            .field("realm", &self.inner.realm)
            .field("algorithms", &self.inner.algorithms)
            .finish_non_exhaustive()
    }
}

impl Digest {
    /// Digest authentication for `realm`, offering SHA-256 then MD5.
    ///
    /// # Panics
    ///
    /// When the system's random generator fails (it makes the nonce key).
    pub fn new(realm: &str, users: impl DigestCredentials) -> Digest {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).expect("the system's random generator");
        let mut opaque = [0u8; 16];
        getrandom::fill(&mut opaque).expect("the system's random generator");
        Digest {
            inner: Arc::new(Inner {
                realm: realm.to_owned(),
                algorithms: vec![Algorithm::Sha256, Algorithm::Md5],
                users: Box::new(users),
                key: <Hmac<Sha256> as Mac>::new_from_slice(&key).expect("any key length"),
                opaque: B64.encode(opaque),
                lifetime: DEFAULT_NONCE_LIFETIME,
                nonces: Mutex::new(Nonces::default()),
            }),
        }
    }

    fn inner_mut(&mut self) -> &mut Inner {
        Arc::get_mut(&mut self.inner).expect("Digest is configured before layer()")
    }

    /// The algorithms offered, most preferred first (default SHA-256,
    /// MD5); credentials with another are refused.
    ///
    /// # Panics
    ///
    /// When `algorithms` is empty.
    pub fn algorithms(mut self, algorithms: &[Algorithm]) -> Digest {
        assert!(
            !algorithms.is_empty(),
            "Digest needs at least one algorithm"
        );
        self.inner_mut().algorithms = algorithms.to_vec();
        self
    }

    /// How long a nonce is accepted (default [`DEFAULT_NONCE_LIFETIME`]).
    pub fn nonce_lifetime(mut self, lifetime: Duration) -> Digest {
        self.inner_mut().lifetime = lifetime;
        self
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

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Inner {
    fn mac(&self, body: &[u8]) -> [u8; 16] {
        let mut mac = self.key.clone();
        mac.update(body);
        let full = mac.finalize().into_bytes();
        let mut out = [0u8; 16];
        out.copy_from_slice(&full[..16]);
        out
    }

    /// A fresh nonce, remembered for replay checks.
    fn issue(&self) -> String {
        let mut body = [0u8; 24];
        body[..8].copy_from_slice(&now_ms().to_be_bytes());
        let _ = getrandom::fill(&mut body[8..]);
        let mut raw = body.to_vec();
        raw.extend_from_slice(&self.mac(&body));
        let nonce = B64.encode(raw);
        let mut nonces = self.nonces.lock().unwrap_or_else(|p| p.into_inner());
        while nonces.last_nc.len() >= MAX_NONCES {
            let Some(oldest) = nonces.order.pop_front() else {
                break;
            };
            nonces.last_nc.remove(&oldest);
        }
        nonces.order.push_back(nonce.clone());
        nonces.last_nc.insert(nonce.clone(), 0);
        nonce
    }

    /// The challenges, one per algorithm, sharing one nonce.
    fn challenges(&self, stale: bool) -> Vec<String> {
        let nonce = self.issue();
        self.algorithms
            .iter()
            .map(|alg| {
                format!(
                    "Digest realm={}, qop=\"auth\", algorithm={}, nonce=\"{nonce}\", opaque=\"{}\", userhash=true{}",
                    quote(&self.realm),
                    alg.name(),
                    self.opaque,
                    if stale { ", stale=true" } else { "" }
                )
            })
            .collect()
    }

    /// Whether `nonce` is ours: `Ok(fresh)` when the MAC holds.
    fn check_nonce(&self, nonce: &str) -> Option<bool> {
        let raw = B64.decode(nonce).ok()?;
        if raw.len() != 40 {
            return None;
        }
        let (body, tag) = raw.split_at(24);
        if !bool::from(self.mac(body).ct_eq(tag)) {
            return None;
        }
        let issued = u64::from_be_bytes(body[..8].try_into().ok()?);
        Some(now_ms().saturating_sub(issued) <= self.lifetime.as_millis() as u64)
    }
}

/// The parameters of a `Digest` credentials field: `name=token` or
/// `name="quoted string"` separated by commas (RFC 9110 §11.2, §5.6.4).
fn parse_params(s: &str) -> Option<HashMap<String, String>> {
    let mut out = HashMap::new();
    let mut rest = s.trim_start();
    while !rest.is_empty() {
        if out.len() >= MAX_PARAMS {
            return None;
        }
        let eq = rest.find('=')?;
        let name = rest[..eq].trim().to_ascii_lowercase();
        rest = rest[eq + 1..].trim_start();
        let value;
        if let Some(quoted) = rest.strip_prefix('"') {
            let mut v = String::new();
            let mut chars = quoted.char_indices();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => v.push(chars.next()?.1),
                    '"' => {
                        end = Some(i + 1);
                        break;
                    }
                    c => v.push(c),
                }
            }
            value = v;
            rest = &quoted[end?..];
        } else {
            let end = rest.find(',').unwrap_or(rest.len());
            value = rest[..end].trim().to_owned();
            rest = &rest[end..];
        }
        out.insert(name, value);
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix(',') {
            rest = after.trim_start();
        } else if !rest.is_empty() {
            return None;
        }
    }
    Some(out)
}

enum Outcome {
    User(String),
    /// Refused: the reason, and whether the nonce was stale.
    Refused(&'static str, bool),
}

async fn verify(inner: &Inner, req: &Request) -> Outcome {
    let Some(value) = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    else {
        return Outcome::Refused("Digest credentials required", false);
    };
    let Some((scheme, rest)) = value.split_once(' ') else {
        return Outcome::Refused("malformed Authorization", false);
    };
    if !scheme.eq_ignore_ascii_case("digest") {
        return Outcome::Refused("Digest credentials required", false);
    }
    let Some(p) = parse_params(rest) else {
        return Outcome::Refused("malformed Digest credentials", false);
    };
    let get = |k: &str| p.get(k).map(String::as_str);
    // §3.4: algorithm defaults to MD5 when absent.
    let Some(alg) = Algorithm::parse(get("algorithm").unwrap_or("MD5")) else {
        return Outcome::Refused("Digest algorithm not offered", false);
    };
    if !inner.algorithms.contains(&alg) {
        return Outcome::Refused("Digest algorithm not offered", false);
    }
    let (Some(username), Some(realm), Some(nonce), Some(uri), Some(response)) = (
        get("username"),
        get("realm"),
        get("nonce"),
        get("uri"),
        get("response"),
    ) else {
        return Outcome::Refused("Digest credentials incomplete", false);
    };
    if realm != inner.realm {
        return Outcome::Refused("Digest realm mismatch", false);
    }
    // §3.4: qop=auth only; nc is 8 hex digits; cnonce is required with it.
    let (Some("auth"), Some(nc_text), Some(cnonce)) = (get("qop"), get("nc"), get("cnonce")) else {
        return Outcome::Refused("Digest needs qop=auth with nc and cnonce", false);
    };
    let Some(nc) = (nc_text.len() == 8)
        .then(|| u32::from_str_radix(nc_text, 16).ok())
        .flatten()
    else {
        return Outcome::Refused("Digest nc is not 8 hex digits", false);
    };
    // §3.4.6: the uri must be the request's target.
    let target = req.uri().path_and_query().map_or("/", |pq| pq.as_str());
    if uri != target {
        return Outcome::Refused("Digest uri does not match the request", false);
    }
    match inner.check_nonce(nonce) {
        None => return Outcome::Refused("unknown Digest nonce", false),
        Some(false) => return Outcome::Refused("stale Digest nonce", true),
        Some(true) => {}
    }
    // §3.4.4: with userhash=true the username is H(user ":" realm).
    let user = if get("userhash") == Some("true") {
        match inner.users.user_for_userhash(username, alg).await {
            Some(user) => user,
            None => return Outcome::Refused("wrong user or password", false),
        }
    } else {
        username.to_owned()
    };
    let Some(ha1) = inner.users.ha1_for(&user, alg).await else {
        return Outcome::Refused("wrong user or password", false);
    };
    let ha2 = alg.hex(&format!("{}:{uri}", req.method()));
    let expected = alg.hex(&format!("{ha1}:{nonce}:{nc_text}:{cnonce}:auth:{ha2}"));
    if !bool::from(
        expected
            .as_bytes()
            .ct_eq(response.to_ascii_lowercase().as_bytes()),
    ) {
        return Outcome::Refused("wrong user or password", false);
    }
    // §5.12 (replay): each nc of a nonce is used once, rising.
    let mut nonces = inner.nonces.lock().unwrap_or_else(|p| p.into_inner());
    match nonces.last_nc.get_mut(nonce) {
        None => Outcome::Refused("Digest nonce forgotten", true),
        Some(last) if nc <= *last => Outcome::Refused("Digest nc replayed", false),
        Some(last) => {
            *last = nc;
            Outcome::User(user)
        }
    }
}

async fn run(inner: Arc<Inner>, mut req: Request, next: Next) -> Response {
    match verify(&inner, &req).await {
        Outcome::User(user) => {
            req.extensions_mut().insert(User(user));
            next.run(req).await
        }
        Outcome::Refused(reason, stale) => unauthorized(&inner.challenges(stale), reason),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_7616_sha256_example() {
        // §3.9.1: the SHA-256 response for Mufasa.
        let alg = Algorithm::Sha256;
        let ha1 = ha1(alg, "Mufasa", "http-auth@example.org", "Circle of Life");
        let ha2 = alg.hex("GET:/dir/index.html");
        let response = alg.hex(&format!(
            "{ha1}:7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v:00000001:f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ:auth:{ha2}"
        ));
        assert_eq!(
            response,
            "753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1"
        );
    }

    #[test]
    fn nonce_table_is_bounded_and_forgets_the_oldest() {
        let digest = Digest::new("r", DigestUsers::new("r"));
        let inner = &digest.inner;
        let first = inner.issue();
        for _ in 0..MAX_NONCES {
            inner.issue();
        }
        let nonces = inner.nonces.lock().unwrap();
        assert_eq!(nonces.last_nc.len(), MAX_NONCES);
        assert!(!nonces.last_nc.contains_key(&first));
        // Still one of ours, still fresh: a request with it is answered
        // `stale=true` (see `verify`), never accepted.
        assert_eq!(inner.check_nonce(&first), Some(true));
    }

    #[test]
    fn params() {
        let p = parse_params(r#"username="Mu\"fasa", nc=00000001 , qop=auth,uri="/a,b""#).unwrap();
        assert_eq!(p["username"], "Mu\"fasa");
        assert_eq!(p["nc"], "00000001");
        assert_eq!(p["qop"], "auth");
        assert_eq!(p["uri"], "/a,b");
        assert!(parse_params(r#"a="unterminated"#).is_none());
        assert!(parse_params("novalue").is_none());
        let many = (0..40)
            .map(|i| format!("p{i}=1"))
            .collect::<Vec<_>>()
            .join(",");
        assert!(parse_params(&many).is_none());
    }
}
