//! The `text/event-stream` response and its body: one frame per event,
//! comment heartbeats while idle, the end at an event boundary on shutdown.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use futures_util::Stream;
use http::header::{self, HeaderValue};
use http_body::{Frame, SizeHint};
use tokio::time::{Instant, Sleep};

use super::event::Event;
use super::gzip::{Coder, Segment};
use super::hub::{Chunk, Subscriber};
use crate::response::{IntoResponse, Response};
use crate::{Body, BoxError, Request};

/// How long a stream may stay silent before a comment line is sent, by
/// default: 15 seconds, under the 30 to 60 second idle timeouts of common
/// proxies and load balancers.
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(15);

/// The comment a heartbeat sends; browsers ignore it.
const HEARTBEAT: &[u8] = b":\n\n";

/// A `text/event-stream` response: the events of a stream or of a
/// [`Hub`](super::Hub) subscription, each sent as soon as it is ready.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use std::time::Duration;
/// use celer::sse::{Event, EventStream};
/// use celer::{App, Request};
/// use futures_util::stream;
/// use tower::ServiceExt;
///
/// let mut app = App::new();
/// app.get("/countdown", |req: Request| async move {
///     let events = stream::iter((1..=3).rev().map(|n| Event::new().data(n.to_string())));
///     EventStream::new(&req, events).heartbeat(Duration::from_secs(30))
/// });
///
/// let req = http::Request::get("/countdown").body(celer::Body::empty()).unwrap();
/// let res = app.oneshot(req).await.unwrap();
/// assert_eq!(res.headers()["content-type"], "text/event-stream");
/// assert_eq!(res.headers()["cache-control"], "no-cache");
/// let body = res.into_body().collect_bytes().await.unwrap();
/// assert_eq!(&body[..], b"data: 3\n\ndata: 2\n\ndata: 1\n\n");
/// # });
/// ```
///
/// - **Headers.** `Content-Type: text/event-stream`, `Cache-Control:
///   no-cache` (and so no caching by the
///   [`MicroCache`](crate::middleware::cache::MicroCache)),
///   `X-Accel-Buffering: no` (nginx and compatible proxies pass the events
///   on unbuffered), no `Content-Length`. The
///   [compression middleware](crate::middleware::compression) leaves event
///   streams alone.
/// - **Framing.** Each event is one body frame, which the server writes
///   as soon as the stream has nothing more ready: over HTTP/1.1 a chunk
///   (several when events are ready together), over HTTP/2 a DATA frame.
/// - **Heartbeats.** After [`heartbeat`](EventStream::heartbeat) of
///   silence (default [`DEFAULT_HEARTBEAT`]) a comment line goes out, so
///   proxies keep the connection open and a client that left is noticed.
/// - **End.** The stream ends when its source does, and when the app's
///   [`ShutdownNotice`](crate::ShutdownNotice) fires: at the next event
///   boundary, never inside an event, so the response finishes cleanly
///   and the server drains within its shutdown timeout. The browser then
///   reconnects (after [`retry`](EventStream::retry), if set) with
///   `Last-Event-ID`.
/// - An event that cannot be encoded ([`InvalidEvent`](super::InvalidEvent))
///   is skipped with a warning (target `celer::sse`); nothing of it is sent.
pub struct EventStream {
    source: Source,
    heartbeat: Option<Duration>,
    retry: Option<Duration>,
    shutdown: crate::ShutdownNotice,
    /// The response's coding: a hub's stream may be gzip-coded.
    coding: StreamCoding,
}

/// How an [`EventStream`]'s body is coded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StreamCoding {
    /// As encoded, and the same for every client.
    Identity,
    /// As encoded, for a client that did not ask for gzip from a hub that
    /// gzips: the response varies by `Accept-Encoding`.
    IdentityVaried,
    /// gzip-coded, from the hub's deflated copies of its events.
    Gzip,
}

enum Source {
    Events(Pin<Box<dyn Stream<Item = Event> + Send>>),
    Hub(Subscriber),
}

/// A frame of the body before coding.
enum Part {
    /// Encoded event-stream text.
    Plain(Bytes),
    /// A segment deflated once for every gzip-coded subscriber.
    Gzip(Segment),
}

/// The body of an [`EventStream`].
struct EventBody {
    source: Source,
    /// Sent before the source: the `retry` field.
    preamble: Option<Bytes>,
    /// A gzip-coded body's running CRC and length.
    gzip: Option<Coder>,
    heartbeat: Option<Heartbeat>,
    /// Checked before each frame (an atomic load).
    notice: crate::ShutdownNotice,
    /// Resolves when the app's shutdown starts; polled only when the body
    /// is about to wait, so a busy stream does not touch the notice's
    /// waiter list at every event.
    shutdown: Pin<Box<dyn Future<Output = ()> + Send>>,
    done: bool,
}

struct Heartbeat {
    interval: Duration,
    /// When the last frame went out.
    last_sent: Instant,
    /// Made at the first wait, so a stream that never waits needs no
    /// timer (nor a runtime with one).
    timer: Option<Pin<Box<Sleep>>>,
}

// ===== impl EventStream =====

impl EventStream {
    /// An event stream of `events`; it ends when they do, or when the app
    /// shuts down (the request gives its [`ShutdownNotice`](crate::ShutdownNotice)).
    ///
    /// ```
    /// use celer::sse::{Event, EventStream};
    /// use futures_util::StreamExt;
    ///
    /// async fn ticks(req: celer::Request) -> EventStream {
    ///     let interval = tokio::time::interval(std::time::Duration::from_secs(1));
    ///     let ticks = tokio_stream_like(interval).map(|n| Event::new().event("tick").data(n.to_string()));
    ///     EventStream::new(&req, ticks)
    /// }
    /// # fn tokio_stream_like(mut i: tokio::time::Interval) -> impl futures_util::Stream<Item = u64> + Send {
    /// #     futures_util::stream::unfold((i, 0u64), |(mut i, n)| async move { i.tick().await; Some((n, (i, n + 1))) })
    /// # }
    /// # let _ = ticks;
    /// ```
    pub fn new<S>(req: &Request, events: S) -> EventStream
    where
        S: Stream<Item = Event> + Send + 'static,
    {
        EventStream::with_source(req, Source::Events(Box::pin(events)))
    }

    /// A hub's stream; `varies` when the hub gzips (the subscriber's own
    /// coding is its `gzip`).
    pub(crate) fn from_hub(req: &Request, subscriber: Subscriber, varies: bool) -> EventStream {
        let coding = if subscriber.is_gzip() {
            StreamCoding::Gzip
        } else if varies {
            StreamCoding::IdentityVaried
        } else {
            StreamCoding::Identity
        };
        let mut stream = EventStream::with_source(req, Source::Hub(subscriber));
        stream.coding = coding;
        stream
    }

    fn with_source(req: &Request, source: Source) -> EventStream {
        EventStream {
            source,
            heartbeat: Some(DEFAULT_HEARTBEAT),
            retry: None,
            shutdown: req.shutdown_notice().clone(),
            coding: StreamCoding::Identity,
        }
    }

    /// Sets how long the stream may stay silent before a comment line is
    /// sent; `None` sends none.
    ///
    /// Default is [`DEFAULT_HEARTBEAT`], 15 seconds.
    ///
    /// ```
    /// use std::time::Duration;
    /// use celer::sse::EventStream;
    /// let req = celer::Request::builder().uri("/").body(()).unwrap();
    /// let stream = EventStream::new(&req, futures_util::stream::empty())
    ///     .heartbeat(Duration::from_secs(5));
    /// # let _ = stream;
    /// ```
    pub fn heartbeat(mut self, interval: impl Into<Option<Duration>>) -> Self {
        self.heartbeat = interval.into().filter(|interval| !interval.is_zero());
        self
    }

    /// Sends a `retry` field first: how long the browser waits before it
    /// reconnects once the stream ends (its own default is about 3
    /// seconds).
    ///
    /// Default is none.
    ///
    /// ```
    /// use std::time::Duration;
    /// use celer::sse::EventStream;
    /// let req = celer::Request::builder().uri("/").body(()).unwrap();
    /// let stream = EventStream::new(&req, futures_util::stream::empty())
    ///     .retry(Duration::from_secs(1));
    /// # let _ = stream;
    /// ```
    pub fn retry(mut self, retry: Duration) -> Self {
        self.retry = Some(retry);
        self
    }
}

impl fmt::Debug for EventStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let source = match self.source {
            Source::Events(_) => "events",
            Source::Hub(_) => "hub",
        };
        f.debug_struct("EventStream")
            .field("source", &source)
            .field("heartbeat", &self.heartbeat)
            .field("retry", &self.retry)
            .field("coding", &self.coding)
            .finish()
    }
}

impl IntoResponse for EventStream {
    fn into_response(self) -> Response {
        let preamble = self
            .retry
            .and_then(|retry| Event::new().retry(retry).encode().ok());
        let gzip = self.coding == StreamCoding::Gzip;
        let body = EventBody {
            source: self.source,
            preamble,
            gzip: gzip.then(Coder::default),
            heartbeat: self.heartbeat.map(|interval| Heartbeat {
                interval,
                last_sent: Instant::now(),
                timer: None,
            }),
            shutdown: Box::pin(self.shutdown.started()),
            notice: self.shutdown,
            done: false,
        };
        let mut res = Response::new(Body::new(body));
        let headers = res.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        // nginx (and proxies that copy it) buffer proxied responses unless
        // told otherwise; an event stream must pass event by event.
        headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
        if self.coding != StreamCoding::Identity {
            headers.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
        }
        if gzip {
            headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        }
        res
    }
}

// ===== impl Source =====

impl Source {
    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Part>> {
        match self {
            Source::Hub(subscriber) => subscriber.poll_next(cx).map(|chunk| {
                chunk.map(|chunk| match chunk {
                    Chunk::Plain(bytes) => Part::Plain(bytes),
                    Chunk::Gzip(segment) => Part::Gzip(segment),
                })
            }),
            Source::Events(events) => loop {
                let Some(event) = ready!(events.as_mut().poll_next(cx)) else {
                    return Poll::Ready(None);
                };
                match event.encode() {
                    Ok(bytes) if bytes.is_empty() => continue,
                    Ok(bytes) => return Poll::Ready(Some(Part::Plain(bytes))),
                    Err(err) => {
                        tracing::warn!(target: "celer::sse", error = %err, "event skipped");
                    }
                }
            },
        }
    }
}

// ===== impl EventBody =====

impl EventBody {
    fn sent(&mut self) {
        if let Some(heartbeat) = &mut self.heartbeat {
            heartbeat.last_sent = Instant::now();
        }
    }

    /// The frame for `part`, coded as the body is. Plain text on a
    /// gzip-coded body (a preamble, a heartbeat) goes as stored blocks.
    fn frame(&mut self, part: Part) -> Frame<Bytes> {
        self.sent();
        let bytes = match (&mut self.gzip, part) {
            (None, Part::Plain(bytes)) => bytes,
            (Some(coder), Part::Plain(bytes)) => coder.send(&Segment::stored(&bytes)),
            (Some(coder), Part::Gzip(segment)) => coder.send(&segment),
            // Never: a body has a coder exactly when its subscriber reads
            // deflated copies (both follow `Subscriber::is_gzip`). Were it
            // to happen, a comment line keeps the stream valid.
            (None, Part::Gzip(_)) => {
                debug_assert!(false, "a deflated event for a body that is not coded");
                Bytes::from_static(HEARTBEAT)
            }
        };
        Frame::data(bytes)
    }

    /// The end of the body: a gzip-coded one sends its trailer first.
    fn finish(&mut self) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.done = true;
        match &mut self.gzip {
            Some(coder) => Poll::Ready(Some(Ok(Frame::data(coder.finish())))),
            None => Poll::Ready(None),
        }
    }
}

impl http_body::Body for EventBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        // Checked between frames only: each frame is a whole event, so the
        // stream ends at an event boundary.
        if this.notice.is_started() {
            return this.finish();
        }
        if let Some(preamble) = this.preamble.take() {
            return Poll::Ready(Some(Ok(this.frame(Part::Plain(preamble)))));
        }
        match this.source.poll_next(cx) {
            Poll::Ready(Some(part)) => return Poll::Ready(Some(Ok(this.frame(part)))),
            Poll::Ready(None) => return this.finish(),
            Poll::Pending => {}
        }
        if let Some(heartbeat) = &mut this.heartbeat {
            if heartbeat.poll_due(cx).is_ready() {
                let part = Part::Plain(Bytes::from_static(HEARTBEAT));
                return Poll::Ready(Some(Ok(this.frame(part))));
            }
        }
        // About to wait: shutdown must wake this body too.
        if this.shutdown.as_mut().poll(cx).is_ready() {
            return this.finish();
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

// ===== impl Heartbeat =====

impl Heartbeat {
    /// Ready when the stream has been silent for the interval; otherwise
    /// the timer is armed for the moment it will have been.
    ///
    /// The timer is moved only when it fires, not at every event: a busy
    /// stream costs one timer update per interval, not one per event.
    fn poll_due(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let (last_sent, interval) = (self.last_sent, self.interval);
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(last_sent + interval)));
        loop {
            ready!(timer.as_mut().poll(cx));
            let now = Instant::now();
            let due = last_sent + interval;
            if now >= due {
                timer.as_mut().reset(now + interval);
                return Poll::Ready(());
            }
            // Events went out since the timer was set: wait for the rest.
            timer.as_mut().reset(due);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a subscriber costs the server besides its connection: the
    /// body in place (its heap parts are the subscriber's slot, the
    /// shutdown future and, once it waited, the heartbeat timer).
    #[test]
    fn an_event_body_stays_small() {
        assert!(
            std::mem::size_of::<EventBody>() <= 192,
            "{}",
            std::mem::size_of::<EventBody>()
        );
    }
}
