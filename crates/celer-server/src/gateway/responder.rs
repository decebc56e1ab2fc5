//! The FastCGI responder: one connection's driver on [`Session`].
//!
//! One task per connection reads records, runs each request's handler (up
//! to `Limits::fastcgi_max_requests` at once, multiplexed on the
//! connection) and writes their records. Handlers never touch the socket:
//! they append whole records to the connection's outbox (bounded: a handler
//! waits while it holds more than [`OUTBOX_HIGH`] bytes), so a handler
//! dropped by `FCGI_ABORT_REQUEST` never leaves half a record behind.
//!
//! A request body is streamed: a `FCGI_STDIN` record is handed to the
//! handler only when it asks for more, and the connection stops reading
//! until it does (FastCGI has no flow control of its own, so a handler that
//! reads slowly holds back the other requests of its connection, as in
//! every responder).

use std::future::{Future, poll_fn};
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use bytes::{Bytes, BytesMut};
use futures_util::future::{AbortHandle, Abortable, Aborted};
use futures_util::stream::{FuturesUnordered, StreamExt};
use http::{Method, Request, Response};
use http_body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncReadExt};

use tokio::time::Instant;

use super::fastcgi::{self, Event, ProtocolStatus, Session, SessionLimits, kind};
use super::params;
use crate::body::{Demand, Incoming, Sender};
use crate::common::{ConnConfig, Deadline, Reject};
use crate::error::{Error, Kind};
use crate::serve::HttpService;
use crate::shutdown::Watch;
use crate::transport::Transport;

/// Response bytes a connection's handlers may queue beyond what the socket
/// took before they wait: 64 KiB.
pub(crate) const OUTBOX_HIGH: usize = 64 * 1024;

/// Records waiting to be written, shared by the connection and its handlers.
#[derive(Default)]
struct Outbox {
    state: Mutex<OutState>,
}

#[derive(Default)]
struct OutState {
    buf: BytesMut,
    waiters: Vec<Waker>,
    closed: bool,
}

impl Outbox {
    fn lock(&self) -> MutexGuard<'_, OutState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Ready when there is room (or `false` once the connection is gone).
    fn poll_room(&self, cx: &mut Context<'_>) -> Poll<bool> {
        let mut st = self.lock();
        if st.closed {
            return Poll::Ready(false);
        }
        if st.buf.len() < OUTBOX_HIGH {
            return Poll::Ready(true);
        }
        st.waiters.push(cx.waker().clone());
        Poll::Pending
    }

    /// Waits for room, then appends records with `f`.
    async fn push(&self, f: impl FnOnce(&mut BytesMut)) -> bool {
        if !poll_fn(|cx| self.poll_room(cx)).await {
            return false;
        }
        f(&mut self.lock().buf);
        true
    }
}

type Task = Pin<Box<dyn Future<Output = (u16, Result<bool, Aborted>)> + Send>>;

/// A request the driver knows beyond the session: its body's sender and
/// the body record waiting for the handler.
struct Req {
    id: u16,
    body: Option<Sender>,
    expected: Option<u64>,
    received: u64,
    pending: Option<Bytes>,
    abort: Option<AbortHandle>,
    /// When its `FCGI_BEGIN_REQUEST` came, until its params end.
    begun: Option<Instant>,
}

struct Conn<I, S> {
    io: I,
    rbuf: BytesMut,
    service: S,
    config: Arc<ConnConfig>,
    shutdown: Watch,
    session: Session,
    outbox: Arc<Outbox>,
    writing: Bytes,
    tasks: FuturesUnordered<Task>,
    reqs: Vec<Req>,
    /// The request whose body record waits for its handler: reading stops.
    blocked: Option<u16>,
    /// A request waiting for the service to be ready.
    starting: Option<(u16, Request<Incoming>)>,
    eof: bool,
    /// A response body failed: the connection writes what is queued (the
    /// failure's `FCGI_STDERR` line among it), then closes.
    failed: bool,
    /// Requests begun on this connection, for
    /// `Limits::max_requests_per_connection`.
    served: u64,
    last_read: Instant,
    last_write: Instant,
    timer: Deadline,
}

/// Serves FastCGI responder requests on `io` until the front end closes it,
/// a request without `FCGI_KEEP_CONN` ends, a protocol error, a timeout, or
/// shutdown (after the requests in flight end).
pub(crate) async fn serve<I: Transport, S: HttpService>(
    io: I,
    service: S,
    config: Arc<ConnConfig>,
    shutdown: Watch,
) {
    let limits = &config.limits;
    let session = Session::new(SessionLimits {
        max_record: limits.fastcgi_max_record_bytes.min(fastcgi::MAX_CONTENT),
        max_params_bytes: limits.gateway_max_params_bytes,
        max_params: limits.gateway_max_params,
        max_requests: limits.fastcgi_max_requests.max(1),
        max_conns: limits.max_connections,
    });
    let now = Instant::now();
    let mut conn = Conn {
        io,
        rbuf: BytesMut::with_capacity(8 * 1024),
        service,
        config,
        shutdown,
        session,
        outbox: Arc::default(),
        writing: Bytes::new(),
        tasks: FuturesUnordered::new(),
        reqs: Vec::new(),
        blocked: None,
        starting: None,
        eof: false,
        failed: false,
        served: 0,
        last_read: now,
        last_write: now,
        timer: Deadline::new(now),
    };
    if let Err(err) = poll_fn(|cx| conn.poll_run(cx)).await {
        tracing::debug!(target: "celer::gateway", error = %err, "FastCGI connection closed");
    }
    conn.outbox.lock().closed = true;
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

impl<I: Transport, S: HttpService> Conn<I, S> {
    fn poll_run(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            let mut progress = false;

            // Write what handlers queued.
            if self.writing.is_empty() {
                let mut out = self.outbox.lock();
                if !out.buf.is_empty() {
                    self.writing = out.buf.split().freeze();
                    for w in out.waiters.drain(..) {
                        w.wake();
                    }
                    self.last_write = Instant::now();
                }
            }
            while !self.writing.is_empty() {
                match Pin::new(&mut self.io).poll_write(cx, &self.writing) {
                    Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                    Poll::Ready(Ok(n)) => {
                        let _ = self.writing.split_to(n);
                        self.last_write = Instant::now();
                        progress = true;
                    }
                    Poll::Ready(Err(err)) => return Poll::Ready(Err(err)),
                    Poll::Pending => break,
                }
            }
            if self.failed {
                if self.writing.is_empty() && self.outbox.lock().buf.is_empty() {
                    return Poll::Ready(Ok(()));
                }
                if !progress {
                    return self.poll_timeouts(cx);
                }
                continue;
            }

            // Hand a waiting body record over when its handler asks.
            if let Some(id) = self.blocked
                && let Some(req) = self.reqs.iter_mut().find(|r| r.id == id)
            {
                let demand = req
                    .body
                    .as_ref()
                    .map_or(Demand::Gone, |tx| tx.poll_demand(cx));
                match demand {
                    Demand::Want => {
                        if let (Some(tx), Some(data)) = (&req.body, req.pending.take()) {
                            tx.send(Ok(Frame::data(data)));
                        }
                        self.blocked = None;
                        progress = true;
                    }
                    Demand::Gone => {
                        req.body = None;
                        req.pending = None;
                        self.blocked = None;
                        progress = true;
                    }
                    Demand::Idle => {}
                }
            } else if self.blocked.is_some() {
                self.blocked = None;
                progress = true;
            }

            // Call the service once it is ready.
            if self.starting.is_some() {
                match self.service.poll_ready(cx) {
                    Poll::Ready(Ok(())) => {
                        let (id, request) = self.starting.take().expect("checked above");
                        self.call(id, request);
                        progress = true;
                    }
                    Poll::Ready(Err(err)) => {
                        let (id, _) = self.starting.take().expect("checked above");
                        let err: crate::error::BoxError = err.into();
                        tracing::error!(target: "celer::gateway", error = %err, "service not ready");
                        self.reject(id, Reject::internal(), &Method::GET);
                        progress = true;
                    }
                    Poll::Pending => {}
                }
            }

            // Read and handle records.
            // Records that came before the end of the stream are handled too.
            if self.blocked.is_none() && self.starting.is_none() {
                let max = self.session_max_record();
                match fastcgi::decode(&mut self.rbuf, max) {
                    Err(err) => {
                        tracing::info!(target: "celer::gateway", error = %err, "FastCGI protocol error, closing the connection");
                        return Poll::Ready(Ok(()));
                    }
                    Ok(Some(record)) => {
                        self.record(record)?;
                        progress = true;
                    }
                    Ok(None) if self.eof => {}
                    Ok(None) => {
                        if self.rbuf.capacity() - self.rbuf.len() < 4096 {
                            self.rbuf.reserve(8 * 1024);
                        }
                        match poll_read(&mut self.io, &mut self.rbuf, cx) {
                            Poll::Ready(Ok(0)) => {
                                self.eof = true;
                                progress = true;
                            }
                            Poll::Ready(Ok(_)) => {
                                self.last_read = Instant::now();
                                progress = true;
                            }
                            Poll::Ready(Err(err)) => return Poll::Ready(Err(err)),
                            Poll::Pending => {}
                        }
                    }
                }
            }

            // Run the handlers.
            while let Poll::Ready(Some((id, outcome))) = self.tasks.poll_next_unpin(cx) {
                progress = true;
                match outcome {
                    Ok(true) => {}
                    // The response body failed half-way: the front end
                    // cannot be told otherwise than by closing, once the
                    // failure's FCGI_STDERR line is written.
                    Ok(false) => {
                        self.failed = true;
                        break;
                    }
                    Err(Aborted) => {
                        // §5.4: an aborted request still ends with
                        // FCGI_END_REQUEST.
                        fastcgi::encode_end(
                            &mut self.outbox.lock().buf,
                            id,
                            1,
                            ProtocolStatus::RequestComplete,
                        );
                    }
                }
                self.finish(id);
            }

            // Shutdown: refuse new requests, close once none is in flight.
            if !self.session.closing() && self.shutdown.poll_started(cx).is_ready() {
                self.session.drain();
                progress = true;
            }

            let flushed = self.writing.is_empty() && self.outbox.lock().buf.is_empty();
            if self.session.in_flight() == 0 && flushed && (self.session.closing() || self.eof) {
                return Poll::Ready(Ok(()));
            }
            if self.eof
                && self.session.in_flight() > 0
                && self.blocked.is_none()
                && self.starting.is_none()
                && !fastcgi::has_record(&self.rbuf)
            {
                // §3.5: the front end closing the connection aborts its
                // requests; nobody is left to read their answers.
                return Poll::Ready(Ok(()));
            }

            if !progress {
                return self.poll_timeouts(cx);
            }
        }
    }

    fn session_max_record(&self) -> usize {
        self.config
            .limits
            .fastcgi_max_record_bytes
            .min(fastcgi::MAX_CONTENT)
    }

    /// The deadlines: the write timeout while output waits, the head
    /// timeout while params arrive, the body timeout while a handler waits
    /// for body bytes, the idle timeout with nothing in flight.
    fn poll_timeouts(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let limits = &self.config.limits;
        let mut deadline: Option<(Instant, &'static str)> = None;
        let mut earliest = |at: Instant, what| {
            if deadline.is_none_or(|(d, _)| at < d) {
                deadline = Some((at, what));
            }
        };
        if !self.writing.is_empty() {
            earliest(self.last_write + limits.write_timeout, "write");
        }
        if let Some(begun) = self.reqs.iter().filter_map(|r| r.begun).min() {
            earliest(begun + limits.head_timeout, "head");
        }
        let body_waits = self
            .reqs
            .iter()
            .any(|r| r.body.is_some() && r.pending.is_none());
        if body_waits && self.blocked.is_none() && !self.eof {
            earliest(self.last_read + limits.body_timeout, "body");
        }
        if self.session.in_flight() == 0 && !self.eof {
            earliest(self.last_read + limits.keep_alive_timeout, "idle");
        }
        let Some((at, what)) = deadline else {
            return Poll::Pending;
        };
        if self.timer.poll(at, cx).is_pending() {
            return Poll::Pending;
        }
        match what {
            "body" => {
                // The handlers waiting for body bytes get a timeout error
                // and answer it; the connection stays.
                for req in &mut self.reqs {
                    if let Some(tx) = req.body.take() {
                        tx.fail(Error::new(Kind::BodyTimeout));
                    }
                }
                cx.waker().wake_by_ref();
                Poll::Pending
            }
            _ => {
                tracing::debug!(target: "celer::gateway", timeout = what, "FastCGI connection timed out");
                Poll::Ready(Ok(()))
            }
        }
    }

    fn record(&mut self, record: fastcgi::Record) -> io::Result<()> {
        let begin = record.kind == kind::BEGIN_REQUEST && record.id != 0;
        let id = record.id;
        let before = self.session.in_flight();
        let event = {
            let mut out = self.outbox.lock();
            self.session.handle(record, &mut out.buf)
        };
        let event = match event {
            Ok(e) => e,
            Err(err) => {
                tracing::info!(target: "celer::gateway", error = %err, "FastCGI protocol error, closing the connection");
                return Err(invalid(err.to_string()));
            }
        };
        if begin && self.session.in_flight() > before {
            self.reqs.push(Req {
                id,
                body: None,
                expected: None,
                received: 0,
                pending: None,
                abort: None,
                begun: Some(Instant::now()),
            });
            self.served += 1;
            if self
                .config
                .limits
                .max_requests_per_connection
                .is_some_and(|max| self.served >= max)
            {
                // The connection's last request: it is answered and ended
                // as any other, then the connection closes whatever
                // FCGI_KEEP_CONN asked (§5.1 lets the application close
                // when it needs to); a request begun meanwhile on a
                // multiplexed connection gets FCGI_OVERLOADED (§5.5).
                self.session.drain();
            }
        }
        match event {
            Event::None => {}
            Event::Start { id, params } => self.start(id, &params),
            Event::BadParams { id, too_large } => {
                let reject = if too_large {
                    Reject::new(
                        http::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                        "request params too large",
                    )
                } else {
                    Reject::new(http::StatusCode::BAD_REQUEST, "malformed request params")
                };
                self.reject(id, reject, &Method::GET);
            }
            Event::Stdin { id, data } => self.stdin(id, data),
            Event::StdinEnd { id } => {
                if let Some(req) = self.reqs.iter_mut().find(|r| r.id == id)
                    && let Some(tx) = req.body.take()
                {
                    if req.expected.is_some_and(|n| n != req.received) {
                        tx.fail(Error::new(Kind::IncompleteBody));
                    } else {
                        tx.finish(None);
                    }
                }
            }
            Event::Abort { id } => self.abort(id),
        }
        Ok(())
    }

    fn start(&mut self, id: u16, params: &[(Bytes, Bytes)]) {
        let Some(req) = self.reqs.iter_mut().find(|r| r.id == id) else {
            return;
        };
        req.begun = None;
        let limits = &self.config.limits;
        let mapped = match params::map(params, limits) {
            Ok(m) => m,
            Err(reject) => {
                let method = Method::GET;
                self.reject(id, reject, &method);
                return;
            }
        };
        let method = mapped.head.method().clone();
        if let (Some(n), Some(max)) = (mapped.content_length, limits.max_body_bytes)
            && n > max
        {
            self.reject(
                id,
                Reject::new(
                    http::StatusCode::PAYLOAD_TOO_LARGE,
                    "request body too large",
                ),
                &method,
            );
            return;
        }
        let body = match mapped.content_length {
            Some(0) => Incoming::empty(),
            Some(n) => {
                let (body, tx) = Incoming::channel(SizeHint::with_exact(n));
                req.body = Some(tx);
                body
            }
            None => {
                let (body, tx) = Incoming::channel(SizeHint::default());
                req.body = Some(tx);
                body
            }
        };
        req.expected = mapped.content_length;
        let (parts, ()) = mapped.head.into_parts();
        self.starting = Some((id, Request::from_parts(parts, body)));
    }

    fn call(&mut self, id: u16, request: Request<Incoming>) {
        let method = request.method().clone();
        let fut = self.service.call(request);
        let outbox = self.outbox.clone();
        let task = async move {
            match fut.await {
                Ok(response) => respond(id, response, &method, &outbox).await,
                Err(err) => {
                    let err: crate::error::BoxError = err.into();
                    tracing::error!(target: "celer::gateway", error = %err, "service failed");
                    stderr(id, &format!("service failed: {err}"), &outbox).await;
                    respond(id, Reject::internal().response(), &method, &outbox).await
                }
            }
        };
        let (handle, registration) = AbortHandle::new_pair();
        if let Some(req) = self.reqs.iter_mut().find(|r| r.id == id) {
            req.abort = Some(handle);
        }
        self.tasks.push(Box::pin(async move {
            (id, Abortable::new(task, registration).await)
        }));
    }

    /// Answers request `id` with `reject` without calling the service.
    fn reject(&mut self, id: u16, reject: Reject, method: &Method) {
        let response = reject.response();
        let mut out = self.outbox.lock();
        let mut head = BytesMut::new();
        params::encode_head(
            &response,
            &SizeHint::with_exact(response.body().len() as u64),
            method,
            &mut head,
        );
        if !params::bodiless(method, response.status()) {
            head.extend_from_slice(response.body().as_bytes());
        }
        fastcgi::encode_stream(&mut out.buf, kind::STDOUT, id, &head);
        fastcgi::encode(&mut out.buf, kind::STDOUT, id, &[]);
        fastcgi::encode_end(&mut out.buf, id, 0, ProtocolStatus::RequestComplete);
        drop(out);
        self.finish(id);
    }

    fn stdin(&mut self, id: u16, data: Bytes) {
        let max = self.config.limits.max_body_bytes;
        let Some(req) = self.reqs.iter_mut().find(|r| r.id == id) else {
            return;
        };
        let Some(tx) = &req.body else {
            return;
        };
        req.received += data.len() as u64;
        if req.expected.is_some_and(|n| req.received > n) {
            tx.fail(Error::new(Kind::InvalidBody));
            req.body = None;
            return;
        }
        if max.is_some_and(|m| req.received > m) {
            tx.fail(Error::new(Kind::BodyTooLarge));
            req.body = None;
            return;
        }
        req.pending = Some(data);
        self.blocked = Some(id);
    }

    fn abort(&mut self, id: u16) {
        let Some(req) = self.reqs.iter_mut().find(|r| r.id == id) else {
            return;
        };
        req.body = None;
        req.pending = None;
        if self.blocked == Some(id) {
            self.blocked = None;
        }
        match req.abort.take() {
            // The handler runs: it is dropped at its next poll, and the
            // request ends when the task reports so.
            Some(handle) => handle.abort(),
            None => {
                if self.starting.as_ref().is_some_and(|(s, _)| *s == id) {
                    self.starting = None;
                }
                fastcgi::encode_end(
                    &mut self.outbox.lock().buf,
                    id,
                    1,
                    ProtocolStatus::RequestComplete,
                );
                self.finish(id);
            }
        }
    }

    fn finish(&mut self, id: u16) {
        if let Some(i) = self.reqs.iter().position(|r| r.id == id) {
            self.reqs.swap_remove(i);
        }
        if !self.session.end(id) {
            // §5.1: without FCGI_KEEP_CONN the application closes the
            // connection once the request is answered.
            self.session.drain();
        }
    }
}

/// Reads once into the spare room of `buf` (`read_buf` marks what the
/// socket wrote as filled, without zeroing the room first).
fn poll_read<I: AsyncRead + Unpin>(
    io: &mut I,
    buf: &mut BytesMut,
    cx: &mut Context<'_>,
) -> Poll<io::Result<usize>> {
    std::pin::pin!(io.read_buf(buf)).poll(cx)
}

/// Appends `line` as the request's `FCGI_STDERR` stream (§5.3): front
/// ends write it to their error log with the request it belongs to (nginx:
/// "FastCGI sent in stderr", lighttpd and Apache likewise), then ends the
/// stream with an empty record.
fn encode_stderr(buf: &mut BytesMut, id: u16, line: &str) {
    let mut text = line.replace(['\r', '\n'], " ");
    text.push('\n');
    fastcgi::encode_stream(buf, kind::STDERR, id, text.as_bytes());
    fastcgi::encode(buf, kind::STDERR, id, &[]);
}

/// Queues `line` as the request's `FCGI_STDERR` stream.
async fn stderr(id: u16, line: &str, outbox: &Outbox) {
    outbox.push(|buf| encode_stderr(buf, id, line)).await;
}

/// Writes `response` as `FCGI_STDOUT` records (the CGI response format),
/// then the empty `FCGI_STDOUT` and `FCGI_END_REQUEST`. False when the
/// body failed or the connection is gone.
async fn respond<B>(id: u16, response: Response<B>, method: &Method, outbox: &Outbox) -> bool
where
    B: Body<Data = Bytes>,
    B::Error: Into<crate::error::BoxError>,
{
    let bodiless = params::bodiless(method, response.status());
    let mut head = BytesMut::new();
    params::encode_head(&response, &response.body().size_hint(), method, &mut head);
    let mut body = std::pin::pin!(response.into_body());
    let mut first = Some(head);
    if !bodiless {
        loop {
            let frame = poll_fn(|cx| body.as_mut().poll_frame(cx)).await;
            match frame {
                None => break,
                Some(Ok(frame)) => {
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    if data.is_empty() {
                        continue;
                    }
                    let head = first.take();
                    let ok = outbox
                        .push(|buf| {
                            if let Some(head) = head {
                                fastcgi::encode_stream(buf, kind::STDOUT, id, &head);
                            }
                            fastcgi::encode_stream(buf, kind::STDOUT, id, &data);
                        })
                        .await;
                    if !ok {
                        return false;
                    }
                }
                Some(Err(err)) => {
                    let err: crate::error::BoxError = err.into();
                    tracing::warn!(target: "celer::gateway", error = %err, "response body failed");
                    let head = first.take();
                    let line = format!("response body failed: {err}");
                    outbox
                        .push(|buf| {
                            if let Some(head) = head {
                                fastcgi::encode_stream(buf, kind::STDOUT, id, &head);
                            }
                            encode_stderr(buf, id, &line);
                        })
                        .await;
                    return false;
                }
            }
        }
    }
    outbox
        .push(|buf| {
            if let Some(head) = first.take() {
                fastcgi::encode_stream(buf, kind::STDOUT, id, &head);
            }
            fastcgi::encode(buf, kind::STDOUT, id, &[]);
            fastcgi::encode_end(buf, id, 0, ProtocolStatus::RequestComplete);
        })
        .await
}

impl<I, S> Drop for Conn<I, S> {
    fn drop(&mut self) {
        self.outbox.lock().closed = true;
    }
}
