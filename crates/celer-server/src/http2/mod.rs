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
//! A connection arrives here two ways: after a TLS handshake that chose
//! ALPN `h2`, or from the HTTP/1.1 engine when a cleartext connection opens
//! with the HTTP/2 preface (prior knowledge, RFC 9113 §3.3).

mod body;
mod conn;

pub(crate) use body::H2Body;
pub(crate) use conn::serve_connection;

/// The client connection preface (RFC 9113 §3.4).
pub(crate) const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// True when `buf` is the start of the preface (or all of it and more).
pub(crate) fn starts_preface(buf: &[u8]) -> bool {
    let n = buf.len().min(PREFACE.len());
    buf[..n] == PREFACE[..n]
}
