//! [`Prefixed`]: a byte stream that first yields bytes already read.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A stream whose first reads return `prefix`, then the stream's own bytes.
///
/// The HTTP/1.1 engine reads ahead of what it interprets: the HTTP/2
/// preface before it knows the connection is HTTP/2, the first bytes of an
/// upgraded protocol after a 101. It hands those bytes over with the
/// socket in this.
#[derive(Debug)]
pub(crate) struct Prefixed<I> {
    prefix: Bytes,
    io: I,
}

impl<I> Prefixed<I> {
    /// `io` with `prefix` read back first.
    pub(crate) fn new(prefix: Bytes, io: I) -> Prefixed<I> {
        Prefixed { prefix, io }
    }

    /// Bytes of the prefix not read yet.
    pub(crate) fn buffered(&self) -> usize {
        self.prefix.len()
    }
}

/// Moves as much of `src` as fits into `buf`; false when `src` was empty
/// (the caller reads its stream then).
pub(crate) fn drain_into(src: &mut Bytes, buf: &mut ReadBuf<'_>) -> bool {
    if src.is_empty() {
        return false;
    }
    let n = src.len().min(buf.remaining());
    buf.put_slice(&src[..n]);
    src.advance(n);
    if src.is_empty() {
        // An emptied `Bytes` still holds its allocation: a connection
        // that lives for hours (an event stream) would keep it.
        *src = Bytes::new();
    }
    true
}

impl<I: AsyncRead + Unpin> AsyncRead for Prefixed<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if drain_into(&mut this.prefix, buf) {
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.io).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Prefixed<I> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn the_prefix_comes_first_then_the_stream() {
        let (a, mut b) = tokio::io::duplex(64);
        b.write_all(b" world").await.unwrap();
        drop(b);
        let mut io = Prefixed::new(Bytes::from_static(b"hello"), a);
        let mut out = String::new();
        io.read_to_string(&mut out).await.unwrap();
        assert_eq!(out, "hello world");
    }
}
