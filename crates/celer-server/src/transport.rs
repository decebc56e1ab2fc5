//! [`Transport`]: the byte streams the engine serves (TCP, UNIX, later TLS).

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
}

impl Transport for tokio::net::TcpStream {
    fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        tokio::net::TcpStream::poll_read_ready(self, cx)
    }
}

impl Transport for tokio::net::UnixStream {
    fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        tokio::net::UnixStream::poll_read_ready(self, cx)
    }
}

impl Transport for tokio::io::DuplexStream {}
