//! [`Transport`]: the byte streams the engine serves (TCP, UNIX, TLS in `tls/`).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::task::{Context, Poll, ready};

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncWrite, Interest};

use crate::sys;

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

    /// Reads what has already arrived into the spare room of `buf`, without
    /// waiting and without consulting the runtime's readiness; `WouldBlock`
    /// when nothing has. The engine calls it once, on a fresh connection:
    /// with `TCP_DEFER_ACCEPT` its first request is usually there when
    /// `accept` returns, and reading it at once spares a trip through the
    /// event loop. The default answers `WouldBlock`.
    fn read_arrived(&self, buf: &mut BytesMut) -> io::Result<usize> {
        let _ = buf;
        Err(io::ErrorKind::WouldBlock.into())
    }

    /// The connection waits, everything written flushed, for something
    /// that may take minutes (a streaming response between events): the
    /// transport may drop state it can make again when it next reads or
    /// writes, so that thousands of such connections hold less. The
    /// default does nothing; TLS drops its expanded record keys.
    fn release_idle(&mut self) {}

    /// True when [`Transport::poll_send_file`] works: the engine then sends
    /// file bodies marked with [`SendFile`](crate::file::SendFile) from the
    /// kernel instead of reading them. The default is false.
    fn can_send_file(&self) -> bool {
        false
    }

    /// Sends up to `len` bytes of `file` from `offset` without copying them
    /// through user space; returns how many were sent, 0 when the file ended
    /// early. Only called when [`Transport::can_send_file`] is true; the
    /// default fails with `Unsupported`.
    fn poll_send_file(
        &self,
        cx: &mut Context<'_>,
        file: &File,
        offset: u64,
        len: usize,
    ) -> Poll<io::Result<usize>> {
        let _ = (cx, file, offset, len);
        Poll::Ready(Err(io::ErrorKind::Unsupported.into()))
    }
}

/// `sendfile(2)` on a tokio socket, waiting for write readiness.
macro_rules! poll_send_file_on {
    ($sock:expr, $cx:expr, $file:expr, $offset:expr, $len:expr) => {{
        let sock = $sock;
        loop {
            ready!(sock.poll_write_ready($cx))?;
            match sock.try_io(Interest::WRITABLE, || {
                sys::send_file(sock.as_raw_fd(), $file.as_raw_fd(), $offset, $len)
            }) {
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => continue,
                res => return Poll::Ready(res),
            }
        }
    }};
}

/// One non-blocking `recv` into the spare room of `buf`.
fn recv_into(sock: &socket2::SockRef<'_>, buf: &mut BytesMut) -> io::Result<usize> {
    let n = sock.recv(buf.spare_capacity_mut())?;
    #[allow(unsafe_code)]
    // SAFETY: `recv` initialised the first `n` bytes of the spare room it
    // was given, and `n` is at most that room's length.
    unsafe {
        buf.set_len(buf.len() + n);
    }
    Ok(n)
}

/// Peeks one byte without blocking (the socket is non-blocking).
fn peek_pending(sock: &socket2::SockRef<'_>) -> bool {
    let mut byte = [std::mem::MaybeUninit::<u8>::uninit(); 1];
    matches!(sock.peek(&mut byte), Ok(n) if n > 0)
}

/// The same [`Transport`] for each tokio socket type: readiness from tokio,
/// reads and peeks through the socket itself, `sendfile` where the system
/// has it.
macro_rules! socket_transport {
    ($($stream:ty),+) => {$(
        impl Transport for $stream {
            fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                <$stream>::poll_read_ready(self, cx)
            }

            fn read_arrived(&self, buf: &mut BytesMut) -> io::Result<usize> {
                recv_into(&socket2::SockRef::from(self), buf)
            }

            fn has_unread_input(&self) -> bool {
                peek_pending(&socket2::SockRef::from(self))
            }

            fn can_send_file(&self) -> bool {
                sys::HAS_SEND_FILE
            }

            fn poll_send_file(
                &self,
                cx: &mut Context<'_>,
                file: &File,
                offset: u64,
                len: usize,
            ) -> Poll<io::Result<usize>> {
                poll_send_file_on!(self, cx, file, offset, len)
            }
        }
    )+};
}

socket_transport!(tokio::net::TcpStream, tokio::net::UnixStream);

impl Transport for tokio::io::DuplexStream {}
