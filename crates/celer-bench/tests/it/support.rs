//! Tiny servers started inside the tests, and argument helpers.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How a test server answers each request.
#[derive(Debug, Clone)]
pub(crate) enum Reply {
    /// These bytes, keeping the connection open (unless the request says close).
    Fixed(Vec<u8>),
    /// These bytes, then close the connection.
    ThenClose(Vec<u8>),
    /// Reset the connection (RST) instead of answering.
    Reset,
    /// Close the connection without answering.
    Close,
    /// Never answer.
    Stall,
    /// Answer at once, except that requests arriving between `after` and
    /// `after + stall` from the first request wait until the stall ends.
    StallOnce {
        body: Vec<u8>,
        after: Duration,
        stall: Duration,
    },
}

/// A running test server; it lives until the test process exits.
#[derive(Debug, Clone)]
pub(crate) struct Server {
    pub(crate) addr: SocketAddr,
    /// Complete requests received.
    pub(crate) requests: Arc<AtomicU64>,
    /// Connections accepted (the pre-flight connect included).
    pub(crate) connections: Arc<AtomicU64>,
    /// Requests by request line.
    pub(crate) lines: Arc<Mutex<HashMap<String, u64>>>,
}

impl Server {
    /// `http://ADDR/`.
    pub(crate) fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    pub(crate) fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }
}

/// A small 200 response.
pub(crate) fn ok() -> Vec<u8> {
    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello".to_vec()
}

/// Starts a server answering with `reply`.
pub(crate) fn serve(reply: Reply) -> Server {
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    std_listener.set_nonblocking(true).unwrap();
    let server = Server {
        addr: std_listener.local_addr().unwrap(),
        requests: Arc::default(),
        connections: Arc::default(),
        lines: Arc::default(),
    };
    let shared = server.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = TcpListener::from_std(std_listener).unwrap();
            let first_request = Arc::new(Mutex::new(None::<Instant>));
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                shared.connections.fetch_add(1, Ordering::SeqCst);
                let task = connection(stream, reply.clone(), shared.clone(), first_request.clone());
                tokio::spawn(task);
            }
        });
    });
    server
}

/// Serves one connection: finds each request head (and its body, by
/// Content-Length) and answers it.
async fn connection(
    mut stream: TcpStream,
    reply: Reply,
    server: Server,
    first_request: Arc<Mutex<Option<Instant>>>,
) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        while let Some((len, close)) = complete_request(&buf) {
            let line =
                String::from_utf8_lossy(&buf[..buf.iter().position(|&b| b == b'\r').unwrap()])
                    .into_owned();
            buf.drain(..len);
            server.requests.fetch_add(1, Ordering::SeqCst);
            *server.lines.lock().unwrap().entry(line).or_default() += 1;
            let bytes = match &reply {
                Reply::Fixed(bytes) => bytes,
                Reply::ThenClose(bytes) => {
                    let _ = stream.write_all(bytes).await;
                    return;
                }
                Reply::Reset => {
                    let _ = stream.set_zero_linger();
                    return;
                }
                Reply::Close => return,
                Reply::Stall => {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    return;
                }
                Reply::StallOnce { body, after, stall } => {
                    let now = Instant::now();
                    let first = *first_request.lock().unwrap().get_or_insert(now);
                    let start = first + *after;
                    if now >= start && now < start + *stall {
                        tokio::time::sleep_until((start + *stall).into()).await;
                    }
                    body
                }
            };
            if stream.write_all(bytes).await.is_err() || close {
                return;
            }
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// The length of the first complete request in `buf` and whether it asks to close.
fn complete_request(buf: &[u8]) -> Option<(usize, bool)> {
    let head_end = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let body_len = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    let len = head_end + body_len;
    (buf.len() >= len).then(|| (len, head.contains("connection: close")))
}

/// Starts an HTTPS server with a fresh self-signed certificate for
/// `localhost` (made by the openssl command), answering `response` to every
/// request on keep-alive connections.
pub(crate) fn serve_tls(response: Vec<u8>) -> Server {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};

    let dir = tempfile::tempdir().unwrap();
    let (key, cert) = (dir.path().join("key.pem"), dir.path().join("cert.pem"));
    let status = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
        ])
        .args(["-nodes", "-days", "1", "-subj", "/CN=localhost"])
        .args(["-addext", "subjectAltName=DNS:localhost"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(std::process::Stdio::null())
        .status()
        .expect("the openssl command makes the test certificate");
    assert!(status.success());
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&cert)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let key = PrivateKeyDer::from_pem_file(&key).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));

    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    std_listener.set_nonblocking(true).unwrap();
    let server = Server {
        addr: std_listener.local_addr().unwrap(),
        requests: Arc::default(),
        connections: Arc::default(),
        lines: Arc::default(),
    };
    let shared = server.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = TcpListener::from_std(std_listener).unwrap();
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                let (acceptor, response, shared) =
                    (acceptor.clone(), response.clone(), shared.clone());
                tokio::spawn(async move {
                    let Ok(mut stream) = acceptor.accept(stream).await else {
                        return;
                    };
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 8192];
                    loop {
                        while let Some((len, _)) = complete_request(&buf) {
                            buf.drain(..len);
                            shared.requests.fetch_add(1, Ordering::SeqCst);
                            if stream.write_all(&response).await.is_err() {
                                return;
                            }
                        }
                        match stream.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                });
            }
        });
    });
    server
}

#[derive(Debug, Parser)]
struct Cli {
    #[command(flatten)]
    bench: celer_bench::BenchArgs,
}

/// Parses bench arguments (quiet is added).
pub(crate) fn args(list: &[&str]) -> celer_bench::BenchArgs {
    let mut argv = vec!["bench", "-q"];
    argv.extend_from_slice(list);
    Cli::try_parse_from(argv).unwrap().bench
}

/// Runs a bench and returns its JSON report.
pub(crate) fn bench(list: &[&str]) -> serde_json::Value {
    let report = celer_bench::measure(&args(list)).unwrap();
    serde_json::from_str(&report.to_json()).unwrap()
}
