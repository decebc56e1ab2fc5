//! [`TlsStream`]: an established TLS connection as the engine reads and
//! writes it, on the record layer of `record`.
//!
//! Reads take the socket's bytes into a pooled buffer and open each record
//! in place there; the plaintext is copied once, into the caller's buffer.
//! Writes seal the caller's whole batch (up to 4 records of 16 KiB, from
//! any number of slices) into one pooled output buffer, each record's
//! plaintext copied once right after its header and encrypted there, and
//! send the records in one `write`. An idle connection holds no buffer: the
//! read buffer goes back to a per-thread pool once its records are read,
//! and the output buffer once its records are sent (one pool for both, so
//! a keep-alive request and its response cycle through one buffer).
//!
//! **Writes keep the ordinary `AsyncWrite` contract.** A write that returns
//! `Pending` has taken none of the caller's bytes, so a caller may drop it
//! (a `select!` that picks another branch) and later write other bytes; a
//! write that returns `Ready(Ok(n))` has sealed those `n` bytes. A record
//! cannot be taken back once sealed (its sequence number is spent), so a
//! write seals only when no earlier records wait for the socket: it sends
//! what waits first, answering `Pending` (and taking nothing) while the
//! socket is full. The records of the write itself go out at once as far as
//! the socket takes them; the rest wait in the output buffer, at most one
//! write's worth ([`WRITE_MAX`] of plaintext), and go out on the next write,
//! `poll_flush` or `poll_shutdown`. A writer that stops writing therefore
//! flushes, as with any buffered writer: the HTTP/1.1 engine and h2 do
//! before they wait for the client.

use std::cell::RefCell;
use std::future::Future;
use std::io::{self, IoSlice};
use std::ops::Range;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

use crate::prefixed;
use crate::tls::handshake::Established;
use crate::tls::info::TlsInfo;
use crate::tls::record::{self, Fatal, MAX_FRAGMENT, Opened, RecordLayer};
use crate::transport::Transport;

/// Plaintext sealed per write at most: 4 records, 64 KiB, what rustls's
/// own buffer held before. A client that stops reading holds this much
/// sealed output (with the engine's copy of it) until the write timeout.
const WRITE_MAX: usize = 4 * MAX_FRAGMENT;

/// Capacity of a new pooled buffer: a keep-alive request's records, or a
/// response's, fit; a longer record or a larger write grows it.
const READ_BUF: usize = 8 * 1024;

/// Capacity past which a buffer is freed rather than pooled: a whole
/// write's records (64 KiB of plaintext and their overhead) fit below it,
/// so a large response does not allocate an output buffer per write. The
/// pool holds at most [`POOL_MAX`] of them, 1.25 MiB per thread.
const POOL_BUF_MAX: usize = WRITE_MAX + 16 * 1024;

/// Spare room asked of the read buffer before a read, at least.
const READ_MIN: usize = 2 * 1024;

/// Buffers (read and output) kept per thread at most.
const POOL_MAX: usize = 16;

thread_local! {
    static POOL: RefCell<Vec<BytesMut>> = const { RefCell::new(Vec::new()) };
}

/// Where reading stands.
#[derive(Debug)]
enum ReadState {
    Open,
    /// The client sent `close_notify`: reads end cleanly.
    Closed,
    /// The socket ended without `close_notify`: a truncation, an error
    /// once the data before it is read (as rustls reports it).
    Eof,
    /// A fatal alert ended the connection.
    Failed(rustls::Error),
}

/// Where writing stands.
#[derive(Debug, PartialEq, Eq)]
enum WriteState {
    Open,
    /// `close_notify` is sealed: no more data.
    Closed,
    /// A fatal alert is sealed: no more data.
    Failed,
}

/// A TLS connection after its handshake.
pub(crate) struct TlsStream<I> {
    /// The transport under TLS.
    io: I,
    /// Keys, sequence numbers and the post-handshake rules.
    records: RecordLayer,
    /// What the handshake agreed.
    info: Arc<TlsInfo>,
    /// Plaintext rustls decrypted during the handshake, read first.
    early: Bytes,
    /// Bytes from the socket; when `opened` is not 0 its first `opened`
    /// bytes are a record opened in place, holding `plain`. Taken from the
    /// pool for a read and given back once empty.
    inbuf: BytesMut,
    /// Length of the opened record at the front of `inbuf`, 0 for none.
    opened: usize,
    /// The opened record's plaintext not yet read, as a range of `inbuf`.
    plain: Range<usize>,
    /// Sealed records waiting for the socket, back to back, oldest first.
    /// Taken from the pool to seal and given back once all are sent.
    out: BytesMut,
    /// Bytes at the front of `out` already sent.
    out_sent: usize,
    read: ReadState,
    write: WriteState,
}

impl<I> std::fmt::Debug for TlsStream<I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsStream")
            .field("records", &self.records)
            .field("read", &self.read)
            .field("write", &self.write)
            .field("unsent", &(self.out.len() - self.out_sent))
            .finish_non_exhaustive()
    }
}

impl<I: Transport> TlsStream<I> {
    /// Serves the connection `established` over `io`.
    pub(crate) fn new(io: I, established: Established) -> Self {
        let Established {
            records,
            info,
            inbuf,
            early,
            peer_closed,
        } = established;
        // The handshake's buffer is kept only while it holds records.
        let inbuf = if inbuf.is_empty() {
            BytesMut::new()
        } else {
            inbuf
        };
        TlsStream {
            io,
            records,
            info,
            early,
            inbuf,
            opened: 0,
            plain: 0..0,
            out: BytesMut::new(),
            out_sent: 0,
            read: if peer_closed {
                ReadState::Closed
            } else {
                ReadState::Open
            },
            write: WriteState::Open,
        }
    }

    /// The protocol the handshake agreed through ALPN.
    pub(crate) fn alpn_protocol(&self) -> Option<&[u8]> {
        self.info.alpn()
    }

    /// What the handshake agreed, for the connection's [`ConnInfo`](crate::ConnInfo).
    pub(crate) fn info(&self) -> &Arc<TlsInfo> {
        &self.info
    }

    /// Whether the read and write keys are expanded (tests).
    #[cfg(test)]
    pub(crate) fn keys_expanded(&self) -> (bool, bool) {
        self.records.keys_expanded()
    }

    /// Lowers the number of records sealed with one key (tests and the
    /// differential fuzz target reach it).
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn set_write_limit(&mut self, records: u64) {
        self.records.set_write_limit(records);
    }

    // ===== reading =====

    /// Opens the first record of `inbuf` when it is whole; false when it is
    /// not (or `inbuf` is empty).
    fn open_next(&mut self, cx: &mut Context<'_>) -> io::Result<bool> {
        let len = match record::record_len(&self.inbuf, self.records.is_tls13()) {
            Ok(Some(len)) => len,
            Ok(None) => return Ok(false),
            Err(fatal) => return Err(self.fail(cx, fatal)),
        };
        match self.records.open(&mut self.inbuf[..len]) {
            Ok(Opened::Data(range)) => {
                self.opened = len;
                self.plain = range;
            }
            Ok(Opened::Control) => {
                self.inbuf.advance(len);
                // Nothing is owed once our close_notify or an alert is
                // sealed (`owes_alert` is false then).
                if self.records.owes_alert() {
                    // A refused renegotiation's warning: sent now if the
                    // socket takes it, else before the next write. An owed
                    // key update waits for our next data record.
                    if let Err(fatal) = self.records.seal_pending(held(&mut self.out)) {
                        return Err(self.fail(cx, fatal));
                    }
                    let _ = self.poll_send(cx);
                }
                self.release_inbuf();
            }
            Ok(Opened::Closed) => {
                // RFC 8446 §6.1: data after close_notify is ignored.
                self.inbuf.clear();
                self.release_inbuf();
                self.read = ReadState::Closed;
            }
            Err(fatal) => return Err(self.fail(cx, fatal)),
        }
        Ok(true)
    }

    /// Drops the opened record once its plaintext is read.
    fn consume_record(&mut self) {
        if self.inbuf.len() == self.opened {
            // The usual case: nothing after it. Emptied from the start, the
            // buffer goes back to the pool without moving its offset.
            self.inbuf.clear();
        } else {
            self.inbuf.advance(self.opened);
        }
        self.opened = 0;
        self.release_inbuf();
    }

    /// Gives the read buffer back to the pool once it holds nothing.
    fn release_inbuf(&mut self) {
        if self.inbuf.is_empty() && self.inbuf.capacity() > 0 {
            give_buf(std::mem::take(&mut self.inbuf));
        }
    }

    /// Reads once from the socket; at its end, marks the read side.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.inbuf.capacity() == 0 {
            self.inbuf = take_buf();
        }
        // Room for the whole record when its header is in, so one read can
        // complete it.
        let want = match self.inbuf.get(3..5) {
            Some(len) => record::HEADER_LEN + usize::from(u16::from_be_bytes([len[0], len[1]])),
            None => 0,
        };
        self.inbuf
            .reserve(want.saturating_sub(self.inbuf.len()).max(READ_MIN));
        let n = ready!(std::pin::pin!(self.io.read_buf(&mut self.inbuf)).poll(cx))?;
        if n == 0 {
            self.read = ReadState::Eof;
        }
        Poll::Ready(Ok(()))
    }

    /// The error a read reports once reading stopped, if it did.
    fn read_error(&self) -> Option<io::Error> {
        match &self.read {
            ReadState::Open | ReadState::Closed => None,
            ReadState::Eof => Some(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "peer closed connection without sending TLS close_notify",
            )),
            ReadState::Failed(err) => Some(io::Error::new(io::ErrorKind::InvalidData, err.clone())),
        }
    }

    /// Ends the connection on a fatal error: seals the alert it calls for
    /// and tries once to send it (RFC 8446 §6.2).
    fn fail(&mut self, cx: &mut Context<'_>, fatal: Fatal) -> io::Error {
        tracing::debug!(target: "celer::tls", error = %fatal.error, "connection failed");
        if let Some(alert) = fatal.alert {
            if self.write == WriteState::Open {
                // Best effort: the connection fails either way. A worn-out
                // TLS 1.2 key ends with close_notify, a warning; every
                // other alert here is fatal.
                let fatal = alert != rustls::AlertDescription::CloseNotify;
                let _ = self.records.seal_alert(alert, fatal, held(&mut self.out));
            }
            let _ = self.poll_send(cx);
        }
        self.write = WriteState::Failed;
        self.read = ReadState::Failed(fatal.error.clone());
        io::Error::new(io::ErrorKind::InvalidData, fatal.error)
    }

    // ===== writing =====

    /// Sends the sealed records; `Ready(Ok)` once none is left, with the
    /// output buffer back in the pool.
    fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.out_sent < self.out.len() {
            let unsent = &self.out[self.out_sent..];
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, unsent))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.out_sent += n;
        }
        if self.out.capacity() > 0 {
            self.out.clear();
            self.out_sent = 0;
            give_buf(std::mem::take(&mut self.out));
        }
        Poll::Ready(Ok(()))
    }

    /// Seals the first `len` bytes of `bufs` (`len` is their total, not
    /// 0), up to [`WRITE_MAX`], at the end of `out`; returns how many.
    fn seal(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
        len: usize,
    ) -> io::Result<usize> {
        let taken = len.min(WRITE_MAX);
        match self.records.seal(bufs, taken, held(&mut self.out)) {
            Ok(sealed) => Ok(sealed),
            Err(fatal) => Err(self.fail(cx, fatal)),
        }
    }
}

impl<I: Transport> AsyncRead for TlsStream<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if prefixed::drain_into(&mut this.early, buf) {
            return Poll::Ready(Ok(()));
        }
        let mut read = false;
        loop {
            if !this.plain.is_empty() {
                let n = this.plain.len().min(buf.remaining());
                buf.put_slice(&this.inbuf[this.plain.start..this.plain.start + n]);
                this.plain.start += n;
                read |= n > 0;
                if !this.plain.is_empty() {
                    return Poll::Ready(Ok(()));
                }
                this.consume_record();
                if read && this.inbuf.is_empty() {
                    // Nothing more here: the next record waits for the
                    // socket, which only the next read asks.
                    return Poll::Ready(Ok(()));
                }
            }
            if buf.remaining() == 0 || !matches!(this.read, ReadState::Open) {
                // Data first; the end or the error on the next read.
                return Poll::Ready(match this.read_error() {
                    Some(err) if !read => Err(err),
                    _ => Ok(()),
                });
            }
            // The records already here first, without touching the socket.
            match this.open_next(cx) {
                Ok(true) => continue,
                Ok(false) if read => return Poll::Ready(Ok(())),
                Ok(false) => ready!(this.poll_fill(cx))?,
                Err(_) if read => return Poll::Ready(Ok(())),
                Err(err) => return Poll::Ready(Err(err)),
            }
        }
    }
}

impl<I: Transport> AsyncWrite for TlsStream<I> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let len: usize = bufs.iter().map(|buf| buf.len()).sum();
        // Records from before wait first; while they do, nothing of this
        // write is taken (`Pending` consumes no bytes).
        if !this.out.is_empty() {
            ready!(this.poll_send(cx))?;
        }
        if len == 0 {
            return Poll::Ready(Ok(0));
        }
        match this.write {
            WriteState::Open => {}
            WriteState::Closed => {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::BrokenPipe,
                    "write after TLS close_notify",
                )));
            }
            WriteState::Failed => {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::BrokenPipe,
                    "write after a TLS alert",
                )));
            }
        }
        let sealed = this.seal(cx, bufs, len)?;
        // Sealed is written: what the socket does not take now waits in
        // `out` for the next write, flush or shutdown.
        if let Poll::Ready(Err(err)) = this.poll_send(cx) {
            return Poll::Ready(Err(err));
        }
        Poll::Ready(Ok(sealed))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_send(cx))?;
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.write == WriteState::Open {
            // RFC 8446 §6.1: close_notify before closing the write side,
            // after the records still waiting in `out`. Best effort: the
            // socket closes either way.
            let _ = this.records.seal_alert(
                rustls::AlertDescription::CloseNotify,
                false,
                held(&mut this.out),
            );
            this.write = WriteState::Closed;
        }
        ready!(this.poll_send(cx))?;
        match ready!(Pin::new(&mut this.io).poll_shutdown(cx)) {
            Err(err) if err.kind() == io::ErrorKind::NotConnected => Poll::Ready(Ok(())),
            res => Poll::Ready(res),
        }
    }
}

impl<I: Transport> Transport for TlsStream<I> {
    fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Plaintext, a whole record (or a bad one) already here, or the end
        // is readable at once; otherwise wait for the socket.
        let buffered = !self.early.is_empty()
            || !self.plain.is_empty()
            || !matches!(self.read, ReadState::Open)
            || !matches!(
                record::record_len(&self.inbuf, self.records.is_tls13()),
                Ok(None)
            );
        if buffered {
            return Poll::Ready(Ok(()));
        }
        self.io.poll_read_ready(cx)
    }

    fn has_unread_input(&self) -> bool {
        self.io.has_unread_input()
    }

    fn release_idle(&mut self) {
        self.records.release_keys();
        self.io.release_idle();
    }
}

/// `buf`, first taken from the pool if the connection holds none.
fn held(buf: &mut BytesMut) -> &mut BytesMut {
    if buf.capacity() == 0 {
        *buf = take_buf();
    }
    buf
}

/// A buffer with at least [`READ_BUF`] bytes of room, from the pool if it
/// has one.
fn take_buf() -> BytesMut {
    POOL.with(|pool| pool.borrow_mut().pop())
        .unwrap_or_else(|| BytesMut::with_capacity(READ_BUF))
}

/// Returns an empty buffer to the pool; one still shared or grown past
/// [`POOL_BUF_MAX`] is freed instead.
fn give_buf(mut buf: BytesMut) {
    if buf.capacity() > POOL_BUF_MAX || !buf.try_reclaim(READ_BUF) {
        return;
    }
    POOL.with(|pool| {
        let mut pool = pool.borrow_mut();
        if pool.len() < POOL_MAX {
            pool.push(buf);
        }
    });
}
