//! HTTP/1.1 (RFC 9112).
//!
//! - `parse`: request head bytes → `http::Request<()>` plus framing facts (no IO)
//! - `decode`: request body framing in, Content-Length and chunked (no IO)
//! - `encode`: response head and body framing out (no IO)
//! - `io`: the write buffer and the per-thread buffer pool
//! - `conn`: one connection's state and IO: reads, writes, deadlines,
//!   bodies, closing; with `dispatch`, the only part here that touches a
//!   socket
//! - `dispatch`: the loop over requests that calls the service
//!
//! Invariants: a request is answered in the order it arrived; a head the
//! parser refuses is answered with its status and the connection closes, so
//! bytes after a bad request are never interpreted as another request.
//!
//! **Architecture Invariant:** this module never names `http2`; only
//! `parse` and `decode` (trailers) name `httparse`. A connection that opens with another
//! protocol's bytes is recognised through [`Sniff`] and handed over through
//! [`Switch`], both implemented by `proto`, which decides what a connection
//! speaks.

mod conn;
pub(crate) mod decode;
mod dispatch;
mod encode;
mod io;
pub(crate) mod parse;

use std::future::Future;
use std::sync::Arc;

pub use dispatch::serve_connection;
pub(crate) use dispatch::serve_switching;

use crate::common::ConnConfig;
use crate::prefixed::Prefixed;
use crate::shutdown::Watch;

/// What the first bytes of a connection say, before its first request is
/// parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sniffed {
    /// An HTTP/1.1 request (or garbage, which the parser refuses).
    Http1,
    /// Maybe another protocol: read more before deciding.
    More,
    /// Another protocol: the connection is handed over.
    Other,
}

/// Recognises another protocol on a connection's first bytes.
pub(crate) trait Sniff {
    /// Looks at the bytes read so far on a connection that has not yet
    /// had a request parsed.
    fn sniff(&self, first: &[u8], config: &ConnConfig) -> Sniffed;
}

/// Serves a connection [`Sniff`] recognised as another protocol.
pub(crate) trait Switch<I, S>: Sniff {
    /// Serves the connection; `io` replays the bytes read so far first.
    fn serve(
        self,
        io: Prefixed<I>,
        service: S,
        config: Arc<ConnConfig>,
        shutdown: Watch,
    ) -> impl Future<Output = ()> + Send;
}

/// HTTP/1.1 and nothing else: [`Sniff`] never answers
/// [`Sniffed::Other`], so [`Switch::serve`] is never called.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Http1Only;

impl Sniff for Http1Only {
    fn sniff(&self, _first: &[u8], _config: &ConnConfig) -> Sniffed {
        Sniffed::Http1
    }
}

impl<I, S> Switch<I, S> for Http1Only {
    fn serve(
        self,
        _io: Prefixed<I>,
        _service: S,
        _config: Arc<ConnConfig>,
        _shutdown: Watch,
    ) -> impl Future<Output = ()> + Send {
        // Unreachable: `sniff` never hands a connection over.
        std::future::ready(())
    }
}
