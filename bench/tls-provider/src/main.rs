//! Measures rustls crypto providers: server CPU per full TLS 1.3 handshake
//! (resumption off) and per keep-alive request/response record pair, for
//! each TLS 1.3 AES-GCM suite and certificate type.
//!
//! Run with `cargo run --release` in this directory. Client and server talk
//! through memory; only the server side's thread CPU time is counted.

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection};

/// CPU time of the calling thread so far (`CLOCK_THREAD_CPUTIME_ID`, read
/// through the vDSO: tens of nanoseconds per call).
fn thread_cpu() -> Duration {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

struct Pki {
    cert: CertificateDer<'static>,
    key: Vec<u8>,
}

fn pki(alg: &'static rcgen::SignatureAlgorithm) -> Pki {
    let key = if alg == &rcgen::PKCS_RSA_SHA256 {
        // ring cannot generate RSA keys; openssl can.
        let out = std::process::Command::new("openssl")
            .args(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"])
            .output()
            .expect("openssl genpkey");
        let pem = String::from_utf8(out.stdout).unwrap();
        rcgen::KeyPair::from_pem_and_sign_algo(&pem, alg).unwrap()
    } else {
        rcgen::KeyPair::generate_for(alg).unwrap()
    };
    let params = rcgen::CertificateParams::new(vec!["bench.test".to_owned()]).unwrap();
    let cert = params.self_signed(&key).unwrap();
    Pki { cert: cert.der().clone(), key: key.serialize_der() }
}

fn configs(provider: &Arc<CryptoProvider>, pki: &Pki) -> (Arc<ServerConfig>, Arc<ClientConfig>) {
    let mut server = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![pki.cert.clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(pki.key.clone())),
        )
        .unwrap();
    server.send_tls13_tickets = 0;
    server.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
    let mut roots = RootCertStore::empty();
    roots.add(pki.cert.clone()).unwrap();
    let mut client = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    client.resumption = rustls::client::Resumption::disabled();
    (Arc::new(server), Arc::new(client))
}

/// Moves every pending TLS record from `from` to `to`; the time spent in
/// the server's calls is added to `server_cpu`.
fn pump(
    client: &mut ClientConnection,
    server: &mut ServerConnection,
    server_cpu: &mut Duration,
) {
    let mut buf = Vec::new();
    loop {
        buf.clear();
        while client.wants_write() {
            client.write_tls(&mut buf).unwrap();
        }
        let client_sent = !buf.is_empty();
        if client_sent {
            let t = thread_cpu();
            let mut rd = &buf[..];
            while !rd.is_empty() {
                server.read_tls(&mut rd).unwrap();
                server.process_new_packets().unwrap();
            }
            *server_cpu += thread_cpu() - t;
        }
        buf.clear();
        let t = thread_cpu();
        while server.wants_write() {
            server.write_tls(&mut buf).unwrap();
        }
        *server_cpu += thread_cpu() - t;
        let server_sent = !buf.is_empty();
        if server_sent {
            let mut rd = &buf[..];
            while !rd.is_empty() {
                client.read_tls(&mut rd).unwrap();
                client.process_new_packets().unwrap();
            }
        }
        if !client_sent && !server_sent {
            return;
        }
    }
}

fn handshake_cost(provider: &Arc<CryptoProvider>, pki: &Pki, n: u32) -> Duration {
    let (sc, cc) = configs(provider, pki);
    let mut cpu = Duration::ZERO;
    for _ in 0..n {
        let mut client =
            ClientConnection::new(cc.clone(), ServerName::try_from("bench.test").unwrap()).unwrap();
        let t = thread_cpu();
        let mut server = ServerConnection::new(sc.clone()).unwrap();
        cpu += thread_cpu() - t;
        pump(&mut client, &mut server, &mut cpu);
        assert!(!client.is_handshaking() && !server.is_handshaking());
    }
    cpu / n
}

fn record_cost(provider: &Arc<CryptoProvider>, pki: &Pki, n: u32) -> Duration {
    let (sc, cc) = configs(provider, pki);
    let mut client =
        ClientConnection::new(cc, ServerName::try_from("bench.test").unwrap()).unwrap();
    let mut server = ServerConnection::new(sc).unwrap();
    let mut cpu = Duration::ZERO;
    pump(&mut client, &mut server, &mut cpu);
    let request = b"GET /plaintext HTTP/1.1\r\nHost: bench.test\r\n\r\n";
    let response = b"HTTP/1.1 200 OK\r\nserver: celer\r\ndate: Sun, 22 Nov 2026 09:00:00 GMT\r\ncontent-type: text/plain\r\ncontent-length: 13\r\n\r\nHello, World!";
    let mut cpu = Duration::ZERO;
    let mut sink = [0u8; 512];
    for _ in 0..n {
        client.writer().write_all(request).unwrap();
        let mut buf = Vec::new();
        client.write_tls(&mut buf).unwrap();
        let t = thread_cpu();
        server.read_tls(&mut &buf[..]).unwrap();
        server.process_new_packets().unwrap();
        let got = server.reader().read(&mut sink).unwrap();
        assert_eq!(got, request.len());
        server.writer().write_all(response).unwrap();
        buf.clear();
        server.write_tls(&mut buf).unwrap();
        cpu += thread_cpu() - t;
        client.read_tls(&mut &buf[..]).unwrap();
        client.process_new_packets().unwrap();
        let _ = client.reader().read(&mut sink).unwrap();
    }
    cpu / n
}

/// `provider` offering only the TLS 1.3 suite `suite`.
fn only(mut provider: CryptoProvider, suite: rustls::CipherSuite) -> Arc<CryptoProvider> {
    provider.cipher_suites.retain(|s| s.suite() == suite);
    Arc::new(provider)
}

fn main() {
    use rustls::CipherSuite::{TLS13_AES_128_GCM_SHA256 as AES128, TLS13_AES_256_GCM_SHA384 as AES256};
    use rustls::crypto::{aws_lc_rs, ring};
    let providers = [
        ("ring", "AES-256-GCM-SHA384", only(ring::default_provider(), AES256)),
        ("aws-lc-rs", "AES-256-GCM-SHA384", only(aws_lc_rs::default_provider(), AES256)),
        ("ring", "AES-128-GCM-SHA256", only(ring::default_provider(), AES128)),
        ("aws-lc-rs", "AES-128-GCM-SHA256", only(aws_lc_rs::default_provider(), AES128)),
    ];
    let algs: [(&str, &'static rcgen::SignatureAlgorithm); 3] = [
        ("ECDSA P-256", &rcgen::PKCS_ECDSA_P256_SHA256),
        ("Ed25519", &rcgen::PKCS_ED25519),
        ("RSA 2048", &rcgen::PKCS_RSA_SHA256),
    ];
    println!("provider,suite,certificate,round,handshake_us,handshakes_per_cpu_s,record_pair_us");
    for round in 0..3 {
        for (alg_name, alg) in algs {
            let key = pki(alg);
            for (name, suite, provider) in &providers {
                let hs = handshake_cost(provider, &key, 300);
                let rec = record_cost(provider, &key, 20_000);
                println!(
                    "{name},{suite},{alg_name},{round},{:.1},{:.0},{:.3}",
                    hs.as_secs_f64() * 1e6,
                    1.0 / hs.as_secs_f64(),
                    rec.as_secs_f64() * 1e6
                );
            }
        }
    }
}
