//! HTTP/2 (RFC 9113): an engine of our own (framing, HPACK, flow control,
//! stream states; decision 037) whose streams are mapped onto the same
//! `tower::Service` the HTTP/1.1 engine serves.
//!
//! - `engine`: the protocol: frames, stream states, flow control, the
//!   limits against a client (`engine/`)
//! - `hpack`: header compression (RFC 7541)
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
//! **Architecture Invariant:** it never names `http1` (what both need is
//! in `common`), and no other module speaks HTTP/2 frames.

mod body;
mod conn;
mod engine;
pub(crate) mod hpack;
mod tunnel;

pub(crate) use body::H2Body;
pub(crate) use conn::serve_connection;
