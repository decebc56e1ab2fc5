//! One HTTP/1.1 connection: keep-alive, pipelining, request bodies with
//! backpressure and 100-continue, response framing, upgrades, timeouts.
//!
//! The driver is a loop over requests. Each turn parses a head from the read
//! buffer, calls the service, and encodes the response into the write buffer.
//! Output is flushed only when the connection would otherwise wait (for the
//! client, for the service, or for a body), so answers to pipelined requests
//! leave in one write. While the service runs, the same task feeds the
//! request body from the socket, but only as fast as the service reads it.

use std::future::{Future, poll_fn};
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker, ready};

use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderValue};
use http::{HeaderMap, Request, Response, StatusCode};
use http_body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::time::{Instant, Sleep};
use tower_service::Service;

use crate::body::{Demand, Incoming, Sender};
use crate::error::{BoxError, Error, Kind};
use crate::file::SendFile;
use crate::http1::decode::{Decoded, Decoder};
use crate::http1::encode::{self, Encoder, ReqFacts, ServerHeader};
use crate::http1::io::{self as bufio, WriteBuf};
use crate::http1::parse::{self, BodyLen, Head, Parsed, Reject};
use crate::http2;
use crate::limits::Limits;
use crate::prefixed::Prefixed;
use crate::shutdown::{Shutdown, Watch};
use crate::transport::Transport;
use crate::upgrade::{self, Upgraded};

/// Output at least this large is flushed before more requests are answered.
const FLUSH_HIGH_WATER: usize = 64 * 1024;

/// File bodies at least this large go out with `sendfile(2)` when the
/// transport can; smaller ones are copied so that they leave in the same
/// write as their head.
const SEND_FILE_MIN: u64 = 16 * 1024;

/// Largest single read while streaming a body.
const BODY_READ_MAX: usize = 64 * 1024;

/// Bytes read and discarded at most while lingering before a close.
const LINGER_MAX: usize = 64 * 1024;

/// Longest linger before a close (shorter when the head timeout is).
const LINGER_TIME: std::time::Duration = std::time::Duration::from_secs(2);

/// Settings shared by every connection of a server.
#[derive(Debug, Clone)]
pub struct Http1Config {
    /// The limits enforced on each connection.
    pub limits: Limits,
    /// The `Server` header value, or `None` to send none.
    pub server_header: ServerHeader,
    /// The `Strict-Transport-Security` value added to every response, or
    /// `None` (the default) to add none.
    pub hsts: Option<HeaderValue>,
    /// Serve a connection that opens with the HTTP/2 preface as HTTP/2
    /// (prior knowledge, RFC 9113 §3.3). Default is true.
    pub http2: bool,
}

impl Default for Http1Config {
    fn default() -> Self {
        Http1Config {
            limits: Limits::default(),
            server_header: ServerHeader::default(),
            hsts: None,
            http2: true,
        }
    }
}

/// Serves HTTP/1.1 on `io` until the client leaves, an error closes the
/// connection, or shutdown starts and the connection becomes idle.
///
/// The connection's state is built before the future exists and the future
/// uses it in place: an `async fn` would rebind its arguments inside the
/// future and keep both copies for the connection's whole life.
pub fn serve_connection<I, S, B>(
    io: I,
    service: S,
    config: Arc<Http1Config>,
    shutdown: &Shutdown,
) -> impl Future<Output = ()> + use<I, S, B>
where
    I: Transport,
    S: Service<Request<Incoming>, Response = Response<B>>,
    S::Error: Into<BoxError>,
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let timer = Box::pin(tokio::time::sleep_until(Instant::now()));
    let mut conn = Conn {
        io,
        rbuf: BytesMut::new(),
        wbuf: WriteBuf::default(),
        config,
        shutdown: shutdown.watch(),
        timer,
        write_timer: None,
        served: 0,
    };
    let mut service = service;
    async move {
        match conn.run(&mut service).await {
            Ok(None) => {}
            Ok(Some(pending)) => {
                let Conn {
                    io, rbuf, shutdown, ..
                } = conn;
                pending.fulfill(Upgraded::new(Box::new(io), &rbuf, shutdown));
                return;
            }
            Err(err) => {
                tracing::debug!(target: "celer::http1", error = %err, "connection closed");
                return;
            }
        }
        // Outside the `match`, so its scrutinee is not kept across this wait.
        if conn.opened_http2() {
            let Conn {
                io,
                rbuf,
                config,
                shutdown,
                ..
            } = conn;
            let io = Prefixed::new(rbuf.freeze(), io);
            // Boxed: an HTTP/1.1 connection's task stays small.
            Box::pin(http2::serve_connection(io, service, config, shutdown)).await;
        }
    }
}

struct Conn<I> {
    io: I,
    rbuf: BytesMut,
    wbuf: WriteBuf,
    config: Arc<Http1Config>,
    shutdown: Watch,
    /// The read-side deadline: head, idle or body timeout. Re-armed lazily:
    /// it may fire before the deadline in force, which then re-arms it.
    timer: Pin<Box<Sleep>>,
    /// The write-side deadline, created the first time a write waits.
    write_timer: Option<Pin<Box<Sleep>>>,
    served: u64,
}

/// How a turn of the request loop ended.
enum Next {
    /// Serve the next request.
    Continue,
    /// Close the connection.
    Close,
    /// Hand the connection over.
    Upgrade(upgrade::Pending),
}

/// The request body as the connection feeds it.
struct Feed {
    sender: Sender,
    decoder: Decoder,
    /// `100 Continue` is owed before the first body read.
    continue_owed: bool,
    /// No more feeding: the body ended, failed, or its reader left.
    stopped: bool,
    /// When the body times out unless more of it arrives.
    deadline: Instant,
}

/// What one round of feeding achieved.
enum Fed {
    /// A frame was handed over.
    Progress,
    /// Feeding is over.
    Stopped,
}

/// Why a request ended the connection.
enum Fail {
    /// Answer with this status, then close.
    Reject(Reject),
    /// Close at once.
    Io(io::Error),
    /// The connection opened with the HTTP/2 preface: hand it over.
    Http2,
}

impl From<io::Error> for Fail {
    fn from(err: io::Error) -> Fail {
        Fail::Io(err)
    }
}

impl<I: Transport> Conn<I> {
    /// Serves requests until the connection closes; returns the pending
    /// upgrade when a 101 response handed the connection over.
    ///
    /// A connection that opened with the HTTP/2 preface ends `Ok(None)`
    /// with [`Conn::opened_http2`] true.
    async fn run<S, B>(&mut self, service: &mut S) -> io::Result<Option<upgrade::Pending>>
    where
        S: Service<Request<Incoming>, Response = Response<B>>,
        S::Error: Into<BoxError>,
        B: Body<Data = Bytes>,
        B::Error: Into<BoxError>,
    {
        // A fresh connection's first request is usually there already
        // (TCP_DEFER_ACCEPT): read it before waiting on the event loop.
        self.rbuf = bufio::take_buf();
        match self.io.read_arrived(&mut self.rbuf) {
            Ok(0) => return Ok(None),
            Ok(_) => {}
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
            Err(err) => return Err(err),
        }
        loop {
            // Closing is boxed, like serving a request: the task of an idle
            // connection carries neither state (see
            // `connection_state_stays_small`).
            if self.rbuf.is_empty() {
                if !self.idle().await? {
                    return Box::pin(self.close()).await.map(|()| None);
                }
                // The next request's first read, made here so that a
                // readiness that proves stale (the first read went around
                // the runtime) sends the connection back to wait idle
                // rather than into a request's state.
                let read = match self.read_ready().await? {
                    // No bytes, yet still ready: the transport answers
                    // readiness at once without knowing (the trait's
                    // default), so going round again would never yield.
                    // Wait in a read instead, holding the buffer. Boxed:
                    // rare, and the idle task stays small.
                    None if self
                        .io
                        .poll_read_ready(&mut Context::from_waker(Waker::noop()))
                        .is_ready() =>
                    {
                        match Box::pin(self.read_idle()).await? {
                            None => return Box::pin(self.close()).await.map(|()| None),
                            read => read,
                        }
                    }
                    read => read,
                };
                match read {
                    Some(0) => return Box::pin(self.close()).await.map(|()| None),
                    Some(_) => {}
                    None => continue,
                }
            }
            // Boxed so an idle connection's task does not carry the state of
            // a request in flight (see `connection_state_stays_small`).
            match self.next_boxed(service).await {
                Ok(Next::Continue) => {}
                Ok(Next::Close) => return Box::pin(self.close()).await.map(|()| None),
                Ok(Next::Upgrade(pending)) => return self.flush().await.map(|()| Some(pending)),
                Err(Fail::Http2) => return Ok(None),
                Err(Fail::Reject(reject)) => {
                    return Box::pin(self.reject(reject)).await.map(|()| None);
                }
                Err(Fail::Io(err)) => return Err(err),
            }
        }
    }

    /// True when the connection opened with the whole HTTP/2 preface
    /// (RFC 9113 §3.3) and HTTP/2 is served.
    fn opened_http2(&self) -> bool {
        self.served == 0
            && self.config.http2
            && self.rbuf.len() >= http2::PREFACE.len()
            && http2::starts_preface(&self.rbuf)
    }

    /// Between requests: flushes, then waits for the client's next bytes
    /// holding no buffers; false when the connection should close instead
    /// (keep-alive timeout, a silent new connection, shutdown).
    async fn idle(&mut self) -> io::Result<bool> {
        self.flush().await?;
        if self.shutdown.is_started() {
            return Ok(false);
        }
        self.wait_idle(Instant::now() + self.idle_timeout()).await
    }

    /// How long the connection may wait for the client's next request: the
    /// head timeout for the first, the keep-alive timeout after.
    fn idle_timeout(&self) -> std::time::Duration {
        let limits = &self.config.limits;
        if self.served == 0 {
            limits.head_timeout
        } else {
            limits.keep_alive_timeout
        }
    }

    /// Reads and answers requests until the read buffer runs dry: one heap
    /// future serves a whole pipelined batch. Each turn answers one request
    /// and decides whether the connection goes on.
    ///
    /// One function, not a loop over a helper's future: the request is
    /// parsed in place and moved only into the service, where a helper
    /// taking it by value would copy it into its own future first.
    async fn next<S, B>(&mut self, service: &mut S) -> Result<Next, Fail>
    where
        S: Service<Request<Incoming>, Response = Response<B>>,
        S::Error: Into<BoxError>,
        B: Body<Data = Bytes>,
        B::Error: Into<BoxError>,
    {
        loop {
            let mut request = Request::new(Incoming::empty());
            let Some(head) = self.read_head(&mut request).await? else {
                return Ok(Next::Close);
            };
            if let Err(err) = poll_fn(|cx| service.poll_ready(cx)).await {
                return Err(service_failed(err));
            }
            let Head {
                body: body_len,
                keep_alive,
                expect_continue,
                upgrade,
            } = head;
            self.served += 1;
            let limits = &self.config.limits;
            let last = limits
                .max_requests_per_connection
                .is_some_and(|max| self.served >= max);
            let facts = ReqFacts {
                version: request.version(),
                is_head: request.method() == http::Method::HEAD,
                keep_alive: keep_alive && !last,
            };
            let (body, mut feed) = self.request_body(body_len, expect_continue);
            *request.body_mut() = body;
            let pending = upgrade.then(|| {
                let (on, pending) = upgrade::pending();
                request.extensions_mut().insert(on);
                pending
            });

            let fut = std::pin::pin!(service.call(request));
            let response = match self.drive(fut, &mut feed).await? {
                Ok(response) => response,
                Err(err) => return Err(service_failed(err)),
            };
            // A client still waiting for `100 Continue` may or may not send its
            // body, so the connection cannot be reused safely.
            let owed = feed.as_ref().is_some_and(|f| f.continue_owed);
            let facts = ReqFacts {
                keep_alive: facts.keep_alive && !owed && !self.shutdown.is_started(),
                ..facts
            };
            let (status, body, mut framed, send_file) = self.encode_response(response, facts);
            if status == StatusCode::SWITCHING_PROTOCOLS {
                return Ok(match pending {
                    Some(pending) if feed.as_ref().is_none_or(|f| f.decoder.is_done()) => {
                        Next::Upgrade(pending)
                    }
                    _ => Next::Close,
                });
            }
            drop(pending);
            let send_file = send_file.filter(|region| {
                feed.is_none()
                    && region.len() >= SEND_FILE_MIN
                    && framed.encoder == Encoder::Length(region.len())
                    && self.io.can_send_file()
            });
            if framed.encoder == Encoder::Skip {
                drop(body);
            } else if let Some(region) = send_file {
                drop(body);
                if !self.send_file(&region).await? {
                    framed.keep_alive = false;
                }
            } else if !self.write_body(body, framed.encoder, &mut feed).await? {
                framed.keep_alive = false;
            }
            if let Some(feed) = feed.as_mut() {
                // Boxed: rare, and it would otherwise enlarge every request's state.
                if !Box::pin(self.finish_body(feed)).await? {
                    framed.keep_alive = false;
                }
            }
            if !framed.keep_alive || self.shutdown.is_started() {
                return Ok(Next::Close);
            }
            if self.rbuf.is_empty() {
                return Ok(Next::Continue);
            }
        }
    }

    /// [`Conn::next`] on the heap; a plain function so the large future is
    /// built in its frame, not in the connection's.
    fn next_boxed<'a, S, B>(
        &'a mut self,
        service: &'a mut S,
    ) -> Pin<Box<impl Future<Output = Result<Next, Fail>> + 'a>>
    where
        S: Service<Request<Incoming>, Response = Response<B>>,
        S::Error: Into<BoxError>,
        B: Body<Data = Bytes> + 'a,
        B::Error: Into<BoxError>,
    {
        Box::pin(self.next(service))
    }

    /// Reads until a whole request head is buffered and parsed into
    /// `request`; `None` on a clean end.
    async fn read_head(&mut self, request: &mut Request<Incoming>) -> Result<Option<Head>, Fail> {
        let head_timeout = self.config.limits.head_timeout;
        let keep_alive_timeout = self.config.limits.keep_alive_timeout;
        let mut started = None;
        loop {
            if !self.rbuf.is_empty() {
                // RFC 9113 §3.3: a connection may open with the HTTP/2
                // preface instead of a request.
                let h2 = self.served == 0 && self.config.http2 && http2::starts_preface(&self.rbuf);
                if h2 && self.opened_http2() {
                    return Err(Fail::Http2);
                }
                if !h2 {
                    match parse::parse_head(&mut self.rbuf, &self.config.limits, request) {
                        Ok(Parsed::Complete(head)) => return Ok(Some(head)),
                        Ok(Parsed::Partial) => {}
                        Err(reject) => return Err(Fail::Reject(reject)),
                    }
                }
                started.get_or_insert_with(|| Instant::now() + head_timeout);
            }
            self.flush().await?;
            let idle = self.rbuf.is_empty();
            if idle && self.shutdown.is_started() {
                return Ok(None);
            }
            let deadline = match started {
                Some(at) => at,
                None if self.served == 0 => Instant::now() + head_timeout,
                None => Instant::now() + keep_alive_timeout,
            };
            if idle && !self.wait_idle(deadline).await? {
                return Ok(None);
            }
            match self.read_until(deadline).await? {
                Some(0) if self.rbuf.is_empty() => return Ok(None),
                Some(0) => return Err(Fail::Io(io::ErrorKind::UnexpectedEof.into())),
                Some(_) => {}
                None if started.is_some() => {
                    return Err(Fail::Reject(Reject::new(
                        StatusCode::REQUEST_TIMEOUT,
                        "request head timed out",
                    )));
                }
                None => return Ok(None),
            }
        }
    }

    /// Waits, holding no buffers, until the client sends something; false
    /// when the deadline passed or shutdown started first.
    async fn wait_idle(&mut self, deadline: Instant) -> io::Result<bool> {
        self.wbuf.release();
        bufio::give_buf(std::mem::take(&mut self.rbuf));
        let io = &mut self.io;
        let timer = &mut self.timer;
        let shutdown = &self.shutdown;
        poll_fn(move |cx| {
            if let Poll::Ready(res) = io.poll_read_ready(cx) {
                return Poll::Ready(res.map(|()| true));
            }
            if shutdown.poll_started(cx).is_ready() {
                return Poll::Ready(Ok(false));
            }
            poll_deadline(timer, deadline, cx).map(|()| Ok(false))
        })
        .await
    }

    /// A read buffer (from the pool while idle) with room for a read.
    fn read_room(&mut self) {
        if self.rbuf.capacity() == 0 {
            self.rbuf = bufio::take_buf();
        }
        self.rbuf.reserve(1024);
    }

    /// Reads once if bytes are there; `None` when none were.
    async fn read_ready(&mut self) -> io::Result<Option<usize>> {
        self.read_room();
        let io = &mut self.io;
        let rbuf = &mut self.rbuf;
        poll_fn(|cx| match poll_read_buf(io, cx, rbuf) {
            Poll::Ready(res) => Poll::Ready(res.map(Some)),
            Poll::Pending => Poll::Ready(Ok(None)),
        })
        .await
    }

    /// Waits for the client's next bytes by reading them, holding the read
    /// buffer: for a transport whose readiness cannot be waited on. `None`
    /// when the idle deadline passed or shutdown started first.
    async fn read_idle(&mut self) -> io::Result<Option<usize>> {
        let deadline = Instant::now() + self.idle_timeout();
        self.read_room();
        let io = &mut self.io;
        let rbuf = &mut self.rbuf;
        let timer = &mut self.timer;
        let shutdown = &self.shutdown;
        poll_fn(|cx| {
            if let Poll::Ready(res) = poll_read_buf(io, cx, rbuf) {
                return Poll::Ready(res.map(Some));
            }
            if shutdown.poll_started(cx).is_ready() {
                return Poll::Ready(Ok(None));
            }
            poll_deadline(timer, deadline, cx).map(|()| Ok(None))
        })
        .await
    }

    /// Reads once; `None` when the deadline passed first.
    async fn read_until(&mut self, deadline: Instant) -> io::Result<Option<usize>> {
        self.read_room();
        let io = &mut self.io;
        let rbuf = &mut self.rbuf;
        let timer = &mut self.timer;
        poll_fn(|cx| {
            if let Poll::Ready(res) = poll_read_buf(io, cx, rbuf) {
                return Poll::Ready(res.map(Some));
            }
            poll_deadline(timer, deadline, cx).map(|()| Ok(None))
        })
        .await
    }

    /// Builds the request body: empty, whole from the buffer, or streamed.
    fn request_body(&mut self, len: BodyLen, expect_continue: bool) -> (Incoming, Option<Feed>) {
        let decoder = match len {
            BodyLen::Empty => return (Incoming::empty(), None),
            BodyLen::Length(n) if n <= self.rbuf.len() as u64 => {
                let data = self.rbuf.split_to(n as usize).freeze();
                return (Incoming::full(data), None);
            }
            BodyLen::Length(n) => Decoder::length(n),
            BodyLen::Chunked => Decoder::chunked(),
        };
        let hint = match decoder.remaining() {
            Some(n) => SizeHint::with_exact(n),
            None => SizeHint::default(),
        };
        let (body, sender) = Incoming::channel(hint);
        let feed = Feed {
            sender,
            decoder,
            continue_owed: expect_continue && self.rbuf.is_empty(),
            stopped: false,
            deadline: Instant::now() + self.config.limits.body_timeout,
        };
        (body, Some(feed))
    }

    /// Drives the service's future, feeding the request body meanwhile.
    async fn drive<F, B, E>(
        &mut self,
        mut fut: Pin<&mut F>,
        feed: &mut Option<Feed>,
    ) -> Result<Result<Response<B>, E>, Fail>
    where
        F: Future<Output = Result<Response<B>, E>>,
    {
        poll_fn(|cx| {
            loop {
                if let Poll::Ready(res) = fut.as_mut().poll(cx) {
                    return Poll::Ready(Ok(res));
                }
                if let Poll::Ready(Err(err)) = self.poll_flush(cx) {
                    return Poll::Ready(Err(Fail::Io(err)));
                }
                match self.poll_feed(feed, cx) {
                    Poll::Ready(Ok(Fed::Progress)) => continue,
                    Poll::Ready(Ok(Fed::Stopped)) | Poll::Pending => return Poll::Pending,
                    Poll::Ready(Err(fail)) => return Poll::Ready(Err(fail)),
                }
            }
        })
        .await
    }

    /// Writes the response head; hands back the status, the body, the
    /// framing and the body's file region if it named one (the head's
    /// fields are dropped here, not held while the body streams).
    fn encode_response<B: Body>(
        &mut self,
        response: Response<B>,
        facts: ReqFacts,
    ) -> (StatusCode, B, encode::Framed, Option<SendFile>) {
        let (mut parts, body) = response.into_parts();
        let exact = body.size_hint().exact();
        let send_file = match exact {
            Some(len) if len >= SEND_FILE_MIN => parts.extensions.remove::<SendFile>(),
            _ => None,
        };
        let framed = encode::encode_head(
            parts.status,
            &parts.headers,
            exact,
            facts,
            &self.config.server_header,
            self.config.hsts.as_ref(),
            &mut self.wbuf,
        );
        (parts.status, body, framed, send_file)
    }

    /// Sends a file body with `sendfile(2)` after the head; false when the
    /// file ended early, which leaves the response short and the connection
    /// to be closed.
    async fn send_file(&mut self, region: &SendFile) -> Result<bool, Fail> {
        self.flush().await?;
        let (mut offset, mut left) = (region.offset(), region.len());
        while left > 0 {
            let want = usize::try_from(left).unwrap_or(usize::MAX);
            let sent =
                poll_fn(
                    |cx| match self.io.poll_send_file(cx, region.file(), offset, want) {
                        Poll::Ready(res) => {
                            self.wrote();
                            Poll::Ready(res)
                        }
                        Poll::Pending => self.poll_write_stalled(cx).map(Err),
                    },
                )
                .await?;
            if sent == 0 {
                tracing::warn!(target: "celer::http1", "file shorter than its response");
                return Ok(false);
            }
            offset += sent as u64;
            left -= sent as u64;
        }
        Ok(true)
    }

    /// Streams a response body out; false when its framing broke and the
    /// connection must close.
    async fn write_body<B>(
        &mut self,
        body: B,
        mut encoder: Encoder,
        feed: &mut Option<Feed>,
    ) -> Result<bool, Fail>
    where
        B: Body<Data = Bytes>,
        B::Error: Into<BoxError>,
    {
        let mut body = std::pin::pin!(body);
        let mut trailers: Option<HeaderMap> = None;
        let mut intact = true;
        loop {
            if body.is_end_stream() {
                break;
            }
            let frame = poll_fn(|cx| {
                loop {
                    if let Poll::Ready(frame) = body.as_mut().poll_frame(cx) {
                        return Poll::Ready(Ok(frame));
                    }
                    if let Poll::Ready(Err(err)) = self.poll_flush(cx) {
                        return Poll::Ready(Err(Fail::Io(err)));
                    }
                    match self.poll_feed(feed, cx) {
                        Poll::Ready(Ok(Fed::Progress)) => continue,
                        Poll::Ready(Ok(Fed::Stopped)) | Poll::Pending => return Poll::Pending,
                        Poll::Ready(Err(Fail::Reject(_))) => {
                            // The response has started: the status can no
                            // longer change, so the body error only closes.
                            return Poll::Ready(Err(Fail::Io(io::ErrorKind::InvalidData.into())));
                        }
                        Poll::Ready(Err(fail)) => return Poll::Ready(Err(fail)),
                    }
                }
            })
            .await?;
            match frame {
                None => break,
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => {
                        if encoder.data(data, &mut self.wbuf).is_err() {
                            tracing::warn!(target: "celer::http1", "response body longer than its content-length");
                            intact = false;
                            break;
                        }
                        if self.wbuf.len() >= FLUSH_HIGH_WATER {
                            self.flush().await?;
                        }
                    }
                    Err(frame) => {
                        if let Ok(t) = frame.into_trailers() {
                            trailers.get_or_insert_with(HeaderMap::new).extend(t);
                        }
                    }
                },
                Some(Err(err)) => {
                    let err: BoxError = err.into();
                    tracing::warn!(target: "celer::http1", error = %err, "response body failed");
                    // Leave the framing unfinished so the client sees the
                    // response as incomplete, then close.
                    self.flush().await?;
                    return Ok(false);
                }
            }
        }
        if encoder.finish(trailers.as_ref(), &mut self.wbuf).is_err() {
            tracing::warn!(target: "celer::http1", "response body shorter than its content-length");
            self.flush().await?;
            return Ok(false);
        }
        Ok(intact && encoder != Encoder::Close)
    }

    /// After the response: lets the body reader finish, or drains what it
    /// left unread; false when the connection must close instead.
    async fn finish_body(&mut self, feed: &mut Feed) -> Result<bool, Fail> {
        if feed.decoder.is_done() {
            return Ok(true);
        }
        if feed.continue_owed {
            // The client was never told to send its body: it may or may not.
            return Ok(false);
        }
        self.flush().await?;
        let deadline = Instant::now() + self.config.limits.body_timeout;
        let max_drain = self.config.limits.max_drain_bytes;
        let mut drained = 0u64;
        loop {
            match feed.decoder.decode(&mut self.rbuf, &self.config.limits) {
                Ok(Decoded::Data(data)) => {
                    drained += data.len() as u64;
                    if drained > max_drain {
                        return Ok(false);
                    }
                }
                Ok(Decoded::Trailers(_) | Decoded::End) => return Ok(true),
                Ok(Decoded::Partial) => match self.read_until(deadline).await? {
                    Some(0) | None => return Ok(false),
                    Some(_) => {}
                },
                Err(_) => return Ok(false),
            }
        }
    }

    /// Feeds the request body as far as the reader wants it.
    fn poll_feed(
        &mut self,
        feed: &mut Option<Feed>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Fed, Fail>> {
        let Some(feed) = feed.as_mut().filter(|f| !f.stopped) else {
            return Poll::Ready(Ok(Fed::Stopped));
        };
        loop {
            match feed.sender.poll_demand(cx) {
                Demand::Gone => {
                    feed.stopped = true;
                    return Poll::Ready(Ok(Fed::Stopped));
                }
                Demand::Idle => return Poll::Pending,
                Demand::Want => {}
            }
            if feed.continue_owed {
                feed.continue_owed = false;
                self.wbuf.put(b"HTTP/1.1 100 Continue\r\n\r\n");
                let limits = &self.config.limits;
                self.timer
                    .as_mut()
                    .reset(Instant::now() + limits.body_timeout);
            }
            if let Poll::Ready(Err(err)) = self.poll_flush(cx) {
                return Poll::Ready(Err(Fail::Io(err)));
            }
            match feed.decoder.decode(&mut self.rbuf, &self.config.limits) {
                Ok(Decoded::Data(data)) => {
                    feed.sender.send(Ok(Frame::data(data)));
                    if feed.decoder.is_done() {
                        feed.sender.finish(None);
                        feed.stopped = true;
                    }
                    return Poll::Ready(Ok(Fed::Progress));
                }
                Ok(Decoded::Trailers(trailers)) => {
                    feed.sender.finish(Some(trailers));
                    feed.stopped = true;
                    return Poll::Ready(Ok(Fed::Progress));
                }
                Ok(Decoded::End) => {
                    feed.sender.finish(None);
                    feed.stopped = true;
                    return Poll::Ready(Ok(Fed::Progress));
                }
                Ok(Decoded::Partial) => {}
                Err(reject) => {
                    let kind = if reject.status == StatusCode::PAYLOAD_TOO_LARGE {
                        Kind::BodyTooLarge
                    } else {
                        Kind::InvalidBody
                    };
                    feed.sender.fail(Error::new(kind).with(reject.reason));
                    feed.stopped = true;
                    return Poll::Ready(Err(Fail::Reject(reject)));
                }
            }
            if self.rbuf.capacity() == 0 {
                self.rbuf = bufio::take_buf();
            }
            if self.rbuf.capacity() - self.rbuf.len() < 1024 {
                let want = feed.decoder.remaining().unwrap_or(BODY_READ_MAX as u64);
                self.rbuf
                    .reserve((want as usize).clamp(1024, BODY_READ_MAX));
            }
            match poll_read_buf(&mut self.io, cx, &mut self.rbuf) {
                Poll::Ready(Ok(0)) => {
                    feed.sender.fail(Error::new(Kind::IncompleteBody));
                    feed.stopped = true;
                    return Poll::Ready(Err(Fail::Io(io::ErrorKind::UnexpectedEof.into())));
                }
                Poll::Ready(Ok(_)) => {
                    feed.deadline = Instant::now() + self.config.limits.body_timeout;
                }
                Poll::Ready(Err(err)) => {
                    feed.sender
                        .fail(Error::new_io(io::Error::new(err.kind(), "read failed")));
                    feed.stopped = true;
                    return Poll::Ready(Err(Fail::Io(err)));
                }
                Poll::Pending => {
                    let deadline = feed.deadline;
                    if poll_deadline(&mut self.timer, deadline, cx).is_ready() {
                        feed.sender.fail(Error::new(Kind::BodyTimeout));
                        feed.stopped = true;
                        return Poll::Ready(Err(Fail::Reject(Reject::new(
                            StatusCode::REQUEST_TIMEOUT,
                            "request body timed out",
                        ))));
                    }
                    return Poll::Pending;
                }
            }
        }
    }

    /// Writes pending output; `Pending` while the socket is full.
    fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.wbuf.is_empty() {
            let res = match self.wbuf.flat() {
                Some(flat) => Pin::new(&mut self.io).poll_write(cx, flat),
                None => {
                    let mut slices = [io::IoSlice::new(&[]); 64];
                    let n = self.wbuf.slices(&mut slices);
                    Pin::new(&mut self.io).poll_write_vectored(cx, &slices[..n])
                }
            };
            match res {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => {
                    self.wbuf.advance(n);
                    self.wrote();
                }
                Poll::Ready(Err(err)) => return Poll::Ready(Err(err)),
                Poll::Pending => return self.poll_write_stalled(cx).map(Err),
            }
        }
        self.wrote();
        Poll::Ready(Ok(()))
    }

    /// A write made progress: the write timeout starts over.
    fn wrote(&mut self) {
        if let Some(timer) = self.write_timer.as_mut() {
            timer
                .as_mut()
                .reset(Instant::now() + self.config.limits.write_timeout);
        }
    }

    /// A write is waiting for the client: `Ready` with an error once it has
    /// waited longer than the write timeout.
    fn poll_write_stalled(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        let limit = self.config.limits.write_timeout;
        let timer = self
            .write_timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        ready!(timer.as_mut().poll(cx));
        Poll::Ready(io::Error::new(
            io::ErrorKind::TimedOut,
            "client did not read the response in time",
        ))
    }

    async fn flush(&mut self) -> io::Result<()> {
        poll_fn(|cx| self.poll_flush(cx)).await
    }

    /// Answers a refused request with its status and reason, then closes.
    async fn reject(&mut self, reject: Reject) -> io::Result<()> {
        tracing::debug!(target: "celer::http1", status = %reject.status, reason = reject.reason, "request refused");
        let mut headers = HeaderMap::with_capacity(2);
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        let facts = ReqFacts {
            version: http::Version::HTTP_11,
            is_head: false,
            keep_alive: false,
        };
        let body = reject.reason.as_bytes();
        let mut framed = encode::encode_head(
            reject.status,
            &headers,
            Some(body.len() as u64 + 1),
            facts,
            &self.config.server_header,
            self.config.hsts.as_ref(),
            &mut self.wbuf,
        );
        let _ = framed
            .encoder
            .data(Bytes::from_static(body), &mut self.wbuf);
        let _ = framed
            .encoder
            .data(Bytes::from_static(b"\n"), &mut self.wbuf);
        self.close().await
    }

    /// Flushes, then closes. When the client has sent bytes the server did
    /// not read, closes gracefully instead: after a write shutdown, reads and
    /// discards for a moment so those bytes do not turn the close into a
    /// reset that destroys the response (RFC 9112 §9.6).
    async fn close(&mut self) -> io::Result<()> {
        self.flush().await?;
        if self.rbuf.is_empty() && !self.io.has_unread_input() {
            return Ok(());
        }
        self.io.shutdown().await?;
        let linger = self.config.limits.head_timeout.min(LINGER_TIME);
        let deadline = Instant::now() + linger;
        let mut discarded = 0;
        while discarded < LINGER_MAX {
            self.rbuf.clear();
            match self.read_until(deadline).await {
                Ok(Some(n)) if n > 0 => discarded += n,
                _ => break,
            }
        }
        Ok(())
    }
}

/// Ready once `deadline` has passed. The timer is moved only when it would
/// fire too late; one that fires early (the deadline moved on since it was
/// set) is re-armed then, so keep-alive traffic costs no timer work per
/// request.
pub(crate) fn poll_deadline(
    timer: &mut Pin<Box<Sleep>>,
    deadline: Instant,
    cx: &mut Context<'_>,
) -> Poll<()> {
    loop {
        if timer.deadline() > deadline {
            timer.as_mut().reset(deadline);
        }
        ready!(timer.as_mut().poll(cx));
        if timer.deadline() >= deadline {
            return Poll::Ready(());
        }
        timer.as_mut().reset(deadline);
    }
}

/// Logs a service failure and answers 500.
fn service_failed<E: Into<BoxError>>(err: E) -> Fail {
    let err: BoxError = err.into();
    tracing::error!(target: "celer::http1", error = %err, "service failed");
    Fail::Reject(Reject::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal server error",
    ))
}

/// Reads once into the spare room of `buf`.
fn poll_read_buf<I: AsyncRead + Unpin>(
    io: &mut I,
    cx: &mut Context<'_>,
    buf: &mut BytesMut,
) -> Poll<io::Result<usize>> {
    std::pin::pin!(io.read_buf(buf)).poll(cx)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every idle connection holds its whole task state; keep it small so
    /// 10,000 idle connections cost little (buffers are pooled, not held).
    #[tokio::test]
    async fn connection_state_stays_small() {
        let (io, _peer) = tokio::io::duplex(64);
        let service = tower_service_fn();
        let fut = serve_connection(
            io,
            service,
            Arc::new(Http1Config::default()),
            &Shutdown::new(),
        );
        let size = std::mem::size_of_val(&fut);
        // With a TCP stream (32 bytes more than this duplex stream) and the
        // connection-limit permit beside it, the spawned future must stay
        // under ~408 bytes for tokio's task cell to fit the 512-byte size
        // class (ARCHITECTURE.md, "A connection's task holds each thing
        // once"): at most 376 here.
        assert!(size <= 376, "connection future is {size} bytes");
    }

    #[derive(Clone)]
    struct Hello;

    impl Service<Request<Incoming>> for Hello {
        type Response = Response<http_body_util::Full<Bytes>>;
        type Error = std::convert::Infallible;
        type Future = std::future::Ready<Result<Self::Response, Self::Error>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: Request<Incoming>) -> Self::Future {
            std::future::ready(Ok(Response::new(http_body_util::Full::new(
                Bytes::from_static(b"hi"),
            ))))
        }
    }

    fn tower_service_fn() -> Hello {
        Hello
    }

    /// A transport that keeps the trait's default readiness (answered at
    /// once) must not make an idle keep-alive connection spin: found by the
    /// `connection` fuzz target, where the spinning task starved the client
    /// on the same thread. Client and server share one current-thread
    /// runtime here, so a spin hangs the runtime and the watchdog reports it.
    #[test]
    fn an_idle_connection_on_an_always_ready_transport_waits() {
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let answers = runtime.block_on(async {
                let (mut client, server) = tokio::io::duplex(1024);
                let shutdown = Shutdown::new();
                let config = Arc::new(Http1Config::default());
                tokio::spawn(serve_connection(server, Hello, config, &shutdown));
                let mut answers = Vec::new();
                for _ in 0..3 {
                    client
                        .write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
                        .await
                        .unwrap();
                    let mut buf = vec![0; 1024];
                    let n = client.read(&mut buf).await.unwrap();
                    answers.push(String::from_utf8_lossy(&buf[..n]).into_owned());
                    // The server is idle now; let it run before the next request.
                    for _ in 0..10 {
                        tokio::task::yield_now().await;
                    }
                }
                answers
            });
            let _ = done.send(answers);
        });
        let answers = finished
            .recv_timeout(std::time::Duration::from_secs(120))
            .expect("the connection spun instead of waiting for the client");
        assert_eq!(answers.len(), 3);
        for answer in answers {
            assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
            assert!(answer.ends_with("\r\n\r\nhi"), "{answer}");
        }
    }
}
