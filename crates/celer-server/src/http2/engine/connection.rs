//! The connection: the handshake, then a loop that frames queued DATA,
//! writes the output, and reads and acts on the client's frames, each turn
//! under the shared state's lock.
//!
//! Reading stops while the output is backed up (a client that does not
//! read gets no more answers to its PINGs and SETTINGS, and its requests
//! wait in the socket) or while as many requests as the concurrent-stream
//! limit wait to be taken.

use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};

use super::core::{Accepted, Core, OUT_HIGH, Settings, Shared, lock};
use super::frame::{self, HEAD_LEN, Head, PREFACE};
use super::{Error, Reason};
use crate::common::poll_read_buf;

/// Bytes read at a time, and the most a quiet connection's read buffer
/// keeps between reads.
const READ_CHUNK: usize = 8 * 1024;

/// Output buffer capacity a connection keeps once its output is written;
/// a larger one (after a burst) is freed.
const OUT_KEEP: usize = 64 * 1024;

/// The server's settings for the connections it starts.
#[derive(Debug, Clone)]
pub(crate) struct Builder {
    local: Settings,
}

impl Default for Builder {
    fn default() -> Builder {
        Builder::new()
    }
}

impl Builder {
    /// RFC 9113's defaults, 100 concurrent streams and a 64 KiB send
    /// buffer per stream.
    pub(crate) fn new() -> Builder {
        Builder {
            local: Settings {
                max_concurrent_streams: 100,
                stream_window: frame::DEFAULT_WINDOW,
                connection_window: frame::DEFAULT_WINDOW,
                max_frame_size: frame::DEFAULT_MAX_FRAME_SIZE,
                max_header_list_size: 16 * 1024,
                send_buffer: 64 * 1024,
                connect_protocol: false,
            },
        }
    }

    /// Announces SETTINGS_ENABLE_CONNECT_PROTOCOL (RFC 8441).
    pub(crate) fn enable_connect_protocol(&mut self) -> &mut Builder {
        self.local.connect_protocol = true;
        self
    }

    /// Streams a client may have open at once.
    pub(crate) fn max_concurrent_streams(&mut self, n: u32) -> &mut Builder {
        self.local.max_concurrent_streams = n;
        self
    }

    /// Each stream's receive window.
    pub(crate) fn initial_window_size(&mut self, n: u32) -> &mut Builder {
        self.local.stream_window = n.min(frame::MAX_WINDOW as u32);
        self
    }

    /// The connection's receive window.
    pub(crate) fn initial_connection_window_size(&mut self, n: u32) -> &mut Builder {
        self.local.connection_window = n.min(frame::MAX_WINDOW as u32);
        self
    }

    /// The largest frame payload the server accepts.
    pub(crate) fn max_frame_size(&mut self, n: u32) -> &mut Builder {
        self.local.max_frame_size =
            n.clamp(frame::DEFAULT_MAX_FRAME_SIZE, frame::MAX_MAX_FRAME_SIZE);
        self
    }

    /// The largest request header list (RFC 9113 §6.5.2 accounting).
    pub(crate) fn max_header_list_size(&mut self, n: u32) -> &mut Builder {
        self.local.max_header_list_size = n;
        self
    }

    /// Response bytes one stream may queue past what the windows let go.
    pub(crate) fn max_send_buffer_size(&mut self, n: usize) -> &mut Builder {
        self.local.send_buffer = n;
        self
    }

    /// Sends the server's SETTINGS and reads the client's preface.
    pub(crate) async fn handshake<I>(&self, io: I) -> Result<Connection<I>, Error>
    where
        I: AsyncRead + AsyncWrite + Unpin,
    {
        let mut core = Core::new(self.local.clone());
        core.start();
        let mut conn = Connection {
            io,
            shared: Arc::new(Mutex::new(core)),
            rbuf: BytesMut::with_capacity(READ_CHUNK),
            eof: false,
            done: false,
            unflushed: false,
        };
        {
            let Connection { io, shared, .. } = &mut conn;
            let out = std::mem::take(&mut lock(shared).out);
            let mut out = &out[..];
            while !out.is_empty() {
                let n = poll_fn(|cx| Pin::new(&mut *io).poll_write(cx, out))
                    .await
                    .map_err(|e| Error::io(&e))?;
                if n == 0 {
                    return Err(Error::io(&io::ErrorKind::WriteZero.into()));
                }
                out = &out[n..];
            }
            poll_fn(|cx| Pin::new(&mut *io).poll_flush(cx))
                .await
                .map_err(|e| Error::io(&e))?;
        }
        while conn.rbuf.len() < PREFACE.len() {
            let n = conn
                .io
                .read_buf(&mut conn.rbuf)
                .await
                .map_err(|e| Error::io(&e))?;
            if n == 0 {
                return Err(Error::io(&io::ErrorKind::UnexpectedEof.into()));
            }
            let seen = conn.rbuf.len().min(PREFACE.len());
            if conn.rbuf[..seen] != PREFACE[..seen] {
                return Err(Error::go_away(Reason::PROTOCOL_ERROR));
            }
        }
        conn.rbuf.advance(PREFACE.len());
        Ok(conn)
    }
}

/// One HTTP/2 connection after its preface.
pub(crate) struct Connection<I> {
    io: I,
    shared: Arc<Shared>,
    /// Bytes read and not yet taken as frames.
    rbuf: BytesMut,
    /// The client closed its side.
    eof: bool,
    /// The connection has ended (its last poll returned ready).
    done: bool,
    /// A flush of the transport is still due (the last one waited).
    unflushed: bool,
}

/// What one turn of the loop came to.
enum Turn {
    /// Requests wait to be taken.
    Accepted,
    /// The connection is over: `Ok` when it ended cleanly.
    Over(Result<(), Error>),
    /// Nothing more to do until the transport or a handle wakes the task.
    Idle,
}

impl<I: AsyncRead + AsyncWrite + Unpin> Connection<I> {
    /// The next request, driving the connection meanwhile; `None` once the
    /// connection has ended cleanly.
    pub(crate) fn poll_accept(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Accepted, Error>>> {
        let shared = self.shared.clone();
        let mut stale = Vec::new();
        let mut core = lock(&shared);
        let polled = loop {
            if let Some(accepted) = core.take(&mut stale) {
                break Poll::Ready(Some(Ok(accepted)));
            }
            if self.done {
                break Poll::Ready(None);
            }
            core.register(cx.waker());
            match self.turn(&shared, &mut core, cx, true) {
                Turn::Accepted => {}
                Turn::Over(Ok(())) => break Poll::Ready(None),
                Turn::Over(Err(err)) => break Poll::Ready(Some(Err(err))),
                Turn::Idle => break Poll::Pending,
            }
        };
        drop(core);
        drop(stale);
        polled
    }

    /// Drives the connection without taking requests (they wait, up to the
    /// concurrent-stream limit); ready once it has ended.
    pub(crate) fn poll_closed(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        if self.done {
            return Poll::Ready(Ok(()));
        }
        let shared = self.shared.clone();
        let mut core = lock(&shared);
        core.register(cx.waker());
        match self.turn(&shared, &mut core, cx, false) {
            Turn::Over(result) => Poll::Ready(result),
            Turn::Accepted | Turn::Idle => Poll::Pending,
        }
    }

    /// Sends GOAWAY: the streams accepted so far finish, then the
    /// connection ends.
    pub(crate) fn graceful_shutdown(&mut self) {
        lock(&self.shared).graceful_shutdown();
    }

    /// Sends GOAWAY with `reason` and ends the connection at once.
    pub(crate) fn abrupt_shutdown(&mut self, reason: Reason) {
        lock(&self.shared).abrupt_shutdown(reason);
    }

    /// Turns the loop until requests wait (when `accept`), the connection
    /// ends, or there is nothing to do.
    fn turn(
        &mut self,
        shared: &Arc<Shared>,
        core: &mut Core,
        cx: &mut Context<'_>,
        accept: bool,
    ) -> Turn {
        loop {
            // Output first: queued DATA framed, everything written.
            core.pump();
            let mut blocked = false;
            let mut wrote = false;
            while !core.out.is_empty() {
                match Pin::new(&mut self.io).poll_write(cx, &core.out) {
                    Poll::Ready(Ok(0)) => {
                        return self.over(core, Error::io(&io::ErrorKind::WriteZero.into()));
                    }
                    Poll::Ready(Ok(n)) => {
                        wrote = true;
                        core.out.advance(n);
                        if core.out.len() < OUT_HIGH {
                            core.pump();
                        }
                    }
                    Poll::Ready(Err(err)) => return self.over(core, Error::io(&err)),
                    Poll::Pending => {
                        blocked = true;
                        break;
                    }
                }
            }
            if (wrote || self.unflushed) && !blocked {
                if core.out.capacity() > OUT_KEEP {
                    core.out = BytesMut::new();
                }
                match Pin::new(&mut self.io).poll_flush(cx) {
                    Poll::Ready(Err(err)) => return self.over(core, Error::io(&err)),
                    Poll::Ready(Ok(())) => self.unflushed = false,
                    Poll::Pending => {
                        self.unflushed = true;
                        blocked = true;
                    }
                }
            }
            // The end: a failure's GOAWAY written, or no stream left after
            // a GOAWAY either way, or the client gone.
            if let Some(err) = core.failed.clone() {
                if blocked {
                    return Turn::Idle;
                }
                let clean = err.reason() == Some(Reason::NO_ERROR);
                self.finish(cx);
                return Turn::Over(if clean { Ok(()) } else { Err(err) });
            }
            if (core.goaway.is_some() || core.peer_gone || self.eof)
                && core.idle()
                && core.out.is_empty()
            {
                if !blocked {
                    self.finish(cx);
                    return Turn::Over(Ok(()));
                }
                return Turn::Idle;
            }
            if self.eof {
                // The client closed its side with streams in flight: they
                // cannot be answered to anyone.
                core.close_all(Error::io(&io::ErrorKind::UnexpectedEof.into()));
                self.finish(cx);
                return Turn::Over(Ok(()));
            }
            // Frames already read.
            let mut acted = false;
            while !core.backed_up() && core.failed.is_none() {
                if self.rbuf.len() < HEAD_LEN {
                    break;
                }
                let head = Head::parse(&self.rbuf);
                if head.len > core.local.max_frame_size as usize {
                    core.fail(Reason::FRAME_SIZE_ERROR);
                    break;
                }
                if self.rbuf.len() < HEAD_LEN + head.len {
                    break;
                }
                let payload = &self.rbuf[HEAD_LEN..HEAD_LEN + head.len];
                let result = core.on_frame(shared, head, payload);
                self.rbuf.advance(HEAD_LEN + head.len);
                acted = true;
                if let Err(reason) = result {
                    tracing::debug!(target: "celer::http2", ?reason, "connection error");
                    core.fail(reason);
                }
            }
            if accept && !core.accepted.is_empty() {
                return Turn::Accepted;
            }
            if acted || core.failed.is_some() {
                // Their answers (acknowledgements, WINDOW_UPDATEs) go out
                // before more is read.
                continue;
            }
            if core.backed_up() {
                return Turn::Idle;
            }
            // Read more.
            let want = if self.rbuf.len() >= HEAD_LEN {
                (HEAD_LEN + Head::parse(&self.rbuf).len).saturating_sub(self.rbuf.len())
            } else {
                READ_CHUNK
            };
            self.rbuf.reserve(want.max(READ_CHUNK / 2));
            match poll_read_buf(&mut self.io, cx, &mut self.rbuf) {
                Poll::Ready(Ok(0)) => self.eof = true,
                Poll::Ready(Ok(_)) => {}
                Poll::Ready(Err(err)) => return self.over(core, Error::io(&err)),
                Poll::Pending => {
                    if self.rbuf.is_empty() && self.rbuf.capacity() > READ_CHUNK {
                        self.rbuf = BytesMut::new();
                    }
                    return Turn::Idle;
                }
            }
        }
    }

    /// The transport failed: every stream fails, the connection is over.
    fn over(&mut self, core: &mut Core, err: Error) -> Turn {
        core.close_all(err.clone());
        self.done = true;
        Turn::Over(Err(err))
    }

    /// Ends the connection: the write side is shut (a TLS close_notify),
    /// as far as it goes without waiting.
    fn finish(&mut self, cx: &mut Context<'_>) {
        self.done = true;
        let _ = Pin::new(&mut self.io).poll_shutdown(cx);
    }
}

impl<I> Drop for Connection<I> {
    fn drop(&mut self) {
        // Requests never taken hold handles, which hold the state: they go
        // (outside the lock their drops take), or the state would never.
        let accepted = std::mem::take(&mut lock(&self.shared).accepted);
        drop(accepted);
    }
}
