//! HTTP/2 (RFC 9113) on the `h2` crate, which owns the framing, HPACK,
//! flow control and stream states; this module maps its streams onto the
//! same `tower::Service` the HTTP/1.1 engine serves.
//!
//! - `conn`: the connection driver: settings from [`Limits`](crate::Limits),
//!   one task per connection running every stream's handler, idle and
//!   shutdown handling, the rapid-reset defence
//! - `body`: a stream's request data as an [`Incoming`](crate::Incoming)
//!   body, with the body limit and timeout
//!
//! `proto` decides that a connection speaks HTTP/2: after a TLS handshake
//! that chose ALPN `h2`, or when a plain connection opens with the preface
//! (prior knowledge, RFC 9113 §3.3).
//!
//! **Architecture Invariant:** only this module names `h2`, and it never
//! names `http1` (what both need is in `common`).

mod body;
mod conn;

pub(crate) use body::H2Body;
pub(crate) use conn::serve_connection;
