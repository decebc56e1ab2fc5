//! Bodies of file responses: one region (with the `sendfile(2)` marker) or
//! the parts of a multipart/byteranges answer.

use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use celer_server::file::{FileBody, SendFile};
use http_body::{Frame, SizeHint};

use crate::Body;

/// Where a representation's bytes are.
#[derive(Debug, Clone)]
pub(crate) enum Content {
    /// An open file.
    File(Arc<File>),
    /// Bytes compiled into the binary.
    Static(&'static [u8]),
    /// A small file's bytes, kept by the open-file cache.
    Memory(Bytes),
}

/// One piece of a response body.
#[derive(Debug)]
enum Piece {
    Bytes(Bytes),
    File(FileBody),
}

impl Content {
    fn piece(&self, offset: u64, len: u64) -> Piece {
        match self {
            Content::File(file) => Piece::File(FileBody::new(Arc::clone(file), offset, len)),
            // The region was checked against the content's length.
            Content::Static(data) => {
                let (start, end) = (offset as usize, (offset + len) as usize);
                Piece::Bytes(Bytes::from_static(&data[start..end]))
            }
            Content::Memory(data) => {
                let (start, end) = (offset as usize, (offset + len) as usize);
                Piece::Bytes(data.slice(start..end))
            }
        }
    }

    /// The region as a body, with the marker that lets a plain-TCP
    /// transport send a file region with `sendfile(2)`.
    pub(crate) fn region(&self, offset: u64, len: u64) -> (Body, Option<SendFile>) {
        if len == 0 {
            // Nothing to send: no file region for a transport to look at.
            return (Body::empty(), None);
        }
        match self.piece(offset, len) {
            Piece::Bytes(bytes) => (Body::from(bytes), None),
            Piece::File(file) => {
                let mark = file.send_file();
                (Body::new(file), Some(mark))
            }
        }
    }
}

/// A body made of pieces sent one after another: multipart/byteranges.
#[derive(Debug, Default)]
pub(crate) struct Pieces {
    pieces: VecDeque<Piece>,
    remaining: u64,
}

impl Pieces {
    /// Appends bytes.
    pub(crate) fn push_bytes(&mut self, bytes: impl Into<Bytes>) {
        let bytes = bytes.into();
        self.remaining += bytes.len() as u64;
        self.pieces.push_back(Piece::Bytes(bytes));
    }

    /// Appends a region of `content`.
    pub(crate) fn push_region(&mut self, content: &Content, offset: u64, len: u64) {
        self.remaining += len;
        self.pieces.push_back(content.piece(offset, len));
    }

    /// The body's length in bytes.
    pub(crate) fn len(&self) -> u64 {
        self.remaining
    }
}

impl http_body::Body for Pieces {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let this = self.get_mut();
        loop {
            let Some(front) = this.pieces.front_mut() else {
                return Poll::Ready(None);
            };
            let frame = match front {
                Piece::Bytes(bytes) => {
                    let bytes = std::mem::take(bytes);
                    this.pieces.pop_front();
                    if bytes.is_empty() {
                        continue;
                    }
                    Ok(Frame::data(bytes))
                }
                Piece::File(file) => match Pin::new(file).poll_frame(cx) {
                    Poll::Ready(None) => {
                        this.pieces.pop_front();
                        continue;
                    }
                    Poll::Ready(Some(frame)) => frame,
                    Poll::Pending => return Poll::Pending,
                },
            };
            if let Ok(data) = frame.as_ref().map(Frame::data_ref) {
                this.remaining -= data.map_or(0, |d| d.len() as u64);
            } else {
                this.pieces.clear();
                this.remaining = 0;
            }
            return Poll::Ready(Some(frame));
        }
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}
