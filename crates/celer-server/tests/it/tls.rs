//! TLS listeners: curl and Python's `ssl` over loopback, certificates made
//! in the test (rcgen for ECDSA and Ed25519 under a test CA, openssl for RSA).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use celer_server::listen::BindOptions;
use celer_server::{Limits, Listen, Server, Shutdown, TlsConfig};
use celer_test_support::{Raw, bounded, run_tool};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    SignatureAlgorithm,
};

use crate::support;

const PROBE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/tls_probe.py");

// ===== certificates =====

/// A test CA and a directory for PEM files.
struct Pki {
    issuer: Issuer<'static, KeyPair>,
    dir: tempfile::TempDir,
    ca: PathBuf,
}

impl Pki {
    fn new() -> Pki {
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "celer test CA");
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, cert.pem()).unwrap();
        Pki {
            issuer: Issuer::new(params, key),
            dir,
            ca,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes `NAME.crt` and `NAME.key`: a leaf for `names` signed by the CA.
    fn leaf(
        &self,
        file: &str,
        names: &[&str],
        alg: &'static SignatureAlgorithm,
    ) -> (PathBuf, PathBuf) {
        let key = KeyPair::generate_for(alg).unwrap();
        self.sign(file, names, &key)
    }

    /// Like [`Pki::leaf`] with an RSA 2048 key from openssl (ring cannot
    /// generate RSA keys), in PKCS#1 form.
    fn rsa_leaf(&self, file: &str, names: &[&str]) -> (PathBuf, PathBuf) {
        let pkcs8 = self.path(&format!("{file}.pkcs8"));
        let out = run_tool(
            Command::new("openssl")
                .args([
                    "genpkey",
                    "-algorithm",
                    "RSA",
                    "-pkeyopt",
                    "rsa_keygen_bits:2048",
                    "-out",
                ])
                .arg(&pkcs8),
        );
        assert!(out.status.success(), "openssl genpkey failed");
        let pem = std::fs::read_to_string(&pkcs8).unwrap();
        let key = KeyPair::from_pem_and_sign_algo(&pem, &rcgen::PKCS_RSA_SHA256).unwrap();
        let (cert, key_path) = self.sign(file, names, &key);
        // Store the key in openssl's PKCS#1 form ("BEGIN RSA PRIVATE KEY").
        let out = run_tool(
            Command::new("openssl")
                .args(["rsa", "-traditional", "-in"])
                .arg(&pkcs8)
                .arg("-out")
                .arg(&key_path),
        );
        assert!(out.status.success(), "openssl rsa failed");
        let written = std::fs::read_to_string(&key_path).unwrap();
        assert!(written.contains("BEGIN RSA PRIVATE KEY"), "{written}");
        (cert, key_path)
    }

    fn sign(&self, file: &str, names: &[&str], key: &KeyPair) -> (PathBuf, PathBuf) {
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        let cert = CertificateParams::new(names)
            .unwrap()
            .signed_by(key, &self.issuer)
            .unwrap();
        let cert_path = self.path(&format!("{file}.crt"));
        let key_path = self.path(&format!("{file}.key"));
        std::fs::write(&cert_path, cert.pem()).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        (cert_path, key_path)
    }
}

fn config(pairs: &[&(PathBuf, PathBuf)]) -> TlsConfig {
    let mut builder = TlsConfig::builder();
    for (cert, key) in pairs {
        builder = builder.cert_files(cert, key);
    }
    builder.build().expect("tls config")
}

/// The fingerprint of the certificate at `idx`, as the probe prints it.
fn fingerprint(tls: &TlsConfig, idx: usize) -> String {
    tls.certificates()[idx].sha256.replace(':', "")
}

// ===== server =====

struct TlsServer {
    addr: SocketAddr,
    redirect: Option<SocketAddr>,
    shutdown: Shutdown,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

#[derive(Default)]
struct Options {
    limits: Limits,
    hsts: Option<Duration>,
    redirect: bool,
}

async fn start(tls: &TlsConfig, opts: Options) -> TlsServer {
    let mut builder = Server::builder()
        .listen_tls(Listen::parse("tcp://127.0.0.1:0").unwrap())
        .tls(tls.clone())
        .limits(opts.limits)
        .hsts(opts.hsts)
        .bind_options(BindOptions {
            defer_accept: None,
            ..BindOptions::default()
        });
    if opts.redirect {
        builder = builder.redirect_http(Listen::parse("tcp://127.0.0.1:0").unwrap());
    }
    let bound = builder.bind().expect("bind");
    let addr = bound.tcp_addr().unwrap();
    let redirect = bound.redirect_addr();
    let shutdown = Shutdown::new();
    let task = tokio::spawn(bound.serve(tower::service_fn(support::route), shutdown.clone()));
    TlsServer {
        addr,
        redirect,
        shutdown,
        task,
    }
}

/// A server with a `localhost` certificate (ECDSA P-256) and `limits`, and
/// the PKI that signed it (which also keeps its files).
async fn start_localhost(limits: Limits) -> (Pki, TlsServer) {
    let pki = Pki::new();
    let pair = pki.leaf("localhost", &["localhost"], &rcgen::PKCS_ECDSA_P256_SHA256);
    let opts = Options {
        limits,
        ..Options::default()
    };
    let srv = start(&config(&[&pair]), opts).await;
    (pki, srv)
}

// ===== clients =====

/// Runs the Python probe; returns its JSON line.
async fn probe(addr: SocketAddr, args: &[&str]) -> serde_json::Value {
    let mut cmd = Command::new("python3");
    cmd.arg(PROBE)
        .arg(addr.ip().to_string())
        .arg(addr.port().to_string())
        .args(args);
    let out = tokio::task::spawn_blocking(move || run_tool(&mut cmd))
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "probe failed: {text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// Runs curl against `https://NAME:PORT/PATH` resolved to `addr`.
async fn curl(addr: SocketAddr, name: &str, ca: &Path, args: &[&str]) -> (bool, String) {
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "--max-time", "10", "--cacert"])
        .arg(ca)
        .arg("--resolve")
        .arg(format!("{name}:{}:{}", addr.port(), addr.ip()))
        .args(args);
    let out = tokio::task::spawn_blocking(move || run_tool(&mut cmd))
        .await
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

// ===== tests =====

#[tokio::test]
async fn curl_speaks_tls_1_3_and_1_2() {
    let pki = Pki::new();
    let pair = pki.leaf("localhost", &["localhost"], &rcgen::PKCS_ECDSA_P256_SHA256);
    let tls = config(&[&pair]);
    let srv = start(&tls, Options::default()).await;
    let url = format!("https://localhost:{}/hello", srv.addr.port());
    for (flags, version) in [
        (["--tlsv1.3", "--tls-max", "1.3"], "TLSv1.3"),
        (["--tlsv1.2", "--tls-max", "1.2"], "TLSv1.2"),
    ] {
        let (ok, text) = curl(
            srv.addr,
            "localhost",
            &pki.ca,
            &[flags[0], flags[1], flags[2], "-v", &url],
        )
        .await;
        assert!(ok, "{text}");
        assert!(text.contains("Hello, World!"), "{text}");
        assert!(
            text.contains(&format!("SSL connection using {version}")),
            "{text}"
        );
    }
}

#[tokio::test]
async fn python_clients_speak_tls_1_3_and_1_2_and_resume_by_default() {
    let pki = Pki::new();
    let pair = pki.leaf("localhost", &["localhost"], &rcgen::PKCS_ECDSA_P256_SHA256);
    let tls = config(&[&pair]);
    let srv = start(&tls, Options::default()).await;
    let ca = pki.ca.to_str().unwrap();
    // The server's preference (AES-128-GCM) wins over OpenSSL's (AES-256).
    for (version, cipher) in [
        ("1.3", "TLS_AES_128_GCM_SHA256"),
        ("1.2", "ECDHE-ECDSA-AES128-GCM-SHA256"),
    ] {
        let out = probe(
            srv.addr,
            &[
                "--sni",
                "localhost",
                "--cafile",
                ca,
                "--tls",
                version,
                "--resume",
            ],
        )
        .await;
        assert_eq!(out["cipher"], cipher, "{out}");
        assert_eq!(out["version"], format!("TLSv{version}"), "{out}");
        assert_eq!(out["status"], 200, "{out}");
        assert_eq!(out["body"], "Hello, World!", "{out}");
        assert_eq!(out["resumed"], true, "{out}");
    }
}

#[tokio::test]
async fn clients_listing_chacha20_first_get_it_others_get_the_server_order() {
    let pki = Pki::new();
    let pair = pki.leaf("localhost", &["localhost"], &rcgen::PKCS_ECDSA_P256_SHA256);
    let tls = config(&[&pair]);
    let srv = start(&tls, Options::default()).await;
    let ca = pki.ca.to_str().unwrap();
    for (offer, chosen) in [
        (
            "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES128-GCM-SHA256",
            "ECDHE-ECDSA-CHACHA20-POLY1305",
        ),
        (
            "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES128-GCM-SHA256",
            "ECDHE-ECDSA-AES128-GCM-SHA256",
        ),
    ] {
        let out = probe(
            srv.addr,
            &[
                "--sni",
                "localhost",
                "--cafile",
                ca,
                "--tls",
                "1.2",
                "--ciphers",
                offer,
            ],
        )
        .await;
        assert_eq!(out["cipher"], chosen, "{offer}: {out}");
    }
    let url = format!("https://localhost:{}/hello", srv.addr.port());
    for (offer, chosen) in [
        (
            "TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256",
            "TLS_CHACHA20_POLY1305_SHA256",
        ),
        (
            "TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256",
            "TLS_AES_128_GCM_SHA256",
        ),
    ] {
        let (ok, text) = curl(
            srv.addr,
            "localhost",
            &pki.ca,
            &["-v", "--tlsv1.3", "--tls13-ciphers", offer, &url],
        )
        .await;
        assert!(ok, "{text}");
        assert!(
            text.contains(&format!("TLSv1.3 / {chosen}")),
            "{offer}: {text}"
        );
    }
}

/// TLS 1.2 without tickets, so sessions resume only from the server's
/// session cache: makes session A, then B, then prints whether B (the
/// newest) and then A resume.
const PY_SESSION_IDS: &str = r#"
import socket, ssl, sys
port = int(sys.argv[1])
ctx = ssl._create_unverified_context()
ctx.maximum_version = ssl.TLSVersion.TLSv1_2
ctx.options |= ssl.OP_NO_TICKET
def connect(session=None):
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10),
                        server_hostname="localhost", session=session)
    s.sendall(b"GET /hello HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    while s.recv(65536):
        pass
    reused, session = s.session_reused, s.session
    s.close()
    return reused, session
_, a = connect()
_, b = connect()
print(connect(b)[0], connect(a)[0])
"#;

#[tokio::test]
async fn the_session_cache_keeps_the_newest_sessions_up_to_its_size() {
    let pki = Pki::new();
    let (cert, key) = pki.leaf("localhost", &["localhost"], &rcgen::PKCS_ECDSA_P256_SHA256);
    for (size, expected) in [(2, "True True"), (1, "True False"), (0, "False False")] {
        let tls = TlsConfig::builder()
            .cert_files(&cert, &key)
            .session_cache_size(size)
            .build()
            .unwrap();
        let srv = start(&tls, Options::default()).await;
        let mut cmd = Command::new("python3");
        cmd.args(["-c", PY_SESSION_IDS, &srv.addr.port().to_string()]);
        let out = tokio::task::spawn_blocking(move || run_tool(&mut cmd))
            .await
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(text.trim(), expected, "cache of {size}");
    }
}

#[tokio::test]
async fn resumption_can_be_turned_off() {
    let pki = Pki::new();
    let (cert, key) = pki.leaf("localhost", &["localhost"], &rcgen::PKCS_ECDSA_P256_SHA256);
    let tls = TlsConfig::builder()
        .cert_files(cert, key)
        .resumption(false)
        .build()
        .unwrap();
    let srv = start(&tls, Options::default()).await;
    let ca = pki.ca.to_str().unwrap();
    for version in ["1.3", "1.2"] {
        let out = probe(
            srv.addr,
            &[
                "--sni",
                "localhost",
                "--cafile",
                ca,
                "--tls",
                version,
                "--resume",
            ],
        )
        .await;
        assert_eq!(out["status"], 200, "{out}");
        assert_eq!(out["resumed"], false, "{out}");
    }
}

#[tokio::test]
async fn sni_picks_the_certificate_for_the_name() {
    let pki = Pki::new();
    let a = pki.leaf("a", &["a.test"], &rcgen::PKCS_ECDSA_P256_SHA256);
    let b = pki.leaf("b", &["b.test"], &rcgen::PKCS_ED25519);
    let rsa = pki.rsa_leaf("c", &["c.test"]);
    let wild = pki.leaf("wild", &["*.w.test"], &rcgen::PKCS_ECDSA_P384_SHA384);
    let tls = config(&[&a, &b, &rsa, &wild]);
    assert_eq!(tls.certificates()[3].names, ["*.w.test"]);
    let srv = start(&tls, Options::default()).await;
    let ca = pki.ca.to_str().unwrap();
    for (name, idx) in [
        ("a.test", 0),
        ("b.test", 1),
        ("c.test", 2),
        ("x.w.test", 3),
        ("X.W.Test", 3),
    ] {
        let out = probe(srv.addr, &["--sni", name, "--cafile", ca]).await;
        assert_eq!(out["sha256"], fingerprint(&tls, idx), "{name}: {out}");
        assert_eq!(out["body"], "Hello, World!", "{name}: {out}");
    }
    // No SNI, an unknown name, and a name two labels under the wildcard get
    // the first certificate.
    for args in [
        &[][..],
        &["--sni", "unknown.test"][..],
        &["--sni", "a.b.w.test"][..],
    ] {
        let out = probe(srv.addr, args).await;
        assert_eq!(out["sha256"], fingerprint(&tls, 0), "{args:?}: {out}");
    }
}

#[tokio::test]
async fn alpn_offers_h2_then_http1() {
    let pki = Pki::new();
    let pair = pki.leaf("localhost", &["localhost"], &rcgen::PKCS_ECDSA_P256_SHA256);
    let tls = config(&[&pair]);
    assert_eq!(tls.alpn_protocols(), [b"h2".to_vec(), b"http/1.1".to_vec()]);
    let srv = start(&tls, Options::default()).await;
    let ca = pki.ca.to_str().unwrap();
    let url = format!("https://localhost:{}/hello", srv.addr.port());

    // A client that speaks only HTTP/1.1 gets it.
    let out = probe(
        srv.addr,
        &["--sni", "localhost", "--cafile", ca, "--alpn", "http/1.1"],
    )
    .await;
    assert_eq!(out["alpn"], "http/1.1", "{out}");
    assert_eq!(out["status"], 200, "{out}");

    // curl asking for HTTP/2 gets it; asking for HTTP/1.1 gets that.
    for (flag, version) in [("--http2", "2"), ("--http1.1", "1.1")] {
        let (ok, text) = curl(
            srv.addr,
            "localhost",
            &pki.ca,
            &[flag, "-w", "\n%{http_version}", &url],
        )
        .await;
        assert!(ok, "{text}");
        assert!(
            text.ends_with(&format!("Hello, World!\n{version}")),
            "{text}"
        );
    }

    // A client offering only protocols the server lacks is refused
    // (RFC 7301 §3.2: no_application_protocol).
    let out = probe(
        srv.addr,
        &["--sni", "localhost", "--cafile", ca, "--alpn", "spdy/3"],
    )
    .await;
    let error = out["error"].as_str().unwrap_or_default();
    assert!(error.contains("no application protocol"), "{out}");
}

#[tokio::test]
async fn alpn_without_h2_falls_back_to_http1() {
    let pki = Pki::new();
    let (cert, key) = pki.leaf("localhost", &["localhost"], &rcgen::PKCS_ECDSA_P256_SHA256);
    let tls = TlsConfig::builder()
        .cert_files(cert, key)
        .alpn_protocols(vec![b"http/1.1".to_vec()])
        .build()
        .unwrap();
    let srv = start(&tls, Options::default()).await;
    let ca = pki.ca.to_str().unwrap();
    let out = probe(
        srv.addr,
        &[
            "--sni",
            "localhost",
            "--cafile",
            ca,
            "--alpn",
            "h2,http/1.1",
        ],
    )
    .await;
    assert_eq!(out["alpn"], "http/1.1", "{out}");
    assert_eq!(out["status"], 200, "{out}");
    let url = format!("https://localhost:{}/hello", srv.addr.port());
    let (ok, text) = curl(
        srv.addr,
        "localhost",
        &pki.ca,
        &["--http2", "-w", "\n%{http_version}", &url],
    )
    .await;
    assert!(ok, "{text}");
    assert!(text.ends_with("Hello, World!\n1.1"), "{text}");
    let out = probe(
        srv.addr,
        &["--sni", "localhost", "--cafile", ca, "--alpn", "h2"],
    )
    .await;
    let error = out["error"].as_str().unwrap_or_default();
    assert!(error.contains("no application protocol"), "{out}");
}

#[tokio::test]
async fn unserved_alpn_protocols_are_refused_at_build() {
    let pki = Pki::new();
    let (cert, key) = pki.leaf("localhost", &["localhost"], &rcgen::PKCS_ECDSA_P256_SHA256);
    let err = TlsConfig::builder()
        .cert_files(cert, key)
        .alpn_protocols(vec![b"spdy/3".to_vec()])
        .build()
        .unwrap_err();
    assert!(err.is_tls_config());
    assert!(err.to_string().contains("\"spdy/3\""), "{err}");
}

#[tokio::test]
async fn a_client_that_never_finishes_the_handshake_is_dropped_at_the_timeout() {
    let (_pki, srv) = start_localhost(Limits {
        tls_handshake_timeout: Duration::from_millis(300),
        ..Limits::default()
    })
    .await;
    // Silent after connecting, and silent after half a ClientHello record.
    for sent in [&b""[..], &[0x16, 0x03, 0x01, 0x01, 0x00, 0x01][..]] {
        let mut raw = Raw::connect(srv.addr).await;
        raw.send(sent).await;
        assert!(bounded(raw.is_closed()).await, "sent {sent:?}");
    }
}

#[tokio::test]
async fn at_the_handshake_cap_the_oldest_idle_handshake_is_shed_for_a_new_client() {
    let (pki, srv) = start_localhost(Limits {
        max_tls_handshakes: 2,
        tls_handshake_timeout: Duration::from_secs(60),
        ..Limits::default()
    })
    .await;
    let url = format!("https://localhost:{}/hello", srv.addr.port());
    // Two clients hold both handshake slots, each having sent the first
    // byte of a record and nothing more.
    let mut oldest = Raw::connect(srv.addr).await;
    oldest.send(&[0x16]).await;
    let mut second = Raw::connect(srv.addr).await;
    second.send(&[0x16]).await;
    // A real client is still served: the listener does not pause, and its
    // connection takes the slot of the oldest one waiting for a ClientHello.
    let (ok, text) = curl(srv.addr, "localhost", &pki.ca, &[&url]).await;
    assert!(ok, "{text}");
    assert!(text.contains("Hello, World!"), "{text}");
    assert!(
        oldest.is_closed().await,
        "the oldest idle handshake was shed"
    );
    // A third real client sheds the second idle one in turn.
    let (ok, text) = curl(srv.addr, "localhost", &pki.ca, &[&url]).await;
    assert!(ok, "{text}");
    assert!(second.is_closed().await);
}

#[tokio::test]
async fn a_connection_without_a_client_hello_is_closed_long_before_the_handshake_timeout() {
    // A handshake timeout far past the test's own bound: only the
    // ClientHello deadline (3 s) can close these.
    let (_pki, srv) = start_localhost(Limits {
        tls_handshake_timeout: Duration::from_secs(3600),
        ..Limits::default()
    })
    .await;
    assert!(celer_server::limits::TLS_CLIENT_HELLO_TIMEOUT < Duration::from_secs(3600));
    // Silent, one byte, half a ClientHello record; all at once.
    let sends = [
        &b""[..],
        &[0x16][..],
        &[0x16, 0x03, 0x01, 0x01, 0x00, 0x01][..],
    ];
    let mut clients = Vec::new();
    for sent in sends {
        let mut raw = Raw::connect(srv.addr).await;
        raw.send(sent).await;
        clients.push(raw);
    }
    for (raw, sent) in clients.iter_mut().zip(sends) {
        assert!(raw.is_closed().await, "sent {sent:?}");
    }
}

#[tokio::test]
async fn reload_serves_new_certificates_to_new_handshakes_only() {
    let pki = Pki::new();
    let pair = pki.leaf("site", &["localhost"], &rcgen::PKCS_ECDSA_P256_SHA256);
    let tls = config(&[&pair]);
    let old = fingerprint(&tls, 0);
    let srv = start(&tls, Options::default()).await;
    let ca = pki.ca.to_str().unwrap();

    // A connection made before the reload.
    let mut before = python_keepalive(srv.addr, ca).await;

    // Same paths, new contents.
    pki.leaf("site", &["localhost"], &rcgen::PKCS_ED25519);
    tls.reload().expect("reload");
    let new = fingerprint(&tls, 0);
    assert_ne!(old, new);
    let out = probe(srv.addr, &["--sni", "localhost", "--cafile", ca]).await;
    assert_eq!(out["sha256"], new, "{out}");

    // The earlier connection still works, with its old certificate.
    let line = before.request().await;
    assert_eq!(line, format!("{old} 200"), "{line}");

    // A bad file: the reload fails naming it, the certificate stays.
    std::fs::write(&pair.1, "not a key").unwrap();
    let err = tls.reload().unwrap_err();
    assert!(err.is_tls_config());
    let msg = err.to_string();
    assert!(msg.contains(&pair.1.display().to_string()), "{msg}");
    assert!(msg.contains("no private key found"), "{msg}");
    let out = probe(srv.addr, &["--sni", "localhost", "--cafile", ca]).await;
    assert_eq!(out["sha256"], new, "{out}");
    before.close().await;
}

/// A Python process holding one TLS keep-alive connection; each line on its
/// stdin makes it send a request and print `FINGERPRINT STATUS`.
struct Keepalive {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

const KEEPALIVE: &str = r#"
import hashlib, socket, ssl, sys
host, port, ca = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ctx = ssl.create_default_context(cafile=ca)
s = ctx.wrap_socket(socket.create_connection((host, port), timeout=10), server_hostname="localhost")
f = s.makefile("rb")
fp = hashlib.sha256(s.getpeercert(binary_form=True)).hexdigest().upper()
for _ in sys.stdin:
    s.sendall(b"GET /hello HTTP/1.1\r\nHost: localhost\r\n\r\n")
    status = f.readline().split()[1].decode()
    length = 0
    while True:
        line = f.readline()
        if line in (b"\r\n", b""):
            break
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    f.read(length)
    print(fp, status, flush=True)
"#;

async fn python_keepalive(addr: SocketAddr, ca: &str) -> Keepalive {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new("python3")
        .args(["-c", KEEPALIVE])
        .arg(addr.ip().to_string())
        .arg(addr.port().to_string())
        .arg(ca)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python3");
    let stdin = child.stdin.take().unwrap();
    let stdout = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut conn = Keepalive {
        child,
        stdin,
        stdout,
    };
    // The first request proves the connection is up.
    let first = conn.request().await;
    assert!(first.ends_with(" 200"), "{first}");
    conn
}

impl Keepalive {
    async fn request(&mut self) -> String {
        use tokio::io::AsyncWriteExt;
        self.stdin.write_all(b"go\n").await.unwrap();
        bounded(self.stdout.next_line())
            .await
            .unwrap()
            .expect("a line from the keep-alive client")
    }

    async fn close(mut self) {
        drop(self.stdin);
        let _ = bounded(self.child.wait()).await;
    }
}

#[tokio::test]
async fn graceful_shutdown_closes_idle_tls_connections_and_half_done_handshakes() {
    let pki = Pki::new();
    let pair = pki.leaf("localhost", &["localhost"], &rcgen::PKCS_ECDSA_P256_SHA256);
    let tls = config(&[&pair]);
    let srv = start(&tls, Options::default()).await;
    let ca = pki.ca.to_str().unwrap();
    let mut idle = python_keepalive(srv.addr, ca).await;
    let mut stalled = Raw::connect(srv.addr).await;
    stalled.send(&[0x16, 0x03, 0x01]).await;
    srv.shutdown.trigger();
    bounded(srv.task).await.unwrap().unwrap();
    assert!(bounded(stalled.is_closed()).await);
    // The idle client finds its connection closed.
    use tokio::io::AsyncWriteExt;
    idle.stdin.write_all(b"go\n").await.unwrap();
    let line = bounded(idle.stdout.next_line()).await.unwrap();
    assert_eq!(line, None, "answered after shutdown");
    idle.close().await;
}

#[tokio::test]
async fn bad_certificate_and_key_files_are_named_in_the_error() {
    let pki = Pki::new();
    let (cert, key) = pki.leaf("good", &["localhost"], &rcgen::PKCS_ECDSA_P256_SHA256);
    let (_, other_key) = pki.leaf("other", &["localhost"], &rcgen::PKCS_ECDSA_P256_SHA256);
    let missing = pki.path("missing.pem");
    let garbage = pki.path("garbage.pem");
    std::fs::write(&garbage, "hello\n").unwrap();
    let encrypted = pki.path("encrypted.key");
    std::fs::write(
        &encrypted,
        "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n",
    )
    .unwrap();
    let bad_der = pki.path("bad-der.crt");
    std::fs::write(
        &bad_der,
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let cases: [(&Path, &Path, &Path, &str); 7] = [
        (&missing, &key, &missing, "No such file"),
        (&cert, &missing, &missing, "No such file"),
        (&garbage, &key, &garbage, "no certificate found"),
        (&key, &key, &key, "no certificate found"),
        (&cert, &garbage, &garbage, "no private key found"),
        (&cert, &encrypted, &encrypted, "encrypted"),
        (&cert, &other_key, &other_key, "does not match"),
    ];
    for (cert_file, key_file, named, problem) in cases {
        let err = TlsConfig::builder()
            .cert_files(cert_file, key_file)
            .build()
            .unwrap_err();
        let msg = err.to_string();
        assert!(err.is_tls_config(), "{msg}");
        assert!(msg.contains(&named.display().to_string()), "{msg}");
        assert!(msg.contains(problem), "{msg}");
    }
    let err = TlsConfig::builder()
        .cert_files(&bad_der, &key)
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("bad-der.crt"), "{err}");
    assert!(err.to_string().contains("not a valid X.509"), "{err}");
}

#[tokio::test]
async fn redirect_listener_answers_308_to_https() {
    let pki = Pki::new();
    let pair = pki.leaf("localhost", &["localhost"], &rcgen::PKCS_ECDSA_P256_SHA256);
    let tls = config(&[&pair]);
    let srv = start(
        &tls,
        Options {
            redirect: true,
            hsts: Some(Duration::from_secs(600)),
            ..Options::default()
        },
    )
    .await;
    let redirect = srv.redirect.expect("a redirect listener");
    let port = srv.addr.port();
    let mut raw = Raw::connect(redirect).await;
    raw.send(b"POST /a/b?c=d HTTP/1.1\r\nHost: example.test:8080\r\nContent-Length: 2\r\n\r\nhi")
        .await;
    let res = bounded(raw.response()).await;
    assert_eq!(res.status, 308);
    let location = format!("https://example.test:{port}/a/b?c=d");
    assert_eq!(res.header("location"), Some(location.as_str()));
    // HSTS is for TLS responses only (RFC 6797 §8.1).
    assert_eq!(res.header("strict-transport-security"), None);
    // The connection stays usable; IPv6 hosts keep their brackets.
    raw.send(b"GET / HTTP/1.1\r\nHost: [::1]\r\n\r\n").await;
    let res = bounded(raw.response()).await;
    let location = format!("https://[::1]:{port}/");
    assert_eq!(res.header("location"), Some(location.as_str()));
    // curl follows it to the TLS listener.
    let url = format!("http://localhost:{}/hello", redirect.port());
    let (ok, text) = curl(
        srv.addr,
        "localhost",
        &pki.ca,
        &[
            "-L",
            "-i",
            "--resolve",
            &format!("localhost:{}:127.0.0.1", redirect.port()),
            &url,
        ],
    )
    .await;
    assert!(ok, "{text}");
    assert!(text.contains("HTTP/1.1 308"), "{text}");
    assert!(
        text.contains("strict-transport-security: max-age=600"),
        "{text}"
    );
    assert!(text.ends_with("Hello, World!"), "{text}");
}

#[tokio::test]
async fn hsts_is_off_by_default() {
    let pki = Pki::new();
    let pair = pki.leaf("localhost", &["localhost"], &rcgen::PKCS_ECDSA_P256_SHA256);
    let tls = config(&[&pair]);
    let srv = start(&tls, Options::default()).await;
    let out = probe(
        srv.addr,
        &["--sni", "localhost", "--cafile", pki.ca.to_str().unwrap()],
    )
    .await;
    let head = out["head"].as_str().unwrap().to_ascii_lowercase();
    assert!(!head.contains("strict-transport-security"), "{head}");
}

#[tokio::test]
async fn a_tls_listener_without_a_certificate_does_not_bind() {
    let err = Server::builder()
        .listen_tls(Listen::parse("tcp://127.0.0.1:0").unwrap())
        .bind()
        .unwrap_err();
    assert!(err.to_string().contains("certificate"), "{err}");
    let err = Server::builder()
        .listen(Listen::parse("tcp://127.0.0.1:0").unwrap())
        .redirect_http(Listen::parse("tcp://127.0.0.1:0").unwrap())
        .bind()
        .unwrap_err();
    assert!(err.to_string().contains("TLS listener"), "{err}");
}
