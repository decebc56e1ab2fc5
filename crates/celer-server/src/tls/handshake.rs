//! The TLS handshake, driven through rustls's unbuffered API so that the
//! connection can then move to the record layer (`record`) with the keys
//! rustls agreed.
//!
//! The configuration is chosen once the ClientHello has arrived
//! (`TlsConfig::server_config_for`, on its suite order): rustls's `Acceptor`
//! reads the ClientHello from a copy of the first bytes, then the chosen
//! configuration's connection reads them again from the start.

use std::io;
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use rustls::ServerConfig;
use rustls::server::{Acceptor, UnbufferedServerConnection};
use rustls::unbuffered::{ConnectionState, EncodeError, EncodeTlsData, UnbufferedStatus};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::limits::TLS_CLIENT_HELLO_TIMEOUT;
use crate::tls::TlsConfig;
use crate::tls::admission::Slot;
use crate::tls::info::{TlsInfo, TlsVersion};
use crate::tls::record::{MAX_RECORD, RecordLayer};

/// Most bytes buffered from the client during a handshake: rustls's own
/// cap on one handshake message (64 KiB), and the record it ends in.
const HANDSHAKE_BUF_MAX: usize = 64 * 1024 + MAX_RECORD;

/// Bytes read from the client at a time during the handshake, at least.
const HANDSHAKE_READ: usize = 4 * 1024;

/// A connection whose handshake is complete.
pub(crate) struct Established {
    /// The traffic keys, from here on.
    pub(crate) records: RecordLayer,
    /// What the handshake agreed (version, suite, ALPN, SNI).
    pub(crate) info: Arc<TlsInfo>,
    /// Bytes read past the handshake: the start of the client's records.
    pub(crate) inbuf: BytesMut,
    /// Application data rustls decrypted with the handshake's last records
    /// (a client that sends its request with its Finished).
    pub(crate) early: Bytes,
    /// The client's `close_notify` came with the handshake.
    pub(crate) peer_closed: bool,
}

/// What the handshake does after one step of rustls.
enum Step {
    Continue,
    Read,
    Done,
    Failed(rustls::Error),
}

/// Runs the handshake on `io`. On failure the client is sent the alert
/// rustls chose (best effort) and the error says why.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) async fn handshake<I>(io: &mut I, tls: &TlsConfig) -> io::Result<Established>
where
    I: AsyncRead + AsyncWrite + Unpin,
{
    handshake_inner(io, tls, None).await
}

/// Runs the handshake on `io` in the admission slot `slot`: the whole
/// ClientHello must arrive within [`TLS_CLIENT_HELLO_TIMEOUT`] of the
/// start, and the slot learns when it has.
pub(crate) async fn handshake_admitted<I>(
    io: &mut I,
    tls: &TlsConfig,
    slot: &Slot,
) -> io::Result<Established>
where
    I: AsyncRead + AsyncWrite + Unpin,
{
    handshake_inner(io, tls, Some(slot)).await
}

async fn handshake_inner<I>(
    io: &mut I,
    tls: &TlsConfig,
    slot: Option<&Slot>,
) -> io::Result<Established>
where
    I: AsyncRead + AsyncWrite + Unpin,
{
    let mut inbuf = BytesMut::with_capacity(HANDSHAKE_READ);
    let (config, server_name) = match slot {
        Some(slot) => {
            let hello = read_client_hello(io, tls, &mut inbuf);
            let config = tokio::time::timeout(TLS_CLIENT_HELLO_TIMEOUT, hello)
                .await
                .map_err(|_| {
                    io::Error::new(
                        io::ErrorKind::TimedOut,
                        "no whole ClientHello within the ClientHello timeout",
                    )
                })??;
            slot.hello_received();
            config
        }
        None => read_client_hello(io, tls, &mut inbuf).await?,
    };
    let mut conn = UnbufferedServerConnection::new(config).map_err(invalid)?;
    let mut out = Vec::new();
    let mut early = Vec::new();
    let mut peer_closed = false;
    loop {
        let UnbufferedStatus { mut discard, state } = conn.process_tls_records(&mut inbuf);
        let step = match state {
            Ok(ConnectionState::EncodeTlsData(mut data)) => {
                encode(&mut data, &mut out)?;
                Step::Continue
            }
            Ok(ConnectionState::TransmitTlsData(data)) => {
                io.write_all(&out).await?;
                out.clear();
                data.done();
                Step::Continue
            }
            Ok(ConnectionState::BlockedHandshake) => Step::Read,
            Ok(ConnectionState::ReadTraffic(mut data)) => {
                while let Some(record) = data.next_record() {
                    let record = record.map_err(invalid)?;
                    discard += record.discard;
                    early.extend_from_slice(record.payload);
                }
                Step::Continue
            }
            Ok(ConnectionState::PeerClosed) => {
                peer_closed = true;
                Step::Continue
            }
            Ok(ConnectionState::WriteTraffic(_)) => Step::Done,
            Ok(other) => Step::Failed(rustls::Error::General(format!(
                "unexpected handshake state {other:?}"
            ))),
            Err(err) => Step::Failed(err),
        };
        inbuf.advance(discard);
        match step {
            Step::Continue => {}
            Step::Read => read_more(io, &mut inbuf).await?,
            // With half-RTT data off (rustls's default), writing opens only
            // once the client's Finished is in; stay safe if it were on.
            Step::Done if conn.is_handshaking() => read_more(io, &mut inbuf).await?,
            Step::Done => break,
            Step::Failed(err) => {
                send_alert(&mut conn, io, out).await;
                return Err(invalid(err));
            }
        }
    }
    let info = Arc::new(agreed(&conn, server_name.as_deref()));
    let (secrets, kernel) = conn.dangerous_into_kernel_connection().map_err(invalid)?;
    let records = RecordLayer::new(secrets, kernel).map_err(invalid)?;
    Ok(Established {
        records,
        info,
        inbuf,
        early: Bytes::from(early),
        peer_closed,
    })
}

/// The facts of a completed handshake, for the service.
fn agreed(conn: &UnbufferedServerConnection, server_name: Option<&str>) -> TlsInfo {
    let version = match conn.protocol_version() {
        Some(rustls::ProtocolVersion::TLSv1_2) => TlsVersion::Tls12,
        _ => TlsVersion::Tls13,
    };
    let suite = conn
        .negotiated_cipher_suite()
        .and_then(|s| s.suite().as_str())
        .unwrap_or("");
    TlsInfo::new(version, conn.alpn_protocol(), server_name).with_cipher_suite(suite)
}

/// Reads until the ClientHello is whole; returns the configuration for it
/// and the server name it asked for (SNI).
async fn read_client_hello<I>(
    io: &mut I,
    tls: &TlsConfig,
    inbuf: &mut BytesMut,
) -> io::Result<(Arc<ServerConfig>, Option<Box<str>>)>
where
    I: AsyncRead + AsyncWrite + Unpin,
{
    let mut acceptor = Acceptor::default();
    let mut fed = 0;
    loop {
        while fed < inbuf.len() {
            match acceptor.read_tls(&mut &inbuf[fed..])? {
                0 => break,
                n => fed += n,
            }
        }
        match acceptor.accept() {
            Ok(Some(accepted)) => {
                let hello = accepted.client_hello();
                let name = hello.server_name().map(Box::from);
                return Ok((tls.server_config_for(&hello), name));
            }
            Ok(None) => read_more(io, inbuf).await?,
            Err((err, mut alert)) => {
                let mut bytes = Vec::new();
                if alert.write_all(&mut bytes).is_ok() {
                    let _ = io.write_all(&bytes).await;
                }
                return Err(invalid(err));
            }
        }
    }
}

/// Reads more of the handshake into `inbuf`.
async fn read_more<I>(io: &mut I, inbuf: &mut BytesMut) -> io::Result<()>
where
    I: AsyncRead + Unpin,
{
    if inbuf.len() >= HANDSHAKE_BUF_MAX {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "handshake message too large",
        ));
    }
    inbuf.reserve(HANDSHAKE_READ);
    if io.read_buf(inbuf).await? == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "client closed during the handshake",
        ));
    }
    Ok(())
}

/// Appends the record rustls wants sent to `out`.
fn encode(
    data: &mut EncodeTlsData<'_, rustls::server::ServerConnectionData>,
    out: &mut Vec<u8>,
) -> io::Result<()> {
    let start = out.len();
    let needed = match data.encode(&mut []) {
        Err(EncodeError::InsufficientSize(size)) => size.required_size,
        Ok(_) => return Ok(()),
        Err(err) => return Err(invalid(err)),
    };
    out.resize(start + needed, 0);
    let written = data.encode(&mut out[start..]).map_err(invalid)?;
    out.truncate(start + written);
    Ok(())
}

/// Sends what `out` holds and the alert rustls queued on a failure, best
/// effort (RFC 8446 §6.2: the alert names the failure).
async fn send_alert<I>(conn: &mut UnbufferedServerConnection, io: &mut I, mut out: Vec<u8>)
where
    I: AsyncWrite + Unpin,
{
    // A failed connection yields its queued records; nothing is left to
    // process, so an empty input.
    for _ in 0..4 {
        match conn.process_tls_records(&mut []).state {
            Ok(ConnectionState::EncodeTlsData(mut data)) => {
                if encode(&mut data, &mut out).is_err() {
                    break;
                }
            }
            Ok(ConnectionState::TransmitTlsData(data)) => {
                data.done();
                break;
            }
            _ => break,
        }
    }
    if !out.is_empty() {
        let _ = io.write_all(&out).await;
    }
}

fn invalid(err: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, err)
}
