//! TLS (RFC 8446, RFC 5246) on rustls: certificates, SNI, ALPN, resumption,
//! reloading, and the handshake in front of each connection.
//!
//! - `config`: [`TlsConfig`] and [`TlsBuilder`]: PEM loading with errors
//!   naming the file, the SNI resolver, versions, ALPN, resumption, reload
//! - `accept`: the handshake (timeout, concurrent-handshake cap) and the
//!   dispatch on the negotiated ALPN protocol
//! - `redirect`: the plain-HTTP listener service answering 308 to `https`
//!
//! **Architecture Invariant:** only this module names rustls.

mod accept;
mod config;
mod redirect;

pub(crate) use accept::serve_connection;
pub use config::{ALPN_H2, ALPN_HTTP1, CertInfo, TlsBuilder, TlsConfig};
pub(crate) use redirect::Redirect;
