//! TLS (RFC 8446, RFC 5246) on rustls: certificates, SNI, ALPN, resumption,
//! reloading, the handshake in front of each connection and the records
//! after it.
//!
//! - `config`: [`TlsConfig`] and [`TlsBuilder`]: PEM loading with errors
//!   naming the file, the SNI resolver, versions, ALPN, resumption, reload
//! - `accept`: the handshake (timeout, ClientHello deadline), yielding a
//!   `TlsStream` that reports what the handshake agreed
//! - `info`: [`TlsInfo`], those facts (version, suite, ALPN, SNI) as the
//!   service sees them
//! - `admission`: the concurrent-handshake cap, which sheds the least
//!   advanced pending handshake rather than pause the listener
//! - `handshake`: the handshake through rustls's unbuffered API, with the
//!   configuration chosen on the ClientHello; hands the keys over
//! - `record`: the record layer after the handshake, no IO: opens records in
//!   place, seals them into one buffer, key updates, alerts
//! - `aead`: one record's protection with ring's AEADs, in place, as rustls
//!   would do it byte for byte
//! - `stream`: `TlsStream`, the engine's transport over `record`
//! - `differential`: the record layer against rustls's client (fuzzing and
//!   tests only)
//!
//! rustls does the handshake and derives the keys; after the handshake it
//! hands over the traffic keys (its "kernel" API, made for kTLS) and the
//! records are framed and protected here with ring's AEADs, so that a
//! request's bytes are decrypted where they were read and a response is
//! copied once from the engine's buffers into the record it is sealed in,
//! with no copy through rustls's own buffers (docs/decisions/032).
//!
//! **Architecture Invariant:** only this module names rustls, and it names
//! no protocol engine: TLS is a transport; `proto` chooses what runs on it.

mod accept;
mod admission;
mod aead;
mod config;
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) mod differential;
mod handshake;
mod info;
mod record;
mod stream;
#[cfg(test)]
mod tests;

pub(crate) use accept::accept;
pub(crate) use admission::{Handshakes, Slot};
pub use config::{ALPN_H2, ALPN_HTTP1, CertInfo, TlsBuilder, TlsConfig};
pub use info::{TlsInfo, TlsVersion};

/// Bytes of an established connection's stream over `I`, for the tests
/// that bound what a connection's task holds.
#[cfg(test)]
pub(crate) const fn stream_size<I>() -> usize {
    std::mem::size_of::<stream::TlsStream<I>>()
}
