//! Keep-alive, pipelining, bodies both ways, HEAD, HTTP/1.0, upgrades.

use celer_test_support::{Raw, exchange, parse_all};

use crate::support::start_default;

#[tokio::test]
async fn sixteen_pipelined_requests_in_one_write_answer_in_order() {
    let srv = start_default().await;
    let mut req = Vec::new();
    for i in 0..16 {
        req.extend_from_slice(
            format!("GET /echo-path?n={i} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes(),
        );
    }
    let mut c = Raw::connect(srv.addr).await;
    c.send(&req).await;
    for i in 0..16 {
        let r = c.response().await;
        assert_eq!(r.status, 200);
        assert_eq!(r.text(), format!("/echo-path?n={i}"));
    }
    // Still alive afterwards.
    c.send(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!(c.response().await.text(), "Hello, World!");
}

#[tokio::test]
async fn pipelined_answers_leave_in_one_batch() {
    let srv = start_default().await;
    let mut req = Vec::new();
    for _ in 0..16 {
        req.extend_from_slice(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
    }
    req.extend_from_slice(b"GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let all = exchange(srv.addr, &req).await;
    let responses = parse_all(&all);
    assert_eq!(responses.len(), 17);
    assert!(responses.iter().all(|r| r.text() == "Hello, World!"));
    assert_eq!(responses[16].header("connection"), Some("close"));
}

#[tokio::test]
async fn a_request_split_into_single_bytes() {
    let srv = start_default().await;
    let mut c = Raw::connect(srv.addr).await;
    c.send_bytewise(b"POST /collect HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\nX-T: 1\r\n\r\n").await;
    let r = c.response().await;
    assert_eq!(r.text(), "len=5 x-t=1");
    c.send_bytewise(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        .await;
    assert_eq!(c.response().await.text(), "Hello, World!");
}

#[tokio::test]
async fn content_length_body_in_the_head_packet_and_after() {
    let srv = start_default().await;
    let mut c = Raw::connect(srv.addr).await;
    c.send(b"POST /collect HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
        .await;
    assert_eq!(c.response().await.text(), "len=5");
    c.send(b"POST /collect HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
        .await;
    c.send(&vec![b'a'; 60_000]).await;
    c.send(&vec![b'b'; 40_000]).await;
    assert_eq!(c.response().await.text(), "len=100000");
}

#[tokio::test]
async fn request_body_streams_back_as_the_response() {
    let srv = start_default().await;
    let mut c = Raw::connect(srv.addr).await;
    c.send(b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nping\r\n")
        .await;
    // The echo starts before the request body has ended: the body streams.
    let mut seen = Vec::new();
    while !seen.windows(4).any(|w| w == b"ping") {
        c.read_more().await;
        seen = c.buffered().to_vec();
    }
    c.send(b"4\r\npong\r\n0\r\n\r\n").await;
    let r = c.response().await;
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    assert_eq!(r.text(), "pingpong");
}

#[tokio::test]
async fn chunked_response_with_trailers() {
    let srv = start_default().await;
    let mut c = Raw::connect(srv.addr).await;
    c.send(b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n").await;
    let r = c.response().await;
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    assert_eq!(r.header("content-length"), None);
    assert_eq!(r.text(), "one,two,three");
    assert_eq!(
        r.trailers,
        vec![("x-checksum".to_owned(), "abc".to_owned())]
    );
}

#[tokio::test]
async fn large_response_bodies_arrive_whole() {
    let srv = start_default().await;
    let mut c = Raw::connect(srv.addr).await;
    c.send(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\nGET /big HTTP/1.1\r\nHost: x\r\n\r\n")
        .await;
    for _ in 0..2 {
        let r = c.response().await;
        assert_eq!(r.body.len(), 1 << 20);
        assert!(r.body.iter().all(|&b| b == b'z'));
    }
}

#[tokio::test]
async fn head_has_headers_and_no_body() {
    let srv = start_default().await;
    let mut c = Raw::connect(srv.addr).await;
    c.send(b"HEAD /hello HTTP/1.1\r\nHost: x\r\n\r\nGET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        .await;
    let head = c.response_to("HEAD").await;
    assert_eq!(head.header("content-length"), Some("13"));
    assert!(head.body.is_empty());
    // The next response starts right after the head: no stray body bytes.
    assert_eq!(c.response().await.text(), "Hello, World!");
    c.send(b"HEAD /stream HTTP/1.1\r\nHost: x\r\n\r\nGET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        .await;
    let head = c.response_to("HEAD").await;
    assert_eq!(head.header("transfer-encoding"), None);
    assert_eq!(c.response().await.text(), "Hello, World!");
}

#[tokio::test]
async fn http10_closes_unless_keep_alive_is_asked() {
    let srv = start_default().await;
    let out = exchange(srv.addr, b"GET /hello HTTP/1.0\r\n\r\n").await;
    let r = &parse_all(&out)[0];
    assert_eq!(r.header("connection"), Some("close"));
    assert_eq!(r.text(), "Hello, World!");

    let mut c = Raw::connect(srv.addr).await;
    c.send(b"GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        .await;
    let r = c.response().await;
    assert_eq!(r.header("connection"), Some("keep-alive"));
    c.send(b"GET /stream HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        .await;
    // No chunked coding for a 1.0 client: the body is close-delimited.
    let r = c.response().await;
    assert_eq!(r.header("transfer-encoding"), None);
    assert_eq!(r.text(), "one,two,three");
    assert!(c.is_closed().await);
}

#[tokio::test]
async fn connection_close_is_honoured_both_ways() {
    let srv = start_default().await;
    let out = exchange(srv.addr, b"GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET /hello HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!(
        parse_all(&out).len(),
        1,
        "nothing after Connection: close is answered"
    );
    let out = exchange(
        srv.addr,
        b"GET /close HTTP/1.1\r\nHost: x\r\n\r\nGET /hello HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    .await;
    let rs = parse_all(&out);
    assert_eq!(rs.len(), 1);
    assert_eq!(rs[0].header("connection"), Some("close"));
}

#[tokio::test]
async fn expect_100_continue_is_sent_when_the_body_is_read() {
    let srv = start_default().await;
    let mut c = Raw::connect(srv.addr).await;
    c.send(
        b"POST /collect HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n",
    )
    .await;
    let interim = c.response().await;
    assert_eq!(interim.status, 100);
    c.send(b"hello").await;
    assert_eq!(c.response().await.text(), "len=5");
}

#[tokio::test]
async fn expect_100_continue_is_not_sent_when_the_body_is_ignored() {
    let srv = start_default().await;
    let mut c = Raw::connect(srv.addr).await;
    c.send(
        b"POST /ignore HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n",
    )
    .await;
    let r = c.response().await;
    assert_eq!(r.status, 200, "the final answer comes without a 100 first");
    assert_eq!(r.header("connection"), Some("close"));
}

#[tokio::test]
async fn unread_bodies_are_drained_within_the_limit() {
    let srv = start_default().await;
    let mut c = Raw::connect(srv.addr).await;
    let mut req = b"POST /ignore HTTP/1.1\r\nHost: x\r\nContent-Length: 20000\r\n\r\n".to_vec();
    req.extend_from_slice(&[b'q'; 20000]);
    req.extend_from_slice(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
    c.send(&req).await;
    assert_eq!(c.response().await.text(), "ignored");
    assert_eq!(c.response().await.text(), "Hello, World!");
}

#[tokio::test]
async fn upgrade_hands_over_the_connection() {
    let srv = start_default().await;
    let mut c = Raw::connect(srv.addr).await;
    c.send(
        b"GET /upgrade HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: shout\r\n\r\nearly",
    )
    .await;
    let r = c.response().await;
    assert_eq!(r.status, 101);
    assert_eq!(r.header("upgrade"), Some("shout"));
    // Bytes sent right behind the head reach the new protocol first.
    while c.buffered().len() < 5 {
        c.read_more().await;
    }
    assert_eq!(c.buffered(), b"EARLY");
    c.send(b" and more").await;
    while c.buffered().len() < 14 {
        c.read_more().await;
    }
    assert_eq!(c.buffered(), b"EARLY AND MORE");
}

#[tokio::test]
async fn broken_response_framing_closes_the_connection() {
    let srv = start_default().await;
    let out = exchange(
        srv.addr,
        b"GET /short HTTP/1.1\r\nHost: x\r\n\r\nGET /hello HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    .await;
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(text.contains("content-length: 10\r\n"), "{text}");
    assert!(
        text.ends_with("\r\n\r\nabc"),
        "the client sees a short body, then the close: {text}"
    );
}

#[tokio::test]
async fn date_and_server_headers() {
    let srv = start_default().await;
    let mut c = Raw::connect(srv.addr).await;
    c.send(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n").await;
    let r = c.response().await;
    assert_eq!(r.header("server"), Some("celer"));
    let date = r.header("date").expect("date");
    assert!(httpdate::parse_http_date(date).is_ok(), "{date}");
}
