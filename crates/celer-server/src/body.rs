//! The request body handed to services: [`Incoming`].
//!
//! A body that arrived whole with its head is handed over as one piece with
//! no channel. Anything else streams: the connection reads the socket only
//! when the service asks for the next frame (backpressure), and the first
//! ask is what sends `100 Continue` when the client expects it.

use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};

use crate::error::Error;
use crate::http2::H2Body;

/// A request body as the engine delivers it: an `http_body::Body` of
/// `Bytes` frames, then trailers if the client sent any.
pub struct Incoming {
    inner: Inner,
}

enum Inner {
    Empty,
    Full(Option<Bytes>),
    Stream {
        chan: Arc<Chan>,
        hint: SizeHint,
    },
    /// An HTTP/2 stream's data, read straight from the `h2` crate.
    H2(Box<H2Body>),
}

/// State shared by the connection (sender) and the body (receiver).
#[derive(Debug, Default)]
pub(crate) struct Chan {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// One frame waiting for the receiver.
    slot: Option<Result<Frame<Bytes>, Error>>,
    /// The receiver is waiting for a frame.
    want: bool,
    /// No more frames will come.
    done: bool,
    /// The receiver was dropped.
    gone: bool,
    rx: Option<Waker>,
    tx: Option<Waker>,
}

impl Chan {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the state torn: every
        // critical section is a few field assignments.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Incoming {
    /// A body with no bytes.
    pub fn empty() -> Incoming {
        Incoming {
            inner: Inner::Empty,
        }
    }

    /// A body made of one piece already in memory.
    pub fn full(data: Bytes) -> Incoming {
        if data.is_empty() {
            return Incoming::empty();
        }
        Incoming {
            inner: Inner::Full(Some(data)),
        }
    }

    /// A streaming body and the connection's end of it.
    pub(crate) fn channel(hint: SizeHint) -> (Incoming, Sender) {
        let chan = Arc::new(Chan::default());
        let body = Incoming {
            inner: Inner::Stream {
                chan: chan.clone(),
                hint,
            },
        };
        (body, Sender { chan })
    }

    /// The body of an HTTP/2 request.
    pub(crate) fn h2(body: H2Body) -> Incoming {
        Incoming {
            inner: Inner::H2(Box::new(body)),
        }
    }
}

impl Default for Incoming {
    fn default() -> Self {
        Incoming::empty()
    }
}

impl fmt::Debug for Incoming {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.inner {
            Inner::Empty => "empty",
            Inner::Full(_) => "full",
            Inner::Stream { .. } => "streaming",
            Inner::H2(_) => "http/2 stream",
        };
        f.debug_tuple("Incoming").field(&kind).finish()
    }
}

impl Body for Incoming {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let this = self.get_mut();
        match &mut this.inner {
            Inner::Empty => Poll::Ready(None),
            Inner::Full(data) => Poll::Ready(data.take().map(|d| Ok(Frame::data(d)))),
            Inner::H2(body) => body.poll_frame(cx),
            Inner::Stream { chan, hint } => {
                let mut st = chan.lock();
                if let Some(frame) = st.slot.take() {
                    if let Ok(Some(data)) = frame.as_ref().map(Frame::data_ref) {
                        let n = data.len() as u64;
                        let lower = hint.lower().saturating_sub(n);
                        let upper = hint.upper().map(|u| u.saturating_sub(n));
                        hint.set_lower(lower);
                        if let Some(u) = upper {
                            hint.set_upper(u);
                        }
                    }
                    if let Some(tx) = st.tx.take() {
                        tx.wake();
                    }
                    return Poll::Ready(Some(frame));
                }
                if st.done {
                    return Poll::Ready(None);
                }
                st.want = true;
                if st.rx.as_ref().is_none_or(|w| !w.will_wake(cx.waker())) {
                    st.rx = Some(cx.waker().clone());
                }
                if let Some(tx) = st.tx.take() {
                    tx.wake();
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.inner {
            Inner::Empty => true,
            Inner::Full(data) => data.is_none(),
            Inner::Stream { chan, .. } => {
                let st = chan.lock();
                st.done && st.slot.is_none()
            }
            Inner::H2(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            Inner::Empty => SizeHint::with_exact(0),
            Inner::Full(data) => SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64)),
            Inner::Stream { hint, .. } => *hint,
            Inner::H2(body) => body.size_hint(),
        }
    }
}

impl Drop for Incoming {
    fn drop(&mut self) {
        if let Inner::Stream { chan, .. } = &self.inner {
            let mut st = chan.lock();
            st.gone = true;
            st.want = false;
            if let Some(tx) = st.tx.take() {
                tx.wake();
            }
        }
    }
}

/// The connection's end of a streaming body.
#[derive(Debug)]
pub(crate) struct Sender {
    chan: Arc<Chan>,
}

/// What the receiver needs from the connection right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Demand {
    /// It waits for a frame.
    Want,
    /// It holds an undelivered frame or has not asked.
    Idle,
    /// It was dropped.
    Gone,
}

impl Sender {
    /// Reports the receiver's demand, registering to be woken when it changes.
    pub(crate) fn poll_demand(&self, cx: &mut Context<'_>) -> Demand {
        let mut st = self.chan.lock();
        if st.gone {
            return Demand::Gone;
        }
        if st.want && st.slot.is_none() {
            return Demand::Want;
        }
        if st.tx.as_ref().is_none_or(|w| !w.will_wake(cx.waker())) {
            st.tx = Some(cx.waker().clone());
        }
        Demand::Idle
    }

    /// Hands one frame to the receiver.
    pub(crate) fn send(&self, frame: Result<Frame<Bytes>, Error>) {
        let mut st = self.chan.lock();
        st.slot = Some(frame);
        st.want = false;
        if let Some(rx) = st.rx.take() {
            rx.wake();
        }
    }

    /// Ends the body, after trailers if given.
    pub(crate) fn finish(&self, trailers: Option<HeaderMap>) {
        let mut st = self.chan.lock();
        if let Some(t) = trailers {
            st.slot = Some(Ok(Frame::trailers(t)));
        }
        st.done = true;
        st.want = false;
        if let Some(rx) = st.rx.take() {
            rx.wake();
        }
    }

    /// Ends the body with an error.
    pub(crate) fn fail(&self, err: Error) {
        let mut st = self.chan.lock();
        st.slot = Some(Err(err));
        st.done = true;
        if let Some(rx) = st.rx.take() {
            rx.wake();
        }
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        let mut st = self.chan.lock();
        if !st.done {
            st.done = true;
            if st.slot.is_none() {
                st.slot = Some(Err(Error::new(crate::error::Kind::IncompleteBody)));
            }
        }
        if let Some(rx) = st.rx.take() {
            rx.wake();
        }
    }
}
