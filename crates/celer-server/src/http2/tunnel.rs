//! An HTTP/2 stream as a byte stream (RFC 9113 §8.5, RFC 8441 §5): the
//! tunnel a `2xx` answer to an extended CONNECT opens, handed to the
//! service as an [`Upgraded`](crate::upgrade::Upgraded).
//!
//! Reads take the client's DATA frames and give their flow-control window
//! back only as the bytes are consumed, so the client can never have more
//! in flight than the stream window ([`Limits::h2_stream_window`](crate::Limits)).
//! Writes take at most the capacity the client's windows grant (and the engine's
//! per-stream send buffer allows): a write to a client that does not open
//! its window waits, takes none of its bytes, and the writer's own queue
//! (a WebSocket's bounded outgoing queue) is what fills. Shutting the write
//! side down sends `END_STREAM`; a tunnel dropped before both directions
//! ended resets the stream with `CANCEL` (RFC 8441 §5: the RST_STREAM that
//! stands for a TCP reset).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::http2::engine::{self, Reason, RecvStream, SendStream};
use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::oneshot;

/// Most bytes one write asks the client's window for: one default-size
/// frame's worth keeps a writer from reserving window it may not use.
const WRITE_PIECE: usize = 16 * 1024;

/// A stream after the `2xx` to an extended CONNECT.
pub(crate) struct Tunnel {
    send: SendStream,
    recv: RecvStream,
    /// Received and not yet read (window not yet given back).
    unread: Bytes,
    /// The client ended its side (`END_STREAM`).
    read_done: bool,
    /// `END_STREAM` sent.
    write_done: bool,
    /// Dropped with the tunnel: tells the connection the stream is over.
    _over: oneshot::Sender<()>,
}

impl Tunnel {
    /// A tunnel on a stream and the receiver that resolves when it is
    /// dropped.
    pub(crate) fn new(send: SendStream, recv: RecvStream) -> (Tunnel, oneshot::Receiver<()>) {
        let (tx, rx) = oneshot::channel();
        let tunnel = Tunnel {
            send,
            recv,
            unread: Bytes::new(),
            read_done: false,
            write_done: false,
            _over: tx,
        };
        (tunnel, rx)
    }
}

fn to_io(err: engine::Error) -> io::Error {
    if err.is_reset() || err.is_go_away() {
        io::Error::new(io::ErrorKind::ConnectionReset, err)
    } else {
        io::Error::other(err)
    }
}

impl AsyncRead for Tunnel {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            if !this.unread.is_empty() {
                let n = this.unread.len().min(buf.remaining());
                buf.put_slice(&this.unread[..n]);
                this.unread.advance(n);
                // The window goes back as the bytes are consumed.
                this.recv.release_capacity(n);
                return Poll::Ready(Ok(()));
            }
            if this.read_done {
                return Poll::Ready(Ok(()));
            }
            match this.recv.poll_data(cx) {
                Poll::Ready(Some(Ok(data))) => this.unread = data,
                Poll::Ready(Some(Err(err))) => return Poll::Ready(Err(to_io(err))),
                Poll::Ready(None) => this.read_done = true,
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl AsyncWrite for Tunnel {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.write_done {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        loop {
            let granted = this.send.capacity();
            if granted > 0 {
                let n = granted.min(buf.len());
                this.send
                    .send_data(Bytes::copy_from_slice(&buf[..n]), false)
                    .map_err(to_io)?;
                return Poll::Ready(Ok(n));
            }
            this.send.reserve_capacity(buf.len().min(WRITE_PIECE));
            match this.send.poll_capacity(cx) {
                // Granted (or granted and taken back by a shrinking
                // window: the next poll then waits for a new grant).
                Poll::Ready(Some(Ok(_))) => {}
                Poll::Ready(Some(Err(err))) => return Poll::Ready(Err(to_io(err))),
                Poll::Ready(None) => return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into())),
                Poll::Pending => {
                    // A reset is only seen by the read side otherwise.
                    if let Poll::Ready(reason) = this.send.poll_reset(cx) {
                        let err = match reason {
                            Ok(reason) => engine::Error::from(reason),
                            Err(err) => err,
                        };
                        return Poll::Ready(Err(to_io(err)));
                    }
                    return Poll::Pending;
                }
            }
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // The engine writes what was queued as soon as the connection task runs.
        // A writer that flushes has nothing more for now: window granted
        // to this stream and not used goes back to the connection, so an
        // idle WebSocket holds none that other streams need.
        if self.send.capacity() > 0 {
            self.send.reserve_capacity(0);
        }
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if !this.write_done {
            this.write_done = true;
            // The reservation of an unfinished write goes back.
            this.send.reserve_capacity(0);
            this.send.send_data(Bytes::new(), true).map_err(to_io)?;
        }
        Poll::Ready(Ok(()))
    }
}

impl Drop for Tunnel {
    fn drop(&mut self) {
        if !(self.write_done && self.read_done) {
            self.send.send_reset(Reason::CANCEL);
        }
    }
}
