//! Files as response bodies: [`FileBody`], and the [`SendFile`] marker that
//! lets a transport send the same bytes without copying them.
//!
//! A [`FileBody`] is an ordinary `http_body::Body`: polled, it reads its
//! region of the file in pieces, so it works on every transport (TLS,
//! HTTP/2, a test harness). A response may also carry a [`SendFile`] in its
//! extensions naming the same region; the HTTP/1.1 engine on a plain socket
//! then sends the region with `sendfile(2)` straight from the page cache and
//! never polls the body.
//!
//! The engine trusts the marker only while the response body still reports
//! an exact size equal to the region's length. A middleware that replaces
//! the body (compression, templating) must remove the marker:
//! `response.extensions_mut().remove::<SendFile>()`.

use std::fmt;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};

/// Largest piece a [`FileBody`] reads at once.
pub const FILE_CHUNK: usize = 64 * 1024;

/// A region of an open file as a response body.
///
/// ```
/// use std::io::Write;
/// use std::sync::Arc;
/// use celer_server::file::FileBody;
/// use http_body::Body as _;
///
/// let mut file = tempfile::tempfile().unwrap();
/// file.write_all(b"Hello, World!").unwrap();
/// let body = FileBody::new(Arc::new(file), 7, 5);
/// assert_eq!(body.size_hint().exact(), Some(5));
/// assert_eq!(body.send_file().offset(), 7);
/// ```
pub struct FileBody {
    file: Arc<File>,
    offset: u64,
    remaining: u64,
}

impl FileBody {
    /// A body of `len` bytes of `file` starting at `offset`.
    ///
    /// The region is read when the body is polled; a file that turns out
    /// shorter than the region fails the body with `UnexpectedEof` (the
    /// transport then aborts the response rather than sending a short one).
    pub fn new(file: Arc<File>, offset: u64, len: u64) -> FileBody {
        FileBody {
            file,
            offset,
            remaining: len,
        }
    }

    /// The whole of `file`, sized by its metadata.
    ///
    /// ```
    /// use celer_server::file::FileBody;
    ///
    /// let file = tempfile::tempfile().unwrap();
    /// assert_eq!(FileBody::whole(file).unwrap().send_file().len(), 0);
    /// ```
    pub fn whole(file: File) -> io::Result<FileBody> {
        let len = file.metadata()?.len();
        Ok(FileBody::new(Arc::new(file), 0, len))
    }

    /// The marker naming what is left of this body's region, to put in the
    /// response's extensions so a transport may send it with `sendfile(2)`.
    pub fn send_file(&self) -> SendFile {
        SendFile {
            file: Arc::clone(&self.file),
            offset: self.offset,
            len: self.remaining,
        }
    }
}

impl Body for FileBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let this = self.get_mut();
        if this.remaining == 0 {
            return Poll::Ready(None);
        }
        // Reads are served from the page cache in the common case; like
        // nginx without thread pools, a cold read blocks this thread briefly.
        let want = usize::try_from(this.remaining).map_or(FILE_CHUNK, |r| r.min(FILE_CHUNK));
        let mut buf = BytesMut::zeroed(want);
        let n = loop {
            match this.file.read_at(&mut buf, this.offset) {
                Ok(n) => break n,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => {
                    this.remaining = 0;
                    return Poll::Ready(Some(Err(err)));
                }
            }
        };
        if n == 0 {
            this.remaining = 0;
            return Poll::Ready(Some(Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "file shorter than the response's length",
            ))));
        }
        buf.truncate(n);
        this.offset += n as u64;
        this.remaining -= n as u64;
        Poll::Ready(Some(Ok(Frame::data(buf.freeze()))))
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

impl fmt::Debug for FileBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileBody")
            .field("offset", &self.offset)
            .field("remaining", &self.remaining)
            .finish()
    }
}

/// A response extension naming the file region the response body holds, so
/// a transport can send it with `sendfile(2)` instead of polling the body.
///
/// Made by [`FileBody::send_file`]; see the module documentation for the
/// contract with middleware.
#[derive(Clone)]
pub struct SendFile {
    file: Arc<File>,
    offset: u64,
    len: u64,
}

impl SendFile {
    /// The open file.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Where the region starts.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The region's length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when the region is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl fmt::Debug for SendFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendFile")
            .field("offset", &self.offset)
            .field("len", &self.len)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use http_body_util::BodyExt;

    use super::*;

    fn file_of(len: usize) -> (Arc<File>, Vec<u8>) {
        let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&data).unwrap();
        (Arc::new(file), data)
    }

    #[tokio::test]
    async fn reads_exactly_its_region_in_bounded_pieces() {
        let (file, data) = file_of(3 * FILE_CHUNK + 17);
        let mut body = FileBody::new(file, 5, (2 * FILE_CHUNK + 3) as u64);
        let mut got = Vec::new();
        while let Some(frame) = body.frame().await {
            let chunk = frame.unwrap().into_data().unwrap();
            assert!(chunk.len() <= FILE_CHUNK);
            got.extend_from_slice(&chunk);
        }
        assert_eq!(got, &data[5..5 + 2 * FILE_CHUNK + 3]);
        assert!(body.is_end_stream());
    }

    #[tokio::test]
    async fn a_file_shorter_than_the_region_fails_the_body() {
        let (file, _) = file_of(10);
        let err = FileBody::new(file, 4, 20).collect().await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn the_marker_names_what_is_left() {
        let (file, _) = file_of(10);
        let body = FileBody::new(file, 2, 8);
        let mark = body.send_file();
        assert_eq!((mark.offset(), mark.len()), (2, 8));
        assert_eq!(body.size_hint().exact(), Some(8));
    }
}
