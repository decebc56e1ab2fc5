//! Micro-cache middleware: successful GET and HEAD responses of a route are
//! kept for a short time, and concurrent misses call the handler once.
//!
//! A micro-cache is the front-line cache of a busy dynamic page: with a TTL
//! of one second the handler runs at most about once a second per URL,
//! however many clients ask, and they all get the same answer.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use std::time::Duration;
//! use celer::middleware::cache::MicroCache;
//! use celer::{App, Request};
//! use tower::ServiceExt;
//!
//! let cache = MicroCache::new(Duration::from_secs(1))
//!     .stale_while_revalidate(Duration::from_secs(10));
//! let mut app = App::new();
//! app.get("/front", |_req: Request| async { "expensive" })
//!     .middleware(cache.clone());
//!
//! for _ in 0..3 {
//!     let req = http::Request::get("/front").body(celer::Body::empty()).unwrap();
//!     let res = app.clone().oneshot(req).await.unwrap();
//!     assert_eq!(res.status(), 200);
//! }
//! assert_eq!(cache.stats().misses, 1);
//! assert_eq!(cache.stats().hits, 2);
//! # });
//! ```
//!
//! The rules:
//!
//! - **Key.** Path and query, plus the values of the request fields named
//!   in the response's `Vary`; GET and HEAD share entries (a HEAD miss asks
//!   the handler for GET and answers with its headers). Requests with
//!   `Authorization` or `Range` pass through, as do other methods.
//! - **What is stored.** Statuses cacheable by default (RFC 9111 §4.2.2:
//!   200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501) without
//!   `Set-Cookie`, `Vary: *` or `Cache-Control` `private`, `no-store` or
//!   `no-cache`, whose body fits [`MicroCache::max_entry_bytes`].
//!   A larger body is streamed through uncached: at most the limit is held,
//!   never the whole body.
//! - **Freshness.** An entry is fresh for the route's TTL, whatever the
//!   response's own `Cache-Control` lifetime, and answers carry `Age`.
//!   A request whose `If-None-Match` matches a cached 200's `ETag` gets
//!   `304 Not Modified` from the entry; the handler always sees
//!   unconditional requests, so what it answers can serve everyone.
//!   With [`MicroCache::stale_while_revalidate`], an entry past its TTL is
//!   still served for that long while one background request refreshes it.
//! - **Coalescing.** While a miss is in flight, other requests for the same
//!   key wait for it instead of calling the handler; if the response turns
//!   out uncacheable, each of them calls the handler, and if the first
//!   request is cancelled, one of the waiters takes over.
//! - **Bound.** All clones of a `MicroCache` share one store bounded by
//!   [`MicroCache::max_bytes`]; the least recently used entries go first.

mod store;

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::future::BoxFuture;
use http::header::{
    AGE, AUTHORIZATION, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_LOCATION, DATE, ETAG, EXPIRES,
    HeaderMap, HeaderName, HeaderValue, IF_MODIFIED_SINCE, IF_NONE_MATCH, RANGE, SET_COOKIE, VARY,
};
use http::{Method, StatusCode};
use http_body::{Body as _, Frame, SizeHint};
use http_body_util::BodyExt as _;
use tokio::sync::watch;
use tokio::time::Instant;

use self::store::{Entry, Key, Outcome, Store, varied_values};
use crate::{Body, BoxError, Handler, Next, Request, Response};

pub use self::store::CacheStats;

/// Default bound of a cache's store: 64 MiB.
pub const DEFAULT_MAX_BYTES: usize = 64 * 1024 * 1024;

/// Default largest body stored: 1 MiB.
pub const DEFAULT_MAX_ENTRY_BYTES: usize = 1024 * 1024;

/// Most `Vary` fields a cached response may name; one naming more is not
/// stored (each is part of the key). Default is 8.
pub const MAX_VARY_FIELDS: usize = 8;

/// Micro-cache middleware; see the [module documentation](self).
#[derive(Clone)]
pub struct MicroCache {
    config: Arc<Config>,
    store: Arc<Mutex<Store>>,
}

#[derive(Clone)]
struct Config {
    ttl: Duration,
    stale: Duration,
    max_entry_bytes: usize,
}

/// What a request does after looking in the store.
enum Action {
    Hit(Arc<Entry>),
    Refresh(Arc<Entry>, Leader),
    Wait(watch::Receiver<Option<Outcome>>),
    Lead(Leader),
}

/// The request that calls the handler for a key; others wait on it.
/// Dropped without [`Leader::finish`], it lets the waiters retry.
struct Leader {
    store: Arc<Mutex<Store>>,
    key: Key,
    id: u64,
    tx: Option<watch::Sender<Option<Outcome>>>,
}

// ===== impl MicroCache =====

impl MicroCache {
    /// A cache whose entries are fresh for `ttl`.
    pub fn new(ttl: Duration) -> MicroCache {
        MicroCache {
            config: Arc::new(Config {
                ttl,
                stale: Duration::ZERO,
                max_entry_bytes: DEFAULT_MAX_ENTRY_BYTES,
            }),
            store: Arc::new(Mutex::new(Store::new(DEFAULT_MAX_BYTES))),
        }
    }

    /// Sets how long entries are fresh. Only this handle and its later
    /// clones use the new TTL; the store stays shared.
    ///
    /// Default is the TTL given to [`MicroCache::new`].
    pub fn ttl(mut self, ttl: Duration) -> Self {
        Arc::make_mut(&mut self.config).ttl = ttl;
        self
    }

    /// Serves an entry for up to `window` past its TTL while one
    /// background request refreshes it (RFC 5861's stale-while-revalidate).
    ///
    /// Default is zero: an expired entry is a miss.
    pub fn stale_while_revalidate(mut self, window: Duration) -> Self {
        Arc::make_mut(&mut self.config).stale = window;
        self
    }

    /// Sets the largest body stored, in bytes; larger bodies are streamed
    /// to the client uncached, holding at most this many bytes.
    ///
    /// Default is [`DEFAULT_MAX_ENTRY_BYTES`], 1 MiB.
    pub fn max_entry_bytes(mut self, bytes: usize) -> Self {
        Arc::make_mut(&mut self.config).max_entry_bytes = bytes;
        self
    }

    /// Sets the bound of the store shared by this cache's clones, in bytes
    /// (bodies, headers and keys); least recently used entries are evicted
    /// to stay under it.
    ///
    /// Default is [`DEFAULT_MAX_BYTES`], 64 MiB.
    pub fn max_bytes(self, bytes: usize) -> Self {
        self.lock().max_bytes = bytes;
        self
    }

    /// The store's counters.
    pub fn stats(&self) -> CacheStats {
        self.lock().stats
    }

    fn lock(&self) -> MutexGuard<'_, Store> {
        lock(&self.store)
    }

    async fn run(self, req: Request, next: Next) -> Response {
        let method = req.method().clone();
        let bypass = (method != Method::GET && method != Method::HEAD)
            || req.headers().contains_key(AUTHORIZATION)
            || req.headers().contains_key(RANGE);
        if bypass {
            return next.run(req).await;
        }
        let is_head = method == Method::HEAD;
        let url: Box<str> = req
            .uri()
            .path_and_query()
            .map_or_else(|| req.path().into(), |pq| pq.as_str().into());
        loop {
            match self.look(&url, req.headers()) {
                Action::Hit(entry) => return respond(&entry, is_head, req.headers()),
                Action::Refresh(entry, leader) => {
                    let res = respond(&entry, is_head, req.headers());
                    let refresh = self.clone().fetch(url.clone(), req, next, leader);
                    tokio::spawn(refresh);
                    return res;
                }
                Action::Lead(leader) => {
                    let res = self.fetch(url, req, next, leader).await;
                    return if is_head { strip(res) } else { res };
                }
                Action::Wait(mut rx) => {
                    let outcome = match rx.changed().await {
                        Ok(()) => rx.borrow_and_update().clone(),
                        // The leader was cancelled: look again.
                        Err(_) => None,
                    };
                    match outcome {
                        Some(Outcome::Cached(entry))
                            if entry.varied == varied_values(&entry.vary, req.headers()) =>
                        {
                            return respond(&entry, is_head, req.headers());
                        }
                        Some(Outcome::Uncacheable) => return next.run(req).await,
                        // Cancelled, or cached for other field values.
                        _ => continue,
                    }
                }
            }
        }
    }

    /// Looks `url` up for a request with `headers`, deciding what to do.
    fn look(&self, url: &str, headers: &HeaderMap) -> Action {
        let now = Instant::now();
        let mut store = self.lock();
        let key = store.key(url, headers);
        if let Some(entry) = store.get(&key) {
            let age = now.saturating_duration_since(entry.stored);
            if age < self.config.ttl {
                store.stats.hits += 1;
                return Action::Hit(entry);
            }
            if age < self.config.ttl + self.config.stale {
                store.stats.stale_hits += 1;
                if store.inflight.contains_key(&key)
                    || tokio::runtime::Handle::try_current().is_err()
                {
                    return Action::Hit(entry);
                }
                store.stats.refreshes += 1;
                let leader = Leader::new(&self.store, &mut store, key);
                return Action::Refresh(entry, leader);
            }
            store.remove(&key);
        }
        if let Some((rx, _)) = store.inflight.get(&key) {
            let rx = rx.clone();
            store.stats.coalesced += 1;
            return Action::Wait(rx);
        }
        store.stats.misses += 1;
        Action::Lead(Leader::new(&self.store, &mut store, key))
    }

    /// Calls the handler as GET, stores what can be stored, and tells the
    /// waiters.
    async fn fetch(self, url: Box<str>, mut req: Request, next: Next, leader: Leader) -> Response {
        // The entry serves GET and HEAD alike, so it needs the content, and
        // every later condition, so it needs the full response: the
        // conditions of this request are evaluated on the entry.
        *req.method_mut() = Method::GET;
        let headers = req.headers().clone();
        req.headers_mut().remove(IF_NONE_MATCH);
        req.headers_mut().remove(IF_MODIFIED_SINCE);
        let res = next.run(req).await;
        let Some(vary) = self.storable(&res) else {
            leader.finish(Outcome::Uncacheable);
            return res;
        };
        let (parts, body) = res.into_parts();
        match collect_limited(body, self.config.max_entry_bytes).await {
            Collected::Whole(body) => {
                let varied = varied_values(&vary, &headers);
                let mut fields = parts.headers;
                // The fields every hit sets are in the entry already, so a
                // hit's copy of the map (`HeaderMap::clone` keeps no spare
                // room) replaces `Age` instead of growing to add it.
                fields.insert(AGE, HeaderValue::from_static("0"));
                if has_length(parts.status) {
                    fields.insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
                }
                let size = entry_size(&url, &fields, &body);
                let entry = Arc::new(Entry {
                    status: parts.status,
                    headers: fields,
                    body,
                    stored: Instant::now(),
                    vary,
                    varied,
                    size,
                });
                self.lock().insert(&url, entry.clone());
                leader.finish(Outcome::Cached(entry.clone()));
                respond(&entry, false, &headers)
            }
            Collected::Partial(replay) => {
                leader.finish(Outcome::Uncacheable);
                Response::from_parts(parts, Body::new(replay))
            }
        }
    }

    /// The `Vary` fields of a response that may be stored; `None` if it
    /// may not (RFC 9111 §3, §4.2.2; see the module documentation).
    fn storable(&self, res: &Response) -> Option<Arc<[HeaderName]>> {
        let cacheable = matches!(
            res.status().as_u16(),
            200 | 203 | 204 | 300 | 301 | 308 | 404 | 405 | 410 | 414 | 501
        );
        let headers = res.headers();
        if !cacheable || headers.contains_key(SET_COOKIE) {
            return None;
        }
        let forbidden = list_items(headers, &CACHE_CONTROL).any(|directive| {
            let name = directive.split('=').next().unwrap_or("").trim();
            ["private", "no-store", "no-cache"]
                .iter()
                .any(|d| name.eq_ignore_ascii_case(d))
        });
        if forbidden {
            return None;
        }
        let mut vary = Vec::new();
        for item in list_items(headers, &VARY) {
            let item = item.trim();
            if item == "*" {
                // `Vary: *` never matches a later request (RFC 9111 §4.1).
                return None;
            }
            let name = HeaderName::from_bytes(item.as_bytes()).ok()?;
            if !vary.contains(&name) {
                vary.push(name);
            }
            if vary.len() > MAX_VARY_FIELDS {
                return None;
            }
        }
        if res.body().size_hint().lower() > self.config.max_entry_bytes as u64 {
            return None;
        }
        Some(vary.into())
    }
}

impl fmt::Debug for MicroCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MicroCache")
            .field("ttl", &self.config.ttl)
            .field("stale_while_revalidate", &self.config.stale)
            .field("max_entry_bytes", &self.config.max_entry_bytes)
            .field("stats", &self.stats())
            .finish()
    }
}

impl crate::handler::sealed::Dispatch<(Request, Next)> for MicroCache {}

impl Handler<(Request, Next)> for MicroCache {
    fn call(&self, req: Request, next: Next) -> BoxFuture<'static, Response> {
        Box::pin(self.clone().run(req, next))
    }
}

// ===== impl Leader =====

impl Leader {
    fn new(shared: &Arc<Mutex<Store>>, store: &mut Store, key: Key) -> Leader {
        let (tx, id) = store.lead(key.clone());
        Leader {
            store: shared.clone(),
            key,
            id,
            tx: Some(tx),
        }
    }

    fn finish(mut self, outcome: Outcome) {
        lock(&self.store).end_lead(&self.key, self.id);
        if let Some(tx) = self.tx.take() {
            // No receiver left is fine: nobody waited.
            let _ = tx.send(Some(outcome));
        }
    }
}

impl Drop for Leader {
    fn drop(&mut self) {
        if self.tx.is_some() {
            lock(&self.store).end_lead(&self.key, self.id);
        }
    }
}

fn lock(store: &Mutex<Store>) -> MutexGuard<'_, Store> {
    store.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The comma-separated items of every line of `name`.
fn list_items<'a>(headers: &'a HeaderMap, name: &HeaderName) -> impl Iterator<Item = &'a str> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|text| text.split(','))
        .filter(|item| !item.trim().is_empty())
}

/// A response from a cached entry, with its `Age` (RFC 9111 §5.1): `304 Not
/// Modified` when the request's `If-None-Match` matches the entry's `ETag`.
fn respond(entry: &Entry, is_head: bool, request: &HeaderMap) -> Response {
    let age = Instant::now()
        .saturating_duration_since(entry.stored)
        .as_secs();
    if entry.status == StatusCode::OK && not_modified(entry, request) {
        // RFC 9110 §15.4.5: the fields a 200 would have carried that
        // describe the cache state.
        let mut res = crate::response::status(StatusCode::NOT_MODIFIED);
        for name in [CACHE_CONTROL, CONTENT_LOCATION, DATE, ETAG, EXPIRES] {
            if let Some(value) = entry.headers.get(&name) {
                res.headers_mut().insert(name, value.clone());
            }
        }
        for value in entry.headers.get_all(VARY) {
            res.headers_mut().append(VARY, value.clone());
        }
        res.headers_mut().insert(AGE, HeaderValue::from(age));
        return res;
    }
    let mut res = Response::new(if is_head {
        Body::empty()
    } else {
        Body::from(entry.body.clone())
    });
    *res.status_mut() = entry.status;
    // The entry holds `Content-Length` and an `Age` to replace.
    *res.headers_mut() = entry.headers.clone();
    res.headers_mut().insert(AGE, HeaderValue::from(age));
    res
}

/// Whether a response of `status` declares its content's length.
fn has_length(status: StatusCode) -> bool {
    status != StatusCode::NO_CONTENT && status != StatusCode::NOT_MODIFIED
}

/// RFC 9110 §13.1.2: `If-None-Match` with weak comparison; `*` matches any
/// current representation.
fn not_modified(entry: &Entry, request: &HeaderMap) -> bool {
    let Some(etag) = entry.headers.get(ETAG).and_then(|v| v.to_str().ok()) else {
        return list_items(request, &IF_NONE_MATCH).any(|tag| tag.trim() == "*");
    };
    let opaque = |tag: &str| -> String {
        let tag = tag.trim();
        tag.strip_prefix("W/").unwrap_or(tag).to_owned()
    };
    let current = opaque(etag);
    list_items(request, &IF_NONE_MATCH).any(|tag| tag.trim() == "*" || opaque(tag) == current)
}

/// A HEAD answer from a GET response: same headers, no content.
fn strip(mut res: Response) -> Response {
    let bodiless = matches!(res.status().as_u16(), 204 | 304);
    if let (Some(len), false) = (
        res.body().size_hint().exact(),
        bodiless || res.headers().contains_key(CONTENT_LENGTH),
    ) {
        res.headers_mut()
            .insert(CONTENT_LENGTH, HeaderValue::from(len));
    }
    *res.body_mut() = Body::empty();
    res
}

/// Bytes an entry is charged: body, header fields and URL, plus a fixed
/// overhead for the bookkeeping.
fn entry_size(url: &str, headers: &HeaderMap, body: &Bytes) -> usize {
    const OVERHEAD: usize = 256;
    let header_bytes: usize = headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 32)
        .sum();
    OVERHEAD + url.len() + header_bytes + body.len()
}

enum Collected {
    Whole(Bytes),
    /// Over the limit, trailers, or an error: what was read, then the rest.
    Partial(Replay),
}

/// Reads `body` while it stays within `max` bytes.
async fn collect_limited(mut body: Body, max: usize) -> Collected {
    let mut frames = VecDeque::new();
    let mut size = 0;
    loop {
        match body.frame().await {
            None => break,
            Some(Ok(frame)) => {
                let Some(data) = frame.data_ref() else {
                    // Trailers are not stored: pass the response through.
                    frames.push_back(frame);
                    return Collected::Partial(Replay::new(frames, Ok(body)));
                };
                size += data.len();
                frames.push_back(frame);
                if size > max {
                    return Collected::Partial(Replay::new(frames, Ok(body)));
                }
            }
            Some(Err(err)) => return Collected::Partial(Replay::new(frames, Err(err))),
        }
    }
    let mut whole = BytesMut::with_capacity(size);
    for frame in frames {
        if let Ok(data) = frame.into_data() {
            whole.extend_from_slice(&data);
        }
    }
    Collected::Whole(whole.freeze())
}

/// Frames already read, then the rest of the body (or its error).
struct Replay {
    read: VecDeque<Frame<Bytes>>,
    rest: Option<Result<Body, BoxError>>,
}

impl Replay {
    fn new(read: VecDeque<Frame<Bytes>>, rest: Result<Body, BoxError>) -> Replay {
        Replay {
            read,
            rest: Some(rest),
        }
    }
}

impl http_body::Body for Replay {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if let Some(frame) = this.read.pop_front() {
            return Poll::Ready(Some(Ok(frame)));
        }
        match &mut this.rest {
            Some(Ok(body)) => Pin::new(body).poll_frame(cx),
            Some(Err(_)) => match this.rest.take() {
                Some(Err(err)) => Poll::Ready(Some(Err(err))),
                _ => Poll::Ready(None),
            },
            None => Poll::Ready(None),
        }
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}
