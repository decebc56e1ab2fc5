//! The TLS handshake in front of a connection: the transport it yields
//! knows the protocol agreed through ALPN (RFC 7301) but nothing of HTTP;
//! `proto` chooses the engine.

use std::time::Duration;

use tokio::sync::OwnedSemaphorePermit;

use crate::shutdown::Shutdown;
use crate::tls::TlsConfig;
use crate::tls::handshake::handshake;
use crate::tls::stream::TlsStream;
use crate::transport::Transport;

/// Completes the handshake on `io` within `timeout`, then releases the
/// handshake slot `permit`; the established stream reports the negotiated
/// ALPN protocol ([`TlsStream::alpn_protocol`]).
///
/// `None` when the handshake failed, timed out or was cut short by
/// shutdown: the connection closes, and the client sees an alert or a
/// close, never a response.
pub(crate) async fn accept<I: Transport>(
    mut io: I,
    tls: &TlsConfig,
    permit: OwnedSemaphorePermit,
    timeout: Duration,
    shutdown: &Shutdown,
) -> Option<TlsStream<I>> {
    let handshake = tokio::time::timeout(timeout, handshake(&mut io, tls));
    let established = tokio::select! {
        biased;
        () = shutdown.started() => return None,
        done = handshake => match done {
            Ok(Ok(established)) => established,
            Ok(Err(err)) => {
                tracing::debug!(target: "celer::tls", error = %err, "handshake failed");
                return None;
            }
            Err(_) => {
                tracing::debug!(target: "celer::tls", "handshake timed out");
                return None;
            }
        },
    };
    drop(permit);
    Some(TlsStream::new(io, established))
}
