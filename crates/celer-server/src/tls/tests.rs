//! The handshake and the record layer against rustls's client over an
//! in-memory pipe: records split and joined, key updates both ways, alerts,
//! `close_notify`, and writes the socket takes only in part.

use std::io::{IoSlice, Read, Write};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};

use crate::tls::TlsConfig;
use crate::tls::aead::RecordKey;
use crate::tls::differential::AnyCertificate;
use crate::tls::handshake::handshake;
use crate::tls::record::{HEADER_LEN, KEY_UPDATES_MAX, MAX_FRAGMENT};
use crate::tls::stream::TlsStream;
use crate::transport::Transport;

// ===== fixtures =====

fn server_config() -> TlsConfig {
    let pair = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    TlsConfig::builder()
        .cert_pem("test", pair.cert.pem(), pair.signing_key.serialize_pem())
        .build()
        .unwrap()
}

#[derive(Clone, Copy, Debug)]
enum Version {
    Tls12,
    Tls13,
}

const BOTH: [Version; 2] = [Version::Tls13, Version::Tls12];

fn client_config(version: Version, chacha: bool) -> Arc<ClientConfig> {
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    if chacha {
        provider
            .cipher_suites
            .retain(|suite| format!("{:?}", suite.suite()).contains("CHACHA20"));
    }
    let provider = Arc::new(provider);
    let versions: &[&rustls::SupportedProtocolVersion] = match version {
        Version::Tls12 => &[&rustls::version::TLS12],
        Version::Tls13 => &[&rustls::version::TLS13],
    };
    let config = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth();
    let mut config = config;
    // `RawClient` takes the keys over after the handshake.
    config.enable_secret_extraction = true;
    Arc::new(config)
}

/// A byte stream for the client: a pipe or a socket.
trait Pipe: AsyncRead + AsyncWrite + Unpin + Send {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send> Pipe for T {}

/// rustls's client, driven by hand over one end of a pipe.
struct Client {
    conn: ClientConnection,
    io: Box<dyn Pipe>,
    /// Every byte the server sent, as records.
    raw: Vec<u8>,
    /// Bytes read that rustls has not taken yet.
    pending: Vec<u8>,
}

impl Client {
    fn new(version: Version, io: impl Pipe + 'static) -> Client {
        Client::with_config(client_config(version, false), io)
    }

    fn with_config(config: Arc<ClientConfig>, io: impl Pipe + 'static) -> Client {
        let name = ServerName::try_from("localhost").unwrap();
        Client {
            conn: ClientConnection::new(config, name).unwrap(),
            io: Box::new(io),
            raw: Vec::new(),
            pending: Vec::new(),
        }
    }

    async fn handshake(&mut self) {
        while self.conn.is_handshaking() {
            self.flush().await;
            if self.conn.is_handshaking() {
                self.read_tls().await.unwrap();
            }
        }
        self.flush().await;
    }

    /// The records rustls has queued, not sent.
    fn take_records(&mut self) -> Vec<u8> {
        let mut records = Vec::new();
        while self.conn.wants_write() {
            self.conn.write_tls(&mut records).unwrap();
        }
        records
    }

    async fn flush(&mut self) {
        let records = self.take_records();
        self.io.write_all(&records).await.unwrap();
    }

    /// Sends `data` as one record per call.
    async fn send(&mut self, data: &[u8]) {
        self.conn.writer().write_all(data).unwrap();
        self.flush().await;
    }

    /// Hands rustls the bytes read and not yet taken, as far as it takes
    /// them (it stops while its plaintext buffer is full).
    fn feed(&mut self) -> Result<(), rustls::Error> {
        while !self.pending.is_empty() {
            let mut rest = &self.pending[..];
            match self.conn.read_tls(&mut rest) {
                Ok(n) => drop(self.pending.drain(..n)),
                Err(_) => break,
            }
            self.conn.process_new_packets()?;
        }
        Ok(())
    }

    /// Reads once from the pipe; `Ok(0)` at its end.
    async fn read_tls(&mut self) -> Result<usize, rustls::Error> {
        let mut buf = vec![0; 64 * 1024];
        let n = self.io.read(&mut buf).await.unwrap();
        self.raw.extend_from_slice(&buf[..n]);
        self.pending.extend_from_slice(&buf[..n]);
        self.feed()?;
        if n == 0 && self.pending.is_empty() {
            self.conn.read_tls(&mut &[][..]).unwrap();
        }
        Ok(n)
    }

    /// Reads plaintext until `n` bytes came, or the end (close_notify, the
    /// pipe's end); an alert is the error.
    async fn recv(&mut self, n: usize) -> Result<Vec<u8>, rustls::Error> {
        let mut out = Vec::new();
        loop {
            let mut chunk = [0; 16 * 1024];
            match self.conn.reader().read(&mut chunk) {
                Ok(0) => return Ok(out),
                Ok(got) => {
                    out.extend_from_slice(&chunk[..got]);
                    if out.len() >= n {
                        return Ok(out);
                    }
                }
                Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {
                    if !self.pending.is_empty() {
                        self.feed()?;
                    } else if self.read_tls().await? == 0 {
                        return Ok(out);
                    }
                }
                Err(_) => return Ok(out),
            }
        }
    }

    /// The lengths of the records the server sent.
    fn record_lengths(&self) -> Vec<usize> {
        let mut lengths = Vec::new();
        let mut rest = &self.raw[..];
        while rest.len() >= HEADER_LEN {
            let len = usize::from(u16::from_be_bytes([rest[3], rest[4]]));
            lengths.push(len);
            rest = &rest[(HEADER_LEN + len).min(rest.len())..];
        }
        lengths
    }
}

/// The TLS 1.3 traffic secrets a client logged (its `KeyLog`).
#[derive(Debug, Default)]
struct LoggedSecrets(std::sync::Mutex<Vec<(String, Vec<u8>)>>);

impl rustls::KeyLog for LoggedSecrets {
    fn log(&self, label: &str, _: &[u8], secret: &[u8]) {
        self.0
            .lock()
            .unwrap()
            .push((label.to_owned(), secret.to_vec()));
    }
}

/// HKDF-Expand-Label with SHA-256 (RFC 8446 §7.1), empty context.
fn expand_label(secret: &[u8], label: &str, len: usize) -> Vec<u8> {
    struct Len(usize);
    impl ring::hkdf::KeyType for Len {
        fn len(&self) -> usize {
            self.0
        }
    }
    let label = format!("tls13 {label}");
    let mut info = Vec::new();
    info.extend_from_slice(&(len as u16).to_be_bytes());
    info.push(label.len() as u8);
    info.extend_from_slice(label.as_bytes());
    info.push(0);
    let prk = ring::hkdf::Prk::new_less_safe(ring::hkdf::HKDF_SHA256, secret);
    let mut out = vec![0; len];
    prk.expand(&[&info], Len(len))
        .unwrap()
        .fill(&mut out)
        .unwrap();
    out
}

/// A TLS 1.3 ChaCha20-Poly1305 client past its handshake that seals its
/// own records with the keys rustls agreed, so that it can send what
/// rustls's client never does (a KeyUpdate that requests nothing, an
/// unknown request value).
struct RawClient {
    io: Box<dyn Pipe>,
    /// The client's current traffic secret, for its next key.
    secret: Vec<u8>,
    tx: RecordKey,
    tx_seq: u64,
    rx: RecordKey,
    rx_seq: u64,
}

impl RawClient {
    /// Connects with rustls's client, then takes its keys over.
    async fn connect() -> (RawClient, TlsStream<DuplexStream>) {
        let log = Arc::new(LoggedSecrets::default());
        let mut config = (*client_config(Version::Tls13, true)).clone();
        config.key_log = log.clone();
        let (client, stream) = connect_with(Arc::new(config), 1024 * 1024).await;
        #[allow(deprecated)] // the kernel API is the unbuffered client's only
        let secrets = client.conn.dangerous_extract_secrets().unwrap();
        let secret = log
            .0
            .lock()
            .unwrap()
            .iter()
            .find(|(label, _)| label == "CLIENT_TRAFFIC_SECRET_0")
            .unwrap()
            .1
            .clone();
        let raw = RawClient {
            io: client.io,
            secret,
            tx: RecordKey::new(true, secrets.tx.1).unwrap(),
            tx_seq: secrets.tx.0,
            rx: RecordKey::new(true, secrets.rx.1).unwrap(),
            rx_seq: secrets.rx.0,
        };
        (raw, stream)
    }

    /// Sends one record of type `typ` holding `payload`.
    async fn send(&mut self, typ: rustls::ContentType, payload: &[u8]) {
        let mut record = bytes::BytesMut::new();
        self.tx
            .seal(self.tx_seq, typ, &mut record, |out| {
                out.extend_from_slice(payload)
            })
            .unwrap();
        self.tx_seq += 1;
        self.io.write_all(&record).await.unwrap();
    }

    /// Sends KeyUpdate with this `request_update` byte (RFC 8446 §4.6.3),
    /// then seals under the next key as the server expects.
    async fn key_update(&mut self, request: u8) {
        self.send(rustls::ContentType::Handshake, &[24, 0, 0, 1, request])
            .await;
        // RFC 8446 §7.2: the next secret, then its key and IV (§7.3).
        self.secret = expand_label(&self.secret, "traffic upd", 32);
        let key: [u8; 32] = expand_label(&self.secret, "key", 32).try_into().unwrap();
        let iv: [u8; 12] = expand_label(&self.secret, "iv", 12).try_into().unwrap();
        let secrets = rustls::ConnectionTrafficSecrets::Chacha20Poly1305 {
            key: rustls::crypto::cipher::AeadKey::from(key),
            iv: rustls::crypto::cipher::Iv::new(iv),
        };
        self.tx = RecordKey::new(true, secrets).unwrap();
        self.tx_seq = 0;
    }

    /// Reads and opens the server's next record other than a session
    /// ticket: its type and plaintext.
    async fn recv(&mut self) -> (rustls::ContentType, Vec<u8>) {
        loop {
            let (typ, plain) = self.recv_any().await;
            // RFC 8446 §4.6.1: NewSessionTicket (4), sent after the
            // handshake, before the client's keys were taken over.
            if !(typ == rustls::ContentType::Handshake && plain.first() == Some(&4)) {
                return (typ, plain);
            }
        }
    }

    async fn recv_any(&mut self) -> (rustls::ContentType, Vec<u8>) {
        let mut header = [0; HEADER_LEN];
        self.io.read_exact(&mut header).await.unwrap();
        let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
        let mut record = header.to_vec();
        record.resize(HEADER_LEN + len, 0);
        self.io.read_exact(&mut record[HEADER_LEN..]).await.unwrap();
        let (typ, range) = self.rx.open(self.rx_seq, &mut record).unwrap();
        self.rx_seq += 1;
        (typ, record[range].to_vec())
    }
}

/// A connection: rustls's client on one end, our handshake on the other.
async fn connect(version: Version, pipe: usize) -> (Client, TlsStream<DuplexStream>) {
    connect_with(client_config(version, false), pipe).await
}

async fn connect_with(config: Arc<ClientConfig>, pipe: usize) -> (Client, TlsStream<DuplexStream>) {
    let (client_io, server_io) = tokio::io::duplex(pipe);
    connect_over(config, client_io, server_io).await
}

async fn connect_over<S: Transport>(
    config: Arc<ClientConfig>,
    client_io: impl Pipe + 'static,
    mut server_io: S,
) -> (Client, TlsStream<S>) {
    let tls = server_config();
    let server = tokio::spawn(async move {
        let established = handshake(&mut server_io, &tls).await.unwrap();
        TlsStream::new(server_io, established)
    });
    let mut client = Client::with_config(config, client_io);
    client.handshake().await;
    (client, server.await.unwrap())
}

/// Echoes until the client's end, then closes with `close_notify`; returns
/// how the reads ended.
async fn echo<S: Transport>(mut stream: TlsStream<S>) -> std::io::Result<()> {
    let mut buf = vec![0; 32 * 1024];
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return stream.shutdown().await;
        }
        stream.write_all(&buf[..n]).await?;
    }
}

/// `len` bytes that repeat only every 251, so a misplaced byte shows.
pub(super) fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

/// A transport that counts the writes the server makes to it.
struct CountWrites<T> {
    io: T,
    writes: Arc<AtomicUsize>,
}

impl<T: AsyncRead + Unpin> AsyncRead for CountWrites<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for CountWrites<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let res = Pin::new(&mut self.io).poll_write(cx, buf);
        if res.is_ready() {
            self.writes.fetch_add(1, Ordering::Relaxed);
        }
        res
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let res = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        if res.is_ready() {
            self.writes.fetch_add(1, Ordering::Relaxed);
        }
        res
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

impl Transport for CountWrites<DuplexStream> {}

// ===== tests =====

#[tokio::test]
async fn requests_and_responses_round_trip_in_both_versions() {
    for version in BOTH {
        for chacha in [false, true] {
            let (mut client, stream) =
                connect_with(client_config(version, chacha), 64 * 1024).await;
            let server = tokio::spawn(echo(stream));
            // Enough records that each side's sequence numbers move well
            // past where the handshake left them.
            for round in 0..20 {
                let msg = format!("request {round} over {version:?}");
                client.send(msg.as_bytes()).await;
                assert_eq!(client.recv(msg.len()).await.unwrap(), msg.as_bytes());
            }
            client.conn.send_close_notify();
            client.flush().await;
            assert_eq!(client.recv(1).await.unwrap(), b"");
            server.await.unwrap().unwrap();
        }
    }
}

/// A connection that waits (an event stream between events) drops its
/// expanded keys; the next record each way expands its key again, the
/// same key, also across a key update.
#[tokio::test]
async fn released_keys_expand_again_for_the_next_record() {
    for version in BOTH {
        for chacha in [false, true] {
            let (mut client, mut stream) =
                connect_with(client_config(version, chacha), 64 * 1024).await;
            for round in 0..4 {
                let event = format!("event {round} over {version:?}");
                stream.write_all(event.as_bytes()).await.unwrap();
                stream.flush().await.unwrap();
                Transport::release_idle(&mut stream);
                assert_eq!(stream.keys_expanded(), (false, false));
                assert_eq!(client.recv(event.len()).await.unwrap(), event.as_bytes());
                let request = format!("request {round}");
                if round == 2 && matches!(version, Version::Tls13) {
                    // RFC 8446 §4.6.3: opened with the released read key
                    // made again, then replaced by the next one.
                    client.conn.refresh_traffic_keys().unwrap();
                }
                client.send(request.as_bytes()).await;
                let mut got = vec![0; request.len()];
                stream.read_exact(&mut got).await.unwrap();
                assert_eq!(got, request.as_bytes());
                assert!(stream.keys_expanded().0);
            }
            let last = b"after the last release";
            stream.write_all(last).await.unwrap();
            stream.flush().await.unwrap();
            assert_eq!(client.recv(last.len()).await.unwrap(), last);
        }
    }
}

#[tokio::test]
async fn a_large_write_goes_out_as_full_records() {
    for version in BOTH {
        let (mut client, mut stream) = connect(version, 1024 * 1024).await;
        let body = pattern(100_000);
        let sent = body.clone();
        let server = tokio::spawn(async move {
            stream.write_all(&sent).await.unwrap();
            stream
        });
        assert_eq!(client.recv(body.len()).await.unwrap(), body);
        // 100,000 bytes: six full records (16 KiB and the AEAD's overhead)
        // and the rest; the handshake's records are all smaller.
        let lengths = client.record_lengths();
        let full = lengths.iter().filter(|len| **len > MAX_FRAGMENT).count();
        assert_eq!(full, 6, "{lengths:?}");
        assert!(
            lengths.iter().all(|len| *len <= MAX_FRAGMENT + 256),
            "{lengths:?}"
        );
        drop(server.await.unwrap());
    }
}

#[tokio::test]
async fn a_vectored_write_is_sealed_from_every_slice_and_sent_in_one_write() {
    for version in BOTH {
        let (client_io, server_io) = tokio::io::duplex(1024 * 1024);
        let writes = Arc::new(AtomicUsize::new(0));
        let server_io = CountWrites {
            io: server_io,
            writes: writes.clone(),
        };
        let config = client_config(version, false);
        let (mut client, mut stream) = connect_over(config, client_io, server_io).await;
        let slices = [
            pattern(3),
            Vec::new(),
            pattern(20_000),
            pattern(1),
            pattern(30_000),
            pattern(20_000),
        ];
        let bufs: Vec<IoSlice<'_>> = slices.iter().map(|s| IoSlice::new(s)).collect();
        let before = writes.load(Ordering::Relaxed);
        let n = std::future::poll_fn(|cx| Pin::new(&mut stream).poll_write_vectored(cx, &bufs))
            .await
            .unwrap();
        // A write's limit, four full records, sealed across the slices and
        // sent in one write to the socket.
        assert_eq!(n, 4 * MAX_FRAGMENT);
        assert_eq!(writes.load(Ordering::Relaxed) - before, 1);
        let whole = slices.concat();
        assert!(client.recv(n).await.unwrap() == whole[..n]);
        let lengths = client.record_lengths();
        let full = &lengths[lengths.len() - 4..];
        assert!(full.iter().all(|len| *len > MAX_FRAGMENT), "{lengths:?}");
        // The rest on the next write.
        stream.write_all(&whole[n..]).await.unwrap();
        assert!(client.recv(whole.len() - n).await.unwrap() == whole[n..]);
    }
}

#[tokio::test]
async fn a_request_split_across_records_and_reads_arrives_whole() {
    for version in BOTH {
        let (mut client, stream) = connect(version, 64 * 1024).await;
        let server = tokio::spawn(echo(stream));
        let request = b"GET /split HTTP/1.1\r\nHost: localhost\r\n\r\n";
        // Three records, sent a byte at a time.
        for piece in request.chunks(15) {
            client.conn.writer().write_all(piece).unwrap();
        }
        let records = client.take_records();
        for byte in records {
            client.io.write_all(&[byte]).await.unwrap();
            tokio::task::yield_now().await;
        }
        assert_eq!(client.recv(request.len()).await.unwrap(), request);
        drop(client);
        // The client left without close_notify: a truncation to the server.
        let err = server.await.unwrap().unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof);
    }
}

#[tokio::test]
async fn a_record_larger_than_the_read_buffer_is_read_whole() {
    for version in BOTH {
        let (mut client, stream) = connect(version, 1024 * 1024).await;
        let server = tokio::spawn(echo(stream));
        let body = pattern(3 * MAX_FRAGMENT + 17);
        client.send(&body).await;
        assert_eq!(client.recv(body.len()).await.unwrap(), body);
        client.conn.send_close_notify();
        client.flush().await;
        server.await.unwrap().unwrap();
    }
}

#[tokio::test]
async fn close_notify_from_the_client_reads_as_the_end() {
    for version in BOTH {
        let (mut client, mut stream) = connect(version, 64 * 1024).await;
        client.conn.writer().write_all(b"last words").unwrap();
        client.conn.send_close_notify();
        client.flush().await;
        let mut got = Vec::new();
        stream.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"last words");
        // Our answer still goes out, then our close_notify.
        stream.write_all(b"goodbye").await.unwrap();
        stream.shutdown().await.unwrap();
        assert_eq!(client.recv(7).await.unwrap(), b"goodbye");
        assert_eq!(client.recv(1).await.unwrap(), b"");
        assert!(matches!(
            client.conn.process_new_packets(),
            Ok(state) if state.peer_has_closed()
        ));
    }
}

#[tokio::test]
async fn a_tampered_record_gets_bad_record_mac_and_ends_the_connection() {
    for version in BOTH {
        let (mut client, mut stream) = connect(version, 64 * 1024).await;
        client.conn.writer().write_all(b"hello").unwrap();
        let mut records = client.take_records();
        let last = records.len() - 1;
        records[last] ^= 1;
        client.io.write_all(&records).await.unwrap();
        let mut buf = [0; 64];
        let err = stream.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
        // Writing is over too.
        assert!(stream.write_all(b"answer").await.is_err());
        drop(stream);
        let alert = client.recv(1).await.unwrap_err();
        assert_eq!(
            alert,
            rustls::Error::AlertReceived(rustls::AlertDescription::BadRecordMac)
        );
    }
}

#[tokio::test]
async fn an_unknown_record_type_is_a_decode_error() {
    let (mut client, mut stream) = connect(Version::Tls13, 64 * 1024).await;
    client.io.write_all(&[99, 3, 3, 0, 1, 0]).await.unwrap();
    let mut buf = [0; 64];
    assert!(stream.read(&mut buf).await.is_err());
    drop(stream);
    assert_eq!(
        client.recv(1).await.unwrap_err(),
        rustls::Error::AlertReceived(rustls::AlertDescription::DecodeError)
    );
}

#[tokio::test]
async fn key_updates_the_client_asks_for_are_answered() {
    let (mut client, stream) = connect(Version::Tls13, 64 * 1024).await;
    let server = tokio::spawn(echo(stream));
    for round in 0..5 {
        // KeyUpdate(update_requested): the server's records after ours
        // must come under its next key, or the client cannot read them.
        client.conn.refresh_traffic_keys().unwrap();
        let msg = format!("after key update {round}");
        client.send(msg.as_bytes()).await;
        assert_eq!(client.recv(msg.len()).await.unwrap(), msg.as_bytes());
    }
    client.conn.send_close_notify();
    client.flush().await;
    server.await.unwrap().unwrap();
}

#[tokio::test]
async fn key_update_requests_without_data_between_are_limited() {
    let (mut client, mut stream) = connect(Version::Tls13, 1024 * 1024).await;
    // rustls's and BoringSSL's limit: 32 requests without application data
    // between them; the 33rd is refused.
    for _ in 0..33 {
        client.conn.refresh_traffic_keys().unwrap();
        client.flush().await;
    }
    let mut buf = [0; 64];
    let err = stream.read(&mut buf).await.unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
    drop(stream);
    assert_eq!(
        client.recv(1).await.unwrap_err(),
        rustls::Error::AlertReceived(rustls::AlertDescription::UnexpectedMessage)
    );
}

/// Found by the `tls_records` fuzz target: a client that asks for a key
/// update before each of its records while the server sends nothing got an
/// update per request, and rustls as the client refuses the 33rd update
/// without application data between (`TooManyKeyUpdateRequests`). RFC
/// 8446 §4.6.3: requests received while silent get one update, before the
/// next application data.
#[tokio::test]
async fn key_update_requests_while_the_server_is_silent_get_one_update() {
    let (mut client, mut stream) = connect(Version::Tls13, 1024 * 1024).await;
    for round in 0..40 {
        client.conn.refresh_traffic_keys().unwrap();
        let msg = format!("request {round:02}");
        client.send(msg.as_bytes()).await;
        let mut got = [0; 10];
        stream.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, msg.as_bytes());
    }
    stream.write_all(b"done").await.unwrap();
    stream.flush().await.unwrap();
    assert_eq!(client.recv(4).await.unwrap(), b"done");
    // And the update went out: the client's next records still open.
    client.send(b"after the update").await;
    let mut got = [0; 16];
    stream.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"after the update");
}

#[tokio::test]
async fn key_updates_that_request_nothing_count_against_the_limit_too() {
    let (mut client, mut stream) = RawClient::connect().await;
    // Application data between them starts the count over.
    for _ in 0..KEY_UPDATES_MAX {
        client.key_update(0).await;
    }
    client
        .send(rustls::ContentType::ApplicationData, b"still here")
        .await;
    let mut buf = [0; 64];
    let n = stream.read(&mut buf).await.unwrap();
    assert_eq!(&buf[..n], b"still here");
    // Then one more than the limit, none of them asking for ours: each
    // would cost the server an HKDF derivation, so the last is refused.
    for _ in 0..=KEY_UPDATES_MAX {
        client.key_update(0).await;
    }
    // Bounded: a server that accepted them all would wait for data.
    let err = celer_test_support::bounded(stream.read(&mut buf))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
    drop(stream);
    // RFC 8446 §6: alert level fatal (2), unexpected_message (10).
    assert_eq!(
        client.recv().await,
        (rustls::ContentType::Alert, vec![2, 10])
    );
}

#[tokio::test]
async fn an_unknown_key_update_request_is_an_illegal_parameter() {
    for request in [2, 7, 255] {
        let (mut client, mut stream) = RawClient::connect().await;
        client
            .send(rustls::ContentType::Handshake, &[24, 0, 0, 1, request])
            .await;
        let mut buf = [0; 64];
        assert!(
            celer_test_support::bounded(stream.read(&mut buf))
                .await
                .is_err()
        );
        drop(stream);
        // RFC 8446 §4.6.3: illegal_parameter (47), not decode_error.
        assert_eq!(
            client.recv().await,
            (rustls::ContentType::Alert, vec![2, 47])
        );
    }
}

#[tokio::test]
async fn nothing_is_sealed_after_our_close_notify() {
    let (mut client, mut stream) = connect(Version::Tls13, 64 * 1024).await;
    stream.write_all(b"bye").await.unwrap();
    stream.shutdown().await.unwrap();
    // The client asks for a key update after our close_notify: the
    // answer it asks for would be a record after the closure alert.
    client.conn.refresh_traffic_keys().unwrap();
    client.send(b"late").await;
    client.conn.send_close_notify();
    client.flush().await;
    let mut got = Vec::new();
    stream.read_to_end(&mut got).await.unwrap();
    assert_eq!(got, b"late");
    assert!(stream.write_all(b"more").await.is_err());
    drop(stream);
    assert_eq!(client.recv(usize::MAX).await.unwrap(), b"bye");
    // Two records since the handshake: "bye" and close_notify (1 + 2 bytes
    // of plaintext and a 16-byte tag); no key update after them.
    let records = client.record_lengths();
    assert_eq!(records[records.len() - 2..], [3 + 1 + 16, 2 + 1 + 16]);
    client.conn.process_new_packets().unwrap();
}

#[tokio::test]
async fn the_server_updates_its_key_before_it_wears_out() {
    let (mut client, mut stream) = connect(Version::Tls13, 1024 * 1024).await;
    stream.set_write_limit(3);
    let body = pattern(10 * MAX_FRAGMENT);
    let sent = body.clone();
    let server = tokio::spawn(async move {
        stream.write_all(&sent).await.unwrap();
        stream
    });
    assert_eq!(client.recv(body.len()).await.unwrap(), body);
    drop(server.await.unwrap());
}

#[tokio::test]
async fn tls12_ends_with_close_notify_when_its_key_wears_out() {
    let (mut client, mut stream) = connect(Version::Tls12, 1024 * 1024).await;
    // The GCM suites' limit is 2^24 records; three here.
    stream.set_write_limit(3);
    let body = pattern(10 * MAX_FRAGMENT);
    let err = stream.write_all(&body).await.unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
    drop(stream);
    // Whole records' data up to the limit (the handshake spent one
    // sequence number), then a clean close_notify, not an alert.
    let got = client.recv(usize::MAX).await.unwrap();
    assert_eq!(got.len(), 2 * MAX_FRAGMENT);
    assert!(body.starts_with(&got));
    assert!(matches!(
        client.conn.process_new_packets(),
        Ok(state) if state.peer_has_closed()
    ));
}

#[tokio::test]
async fn a_socket_that_takes_writes_in_part_gets_every_byte_once() {
    for version in BOTH {
        // A pipe far smaller than a record: every write is partial.
        let (mut client, mut stream) = connect(version, 512).await;
        let body = pattern(300_000);
        let sent = body.clone();
        let server = tokio::spawn(async move {
            for piece in sent.chunks(70_000) {
                stream.write_all(piece).await.unwrap();
            }
            stream.shutdown().await.unwrap();
        });
        assert_eq!(client.recv(body.len()).await.unwrap(), body);
        server.await.unwrap();
    }
}

#[tokio::test]
async fn a_cancelled_write_sends_nothing_and_a_different_write_goes_through() {
    for version in BOTH {
        let (mut client, mut stream) = connect(version, 1024).await;
        let mut cx = Context::from_waker(Waker::noop());
        // The pipe takes 1 KiB: the first write is sealed and reported
        // written, most of its records waiting in the stream.
        let first = pattern(10_000);
        let Poll::Ready(Ok(n)) = Pin::new(&mut stream).poll_write(&mut cx, &first) else {
            panic!("the first write is sealed at once");
        };
        let mut reported = first[..n].to_vec();
        // The next write waits for the socket: `Pending`, nothing taken.
        // Its caller gives up on it (a `select!` taking another branch).
        let cancelled = vec![b'X'; 5_000];
        assert!(
            Pin::new(&mut stream)
                .poll_write(&mut cx, &cancelled)
                .is_pending()
        );
        // Other bytes then: they follow the first write's, and the
        // cancelled ones never appear.
        let reader = tokio::spawn(async move { client.recv(usize::MAX).await.unwrap() });
        let other = b"other bytes, written after the cancelled write".to_vec();
        stream.write_all(&other).await.unwrap();
        stream.flush().await.unwrap();
        reported.extend_from_slice(&other);
        stream.shutdown().await.unwrap();
        assert_eq!(reader.await.unwrap(), reported);
    }
}

#[tokio::test]
async fn records_left_by_a_write_go_out_on_flush() {
    let (mut client, mut stream) = connect(Version::Tls13, 1024).await;
    let body = pattern(50_000);
    let sent = body.clone();
    let server = tokio::spawn(async move {
        // One write: sealed whole, most of it held for the socket.
        let n = stream.write(&sent).await.unwrap();
        assert_eq!(n, sent.len());
        // No more writes: flush sends the rest, with no shutdown after.
        stream.flush().await.unwrap();
        stream
    });
    assert_eq!(client.recv(body.len()).await.unwrap(), body);
    drop(server.await.unwrap());
}

#[tokio::test]
async fn data_sent_with_the_finished_message_is_read_first() {
    let (client_io, mut server_io) = tokio::io::duplex(64 * 1024);
    let tls = server_config();
    let server = tokio::spawn(async move {
        let established = handshake(&mut server_io, &tls).await.unwrap();
        let mut stream = TlsStream::new(server_io, established);
        let mut buf = [0; 64];
        let n = stream.read(&mut buf).await.unwrap();
        buf[..n].to_vec()
    });
    let mut client = Client::new(Version::Tls13, client_io);
    // Written before the handshake: rustls sends it right after Finished.
    client.conn.writer().write_all(b"early words").unwrap();
    client.handshake().await;
    assert_eq!(server.await.unwrap(), b"early words");
}

#[tokio::test]
async fn read_readiness_answers_at_once_while_plaintext_is_held() {
    // Over TCP: a pipe is always "ready".
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let client_io = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (server_io, _) = listener.accept().await.unwrap();
    let config = client_config(Version::Tls13, false);
    let (mut client, mut stream) = connect_over(config, client_io, server_io).await;
    let mut cx = Context::from_waker(Waker::noop());
    assert!(stream.poll_read_ready(&mut cx).is_pending());
    client.send(b"0123456789").await;
    let mut small = [0; 4];
    stream.read_exact(&mut small).await.unwrap();
    assert_eq!(&small, b"0123");
    // Six bytes are held: ready without the socket.
    assert!(stream.poll_read_ready(&mut cx).is_ready());
    let mut rest = [0; 6];
    stream.read_exact(&mut rest).await.unwrap();
    assert_eq!(&rest, b"456789");
    assert!(stream.poll_read_ready(&mut cx).is_pending());
}

#[tokio::test]
async fn a_client_hello_past_the_handshake_limit_is_refused() {
    let (mut client_io, mut server_io) = tokio::io::duplex(256 * 1024);
    let tls = server_config();
    let server = tokio::spawn(async move { handshake(&mut server_io, &tls).await.map(|_| ()) });
    // A ClientHello announcing 16 MiB, sent as full handshake records.
    let mut record = vec![22, 3, 1, 0x40, 0x00, 1, 0xff, 0xff, 0xff];
    record.resize(HEADER_LEN + MAX_FRAGMENT, 0);
    for _ in 0..6 {
        if client_io.write_all(&record).await.is_err() {
            break;
        }
        record[HEADER_LEN..].fill(0);
    }
    let err = celer_test_support::bounded(server)
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
}

#[tokio::test]
async fn a_client_that_is_not_tls_gets_an_alert() {
    let (mut client_io, mut server_io) = tokio::io::duplex(64 * 1024);
    let tls = server_config();
    let server = tokio::spawn(async move { handshake(&mut server_io, &tls).await.map(|_| ()) });
    client_io
        .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    assert!(server.await.unwrap().is_err());
    let mut alert = Vec::new();
    client_io.read_to_end(&mut alert).await.unwrap();
    // An alert record (RFC 8446 §6), in plaintext before keys exist.
    assert_eq!(alert.first(), Some(&21), "{alert:?}");
}

// ===== real clients =====

/// A TLS echo server on loopback for one connection; its task returns how
/// the connection ended.
async fn echo_server() -> (
    std::net::SocketAddr,
    tokio::task::JoinHandle<std::io::Result<()>>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let tls = server_config();
    let task = tokio::spawn(async move {
        let (mut io, _) = listener.accept().await?;
        let established = handshake(&mut io, &tls).await?;
        echo(TlsStream::new(io, established)).await
    });
    (addr, task)
}

/// Reads `out` into `seen` until it contains `text`.
async fn read_until(out: &mut (impl AsyncRead + Unpin), seen: &mut String, text: &str) {
    let mut buf = [0; 4096];
    while !seen.contains(text) {
        let n = celer_test_support::bounded(out.read(&mut buf))
            .await
            .unwrap();
        assert!(n > 0, "output ended before {text:?}: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
}

/// `openssl s_client` at `version` to `addr`, its three streams piped.
fn s_client(version: &str, addr: std::net::SocketAddr) -> tokio::process::Child {
    tokio::process::Command::new("openssl")
        .args(["s_client", version, "-connect"])
        .arg(addr.to_string())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("openssl")
}

#[tokio::test]
async fn openssl_key_updates_both_ways_keep_the_connection() {
    let (addr, server) = echo_server().await;
    let mut child = s_client("-tls1_3", addr);
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let (mut seen, mut said) = (String::new(), String::new());
    stdin.write_all(b"before\n").await.unwrap();
    read_until(&mut stdout, &mut seen, "before").await;
    // s_client's commands, each alone on a line: `K` sends KeyUpdate with
    // update_requested (the server must update its key too), `k` without.
    for (command, line) in [("K\n", "after K\n"), ("k\n", "after k\n")] {
        stdin.write_all(command.as_bytes()).await.unwrap();
        read_until(&mut stderr, &mut said, "KEYUPDATE").await;
        said.clear();
        stdin.write_all(line.as_bytes()).await.unwrap();
        read_until(&mut stdout, &mut seen, line.trim()).await;
    }
    // End of input: s_client sends close_notify, read as the end.
    drop(stdin);
    celer_test_support::bounded(child.wait()).await.unwrap();
    server.await.unwrap().unwrap();
}

#[tokio::test]
async fn openssl_renegotiation_over_tls12_is_refused() {
    let (addr, server) = echo_server().await;
    let mut child = s_client("-tls1_2", addr);
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut seen = String::new();
    stdin.write_all(b"before\n").await.unwrap();
    read_until(&mut stdout, &mut seen, "before").await;
    stdin.write_all(b"R\n").await.unwrap();
    let out = celer_test_support::bounded(child.wait_with_output())
        .await
        .unwrap();
    // RFC 5746 §4.4: a no_renegotiation warning; OpenSSL gives up then.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no renegotiation"), "{stderr}");
    // Its handshake_failure alert ends the connection on our side.
    assert!(server.await.unwrap().is_err());
}

#[tokio::test]
async fn python_close_notify_is_answered_with_ours() {
    let (addr, server) = echo_server().await;
    let script = r#"
import socket, ssl, sys
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10))
s.sendall(b"x" * 100000)
got = b""
while len(got) < 100000:
    got += s.recv(65536)
assert got == b"x" * 100000
raw = s.unwrap()  # sends close_notify, waits for the server's
print("clean", flush=True)
"#;
    let out = celer_test_support::bounded(
        tokio::process::Command::new("python3")
            .args(["-c", script])
            .arg(addr.port().to_string())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "clean",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    server.await.unwrap().unwrap();
}
