//! Service dispatch for one HTTP/1.1 connection: the loop over requests
//! that calls the service and decides, after each answer, whether the
//! connection goes on, closes, is handed over after a 101, or turns out to
//! speak another protocol (hyper's `proto/h1/dispatch.rs`).
//!
//! Each turn parses a head from the read buffer, calls the service, and
//! encodes the response into the write buffer. Output is flushed only when
//! the connection would otherwise wait (for the client, for the service, or
//! for a body), so answers to pipelined requests leave in one write. While
//! the service runs, the same task feeds the request body from the socket,
//! but only as fast as the service reads it. The reads, writes and timers
//! are [`Conn`]'s, in `conn`.

use std::future::{Future, poll_fn};
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use bytes::{Bytes, BytesMut};
use http::{Request, Response, StatusCode};
use http_body::Body;
use tokio::time::Instant;
use tower_service::Service;

use crate::body::Incoming;
use crate::common::{ConnConfig, Deadline, Reject};
use crate::error::BoxError;
use crate::http1::conn::{Conn, Fail, Fed, Feed, SEND_FILE_MIN};
use crate::http1::encode::{Encoder, ReqFacts};
use crate::http1::io::{self as bufio, WriteBuf};
use crate::http1::parse::Head;
use crate::http1::{Http1Only, Sniff, Switch};
use crate::prefixed::Prefixed;
use crate::shutdown::Shutdown;
use crate::transport::Transport;
use crate::upgrade::{self, Upgraded};

/// Serves HTTP/1.1 alone on `io` until the client leaves, an error closes
/// the connection, or shutdown starts and the connection becomes idle.
///
/// The server's own connections go through `proto`, which may serve
/// HTTP/2 instead; this entry point never does.
pub fn serve_connection<I, S, B>(
    io: I,
    service: S,
    config: Arc<ConnConfig>,
    shutdown: &Shutdown,
) -> impl Future<Output = ()> + use<I, S, B>
where
    I: Transport,
    S: Service<Request<Incoming>, Response = Response<B>>,
    S::Error: Into<BoxError>,
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    serve_switching(io, service, config, shutdown, Http1Only)
}

/// Serves HTTP/1.1 on `io` like [`serve_connection`], except that a
/// connection whose first bytes `switch` recognises as another protocol is
/// handed to it, with the bytes read so far.
///
/// The connection's state is built before the future exists and the future
/// uses it in place: an `async fn` would rebind its arguments inside the
/// future and keep both copies for the connection's whole life.
pub(crate) fn serve_switching<I, S, B, W>(
    io: I,
    service: S,
    config: Arc<ConnConfig>,
    shutdown: &Shutdown,
    switch: W,
) -> impl Future<Output = ()> + use<I, S, B, W>
where
    I: Transport,
    S: Service<Request<Incoming>, Response = Response<B>>,
    S::Error: Into<BoxError>,
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
    W: Switch<I, S>,
{
    let timer = Deadline::new(Instant::now());
    let mut conn = Conn {
        io,
        rbuf: BytesMut::new(),
        wbuf: WriteBuf::default(),
        config,
        shutdown: shutdown.watch(),
        timer,
        write_timer: None,
        served: 0,
        switch,
    };
    let mut service = service;
    async move {
        match conn.run(&mut service).await {
            Ok(Ended::Closed) => return,
            Ok(Ended::Upgrade(pending)) => {
                let Conn {
                    io, rbuf, shutdown, ..
                } = conn;
                pending.fulfill(Upgraded::new(Box::new(io), &rbuf, shutdown));
                return;
            }
            Ok(Ended::Switch) => {}
            Err(err) => {
                tracing::debug!(target: "celer::http1", error = %err, "connection closed");
                return;
            }
        }
        // Outside the `match`, so its scrutinee is not kept across this wait.
        let Conn {
            io,
            rbuf,
            config,
            shutdown,
            switch,
            ..
        } = conn;
        let io = Prefixed::new(rbuf.freeze(), io);
        // Boxed: an HTTP/1.1 connection's task stays small.
        Box::pin(switch.serve(io, service, config, shutdown)).await;
    }
}

/// How a connection's requests ended.
pub(crate) enum Ended {
    /// Closed (or failed, logged).
    Closed,
    /// Handed over after `101 Switching Protocols`.
    Upgrade(upgrade::Pending),
    /// The first bytes are another protocol's: [`Switch::serve`] takes over.
    Switch,
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

// ===== impl Conn: dispatch =====

impl<I: Transport, W: Sniff> Conn<I, W> {
    /// Serves requests until the connection closes, is handed over after
    /// a 101 response, or turns out to speak another protocol.
    async fn run<S, B>(&mut self, service: &mut S) -> io::Result<Ended>
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
            Ok(0) => return Ok(Ended::Closed),
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
                    return Box::pin(self.close()).await.map(|()| Ended::Closed);
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
                            None => return Box::pin(self.close()).await.map(|()| Ended::Closed),
                            read => read,
                        }
                    }
                    read => read,
                };
                match read {
                    Some(0) => return Box::pin(self.close()).await.map(|()| Ended::Closed),
                    Some(_) => {}
                    None => continue,
                }
            }
            // Boxed so an idle connection's task does not carry the state of
            // a request in flight (see `connection_state_stays_small`).
            match self.next_boxed(service).await {
                Ok(Next::Continue) => {}
                Ok(Next::Close) => return Box::pin(self.close()).await.map(|()| Ended::Closed),
                Ok(Next::Upgrade(pending)) => {
                    return self.flush().await.map(|()| Ended::Upgrade(pending));
                }
                Err(Fail::Switch) => return Ok(Ended::Switch),
                Err(Fail::Reject(reject)) => {
                    return Box::pin(self.reject(reject)).await.map(|()| Ended::Closed);
                }
                Err(Fail::Io(err)) => return Err(err),
            }
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

            // In a block of its own: the service's future is dropped once it
            // answered, so its state and the body's (below) share their
            // place in this future instead of adding up while a body streams.
            let response = {
                let fut = std::pin::pin!(service.call(request));
                match self.drive(fut, &mut feed).await? {
                    Ok(response) => response,
                    Err(err) => return Err(service_failed(err)),
                }
            };
            // A client still waiting for `100 Continue` may or may not send its
            // body, so the connection cannot be reused safely.
            let owed = feed.as_ref().is_some_and(|f| f.continue_owed);
            let facts = ReqFacts {
                keep_alive: facts.keep_alive && !owed && !self.shutdown.is_started(),
                ..facts
            };
            let (status, body, mut framed, send_file) = self.encode_response(response, facts);
            if owed {
                // RFC 9110 §15.2.1: no `100 Continue` after the final
                // status (found by fuzzing). The client was not told to send
                // its body; what it sends anyway is still read.
                if let Some(feed) = feed.as_mut() {
                    feed.continue_owed = false;
                }
            }
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
            } else {
                // Pinned in a block: its place is free again once it ended.
                let body = std::pin::pin!(body);
                if !self.write_body(body, framed.encoder, &mut feed).await? {
                    framed.keep_alive = false;
                }
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
        // Written into the allocation: `Box::pin(future)` builds the whole
        // future (a request's state, over a kilobyte) on the stack and
        // copies it; unstarted, only its arguments are set.
        let slot = Box::new_uninit();
        Box::into_pin(Box::write(slot, self.next(service)))
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
}

/// Logs a service failure and answers 500.
fn service_failed<E: Into<BoxError>>(err: E) -> Fail {
    let err: BoxError = err.into();
    tracing::error!(target: "celer::http1", error = %err, "service failed");
    Fail::Reject(Reject::internal())
}

#[cfg(test)]
mod tests;
