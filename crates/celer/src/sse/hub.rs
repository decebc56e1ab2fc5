//! The broadcast hub: events published once, read by every subscriber from
//! one shared ring that is also the history for `Last-Event-ID` resume.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::future::poll_fn;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{
    Arc, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak,
};
use std::task::{Context, Poll};
use std::thread::{self, ThreadId};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use futures_util::task::AtomicWaker;
use http::{HeaderValue, StatusCode, header};

use super::event::{Event, InvalidEvent};
use super::gzip::Segment;
use super::stream::EventStream;
use crate::Request;
use crate::files::encoding::Coding;
use crate::response::{IntoResponse, Response};

/// Events kept for `Last-Event-ID` resume, by default.
pub const DEFAULT_HISTORY: usize = 64;

/// Events a subscriber may fall behind the newest before it is dropped,
/// by default.
pub const DEFAULT_BUFFER: usize = 256;

/// Bytes of encoded events a hub holds at most (its history and what its
/// subscribers have not read yet), by default: 4 MiB.
pub const DEFAULT_BUFFER_BYTES: usize = 4 * 1024 * 1024;

/// Largest encoded event a hub accepts, by default: 256 KiB.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 256 * 1024;

/// Subscribers a hub serves at once, by default.
pub const DEFAULT_MAX_SUBSCRIBERS: usize = 10_000;

/// A slot's group when it has none.
const NO_GROUP: u32 = u32::MAX;

/// What a refused subscriber is told to wait before trying again, in
/// seconds.
const RETRY_AFTER_SECS: u32 = 5;

/// A broadcast hub for server-sent events: publish from anywhere, every
/// subscriber's stream gets the event.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use celer::sse::{Event, Hub};
/// use celer::{App, Request};
/// use http_body::Body as _;
/// use tower::ServiceExt;
///
/// let hub = Hub::new();
/// let mut app = App::new();
/// app.get("/events", {
///     let hub = hub.clone();
///     move |req: Request| {
///         let hub = hub.clone();
///         async move { hub.subscribe(&req) }
///     }
/// });
///
/// let req = http::Request::get("/events").body(celer::Body::empty()).unwrap();
/// let res = app.oneshot(req).await.unwrap();
/// assert_eq!(res.headers()["content-type"], "text/event-stream");
/// assert_eq!(hub.stats().subscribers, 1);
///
/// hub.publish(Event::new().event("greeting").data("hello")).unwrap();
/// let mut body = std::pin::pin!(res.into_body());
/// let frame = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await;
/// let bytes = frame.unwrap().unwrap().into_data().unwrap();
/// let text = std::str::from_utf8(&bytes).unwrap();
/// assert!(text.starts_with("event: greeting\nid: "));
/// assert!(text.ends_with("\ndata: hello\n\n"));
/// # });
/// ```
///
/// # How it works
///
/// - **Encoded once.** [`publish`](Hub::publish) encodes the event into one
///   `Bytes` that every subscriber sends: the cost of a publish does not
///   grow with the size of the event times the subscribers.
/// - **One ring, no queue per subscriber.** Published events go into one
///   ring; each subscriber is a position in it. Memory is the ring's,
///   bounded by [`HubBuilder::history`] + [`HubBuilder::buffer`] events
///   and [`HubBuilder::buffer_bytes`] bytes, whatever the number of
///   subscribers or how slow they are.
/// - **Woken where they run.** A publish from another thread than the
///   subscribers' (a source on a thread of its own, say) wakes one task
///   per runtime thread that has subscribers, and that task wakes them:
///   waking a task of another thread's runtime costs a system call (the
///   runtime's wake-up of its poller), waking one of the same thread a
///   queue push, so a publish to 10,000 subscribers makes one system call
///   per worker instead of 10,000.
/// - **Slow subscribers are dropped.** One more than [`HubBuilder::buffer`]
///   events behind the newest (counted from when it subscribed, so the
///   replay of history does not count), or behind the oldest event the
///   ring still holds, a subscriber is dropped: its stream ends cleanly at
///   an event boundary, and the browser reconnects with `Last-Event-ID`,
///   picking up from the history if it can. [`HubStats::dropped`] counts
///   them.
/// - **Every event has an id.** One published without an id gets the hub's
///   own, `<start>.<n>`: `n` counts from 1, `<start>` is the time the hub
///   was made, so a browser's id from before a restart is never mistaken
///   for a new one.
/// - **Resume.** A subscriber whose `Last-Event-ID` is among the last
///   [`HubBuilder::history`] events gets the events after it, then the live
///   ones. One whose id is unknown (too old, from before a restart, or
///   made up) gets the [`HubBuilder::gap_event`], if one is set, then the
///   whole history: it may have missed events, and this is everything the
///   hub still has. One without `Last-Event-ID` gets the newest
///   [`HubBuilder::initial`] events of the history (none by default).
/// - **Limits.** [`HubBuilder::max_subscribers`] streams at once (more are
///   answered `503 Service Unavailable` with `Retry-After`), events of at
///   most [`HubBuilder::max_event_bytes`] encoded bytes
///   ([`publish`](Hub::publish) refuses larger ones).
/// - **Close.** [`close`](Hub::close) ends every stream after the events
///   already published (the last state of a finished task, say); a client
///   that reconnects to a closed hub and has nothing left to read gets
///   `204 No Content`, which tells a browser to stop reconnecting.
/// - **Shutdown.** Each stream ends at an event boundary when the app's
///   [`ShutdownNotice`](crate::ShutdownNotice) fires.
#[derive(Clone)]
pub struct Hub {
    inner: Arc<Inner>,
}

/// Sets a [`Hub`]'s limits and replay rules; made by [`Hub::builder`].
///
/// ```
/// use celer::sse::{Event, Hub};
/// let hub = Hub::builder()
///     .history(1)
///     .initial(1)
///     .buffer(16)
///     .max_subscribers(50_000)
///     .gap_event(Event::new().event("reset").data(""))
///     .build();
/// # let _ = hub;
/// ```
#[derive(Clone)]
pub struct HubBuilder {
    config: Config,
}

#[derive(Clone)]
struct Config {
    history: usize,
    initial: usize,
    buffer: usize,
    buffer_bytes: usize,
    max_event_bytes: usize,
    max_subscribers: usize,
    /// The encoded gap event, sent first to a subscriber whose
    /// `Last-Event-ID` is not in the history.
    gap: Option<Bytes>,
    /// Streams are gzip-coded for clients that accept it.
    gzip: bool,
    /// The gap event, deflated (made by `build` when `gzip` is set).
    gap_gzip: Option<Segment>,
}

/// A hub's counters, from [`Hub::stats`].
///
/// ```
/// use celer::sse::{Event, Hub};
/// let hub = Hub::builder().history(2).build();
/// for n in 0..3 {
///     hub.publish(Event::new().data(n.to_string())).unwrap();
/// }
/// let stats = hub.stats();
/// assert_eq!((stats.published, stats.history, stats.dropped), (3, 2, 0));
/// assert!(stats.buffered_bytes > 0);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HubStats {
    /// Streams open now.
    pub subscribers: usize,
    /// Events published since the hub was made.
    pub published: u64,
    /// Subscribers dropped for falling behind.
    pub dropped: u64,
    /// Subscriptions refused for [`HubBuilder::max_subscribers`].
    pub refused: u64,
    /// Events in the history now (what a resume can replay).
    pub history: usize,
    /// Encoded bytes the hub holds now.
    pub buffered_bytes: usize,
}

/// Why [`Hub::publish`] refused an event.
///
/// ```
/// use celer::sse::{Event, Hub};
/// let err = Hub::builder().max_event_bytes(8).build()
///     .publish(Event::new().id("1").data("twelve bytes")).unwrap_err();
/// assert!(err.is_too_large());
/// assert_eq!(err.to_string(), "event of 26 bytes is over the limit of 8");
/// ```
#[derive(Debug)]
pub struct PublishError {
    kind: PublishErrorKind,
}

#[derive(Debug)]
enum PublishErrorKind {
    Invalid(InvalidEvent),
    TooLarge { len: usize, max: usize },
    Closed,
}

/// Why [`Hub::subscribe`] gave no stream; answered as a response of its
/// own (`503` with `Retry-After`, or `204`), so a handler can return
/// `hub.subscribe(&req)` as it is.
///
/// ```
/// use celer::response::IntoResponse;
/// use celer::sse::Hub;
/// let hub = Hub::new();
/// hub.close();
/// let req = celer::Request::builder().uri("/events").body(()).unwrap();
/// let res = hub.subscribe(&req).into_response();
/// assert_eq!(res.status(), 204);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubscribeError {
    kind: SubscribeErrorKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SubscribeErrorKind {
    Full,
    Closed,
}

struct Inner {
    config: Config,
    /// `<start>` of the ids the hub makes.
    epoch: String,
    /// Held by one publisher at a time, while it encodes: ids follow the
    /// ring's order, and readers are locked out only for the push.
    publishing: Mutex<()>,
    ring: RwLock<Ring>,
    subscribers: Mutex<Registry>,
    published: AtomicU64,
    dropped: AtomicU64,
    refused: AtomicU64,
}

/// The events the hub holds, oldest first.
struct Ring {
    entries: VecDeque<Entry>,
    /// The sequence number of `entries[0]`; the next event gets
    /// `first_seq + entries.len()`. Sequence numbers start at 1.
    first_seq: u64,
    bytes: usize,
    /// The ids of the events in the history window, by sequence number.
    ids: HashMap<Box<str>, u64>,
    closed: bool,
}

struct Entry {
    id: Box<str>,
    bytes: Bytes,
    /// The event deflated, when the hub gzips.
    gzip: Option<Segment>,
}

/// What a subscriber sends next: an event as encoded, or deflated for a
/// gzip-coded stream.
pub(crate) enum Chunk {
    Plain(Bytes),
    Gzip(Segment),
}

/// The open streams, in reusable slots.
#[derive(Default)]
struct Registry {
    slots: Vec<Option<Held>>,
    free: Vec<usize>,
    live: usize,
    /// One per thread that subscribed from inside a tokio runtime: a
    /// handful (the server's workers), reused when their task is gone.
    groups: Vec<Group>,
}

/// A registry slot's subscriber.
struct Held {
    slot: Arc<Slot>,
    /// Its place in its group's `members` (unused without a group).
    member: usize,
}

/// The subscribers that subscribed on one thread, and the task on that
/// thread's runtime that wakes them for publishers on other threads.
struct Group {
    thread: ThreadId,
    signal: Arc<Signal>,
    /// The registry slots of the group's subscribers, in no order: the
    /// group's task wakes these and looks at no other slot, so a publish
    /// from another thread costs one pass over the subscribers in all,
    /// whatever the number of groups.
    members: Vec<usize>,
    /// Set by each [`Inner::wake`] for itself: this group's task wakes
    /// the group this time (another thread's group whose task runs).
    deferred: bool,
}

/// A publisher's call to a group's task.
#[derive(Default)]
struct Signal {
    /// Set by a publisher, taken by the task before it wakes its group.
    pending: AtomicBool,
    /// Set by the hub's drop: the task ends.
    closed: AtomicBool,
    /// Set when the task is gone (its runtime shut down, or the hub was
    /// dropped): publishers wake the group's subscribers themselves.
    gone: AtomicBool,
    waker: AtomicWaker,
}

/// Held by a group's task (also before its first poll): marks the group's
/// signal gone when the task is dropped, however it ends.
struct GroupTask(Arc<Signal>);

/// One subscriber, as the publisher sees it.
struct Slot {
    waker: AtomicWaker,
    /// The sequence number of the next event the subscriber reads; written
    /// by the subscriber, read by publishers to measure its lag.
    cursor: AtomicU64,
    /// The sequence number of the first event published after it joined:
    /// lag counts from here, so the replay of history does not count.
    joined: u64,
    /// Set (once) when the subscriber is dropped for falling behind.
    dropped: AtomicBool,
    /// Its index in the registry's groups, [`NO_GROUP`] when it
    /// subscribed outside a tokio runtime (a `u32`: the slot stays in a
    /// 64-byte allocation).
    group: u32,
}

/// A subscriber's end: reads the ring from its position. Held by the
/// stream's body; dropping it leaves the registry.
pub(crate) struct Subscriber {
    hub: Arc<Inner>,
    slot: Arc<Slot>,
    index: usize,
    cursor: u64,
    /// The hub's gap event is sent before anything else (a flag: the
    /// event itself stays in the hub's config, and the subscriber small).
    gap: bool,
    /// The stream is gzip-coded: it reads the events' deflated copies.
    gzip: bool,
}

// ===== impl Hub =====

impl Hub {
    /// A hub with the default limits ([`DEFAULT_HISTORY`],
    /// [`DEFAULT_BUFFER`], [`DEFAULT_BUFFER_BYTES`],
    /// [`DEFAULT_MAX_EVENT_BYTES`], [`DEFAULT_MAX_SUBSCRIBERS`]).
    ///
    /// ```
    /// let hub = celer::sse::Hub::new();
    /// assert_eq!(hub.stats().subscribers, 0);
    /// ```
    pub fn new() -> Hub {
        Hub::builder().build()
    }

    /// A builder to set the hub's limits and replay rules.
    ///
    /// ```
    /// let hub = celer::sse::Hub::builder().history(100).build();
    /// # let _ = hub;
    /// ```
    pub fn builder() -> HubBuilder {
        HubBuilder {
            config: Config {
                history: DEFAULT_HISTORY,
                initial: 0,
                buffer: DEFAULT_BUFFER,
                buffer_bytes: DEFAULT_BUFFER_BYTES,
                max_event_bytes: DEFAULT_MAX_EVENT_BYTES,
                max_subscribers: DEFAULT_MAX_SUBSCRIBERS,
                gap: None,
                gzip: false,
                gap_gzip: None,
            },
        }
    }

    /// Publishes an event to every subscriber and the history; callable
    /// from any handler, task or thread. Returns the event's sequence
    /// number in this hub (1 for the first).
    ///
    /// An event without an id gets the hub's (see [`Hub`]). Fails, and
    /// publishes nothing, when the event is invalid
    /// ([`InvalidEvent`]), encodes to more than
    /// [`HubBuilder::max_event_bytes`], or the hub is closed.
    ///
    /// ```
    /// use celer::sse::{Event, Hub};
    /// let hub = Hub::builder().max_event_bytes(64).build();
    /// assert_eq!(hub.publish(Event::new().data("one")).unwrap(), 1);
    /// assert!(hub.publish(Event::new().data("x".repeat(100))).unwrap_err().is_too_large());
    /// assert!(hub.publish(Event::new().id("a\nb")).unwrap_err().is_invalid());
    /// assert_eq!(hub.stats().published, 1);
    /// ```
    pub fn publish(&self, event: Event) -> Result<u64, PublishError> {
        let inner = &*self.inner;
        let _publishing = inner
            .publishing
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (seq, closed) = {
            let ring = inner.ring();
            (ring.next_seq(), ring.closed)
        };
        if closed {
            return Err(PublishError::new(PublishErrorKind::Closed));
        }
        let mut buf = BytesMut::new();
        let own_id = match event.id_str() {
            Some(_) => None,
            None => Some(format!("{}.{seq}", inner.epoch)),
        };
        event
            .encode_into(&mut buf, own_id.as_deref())
            .map_err(|err| PublishError::new(PublishErrorKind::Invalid(err)))?;
        let max = inner.config.max_event_bytes;
        if buf.len() > max {
            return Err(PublishError::new(PublishErrorKind::TooLarge {
                len: buf.len(),
                max,
            }));
        }
        let id: Box<str> = own_id
            .or_else(|| event.into_id())
            .unwrap_or_default()
            .into();
        // Deflated once here, for every gzip-coded stream, outside the
        // ring's lock.
        let gzip = inner.config.gzip.then(|| Segment::deflate(&buf));
        let (head, first) = {
            let mut ring = inner.ring_mut();
            ring.push(&inner.config, id, buf.freeze(), gzip);
            (ring.next_seq(), ring.first_seq)
        };
        inner.published.fetch_add(1, Ordering::Relaxed);
        inner.wake(head, first);
        Ok(seq)
    }

    /// Subscribes the client of `req`: an [`EventStream`] that replays what
    /// its `Last-Event-ID` calls for (see [`Hub`]), then every event
    /// published, until it is dropped for falling behind, the hub closes,
    /// the server shuts down or the client leaves.
    ///
    /// Fails with `503` when the hub has
    /// [`HubBuilder::max_subscribers`] streams already, and with `204`
    /// when the hub is closed and the client has read everything.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use celer::sse::{Event, Hub};
    /// use celer::response::IntoResponse;
    ///
    /// let hub = Hub::builder().max_subscribers(1).build();
    /// let req = celer::Request::builder().uri("/events").body(()).unwrap();
    /// let first = hub.subscribe(&req).unwrap();
    /// let refused = hub.subscribe(&req).unwrap_err();
    /// assert!(refused.is_full());
    /// assert_eq!(refused.into_response().status(), 503);
    /// # drop(first);
    /// # });
    /// ```
    pub fn subscribe(&self, req: &Request) -> Result<EventStream, SubscribeError> {
        let last_id = req
            .headers()
            .get("last-event-id")
            .and_then(|value| std::str::from_utf8(value.as_bytes()).ok());
        self.subscribe_from(req, last_id)
    }

    /// Like [`subscribe`](Hub::subscribe), resuming after `last_id` instead
    /// of the request's `Last-Event-ID` (for a client that passes its last
    /// id another way, such as in the query).
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use celer::sse::{Event, Hub};
    /// let hub = Hub::new();
    /// hub.publish(Event::new().id("a").data("1")).unwrap();
    /// hub.publish(Event::new().id("b").data("2")).unwrap();
    /// let req = celer::Request::builder().uri("/events?last=a").body(()).unwrap();
    /// let last = req.query_param("last").map(|id| id.into_owned());
    /// let stream = hub.subscribe_from(&req, last.as_deref()).unwrap();
    /// # drop(stream);
    /// # });
    /// ```
    pub fn subscribe_from(
        &self,
        req: &Request,
        last_id: Option<&str>,
    ) -> Result<EventStream, SubscribeError> {
        let gzip = self.inner.config.gzip && accepts_gzip(req.headers());
        let subscriber = self.subscriber(last_id, gzip)?;
        Ok(EventStream::from_hub(
            req,
            subscriber,
            self.inner.config.gzip,
        ))
    }

    fn subscriber(&self, last_id: Option<&str>, gzip: bool) -> Result<Subscriber, SubscribeError> {
        let inner = &self.inner;
        let config = &inner.config;
        // The registry lock is held over the ring read, so the position
        // and the registration are one step for publishers (who take the
        // ring, then the registry).
        let mut registry = inner.registry();
        if registry.live >= config.max_subscribers {
            inner.refused.fetch_add(1, Ordering::Relaxed);
            return Err(SubscribeError::new(SubscribeErrorKind::Full));
        }
        let ring = inner.ring();
        let head = ring.next_seq();
        let window = ring.window_start(config.history);
        let (cursor, gap) = match last_id {
            None => (head - (head - window).min(config.initial as u64), false),
            Some(id) => match ring.ids.get(id) {
                Some(&seq) if seq >= window => (seq + 1, false),
                _ => (window, true),
            },
        };
        if ring.closed && cursor == head {
            return Err(SubscribeError::new(SubscribeErrorKind::Closed));
        }
        drop(ring);
        let group = registry.group_here(inner);
        let slot = Arc::new(Slot {
            waker: AtomicWaker::new(),
            cursor: AtomicU64::new(cursor),
            joined: head,
            dropped: AtomicBool::new(false),
            group,
        });
        let index = registry.insert(slot.clone());
        drop(registry);
        Ok(Subscriber {
            hub: inner.clone(),
            slot,
            index,
            cursor,
            gap: gap && config.gap.is_some(),
            gzip,
        })
    }

    /// Closes the hub: publishing fails from now on, and every stream ends
    /// once it has sent the events already published.
    ///
    /// ```
    /// use celer::sse::{Event, Hub};
    /// let hub = Hub::new();
    /// hub.close();
    /// assert!(hub.is_closed());
    /// assert!(hub.publish(Event::new().data("late")).unwrap_err().is_closed());
    /// ```
    pub fn close(&self) {
        let inner = &*self.inner;
        let (head, first) = {
            let _publishing = inner
                .publishing
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let mut ring = inner.ring_mut();
            ring.closed = true;
            (ring.next_seq(), ring.first_seq)
        };
        inner.wake(head, first);
    }

    /// True once [`close`](Hub::close) was called.
    ///
    /// ```
    /// assert!(!celer::sse::Hub::new().is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.inner.ring().closed
    }

    /// The hub's counters.
    ///
    /// ```
    /// use celer::sse::{Event, Hub};
    /// let hub = Hub::new();
    /// hub.publish(Event::new().data("x")).unwrap();
    /// let stats = hub.stats();
    /// assert_eq!((stats.published, stats.history, stats.subscribers), (1, 1, 0));
    /// ```
    pub fn stats(&self) -> HubStats {
        let inner = &*self.inner;
        let subscribers = inner.registry().live;
        let ring = inner.ring();
        HubStats {
            subscribers,
            published: inner.published.load(Ordering::Relaxed),
            dropped: inner.dropped.load(Ordering::Relaxed),
            refused: inner.refused.load(Ordering::Relaxed),
            history: (ring.next_seq() - ring.window_start(inner.config.history)) as usize,
            buffered_bytes: ring.bytes,
        }
    }
}

impl Default for Hub {
    fn default() -> Self {
        Hub::new()
    }
}

impl fmt::Debug for Hub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hub").field("stats", &self.stats()).finish()
    }
}

// ===== impl HubBuilder =====

impl HubBuilder {
    /// Sets how many of the newest events are kept for `Last-Event-ID`
    /// resume; 0 turns resume off (every reconnect is a gap).
    ///
    /// Default is [`DEFAULT_HISTORY`], 64 events.
    ///
    /// ```
    /// let hub = celer::sse::Hub::builder().history(1).build();
    /// # let _ = hub;
    /// ```
    pub fn history(mut self, events: usize) -> Self {
        self.config.history = events;
        self
    }

    /// Sets how many of the newest history events a subscriber without
    /// `Last-Event-ID` gets first (a live feed: 1, the current state); at
    /// most the history.
    ///
    /// Default is 0: a new subscriber gets only what is published after it
    /// joined.
    ///
    /// ```
    /// let hub = celer::sse::Hub::builder().history(1).initial(1).build();
    /// # let _ = hub;
    /// ```
    pub fn initial(mut self, events: usize) -> Self {
        self.config.initial = events;
        self
    }

    /// Sets how many events a subscriber may fall behind the newest before
    /// it is dropped. The hub holds `history + buffer` events at most (and
    /// never more than [`buffer_bytes`](HubBuilder::buffer_bytes)).
    ///
    /// Default is [`DEFAULT_BUFFER`], 256 events.
    ///
    /// # Panics
    ///
    /// Panics if `events` is 0.
    ///
    /// ```
    /// let hub = celer::sse::Hub::builder().buffer(16).build();
    /// # let _ = hub;
    /// ```
    pub fn buffer(mut self, events: usize) -> Self {
        assert!(events > 0, "a hub's buffer must hold at least one event");
        self.config.buffer = events;
        self
    }

    /// Sets how many bytes of encoded events the hub holds at most, history
    /// included; the oldest go first, and a subscriber that had not read
    /// them is dropped. This bounds the hub's memory, whatever the number
    /// of subscribers.
    ///
    /// Default is [`DEFAULT_BUFFER_BYTES`], 4 MiB.
    ///
    /// ```
    /// let hub = celer::sse::Hub::builder().buffer_bytes(1 << 20).max_event_bytes(64 << 10).build();
    /// # let _ = hub;
    /// ```
    pub fn buffer_bytes(mut self, bytes: usize) -> Self {
        self.config.buffer_bytes = bytes;
        self
    }

    /// Sets the largest encoded event [`Hub::publish`] accepts, in bytes.
    ///
    /// Default is [`DEFAULT_MAX_EVENT_BYTES`], 256 KiB.
    ///
    /// ```
    /// let hub = celer::sse::Hub::builder().max_event_bytes(1024).build();
    /// # let _ = hub;
    /// ```
    pub fn max_event_bytes(mut self, bytes: usize) -> Self {
        self.config.max_event_bytes = bytes;
        self
    }

    /// Sets how many streams the hub serves at once; more subscribers are
    /// answered `503 Service Unavailable` with `Retry-After`.
    ///
    /// Default is [`DEFAULT_MAX_SUBSCRIBERS`], 10,000.
    ///
    /// ```
    /// let hub = celer::sse::Hub::builder().max_subscribers(100).build();
    /// # let _ = hub;
    /// ```
    pub fn max_subscribers(mut self, subscribers: usize) -> Self {
        self.config.max_subscribers = subscribers;
        self
    }

    /// Sets the event sent first to a subscriber whose `Last-Event-ID` is
    /// not in the history, before the whole history: a sign that it may
    /// have missed events (and should, say, reload its state). It goes
    /// out as given: give it no id, so the browser keeps its last one.
    ///
    /// Default is none: the history alone.
    ///
    /// # Panics
    ///
    /// Panics if the event is invalid (see [`Event`]).
    ///
    /// ```
    /// use celer::sse::{Event, Hub};
    /// let hub = Hub::builder().gap_event(Event::new().event("reset").data("")).build();
    /// # let _ = hub;
    /// ```
    // By value like the other setters, so a chain of them reads the same.
    #[allow(clippy::needless_pass_by_value)]
    pub fn gap_event(mut self, event: Event) -> Self {
        let bytes = event
            .encode()
            .unwrap_or_else(|err| panic!("invalid gap event: {err}"));
        self.config.gap = Some(bytes);
        self
    }

    /// Sets whether streams are gzip-coded for clients whose
    /// `Accept-Encoding` prefers gzip to the identity (browsers do): each
    /// event is deflated once, at [`publish`](Hub::publish), into bytes
    /// every such subscriber sends, so the cost does not grow with the
    /// subscribers. Responses then carry `Vary: Accept-Encoding`, and the
    /// coded ones `Content-Encoding: gzip`.
    ///
    /// Each event is compressed on its own (no back-references to the
    /// events before it) and ends with a sync flush, so a browser decodes
    /// it as soon as it arrives; a stream that ends cleanly (the hub
    /// closes, the subscriber is dropped for falling behind, the server
    /// shuts down) ends with a valid gzip trailer. Worth it for large
    /// events (a 50 KiB JSON document sends about 4.5 KiB); a few bytes
    /// more for tiny ones. Events compressed together with secrets and
    /// text an attacker controls can leak the secrets through their
    /// compressed size (the BREACH family): give such a hub no gzip.
    ///
    /// Default is off.
    ///
    /// ```
    /// let hub = celer::sse::Hub::builder().gzip(true).build();
    /// # let _ = hub;
    /// ```
    pub fn gzip(mut self, gzip: bool) -> Self {
        self.config.gzip = gzip;
        self
    }

    /// Makes the hub.
    ///
    /// # Panics
    ///
    /// Panics if [`max_event_bytes`](HubBuilder::max_event_bytes) is over
    /// [`buffer_bytes`](HubBuilder::buffer_bytes): the hub could not hold
    /// the largest event it accepts.
    ///
    /// ```
    /// let hub = celer::sse::Hub::builder().build();
    /// # let _ = hub;
    /// ```
    pub fn build(self) -> Hub {
        let mut config = self.config;
        config.gap_gzip = config
            .gap
            .as_ref()
            .filter(|_| config.gzip)
            .map(|gap| Segment::deflate(gap));
        assert!(
            config.max_event_bytes <= config.buffer_bytes,
            "max_event_bytes ({}) is over buffer_bytes ({})",
            config.max_event_bytes,
            config.buffer_bytes
        );
        let start = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_millis());
        Hub {
            inner: Arc::new(Inner {
                config,
                epoch: format!("{start:x}"),
                publishing: Mutex::new(()),
                ring: RwLock::new(Ring {
                    entries: VecDeque::new(),
                    first_seq: 1,
                    bytes: 0,
                    ids: HashMap::new(),
                    closed: false,
                }),
                subscribers: Mutex::new(Registry::default()),
                published: AtomicU64::new(0),
                dropped: AtomicU64::new(0),
                refused: AtomicU64::new(0),
            }),
        }
    }
}

impl fmt::Debug for HubBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let config = &self.config;
        f.debug_struct("HubBuilder")
            .field("history", &config.history)
            .field("initial", &config.initial)
            .field("buffer", &config.buffer)
            .field("buffer_bytes", &config.buffer_bytes)
            .field("max_event_bytes", &config.max_event_bytes)
            .field("max_subscribers", &config.max_subscribers)
            .field("gap_event", &config.gap.is_some())
            .field("gzip", &config.gzip)
            .finish()
    }
}

// ===== impl Inner =====

impl Inner {
    fn ring(&self) -> RwLockReadGuard<'_, Ring> {
        // Every critical section leaves the ring consistent.
        self.ring.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn ring_mut(&self) -> RwLockWriteGuard<'_, Ring> {
        self.ring.write().unwrap_or_else(PoisonError::into_inner)
    }

    fn registry(&self) -> MutexGuard<'_, Registry> {
        self.subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// After a publish (or close): drops the subscribers that fell behind
    /// and wakes the others. `head` is the next sequence number, `first`
    /// the oldest the ring holds. Subscribers of other threads' groups
    /// are woken by their group's task.
    fn wake(&self, head: u64, first: u64) {
        let buffer = self.config.buffer as u64;
        let mut registry = self.registry();
        // Which groups' tasks wake their subscribers this time: those of
        // other threads whose task still runs.
        let here = thread::current().id();
        for group in &mut registry.groups {
            group.deferred = group.thread != here && !group.signal.gone.load(Ordering::Acquire);
        }
        let mut dropped = 0;
        for index in 0..registry.slots.len() {
            let Some(held) = &registry.slots[index] else {
                continue;
            };
            let slot = &held.slot;
            let cursor = slot.cursor.load(Ordering::Acquire);
            let behind = head.saturating_sub(cursor.max(slot.joined));
            if cursor < first || behind > buffer {
                slot.dropped.store(true, Ordering::Release);
                slot.waker.wake();
                registry.remove(index);
                dropped += 1;
            } else if registry
                .groups
                .get(slot.group as usize)
                .is_none_or(|group| !group.deferred)
            {
                slot.waker.wake();
            }
        }
        for group in registry.groups.iter().filter(|group| group.deferred) {
            group.signal.pending.store(true, Ordering::Release);
            group.signal.waker.wake();
        }
        drop(registry);
        if dropped > 0 {
            self.dropped.fetch_add(dropped, Ordering::Relaxed);
            tracing::debug!(target: "celer::sse", dropped, "slow subscribers dropped");
        }
    }

    /// A group's task, woken by a publisher on another thread: wakes the
    /// group's subscribers from their own thread.
    fn wake_group(&self, group: u32) {
        let registry = self.registry();
        let Some(group) = registry.groups.get(group as usize) else {
            return;
        };
        for &index in &group.members {
            if let Some(held) = &registry.slots[index] {
                held.slot.waker.wake();
            }
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let registry = self
            .subscribers
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        for group in &registry.groups {
            group.signal.closed.store(true, Ordering::Release);
            group.signal.waker.wake();
        }
    }
}

// ===== impl Group =====

/// A group's task: waits for publishers' signals and wakes the group; ends
/// when the hub is dropped. Holds the hub weakly, so it keeps nothing
/// alive.
async fn run_group(hub: Weak<Inner>, group: u32, task: GroupTask) {
    let signal = &task.0;
    loop {
        let go = poll_fn(|cx| {
            for _ in 0..2 {
                if signal.pending.swap(false, Ordering::AcqRel) {
                    return Poll::Ready(true);
                }
                if signal.closed.load(Ordering::Acquire) {
                    return Poll::Ready(false);
                }
                // Registered, then checked again: a signal between the
                // first check and the registration is not lost.
                signal.waker.register(cx.waker());
            }
            Poll::Pending
        })
        .await;
        let Some(inner) = hub.upgrade().filter(|_| go) else {
            return;
        };
        inner.wake_group(group);
    }
}

impl Drop for GroupTask {
    fn drop(&mut self) {
        self.0.gone.store(true, Ordering::Release);
    }
}

// ===== impl Ring =====

impl Ring {
    fn next_seq(&self) -> u64 {
        self.first_seq + self.entries.len() as u64
    }

    /// The sequence number of the oldest event in the history window.
    fn window_start(&self, history: usize) -> u64 {
        self.next_seq()
            .saturating_sub(history as u64)
            .max(self.first_seq)
    }

    fn push(&mut self, config: &Config, id: Box<str>, bytes: Bytes, gzip: Option<Segment>) {
        let seq = self.next_seq();
        let entry = Entry { id, bytes, gzip };
        self.bytes += entry.held_bytes();
        if config.history > 0 {
            self.ids.insert(entry.id.clone(), seq);
        }
        self.entries.push_back(entry);
        // The event that just left the history window can no longer be
        // resumed from.
        if let Some(left) = (seq + 1).checked_sub(config.history as u64 + 1) {
            if left >= self.first_seq {
                let at = (left - self.first_seq) as usize;
                let id = &self.entries[at].id;
                if self.ids.get(id) == Some(&left) {
                    self.ids.remove(id);
                }
            }
        }
        // A subscriber that replays the whole history may still fall
        // `buffer` events behind.
        let capacity = config.history.saturating_add(config.buffer);
        while self.entries.len() > capacity
            || (self.bytes > config.buffer_bytes && self.entries.len() > 1)
        {
            let Some(old) = self.entries.pop_front() else {
                break;
            };
            if self.ids.get(&old.id) == Some(&self.first_seq) {
                self.ids.remove(&old.id);
            }
            self.bytes -= old.held_bytes();
            self.first_seq += 1;
        }
    }
}

impl Entry {
    /// What the entry holds: the encoded event and its deflated copy.
    fn held_bytes(&self) -> usize {
        self.bytes.len() + self.gzip.as_ref().map_or(0, Segment::coded_len)
    }
}

// ===== impl Registry =====

impl Registry {
    /// The group of the calling thread, its task started (again) if it is
    /// not running; none outside a tokio runtime, where a publisher wakes
    /// the subscriber itself.
    fn group_here(&mut self, inner: &Arc<Inner>) -> u32 {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return NO_GROUP;
        };
        let here = thread::current().id();
        let index = match self.groups.iter().position(|g| g.thread == here) {
            Some(index) if !self.groups[index].signal.gone.load(Ordering::Acquire) => {
                return index as u32;
            }
            Some(index) => index,
            // A thread that is gone leaves its group to the next one.
            None => match self
                .groups
                .iter()
                .position(|g| g.signal.gone.load(Ordering::Acquire))
            {
                Some(index) => index,
                None => {
                    self.groups.push(Group {
                        thread: here,
                        signal: Arc::default(),
                        members: Vec::new(),
                        deferred: false,
                    });
                    self.groups.len() - 1
                }
            },
        };
        // The members stay: subscribers of the thread that is gone are
        // this group's still, woken by its new task.
        let signal = Arc::new(Signal::default());
        let group = &mut self.groups[index];
        group.thread = here;
        group.signal = signal.clone();
        // A runtime shutting down drops the task unpolled: the group is
        // gone again, and publishers wake its subscribers themselves.
        drop(runtime.spawn(run_group(
            Arc::downgrade(inner),
            index as u32,
            GroupTask(signal),
        )));
        index as u32
    }

    fn insert(&mut self, slot: Arc<Slot>) -> usize {
        self.live += 1;
        let index = match self.free.pop() {
            Some(index) => index,
            None => {
                self.slots.push(None);
                self.slots.len() - 1
            }
        };
        let member = match self.groups.get_mut(slot.group as usize) {
            Some(group) => {
                group.members.push(index);
                group.members.len() - 1
            }
            None => 0,
        };
        self.slots[index] = Some(Held { slot, member });
        index
    }

    fn remove(&mut self, index: usize) {
        let Some(held) = self.slots[index].take() else {
            return;
        };
        self.free.push(index);
        self.live -= 1;
        let Some(group) = self.groups.get_mut(held.slot.group as usize) else {
            return;
        };
        // The group's last member takes the place of the one that left.
        group.members.swap_remove(held.member);
        if let Some(&moved) = group.members.get(held.member) {
            if let Some(other) = &mut self.slots[moved] {
                other.member = held.member;
            }
        }
    }
}

// ===== impl Subscriber =====

impl Subscriber {
    /// The stream is gzip-coded: [`poll_next`](Subscriber::poll_next)
    /// gives deflated events.
    pub(crate) fn is_gzip(&self) -> bool {
        self.gzip
    }

    /// The next encoded event, deflated for a gzip-coded stream; `None`
    /// when the stream is over (dropped for falling behind, or the hub
    /// closed and everything was read).
    pub(crate) fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Chunk>> {
        if std::mem::take(&mut self.gap) {
            let config = &self.hub.config;
            let gap = if self.gzip {
                config.gap_gzip.clone().map(Chunk::Gzip)
            } else {
                config.gap.clone().map(Chunk::Plain)
            };
            if let Some(gap) = gap {
                return Poll::Ready(Some(gap));
            }
        }
        if self.slot.dropped.load(Ordering::Acquire) {
            return Poll::Ready(None);
        }
        // Registered before the ring is read: a publish after the read
        // wakes this task.
        self.slot.waker.register(cx.waker());
        let ring = self.hub.ring();
        if self.cursor < ring.first_seq {
            // Evicted before a publisher saw it behind; a publisher counts
            // it at its next wake.
            return Poll::Ready(None);
        }
        if let Some(entry) = ring.entries.get((self.cursor - ring.first_seq) as usize) {
            let chunk = if self.gzip {
                // Every entry of a gzip hub has its copy; should one lack
                // it, the stream must still get deflate, never plain bytes.
                Chunk::Gzip(
                    entry
                        .gzip
                        .clone()
                        .unwrap_or_else(|| Segment::deflate(&entry.bytes)),
                )
            } else {
                Chunk::Plain(entry.bytes.clone())
            };
            drop(ring);
            self.cursor += 1;
            self.slot.cursor.store(self.cursor, Ordering::Release);
            return Poll::Ready(Some(chunk));
        }
        if ring.closed {
            return Poll::Ready(None);
        }
        Poll::Pending
    }
}

impl fmt::Debug for Subscriber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subscriber")
            .field("cursor", &self.cursor)
            .finish_non_exhaustive()
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        let mut registry = self.hub.registry();
        let ours = registry.slots[self.index]
            .as_ref()
            .is_some_and(|held| Arc::ptr_eq(&held.slot, &self.slot));
        if ours {
            registry.remove(self.index);
        }
    }
}

// ===== impl PublishError =====

impl PublishError {
    fn new(kind: PublishErrorKind) -> PublishError {
        PublishError { kind }
    }

    /// The event was invalid (a line break in its id or type).
    ///
    /// ```
    /// use celer::sse::{Event, Hub};
    /// let err = Hub::new().publish(Event::new().event("a\nb")).unwrap_err();
    /// assert!(err.is_invalid());
    /// ```
    pub fn is_invalid(&self) -> bool {
        matches!(self.kind, PublishErrorKind::Invalid(_))
    }

    /// The event encoded to more than [`HubBuilder::max_event_bytes`].
    ///
    /// ```
    /// use celer::sse::{Event, Hub};
    /// let hub = Hub::builder().max_event_bytes(10).build();
    /// assert!(hub.publish(Event::new().data("too long for ten")).unwrap_err().is_too_large());
    /// ```
    pub fn is_too_large(&self) -> bool {
        matches!(self.kind, PublishErrorKind::TooLarge { .. })
    }

    /// The hub was closed.
    ///
    /// ```
    /// use celer::sse::{Event, Hub};
    /// let hub = Hub::new();
    /// hub.close();
    /// assert!(hub.publish(Event::new().data("x")).unwrap_err().is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        matches!(self.kind, PublishErrorKind::Closed)
    }
}

impl fmt::Display for PublishError {
    /// The wording is not part of the API.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            PublishErrorKind::Invalid(err) => write!(f, "invalid event: {err}"),
            PublishErrorKind::TooLarge { len, max } => {
                write!(f, "event of {len} bytes is over the limit of {max}")
            }
            PublishErrorKind::Closed => f.write_str("hub is closed"),
        }
    }
}

impl std::error::Error for PublishError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            PublishErrorKind::Invalid(err) => Some(err),
            _ => None,
        }
    }
}

// ===== impl SubscribeError =====

impl SubscribeError {
    fn new(kind: SubscribeErrorKind) -> SubscribeError {
        SubscribeError { kind }
    }

    /// The hub had [`HubBuilder::max_subscribers`] streams already; answered
    /// `503 Service Unavailable` with `Retry-After`.
    ///
    /// ```
    /// use celer::sse::Hub;
    /// let hub = Hub::builder().max_subscribers(0).build();
    /// let req = celer::Request::builder().uri("/").body(()).unwrap();
    /// assert!(hub.subscribe(&req).unwrap_err().is_full());
    /// ```
    pub fn is_full(&self) -> bool {
        self.kind == SubscribeErrorKind::Full
    }

    /// The hub is closed and the client has read every event; answered
    /// `204 No Content`, which stops a browser's reconnecting.
    ///
    /// ```
    /// use celer::sse::Hub;
    /// let hub = Hub::new();
    /// hub.close();
    /// let req = celer::Request::builder().uri("/").body(()).unwrap();
    /// assert!(hub.subscribe(&req).unwrap_err().is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.kind == SubscribeErrorKind::Closed
    }
}

impl fmt::Display for SubscribeError {
    /// The wording is not part of the API.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.kind {
            SubscribeErrorKind::Full => "too many subscribers",
            SubscribeErrorKind::Closed => "hub is closed",
        })
    }
}

impl std::error::Error for SubscribeError {}

impl IntoResponse for SubscribeError {
    fn into_response(self) -> Response {
        match self.kind {
            SubscribeErrorKind::Full => {
                tracing::debug!(target: "celer::sse", "subscriber refused: too many subscribers");
                let mut res =
                    (StatusCode::SERVICE_UNAVAILABLE, "too many subscribers\n").into_response();
                res.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
                res
            }
            // HTML Living Standard §9.2.3: a 204 tells an EventSource to
            // stop reconnecting.
            SubscribeErrorKind::Closed => StatusCode::NO_CONTENT.into_response(),
        }
    }
}

/// Whether the client prefers gzip to the identity coding (RFC 9110
/// §12.5.3): browsers send `gzip` among others.
fn accepts_gzip(headers: &http::HeaderMap) -> bool {
    crate::files::encoding::preferred(headers).any(|coding| coding == Coding::Gzip)
}

#[cfg(test)]
mod tests;
