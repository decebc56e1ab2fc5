//! The handles of one stream: [`SendResponse`] for the answer's head,
//! [`SendStream`] for its body, [`RecvStream`] for the request's body. Each
//! holds the connection's shared state and the stream's id, and does its
//! work under the state's lock; dropping one tells the connection (a
//! response never sent is reset with CANCEL, an unread request's bytes go
//! back to the windows).

use std::future::poll_fn;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderMap, Response};

use super::core::{Shared, lock};
use super::{Error, Reason};

/// Sends the response head of one stream.
pub(crate) struct SendResponse {
    shared: Arc<Shared>,
    id: u32,
}

impl std::fmt::Debug for SendResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendResponse")
            .field("id", &self.id)
            .finish()
    }
}

impl SendResponse {
    /// The handle of stream `id` (counted by the stream as it is made).
    pub(super) fn new(shared: Arc<Shared>, id: u32) -> SendResponse {
        SendResponse { shared, id }
    }

    /// The stream's id.
    pub(super) fn id(&self) -> u32 {
        self.id
    }

    /// Sends `response`'s head (its status and fields; the version and
    /// extensions are not sent), ending the stream when `end_of_stream`.
    /// The body, if any, goes on the returned [`SendStream`].
    pub(crate) fn send_response(
        &mut self,
        response: &Response<()>,
        end_of_stream: bool,
    ) -> Result<SendStream, Error> {
        let mut core = lock(&self.shared);
        core.send_head(
            self.id,
            response.status(),
            response.headers(),
            end_of_stream,
        )?;
        core.add_send_handle(self.id);
        Ok(SendStream {
            shared: self.shared.clone(),
            id: self.id,
        })
    }

    /// Ready with the reason once the client resets the stream (or with an
    /// error once the connection is gone).
    pub(crate) fn poll_reset(&mut self, cx: &mut Context<'_>) -> Poll<Result<Reason, Error>> {
        lock(&self.shared).poll_reset(self.id, cx.waker())
    }
}

impl Drop for SendResponse {
    fn drop(&mut self) {
        lock(&self.shared).drop_send(self.id);
    }
}

/// Sends the body (and trailers) of one stream's response, within the
/// client's flow-control windows.
pub(crate) struct SendStream {
    shared: Arc<Shared>,
    id: u32,
}

impl std::fmt::Debug for SendStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendStream").field("id", &self.id).finish()
    }
}

impl SendStream {
    /// Asks for `n` bytes of capacity (0 gives up what was asked for).
    pub(crate) fn reserve_capacity(&mut self, n: usize) {
        lock(&self.shared).reserve(self.id, n);
    }

    /// The bytes that may be sent now without waiting.
    pub(crate) fn capacity(&self) -> usize {
        lock(&self.shared).capacity(self.id)
    }

    /// Ready with the capacity once it is above zero; `None` once the
    /// stream has ended.
    pub(crate) fn poll_capacity(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<usize, Error>>> {
        lock(&self.shared).poll_capacity(self.id, cx.waker())
    }

    /// Sends `data`, ending the stream when `end_of_stream`. What the
    /// windows do not let go yet waits in the stream's queue.
    pub(crate) fn send_data(&mut self, data: Bytes, end_of_stream: bool) -> Result<(), Error> {
        lock(&self.shared).send_data(self.id, data, end_of_stream)
    }

    /// Sends trailers, ending the stream.
    pub(crate) fn send_trailers(&mut self, trailers: HeaderMap) -> Result<(), Error> {
        lock(&self.shared).send_trailers(self.id, trailers)
    }

    /// Resets the stream with `reason` (nothing if it has already ended).
    pub(crate) fn send_reset(&mut self, reason: Reason) {
        lock(&self.shared).send_reset(self.id, reason);
    }

    /// Ready with the reason once the stream is reset.
    pub(crate) fn poll_reset(&mut self, cx: &mut Context<'_>) -> Poll<Result<Reason, Error>> {
        lock(&self.shared).poll_reset(self.id, cx.waker())
    }
}

impl Drop for SendStream {
    fn drop(&mut self) {
        lock(&self.shared).drop_send(self.id);
    }
}

/// The body of one stream's request.
pub(crate) struct RecvStream {
    shared: Arc<Shared>,
    id: u32,
}

impl std::fmt::Debug for RecvStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvStream").field("id", &self.id).finish()
    }
}

impl RecvStream {
    /// The handle of stream `id` (counted by the stream as it is made).
    pub(super) fn new(shared: Arc<Shared>, id: u32) -> RecvStream {
        RecvStream { shared, id }
    }

    /// The next piece of data; `None` at the end of the data (trailers may
    /// follow).
    pub(crate) fn poll_data(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, Error>>> {
        lock(&self.shared).poll_data(self.id, cx.waker())
    }

    /// The next piece of data.
    pub(crate) async fn data(&mut self) -> Option<Result<Bytes, Error>> {
        poll_fn(|cx| self.poll_data(cx)).await
    }

    /// The trailers, once the data has ended.
    pub(crate) fn poll_trailers(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<HeaderMap>, Error>> {
        lock(&self.shared).poll_trailers(self.id, cx.waker())
    }

    /// The trailers, once the data has ended.
    pub(crate) async fn trailers(&mut self) -> Result<Option<HeaderMap>, Error> {
        poll_fn(|cx| self.poll_trailers(cx)).await
    }

    /// True when the request's `Host` field is its `:authority`, added by
    /// the engine (the client sent no `Host`).
    pub(crate) fn host_added(&self) -> bool {
        lock(&self.shared).host_added(self.id)
    }

    /// True when neither data nor trailers will come.
    pub(crate) fn is_end_stream(&self) -> bool {
        lock(&self.shared).is_end_stream(self.id)
    }

    /// Gives `n` bytes of data read back to the client's windows.
    pub(crate) fn release_capacity(&mut self, n: usize) {
        lock(&self.shared).release_capacity(self.id, n);
    }
}

impl Drop for RecvStream {
    fn drop(&mut self) {
        lock(&self.shared).drop_recv(self.id);
    }
}
