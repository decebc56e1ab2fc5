//! [`Feed`]: the current version of one document, how it is replaced, and
//! the health of what feeds it.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::{Duration, SystemTime};

use bytes::Bytes;

use super::background;
use super::limits::{
    DEFAULT_INTERVAL, DEFAULT_MAX_DOCUMENT_BYTES, DEFAULT_MAX_SUBSCRIBERS, DEFAULT_SUBSCRIBER_LAG,
    DEFAULT_WS_QUEUED_BYTES, EVENT_OVERHEAD_BYTES,
};
use super::version::{Version, hash_hex};
use crate::sse::{Event, Hub};
use crate::ws::{Message, Registry};

/// A check run on every update after the JSON syntax check: `Err` with a
/// reason refuses the update (a JSON Schema, a required field).
pub type Validator = Arc<dyn Fn(&serde_json::Value) -> Result<(), String> + Send + Sync>;

/// A live JSON document: one current [`Version`] served to every client,
/// replaced by [`update`](Feed::update), pushed to SSE and WebSocket
/// subscribers. Cloning is one reference count; every method may be
/// called from any thread.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use celer::feed::Feed;
/// let feed = Feed::builder("election").max_document_bytes(64 * 1024).build();
/// assert!(feed.current().is_none());
/// feed.update(&br#"{"votes": 10}"#[..]).unwrap();
/// // Not JSON: refused, the last good version stays.
/// let err = feed.update(&b"{votes: 11"[..]).unwrap_err();
/// assert!(err.is_invalid_json());
/// assert_eq!(&feed.current().unwrap().bytes()[..], br#"{"votes": 10}"#);
/// assert_eq!(feed.status().rejected_invalid, 1);
/// # });
/// ```
///
/// # What an update does
///
/// [`update`](Feed::update) checks the size
/// ([`FeedBuilder::max_document_bytes`]), the JSON syntax and the
/// [`FeedBuilder::validator`], in that order; a refused update is logged
/// (target `celer::feed`), counted in [`FeedStatus`] and changes nothing
/// served. An accepted document with the same bytes as the current one
/// changes nothing either (no new version, no push). Otherwise the new
/// [`Version`] is hashed and compressed three times (br, zstd, gzip) once,
/// becomes current for every request after, and is pushed: one SSE event
/// encoded once for all subscribers, one WebSocket message framed once.
#[derive(Clone)]
pub struct Feed {
    pub(crate) inner: Arc<Inner>,
}

/// Sets a [`Feed`]'s interval, limits and validation; made by
/// [`Feed::builder`].
///
/// ```
/// use std::time::Duration;
/// let feed = celer::feed::Feed::builder("scores")
///     .interval(Duration::from_millis(500))
///     .max_document_bytes(256 * 1024)
///     .max_subscribers(20_000)
///     .validator(|doc| match doc.get("scores") {
///         Some(_) => Ok(()),
///         None => Err("no \"scores\" field".to_owned()),
///     })
///     .build();
/// assert_eq!(feed.interval(), Duration::from_millis(500));
/// ```
pub struct FeedBuilder {
    name: String,
    config: Config,
}

#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) interval: Duration,
    pub(crate) max_document_bytes: usize,
    pub(crate) max_subscribers: usize,
    pub(crate) subscriber_lag: usize,
    pub(crate) ws_queued_bytes: usize,
    /// Compress versions on the background thread ([`background`]).
    background: bool,
    validator: Option<Validator>,
}

pub(crate) struct Inner {
    pub(crate) name: String,
    pub(crate) config: Config,
    /// `Cache-Control` of the document: `max-age` of the interval.
    pub(crate) cache_control: http::HeaderValue,
    /// The version served; replaced whole under `updating`, read by every
    /// request (a read lock and a reference count).
    current: RwLock<Option<Arc<Version>>>,
    /// Serialises updates, so versions are numbered, published and made
    /// current in one order.
    updating: Mutex<()>,
    /// SSE subscribers: one shared ring, history of one version.
    pub(crate) hub: Hub,
    /// WebSocket subscribers.
    pub(crate) sockets: Registry,
    /// What the source reported last, and the counters.
    health: Mutex<Health>,
    rejected_invalid: AtomicU64,
    rejected_too_large: AtomicU64,
    rejected_validator: AtomicU64,
    unchanged: AtomicU64,
}

#[derive(Debug, Clone, Default)]
struct Health {
    source: String,
    failing: bool,
    last_error: Option<String>,
    last_error_at: Option<SystemTime>,
    last_success_at: Option<SystemTime>,
    failures: u64,
    last_refusal: Option<String>,
    last_refusal_at: Option<SystemTime>,
}

/// Why [`Feed::update`] refused a document; the last good version stays.
///
/// ```
/// let feed = celer::feed::Feed::builder("f").max_document_bytes(4).build();
/// let err = feed.update(&b"[1, 2, 3]"[..]).unwrap_err();
/// assert!(err.is_too_large());
/// assert_eq!(err.to_string(), "document of 9 bytes is over the limit of 4");
/// ```
#[derive(Debug, Clone)]
pub struct UpdateError {
    kind: UpdateErrorKind,
}

#[derive(Debug, Clone)]
enum UpdateErrorKind {
    TooLarge { len: usize, max: usize },
    InvalidJson(String),
    Rejected(String),
}

/// What [`Feed::update`] did with an accepted document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Updated {
    /// It became the current version, with this number.
    New(u64),
    /// It has the bytes of the current version: nothing changed.
    Unchanged,
}

/// A feed's state, counters and source health: what `/status` answers.
#[derive(Debug, Clone, serde::Serialize)]
#[non_exhaustive]
pub struct FeedStatus {
    /// The feed's name.
    pub name: String,
    /// The current version's number (0 before the first document).
    pub version: u64,
    /// The current version's id (its content hash), if any.
    pub id: Option<String>,
    /// The current version's strong ETag, if any.
    pub etag: Option<String>,
    /// When the current version replaced the one before, in milliseconds
    /// since the UNIX epoch.
    pub updated_at_ms: Option<u64>,
    /// The same as an HTTP-date.
    pub updated_at: Option<String>,
    /// The current document's size in bytes.
    pub bytes: Option<usize>,
    /// Sizes of the compressed variants kept: `[["br", 812], ...]`.
    pub variants: Vec<(&'static str, usize)>,
    /// The refresh interval, in milliseconds.
    pub interval_ms: u64,
    /// The source, as described by it (`file:/srv/feed.json`).
    pub source: String,
    /// `ok` once the source delivered and while it does, `failing` after a
    /// failure until it delivers again, `waiting` before either.
    pub health: &'static str,
    /// The source's last failure, if any.
    pub last_error: Option<String>,
    /// When that was, in milliseconds since the UNIX epoch.
    pub last_error_at_ms: Option<u64>,
    /// When the source last delivered a document that was accepted, in
    /// milliseconds since the UNIX epoch.
    pub last_success_at_ms: Option<u64>,
    /// Source outages (unreachable, timed out, gone) since start: a source
    /// that keeps failing counts once until it delivers again.
    pub source_failures: u64,
    /// Updates refused for not being JSON.
    pub rejected_invalid: u64,
    /// Updates refused for their size.
    pub rejected_too_large: u64,
    /// Updates refused by the validator (the JSON Schema).
    pub rejected_validator: u64,
    /// Why the last refused update was refused (too large, not JSON, or
    /// the validator's reason), if any was: the counters say how often,
    /// this says what to fix.
    pub last_refusal: Option<String>,
    /// When that was, in milliseconds since the UNIX epoch.
    pub last_refusal_at_ms: Option<u64>,
    /// Accepted updates that had the current bytes.
    pub unchanged: u64,
    /// SSE streams open now.
    pub sse_subscribers: usize,
    /// SSE subscribers dropped for falling behind.
    pub sse_dropped: u64,
    /// SSE subscriptions refused at the limit.
    pub sse_refused: u64,
    /// WebSocket subscribers open now.
    pub ws_subscribers: usize,
}

// ===== impl Feed =====

impl Feed {
    /// A feed named `name` with the default limits.
    ///
    /// ```
    /// assert_eq!(celer::feed::Feed::new("scores").name(), "scores");
    /// ```
    pub fn new(name: impl Into<String>) -> Feed {
        Feed::builder(name).build()
    }

    /// A builder for a feed named `name`.
    ///
    /// ```
    /// let feed = celer::feed::Feed::builder("scores").build();
    /// # let _ = feed;
    /// ```
    pub fn builder(name: impl Into<String>) -> FeedBuilder {
        FeedBuilder {
            name: name.into(),
            config: Config {
                interval: DEFAULT_INTERVAL,
                max_document_bytes: DEFAULT_MAX_DOCUMENT_BYTES,
                max_subscribers: DEFAULT_MAX_SUBSCRIBERS,
                subscriber_lag: DEFAULT_SUBSCRIBER_LAG,
                ws_queued_bytes: DEFAULT_WS_QUEUED_BYTES,
                background: false,
                validator: None,
            },
        }
    }

    /// The feed's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The refresh interval: how often polled sources are read, and the
    /// `max-age` of the document.
    pub fn interval(&self) -> Duration {
        self.inner.config.interval
    }

    /// The largest document accepted, in bytes (sources may refuse larger
    /// ones before reading them whole).
    pub fn max_document_bytes(&self) -> usize {
        self.inner.config.max_document_bytes
    }

    /// The version served now; `None` before the first document.
    pub fn current(&self) -> Option<Arc<Version>> {
        self.inner
            .current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Offers a new document (see [`Feed`] for the checks). Hashing and
    /// compressing run on the calling thread: a few milliseconds for 50
    /// KiB, once per version.
    ///
    /// ```
    /// use celer::feed::{Feed, Updated};
    /// let feed = Feed::new("f");
    /// assert_eq!(feed.update(&b"[1]"[..]).unwrap(), Updated::New(1));
    /// assert_eq!(feed.update(&b"[1]"[..]).unwrap(), Updated::Unchanged);
    /// assert_eq!(feed.update(&b"[2]"[..]).unwrap(), Updated::New(2));
    /// ```
    pub fn update(&self, doc: impl Into<Bytes>) -> Result<Updated, UpdateError> {
        let doc = doc.into();
        let inner = &*self.inner;
        match self.check(&doc) {
            Ok(()) => {}
            Err(err) => {
                let counter = match err.kind {
                    UpdateErrorKind::TooLarge { .. } => &inner.rejected_too_large,
                    UpdateErrorKind::InvalidJson(_) => &inner.rejected_invalid,
                    UpdateErrorKind::Rejected(_) => &inner.rejected_validator,
                };
                counter.fetch_add(1, Ordering::Relaxed);
                {
                    let mut health = self.health();
                    health.last_refusal = Some(err.to_string());
                    health.last_refusal_at = Some(SystemTime::now());
                }
                tracing::warn!(target: "celer::feed", feed = %inner.name, error = %err,
                    "update refused; the last good version stays");
                return Err(err);
            }
        }
        let _updating = inner
            .updating
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let current = self.current();
        self.health().last_success_at = Some(SystemTime::now());
        self.set_ok();
        if let Some(current) = &current {
            if current.bytes() == &doc {
                inner.unchanged.fetch_add(1, Ordering::Relaxed);
                return Ok(Updated::Unchanged);
            }
        }
        let number = current.as_ref().map_or(1, |v| v.number() + 1);
        let updated = SystemTime::now();
        let id = hash_hex(&doc);
        // SSE first: the event needs only the document and its hash, and
        // compressing three variants takes tens of milliseconds for a
        // large document. An SSE subscriber joining now gets this event
        // from the hub's history, whatever `current` says.
        self.push_sse(&id, &doc);
        let cache_control = inner.cache_control.clone();
        let version = if inner.config.background {
            // Compressed by the lowest-priority thread while this one
            // waits: on a core shared with the workers, after the event
            // has gone out to every subscriber they woke.
            Arc::new(background::run(move || {
                Version::with_id(number, doc, id, updated, &cache_control)
            }))
        } else {
            // The publish woke the subscribers' workers; on a core they
            // share with this thread, they send the event before the
            // compressing starts (under a round-robin real-time policy a
            // woken thread of the same priority would otherwise wait for
            // this one to block; under the fair scheduler the compressing
            // would take half the core while the event goes out). One
            // system call per version.
            std::thread::yield_now();
            Arc::new(Version::with_id(number, doc, id, updated, &cache_control))
        };
        // Current before the WebSocket push: a socket that joins between
        // them and reads the current version gets this one at worst twice.
        *inner
            .current
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(version.clone());
        inner
            .sockets
            .broadcast_all(Message::Text(version.bytes().clone()));
        tracing::debug!(target: "celer::feed", feed = %inner.name, version = number,
            id = version.id(), bytes = version.bytes().len(), "new version");
        Ok(Updated::New(number))
    }

    /// Records that the source failed (unreachable, timed out, gone): the
    /// last good version keeps being served, and [`FeedStatus::health`]
    /// says `failing` until the source delivers again. Sources call it at
    /// every failed attempt; an outage is logged and counted once, and
    /// again only when its reason changes.
    ///
    /// ```
    /// let feed = celer::feed::Feed::new("f");
    /// feed.source_failed("connection refused");
    /// feed.source_failed("connection refused");
    /// let status = feed.status();
    /// assert_eq!((status.health, status.source_failures), ("failing", 1));
    /// feed.source_failed("timed out");
    /// assert_eq!(feed.status().last_error.as_deref(), Some("timed out"));
    /// ```
    pub fn source_failed(&self, reason: impl fmt::Display) {
        let reason = reason.to_string();
        let mut health = self.health();
        let repeated = health.failing && health.last_error.as_deref() == Some(reason.as_str());
        if !repeated {
            tracing::warn!(target: "celer::feed", feed = %self.inner.name, error = %reason,
                "source failed; the last good version stays");
        }
        if !health.failing {
            health.failures += 1;
        }
        health.failing = true;
        health.last_error = Some(reason);
        health.last_error_at = Some(SystemTime::now());
    }

    /// Records that the source answered and has nothing new (an upstream's
    /// `304 Not Modified`): the health is `ok` again.
    ///
    /// ```
    /// let feed = celer::feed::Feed::new("f");
    /// feed.source_failed("timed out");
    /// feed.source_alive();
    /// assert_eq!(feed.status().health, "ok");
    /// ```
    pub fn source_alive(&self) {
        let mut health = self.health();
        health.failing = false;
        health.last_success_at = Some(SystemTime::now());
    }

    /// Sets the source's description shown in the status
    /// (`file:/srv/feed.json`, `redis://127.0.0.1/scores`).
    pub fn set_source(&self, description: impl Into<String>) {
        self.health().source = description.into();
    }

    /// The feed's state, counters and source health.
    pub fn status(&self) -> FeedStatus {
        let inner = &*self.inner;
        let current = self.current();
        let health = self.health().clone();
        let hub = inner.hub.stats();
        let ms = |t: SystemTime| {
            t.duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64)
        };
        FeedStatus {
            name: inner.name.clone(),
            version: current.as_ref().map_or(0, |v| v.number()),
            id: current.as_ref().map(|v| v.id().to_owned()),
            etag: current.as_ref().map(|v| v.etag().to_owned()),
            updated_at_ms: current.as_ref().map(|v| ms(v.updated_at())),
            updated_at: current
                .as_ref()
                .map(|v| httpdate::fmt_http_date(v.updated_at())),
            bytes: current.as_ref().map(|v| v.bytes().len()),
            variants: current
                .as_ref()
                .map(|v| v.variant_sizes())
                .unwrap_or_default(),
            interval_ms: inner.config.interval.as_millis() as u64,
            source: health.source,
            health: match (health.failing, health.last_success_at) {
                (true, _) => "failing",
                (false, Some(_)) => "ok",
                (false, None) => "waiting",
            },
            last_error: health.last_error,
            last_error_at_ms: health.last_error_at.map(ms),
            last_success_at_ms: health.last_success_at.map(ms),
            source_failures: health.failures,
            rejected_invalid: inner.rejected_invalid.load(Ordering::Relaxed),
            rejected_too_large: inner.rejected_too_large.load(Ordering::Relaxed),
            rejected_validator: inner.rejected_validator.load(Ordering::Relaxed),
            last_refusal: health.last_refusal,
            last_refusal_at_ms: health.last_refusal_at.map(ms),
            unchanged: inner.unchanged.load(Ordering::Relaxed),
            sse_subscribers: hub.subscribers,
            sse_dropped: hub.dropped,
            sse_refused: hub.refused,
            ws_subscribers: inner.sockets.count(),
        }
    }

    /// The SSE hub of the feed (history of one version), for apps that
    /// serve its events their own way.
    pub fn hub(&self) -> &Hub {
        &self.inner.hub
    }

    fn check(&self, doc: &[u8]) -> Result<(), UpdateError> {
        let max = self.inner.config.max_document_bytes;
        if doc.len() > max {
            return Err(UpdateError::new(UpdateErrorKind::TooLarge {
                len: doc.len(),
                max,
            }));
        }
        match &self.inner.config.validator {
            None => serde_json::from_slice::<serde::de::IgnoredAny>(doc)
                .map(drop)
                .map_err(|err| UpdateError::new(UpdateErrorKind::InvalidJson(err.to_string()))),
            Some(validator) => {
                let value: serde_json::Value = serde_json::from_slice(doc).map_err(|err| {
                    UpdateError::new(UpdateErrorKind::InvalidJson(err.to_string()))
                })?;
                validator(&value)
                    .map_err(|reason| UpdateError::new(UpdateErrorKind::Rejected(reason)))
            }
        }
    }

    /// Publishes the document `doc` (content hash `id`) to the SSE hub.
    fn push_sse(&self, id: &str, doc: &[u8]) {
        let inner = &*self.inner;
        // Raw CR and LF in valid JSON are only whitespace between tokens
        // (inside strings they must be escaped, RFC 8259 §7), so turning
        // them into spaces keeps the document and makes it one `data:`
        // line (HTML §9.2.6 splits data at line ends).
        let text = String::from_utf8_lossy(doc).replace(['\r', '\n'], " ");
        let event = Event::new().id(id).data(text);
        if let Err(err) = inner.hub.publish(event) {
            tracing::error!(target: "celer::feed", feed = %inner.name, error = %err,
                "cannot publish the version to SSE subscribers");
        }
    }

    fn health(&self) -> MutexGuard<'_, Health> {
        self.inner
            .health
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn set_ok(&self) {
        self.health().failing = false;
    }
}

/// The id (and ETag tag) a document would get: 128 bits of its SHA-256 in
/// hex, the same on every instance.
///
/// ```
/// assert_eq!(celer::feed::content_id(b"abc"), "ba7816bf8f01cfea414140de5dae2223");
/// ```
pub fn content_id(doc: &[u8]) -> String {
    hash_hex(doc)
}

impl fmt::Debug for Feed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Feed")
            .field("name", &self.inner.name)
            .field("version", &self.current().map(|v| v.number()))
            .finish_non_exhaustive()
    }
}

// ===== impl FeedBuilder =====

impl FeedBuilder {
    /// Sets the refresh interval: how often polled sources read, and the
    /// `max-age` of `Cache-Control` on the document (whole seconds,
    /// rounded up).
    ///
    /// Default is [`DEFAULT_INTERVAL`], 1 s.
    ///
    /// # Panics
    ///
    /// Panics if `interval` is zero.
    pub fn interval(mut self, interval: Duration) -> Self {
        assert!(!interval.is_zero(), "a feed's interval must not be zero");
        self.config.interval = interval;
        self
    }

    /// Sets the largest document accepted, in bytes; larger updates are
    /// refused.
    ///
    /// Default is [`DEFAULT_MAX_DOCUMENT_BYTES`], 1 MiB.
    pub fn max_document_bytes(mut self, bytes: usize) -> Self {
        self.config.max_document_bytes = bytes;
        self
    }

    /// Sets how many SSE streams, and separately how many WebSocket
    /// connections, the feed serves at once; more get `503` with
    /// `Retry-After`.
    ///
    /// Default is [`DEFAULT_MAX_SUBSCRIBERS`], 50,000.
    pub fn max_subscribers(mut self, subscribers: usize) -> Self {
        self.config.max_subscribers = subscribers;
        self
    }

    /// Sets how many versions an SSE subscriber may fall behind before it
    /// is dropped (its stream ends; a browser reconnects with
    /// `Last-Event-ID` and gets the current version).
    ///
    /// Default is [`DEFAULT_SUBSCRIBER_LAG`], 4 versions.
    ///
    /// # Panics
    ///
    /// Panics if `versions` is 0.
    pub fn subscriber_lag(mut self, versions: usize) -> Self {
        assert!(versions > 0, "a subscriber must be allowed one version");
        self.config.subscriber_lag = versions;
        self
    }

    /// Sets how many bytes may wait for one WebSocket subscriber; past it
    /// the connection is closed with 1008.
    ///
    /// Default is [`DEFAULT_WS_QUEUED_BYTES`], 2 MiB.
    pub fn ws_queued_bytes(mut self, bytes: usize) -> Self {
        self.config.ws_queued_bytes = bytes;
        self
    }

    /// Makes each version's compressed variants (br, zstd, gzip: tens of
    /// milliseconds for 50 KiB) on one thread for the whole process that
    /// runs at the lowest priority (Linux: nice 19, under the fair
    /// scheduler even when the process runs under a real-time policy),
    /// while [`Feed::update`] waits for them. On a core shared with the
    /// server's workers the compressing then runs when they are idle:
    /// after the new version's SSE event has gone out, never in the way of
    /// the requests being served. Pollers and WebSocket subscribers get
    /// the version when its variants are made, as before; on a core kept
    /// busy that is later than SSE subscribers get it.
    ///
    /// Turn it on when the thread that updates the feed does nothing else
    /// (as `celer serve`'s sources thread): `update` blocks that thread
    /// while a busy core lets the compressing wait. Default is off: the
    /// calling thread compresses, at its own priority.
    ///
    /// ```
    /// let feed = celer::feed::Feed::builder("scores").compress_in_background(true).build();
    /// feed.update(&br#"{"home": 2, "away": 1}"#[..]).unwrap();
    /// assert_eq!(feed.current().unwrap().number(), 1);
    /// ```
    pub fn compress_in_background(mut self, on: bool) -> Self {
        self.config.background = on;
        self
    }

    /// Sets a check run on every update after the JSON syntax check (the
    /// document parsed as a `serde_json::Value`); `Err(reason)` refuses
    /// the update.
    ///
    /// Default is none.
    pub fn validator<F>(mut self, validator: F) -> Self
    where
        F: Fn(&serde_json::Value) -> Result<(), String> + Send + Sync + 'static,
    {
        self.config.validator = Some(Arc::new(validator));
        self
    }

    /// Builds the feed; it serves `503` until its first document.
    pub fn build(self) -> Feed {
        let config = self.config;
        let max_event = config
            .max_document_bytes
            .saturating_add(EVENT_OVERHEAD_BYTES);
        let hub = Hub::builder()
            .history(1)
            .initial(1)
            .buffer(config.subscriber_lag)
            .max_event_bytes(max_event)
            .buffer_bytes(max_event.saturating_mul(config.subscriber_lag + 1))
            .max_subscribers(config.max_subscribers)
            // Each version deflated once for every subscriber that
            // accepts gzip (browsers do): a 50 KiB document sends ~4.5 KiB.
            .gzip(true)
            .build();
        let secs = config.interval.as_secs() + u64::from(config.interval.subsec_nanos() > 0);
        let cache_control = http::HeaderValue::try_from(format!("max-age={secs}"))
            .expect("digits are a valid header value");
        Feed {
            inner: Arc::new(Inner {
                name: self.name,
                cache_control,
                config,
                current: RwLock::new(None),
                updating: Mutex::new(()),
                hub,
                sockets: Registry::new(),
                health: Mutex::new(Health::default()),
                rejected_invalid: AtomicU64::new(0),
                rejected_too_large: AtomicU64::new(0),
                rejected_validator: AtomicU64::new(0),
                unchanged: AtomicU64::new(0),
            }),
        }
    }
}

impl fmt::Debug for FeedBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FeedBuilder")
            .field("name", &self.name)
            .field("interval", &self.config.interval)
            .field("max_document_bytes", &self.config.max_document_bytes)
            .finish_non_exhaustive()
    }
}

// ===== impl UpdateError =====

impl UpdateError {
    fn new(kind: UpdateErrorKind) -> UpdateError {
        UpdateError { kind }
    }

    /// True when the document was over the size limit.
    pub fn is_too_large(&self) -> bool {
        matches!(self.kind, UpdateErrorKind::TooLarge { .. })
    }

    /// True when the document was not JSON.
    pub fn is_invalid_json(&self) -> bool {
        matches!(self.kind, UpdateErrorKind::InvalidJson(_))
    }

    /// True when the validator (the JSON Schema) refused the document.
    pub fn is_rejected(&self) -> bool {
        matches!(self.kind, UpdateErrorKind::Rejected(_))
    }
}

impl fmt::Display for UpdateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            UpdateErrorKind::TooLarge { len, max } => {
                write!(f, "document of {len} bytes is over the limit of {max}")
            }
            UpdateErrorKind::InvalidJson(err) => write!(f, "not JSON: {err}"),
            UpdateErrorKind::Rejected(reason) => write!(f, "refused by the validator: {reason}"),
        }
    }
}

impl std::error::Error for UpdateError {}
