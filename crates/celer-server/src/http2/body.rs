//! [`H2Body`]: an HTTP/2 stream's request data as a body, under the same
//! limits as an HTTP/1.1 body.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use crate::http2::engine::{self, RecvStream};
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use tokio::time::Sleep;

use crate::error::{Error, Kind};

/// A slot the connection keeps for a request stream still open when its
/// body was dropped: the connection reads the rest (within the drain limit)
/// before it answers, so a malformed or reset request is seen before the
/// response goes out, and a client is not reset while still sending.
pub(crate) type Handback = Arc<Mutex<Option<RecvStream>>>;

/// The request data of one HTTP/2 stream.
///
/// Each frame handed to the service gives its bytes back to the stream's
/// flow-control window at once, so a client sends only as fast as the
/// handler reads (the window is the most it may run ahead).
#[derive(Debug)]
pub(crate) struct H2Body {
    /// Always `Some` until the body is dropped.
    recv: Option<RecvStream>,
    /// Where an unfinished stream goes when the body is dropped unread.
    handback: Option<Handback>,
    hint: SizeHint,
    /// Bytes still allowed by `Limits::max_body_bytes`.
    allowed: Option<u64>,
    timeout: Duration,
    /// Armed while the handler waits for data.
    timer: Option<Pin<Box<Sleep>>>,
    data_done: bool,
    done: bool,
}

impl H2Body {
    /// The body of `recv`, whose Content-Length (if any) is `declared`;
    /// dropped unfinished, it leaves `recv` in `handback`.
    pub(crate) fn new(
        recv: RecvStream,
        declared: Option<u64>,
        max: Option<u64>,
        timeout: Duration,
        handback: Option<Handback>,
    ) -> H2Body {
        let done = recv.is_end_stream();
        let hint = match declared {
            Some(n) => SizeHint::with_exact(n),
            None if done => SizeHint::with_exact(0),
            None => SizeHint::default(),
        };
        H2Body {
            recv: Some(recv),
            handback,
            hint,
            allowed: max,
            timeout,
            timer: None,
            data_done: done,
            done,
        }
    }

    pub(crate) fn poll_frame(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        if self.done {
            return Poll::Ready(None);
        }
        let recv = self.recv.as_mut().expect("present until dropped");
        let polled = if self.data_done {
            match recv.poll_trailers(cx) {
                Poll::Ready(Ok(trailers)) => {
                    self.done = true;
                    Poll::Ready(trailers.map(|t| Ok(Frame::trailers(t))))
                }
                Poll::Ready(Err(err)) => Poll::Ready(Some(Err(self.failed(&err)))),
                Poll::Pending => Poll::Pending,
            }
        } else {
            match recv.poll_data(cx) {
                Poll::Ready(Some(Ok(data))) => Poll::Ready(Some(self.received(data))),
                Poll::Ready(Some(Err(err))) => Poll::Ready(Some(Err(self.failed(&err)))),
                Poll::Ready(None) => {
                    self.data_done = true;
                    return self.poll_frame(cx);
                }
                Poll::Pending => Poll::Pending,
            }
        };
        if polled.is_ready() {
            self.timer = None;
            return polled;
        }
        let timeout = self.timeout;
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        if timer.as_mut().poll(cx).is_ready() {
            self.done = true;
            return Poll::Ready(Some(Err(Error::new(Kind::BodyTimeout))));
        }
        Poll::Pending
    }

    /// Accounts for `data`: returns its window, checks the body limit.
    fn received(&mut self, data: Bytes) -> Result<Frame<Bytes>, Error> {
        let n = data.len();
        // Fails only when the stream is already gone; nothing to give back.
        if let Some(recv) = self.recv.as_mut() {
            recv.release_capacity(n);
        }
        if let Some(allowed) = self.allowed.as_mut() {
            match allowed.checked_sub(n as u64) {
                Some(left) => *allowed = left,
                None => {
                    self.done = true;
                    return Err(Error::new(Kind::BodyTooLarge));
                }
            }
        }
        let lower = self.hint.lower().saturating_sub(n as u64);
        let upper = self.hint.upper().map(|u| u.saturating_sub(n as u64));
        self.hint.set_lower(lower);
        if let Some(u) = upper {
            self.hint.set_upper(u);
        }
        Ok(Frame::data(data))
    }

    fn failed(&mut self, err: &engine::Error) -> Error {
        self.done = true;
        let kind = if err.is_reset() || err.is_io() || err.is_go_away() {
            Kind::IncompleteBody
        } else {
            Kind::InvalidBody
        };
        Error::new(kind).with(err.to_string())
    }

    pub(crate) fn is_end_stream(&self) -> bool {
        self.done || self.recv.as_ref().is_none_or(RecvStream::is_end_stream)
    }

    pub(crate) fn size_hint(&self) -> SizeHint {
        self.hint
    }
}

impl Drop for H2Body {
    fn drop(&mut self) {
        let (Some(recv), Some(slot)) = (self.recv.take(), self.handback.take()) else {
            return;
        };
        if !self.done && !recv.is_end_stream() {
            if let Ok(mut slot) = slot.lock() {
                *slot = Some(recv);
            }
        }
    }
}
