//! Protocol upgrades: the engine hands a byte stream to the service.
//!
//! - HTTP/1.1 (RFC 9110 §7.8): a request carrying `Connection: upgrade` and
//!   an `Upgrade` field has an [`OnUpgrade`] in its extensions. The service
//!   takes it with [`on`], answers `101 Switching Protocols`, and awaits it
//!   to get the [`Upgraded`] connection, which yields the bytes the client
//!   sent after the request head first.
//! - HTTP/2 extended CONNECT (RFC 8441 §4), when the server advertises it
//!   ([`Builder::extended_connect`](crate::Builder::extended_connect)): a
//!   `CONNECT` request with a `:protocol` has a [`ConnectProtocol`] and an
//!   [`OnUpgrade`] in its extensions. A `2xx` answer turns the stream into
//!   a tunnel (RFC 9113 §8.5): the [`Upgraded`] stream reads the client's
//!   DATA frames and writes DATA frames within the flow-control windows;
//!   shutting its write side down ends the stream (`END_STREAM`). Other
//!   streams of the connection go on beside it.

use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::oneshot;

use crate::prefixed::Prefixed;
use crate::shutdown::Watch;

/// A byte stream the engine can hand over.
pub trait Io: AsyncRead + AsyncWrite + Send + Unpin + 'static {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Io for T {}

/// The connection after a 101 response, or an HTTP/2 stream after the
/// `2xx` to an extended CONNECT.
///
/// Its writes keep the ordinary `AsyncWrite` contract over TLS as over
/// plain TCP: a write that answers `Pending` has taken none of its bytes,
/// so it may be dropped (a `select!` taking another branch) and other bytes
/// written instead. Over TLS a write that answers `Ready(Ok(n))` has sealed
/// its `n` bytes, which may still wait in the connection for the socket (up
/// to one write's worth, 64 KiB): call `flush` before waiting on anything
/// else, as with any buffered writer.
///
/// An upgraded connection counts as open for the server's graceful
/// shutdown: the server waits (up to its shutdown timeout) until every
/// `Upgraded` is dropped. Its owner learns that shutdown started from
/// [`Upgraded::poll_shutdown_started`] and should then end the protocol
/// cleanly (a WebSocket sends close 1001).
pub struct Upgraded {
    inner: Prefixed<Box<dyn Io>>,
    watch: Watch,
}

impl Upgraded {
    pub(crate) fn new(io: Box<dyn Io>, read_ahead: &[u8], watch: Watch) -> Upgraded {
        // The engine's read buffer is kilobytes large; an upgraded
        // connection may live for hours, so it keeps a copy of the bytes
        // read ahead (usually none) and not the buffer.
        let read_buf = if read_ahead.is_empty() {
            Bytes::new()
        } else {
            Bytes::copy_from_slice(read_ahead)
        };
        Upgraded {
            inner: Prefixed::new(read_buf, io),
            watch: watch.into_upgraded(),
        }
    }

    /// True once the server's graceful shutdown has started.
    pub fn shutdown_started(&self) -> bool {
        self.watch.is_started()
    }

    /// Ready once the server's graceful shutdown has started; otherwise
    /// wakes `cx` when it does. One task should poll it: the last waker
    /// registered is the one woken.
    pub fn poll_shutdown_started(&self, cx: &mut Context<'_>) -> Poll<()> {
        self.watch.poll_started(cx)
    }
}

impl fmt::Debug for Upgraded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Upgraded")
            .field("buffered", &self.inner.buffered())
            .finish_non_exhaustive()
    }
}

impl AsyncRead for Upgraded {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Upgraded {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The `:protocol` pseudo-header of an HTTP/2 extended CONNECT request
/// (RFC 8441 §4), e.g. `websocket`; in the request's extensions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectProtocol(Box<str>);

impl ConnectProtocol {
    /// A protocol name.
    pub fn new(protocol: &str) -> ConnectProtocol {
        ConnectProtocol(protocol.into())
    }

    /// The protocol name as the client sent it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A future that resolves to the upgraded connection once the engine has
/// written the 101 response (or, on HTTP/2, the `2xx` to an extended
/// CONNECT).
pub struct OnUpgrade {
    rx: Option<oneshot::Receiver<Upgraded>>,
}

impl fmt::Debug for OnUpgrade {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OnUpgrade").finish_non_exhaustive()
    }
}

impl Clone for OnUpgrade {
    /// Extensions must be `Clone`; a clone never resolves to a connection,
    /// only the original does.
    fn clone(&self) -> Self {
        OnUpgrade { rx: None }
    }
}

impl Future for OnUpgrade {
    type Output = io::Result<Upgraded>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(rx) = self.rx.as_mut() else {
            return Poll::Ready(Err(not_upgraded()));
        };
        match Pin::new(rx).poll(cx) {
            Poll::Ready(Ok(up)) => Poll::Ready(Ok(up)),
            Poll::Ready(Err(_)) => Poll::Ready(Err(not_upgraded())),
            Poll::Pending => Poll::Pending,
        }
    }
}

fn not_upgraded() -> io::Error {
    io::Error::other("connection was not upgraded")
}

/// The engine's end of an [`OnUpgrade`].
#[derive(Debug)]
pub(crate) struct Pending {
    tx: oneshot::Sender<Upgraded>,
}

impl Pending {
    pub(crate) fn fulfill(self, up: Upgraded) {
        let _ = self.tx.send(up);
    }

    /// False once the service dropped its [`OnUpgrade`]: nobody would take
    /// the connection.
    pub(crate) fn is_wanted(&self) -> bool {
        !self.tx.is_closed()
    }
}

pub(crate) fn pending() -> (OnUpgrade, Pending) {
    let (tx, rx) = oneshot::channel();
    (OnUpgrade { rx: Some(rx) }, Pending { tx })
}

/// Takes the [`OnUpgrade`] out of a request; awaiting it fails when the
/// request asked for no upgrade or the response was not a 101.
pub fn on<B>(req: &mut http::Request<B>) -> OnUpgrade {
    req.extensions_mut()
        .remove::<OnUpgrade>()
        .unwrap_or(OnUpgrade { rx: None })
}
