//! Celer's transports: bytes in, `http::Request` to a `tower::Service`,
//! bytes out.
//!
//! The engine never names a framework type. Anything that implements
//! `tower_service::Service<http::Request<Incoming>>` and answers with an
//! `http::Response` whose body is an `http_body::Body` of `Bytes` can be
//! served.
//!
//! # Layout
//!
//! One request's path: `listen` binds, `serve` accepts within the
//! connection limit, `tls` (on TLS listeners) turns the socket into a
//! transport that knows the ALPN outcome, `proto` chooses the engine,
//! `http1` or `http2` parses the request and calls the service, and the
//! response goes back the same way.
//!
//! - `limits`: every resource a client can hold, with its default
//! - `listen`: listener specs (`tcp://`, `unix:`, `fd:`, `systemd`) and socket options
//! - `serve`: the [`Server`] builder, runtimes, accept loops, connection limit
//! - `shutdown`: the graceful-shutdown signal
//! - `proto`: what a connection speaks: the HTTP/2 preface on plain
//!   connections, the ALPN outcome after TLS, and the gateway protocols
//!   chosen by listener
//! - `gateway`: FastCGI, SCGI and CGI behind a web server
//! - `common`: what the engines share: [`ConnConfig`], the cached `Date`,
//!   deadlines, the plain-text refusal
//! - `http1`: the HTTP/1.1 engine (httparse in its `parse` and `decode` only)
//! - `http2`: HTTP/2: an engine of our own (frames, HPACK, flow control)
//! - `tls`: TLS on rustls, a transport: certificates, SNI, ALPN,
//!   resumption, reload, the handshake, the records (the only module naming
//!   rustls)
//! - `redirect`: the plain-HTTP listener's service answering 308 to `https`
//! - `body`: the request body type [`Incoming`]
//! - `upgrade`: handing a connection over after `101 Switching Protocols`
//! - `ws`: WebSocket (RFC 6455) and permessage-deflate (RFC 7692) on an upgraded connection
//! - `prefixed`: bytes read ahead replayed in front of a handed-over stream
//! - `transport`: the byte streams the engine serves
//! - `sys`: the few socket calls that need `unsafe`
//! - `fuzzing`: the fuzz targets' entry points (feature `fuzzing`, and tests)
//! - `tidy` (tests): the module boundaries above, checked on the sources
//!
//! `http1` and `http2` never name each other, and each named dependency
//! stays in its module; the `tidy` test checks both.
//!
//! # Example
//!
//! ```no_run
//! use std::convert::Infallible;
//! use bytes::Bytes;
//! use celer_server::{Incoming, Listen, Server};
//! use http::{Request, Response};
//!
//! let service = tower::service_fn(|_req: Request<Incoming>| async {
//!     Ok::<_, Infallible>(Response::new(http_body_util::Full::new(Bytes::from("hi\n"))))
//! });
//! let server = Server::builder()
//!     .listen(Listen::parse("tcp://127.0.0.1:8080").unwrap())
//!     .bind()
//!     .unwrap();
//! server.run(service, std::future::pending()).unwrap();
//! ```

pub mod body;
mod common;
mod error;
pub mod file;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing;
pub mod gateway;
pub mod http1;
mod http2;
pub mod limits;
pub mod listen;
mod prefixed;
mod proto;
mod redirect;
mod serve;
mod shutdown;
mod sys;
pub use sys::raise_fd_limit;
#[cfg(test)]
mod tidy;
pub mod tls;
mod transport;
pub mod upgrade;
pub mod ws;

pub use body::Incoming;
pub use common::ConnConfig;
pub use error::{BoxError, Error};
pub use file::{FileBody, SendFile};
pub use gateway::{CgiEnv, Gateway};
pub use limits::Limits;
pub use listen::{Listen, Listener};
pub use serve::{Bound, Builder, ConnInfo, HttpService, Server, Threading};
pub use shutdown::Shutdown;
pub use tls::{TlsBuilder, TlsConfig, TlsInfo, TlsVersion};
pub use transport::Transport;
