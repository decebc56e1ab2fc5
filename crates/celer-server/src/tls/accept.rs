//! The TLS handshake in front of a connection: the transport it yields
//! knows the protocol agreed through ALPN (RFC 7301) but nothing of HTTP;
//! `proto` chooses the engine.

use std::time::Duration;

use crate::shutdown::Shutdown;
use crate::tls::TlsConfig;
use crate::tls::admission::Slot;
use crate::tls::handshake::handshake_admitted;
use crate::tls::stream::TlsStream;
use crate::transport::Transport;

/// Completes the handshake on `io` within `timeout`, then releases the
/// handshake slot `slot`; the established stream reports the negotiated
/// ALPN protocol ([`TlsStream::alpn_protocol`]).
///
/// `None` when the handshake failed, timed out, was shed for a newer one
/// at the cap (`admission`) or was cut short by shutdown: the connection
/// closes, and the client sees an alert or a close, never a response.
pub(crate) async fn accept<I: Transport>(
    mut io: I,
    tls: &TlsConfig,
    slot: Slot,
    timeout: Duration,
    shutdown: &Shutdown,
) -> Option<TlsStream<I>> {
    let handshake = tokio::time::timeout(timeout, handshake_admitted(&mut io, tls, &slot));
    let established = tokio::select! {
        biased;
        () = shutdown.started() => return None,
        done = slot.run(handshake) => match done {
            None => {
                tracing::debug!(target: "celer::tls", "handshake shed for a newer connection");
                return None;
            }
            Some(Ok(Ok(established))) => established,
            Some(Ok(Err(err))) => {
                tracing::debug!(target: "celer::tls", error = %err, "handshake failed");
                return None;
            }
            Some(Err(_)) => {
                tracing::debug!(target: "celer::tls", "handshake timed out");
                return None;
            }
        },
    };
    drop(slot);
    Some(TlsStream::new(io, established))
}
