//! The TLS handshake in front of a connection, then the protocol the client
//! and server agreed on through ALPN (RFC 7301).

use std::sync::Arc;

use crate::http1::{self, Http1Config};
use crate::http2;
use crate::serve::HttpService;
use crate::shutdown::Shutdown;
use crate::tls::admission::Slot;
use crate::tls::handshake::handshake_admitted;
use crate::tls::stream::TlsStream;
use crate::tls::{ALPN_H2, ALPN_HTTP1, TlsConfig};
use crate::transport::Transport;

/// Completes the handshake on `io` within the handshake timeout, releases
/// the handshake slot `slot`, then serves the connection.
///
/// A handshake that fails, times out, is shed for a newer one at the cap
/// (`admission`) or is cut short by shutdown closes the connection; the
/// client sees an alert or a close, never a response.
pub(crate) async fn serve_connection<I, S>(
    mut io: I,
    tls: &TlsConfig,
    slot: Slot,
    service: S,
    config: Arc<Http1Config>,
    shutdown: Shutdown,
) where
    I: Transport,
    S: HttpService,
{
    let timeout = config.limits.tls_handshake_timeout;
    let handshake = tokio::time::timeout(timeout, handshake_admitted(&mut io, tls, &slot));
    let established = tokio::select! {
        biased;
        () = shutdown.started() => return,
        done = slot.run(handshake) => match done {
            None => {
                tracing::debug!(target: "celer::tls", "handshake shed for a newer connection");
                return;
            }
            Some(Ok(Ok(established))) => established,
            Some(Ok(Err(err))) => {
                tracing::debug!(target: "celer::tls", error = %err, "handshake failed");
                return;
            }
            Some(Err(_)) => {
                tracing::debug!(target: "celer::tls", "handshake timed out");
                return;
            }
        },
    };
    drop(slot);
    dispatch(TlsStream::new(io, established), service, config, shutdown).await;
}

/// Serves an established TLS connection with the protocol ALPN chose; a
/// client that offered no ALPN speaks HTTP/1.1.
async fn dispatch<I, S>(
    stream: TlsStream<I>,
    service: S,
    config: Arc<Http1Config>,
    shutdown: Shutdown,
) where
    I: Transport,
    S: HttpService,
{
    match stream.alpn_protocol() {
        // RFC 9113 §3.2: "h2" over TLS. Served whenever the TLS
        // configuration offered it, whatever `Builder::http2` says of
        // cleartext.
        Some(ALPN_H2) => {
            http2::serve_connection(stream, service, config, shutdown.watch()).await;
        }
        None | Some(ALPN_HTTP1) => {
            http1::serve_connection(stream, service, config, &shutdown).await
        }
        Some(other) => {
            // `TlsBuilder::build` admits only served protocols, so rustls
            // cannot agree on another; close rather than guess.
            tracing::warn!(target: "celer::tls", protocol = ?String::from_utf8_lossy(other), "no engine for the negotiated protocol");
        }
    }
}
