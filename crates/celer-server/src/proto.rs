//! Protocol selection: the one place that decides what a connection
//! speaks (hyper-util's `server::conn::auto` is the shape).
//!
//! - A plain connection ([`plain`]) speaks HTTP/1.1, or HTTP/2 when its
//!   first bytes are the HTTP/2 preface and [`ConnConfig::http2`] allows
//!   it (prior knowledge, RFC 9113 §3.3).
//! - A TLS connection ([`tls`]) speaks what the handshake agreed through
//!   ALPN (RFC 7301): `h2`, or HTTP/1.1 when the client offered
//!   `http/1.1` or nothing. The preface is not looked for there: over TLS,
//!   HTTP/2 is chosen only through ALPN (RFC 9113 §3.2, §3.3).
//!
//! Protocols chosen by the listener rather than by the connection's bytes
//! (the FastCGI and SCGI gateways, `fastcgi+…` and `scgi+…` listen specs)
//! are selected here too, by [`gateway`]: a listener role in `serve` and
//! an entry point beside [`plain`] and [`tls`].
//!
//! The preface is looked for inside the HTTP/1.1 engine's first read
//! (through [`Sniff`]), so a plain connection's first bytes land in the
//! buffer its first request is parsed from, and an HTTP/1.1 connection's
//! task carries nothing for HTTP/2 but a pointer-sized hand-over.

use std::future::Future;
use std::sync::Arc;

use futures_util::future::Either;

use crate::common::ConnConfig;
use crate::gateway::{self, Gateway};
use crate::http1::{self, Http1Only, Sniff, Sniffed, Switch};
use crate::http2;
use crate::prefixed::Prefixed;
use crate::serve::{ConnInfo, HttpService};
use crate::shutdown::{Shutdown, Watch};
use crate::tls::{self, ALPN_H2, ALPN_HTTP1, TlsConfig};
use crate::transport::Transport;

/// The HTTP/2 client connection preface (RFC 9113 §3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Serves a plain connection: HTTP/1.1, or HTTP/2 by prior knowledge.
pub(crate) fn plain<I, S>(
    io: I,
    service: S,
    config: Arc<ConnConfig>,
    shutdown: &Shutdown,
) -> impl Future<Output = ()> + Send + use<I, S>
where
    I: Transport,
    S: HttpService,
{
    http1::serve_switching(io, service, config, shutdown, PriorKnowledge)
}

/// Serves a TLS connection: the handshake within its timeout (releasing
/// the handshake slot `slot` after it), then the service `make` builds for
/// the connection `info` completed with what the handshake agreed, on the
/// protocol ALPN chose.
///
/// The connection's task lives as long as the connection (an event stream
/// waits for hours), so it holds only what the protocol needs after the
/// handshake: the handshake, with everything only it uses (the socket
/// before TLS, the slot, the configuration, the service's maker), runs in
/// a box freed when it ends, and HTTP/2 is boxed too. An `async fn` would
/// keep every argument in its state for its whole life.
pub(crate) fn tls<I, F, S>(
    io: I,
    tls: TlsConfig,
    slot: tls::Slot,
    info: ConnInfo,
    make: Arc<F>,
    config: Arc<ConnConfig>,
    shutdown: Shutdown,
) -> impl Future<Output = ()> + Send
where
    I: Transport,
    F: Fn(&ConnInfo) -> S + Send + Sync + 'static,
    S: HttpService,
{
    let timeout = config.limits.tls_handshake_timeout;
    let handshake = Box::pin(async move {
        let stream = tls::accept(io, &tls, slot, timeout, &shutdown).await?;
        let mut info = info;
        info.tls = Some(stream.info().clone());
        let service = make(&info);
        Some((stream, service, shutdown))
    });
    async move {
        // The protocol's future is made in a block of its own: `stream`,
        // borrowed there and then moved into the future, dies with the
        // block; awaited where it was made, its slot would stay in the
        // task beside the future's copy (decision 141).
        let served = {
            let Some((stream, service, shutdown)) = handshake.await else {
                return;
            };
            match stream.alpn_protocol() {
                // RFC 9113 §3.2: "h2" over TLS. Served whenever the TLS
                // configuration offered it, whatever `Builder::http2` says
                // of cleartext.
                Some(ALPN_H2) => Either::Left(Box::pin(http2::serve_connection(
                    stream,
                    service,
                    config,
                    shutdown.watch(),
                ))),
                None | Some(ALPN_HTTP1) => Either::Right(http1::serve_switching(
                    stream, service, config, &shutdown, Http1Only,
                )),
                Some(other) => {
                    // `TlsBuilder::build` admits only served protocols, so
                    // rustls cannot agree on another; close rather than
                    // guess.
                    tracing::warn!(target: "celer::proto", protocol = ?String::from_utf8_lossy(other), "no engine for the negotiated protocol");
                    return;
                }
            }
        };
        served.await;
    }
}

/// Serves a connection of a gateway listener: FastCGI or SCGI from a
/// front-end web server, never HTTP.
pub(crate) async fn gateway<I, S>(
    kind: Gateway,
    io: I,
    service: S,
    config: Arc<ConnConfig>,
    watch: Watch,
) where
    I: Transport,
    S: HttpService,
{
    match kind {
        Gateway::FastCgi => gateway::responder::serve(io, service, config, watch).await,
        Gateway::Scgi => gateway::scgi::serve(io, service, config, watch).await,
    }
}

/// HTTP/2 by prior knowledge on a plain connection: recognised by the
/// whole preface (RFC 9113 §3.4), when [`ConnConfig::http2`] is on.
#[derive(Debug, Clone, Copy)]
struct PriorKnowledge;

impl Sniff for PriorKnowledge {
    fn sniff(&self, first: &[u8], config: &ConnConfig) -> Sniffed {
        if !config.http2 {
            return Sniffed::Http1;
        }
        let n = first.len().min(PREFACE.len());
        if first[..n] != PREFACE[..n] {
            Sniffed::Http1
        } else if n == PREFACE.len() {
            Sniffed::Other
        } else {
            Sniffed::More
        }
    }
}

impl<I: Transport, S: HttpService> Switch<I, S> for PriorKnowledge {
    fn serve(
        self,
        io: Prefixed<I>,
        service: S,
        config: Arc<ConnConfig>,
        shutdown: Watch,
    ) -> impl Future<Output = ()> + Send {
        http2::serve_connection(io, service, config, shutdown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_preface_is_recognised_whole_and_only_when_http2_is_on() {
        let on = ConnConfig::default();
        let off = ConnConfig {
            http2: false,
            ..ConnConfig::default()
        };
        let sniff = |bytes: &[u8], config: &ConnConfig| PriorKnowledge.sniff(bytes, config);
        assert_eq!(sniff(PREFACE, &on), Sniffed::Other);
        assert_eq!(sniff(&[PREFACE, b"\0\0"].concat(), &on), Sniffed::Other);
        assert_eq!(sniff(&PREFACE[..10], &on), Sniffed::More);
        assert_eq!(sniff(b"PRI * HTTP/1.1\r\n", &on), Sniffed::Http1);
        assert_eq!(sniff(b"GET / HTTP/1.1\r\n", &on), Sniffed::Http1);
        assert_eq!(sniff(PREFACE, &off), Sniffed::Http1);
    }

    /// A TLS connection's task holds its stream once: inside the protocol's
    /// future, not also in a slot of its own, and not the arguments only
    /// the handshake uses (decision 141). Every open
    /// connection, an event stream waiting for hours included, carries the
    /// whole task.
    #[test]
    fn a_tls_connection_task_holds_its_stream_once() {
        use crate::body::Incoming;
        use http::{Request, Response};

        let pair = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        let config = TlsConfig::builder()
            .cert_pem("test", pair.cert.pem(), pair.signing_key.serialize_pem())
            .build()
            .unwrap();
        let handshakes = Arc::new(tls::Handshakes::new(1));
        let (io, _peer) = tokio::io::duplex(64);
        let make = |_: &ConnInfo| {
            tower::service_fn(|_: Request<Incoming>| async {
                Ok::<_, std::convert::Infallible>(Response::new(http_body_util::Empty::<
                    bytes::Bytes,
                >::new()))
            })
        };
        let task = tls(
            io,
            config,
            handshakes.admit(),
            ConnInfo::new(None, None),
            Arc::new(make),
            Arc::new(ConnConfig::default()),
            Shutdown::new(),
        );
        let task = std::mem::size_of_val(&task);
        let stream = tls::stream_size::<tokio::io::DuplexStream>();
        // The HTTP/1.1 engine's own state is about 400 bytes (see
        // `connection_state_stays_small`). Kept for the connection's life,
        // the arguments only the handshake uses (the socket before TLS, the
        // slot, the `ConnInfo`) would add about 170 bytes, and a second
        // copy of the stream 1,000.
        assert!(
            task <= stream + 512,
            "the task is {task} bytes for a stream of {stream}"
        );
    }
}
