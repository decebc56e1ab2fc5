//! [`Transport`]: the byte streams the engine serves (TCP, UNIX, TLS in `tls/`).

use std::io;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite};

/// A connected byte stream the HTTP engine can serve.
///
/// Beyond reading and writing, a transport may report read readiness
/// without a buffer, which lets an idle connection hold no buffer memory.
pub trait Transport: AsyncRead + AsyncWrite + Send + Unpin + 'static {
    /// Polls until the stream has bytes to read (or an error or EOF).
    ///
    /// The default answers ready at once, which makes the engine keep its
    /// read buffer while idle.
    fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let _ = cx;
        Poll::Ready(Ok(()))
    }

    /// True when the peer has sent bytes not yet read, without waiting; the
    /// engine then lingers before closing so they do not turn the close into
    /// a reset. The default answers true, which always lingers.
    fn has_unread_input(&self) -> bool {
        true
    }
}

/// Peeks one byte without blocking (the socket is non-blocking).
fn peek_pending(sock: &socket2::SockRef<'_>) -> bool {
    let mut byte = [std::mem::MaybeUninit::<u8>::uninit(); 1];
    matches!(sock.peek(&mut byte), Ok(n) if n > 0)
}

impl Transport for tokio::net::TcpStream {
    fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        tokio::net::TcpStream::poll_read_ready(self, cx)
    }

    fn has_unread_input(&self) -> bool {
        peek_pending(&socket2::SockRef::from(self))
    }
}

impl Transport for tokio::net::UnixStream {
    fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        tokio::net::UnixStream::poll_read_ready(self, cx)
    }

    fn has_unread_input(&self) -> bool {
        peek_pending(&socket2::SockRef::from(self))
    }
}

impl Transport for tokio::io::DuplexStream {}
