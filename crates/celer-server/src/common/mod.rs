//! What the protocol engines share: the connection configuration, the
//! cached `Date`, deadlines, and how the engine refuses a request.
//!
//! - `config`: [`ConnConfig`], every connection's settings
//! - `date`: the cached `Date` value and line (RFC 9110 §6.6.1)
//! - `deadline`: [`Deadline`], a lazily re-armed timer
//! - `hello` (tests only): a service that answers at once
//! - `reject`: [`Reject`] and the plain-text refusal it is answered with
//!
//! **Architecture Invariant:** `http1` and `http2` meet only here (and in
//! `proto`, which chooses between them); neither names the other, as in
//! hyper's `proto/h1` and `proto/h2` (the `tidy` test checks it).

mod config;
pub(crate) mod date;
mod deadline;
#[cfg(test)]
pub(crate) mod hello;
mod reject;

pub use config::ConnConfig;
pub(crate) use config::ServerHeader;
pub(crate) use deadline::Deadline;
pub(crate) use reject::Reject;

/// Reads once into the spare room of `buf` (both engines' reads).
pub(crate) fn poll_read_buf<I: tokio::io::AsyncRead + Unpin>(
    io: &mut I,
    cx: &mut std::task::Context<'_>,
    buf: &mut bytes::BytesMut,
) -> std::task::Poll<std::io::Result<usize>> {
    use std::future::Future;
    use tokio::io::AsyncReadExt;
    std::pin::pin!(io.read_buf(buf)).poll(cx)
}
