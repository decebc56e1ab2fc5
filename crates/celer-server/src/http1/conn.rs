//! One HTTP/1.1 connection's state and IO (hyper's `proto/h1/conn.rs`):
//! reading heads and waiting idle without buffers, feeding request bodies
//! with backpressure and 100-continue, writing responses (batched, or with
//! `sendfile(2)`), the read and write deadlines, refusals, and closing
//! (shutdown of the write side, then a linger). The loop over requests
//! that calls the service is in `dispatch`.

use std::future::{Future, poll_fn};
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, Request, Response, StatusCode};
use http_body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

use crate::body::{Demand, Incoming, Sender};
use crate::common::{ConnConfig, Deadline, Reject, poll_read_buf};
use crate::error::{BoxError, Error, Kind};
use crate::file::SendFile;
use crate::http1::decode::{Decoded, Decoder};
use crate::http1::encode::{self, Encoder, ReqFacts};
use crate::http1::io::{self as bufio, WriteBuf};
use crate::http1::parse::{self, BodyLen, Head, Parsed};
use crate::http1::{Sniff, Sniffed};
use crate::shutdown::Watch;
use crate::transport::Transport;

/// Output at least this large is flushed before more requests are answered.
pub(super) const FLUSH_HIGH_WATER: usize = 64 * 1024;

/// File bodies at least this large go out with `sendfile(2)` when the
/// transport can; smaller ones are copied so that they leave in the same
/// write as their head.
pub(super) const SEND_FILE_MIN: u64 = 16 * 1024;

/// Largest single read while streaming a body.
const BODY_READ_MAX: usize = 64 * 1024;

/// Bytes read and discarded at most while lingering before a close.
const LINGER_MAX: usize = 64 * 1024;

/// Longest linger before a close (shorter when the head timeout is).
const LINGER_TIME: std::time::Duration = std::time::Duration::from_secs(2);

/// One connection's state; `W` recognises another protocol on its first
/// bytes (see [`Sniff`]).
pub(super) struct Conn<I, W> {
    pub(super) io: I,
    pub(super) rbuf: BytesMut,
    pub(super) wbuf: WriteBuf,
    pub(super) config: Arc<ConnConfig>,
    pub(super) shutdown: Watch,
    /// The read-side deadline: head, idle or body timeout. Re-armed lazily:
    /// it may fire before the deadline in force, which then re-arms it.
    pub(super) timer: Deadline,
    /// The write-side deadline, created the first time a write waits.
    pub(super) write_timer: Option<Pin<Box<Sleep>>>,
    pub(super) served: u64,
    pub(super) switch: W,
}

/// The request body as the connection feeds it.
pub(super) struct Feed {
    sender: Sender,
    pub(super) decoder: Decoder,
    /// `100 Continue` is owed before the first body read.
    pub(super) continue_owed: bool,
    /// No more feeding: the body ended, failed, or its reader left.
    stopped: bool,
    /// When the body times out unless more of it arrives.
    deadline: Instant,
}

/// What one round of feeding achieved.
pub(super) enum Fed {
    /// A frame was handed over.
    Progress,
    /// Feeding is over.
    Stopped,
}

/// Why a request ended the connection.
pub(super) enum Fail {
    /// Answer with this status, then close.
    Reject(Reject),
    /// Close at once.
    Io(io::Error),
    /// The connection opened with another protocol's first bytes: hand it
    /// over.
    Switch,
}

impl From<io::Error> for Fail {
    fn from(err: io::Error) -> Fail {
        Fail::Io(err)
    }
}

// ===== impl Conn: state and IO =====

impl<I: Transport, W: Sniff> Conn<I, W> {
    /// Between requests: flushes, then waits for the client's next bytes
    /// holding no buffers; false when the connection should close instead
    /// (keep-alive timeout, a silent new connection, shutdown).
    pub(super) async fn idle(&mut self) -> io::Result<bool> {
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

    /// Reads until a whole request head is buffered and parsed into
    /// `request`; `None` on a clean end.
    pub(super) async fn read_head(
        &mut self,
        request: &mut Request<Incoming>,
    ) -> Result<Option<Head>, Fail> {
        let head_timeout = self.config.limits.head_timeout;
        let keep_alive_timeout = self.config.limits.keep_alive_timeout;
        let mut started = None;
        loop {
            if !self.rbuf.is_empty() {
                // A connection may open with another protocol's first
                // bytes instead of a request; `proto` decides which.
                let sniffed = match self.served {
                    0 => self.switch.sniff(&self.rbuf, &self.config),
                    _ => Sniffed::Http1,
                };
                match sniffed {
                    Sniffed::Other => return Err(Fail::Switch),
                    Sniffed::More => {}
                    Sniffed::Http1 => {
                        match parse::parse_head(&mut self.rbuf, &self.config.limits, request) {
                            Ok(Parsed::Complete(head)) => return Ok(Some(head)),
                            Ok(Parsed::Partial) => {}
                            Err(reject) => return Err(Fail::Reject(reject)),
                        }
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
        let shutdown = &mut self.shutdown;
        poll_fn(move |cx| {
            if let Poll::Ready(res) = io.poll_read_ready(cx) {
                return Poll::Ready(res.map(|()| true));
            }
            if shutdown.poll_started_mut(cx).is_ready() {
                return Poll::Ready(Ok(false));
            }
            timer.poll(deadline, cx).map(|()| Ok(false))
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
    pub(super) async fn read_ready(&mut self) -> io::Result<Option<usize>> {
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
    pub(super) async fn read_idle(&mut self) -> io::Result<Option<usize>> {
        let deadline = Instant::now() + self.idle_timeout();
        self.read_room();
        let io = &mut self.io;
        let rbuf = &mut self.rbuf;
        let timer = &mut self.timer;
        let shutdown = &mut self.shutdown;
        poll_fn(|cx| {
            if let Poll::Ready(res) = poll_read_buf(io, cx, rbuf) {
                return Poll::Ready(res.map(Some));
            }
            if shutdown.poll_started_mut(cx).is_ready() {
                return Poll::Ready(Ok(None));
            }
            timer.poll(deadline, cx).map(|()| Ok(None))
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
            timer.poll(deadline, cx).map(|()| Ok(None))
        })
        .await
    }

    /// Builds the request body: empty, whole from the buffer, or streamed.
    pub(super) fn request_body(
        &mut self,
        len: BodyLen,
        expect_continue: bool,
    ) -> (Incoming, Option<Feed>) {
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

    /// Writes the response head; hands back the status, the body, the
    /// framing and the body's file region if it named one (the head's
    /// fields are dropped here, not held while the body streams).
    pub(super) fn encode_response<B: Body>(
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
    pub(super) async fn send_file(&mut self, region: &SendFile) -> Result<bool, Fail> {
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
    /// connection must close. The body is pinned by the caller: taken by
    /// value, it would sit in this future twice (as the argument and as
    /// the pinned local) for as long as it streams.
    pub(super) async fn write_body<B>(
        &mut self,
        mut body: Pin<&mut B>,
        mut encoder: Encoder,
        feed: &mut Option<Feed>,
    ) -> Result<bool, Fail>
    where
        B: Body<Data = Bytes>,
        B::Error: Into<BoxError>,
    {
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
                    match self.poll_flush(cx) {
                        Poll::Ready(Err(err)) => return Poll::Ready(Err(Fail::Io(err))),
                        // Everything is out and the body waits: a stream
                        // (server-sent events, a long poll) may wait for
                        // minutes, so its buffers go back to the pool.
                        Poll::Ready(Ok(())) => self.release_streaming(feed),
                        Poll::Pending => {}
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

    /// While a response body waits for its next frame with all output
    /// written: gives the write buffer back to the pool, and the read
    /// buffer too when it holds nothing and no request body is being read
    /// into it, so a stream that waits between events holds no buffer (as
    /// an idle keep-alive connection does not). The next frame or read
    /// takes one from the pool again.
    fn release_streaming(&mut self, feed: &Option<Feed>) {
        self.wbuf.release();
        self.io.release_idle();
        let reading = feed.as_ref().is_some_and(|f| !f.stopped);
        if !reading && self.rbuf.is_empty() && self.rbuf.capacity() != 0 {
            bufio::give_buf(std::mem::take(&mut self.rbuf));
        }
    }

    /// After the response: lets the body reader finish, or drains what it
    /// left unread; false when the connection must close instead.
    pub(super) async fn finish_body(&mut self, feed: &mut Feed) -> Result<bool, Fail> {
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
    pub(super) fn poll_feed(
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
                self.timer.reset(Instant::now() + limits.body_timeout);
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
            // Room for what the body still needs, up to BODY_READ_MAX per
            // read. The pooled buffer serves bodies that fit it; a larger
            // one gets its own allocation, which the pieces handed to the
            // service keep: a pooled 8 KiB buffer there meant one read per
            // 8 KiB of a long upload.
            let want = usize::try_from(feed.decoder.remaining().unwrap_or(BODY_READ_MAX as u64))
                .unwrap_or(BODY_READ_MAX)
                .clamp(1024, BODY_READ_MAX);
            if self.rbuf.capacity() == 0 && want <= bufio::BUF_SIZE {
                self.rbuf = bufio::take_buf();
            }
            if self.rbuf.capacity() - self.rbuf.len() < 1024 {
                self.rbuf.reserve(want);
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
                    if self.timer.poll(deadline, cx).is_ready() {
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
    pub(super) fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
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
        // Output the transport still holds (TLS records the socket did not
        // take yet); a no-op on a plain socket.
        match Pin::new(&mut self.io).poll_flush(cx) {
            Poll::Ready(Ok(())) => {}
            Poll::Ready(Err(err)) => return Poll::Ready(Err(err)),
            Poll::Pending => return self.poll_write_stalled(cx).map(Err),
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

    pub(super) async fn flush(&mut self) -> io::Result<()> {
        poll_fn(|cx| self.poll_flush(cx)).await
    }

    /// Shuts the transport's write side down; fails once that has waited
    /// for the client longer than the write timeout.
    async fn shutdown_write(&mut self) -> io::Result<()> {
        poll_fn(|cx| match Pin::new(&mut self.io).poll_shutdown(cx) {
            Poll::Ready(res) => Poll::Ready(res),
            Poll::Pending => self.poll_write_stalled(cx).map(Err),
        })
        .await
    }

    /// Answers a refused request with its status and reason, then closes.
    pub(super) async fn reject(&mut self, reject: Reject) -> io::Result<()> {
        tracing::debug!(target: "celer::http1", status = %reject.status, reason = reject.reason, "request refused");
        let (parts, text) = reject.response().into_parts();
        let facts = ReqFacts {
            version: http::Version::HTTP_11,
            is_head: false,
            keep_alive: false,
        };
        let mut framed = encode::encode_head(
            parts.status,
            &parts.headers,
            Some(text.len() as u64),
            facts,
            &self.config.server_header,
            self.config.hsts.as_ref(),
            &mut self.wbuf,
        );
        let _ = framed.encoder.data(Bytes::from(text), &mut self.wbuf);
        self.close().await
    }

    /// Flushes, then shuts the write side down, within the write timeout:
    /// over TLS that sends `close_notify`, which tells the end of the
    /// stream from a truncation (RFC 8446 §6.1). When the client has sent
    /// bytes the server did not read, closes gracefully: reads and discards
    /// for a moment so those bytes do not turn the close into a reset that
    /// destroys the response (RFC 9112 §9.6).
    pub(super) async fn close(&mut self) -> io::Result<()> {
        self.flush().await?;
        self.shutdown_write().await?;
        if self.rbuf.is_empty() && !self.io.has_unread_input() {
            return Ok(());
        }
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
