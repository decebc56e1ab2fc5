//! The response body of the bundled apps: [`Body`].

use std::fmt;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Bytes, BytesMut};
use http_body::{Frame, SizeHint};
use tokio::io::{AsyncRead, ReadBuf};

/// Size of each chunk read from a file and sent as one frame.
pub const FILE_CHUNK: usize = 64 * 1024;

/// A response body: nothing, bytes in memory, or a file streamed in
/// [`FILE_CHUNK`] pieces. Its size is always known exactly.
pub struct Body {
    kind: Kind,
}

enum Kind {
    Full(Option<Bytes>),
    File(FileChunks),
}

/// A file being read front to back.
struct FileChunks {
    file: tokio::fs::File,
    /// Bytes still to send; never more than the length announced up front.
    remaining: u64,
    /// The chunk being filled; kept across `Pending` so a read in progress
    /// is not lost.
    buf: BytesMut,
}

impl Body {
    /// A body with no bytes.
    pub fn empty() -> Body {
        Body {
            kind: Kind::Full(None),
        }
    }

    /// A body of bytes in memory.
    pub fn full(data: impl Into<Bytes>) -> Body {
        let data = data.into();
        Body {
            kind: Kind::Full((!data.is_empty()).then_some(data)),
        }
    }

    /// A body that streams the first `len` bytes of `file`. The body ends
    /// with an error if the file turns out shorter.
    pub fn file(file: tokio::fs::File, len: u64) -> Body {
        Body {
            kind: Kind::File(FileChunks {
                file,
                remaining: len,
                buf: BytesMut::new(),
            }),
        }
    }
}

impl Default for Body {
    fn default() -> Self {
        Body::empty()
    }
}

impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Full(data) => f
                .debug_struct("Body")
                .field("len", &data.as_ref().map_or(0, Bytes::len))
                .finish(),
            Kind::File(chunks) => f
                .debug_struct("Body")
                .field("file_remaining", &chunks.remaining)
                .finish(),
        }
    }
}

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        match &mut self.get_mut().kind {
            Kind::Full(data) => Poll::Ready(data.take().map(|d| Ok(Frame::data(d)))),
            Kind::File(chunks) => chunks.poll_chunk(cx).map(|r| r.map(|c| c.map(Frame::data))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Full(data) => data.is_none(),
            Kind::File(chunks) => chunks.remaining == 0,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Full(data) => SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64)),
            Kind::File(chunks) => SizeHint::with_exact(chunks.remaining),
        }
    }
}

impl FileChunks {
    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<io::Result<Bytes>>> {
        if self.remaining == 0 {
            return Poll::Ready(None);
        }
        let want = self.remaining.min(FILE_CHUNK as u64) as usize;
        if self.buf.len() != want {
            // Zeroed rather than uninitialised: filling it takes no unsafe
            // code, and the memset is small next to the read itself.
            self.buf = BytesMut::zeroed(want);
        }
        let mut read = ReadBuf::new(&mut self.buf);
        ready!(Pin::new(&mut self.file).poll_read(cx, &mut read))?;
        let n = read.filled().len();
        if n == 0 {
            self.remaining = 0;
            return Poll::Ready(Some(Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "file shrank while it was being sent",
            ))));
        }
        self.remaining -= n as u64;
        Poll::Ready(Some(Ok(self.buf.split_to(n).freeze())))
    }
}
