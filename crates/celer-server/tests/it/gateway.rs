//! FastCGI and SCGI on the wire: raw records and netstrings over loopback.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use celer_server::Limits;
use celer_server::gateway::fastcgi::{self, ProtocolStatus, kind};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::start_on;

const WAIT: Duration = Duration::from_secs(10);

fn rec(kind: u8, id: u16, content: &[u8]) -> Vec<u8> {
    let mut out = BytesMut::new();
    fastcgi::encode(&mut out, kind, id, content);
    out.to_vec()
}

fn begin(id: u16, role: u16, keep: bool) -> Vec<u8> {
    let r = role.to_be_bytes();
    rec(
        kind::BEGIN_REQUEST,
        id,
        &[r[0], r[1], u8::from(keep), 0, 0, 0, 0, 0],
    )
}

fn params(vars: &[(&str, &str)]) -> Vec<u8> {
    let mut block = Vec::new();
    for (n, v) in vars {
        fastcgi::encode_pair(&mut block, n.as_bytes(), v.as_bytes());
    }
    block
}

/// BEGIN_REQUEST and all params in one record, then the empty PARAMS.
fn request(id: u16, method: &str, path: &str, extra: &[(&str, &str)]) -> Vec<u8> {
    let mut vars = vec![
        ("REQUEST_METHOD", method),
        ("REQUEST_URI", path),
        ("SERVER_NAME", "test"),
    ];
    vars.extend_from_slice(extra);
    [
        begin(id, 1, true),
        rec(kind::PARAMS, id, &params(&vars)),
        rec(kind::PARAMS, id, b""),
    ]
    .concat()
}

/// What came back for one request id.
#[derive(Debug, Default)]
struct Answer {
    stdout: Vec<u8>,
    stdout_ended: bool,
    end: Option<(u32, u8)>,
}

struct Client {
    io: TcpStream,
    buf: BytesMut,
}

impl Client {
    async fn connect(addr: std::net::SocketAddr) -> Client {
        Client {
            io: TcpStream::connect(addr).await.unwrap(),
            buf: BytesMut::new(),
        }
    }

    async fn send(&mut self, bytes: &[u8]) {
        self.io.write_all(bytes).await.unwrap();
    }

    /// The next record, or `None` at EOF.
    async fn record(&mut self) -> Option<fastcgi::Record> {
        loop {
            if let Some(r) = fastcgi::decode(&mut self.buf, fastcgi::MAX_CONTENT).unwrap() {
                return Some(r);
            }
            let n = tokio::time::timeout(WAIT, self.io.read_buf(&mut self.buf))
                .await
                .expect("a record in time")
                .unwrap();
            if n == 0 {
                return None;
            }
        }
    }

    /// Reads records until every id in `ids` has ended; returns the
    /// answers in the order of `ids` and the ids in the order they ended.
    async fn answers(&mut self, ids: &[u16]) -> (Vec<Answer>, Vec<u16>) {
        let mut answers: Vec<Answer> = ids.iter().map(|_| Answer::default()).collect();
        let mut order = Vec::new();
        while order.len() < ids.len() {
            let r = self
                .record()
                .await
                .expect("the connection stays until all ended");
            let i = ids
                .iter()
                .position(|id| *id == r.id)
                .unwrap_or_else(|| panic!("record for unknown id {}: {r:?}", r.id));
            let a = &mut answers[i];
            assert!(a.end.is_none(), "record after END_REQUEST for {}", r.id);
            match r.kind {
                kind::STDOUT if r.content.is_empty() => a.stdout_ended = true,
                kind::STDOUT => {
                    assert!(!a.stdout_ended, "STDOUT after its end");
                    a.stdout.extend_from_slice(&r.content);
                }
                kind::END_REQUEST => {
                    let c = &r.content;
                    a.end = Some((u32::from_be_bytes([c[0], c[1], c[2], c[3]]), c[4]));
                    order.push(r.id);
                }
                other => panic!("unexpected record type {other}"),
            }
        }
        (answers, order)
    }
}

fn split_response(stdout: &[u8]) -> (String, Vec<u8>) {
    let at = stdout
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head");
    (
        String::from_utf8(stdout[..at].to_vec()).unwrap(),
        stdout[at + 4..].to_vec(),
    )
}

#[tokio::test]
async fn a_request_is_answered_in_padded_records_with_the_cgi_head() {
    let server = start_on("fastcgi+tcp://127.0.0.1:0", Limits::default()).await;
    let mut c = Client::connect(server.addr).await;
    c.send(&[request(1, "GET", "/hello", &[]), rec(kind::STDIN, 1, b"")].concat())
        .await;
    let (answers, _) = c.answers(&[1]).await;
    let (head, body) = split_response(&answers[0].stdout);
    assert!(head.starts_with("Status: 200 OK\r\n"), "{head}");
    assert!(head.contains("content-length: 13"), "{head}");
    assert_eq!(body, b"Hello, World!");
    assert!(answers[0].stdout_ended);
    assert_eq!(
        answers[0].end,
        Some((0, ProtocolStatus::RequestComplete as u8))
    );
    // Every record the server wrote was padded to 8 bytes: what is left
    // in the buffer after whole records is nothing.
    assert!(c.buf.is_empty());
    // FCGI_KEEP_CONN: the same connection serves the next request.
    c.send(&[request(2, "GET", "/hello", &[]), rec(kind::STDIN, 2, b"")].concat())
        .await;
    let (answers, _) = c.answers(&[2]).await;
    assert!(split_response(&answers[0].stdout).1 == b"Hello, World!");
    server.shutdown.trigger();
}

#[tokio::test]
async fn without_keep_conn_the_connection_closes_after_the_answer() {
    let server = start_on("fastcgi+tcp://127.0.0.1:0", Limits::default()).await;
    let mut c = Client::connect(server.addr).await;
    let req = [
        begin(1, 1, false),
        rec(
            kind::PARAMS,
            1,
            &params(&[("REQUEST_METHOD", "GET"), ("REQUEST_URI", "/hello")]),
        ),
        rec(kind::PARAMS, 1, b""),
        rec(kind::STDIN, 1, b""),
    ]
    .concat();
    c.send(&req).await;
    c.answers(&[1]).await;
    assert!(c.record().await.is_none(), "closed after END_REQUEST");
    server.shutdown.trigger();
}

#[tokio::test]
async fn params_split_at_every_byte_and_empty_records_are_understood() {
    let server = start_on("fastcgi+tcp://127.0.0.1:0", Limits::default()).await;
    let mut c = Client::connect(server.addr).await;
    let block = params(&[
        ("REQUEST_METHOD", "POST"),
        ("REQUEST_URI", "/collect"),
        ("CONTENT_LENGTH", "6"),
        ("HTTP_X_LONG", &"v".repeat(300)),
    ]);
    let mut wire = begin(1, 1, true);
    for b in &block {
        wire.extend(rec(kind::PARAMS, 1, std::slice::from_ref(b)));
    }
    wire.extend(rec(kind::PARAMS, 1, b""));
    // Body in pieces of 1, 2 and 3 bytes; an unknown record type on the
    // request id is ignored.
    wire.extend(rec(kind::STDIN, 1, b"a"));
    wire.extend(rec(kind::DATA, 1, b"ignored"));
    wire.extend(rec(kind::STDIN, 1, b"bc"));
    wire.extend(rec(kind::STDIN, 1, b"def"));
    wire.extend(rec(kind::STDIN, 1, b""));
    // Sent a byte at a time, so records are split across reads too.
    for b in wire {
        c.send(&[b]).await;
    }
    let (answers, _) = c.answers(&[1]).await;
    assert_eq!(split_response(&answers[0].stdout).1, b"len=6");
    server.shutdown.trigger();
}

#[tokio::test]
async fn multiplexed_requests_interleave_and_end_independently() {
    let server = start_on("fastcgi+tcp://127.0.0.1:0", Limits::default()).await;
    let c = Client::connect(server.addr).await;
    let body1 = vec![b'1'; 100_000];
    let body2 = vec![b'2'; 70_000];
    let len1 = body1.len().to_string();
    let len2 = body2.len().to_string();
    let mut wire = request(1, "POST", "/echo", &[("CONTENT_LENGTH", &len1)]);
    wire.extend(request(2, "POST", "/echo", &[("CONTENT_LENGTH", &len2)]));
    wire.extend(request(3, "GET", "/hello", &[]));
    wire.extend(rec(kind::STDIN, 3, b""));
    // The two bodies interleaved, record by record.
    let (mut a, mut b) = (body1.chunks(8000), body2.chunks(5000));
    loop {
        let (x, y) = (a.next(), b.next());
        if x.is_none() && y.is_none() {
            break;
        }
        if let Some(x) = x {
            wire.extend(rec(kind::STDIN, 1, x));
        }
        if let Some(y) = y {
            wire.extend(rec(kind::STDIN, 2, y));
        }
    }
    wire.extend(rec(kind::STDIN, 1, b""));
    wire.extend(rec(kind::STDIN, 2, b""));
    let writer = {
        let (mut rd, mut wr) = c.io.into_split();
        let w = tokio::spawn(async move {
            wr.write_all(&wire).await.unwrap();
            wr
        });
        let mut buf = BytesMut::new();
        let mut answers: [Vec<u8>; 4] = Default::default();
        let mut ended = 0;
        while ended < 3 {
            if let Some(r) = fastcgi::decode(&mut buf, fastcgi::MAX_CONTENT).unwrap() {
                match r.kind {
                    kind::STDOUT => answers[usize::from(r.id)].extend_from_slice(&r.content),
                    kind::END_REQUEST => ended += 1,
                    _ => panic!("unexpected {r:?}"),
                }
                continue;
            }
            assert!(
                tokio::time::timeout(WAIT, rd.read_buf(&mut buf))
                    .await
                    .unwrap()
                    .unwrap()
                    > 0
            );
        }
        assert_eq!(split_response(&answers[1]).1, body1);
        assert_eq!(split_response(&answers[2]).1, body2);
        assert_eq!(split_response(&answers[3]).1, b"Hello, World!");
        w
    };
    writer.await.unwrap();
    server.shutdown.trigger();
}

#[tokio::test]
async fn an_abort_mid_body_ends_the_request_and_the_connection_goes_on() {
    let server = start_on("fastcgi+tcp://127.0.0.1:0", Limits::default()).await;
    let mut c = Client::connect(server.addr).await;
    let mut wire = request(1, "POST", "/collect", &[("CONTENT_LENGTH", "1000")]);
    wire.extend(rec(kind::STDIN, 1, &[b'x'; 100]));
    wire.extend(rec(kind::ABORT_REQUEST, 1, b""));
    c.send(&wire).await;
    let (answers, _) = c.answers(&[1]).await;
    let (status, _) = answers[0].end.unwrap();
    assert_eq!(
        answers[0].end.unwrap().1,
        ProtocolStatus::RequestComplete as u8
    );
    // The handler either was dropped (app status 1) or answered the broken body.
    assert!(status == 1 || !answers[0].stdout.is_empty());
    // Records of the ended request are ignored; the next request is served.
    c.send(
        &[
            rec(kind::STDIN, 1, b"late"),
            rec(kind::STDIN, 1, b""),
            request(2, "GET", "/hello", &[]),
            rec(kind::STDIN, 2, b""),
        ]
        .concat(),
    )
    .await;
    let (answers, _) = c.answers(&[2]).await;
    assert_eq!(split_response(&answers[0].stdout).1, b"Hello, World!");
    server.shutdown.trigger();
}

#[tokio::test]
async fn a_handler_in_flight_is_dropped_by_an_abort() {
    let server = start_on("fastcgi+tcp://127.0.0.1:0", Limits::default()).await;
    let mut c = Client::connect(server.addr).await;
    c.send(
        &[
            request(1, "GET", "/hold?fcgi-abort", &[]),
            rec(kind::STDIN, 1, b""),
        ]
        .concat(),
    )
    .await;
    let gate = crate::support::gate("fcgi-abort");
    gate.started(1).await;
    c.send(&rec(kind::ABORT_REQUEST, 1, b"")).await;
    let (answers, _) = c.answers(&[1]).await;
    assert_eq!(
        answers[0].end,
        Some((1, ProtocolStatus::RequestComplete as u8))
    );
    assert!(answers[0].stdout.is_empty());
    // The handler's future was dropped, not left running.
    gate.ended(1).await;
    assert_eq!(gate.started_so_far(), 1);
    server.shutdown.trigger();
}

#[tokio::test]
async fn management_records_other_roles_and_the_in_flight_limit_are_answered() {
    let limits = Limits {
        fastcgi_max_requests: 2,
        max_connections: 7,
        ..Limits::default()
    };
    let server = start_on("fastcgi+tcp://127.0.0.1:0", limits).await;
    let mut c = Client::connect(server.addr).await;
    c.send(&rec(
        kind::GET_VALUES,
        0,
        &params(&[
            ("FCGI_MAX_CONNS", ""),
            ("FCGI_MAX_REQS", ""),
            ("FCGI_MPXS_CONNS", ""),
        ]),
    ))
    .await;
    let r = c.record().await.unwrap();
    assert_eq!((r.kind, r.id), (kind::GET_VALUES_RESULT, 0));
    let pairs = fastcgi::decode_pairs(&r.content, 8).unwrap();
    let got: Vec<(&[u8], &[u8])> = pairs.iter().map(|(n, v)| (&n[..], &v[..])).collect();
    assert_eq!(
        got,
        [
            (&b"FCGI_MAX_CONNS"[..], &b"7"[..]),
            (b"FCGI_MAX_REQS", b"14"),
            (b"FCGI_MPXS_CONNS", b"1")
        ]
    );
    c.send(&rec(42, 0, b"")).await;
    let r = c.record().await.unwrap();
    assert_eq!((r.kind, r.content[0]), (kind::UNKNOWN_TYPE, 42));
    // The authorizer role is not played.
    c.send(&begin(9, 2, true)).await;
    let r = c.record().await.unwrap();
    assert_eq!(
        (r.kind, r.id, r.content[4]),
        (kind::END_REQUEST, 9, ProtocolStatus::UnknownRole as u8)
    );
    // Two held requests fill the connection; a third is refused.
    c.send(
        &[
            request(1, "GET", "/hold?fcgi-limit", &[]),
            rec(kind::STDIN, 1, b""),
            request(2, "GET", "/hold?fcgi-limit", &[]),
            rec(kind::STDIN, 2, b""),
            request(3, "GET", "/hello", &[]),
        ]
        .concat(),
    )
    .await;
    let r = c.record().await.unwrap();
    assert_eq!(
        (r.kind, r.id, r.content[4]),
        (kind::END_REQUEST, 3, ProtocolStatus::Overloaded as u8)
    );
    crate::support::gate("fcgi-limit").open();
    let (answers, _) = c.answers(&[1, 2]).await;
    assert_eq!(split_response(&answers[0].stdout).1, b"released fcgi-limit");
    server.shutdown.trigger();
}

#[tokio::test]
async fn limits_answer_431_413_and_close_on_protocol_errors() {
    let limits = Limits {
        gateway_max_params_bytes: 512,
        max_body_bytes: Some(1000),
        ..Limits::default()
    };
    let server = start_on("fastcgi+tcp://127.0.0.1:0", limits).await;
    let mut c = Client::connect(server.addr).await;
    c.send(
        &[
            request(1, "GET", "/hello", &[("HTTP_X_BIG", &"b".repeat(600))]),
            rec(kind::STDIN, 1, b""),
        ]
        .concat(),
    )
    .await;
    let (answers, _) = c.answers(&[1]).await;
    assert!(
        split_response(&answers[0].stdout)
            .0
            .starts_with("Status: 431 ")
    );
    c.send(
        &[
            request(2, "POST", "/collect", &[("CONTENT_LENGTH", "1001")]),
            rec(kind::STDIN, 2, b""),
        ]
        .concat(),
    )
    .await;
    let (answers, _) = c.answers(&[2]).await;
    let (head, body) = split_response(&answers[0].stdout);
    assert!(head.starts_with("Status: 413 "), "{head}");
    assert_eq!(body, b"413 request body too large\n");
    // Version 2 is not FastCGI: the connection closes.
    let mut bad = rec(kind::STDIN, 1, b"");
    bad[0] = 2;
    c.send(&bad).await;
    assert!(c.record().await.is_none());
    server.shutdown.trigger();
}

#[tokio::test]
async fn shutdown_finishes_the_request_in_flight_with_its_end() {
    let server = start_on("fastcgi+tcp://127.0.0.1:0", Limits::default()).await;
    let mut c = Client::connect(server.addr).await;
    c.send(&[request(1, "GET", "/slow", &[]), rec(kind::STDIN, 1, b"")].concat())
        .await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    server.shutdown.trigger();
    let (answers, _) = c.answers(&[1]).await;
    assert_eq!(split_response(&answers[0].stdout).1, b"slow done");
    assert!(c.record().await.is_none(), "closed once idle");
    server.task.await.unwrap().unwrap();
}

fn netstring(vars: &[(&str, &str)]) -> Vec<u8> {
    let mut block = Vec::new();
    for (n, v) in vars {
        block.extend_from_slice(n.as_bytes());
        block.push(0);
        block.extend_from_slice(v.as_bytes());
        block.push(0);
    }
    [
        format!("{}:", block.len()).into_bytes(),
        block,
        b",".to_vec(),
    ]
    .concat()
}

/// Sends one SCGI `GET path` on a new connection and reads the answer to
/// the close.
async fn scgi_get(addr: std::net::SocketAddr, path: &str) -> Vec<u8> {
    let mut io = TcpStream::connect(addr).await.unwrap();
    io.write_all(&netstring(&[
        ("CONTENT_LENGTH", "0"),
        ("SCGI", "1"),
        ("REQUEST_METHOD", "GET"),
        ("REQUEST_URI", path),
    ]))
    .await
    .unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(WAIT, io.read_to_end(&mut out))
        .await
        .unwrap()
        .unwrap();
    out
}

#[tokio::test]
async fn scgi_streams_the_body_and_answers_with_a_status_head() {
    let server = start_on("scgi+tcp://127.0.0.1:0", Limits::default()).await;
    let mut io = TcpStream::connect(server.addr).await.unwrap();
    let body = vec![b'q'; 300_000];
    let mut wire = netstring(&[
        ("CONTENT_LENGTH", "300000"),
        ("SCGI", "1"),
        ("REQUEST_METHOD", "POST"),
        ("REQUEST_URI", "/echo"),
    ]);
    wire.extend_from_slice(&body);
    let (mut rd, mut wr) = io.split();
    let mut out = Vec::new();
    let (w, r) = tokio::join!(
        wr.write_all(&wire),
        tokio::time::timeout(WAIT, rd.read_to_end(&mut out))
    );
    w.unwrap();
    r.unwrap().unwrap();
    let (head, got) = split_response(&out);
    assert!(head.starts_with("Status: 200 OK"), "{head}");
    assert_eq!(got, body);
    server.shutdown.trigger();
}

#[tokio::test]
async fn malformed_scgi_closes_the_connection_without_an_answer() {
    let server = start_on("scgi+tcp://127.0.0.1:0", Limits::default()).await;
    for bad in [
        &b"12x:"[..],
        b"5:abcde;",
        b"9999999999999:",
        &netstring(&[("SCGI", "1"), ("CONTENT_LENGTH", "0")]),
    ] {
        let mut io = TcpStream::connect(server.addr).await.unwrap();
        io.write_all(bad).await.unwrap();
        let mut out = Vec::new();
        tokio::time::timeout(WAIT, io.read_to_end(&mut out))
            .await
            .unwrap()
            .unwrap();
        assert!(
            out.is_empty(),
            "{:?}: {:?}",
            Bytes::copy_from_slice(bad),
            String::from_utf8_lossy(&out)
        );
    }
    server.shutdown.trigger();
}

#[tokio::test]
async fn params_count_and_record_size_limits_hold_at_the_edge() {
    let limits = Limits {
        gateway_max_params: 4,
        fastcgi_max_record_bytes: 256,
        ..Limits::default()
    };
    let server = start_on("fastcgi+tcp://127.0.0.1:0", limits).await;
    let mut c = Client::connect(server.addr).await;
    // Four variables: at the limit, served.
    let four = [
        ("REQUEST_METHOD", "GET"),
        ("REQUEST_URI", "/hello"),
        ("A", "1"),
        ("B", "2"),
    ];
    c.send(
        &[
            begin(1, 1, true),
            rec(kind::PARAMS, 1, &params(&four)),
            rec(kind::PARAMS, 1, b""),
            rec(kind::STDIN, 1, b""),
        ]
        .concat(),
    )
    .await;
    let (answers, _) = c.answers(&[1]).await;
    assert_eq!(split_response(&answers[0].stdout).1, b"Hello, World!");
    // Five: 431.
    let five = [
        ("REQUEST_METHOD", "GET"),
        ("REQUEST_URI", "/hello"),
        ("A", "1"),
        ("B", "2"),
        ("C", "3"),
    ];
    c.send(
        &[
            begin(2, 1, true),
            rec(kind::PARAMS, 2, &params(&five)),
            rec(kind::PARAMS, 2, b""),
            rec(kind::STDIN, 2, b""),
        ]
        .concat(),
    )
    .await;
    let (answers, _) = c.answers(&[2]).await;
    assert!(
        split_response(&answers[0].stdout)
            .0
            .starts_with("Status: 431 ")
    );
    // A record of 256 content bytes is taken; 257 closes the connection.
    c.send(&rec(kind::STDIN, 9, &[0; 256])).await;
    c.send(&rec(kind::STDIN, 9, &[0; 257])).await;
    assert!(c.record().await.is_none());
    server.shutdown.trigger();
}

#[tokio::test]
async fn head_and_idle_timeouts_close_the_connection() {
    let limits = Limits {
        head_timeout: Duration::from_millis(200),
        keep_alive_timeout: Duration::from_millis(200),
        ..Limits::default()
    };
    let server = start_on("fastcgi+tcp://127.0.0.1:0", limits).await;
    // Params that never end.
    let mut c = Client::connect(server.addr).await;
    c.send(
        &[
            begin(1, 1, true),
            rec(kind::PARAMS, 1, &params(&[("REQUEST_METHOD", "GET")])),
        ]
        .concat(),
    )
    .await;
    assert!(c.record().await.is_none(), "closed at the head timeout");
    // A connection that never sends a request.
    let mut idle = Client::connect(server.addr).await;
    assert!(idle.record().await.is_none(), "closed at the idle timeout");
    server.shutdown.trigger();
}

#[tokio::test]
async fn a_stalled_body_fails_with_a_timeout_the_handler_answers() {
    let limits = Limits {
        body_timeout: Duration::from_millis(200),
        ..Limits::default()
    };
    let server = start_on("fastcgi+tcp://127.0.0.1:0", limits).await;
    let mut c = Client::connect(server.addr).await;
    c.send(
        &[
            request(1, "POST", "/collect", &[("CONTENT_LENGTH", "10")]),
            rec(kind::STDIN, 1, b"abc"),
        ]
        .concat(),
    )
    .await;
    let (answers, _) = c.answers(&[1]).await;
    let (head, _) = split_response(&answers[0].stdout);
    assert!(head.starts_with("Status: 400 "), "{head}");
    // The connection goes on.
    c.send(&[request(2, "GET", "/hello", &[]), rec(kind::STDIN, 2, b"")].concat())
        .await;
    let (answers, _) = c.answers(&[2]).await;
    assert_eq!(split_response(&answers[0].stdout).1, b"Hello, World!");
    server.shutdown.trigger();
}

#[tokio::test]
async fn records_sent_before_the_front_end_half_closes_are_answered() {
    let server = start_on("fastcgi+tcp://127.0.0.1:0", Limits::default()).await;
    let mut c = Client::connect(server.addr).await;
    c.send(&[request(1, "GET", "/hello", &[]), rec(kind::STDIN, 1, b"")].concat())
        .await;
    c.io.shutdown().await.unwrap();
    let (answers, _) = c.answers(&[1]).await;
    assert_eq!(split_response(&answers[0].stdout).1, b"Hello, World!");
    assert!(c.record().await.is_none());
    server.shutdown.trigger();
}

#[tokio::test]
async fn one_server_serves_http_fastcgi_and_scgi_at_once() {
    use celer_server::{Listen, Server, Shutdown};
    let bound = Server::builder()
        .workers(1)
        .listen(Listen::parse("tcp://127.0.0.1:0").unwrap())
        .listen(Listen::parse("fastcgi+tcp://127.0.0.1:0").unwrap())
        .listen(Listen::parse("scgi+tcp://127.0.0.1:0").unwrap())
        .bind()
        .unwrap();
    let specs = bound.local_specs();
    assert_eq!(specs.len(), 3, "{specs:?}");
    let addr = |prefix: &str| -> std::net::SocketAddr {
        let spec = specs.iter().find(|s| s.starts_with(prefix)).unwrap();
        spec[prefix.len()..].parse().unwrap()
    };
    let (http, fcgi, scgi) = (addr("tcp://"), addr("fastcgi+tcp://"), addr("scgi+tcp://"));
    let shutdown = Shutdown::new();
    let task =
        tokio::spawn(bound.serve(tower::service_fn(crate::support::route), shutdown.clone()));

    let mut raw = celer_test_support::Raw::connect(http).await;
    raw.send(b"GET /hello HTTP/1.1\r\nhost: x\r\n\r\n").await;
    assert_eq!(raw.response().await.body, b"Hello, World!");

    let mut c = Client::connect(fcgi).await;
    c.send(&[request(1, "GET", "/hello", &[]), rec(kind::STDIN, 1, b"")].concat())
        .await;
    assert_eq!(
        split_response(&c.answers(&[1]).await.0[0].stdout).1,
        b"Hello, World!"
    );

    let out = scgi_get(scgi, "/hello").await;
    assert_eq!(split_response(&out).1, b"Hello, World!");

    shutdown.trigger();
    task.await.unwrap().unwrap();
}

#[tokio::test]
async fn max_requests_per_connection_ends_a_kept_connection_after_the_last() {
    let limits = Limits {
        max_requests_per_connection: Some(2),
        ..Limits::default()
    };
    let server = start_on("fastcgi+tcp://127.0.0.1:0", limits.clone()).await;
    let mut c = Client::connect(server.addr).await;
    for id in 1..=2 {
        // Every request asks to keep the connection.
        c.send(&[request(id, "GET", "/hello", &[]), rec(kind::STDIN, id, b"")].concat())
            .await;
        let (answers, _) = c.answers(&[id]).await;
        assert_eq!(split_response(&answers[0].stdout).1, b"Hello, World!");
        assert!(answers[0].stdout_ended);
        assert_eq!(
            answers[0].end,
            Some((0, ProtocolStatus::RequestComplete as u8))
        );
    }
    // The second was the last: it ended cleanly, then the connection
    // closed without waiting for a third.
    assert!(c.record().await.is_none(), "closed after the limit");
    assert!(c.buf.is_empty(), "nothing but whole records");
    server.shutdown.trigger();

    // Multiplexed: the last request is answered, one begun beside it is
    // refused with FCGI_OVERLOADED, then the connection closes.
    let limits = Limits {
        max_requests_per_connection: Some(1),
        ..limits
    };
    let server = start_on("fastcgi+tcp://127.0.0.1:0", limits).await;
    let mut c = Client::connect(server.addr).await;
    c.send(
        &[
            request(1, "GET", "/slow", &[]),
            rec(kind::STDIN, 1, b""),
            request(2, "GET", "/hello", &[]),
            rec(kind::STDIN, 2, b""),
        ]
        .concat(),
    )
    .await;
    let (answers, order) = c.answers(&[1, 2]).await;
    assert_eq!(order, [2, 1], "the refusal comes at once");
    assert!(answers[1].stdout.is_empty());
    assert_eq!(answers[1].end, Some((0, ProtocolStatus::Overloaded as u8)));
    assert_eq!(split_response(&answers[0].stdout).1, b"slow done");
    assert_eq!(
        answers[0].end,
        Some((0, ProtocolStatus::RequestComplete as u8))
    );
    assert!(c.record().await.is_none(), "closed after the limit");
    server.shutdown.trigger();
}

#[tokio::test]
async fn max_connections_holds_fastcgi_clients_in_the_backlog() {
    let limits = Limits {
        max_connections: 1,
        ..Limits::default()
    };
    let server = start_on("fastcgi+tcp://127.0.0.1:0", limits).await;
    let mut first = Client::connect(server.addr).await;
    first
        .send(&[request(1, "GET", "/hello", &[]), rec(kind::STDIN, 1, b"")].concat())
        .await;
    first.answers(&[1]).await;
    // The second client connects (the kernel's backlog takes it) and sends
    // its request while the first still holds the only slot.
    let mut second = Client::connect(server.addr).await;
    second
        .send(&[request(1, "GET", "/hello", &[]), rec(kind::STDIN, 1, b"")].concat())
        .await;
    // A second round trip on the first connection: had the second been
    // accepted, its answer would be on its way by now.
    first
        .send(&[request(2, "GET", "/hello", &[]), rec(kind::STDIN, 2, b"")].concat())
        .await;
    first.answers(&[2]).await;
    let mut peek = [0u8; 1];
    assert!(
        matches!(second.io.try_read(&mut peek), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the second client is not served while the first holds the slot"
    );
    // The first leaves: the second is served.
    drop(first);
    let (answers, _) = second.answers(&[1]).await;
    assert_eq!(split_response(&answers[0].stdout).1, b"Hello, World!");
    server.shutdown.trigger();
}

#[tokio::test]
async fn shutdown_closes_idle_fastcgi_and_scgi_connections() {
    let server = start_on("fastcgi+tcp://127.0.0.1:0", Limits::default()).await;
    let mut kept = Client::connect(server.addr).await;
    kept.send(&[request(1, "GET", "/hello", &[]), rec(kind::STDIN, 1, b"")].concat())
        .await;
    kept.answers(&[1]).await;
    server.shutdown.trigger();
    assert!(kept.record().await.is_none(), "idle kept connection closed");
    server.task.await.unwrap().unwrap();

    // SCGI: a connection that has sent half a header is closed by
    // shutdown, without an answer.
    let server = start_on("scgi+tcp://127.0.0.1:0", Limits::default()).await;
    let mut io = TcpStream::connect(server.addr).await.unwrap();
    let wire = netstring(&[("CONTENT_LENGTH", "0"), ("SCGI", "1")]);
    io.write_all(&wire[..wire.len() / 2]).await.unwrap();
    // Wait until the server has accepted it: a second connection's full
    // request is answered after it.
    let out = scgi_get(server.addr, "/hello").await;
    assert!(out.starts_with(b"Status: 200 OK"));
    server.shutdown.trigger();
    let mut out = Vec::new();
    tokio::time::timeout(WAIT, io.read_to_end(&mut out))
        .await
        .expect("closed at shutdown")
        .unwrap();
    assert!(out.is_empty());
    server.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn an_scgi_header_past_the_head_timeout_closes_the_connection() {
    let limits = Limits {
        head_timeout: Duration::from_millis(200),
        ..Limits::default()
    };
    let server = start_on("scgi+tcp://127.0.0.1:0", limits).await;
    let mut io = TcpStream::connect(server.addr).await.unwrap();
    io.write_all(b"40:CONTENT_LENGTH\x000\x00").await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(WAIT, io.read_to_end(&mut out))
        .await
        .expect("closed at the head timeout")
        .unwrap();
    assert!(out.is_empty());
    server.shutdown.trigger();
}

#[tokio::test]
async fn a_body_failing_half_way_sends_its_line_as_stderr_then_closes() {
    let server = start_on("fastcgi+tcp://127.0.0.1:0", Limits::default()).await;
    let mut c = Client::connect(server.addr).await;
    c.send(&[request(1, "GET", "/fails", &[]), rec(kind::STDIN, 1, b"")].concat())
        .await;
    let (mut stdout, mut stderr, mut stderr_ended) = (Vec::new(), Vec::new(), false);
    while let Some(r) = c.record().await {
        assert_eq!(r.id, 1);
        match r.kind {
            kind::STDOUT => {
                assert!(!r.content.is_empty(), "STDOUT not ended: the body failed");
                stdout.extend_from_slice(&r.content);
            }
            kind::STDERR if r.content.is_empty() => stderr_ended = true,
            kind::STDERR => stderr.extend_from_slice(&r.content),
            other => panic!("unexpected record type {other}: no END_REQUEST for a cut body"),
        }
    }
    let (head, body) = split_response(&stdout);
    assert!(head.starts_with("Status: 200 OK"), "{head}");
    assert_eq!(body, b"first part");
    assert_eq!(
        String::from_utf8(stderr).unwrap(),
        "response body failed: the disk went away\n"
    );
    assert!(stderr_ended);
    assert!(c.buf.is_empty(), "whole, padded records");
    server.shutdown.trigger();
}

#[tokio::test]
async fn a_failing_service_is_answered_500_with_its_line_as_stderr() {
    use celer_server::{Listen, Server, Shutdown};
    let bound = Server::builder()
        .workers(1)
        .listen(Listen::parse("fastcgi+tcp://127.0.0.1:0").unwrap())
        .bind()
        .unwrap();
    let addr = bound.local_specs()[0]["fastcgi+tcp://".len()..]
        .parse()
        .unwrap();
    let shutdown = Shutdown::new();
    let service = tower::service_fn(|_req: http::Request<celer_server::Incoming>| async {
        Err::<http::Response<http_body_util::Full<Bytes>>, _>(std::io::Error::other(
            "the database\nwent away",
        ))
    });
    let task = tokio::spawn(bound.serve(service, shutdown.clone()));
    let mut c = Client::connect(addr).await;
    for id in 1..=2 {
        c.send(&[request(id, "GET", "/", &[]), rec(kind::STDIN, id, b"")].concat())
            .await;
        let (mut stdout, mut stderr, mut stderr_ended) = (Vec::new(), Vec::new(), false);
        let end = loop {
            let r = c.record().await.expect("the connection stays");
            assert_eq!(r.id, id);
            match r.kind {
                kind::STDOUT => stdout.extend_from_slice(&r.content),
                kind::STDERR if r.content.is_empty() => stderr_ended = true,
                kind::STDERR => {
                    assert!(!stderr_ended);
                    stderr.extend_from_slice(&r.content);
                }
                kind::END_REQUEST => break r.content[4],
                other => panic!("unexpected record type {other}"),
            }
        };
        assert_eq!(end, ProtocolStatus::RequestComplete as u8);
        // One line, whatever the error's text holds.
        assert_eq!(
            String::from_utf8(stderr).unwrap(),
            "service failed: the database went away\n"
        );
        assert!(stderr_ended);
        let (head, _) = split_response(&stdout);
        assert!(head.starts_with("Status: 500"), "{head}");
    }
    shutdown.trigger();
    task.await.unwrap().unwrap();
}
