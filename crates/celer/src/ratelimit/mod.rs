//! Rate limits: GCRA (the generic cell rate algorithm) per key — the
//! client's address, a header such as an API key, the route, or a function
//! of the request — answered with `429 Too Many Requests` (RFC 6585 §4),
//! `Retry-After` (RFC 9110 §10.2.3) and the `RateLimit-Policy` /
//! `RateLimit` fields of draft-ietf-httpapi-ratelimit-headers.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use std::time::Duration;
//! use celer::ratelimit::{Key, Quota, RateLimit};
//!
//! let mut app = celer::App::new();
//! // 2 requests a minute per API key (in bursts of up to 2).
//! let limit = RateLimit::new(Quota::new(2, Duration::from_secs(60)), Key::header("x-api-key"));
//! app.middleware(limit.into_middleware());
//! app.get("/", |_req: celer::Request| async { "ok" });
//! let client = celer::test::TestClient::new(app);
//!
//! let res = client.get("/").header("x-api-key", "k1").await;
//! assert_eq!(res.header("ratelimit-policy"), Some(r#""default";q=2;w=60"#));
//! assert_eq!(res.header("ratelimit"), Some(r#""default";r=1;t=30"#));
//! client.get("/").header("x-api-key", "k1").await;
//! let res = client.get("/").header("x-api-key", "k1").await;
//! assert_eq!(res.status(), 429);
//! assert_eq!(res.header("retry-after"), Some("30"));
//! // Another key has its own budget.
//! assert_eq!(client.get("/").header("x-api-key", "k2").await.status(), 200);
//! # });
//! ```
//!
//! The state lives in a [`Store`]; [`MemoryStore`] keeps it in the process,
//! bounded to [`MAX_KEYS`] keys (see its eviction rule).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use http::{HeaderValue, StatusCode, header};

use crate::handler::Handler;
use crate::{BoxError, Next, Request, Response};

/// The default bound on the keys a [`MemoryStore`] remembers: 100,000.
pub const MAX_KEYS: usize = 100_000;

/// `quota` requests per `window`, in bursts of up to `quota`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    quota: u32,
    window: Duration,
}

impl Quota {
    /// `quota` requests per `window`. Panics when either is zero.
    pub fn new(quota: u32, window: Duration) -> Quota {
        assert!(quota > 0, "a quota allows at least one request");
        assert!(!window.is_zero(), "a quota's window is longer than zero");
        Quota { quota, window }
    }

    /// The requests allowed per window.
    pub fn quota(&self) -> u32 {
        self.quota
    }

    /// The window.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// The emission interval: one request's share of the window.
    fn interval(&self) -> u128 {
        (self.window.as_nanos() / u128::from(self.quota)).max(1)
    }
}

/// A store's verdict on one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// Whether the request may go on.
    pub allowed: bool,
    /// Requests left in the window after this one.
    pub remaining: u32,
    /// Until the quota is whole again.
    pub reset: Duration,
    /// When refused: until one request is allowed again.
    pub retry_after: Duration,
}

/// GCRA on a theoretical arrival time `tat` (nanoseconds on the store's
/// clock): the decision and the new `tat`.
pub fn gcra(tat: Option<u128>, now: u128, quota: Quota) -> (Decision, Option<u128>) {
    let interval = quota.interval();
    let window = quota.window.as_nanos();
    // A burst of `quota`: a request may come `window - interval` before
    // its theoretical time.
    let tolerance = window - interval;
    let tat = tat.unwrap_or(now).max(now);
    if tat - now > tolerance {
        let retry = tat - now - tolerance;
        let decision = Decision {
            allowed: false,
            remaining: 0,
            reset: nanos(tat - now),
            retry_after: nanos(retry),
        };
        return (decision, None);
    }
    let new_tat = tat + interval;
    let used = new_tat - now;
    let remaining = (window.saturating_sub(used) / interval) as u32;
    let decision = Decision {
        allowed: true,
        remaining,
        reset: nanos(used),
        retry_after: Duration::ZERO,
    };
    (decision, Some(new_tat))
}

fn nanos(n: u128) -> Duration {
    Duration::from_nanos(u64::try_from(n).unwrap_or(u64::MAX))
}

/// Where rate-limit state lives: in this process ([`MemoryStore`]) or in
/// a shared service. `check` counts one request against `key`.
pub trait Store: Send + Sync + 'static {
    /// Counts one request for `key` under `quota` and says whether it may
    /// go on.
    fn check<'a>(&'a self, key: &'a str, quota: Quota)
    -> BoxFuture<'a, Result<Decision, BoxError>>;
}

/// Rate-limit state in memory, for one process. It remembers at most
/// `max_keys` keys: when full, keys whose quota is whole again are dropped
/// (forgetting them changes nothing), and if that frees too little, the
/// quarter of keys closest to whole — a client evicted that way starts
/// over with a whole quota.
pub struct MemoryStore {
    epoch: Instant,
    max_keys: usize,
    tats: Mutex<HashMap<Box<str>, u128>>,
}

impl fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("max_keys", &self.max_keys)
            .field("keys", &self.len())
            .finish()
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::new(MAX_KEYS)
    }
}

impl MemoryStore {
    /// A store of at most `max_keys` keys (at least 4).
    pub fn new(max_keys: usize) -> MemoryStore {
        MemoryStore {
            epoch: Instant::now(),
            max_keys: max_keys.max(4),
            tats: Mutex::new(HashMap::new()),
        }
    }

    /// The keys remembered now.
    pub fn len(&self) -> usize {
        self.tats.lock().map_or(0, |t| t.len())
    }

    /// Whether no key is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn check_now(&self, key: &str, quota: Quota, now: u128) -> Decision {
        let mut tats = self.tats.lock().unwrap_or_else(|e| e.into_inner());
        let (decision, new_tat) = gcra(tats.get(key).copied(), now, quota);
        if let Some(new_tat) = new_tat {
            if let Some(tat) = tats.get_mut(key) {
                *tat = new_tat;
            } else {
                if tats.len() >= self.max_keys {
                    evict(&mut tats, now, self.max_keys);
                }
                tats.insert(key.into(), new_tat);
            }
        }
        decision
    }
}

fn evict(tats: &mut HashMap<Box<str>, u128>, now: u128, max_keys: usize) {
    tats.retain(|_, tat| *tat > now);
    if tats.len() < max_keys - max_keys / 8 {
        return;
    }
    // Drop the quarter with the earliest theoretical arrival times.
    let mut all: Vec<u128> = tats.values().copied().collect();
    let cut = all.len() / 4;
    let (_, &mut threshold, _) = all.select_nth_unstable(cut);
    tats.retain(|_, tat| *tat > threshold);
}

impl Store for MemoryStore {
    fn check<'a>(
        &'a self,
        key: &'a str,
        quota: Quota,
    ) -> BoxFuture<'a, Result<Decision, BoxError>> {
        let now = self.epoch.elapsed().as_nanos();
        let decision = self.check_now(key, quota, now);
        Box::pin(async move { Ok(decision) })
    }
}

type KeyFn = dyn Fn(&Request) -> Option<String> + Send + Sync;

/// What requests share a budget.
#[derive(Clone)]
pub struct Key(Arc<KeyFn>);

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Key(..)")
    }
}

impl Key {
    /// The client's IP address ([`Request::remote_addr`]).
    pub fn client_addr() -> Key {
        Key(Arc::new(|req: &Request| {
            req.remote_addr().map(|a| a.ip().to_string())
        }))
    }

    /// The value of a request header, e.g. an API key; requests without
    /// it share one budget.
    pub fn header(name: &'static str) -> Key {
        Key(Arc::new(move |req: &Request| {
            req.headers()
                .get(name)
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        }))
    }

    /// The method and path: one budget per resource for everyone.
    pub fn route() -> Key {
        Key(Arc::new(|req: &Request| {
            Some(format!("{} {}", req.method(), req.path()))
        }))
    }

    /// Any function of the request; `None` puts the request in the shared
    /// budget of requests without a key.
    pub fn with(f: impl Fn(&Request) -> Option<String> + Send + Sync + 'static) -> Key {
        Key(Arc::new(f))
    }
}

/// A rate limit: a [`Quota`] per [`Key`] in a [`Store`].
#[derive(Clone)]
pub struct RateLimit {
    quota: Quota,
    key: Key,
    store: Arc<dyn Store>,
    policy: Arc<str>,
}

impl fmt::Debug for RateLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimit")
            .field("quota", &self.quota)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl RateLimit {
    /// `quota` per `key`, in a [`MemoryStore`] of [`MAX_KEYS`] keys,
    /// under the policy name `default`.
    pub fn new(quota: Quota, key: Key) -> RateLimit {
        RateLimit {
            quota,
            key,
            store: Arc::new(MemoryStore::default()),
            policy: "default".into(),
        }
    }

    /// Keeps the state in `store` instead.
    pub fn store(mut self, store: impl Store) -> RateLimit {
        self.store = Arc::new(store);
        self
    }

    /// The policy's name in the `RateLimit-Policy` and `RateLimit` fields
    /// (an sf-string: printable ASCII without `"` and `\`). Panics
    /// otherwise.
    pub fn policy(mut self, name: &str) -> RateLimit {
        assert!(
            name.bytes()
                .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\'),
            "a policy name is printable ASCII without quotes or backslashes"
        );
        self.policy = name.into();
        self
    }

    /// The middleware: `429` with `Retry-After` past the quota, the
    /// `RateLimit-Policy` and `RateLimit` fields on every answer. A store
    /// that fails lets the request through (logged at WARN).
    pub fn into_middleware(self) -> impl Handler<(Request, Next)> + Clone {
        let limit = Arc::new(self);
        move |req: Request, next: Next| {
            let limit = limit.clone();
            async move { limit.handle(req, next).await }
        }
    }

    async fn handle(&self, req: Request, next: Next) -> Response {
        let key = (self.key.0)(&req).unwrap_or_default();
        let decision = match self.store.check(&key, self.quota).await {
            Ok(decision) => decision,
            Err(err) => {
                tracing::warn!(target: "celer::ratelimit", error = %err, "rate-limit store failed; request let through");
                return next.run(req).await;
            }
        };
        let mut res = if decision.allowed {
            next.run(req).await
        } else {
            let mut res = crate::error::generated(
                StatusCode::TOO_MANY_REQUESTS,
                "too many requests",
                "too many requests: retry after the time in Retry-After",
            );
            res.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from(ceil_secs(decision.retry_after)),
            );
            res
        };
        let fields = res.headers_mut();
        let policy = format!(
            "\"{}\";q={};w={}",
            self.policy,
            self.quota.quota,
            ceil_secs(self.quota.window)
        );
        let state = format!(
            "\"{}\";r={};t={}",
            self.policy,
            decision.remaining,
            ceil_secs(decision.reset)
        );
        if let Ok(v) = HeaderValue::from_str(&policy) {
            fields.insert("ratelimit-policy", v);
        }
        if let Ok(v) = HeaderValue::from_str(&state) {
            fields.insert("ratelimit", v);
        }
        res
    }
}

fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u128 = 1_000_000_000;

    #[test]
    fn gcra_should_allow_a_burst_then_one_per_interval() {
        let quota = Quota::new(3, Duration::from_secs(3));
        let mut tat = None;
        for left in [2, 1, 0] {
            let (d, t) = gcra(tat, 0, quota);
            assert!(d.allowed);
            assert_eq!(d.remaining, left);
            tat = t;
        }
        let (d, t) = gcra(tat, 0, quota);
        assert!(!d.allowed && t.is_none());
        assert_eq!(d.retry_after, Duration::from_secs(1));
        let (d, _) = gcra(tat, S, quota);
        assert!(d.allowed);
        assert_eq!(d.remaining, 0);
    }

    #[test]
    fn the_memory_store_should_stay_bounded() {
        let store = MemoryStore::new(100);
        let quota = Quota::new(5, Duration::from_secs(60));
        for i in 0..10_000 {
            store.check_now(&i.to_string(), quota, i);
            assert!(store.len() <= 100);
        }
        // Keys whose quota is whole again go first.
        let store = MemoryStore::new(8);
        for i in 0..8 {
            store.check_now(&i.to_string(), quota, 0);
        }
        store.check_now("late", quota, 3600 * S);
        assert_eq!(store.len(), 1);
    }
}
