//! HTTP/1.1 (RFC 9112).
//!
//! - `parse`: request head bytes → `http::Request<()>` plus framing facts (no IO)
//! - `decode`: request body framing in, Content-Length and chunked (no IO)
//! - `encode`: response head and body framing out (no IO)
//! - `io`: the write buffer and the per-thread buffer pool
//! - `date`: the cached `Date` value
//! - `conn`: the connection driver, the only part here that touches a socket
//!
//! Invariants: a request is answered in the order it arrived; a head the
//! parser refuses is answered with its status and the connection closes, so
//! bytes after a bad request are never interpreted as another request.

mod conn;
pub(crate) mod date;
pub(crate) mod decode;
mod encode;
mod io;
pub(crate) mod parse;

pub(crate) use conn::poll_deadline;
pub use conn::{Http1Config, serve_connection};
