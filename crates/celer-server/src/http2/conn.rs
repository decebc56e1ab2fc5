//! One HTTP/2 connection (RFC 9113): streams accepted from the engine,
//! each answered by the service, all in the connection's own task.
//!
//! The [`Driver`]'s `poll` turns over three things: the streams in flight
//! (each answer is polled first in a reused box, so a stream answered at
//! once costs no allocation; one that waits keeps its box in a
//! `FuturesUnordered`), the engine's connection (accepting streams also writes
//! what the streams queued), and a timer (in [`ConnState`]) whose meaning
//! follows the state: the head timeout before the first stream, the
//! keep-alive timeout while no stream is open, a grace period after
//! `GOAWAY`. A new stream is accepted only when the service is ready,
//! so a slow service pushes back on the client through
//! `SETTINGS_MAX_CONCURRENT_STREAMS`.

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use std::os::unix::fs::FileExt;

use crate::http2::engine::{self, Connection, Reason, RecvStream, SendResponse, SendStream};
use bytes::{Bytes, BytesMut};
use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::task::AtomicWaker;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body::Body;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::{Instant, Sleep};
use tower_service::Service;

use crate::body::Incoming;
use crate::common::{ConnConfig, Deadline, Reject, date};
use crate::error::BoxError;
use crate::file::{FILE_CHUNK, SendFile};
use crate::http2::body::{H2Body, Handback};
use crate::http2::tunnel::Tunnel;
use crate::limits::{Limits, h2_stream_send_buffer};
use crate::shutdown::Watch;
use crate::upgrade::{self, ConnectProtocol, Upgraded};

/// How one stream ended, as far as the connection cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    /// Answered, or given up for a reason that is not the client's haste.
    Done,
    /// The client reset the stream before its response head was sent: the
    /// work it asked for was thrown away (what rapid reset abuses).
    Cancelled,
}

/// What the connection is doing, which decides what its timer means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Accepting streams.
    Open,
    /// `GOAWAY` sent; finishing the streams in flight.
    GoingAway,
}

/// Serves HTTP/2 on `io` (the client preface not yet read) until the client
/// leaves, the connection fails, or shutdown starts and the streams in
/// flight have finished.
pub(crate) async fn serve_connection<I, S, B>(
    io: I,
    service: S,
    config: Arc<ConnConfig>,
    mut shutdown: Watch,
) where
    I: AsyncRead + AsyncWrite + Unpin,
    S: Service<Request<Incoming>, Response = Response<B>>,
    S::Error: Into<BoxError>,
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let limits = &config.limits;
    let builder = builder(&config);
    let handshake = builder.handshake(io);
    let conn = tokio::select! {
        biased;
        () = poll_fn(|cx| shutdown.poll_started_mut(cx)) => return,
        done = tokio::time::timeout(limits.head_timeout, handshake) => match done {
            Ok(Ok(conn)) => conn,
            Ok(Err(err)) => {
                tracing::debug!(target: "celer::http2", error = %err, "handshake failed");
                return;
            }
            Err(_) => {
                tracing::debug!(target: "celer::http2", "preface timed out");
                return;
            }
        },
    };
    let state = ConnState {
        config: &config,
        shutdown,
        phase: Phase::Open,
        timer: Deadline::new(Instant::now() + limits.head_timeout),
        quiet: None,
        opened: 0,
        cancelled: 0,
    };
    let mut driver = Driver {
        conn,
        service,
        state,
        streams: FuturesUnordered::new(),
        batch: Vec::new(),
        scratch: None,
        answer,
        waker: ConnWaker::new(),
    };
    if let Err(err) = poll_fn(|cx| driver.poll(cx)).await {
        tracing::debug!(target: "celer::http2", error = %err, "connection closed");
    }
}

/// Drives one connection: the engine's connection, the service, and the
/// streams in flight, each answered by `answer` (the function, passed so
/// that the type of its future can be named here).
struct Driver<'a, I, S: Service<Request<Incoming>>, F, A> {
    conn: Connection<I>,
    service: S,
    state: ConnState<'a>,
    /// Streams whose answers wait (on the service, the client's window, a
    /// body): each in the box it was first polled in.
    streams: FuturesUnordered<Boxed<A>>,
    /// Streams accepted in this turn, not yet run.
    batch: Vec<Stream<'a, S::Future>>,
    /// The box the next stream's answer is first polled in; kept while
    /// answers finish at their first poll, so those cost no allocation.
    scratch: Option<Pin<Box<Option<A>>>>,
    answer: F,
    /// What the engine's connection is polled with: see [`ConnWaker`].
    waker: (Arc<ConnWaker>, Waker),
}

/// The waker the engine's connection holds. A response queued by an answer
/// this task is running wakes the connection, and a plain waker would
/// poll the whole task again only to find the frames already written by
/// the connection poll that follows the answers. While the driver is
/// inside its `poll`, a wake only marks the connection woken, and the
/// driver polls it again before it returns; outside, the wake reaches the
/// task (decision 168).
///
/// A few rounds per poll at most: past them the wake goes to the task,
/// which the runtime polls after its other work. (Tokio's budget wakes
/// the same way when it runs out: looping on such a wake would spin.)
#[derive(Default)]
struct ConnWaker {
    /// The task's waker, from its latest poll.
    task: AtomicWaker,
    /// The driver is inside its `poll`.
    polling: AtomicBool,
    /// Woken since the driver last began a poll of the connection.
    woken: AtomicBool,
}

impl Wake for ConnWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.polling.load(SeqCst) {
            self.woken.store(true, SeqCst);
            // Still inside: the driver sees the mark before it returns
            // (it leaves `polling` before its last look at `woken`).
            if self.polling.load(SeqCst) {
                return;
            }
        }
        self.task.wake();
    }
}

/// Rounds a driver's poll goes again because the connection was woken
/// inside it, at most.
const WOKEN_ROUNDS: u32 = 4;

impl ConnWaker {
    /// A waker of the connection, and its state.
    fn new() -> (Arc<ConnWaker>, Waker) {
        let state = Arc::new(ConnWaker::default());
        let waker = Waker::from(state.clone());
        (state, waker)
    }

    /// The driver enters its poll, by `cx`.
    fn enter(&self, cx: &Context<'_>) {
        self.task.register(cx.waker());
        self.polling.store(true, SeqCst);
    }

    /// The connection is about to be polled: wakes until now are answered.
    fn polled(&self) {
        self.woken.store(false, SeqCst);
    }

    /// The driver would return pending: true when it should go round
    /// again instead (woken inside, and `rounds` not used up); otherwise
    /// it has left, and a wake that came too late or too often has
    /// reached the task.
    fn leave(&self, rounds: &mut u32) -> bool {
        self.polling.store(false, SeqCst);
        if !self.woken.swap(false, SeqCst) {
            return false;
        }
        if *rounds < WOKEN_ROUNDS {
            *rounds += 1;
            self.polling.store(true, SeqCst);
            return true;
        }
        self.task.wake();
        false
    }
}

impl<'a, I, S, B, F, A> Driver<'a, I, S, F, A>
where
    I: AsyncRead + AsyncWrite + Unpin,
    S: Service<Request<Incoming>, Response = Response<B>>,
    S::Error: Into<BoxError>,
    F: FnMut(Stream<'a, S::Future>) -> A,
    A: Future<Output = Ended>,
{
    /// One turn: finish what streams can, react to shutdown and the timer,
    /// accept new streams. Ready when the connection is over.
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), engine::Error>> {
        let Driver {
            conn,
            service,
            state,
            streams,
            batch,
            scratch,
            answer,
            waker,
        } = self;
        let (waker, conn_waker) = &*waker;
        waker.enter(cx);
        let mut conn_cx = Context::from_waker(conn_waker);
        let mut rounds = 0;
        loop {
            // An empty set is not polled: it has nothing to finish, and a
            // poll would touch its queue (allocations of their own) on
            // every turn of a connection whose answers all finish at once.
            while !streams.is_empty()
                && let Poll::Ready(Some(ended)) = streams.poll_next_unpin(cx)
            {
                state.ended(ended, conn);
            }
            if state.phase == Phase::Open && state.shutdown.poll_started_mut(cx).is_ready() {
                state.go_away(conn);
            }
            if streams.is_empty() {
                if state.poll_quiet(cx) {
                    if state.phase == Phase::GoingAway {
                        // The client would not read what was left to send.
                        return Poll::Ready(Ok(()));
                    }
                    state.go_away(conn);
                    continue;
                }
            } else {
                state.quiet = None;
            }
            // Accept every stream the engine has read before running any: their
            // answers then queue together and leave in one write when the
            // connection is next polled (accepting one stream at a time
            // wrote once per response). While the service is not ready,
            // streams wait in the engine's accept queue (bounded by the
            // concurrent-stream limit); the connection is still driven so
            // responses in flight go out.
            let mut accepted = false;
            let mut service_busy = false;
            loop {
                match service.poll_ready(cx) {
                    Poll::Ready(Ok(())) => {}
                    Poll::Ready(Err(err)) => {
                        let err: BoxError = err.into();
                        tracing::error!(target: "celer::http2", error = %err, "service failed");
                        conn.abrupt_shutdown(Reason::INTERNAL_ERROR);
                        service_busy = true;
                        break;
                    }
                    Poll::Pending => {
                        service_busy = true;
                        break;
                    }
                }
                waker.polled();
                match conn.poll_accept(&mut conn_cx) {
                    Poll::Ready(Some(Ok((request, respond)))) => {
                        state.opened += 1;
                        // A new stream ends the quiet spell even if it is
                        // answered before `streams` is next seen non-empty.
                        state.quiet = None;
                        batch.push(state.start(service, request, respond));
                        accepted = true;
                    }
                    Poll::Ready(Some(Err(err))) => return Poll::Ready(Err(err)),
                    Poll::Ready(None) => return Poll::Ready(Ok(())),
                    Poll::Pending => break,
                }
            }
            // Each answer is polled once here, in the scratch box: most
            // finish at once (a ready service, a body sent in one piece)
            // and leave the box for the next; one that waits keeps its box
            // (the future does not move) and joins `streams`.
            for stream in batch.drain(..) {
                let mut slot = scratch.take().unwrap_or_else(|| Box::pin(None));
                slot.set(Some(answer(stream)));
                let polled = match slot.as_mut().as_pin_mut() {
                    Some(fut) => fut.poll(cx),
                    None => Poll::Ready(Ended::Done),
                };
                match polled {
                    Poll::Ready(ended) => {
                        slot.set(None);
                        *scratch = Some(slot);
                        state.ended(ended, conn);
                    }
                    Poll::Pending => streams.push(Boxed(slot)),
                }
            }
            if service_busy {
                waker.polled();
                let closed = conn.poll_closed(&mut conn_cx);
                if closed.is_ready() || !waker.leave(&mut rounds) {
                    return closed;
                }
                continue;
            }
            // Streams that queued frames have marked the connection woken,
            // so it is polled again to write them.
            if !accepted && !waker.leave(&mut rounds) {
                return Poll::Pending;
            }
        }
    }
}

/// A stream's answer that did not finish at its first poll, in the box it
/// was first polled in (`None` once it has finished there, which a
/// `Boxed` never holds).
struct Boxed<F>(Pin<Box<Option<F>>>);

impl<F: Future<Output = Ended>> Future for Boxed<F> {
    type Output = Ended;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Ended> {
        match self.0.as_mut().as_pin_mut() {
            Some(fut) => fut.poll(cx),
            None => Poll::Ready(Ended::Done),
        }
    }
}

/// The engine's settings from the limits, and
/// `SETTINGS_ENABLE_CONNECT_PROTOCOL` when the service takes extended
/// CONNECT (RFC 8441 §3).
fn builder(config: &ConnConfig) -> engine::Builder {
    let limits = &config.limits;
    let mut b = engine::Builder::new();
    if config.extended_connect {
        b.enable_connect_protocol();
    }
    b.max_concurrent_streams(limits.h2_max_concurrent_streams)
        .initial_window_size(limits.h2_stream_window)
        .initial_connection_window_size(limits.h2_connection_window)
        .max_frame_size(limits.h2_max_frame_size.clamp(1 << 14, (1 << 24) - 1))
        .max_header_list_size(u32::try_from(limits.max_head_bytes).unwrap_or(u32::MAX))
        .max_send_buffer_size(h2_stream_send_buffer(limits.h2_max_concurrent_streams));
    b
}

/// The connection's own state, apart from the engine's connection and streams.
struct ConnState<'a> {
    config: &'a ConnConfig,
    shutdown: Watch,
    phase: Phase,
    timer: Deadline,
    /// When the current spell with no stream in flight ends.
    quiet: Option<Instant>,
    opened: u64,
    cancelled: u64,
}

impl<'a> ConnState<'a> {
    /// Counts a stream that ended; applies the rapid-reset rule
    /// (CVE-2023-44487): more cancelled streams than the limit, and more
    /// than half of all streams opened, close the connection.
    fn ended<I: AsyncRead + AsyncWrite + Unpin>(&mut self, ended: Ended, conn: &mut Connection<I>) {
        if ended != Ended::Cancelled {
            return;
        }
        self.cancelled += 1;
        if self.phase == Phase::Open
            && self.cancelled > self.config.limits.h2_max_cancelled_streams
            && self.cancelled * 2 > self.opened
        {
            tracing::debug!(target: "celer::http2", cancelled = self.cancelled, "rapid reset: closing the connection");
            conn.abrupt_shutdown(Reason::ENHANCE_YOUR_CALM);
            self.phase = Phase::GoingAway;
            self.quiet = None;
        }
    }

    /// With no stream in flight: true once the quiet spell's deadline has
    /// passed (the head timeout before the first stream, the keep-alive
    /// timeout after, the write timeout once `GOAWAY` is sent).
    fn poll_quiet(&mut self, cx: &mut Context<'_>) -> bool {
        let limits = &self.config.limits;
        let deadline = *self.quiet.get_or_insert_with(|| {
            Instant::now()
                + match self.phase {
                    Phase::Open if self.opened == 0 => limits.head_timeout,
                    Phase::Open => limits.keep_alive_timeout,
                    Phase::GoingAway => limits.write_timeout,
                }
        });
        if self.timer.poll(deadline, cx).is_ready() {
            self.quiet = None;
            return true;
        }
        false
    }

    /// Sends `GOAWAY`: streams already opened finish, no new ones start.
    fn go_away<I: AsyncRead + AsyncWrite + Unpin>(&mut self, conn: &mut Connection<I>) {
        if self.phase == Phase::Open {
            conn.graceful_shutdown();
            self.phase = Phase::GoingAway;
            self.quiet = None;
        }
    }

    /// Checks a new stream's request against the limits and calls the
    /// service, or answers at once.
    fn start<S, B>(
        &self,
        service: &mut S,
        request: Request<RecvStream>,
        respond: SendResponse,
    ) -> Stream<'a, S::Future>
    where
        S: Service<Request<Incoming>, Response = Response<B>>,
    {
        let config = self.config;
        let is_head = request.method() == Method::HEAD;
        let (mut parts, recv) = request.into_parts();
        // A `Host` the engine made from `:authority` is not one of the
        // client's fields: it does not count against their number.
        let added = usize::from(recv.host_added());
        let declared = match check(&parts, &config.limits, added) {
            Ok(declared) => declared,
            Err(reject) => {
                return Stream {
                    config,
                    respond,
                    is_head,
                    handback: None,
                    tunnel: None,
                    call: Call::Rejected(reject),
                };
            }
        };
        // The engine gives the request as HTTP/1.1 does: the host in
        // `Host` and the target in origin form (CONNECT in authority form).
        // RFC 8441 §4: an extended CONNECT (the engine admits `:protocol` only
        // when the setting was sent, and only on CONNECT). The request
        // stream is the tunnel's, not a body: the service sees none.
        if let Some(protocol) = parts.extensions.remove::<engine::Protocol>() {
            let (on, pending) = upgrade::pending();
            parts
                .extensions
                .insert(ConnectProtocol::new(protocol.as_str()));
            parts.extensions.insert(on);
            let request = Request::from_parts(parts, Incoming::empty());
            return Stream {
                config,
                respond,
                is_head,
                handback: None,
                tunnel: Some(Box::new(TunnelStart {
                    recv,
                    pending,
                    watch: self.shutdown.fork(),
                })),
                call: Call::Service(service.call(request)),
            };
        }
        let limits = &config.limits;
        let (body, handback) = if recv.is_end_stream() {
            // No body (a GET, most requests): no `H2Body` to allocate. The
            // stream stays open through `respond`.
            drop(recv);
            (Incoming::empty(), None)
        } else {
            let handback = Handback::default();
            let body = H2Body::new(
                recv,
                declared,
                limits.max_body_bytes,
                limits.body_timeout,
                Some(handback.clone()),
            );
            (Incoming::h2(body), Some(handback))
        };
        let request = Request::from_parts(parts, body);
        Stream {
            config,
            respond,
            is_head,
            handback,
            tunnel: None,
            call: Call::Service(service.call(request)),
        }
    }
}

/// The HTTP/1.1 engine's request limits, applied to an HTTP/2 head; the
/// declared body length when they hold. The header list size is enforced
/// by the engine itself (`max_header_list_size`).
fn check(
    parts: &http::request::Parts,
    limits: &Limits,
    added: usize,
) -> Result<Option<u64>, Reject> {
    let reject = |status, reason| Err(Reject::new(status, reason));
    if parts.headers.len() - added > limits.max_headers {
        return reject(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "too many header fields",
        );
    }
    let target = parts.uri.path_and_query().map_or(0, |p| p.as_str().len());
    if target > limits.max_uri_bytes {
        return reject(StatusCode::URI_TOO_LONG, "request target too long");
    }
    let declared = parts.headers.get(header::CONTENT_LENGTH);
    let length = declared.and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some() && length.is_none() {
        return reject(StatusCode::BAD_REQUEST, "invalid content-length");
    }
    if let (Some(n), Some(max)) = (length, limits.max_body_bytes) {
        if n > max {
            return reject(StatusCode::PAYLOAD_TOO_LARGE, "request body too large");
        }
    }
    Ok(length)
}

/// One stream: the service's answer, or the engine's refusal.
enum Call<F> {
    Service(F),
    Rejected(Reject),
}

/// One stream in flight, before it becomes a future.
struct Stream<'a, F> {
    config: &'a ConnConfig,
    respond: SendResponse,
    is_head: bool,
    /// Where the request stream comes back if the service drops its body
    /// before the client finished sending it.
    handback: Option<Handback>,
    /// An extended CONNECT's stream, for the tunnel a `2xx` opens (boxed:
    /// rare, and every stream's future would carry it inline).
    tunnel: Option<Box<TunnelStart>>,
    call: Call<F>,
}

/// What an extended CONNECT's tunnel is made of once the service says yes.
struct TunnelStart {
    recv: RecvStream,
    pending: upgrade::Pending,
    watch: Watch,
}

/// Answers one stream: waits for the service (or gives up when the client
/// resets the stream), then sends the head and streams the body within the
/// client's flow-control window.
async fn answer<F, B, E>(stream: Stream<'_, F>) -> Ended
where
    F: Future<Output = Result<Response<B>, E>>,
    E: Into<BoxError>,
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let Stream {
        config,
        mut respond,
        is_head,
        handback,
        tunnel,
        call,
    } = stream;
    let response = match call {
        Call::Rejected(reject) => rejection(reject),
        Call::Service(fut) => {
            let mut fut = std::pin::pin!(fut);
            let outcome = poll_fn(|cx| {
                if let Poll::Ready(res) = fut.as_mut().poll(cx) {
                    return Poll::Ready(Some(res));
                }
                // A reset (or a connection gone) makes the work pointless.
                respond.poll_reset(cx).map(|_| None)
            })
            .await;
            match outcome {
                None => return Ended::Cancelled,
                Some(Ok(response)) => response.map(Some),
                Some(Err(err)) => {
                    let err: BoxError = err.into();
                    tracing::error!(target: "celer::http2", error = %err, "service failed");
                    rejection(Reject {
                        status: StatusCode::INTERNAL_SERVER_ERROR,
                        reason: "internal server error",
                    })
                }
            }
        }
    };
    if let Some(tunnel) = tunnel {
        // RFC 9113 §8.5, RFC 8441 §5: a 2xx makes the stream a tunnel;
        // any other answer is an ordinary response (and the request
        // stream is reset by the engine once it is sent).
        if response.status().is_success() && response.body().is_some() && tunnel.pending.is_wanted()
        {
            return open_tunnel(respond, response, *tunnel, config).await;
        }
    }
    // The service answered without reading all of the request: read the
    // rest first (as HTTP/1.1 drains it), so that a request the client
    // resets or that turns out malformed is answered by the engine's reset, not
    // by a response that raced it.
    let unread = handback.and_then(|slot| slot.lock().ok()?.take());
    if let Some(mut recv) = unread {
        // Boxed: the drain and its timer are rare, and inline they would
        // make every stream's future (moved into `streams`) larger.
        if !Box::pin(drain(&mut recv, &config.limits)).await {
            return Ended::Done;
        }
    }
    let (mut parts, body) = response.into_parts();
    let Some(body) = body else {
        return send_whole(&mut respond, parts, config, is_head);
    };
    if parts.status.is_informational() {
        // A final response cannot be 1xx, and HTTP/2 has no upgrade.
        tracing::error!(target: "celer::http2", status = %parts.status, "informational status as a final response");
        let reject = Reject {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            reason: "internal server error",
        };
        let (parts, _) = rejection::<()>(reject).into_parts();
        return send_whole(&mut respond, parts, config, is_head);
    }
    let bodiless = is_head || !status_has_body(parts.status);
    let exact = body.size_hint().exact();
    let declared = prepare_head(
        &mut parts.headers,
        config,
        exact.filter(|_| !bodiless || is_head),
    );
    let end = bodiless || body.is_end_stream();
    // A file region the body also names (the contract `SendFile` documents):
    // read straight from the file as the client's window opens, never
    // ahead of it.
    let region = parts
        .extensions
        .remove::<SendFile>()
        .filter(|region| !end && exact == Some(region.len()) && declared == exact);
    let head = Response::from_parts(parts, ());
    let send = match respond.send_response(&head, end) {
        Ok(send) => send,
        Err(err) => {
            tracing::debug!(target: "celer::http2", error = %err, "response head not sent");
            return Ended::Done;
        }
    };
    let write_timeout = config.limits.write_timeout;
    match region {
        Some(region) => {
            drop(body);
            send_region(send, &region, write_timeout).await;
        }
        None if !end => send_body(send, body, declared, write_timeout).await,
        None => {}
    }
    Ended::Done
}

/// Answers an extended CONNECT with the service's `2xx` head (its body, if
/// any, is not sent: the stream's DATA is the tunnel's, RFC 9113 §8.5) and
/// hands the stream to the service; the stream counts as in flight (for
/// the concurrent-stream limit and the drain at shutdown) until the
/// service drops it.
async fn open_tunnel<B>(
    mut respond: SendResponse,
    response: Response<B>,
    tunnel: TunnelStart,
    config: &ConnConfig,
) -> Ended {
    let (mut parts, body) = response.into_parts();
    drop(body);
    prepare_head(&mut parts.headers, config, None);
    // RFC 9110 §8.6: no `content-length` in a 2xx to CONNECT.
    parts.headers.remove(header::CONTENT_LENGTH);
    let head = Response::from_parts(parts, ());
    let send = match respond.send_response(&head, false) {
        Ok(send) => send,
        Err(err) => {
            tracing::debug!(target: "celer::http2", error = %err, "tunnel head not sent");
            return Ended::Done;
        }
    };
    let TunnelStart {
        recv,
        pending,
        watch,
    } = tunnel;
    let (stream, over) = Tunnel::new(send, recv);
    pending.fulfill(Upgraded::new(Box::new(stream), &[], watch));
    // Resolves (as an error) when the service drops the tunnel.
    let _ = over.await;
    Ended::Done
}

/// Reads and discards the rest of a request stream, giving its window
/// back; false when the stream failed (reset by the client, or malformed:
/// the engine has reset it), true when it ended or the drain limit or body
/// timeout was reached first (the response then goes out and the engine resets
/// what is left of the request).
async fn drain(recv: &mut RecvStream, limits: &Limits) -> bool {
    let mut left = limits.max_drain_bytes;
    let read = async {
        while let Some(data) = recv.data().await {
            let Ok(data) = data else { return false };
            recv.release_capacity(data.len());
            match left.checked_sub(data.len() as u64) {
                Some(rest) => left = rest,
                None => return true,
            }
        }
        recv.trailers().await.is_ok()
    };
    tokio::time::timeout(limits.body_timeout, read)
        .await
        .unwrap_or(true)
}

/// Sends a response with no body to stream: the engine's own answers.
fn send_whole(
    respond: &mut SendResponse,
    parts: http::response::Parts,
    config: &ConnConfig,
    is_head: bool,
) -> Ended {
    let mut parts = parts;
    let text = parts
        .extensions
        .remove::<RejectText>()
        .map(|t| t.0)
        .unwrap_or_default();
    let bodiless = is_head || !status_has_body(parts.status) || text.is_empty();
    prepare_head(&mut parts.headers, config, Some(text.len() as u64));
    let head = Response::from_parts(parts, ());
    match respond.send_response(&head, bodiless) {
        Ok(mut send) if !bodiless => {
            // At most a short reason: within the initial window, no wait.
            let _ = send.send_data(text, true);
        }
        Ok(_) => {}
        Err(err) => tracing::debug!(target: "celer::http2", error = %err, "response not sent"),
    }
    Ended::Done
}

/// The engine's answer to a refused request: a status and a one-line
/// reason (carried in the extensions until it is sent).
fn rejection<B>(reject: Reject) -> Response<Option<B>> {
    let (parts, text) = reject.response().into_parts();
    let mut response = Response::from_parts(parts, None);
    response
        .extensions_mut()
        .insert(RejectText(Bytes::from(text)));
    response
}

/// The body of an engine's answer, until it is sent.
#[derive(Debug, Clone)]
struct RejectText(Bytes);

/// True unless the status forbids a body (RFC 9110 §6.4.1).
fn status_has_body(status: StatusCode) -> bool {
    !(status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED)
}

/// Makes a service's header fields fit for HTTP/2: drops the
/// connection-specific fields HTTP/2 forbids (RFC 9113 §8.2.2), adds
/// `content-length` when the body's length is known, `date`, `server` and
/// `strict-transport-security` as the HTTP/1.1 engine does. Returns the
/// `content-length` the head declares (the service's, else `length`).
fn prepare_head(headers: &mut HeaderMap, config: &ConnConfig, length: Option<u64>) -> Option<u64> {
    // One pass comparing names (standard names compare as enum tags),
    // instead of hashing each name the engine looks for.
    let (mut forbidden, mut has_length, mut has_date, mut has_server, mut has_hsts) =
        (false, false, false, false, false);
    for name in headers.keys() {
        if name == header::CONTENT_LENGTH {
            has_length = true;
        } else if name == header::DATE {
            has_date = true;
        } else if name == header::SERVER {
            has_server = true;
        } else if name == header::STRICT_TRANSPORT_SECURITY {
            has_hsts = true;
        } else if name == header::CONNECTION
            || name == header::TRANSFER_ENCODING
            || name == header::UPGRADE
            || name.as_str() == "keep-alive"
            || name.as_str() == "proxy-connection"
        {
            forbidden = true;
        }
    }
    if forbidden {
        for name in [
            header::CONNECTION,
            header::TRANSFER_ENCODING,
            header::UPGRADE,
            header::HeaderName::from_static("keep-alive"),
            header::HeaderName::from_static("proxy-connection"),
        ] {
            headers.remove(name);
        }
    }
    let declared = if has_length {
        headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
    } else {
        if let Some(len) = length {
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
        }
        length
    };
    if !has_date {
        headers.insert(header::DATE, date::date_value());
    }
    if let (Some(server), false) = (&config.server_header, has_server) {
        headers.insert(header::SERVER, server.clone());
    }
    if let (Some(hsts), false) = (&config.hsts, has_hsts) {
        headers.insert(header::STRICT_TRANSPORT_SECURITY, hsts.clone());
    }
    declared
}

/// Streams `body` on `send`: each piece waits for flow-control capacity
/// (at most the write timeout, then the stream is reset), except a last
/// piece of at most [`QUEUE_AT_ONCE`] bytes, which is queued at once;
/// trailers end the stream when the body has them. A client reset stops
/// it. A body that disagrees with its `content-length` (`declared`) is
/// reset with `INTERNAL_ERROR` rather than ended as if it were whole
/// (RFC 9113 §8.1.1).
async fn send_body<B>(mut send: SendStream, body: B, declared: Option<u64>, write_timeout: Duration)
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let mut body = std::pin::pin!(body);
    let mut left = declared;
    let short = |left: Option<u64>| left.is_some_and(|n| n > 0);
    // A body small enough to be queued at once is read at once (most
    // responses: no capacity reservation, ~500 instructions saved).
    let small = body
        .size_hint()
        .upper()
        .is_some_and(|n| n <= QUEUE_AT_ONCE as u64);
    loop {
        // Anything larger is read only once the client's window lets some
        // of it go: a client that opens streams and never reads makes the
        // server read nothing (without this, each stalled stream held a
        // piece of up to 64 KiB read ahead).
        let upper = body.size_hint().upper();
        if !small && upper != Some(0) {
            let want = upper.map_or(READ_AHEAD, |n| n.min(READ_AHEAD as u64) as usize);
            if wait_capacity(&mut send, want, write_timeout)
                .await
                .is_none()
            {
                send.send_reset(Reason::CANCEL);
                return;
            }
        }
        let mut released = false;
        let frame = poll_fn(|cx| {
            if let Poll::Ready(frame) = body.as_mut().poll_frame(cx) {
                return Poll::Ready(Some(frame));
            }
            // The body has nothing to give yet (an event stream waiting for
            // its next event): the window reserved for it goes back to the
            // connection, or a stream that waits on its source would hold
            // window every other stream of the connection needs.
            if !released {
                send.reserve_capacity(0);
                released = true;
            }
            // Watched only while the body has nothing to give: a reset
            // that comes while frames flow fails the next send instead.
            send.poll_reset(cx).map(|_| None)
        })
        .await;
        let frame = match frame {
            // The client reset the stream.
            None => return,
            Some(None) if short(left) => break,
            Some(None) => {
                let _ = send.send_data(Bytes::new(), true);
                return;
            }
            Some(Some(Err(err))) => {
                let err: BoxError = err.into();
                tracing::debug!(target: "celer::http2", error = %err, "response body failed");
                break;
            }
            Some(Some(Ok(frame))) => frame,
        };
        let mut data = match frame.into_data() {
            Ok(data) => data,
            Err(_) if short(left) => break,
            Err(frame) => {
                if let Ok(trailers) = frame.into_trailers() {
                    let _ = send.send_trailers(trailers);
                }
                return;
            }
        };
        if let Some(n) = left.as_mut() {
            match n.checked_sub(data.len() as u64) {
                Some(rest) => *n = rest,
                None => break,
            }
        }
        let last = body.is_end_stream() && !short(left);
        if data.is_empty() && !last {
            continue;
        }
        if last && data.len() <= QUEUE_AT_ONCE {
            // The engine sends it as the client's window allows; the stream
            // counts against the concurrent-stream limit until it has.
            let _ = send.send_data(data, true);
            return;
        }
        loop {
            let Some(granted) = wait_capacity(&mut send, data.len(), write_timeout).await else {
                // The client stopped reading (or reset the stream).
                send.send_reset(Reason::CANCEL);
                return;
            };
            let piece = data.split_to(granted.min(data.len()));
            let end = last && data.is_empty();
            if send.send_data(piece, end).is_err() || end {
                return;
            }
            if data.is_empty() {
                break;
            }
        }
    }
    tracing::error!(target: "celer::http2", ?declared, "response body disagrees with its content-length");
    send.send_reset(Reason::INTERNAL_ERROR);
}

/// The largest last piece of a response body that is queued without
/// waiting for flow-control window: one frame of the default size
/// (16 KiB), which a client with the default 64 KiB stream window takes at
/// once. A client that never opens its window holds at most this much per
/// stream, within the concurrent-stream limit, until the keep-alive and
/// write timeouts close the connection. Skipping the wait (a capacity
/// reservation and a check) saves about 500 instructions on a small
/// response.
const QUEUE_AT_ONCE: usize = 16 * 1024;

/// Most response bytes a stream asks the client's window for before it
/// reads the next piece of a body of unknown or large size: the piece
/// size of a file body.
const READ_AHEAD: usize = FILE_CHUNK;

/// Sends a file region on `send`, each read no larger than the
/// flow-control capacity the client has granted (at most [`FILE_CHUNK`]):
/// a stalled client makes the server read nothing, and what is read goes
/// straight to the engine. A file shorter than the region resets the stream with
/// `INTERNAL_ERROR` (RFC 9113 §8.1.1) rather than ending it short; a client
/// that does not open its window within the write timeout gets `CANCEL`.
async fn send_region(mut send: SendStream, region: &SendFile, write_timeout: Duration) {
    let mut offset = region.offset();
    let mut left = region.len();
    while left > 0 {
        let want = usize::try_from(left).map_or(FILE_CHUNK, |n| n.min(FILE_CHUNK));
        let Some(granted) = wait_capacity(&mut send, want, write_timeout).await else {
            send.send_reset(Reason::CANCEL);
            return;
        };
        let mut buf = BytesMut::zeroed(granted.min(want));
        // Served from the page cache in the common case, as `FileBody`.
        let n = loop {
            match region.file().read_at(&mut buf, offset) {
                Ok(n) => break n,
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
                Err(err) => {
                    tracing::debug!(target: "celer::http2", error = %err, "file read failed");
                    send.send_reset(Reason::INTERNAL_ERROR);
                    return;
                }
            }
        };
        if n == 0 {
            tracing::error!(target: "celer::http2", "file shorter than the response's length");
            send.send_reset(Reason::INTERNAL_ERROR);
            return;
        }
        buf.truncate(n);
        offset += n as u64;
        left -= n as u64;
        if send.send_data(buf.freeze(), left == 0).is_err() {
            return;
        }
    }
}

/// Waits until the stream may send some of `want` bytes; `None` when the
/// client has not opened its window within `write_timeout`, or the stream
/// is gone. Zero bytes need no capacity.
async fn wait_capacity(
    send: &mut SendStream,
    want: usize,
    write_timeout: Duration,
) -> Option<usize> {
    if want == 0 {
        return Some(0);
    }
    send.reserve_capacity(want);
    let mut timer: Option<Pin<Box<Sleep>>> = None;
    poll_fn(|cx| {
        if send.capacity() > 0 {
            return Poll::Ready(Some(send.capacity()));
        }
        match send.poll_capacity(cx) {
            Poll::Ready(Some(Ok(n))) if n > 0 => return Poll::Ready(Some(n)),
            Poll::Ready(Some(Ok(_))) | Poll::Pending => {}
            Poll::Ready(Some(Err(_)) | None) => return Poll::Ready(None),
        }
        let timer = timer.get_or_insert_with(|| Box::pin(tokio::time::sleep(write_timeout)));
        if timer.as_mut().poll(cx).is_ready() {
            return Poll::Ready(None);
        }
        Poll::Pending
    })
    .await
}

#[cfg(test)]
mod tests;
