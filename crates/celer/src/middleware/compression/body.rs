//! The compressed body: each frame of the inner body is compressed as it
//! comes, and the encoder is flushed whenever the inner body has nothing
//! ready, so a slow stream (server-sent events) reaches the client at once.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body as _, Frame, SizeHint};

use super::Coding;
use super::encoder::Encoder;
use crate::{Body, BoxError};

/// Largest piece of an inner frame given to the encoder at once, in bytes:
/// a large frame is compressed in pieces, each piece's output sent before
/// the next is read, so the output held never grows with the frame.
pub(super) const INPUT_SLICE: usize = 64 * 1024;

/// What `poll_frame` answers.
type PollFrame = Poll<Option<Result<Frame<Bytes>, BoxError>>>;

/// A body compressed on the fly.
///
/// Memory: the encoder's state (gzip: its 32 KiB window; brotli: about
/// 1 MiB with a 512 KiB window; zstd at level 3: up to 2 MiB) and the
/// output of one [`INPUT_SLICE`] of input; nothing accumulates across
/// frames, however large. The encoder is created on the first poll, so a
/// response to HEAD costs none.
pub(super) struct CompressBody {
    inner: Body,
    coding: Coding,
    level: u32,
    state: State,
}

enum State {
    /// Before the first poll.
    Idle,
    /// Reading the inner body; `input` is what is left of its last frame,
    /// `unflushed` whether input went in since the last flush.
    Streaming {
        encoder: Encoder,
        input: Bytes,
        unflushed: bool,
    },
    /// The stream has ended; trailers (if any) remain to be sent.
    Trailers(Option<HeaderMap>),
    Done,
}

impl CompressBody {
    pub(super) fn new(inner: Body, coding: Coding, level: u32) -> CompressBody {
        CompressBody {
            inner,
            coding,
            level,
            state: State::Idle,
        }
    }

    /// One step; `None` means "loop again".
    fn step(&mut self, cx: &mut Context<'_>) -> Option<PollFrame> {
        let (encoder, unflushed) = match &mut self.state {
            State::Idle => {
                match Encoder::new(self.coding, self.level) {
                    Ok(encoder) => {
                        self.state = State::Streaming {
                            encoder,
                            input: Bytes::new(),
                            unflushed: false,
                        };
                    }
                    Err(err) => return Some(self.fail(err)),
                }
                return None;
            }
            State::Streaming {
                encoder,
                input,
                unflushed,
            } => {
                if !input.is_empty() {
                    let piece = input.split_to(input.len().min(INPUT_SLICE));
                    if let Err(err) = encoder.write(&piece) {
                        return Some(self.fail(err));
                    }
                    *unflushed = true;
                    let out = encoder.take();
                    return (!out.is_empty()).then(|| Poll::Ready(Some(Ok(Frame::data(out)))));
                }
                (encoder, unflushed)
            }
            State::Trailers(trailers) => {
                let trailers = trailers.take();
                self.state = State::Done;
                return Some(Poll::Ready(trailers.map(|t| Ok(Frame::trailers(t)))));
            }
            State::Done => return Some(Poll::Ready(None)),
        };
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Pending => {
                if !*unflushed {
                    return Some(Poll::Pending);
                }
                // The inner body waits: send what we have so far.
                *unflushed = false;
                if let Err(err) = encoder.flush() {
                    return Some(self.fail(err));
                }
                let out = encoder.take();
                Some(if out.is_empty() {
                    Poll::Pending
                } else {
                    Poll::Ready(Some(Ok(Frame::data(out))))
                })
            }
            Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                Ok(data) => {
                    if let State::Streaming { input, .. } = &mut self.state {
                        *input = data;
                    }
                    None
                }
                Err(frame) => {
                    let trailers = frame.into_trailers().ok();
                    self.finish(trailers)
                }
            },
            Poll::Ready(Some(Err(err))) => {
                self.state = State::Done;
                Some(Poll::Ready(Some(Err(err))))
            }
            Poll::Ready(None) => self.finish(None),
        }
    }

    fn finish(&mut self, trailers: Option<HeaderMap>) -> Option<PollFrame> {
        let State::Streaming { encoder, .. } =
            std::mem::replace(&mut self.state, State::Trailers(trailers))
        else {
            return None;
        };
        match encoder.finish() {
            Ok(out) if out.is_empty() => None,
            Ok(out) => Some(Poll::Ready(Some(Ok(Frame::data(out))))),
            Err(err) => Some(self.fail(err)),
        }
    }

    fn fail(&mut self, err: std::io::Error) -> PollFrame {
        self.state = State::Done;
        Poll::Ready(Some(Err(err.into())))
    }
}

impl http_body::Body for CompressBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        loop {
            if let Some(poll) = this.step(cx) {
                return poll;
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.state, State::Done)
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}
