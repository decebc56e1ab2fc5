//! `celer serve` over HTTP/2 with curl: ALPN `h2` on HTTPS, prior
//! knowledge on plain listeners, static-file semantics on both, and
//! `--no-http2`; h2load as a load client.

use std::process::Command;

use crate::support::{Celer, curl};

/// A site with a small page and a 3 MiB file of known bytes.
fn site() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("index.html"), "<p>hi</p>\n").unwrap();
    let big: Vec<u8> = (0..3 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(dir.path().join("big.bin"), big).unwrap();
    dir
}

fn serve(site: &tempfile::TempDir, extra: &[&str]) -> Celer {
    let mut args = vec![
        "--root",
        site.path().to_str().unwrap(),
        "--listen",
        "tcp://127.0.0.1:0",
    ];
    args.extend_from_slice(extra);
    Celer::serve(&args)
}

#[test]
fn https_offers_h2_by_alpn_and_http1_to_clients_that_ask() {
    let site = site();
    let celer = serve(&site, &["--self-signed"]);
    let url = format!("https://127.0.0.1:{}/", celer.port());
    let reply = curl(&["-k", "--http2", &url]);
    assert_eq!((reply.version.as_str(), reply.status), ("HTTP/2", 200));
    assert_eq!(reply.text(), "<p>hi</p>\n");
    assert_eq!(reply.header("content-length"), Some("10"));
    assert!(reply.header("date").is_some());
    let reply = curl(&["-k", "--http1.1", &url]);
    assert_eq!((reply.version.as_str(), reply.status), ("HTTP/1.1", 200));
}

#[test]
fn cleartext_prior_knowledge_serves_h2_beside_http1() {
    let site = site();
    let celer = serve(&site, &[]);
    let url = format!("http://127.0.0.1:{}/", celer.port());
    let reply = curl(&["--http2-prior-knowledge", &url]);
    assert_eq!((reply.version.as_str(), reply.status), ("HTTP/2", 200));
    assert_eq!(reply.text(), "<p>hi</p>\n");
    let reply = curl(&[&url]);
    assert_eq!((reply.version.as_str(), reply.status), ("HTTP/1.1", 200));
}

#[test]
fn files_keep_their_semantics_over_h2_plain_and_tls() {
    let site = site();
    let expected = std::fs::read(site.path().join("big.bin")).unwrap();
    for tls in [false, true] {
        let celer = serve(&site, if tls { &["--self-signed"][..] } else { &[] });
        let (scheme, mode) = if tls {
            ("https", "--http2")
        } else {
            ("http", "--http2-prior-knowledge")
        };
        let url = format!("{scheme}://127.0.0.1:{}/big.bin", celer.port());
        // The whole file, read through the body (no sendfile on HTTP/2).
        let reply = curl(&["-k", mode, &url]);
        assert_eq!((reply.version.as_str(), reply.status), ("HTTP/2", 200));
        assert!(reply.body == expected, "body differs (tls: {tls})");
        // A range, and a conditional request with the ETag just served.
        let reply = curl(&["-k", mode, "-r", "1000-1009", &url]);
        assert_eq!(reply.status, 206);
        assert_eq!(reply.body, &expected[1000..1010]);
        assert_eq!(
            reply.header("content-range"),
            Some(format!("bytes 1000-1009/{}", expected.len()).as_str())
        );
        let etag = reply.header("etag").unwrap().to_owned();
        let reply = curl(&["-k", mode, "-H", &format!("if-none-match: {etag}"), &url]);
        assert_eq!(reply.status, 304);
        assert!(reply.body.is_empty());
        // HEAD: the length, no body.
        let reply = curl(&["-k", mode, "-I", &url]);
        assert_eq!(reply.status, 200);
        assert_eq!(
            reply.header("content-length"),
            Some(expected.len().to_string().as_str())
        );
        assert!(reply.body.is_empty());
    }
}

#[test]
fn no_http2_serves_http1_only() {
    let site = site();
    let celer = serve(&site, &["--self-signed", "--no-http2"]);
    let url = format!("https://127.0.0.1:{}/", celer.port());
    // ALPN offers only http/1.1, so a client asking for h2 falls back.
    let reply = curl(&["-k", "--http2", &url]);
    assert_eq!((reply.version.as_str(), reply.status), ("HTTP/1.1", 200));

    let celer = serve(&site, &["--no-http2"]);
    let url = format!("http://127.0.0.1:{}/", celer.port());
    // The preface is not a request line HTTP/1.1 accepts: curl gets no
    // HTTP/2 answer and fails.
    let out = Command::new("curl")
        .args(["-s", "--max-time", "20", "--http2-prior-knowledge", &url])
        .output()
        .expect("run curl");
    assert!(!out.status.success(), "{out:?}");
    let reply = curl(&[&url]);
    assert_eq!((reply.version.as_str(), reply.status), ("HTTP/1.1", 200));
}

/// h2load's summary line `requests: N total, N started, N done, N succeeded,
/// N failed, N errored, N timeout` as (succeeded, failed, errored).
fn h2load_counts(out: &str) -> (u64, u64, u64) {
    let line = out
        .lines()
        .find(|l| l.starts_with("requests:"))
        .unwrap_or_else(|| panic!("no requests line in h2load output:\n{out}"));
    let count = |what: &str| -> u64 {
        line.split(',')
            .find(|part| part.trim().ends_with(what))
            .and_then(|part| part.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no '{what}' in {line}"))
    };
    (count("succeeded"), count("failed"), count("errored"))
}

#[test]
fn h2load_streams_many_requests_on_few_connections() {
    let site = site();
    for tls in [false, true] {
        let celer = serve(&site, if tls { &["--self-signed"][..] } else { &[] });
        let scheme = if tls { "https" } else { "http" };
        let url = format!("{scheme}://127.0.0.1:{}/index.html", celer.port());
        // 4 connections with up to 50 streams each: 4,000 requests.
        let out = Command::new("h2load")
            .args(["-n", "4000", "-c", "4", "-m", "50", &url])
            .output()
            .expect("run h2load (Debian package nghttp2-client)");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "h2load failed: {out:?}");
        assert_eq!(h2load_counts(&text), (4000, 0, 0), "tls: {tls}\n{text}");
        assert!(text.contains("4000 2xx"), "{text}");
    }
}
