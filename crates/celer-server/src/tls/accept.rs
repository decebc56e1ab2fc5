//! The TLS handshake in front of a connection, then the protocol the client
//! and server agreed on through ALPN (RFC 7301).

use std::io;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::OwnedSemaphorePermit;
use tokio_rustls::LazyConfigAcceptor;
use tokio_rustls::server::TlsStream;

use crate::http1::{self, Http1Config};
use crate::http2;
use crate::serve::HttpService;
use crate::shutdown::Shutdown;
use crate::tls::{ALPN_H2, ALPN_HTTP1, TlsConfig};
use crate::transport::Transport;

/// Completes the handshake on `io` within the handshake timeout, releases
/// the handshake slot `permit`, then serves the connection.
///
/// A handshake that fails, times out or is cut short by shutdown closes
/// the connection; the client sees an alert or a close, never a response.
pub(crate) async fn serve_connection<I, S>(
    io: I,
    tls: &TlsConfig,
    permit: OwnedSemaphorePermit,
    service: S,
    config: Arc<Http1Config>,
    shutdown: Shutdown,
) where
    I: Transport,
    S: HttpService,
{
    let timeout = config.limits.tls_handshake_timeout;
    // The configuration is chosen once the ClientHello is read (its suite
    // order decides; `TlsConfig::server_config_for`).
    let handshake = tokio::time::timeout(timeout, async {
        let start = LazyConfigAcceptor::new(rustls::server::Acceptor::default(), io).await?;
        let server = tls.server_config_for(&start.client_hello());
        start.into_stream(server).await
    });
    let stream = tokio::select! {
        biased;
        () = shutdown.started() => return,
        done = handshake => match done {
            Ok(Ok(stream)) => stream,
            Ok(Err(err)) => {
                tracing::debug!(target: "celer::tls", error = %err, "handshake failed");
                return;
            }
            Err(_) => {
                tracing::debug!(target: "celer::tls", "handshake timed out");
                return;
            }
        },
    };
    drop(permit);
    dispatch(stream, service, config, shutdown).await;
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
    match stream.get_ref().1.alpn_protocol() {
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

impl<I: Transport> Transport for TlsStream<I> {
    fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let (io, conn) = self.get_ref();
        // Plaintext already decrypted (or a close_notify seen) is readable
        // at once; otherwise wait for the socket.
        if !conn.wants_read() {
            return Poll::Ready(Ok(()));
        }
        io.poll_read_ready(cx)
    }

    fn has_unread_input(&self) -> bool {
        self.get_ref().0.has_unread_input()
    }
}
