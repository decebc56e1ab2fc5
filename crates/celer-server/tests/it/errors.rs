//! Every refusal answers a specific status with a reason, then closes.

use celer_test_support::{Raw, exchange, parse_all};

use crate::support::{short_timeouts, start, start_default};

/// Sends `request`, expects exactly one answer with `status`, then a close.
async fn refused(request: &[u8], status: u16) {
    let srv = start_default().await;
    let out = exchange(srv.addr, request).await;
    let rs = parse_all(&out);
    assert_eq!(rs.len(), 1, "{:?}", String::from_utf8_lossy(&out));
    assert_eq!(
        rs[0].status,
        status,
        "{:?} -> {:?}",
        String::from_utf8_lossy(request),
        rs[0]
    );
    assert_eq!(rs[0].header("connection"), Some("close"));
    assert!(!rs[0].body.is_empty(), "a reason is given");
}

#[tokio::test]
async fn malformed_heads_are_400() {
    for req in [
        &b"GET / HTTP/1.1\r\nHost x\r\n\r\n"[..],
        b"GET / HTTP/1.1\r\nHost : x\r\n\r\n",
        b"GET\t/ HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET / HTTP/1.1\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST /collect HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"POST /collect HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcXX",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
    ] {
        refused(req, 400).await;
    }
}

#[tokio::test]
async fn unknown_transfer_coding_is_501() {
    refused(
        b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        501,
    )
    .await;
}

#[tokio::test]
async fn other_http_versions_are_505() {
    refused(b"GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505).await;
}

#[tokio::test]
async fn unknown_expectations_are_417() {
    refused(b"GET / HTTP/1.1\r\nHost: x\r\nExpect: teapot\r\n\r\n", 417).await;
}

#[tokio::test]
async fn smuggled_requests_are_never_interpreted() {
    // CL.TE: the second request hides in what a lax parser takes as body.
    let srv = start_default().await;
    let out = exchange(
        srv.addr,
        b"POST /collect HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /hello HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    .await;
    let rs = parse_all(&out);
    assert_eq!(rs.len(), 1);
    assert_eq!(rs[0].status, 400);
    // TE.TE obfuscation: a second coding after chunked is refused, not ignored.
    let out = exchange(
        srv.addr,
        b"POST /collect HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: x\r\n\r\n0\r\n\r\nGET /hello HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    .await;
    let rs = parse_all(&out);
    assert_eq!(rs.len(), 1);
    assert_eq!(rs[0].status, 400);
    // A bare LF inside chunk framing is an error, not a line end.
    let out = exchange(
        srv.addr,
        b"POST /collect HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\nGET /hello HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    .await;
    let rs = parse_all(&out);
    assert_eq!(rs.len(), 1);
    assert_eq!(rs[0].status, 400);
}

#[tokio::test]
async fn a_bad_request_after_good_ones_still_gets_the_good_answers_first() {
    let srv = start_default().await;
    let out = exchange(
        srv.addr,
        b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\n\r\n",
    )
    .await;
    let rs = parse_all(&out);
    assert_eq!(
        rs.iter().map(|r| r.status).collect::<Vec<_>>(),
        vec![200, 400]
    );
}

#[tokio::test]
async fn a_late_head_is_408() {
    let srv = start(short_timeouts()).await;
    let mut c = Raw::connect(srv.addr).await;
    c.send(b"GET /hello HTTP/1.1\r\nHost:").await;
    let r = c.response().await;
    assert_eq!(r.status, 408);
    assert!(c.is_closed().await);
}

#[tokio::test]
async fn a_stalled_body_is_408() {
    let srv = start(short_timeouts()).await;
    let mut c = Raw::connect(srv.addr).await;
    c.send(b"POST /collect HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
        .await;
    let r = c.response().await;
    assert_eq!(r.status, 408);
    assert!(c.is_closed().await);
}

/// RFC 9112 §3.2: a Host that is not `uri-host [ ":" port ]` is 400.
#[tokio::test]
async fn hosts_outside_the_uri_grammar_are_400() {
    for host in ["127.0.0.1:abc", "[::1", "::1", "[::1]x", "a:1:2"] {
        let req = format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n");
        refused(req.as_bytes(), 400).await;
    }
}

/// RFC 9110 §2.5: a later HTTP/1 minor version is processed as HTTP/1.1;
/// the answer is HTTP/1.1 and the connection stays open.
#[tokio::test]
async fn http_1_2_is_handled_as_http_1_1() {
    let srv = start_default().await;
    let mut c = Raw::connect(srv.addr).await;
    c.send(b"GET /describe HTTP/1.2\r\nHost: x\r\n\r\nGET /hello HTTP/1.9\r\nHost: x\r\n\r\n")
        .await;
    let r = c.response().await;
    assert_eq!(r.status, 200);
    assert!(r.text().starts_with("GET HTTP/1.1\n"), "{}", r.text());
    let r = c.response().await;
    assert_eq!((r.status, r.text().as_str()), (200, "Hello, World!"));
    assert_eq!(r.header("connection"), None);
}

/// Found by fuzzing: an over-long request line followed by an unfinished
/// head is refused at once, not left waiting for the head timeout.
#[tokio::test]
async fn a_long_request_line_before_an_unfinished_head_is_414_at_once() {
    let srv = start(celer_server::Limits {
        head_timeout: std::time::Duration::from_secs(600),
        ..celer_server::Limits::default()
    })
    .await;
    let mut c = Raw::connect(srv.addr).await;
    let line = format!("GET /{} HTTP/1.1\r\nHost: x\r\nX: y", "a".repeat(9000));
    c.send(line.as_bytes()).await;
    // The head is unfinished and the head timeout far beyond what a test
    // step may wait: an answer can only be the line's refusal.
    let r = c.response().await;
    assert_eq!(r.status, 414);
    assert!(c.is_closed().await);
}
