//! Unit tests: compressed bodies decode to their input with the codecs' own
//! decoders, whatever the framing and wherever the inner body waits.

use std::collections::VecDeque;
use std::io::Read;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body as _, Frame};
use proptest::prelude::*;

use super::body::{CompressBody, INPUT_SLICE};
use super::encoder::BROTLI_LG_WINDOW;
use super::{Coding, is_compressed_type};
use crate::{Body, BoxError};

/// A body that answers `Pending` (waking itself at once) the given number
/// of times before each chunk, like a stream waiting on its producer.
struct Stuttering {
    chunks: VecDeque<(Bytes, u8)>,
    waited: u8,
}

impl http_body::Body for Stuttering {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let Some(&(_, pauses)) = self.chunks.front() else {
            return Poll::Ready(None);
        };
        if self.waited < pauses {
            self.waited += 1;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        self.waited = 0;
        let (chunk, _) = self.chunks.pop_front().unwrap_or_default();
        Poll::Ready(Some(Ok(Frame::data(chunk))))
    }
}

/// Polls `body` to the end; returns the frames' bytes, and how many frames
/// were produced right after the inner body said `Pending`.
fn drain(mut body: CompressBody) -> (Vec<u8>, usize) {
    let waker = std::task::Waker::noop();
    let mut cx = Context::from_waker(waker);
    let mut out = Vec::new();
    let mut after_pending = 0;
    let mut pending = false;
    loop {
        match Pin::new(&mut body).poll_frame(&mut cx) {
            Poll::Pending => pending = true,
            Poll::Ready(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    after_pending += usize::from(pending);
                    out.extend_from_slice(&data);
                }
                pending = false;
            }
            Poll::Ready(Some(Err(err))) => panic!("body failed: {err}"),
            Poll::Ready(None) => return (out, after_pending),
        }
    }
}

fn decode(coding: Coding, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    match coding {
        Coding::Gzip => {
            flate2::read::GzDecoder::new(data)
                .read_to_end(&mut out)
                .expect("gzip");
        }
        Coding::Brotli => {
            brotli::Decompressor::new(data, 4096)
                .read_to_end(&mut out)
                .expect("brotli");
        }
        Coding::Zstd => out = zstd::stream::decode_all(data).expect("zstd"),
    }
    out
}

const CODINGS: [(Coding, u32); 3] = [(Coding::Gzip, 6), (Coding::Brotli, 4), (Coding::Zstd, 3)];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn every_framing_decodes_to_the_input(
        chunks in proptest::collection::vec(
            (proptest::collection::vec(any::<u8>(), 0..3000), any::<bool>()),
            0..12,
        ),
    ) {
        let input: Vec<u8> = chunks.iter().flat_map(|(c, _)| c.clone()).collect();
        for (coding, level) in CODINGS {
            let inner = Stuttering {
                chunks: chunks
                    .iter()
                    .map(|(c, p)| (Bytes::from(c.clone()), u8::from(*p)))
                    .collect(),
                waited: 0,
            };
            let body = CompressBody::new(Body::new(inner), coding, level);
            let (compressed, _) = drain(body);
            prop_assert_eq!(decode(coding, &compressed), input.clone(), "{:?}", coding);
        }
    }
}

#[test]
fn a_waiting_inner_body_flushes_what_came_before() {
    for (coding, level) in CODINGS {
        // Twice: once for the flush, once more seen by the caller.
        let chunks = [("event: one\n\n", 0), ("event: two\n\n", 2)];
        let inner = Stuttering {
            chunks: chunks
                .iter()
                .map(|(c, p)| (Bytes::from_static(c.as_bytes()), *p))
                .collect(),
            waited: 0,
        };
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let mut body = CompressBody::new(Body::new(inner), coding, level);
        // Polls until the inner body first waits: by then the first event
        // must be out, decodable on its own.
        let mut first = Vec::new();
        loop {
            match Pin::new(&mut body).poll_frame(&mut cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    first.extend_from_slice(frame.data_ref().expect("data"));
                }
                Poll::Pending => break,
                other => panic!("{coding:?}: ended early: {other:?}"),
            }
        }
        let prefix = decode_prefix(coding, &first);
        assert_eq!(prefix, b"event: one\n\n", "{coding:?}");
        let (rest, _) = drain(body);
        first.extend_from_slice(&rest);
        assert_eq!(
            decode(coding, &first),
            b"event: one\n\nevent: two\n\n",
            "{coding:?}"
        );
    }
}

/// Decodes a stream that has not ended: everything decodable so far.
fn decode_prefix(coding: Coding, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 256];
    let mut reader: Box<dyn Read> = match coding {
        Coding::Gzip => Box::new(flate2::read::GzDecoder::new(data)),
        Coding::Brotli => Box::new(brotli::Decompressor::new(data, 4096)),
        Coding::Zstd => Box::new(zstd::stream::read::Decoder::new(data).expect("zstd")),
    };
    // The stream is cut: reading ends with an error or zero once the
    // available input is used up.
    while let Ok(n) = reader.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    out
}

#[test]
fn compressed_types_are_recognised_by_essence() {
    let table = [
        ("image/png", true),
        ("image/svg+xml; charset=utf-8", false),
        ("IMAGE/JPEG", true),
        ("video/mp4", true),
        ("font/woff2", true),
        ("font/ttf", false),
        ("application/zip", true),
        (
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            true,
        ),
        ("application/json", false),
        ("text/html; charset=utf-8", false),
        ("text/event-stream", false),
        ("garbage", false),
    ];
    for (content_type, expected) in table {
        assert_eq!(is_compressed_type(content_type), expected, "{content_type}");
    }
}

#[test]
fn a_large_frame_is_compressed_in_bounded_pieces() {
    // 3 MiB in one frame, hard to compress (a xorshift sequence).
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let data: Vec<u8> = (0..3 << 20)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    for (coding, level) in CODINGS {
        let inner = Body::from(data.clone());
        let mut body = CompressBody::new(inner, coding, level);
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let mut out = Vec::new();
        let mut largest = 0;
        while let Poll::Ready(Some(frame)) = Pin::new(&mut body).poll_frame(&mut cx) {
            let frame = frame.expect("frame");
            let data = frame.data_ref().expect("data");
            largest = largest.max(data.len());
            out.extend_from_slice(data);
        }
        // One slice's output plus what the encoder may hold back: a block
        // for gzip and zstd (128 KiB), twice the window for brotli.
        let bound = match coding {
            Coding::Brotli => INPUT_SLICE + (2 << BROTLI_LG_WINDOW),
            Coding::Gzip | Coding::Zstd => INPUT_SLICE + 160 * 1024,
        };
        assert!(largest <= bound, "{coding:?}: {largest}");
        assert_eq!(decode(coding, &out), data, "{coding:?}");
    }
}
