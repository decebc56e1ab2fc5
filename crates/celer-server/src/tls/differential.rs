//! The record layer against rustls, for the `tls_records` fuzz target:
//! records Celer seals are opened by rustls's client, and records rustls's
//! client seals are opened by Celer, on one connection per input, in the
//! suite, order, lengths and key updates the input chooses.
//!
//! The client is rustls with the aws-lc-rs provider, while Celer's record
//! layer reproduces rustls's ring provider byte for byte: two independent
//! AEAD implementations meet on every record. Each input is:
//!
//! - byte 0: the suite, one of [`SUITES`] (TLS 1.3 and 1.2; AES-128-GCM,
//!   AES-256-GCM, ChaCha20-Poly1305);
//! - then operations of 3 bytes, an opcode and a big-endian `u16` length:
//!   the client sends that many bytes (0), the server does (1), the client
//!   updates its keys and asks for ours (2, TLS 1.3), or the server's key
//!   is made to wear out every `1 + n % 4` records so that it updates its
//!   own (3, TLS 1.3).
//!
//! Every byte sent must arrive unchanged and no side may fail; at the end
//! both sides' `close_notify` must arrive.

use std::io::{Read, Write};
use std::sync::{Arc, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CipherSuite, ClientConfig, ClientConnection, DigitallySignedStruct, SignatureScheme};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

use crate::tls::TlsConfig;
use crate::tls::handshake::handshake;
use crate::tls::record::KEY_UPDATES_MAX;
use crate::tls::stream::TlsStream;

/// The suites an input picks from, by its first byte.
pub(crate) const SUITES: [CipherSuite; 6] = [
    CipherSuite::TLS13_AES_128_GCM_SHA256,
    CipherSuite::TLS13_AES_256_GCM_SHA384,
    CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
    CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
];

/// Operations per input at most, so one input stays fast.
const OPS_MAX: usize = 64;

/// Runs one input (see the module docs); panics on any difference.
pub(crate) fn run(data: &[u8]) {
    let Some((&suite, ops)) = data.split_first() else {
        return;
    };
    let suite = SUITES[usize::from(suite) % SUITES.len()];
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    rt.block_on(session(suite, ops));
}

async fn session(suite: CipherSuite, ops: &[u8]) {
    let tls13 = format!("{suite:?}").starts_with("TLS13");
    // Room for every record of an input, so that neither side waits on the
    // other while one task drives both.
    let (client_io, mut server_io) = tokio::io::duplex(16 << 20);
    let server = async {
        let established = handshake(&mut server_io, server_config())
            .await
            .expect("Celer's handshake");
        TlsStream::new(server_io, established)
    };
    let mut client = Client::new(suite, client_io);
    let (mut stream, ()) = tokio::join!(server, client.handshake());
    // The client's key updates since its last application data: past
    // KEY_UPDATES_MAX in a row Celer refuses the next one, as rustls and
    // BoringSSL do (RFC 8446 §4.6.3 sets no limit; each costs a derivation).
    let mut key_updates_in_a_row = 0u8;
    for op in ops.chunks_exact(3).take(OPS_MAX) {
        let len = usize::from(u16::from_be_bytes([op[1], op[2]]));
        let payload: Vec<u8> = (0..len).map(|i| (i as u8) ^ op[1] ^ op[0]).collect();
        match op[0] % 4 {
            0 => {
                if len > 0 {
                    key_updates_in_a_row = 0;
                }
                client.send(&payload).await;
                let mut got = vec![0; len];
                stream
                    .read_exact(&mut got)
                    .await
                    .expect("Celer opens rustls's records");
                assert_eq!(got, payload, "client to server, {suite:?}");
            }
            1 => {
                stream
                    .write_all(&payload)
                    .await
                    .expect("Celer seals records");
                stream.flush().await.expect("Celer sends its records");
                let got = client.recv(len).await;
                assert_eq!(got, payload, "server to client, {suite:?}");
            }
            2 if tls13 => {
                client.conn.refresh_traffic_keys().expect("a key update");
                client.flush().await;
                if key_updates_in_a_row == KEY_UPDATES_MAX {
                    let err = stream
                        .read(&mut [0; 1])
                        .await
                        .expect_err("Celer refuses a key update past its limit");
                    assert!(
                        err.to_string().contains("too many key updates"),
                        "{err}, {suite:?}"
                    );
                    return;
                }
                key_updates_in_a_row += 1;
            }
            3 if tls13 => stream.set_write_limit(1 + u64::from(op[2] % 4)),
            _ => {}
        }
    }
    // Both closures arrive: the client's ends Celer's reads, Celer's is
    // read by rustls as a clean end.
    client.conn.send_close_notify();
    client.flush().await;
    let mut rest = Vec::new();
    stream
        .read_to_end(&mut rest)
        .await
        .expect("Celer reads the client's close_notify");
    assert!(rest.is_empty());
    stream.shutdown().await.expect("Celer's close_notify");
    drop(stream);
    assert!(client.recv(usize::MAX).await.is_empty());
    let state = client.conn.process_new_packets().expect("rustls's state");
    assert!(state.peer_has_closed(), "Celer's close_notify, {suite:?}");
}

/// rustls's client, driven by hand over one end of the pipe.
struct Client {
    conn: ClientConnection,
    io: DuplexStream,
    /// Bytes read that rustls has not taken yet (it stops while its
    /// plaintext buffer is full).
    pending: Vec<u8>,
}

impl Client {
    fn new(suite: CipherSuite, io: DuplexStream) -> Client {
        let name = ServerName::try_from("localhost").expect("a name");
        let conn = ClientConnection::new(client_config(suite), name).expect("a client");
        Client {
            conn,
            io,
            pending: Vec::new(),
        }
    }

    async fn handshake(&mut self) {
        while self.conn.is_handshaking() {
            self.flush().await;
            if self.conn.is_handshaking() {
                self.read_tls().await;
            }
        }
        self.flush().await;
    }

    async fn flush(&mut self) {
        let mut records = Vec::new();
        while self.conn.wants_write() {
            self.conn.write_tls(&mut records).expect("rustls's records");
        }
        self.io.write_all(&records).await.expect("the pipe");
    }

    async fn send(&mut self, data: &[u8]) {
        self.conn.writer().write_all(data).expect("rustls seals");
        self.flush().await;
    }

    /// Hands rustls the bytes read, as far as it takes them.
    fn feed(&mut self) {
        while !self.pending.is_empty() {
            let mut rest = &self.pending[..];
            match self.conn.read_tls(&mut rest) {
                Ok(n) => drop(self.pending.drain(..n)),
                // Its plaintext buffer is full: read some first.
                Err(_) => break,
            }
            self.conn
                .process_new_packets()
                .expect("rustls opens Celer's records");
        }
    }

    /// Reads once from the pipe and hands rustls what it takes; false at
    /// the pipe's end.
    async fn read_tls(&mut self) -> bool {
        let mut buf = vec![0; 64 * 1024];
        let n = self.io.read(&mut buf).await.expect("the pipe");
        self.pending.extend_from_slice(&buf[..n]);
        self.feed();
        if n == 0 && self.pending.is_empty() {
            // The end of the stream, for rustls too.
            let _ = self.conn.read_tls(&mut &[][..]);
        }
        n > 0
    }

    /// Plaintext until `n` bytes came or the connection's end.
    async fn recv(&mut self, n: usize) -> Vec<u8> {
        let mut out = Vec::new();
        while out.len() < n {
            let mut chunk = vec![0; (n - out.len()).min(64 * 1024)];
            match self.conn.reader().read(&mut chunk) {
                Ok(0) => break,
                Ok(got) => out.extend_from_slice(&chunk[..got]),
                Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {
                    if !self.pending.is_empty() {
                        self.feed();
                    } else if !self.read_tls().await {
                        break;
                    }
                }
                Err(err) => panic!("rustls reads: {err}"),
            }
        }
        out
    }
}

fn server_config() -> &'static TlsConfig {
    static CONFIG: OnceLock<TlsConfig> = OnceLock::new();
    CONFIG.get_or_init(|| {
        let pair = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])
            .expect("a certificate");
        TlsConfig::builder()
            .cert_pem("fuzz", pair.cert.pem(), pair.signing_key.serialize_pem())
            .build()
            .expect("a TLS configuration")
    })
}

fn client_config(suite: CipherSuite) -> Arc<ClientConfig> {
    static CONFIGS: OnceLock<Vec<Arc<ClientConfig>>> = OnceLock::new();
    let configs = CONFIGS.get_or_init(|| {
        SUITES
            .iter()
            .map(|&suite| {
                let mut provider = rustls::crypto::aws_lc_rs::default_provider();
                provider.cipher_suites.retain(|s| s.suite() == suite);
                let provider = Arc::new(provider);
                let version: &[&rustls::SupportedProtocolVersion] =
                    if format!("{suite:?}").starts_with("TLS13") {
                        &[&rustls::version::TLS13]
                    } else {
                        &[&rustls::version::TLS12]
                    };
                let config = ClientConfig::builder_with_provider(provider.clone())
                    .with_protocol_versions(version)
                    .expect("the suite's version")
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
                    .with_no_client_auth();
                Arc::new(config)
            })
            .collect()
    });
    let index = SUITES.iter().position(|&s| s == suite).expect("a suite");
    configs[index].clone()
}

/// Trusts any certificate: the records are under test, not identity (the
/// unit tests in `tls::tests` use it too).
#[derive(Debug)]
pub(crate) struct AnyCertificate(pub(crate) Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_suite_carries_data_both_ways_across_key_updates() {
        for suite in 0..super::SUITES.len() as u8 {
            // 40,000 bytes each way (three records), a key update asked by
            // the client, ours every 2 records, then both ways again.
            super::run(&[
                suite, 0, 0x9c, 0x40, 1, 0x9c, 0x40, 2, 0, 0, 3, 0, 1, 1, 0x9c, 0x40, 0, 0, 5,
            ]);
        }
    }
}
