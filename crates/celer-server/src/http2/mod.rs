//! HTTP/2 (RFC 9113) on the `h2` crate, which owns the framing, HPACK,
//! flow control and stream states; this module maps its streams onto the
//! same `tower::Service` the HTTP/1.1 engine serves.
//!
//! - `conn`: the connection driver: settings from [`Limits`](crate::Limits),
//!   one task per connection running every stream's handler, idle and
//!   shutdown handling, the rapid-reset defence
//! - `body`: a stream's request data as an [`Incoming`](crate::Incoming)
//!   body, with the body limit and timeout
//! - `tunnel`: a stream after the `2xx` to an extended CONNECT (RFC 8441,
//!   WebSocket over HTTP/2) as the byte stream of an
//!   [`Upgraded`](crate::upgrade::Upgraded), within flow control
//!
//! `proto` decides that a connection speaks HTTP/2: after a TLS handshake
//! that chose ALPN `h2`, or when a plain connection opens with the preface
//! (prior knowledge, RFC 9113 §3.3).
//!
//! **Architecture Invariant:** only this module names `h2`, and it never
//! names `http1` (what both need is in `common`).

mod body;
mod conn;
#[allow(dead_code)] // the engine that uses it is being written
pub(crate) mod hpack;
mod tunnel;

pub(crate) use body::H2Body;
pub(crate) use conn::serve_connection;
