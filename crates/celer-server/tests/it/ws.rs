//! WebSocket on the engine: raw frames over loopback (hostile ones
//! included), limits at their edges, permessage-deflate, the Python
//! `websockets` client, and graceful shutdown with 1001.

use std::convert::Infallible;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use celer_server::ws::{
    self, CloseCode, Config, Message, SendError, SlowConsumer, WebSocket, deflate, handshake,
};
use celer_server::{Incoming, Limits, Listen, Server, Shutdown};
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

const T: Duration = Duration::from_secs(20);

struct Ws {
    addr: std::net::SocketAddr,
    shutdown: Shutdown,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
    /// What `/flood` saw: the send error and the largest queue.
    flood: mpsc::UnboundedReceiver<(Option<SendError>, usize)>,
}

async fn start(config: Config, limits: Limits) -> Ws {
    let bound = Server::builder()
        .listen(Listen::parse("tcp://127.0.0.1:0").unwrap())
        .limits(limits)
        .bind()
        .unwrap();
    let addr = bound.tcp_addr().unwrap();
    let shutdown = Shutdown::new();
    let config = Arc::new(config);
    let (tx, flood) = mpsc::unbounded_channel();
    let service = tower::service_fn(move |req| serve(config.clone(), tx.clone(), req));
    let task = tokio::spawn(bound.serve(service, shutdown.clone()));
    Ws {
        addr,
        shutdown,
        task,
        flood,
    }
}

async fn serve(
    config: Arc<Config>,
    flood: mpsc::UnboundedSender<(Option<SendError>, usize)>,
    mut req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let hs = match handshake::check(req.method(), req.version(), req.headers()) {
        Ok(hs) => hs,
        Err(e) => {
            let mut res = Response::new(Full::new(Bytes::from(e.reason)));
            *res.status_mut() = e.status;
            return Ok(res);
        }
    };
    let exts: Vec<&str> = hs.extensions.iter().map(String::as_str).collect();
    let agreed = if config.compression {
        deflate::negotiate(&exts)
    } else {
        None
    };
    let on = celer_server::upgrade::on(&mut req);
    let path = req.uri().path().to_owned();
    let mut res = Response::new(Full::new(Bytes::new()));
    *res.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    res.headers_mut()
        .insert("upgrade", "websocket".parse().unwrap());
    res.headers_mut()
        .insert("connection", "upgrade".parse().unwrap());
    res.headers_mut().insert(
        "sec-websocket-accept",
        hs.accept.expect("an HTTP/1.1 handshake has an accept key"),
    );
    if let Some((_, v)) = &agreed {
        res.headers_mut()
            .insert("sec-websocket-extensions", v.parse().unwrap());
    }
    tokio::spawn(async move {
        let io = on.await.unwrap();
        let mut ws = WebSocket::new(io, agreed.map(|(d, _)| d), config);
        if path == "/flood" {
            // Pushes from another task to a client that never reads.
            let sender = ws.sender();
            tokio::spawn(async move {
                let mut max = 0;
                let msg = ws::Prepared::new(Message::binary(vec![7u8; 1000]));
                for _ in 0..5000 {
                    match sender.send_prepared(&msg) {
                        Ok(()) => max = max.max(sender.queued_bytes()),
                        Err(e) => {
                            let _ = flood.send((Some(e), max));
                            return;
                        }
                    }
                    tokio::task::yield_now().await;
                }
                let _ = flood.send((None, max));
            });
        }
        let ordered = path == "/ordered";
        while let Some(m) = ws.recv().await {
            if ordered {
                // Queued through a handle first: it must go out first.
                let _ = ws.sender().send(Message::text("queued"));
            }
            if ws.send(m).await.is_err() {
                break;
            }
        }
    });
    Ok(res)
}

/// A raw client: exact bytes, masked frames.
struct Client {
    io: TcpStream,
    buf: Vec<u8>,
    head: String,
}

impl Client {
    async fn connect(addr: std::net::SocketAddr, path: &str, extra: &str) -> Client {
        let mut io = TcpStream::connect(addr).await.unwrap();
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n"
        );
        io.write_all(req.as_bytes()).await.unwrap();
        let mut c = Client {
            io,
            buf: Vec::new(),
            head: String::new(),
        };
        let end = loop {
            if let Some(i) = c.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            c.fill().await;
        };
        c.head = String::from_utf8(c.buf.drain(..end).collect()).unwrap();
        c
    }

    async fn fill(&mut self) -> usize {
        let mut chunk = [0u8; 65536];
        let n = tokio::time::timeout(T, self.io.read(&mut chunk))
            .await
            .expect("read timed out")
            .unwrap_or(0);
        self.buf.extend_from_slice(&chunk[..n]);
        n
    }

    async fn send_raw(&mut self, bytes: &[u8]) {
        self.io.write_all(bytes).await.unwrap();
    }

    async fn send(&mut self, fin: bool, rsv1: bool, opcode: u8, payload: &[u8]) {
        self.send_raw(&masked(fin, rsv1, opcode, payload)).await;
    }

    /// The next frame: (fin, rsv1, opcode, payload), or `None` at end of stream.
    async fn frame(&mut self) -> Option<(bool, bool, u8, Vec<u8>)> {
        loop {
            if self.buf.len() >= 2 {
                let len7 = (self.buf[1] & 0x7F) as usize;
                assert_eq!(self.buf[1] & 0x80, 0, "server frames are not masked");
                let (hl, len) = match len7 {
                    126 if self.buf.len() >= 4 => {
                        (4, u16::from_be_bytes([self.buf[2], self.buf[3]]) as usize)
                    }
                    127 if self.buf.len() >= 10 => (
                        10,
                        u64::from_be_bytes(self.buf[2..10].try_into().unwrap()) as usize,
                    ),
                    126 | 127 => (usize::MAX, 0),
                    n => (2, n),
                };
                if hl != usize::MAX && self.buf.len() >= hl + len {
                    let b0 = self.buf[0];
                    let payload = self.buf[hl..hl + len].to_vec();
                    self.buf.drain(..hl + len);
                    return Some((b0 & 0x80 != 0, b0 & 0x40 != 0, b0 & 0x0F, payload));
                }
            }
            if self.fill().await == 0 {
                return None;
            }
        }
    }

    /// Reads frames until a close; returns its code.
    async fn close_code(&mut self) -> Option<u16> {
        while let Some((_, _, op, p)) = self.frame().await {
            if op == 8 {
                return Some(if p.len() >= 2 {
                    u16::from_be_bytes([p[0], p[1]])
                } else {
                    1005
                });
            }
        }
        None
    }

    /// True when the server closes the TCP connection.
    async fn ends(&mut self) -> bool {
        loop {
            match self.frame().await {
                None => return true,
                Some(_) => continue,
            }
        }
    }
}

fn masked(fin: bool, rsv1: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![(u8::from(fin) << 7) | (u8::from(rsv1) << 6) | opcode];
    let len = payload.len();
    if len < 126 {
        out.push(0x80 | len as u8);
    } else if len <= 0xFFFF {
        out.push(0x80 | 126);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(0x80 | 127);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
    let mask = [0xA1, 0x05, 0x9C, 0x3E];
    out.extend_from_slice(&mask);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    out
}

#[tokio::test]
async fn echo_text_binary_fragments_and_pings() {
    let s = start(Config::default(), Limits::default()).await;
    let mut c = Client::connect(s.addr, "/echo", "").await;
    assert!(c.head.starts_with("HTTP/1.1 101"), "{}", c.head);
    assert!(
        c.head
            .contains("sec-websocket-accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="),
        "{}",
        c.head
    );
    c.send(true, false, 1, "héllo".as_bytes()).await;
    assert_eq!(
        c.frame().await.unwrap(),
        (true, false, 1, "héllo".as_bytes().to_vec())
    );
    c.send(false, false, 2, &[1, 2]).await;
    c.send(true, false, 9, b"are you there").await;
    c.send(true, false, 0, &[3]).await;
    assert_eq!(
        c.frame().await.unwrap(),
        (true, false, 0xA, b"are you there".to_vec()),
        "pong between fragments"
    );
    assert_eq!(c.frame().await.unwrap(), (true, false, 2, vec![1, 2, 3]));
    let big = vec![b'x'; 200_000];
    c.send(true, false, 2, &big).await;
    assert_eq!(c.frame().await.unwrap().3, big);
    // The close handshake: the code is echoed, then the server ends the TCP connection.
    c.send(true, false, 8, &[0x03, 0xE8, b'b', b'y', b'e'])
        .await;
    assert_eq!(c.close_code().await, Some(1000));
    assert!(c.ends().await);
}

#[tokio::test]
async fn the_connections_own_sends_go_behind_what_is_queued() {
    let s = start(Config::default(), Limits::default()).await;
    let mut c = Client::connect(s.addr, "/ordered", "").await;
    for text in ["a", "b"] {
        c.send(true, false, 1, text.as_bytes()).await;
        assert_eq!(c.frame().await.unwrap().3, b"queued");
        assert_eq!(c.frame().await.unwrap().3, text.as_bytes());
    }
    // A ping and a message in one write: the pong first, then the echo.
    let mut both = masked(true, false, 9, b"p");
    both.extend(masked(true, false, 1, b"c"));
    c.send_raw(&both).await;
    assert_eq!(c.frame().await.unwrap(), (true, false, 0xA, b"p".to_vec()));
    assert_eq!(c.frame().await.unwrap().3, b"queued");
    assert_eq!(c.frame().await.unwrap().3, b"c");
    c.send(true, false, 8, &[0x03, 0xE8]).await;
    assert_eq!(c.close_code().await, Some(1000));
}

#[tokio::test]
async fn hostile_frames_close_with_the_right_code() {
    let s = start(Config::default(), Limits::default()).await;
    let unmasked = vec![0x81, 0x02, b'h', b'i'];
    let huge = [
        vec![0x82, 0xFF],
        0x8000_0000_0000_0000u64.to_be_bytes().to_vec(),
        vec![0; 4],
    ]
    .concat();
    let bad_utf8_split = [
        masked(false, false, 1, b"ok \xce"),
        masked(true, false, 0, b"\xff"),
    ]
    .concat();
    let cases: Vec<(&str, Vec<u8>, u16)> = vec![
        ("unmasked", unmasked, 1002),
        ("2^63 length", huge, 1002),
        ("fragmented ping", masked(false, false, 9, b"x"), 1002),
        ("126-byte ping", masked(true, false, 9, &[0; 126]), 1002),
        ("reserved opcode 3", masked(true, false, 3, b""), 1002),
        ("reserved opcode 0xB", masked(true, false, 0xB, b""), 1002),
        ("RSV2", [0xA2, 0x80, 0, 0, 0, 0].to_vec(), 1002),
        ("RSV1 without deflate", masked(true, true, 1, b"x"), 1002),
        ("continuation first", masked(true, false, 0, b"x"), 1002),
        (
            "invalid close code 1005",
            masked(true, false, 8, &[0x03, 0xED]),
            1002,
        ),
        (
            "invalid close code 2999",
            masked(true, false, 8, &[0x0B, 0xB7]),
            1002,
        ),
        (
            "close reason not UTF-8",
            masked(true, false, 8, &[0x03, 0xE8, 0xC0]),
            1007,
        ),
        ("invalid UTF-8 across fragments", bad_utf8_split, 1007),
    ];
    for (name, wire, code) in cases {
        let mut c = Client::connect(s.addr, "/echo", "").await;
        c.send_raw(&wire).await;
        assert_eq!(c.close_code().await, Some(code), "{name}");
        assert!(c.ends().await, "{name}: the server ends the connection");
    }
}

#[tokio::test]
async fn invalid_utf8_fails_before_the_frame_ends() {
    let s = start(Config::default(), Limits::default()).await;
    let mut c = Client::connect(s.addr, "/echo", "").await;
    // A 1000-byte text frame whose 4th byte is invalid: only its first 10
    // bytes are sent, and the server fails the connection at once.
    let mut payload = vec![b'a'; 1000];
    payload[3] = 0xFF;
    let wire = masked(true, false, 1, &payload);
    c.send_raw(&wire[..18]).await;
    assert_eq!(c.close_code().await, Some(1007));
}

#[tokio::test]
async fn data_after_close_is_ignored() {
    let s = start(Config::default(), Limits::default()).await;
    let mut c = Client::connect(s.addr, "/echo", "").await;
    let wire = [
        masked(true, false, 8, &[0x03, 0xE8]),
        masked(true, false, 1, b"late"),
    ]
    .concat();
    c.send_raw(&wire).await;
    let mut frames = Vec::new();
    while let Some(f) = c.frame().await {
        frames.push(f);
    }
    assert_eq!(
        frames,
        vec![(true, false, 8, vec![0x03, 0xE8])],
        "no echo of the late text"
    );
}

#[tokio::test]
async fn a_ping_flood_from_a_client_that_does_not_read_stays_bounded() {
    let s = start(Config::default(), Limits::default()).await;
    let mut c = Client::connect(s.addr, "/echo", "").await;
    let ping = masked(true, false, 9, &[0x55; 125]);
    let flood: Vec<u8> = ping
        .iter()
        .copied()
        .cycle()
        .take(ping.len() * 20_000)
        .collect();
    c.send_raw(&flood).await;
    c.send(true, false, 1, b"after").await;
    // Pings are answered, but only the latest pending one while the socket
    // is full (one pong slot per connection, RFC 6455 §5.5.3), and the
    // connection still works afterwards.
    let mut pongs = 0;
    loop {
        let (_, _, op, p) = c.frame().await.unwrap();
        if op == 0xA {
            pongs += 1;
        } else {
            assert_eq!((op, &p[..]), (1, &b"after"[..]));
            break;
        }
    }
    assert!((1..=20_000).contains(&pongs), "{pongs} pongs");
}

#[tokio::test]
async fn frame_and_message_limits_at_the_edge() {
    let config = Config {
        max_frame_bytes: 1000,
        max_message_bytes: 1500,
        ..Config::default()
    };
    let s = start(config, Limits::default()).await;
    let mut c = Client::connect(s.addr, "/echo", "").await;
    c.send(true, false, 2, &[1; 1000]).await;
    assert_eq!(
        c.frame().await.unwrap().3.len(),
        1000,
        "a frame at the limit passes"
    );
    c.send(false, false, 2, &[1; 1000]).await;
    c.send(true, false, 0, &[1; 500]).await;
    assert_eq!(
        c.frame().await.unwrap().3.len(),
        1500,
        "a message at the limit passes"
    );
    c.send(true, false, 2, &[1; 1001]).await;
    assert_eq!(c.close_code().await, Some(1009), "a frame over the limit");
    let mut c = Client::connect(s.addr, "/echo", "").await;
    c.send(false, false, 2, &[1; 1000]).await;
    c.send(true, false, 0, &[1; 501]).await;
    assert_eq!(c.close_code().await, Some(1009), "a message over the limit");
}

#[tokio::test]
async fn permessage_deflate_is_negotiated_and_used_both_ways() {
    let s = start(Config::default(), Limits::default()).await;
    let mut c = Client::connect(
        s.addr,
        "/echo",
        "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits; server_max_window_bits=10\r\n",
    )
    .await;
    assert!(
        c.head.contains("sec-websocket-extensions: permessage-deflate; server_no_context_takeover; server_max_window_bits=10"),
        "{}",
        c.head
    );
    let text = "{\"user\":\"ada\",\"text\":\"hello hello hello hello\"}".repeat(40);
    let z = deflate::compress(text.as_bytes(), 15, 6);
    c.send(true, true, 1, &z).await;
    let (fin, rsv1, op, payload) = c.frame().await.unwrap();
    assert!(fin && rsv1 && op == 1, "the echo is compressed");
    assert!(payload.len() < text.len() / 4);
    let mut inflater = deflate::Inflater::new();
    assert_eq!(
        inflater.inflate(&payload, 1 << 20).unwrap(),
        text.as_bytes()
    );
    // A compressed message over the limit once inflated: 1009.
    let zeros = deflate::compress(
        &vec![0u8; celer_server::limits::WS_MAX_MESSAGE_BYTES + 1],
        15,
        6,
    );
    c.send(true, true, 2, &zeros).await;
    assert_eq!(c.close_code().await, Some(1009));
}

#[tokio::test]
async fn compression_off_declines_the_offer() {
    let config = Config {
        compression: false,
        ..Config::default()
    };
    let s = start(config, Limits::default()).await;
    let mut c = Client::connect(
        s.addr,
        "/echo",
        "Sec-WebSocket-Extensions: permessage-deflate\r\n",
    )
    .await;
    assert!(!c.head.contains("sec-websocket-extensions"), "{}", c.head);
    c.send(true, true, 1, &[0x00]).await;
    assert_eq!(
        c.close_code().await,
        Some(1002),
        "RSV1 is a protocol error without the extension"
    );
}

#[tokio::test]
async fn a_reader_that_never_reads_is_closed_with_the_policy_code() {
    let config = Config {
        max_queued_bytes: 64 * 1024,
        slow_consumer: SlowConsumer::Close(CloseCode::TRY_AGAIN_LATER),
        ..Config::default()
    };
    let mut s = start(config, Limits::default()).await;
    let mut c = Client::connect(s.addr, "/flood", "").await;
    let (err, max) = tokio::time::timeout(T, s.flood.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(err, Some(SendError::Full));
    assert!(max <= 64 * 1024, "the queue never passed its limit: {max}");
    // Now read: the messages the socket took, then the 1013 close.
    assert_eq!(c.close_code().await, Some(1013));
}

#[tokio::test]
async fn drop_oldest_keeps_the_queue_bounded_and_the_connection_open() {
    let config = Config {
        max_queued_bytes: 64 * 1024,
        slow_consumer: SlowConsumer::DropOldest,
        ..Config::default()
    };
    let mut s = start(config, Limits::default()).await;
    let mut c = Client::connect(s.addr, "/flood", "").await;
    // 5 MB pushed at a client that does not read: all taken, the queue bounded.
    let (err, max) = tokio::time::timeout(T, s.flood.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(err, None);
    assert!(max <= 64 * 1024, "the queue never passed its limit: {max}");
    // The connection is still open: what survived arrives, then the echo.
    c.send(true, false, 1, b"still here").await;
    let mut flooded = 0;
    loop {
        let (_, _, op, p) = c.frame().await.unwrap();
        if op == 1 {
            assert_eq!(p, b"still here");
            break;
        }
        flooded += 1;
    }
    assert!(
        flooded < 5000,
        "old messages were dropped ({flooded} arrived)"
    );
}

#[tokio::test]
async fn a_silent_peer_is_pinged_then_dropped() {
    let config = Config {
        ping_interval: Duration::from_millis(100),
        ping_timeout: Duration::from_millis(200),
        ..Config::default()
    };
    let s = start(config, Limits::default()).await;
    let mut c = Client::connect(s.addr, "/echo", "").await;
    let (_, _, op, _) = c.frame().await.unwrap();
    assert_eq!(op, 9, "a ping after silence");
    // The pong keeps the connection alive through another ping.
    c.send(true, false, 0xA, b"").await;
    let (_, _, op, _) = c.frame().await.unwrap();
    assert_eq!(op, 9);
    // No answer: the connection is dropped.
    assert!(c.ends().await);
}

#[tokio::test]
async fn shutdown_sends_1001_and_waits_for_the_reply() {
    let s = start(Config::default(), Limits::default()).await;
    let mut c = Client::connect(s.addr, "/echo", "").await;
    c.send(true, false, 1, b"hi").await;
    assert_eq!(c.frame().await.unwrap().3, b"hi");
    s.shutdown.trigger();
    assert_eq!(c.close_code().await, Some(1001));
    // The server waits for the client's close before it exits.
    tokio::task::yield_now().await;
    assert!(
        !s.task.is_finished(),
        "the server does not exit before the close handshake ends"
    );
    c.send(true, false, 8, &[0x03, 0xE9]).await;
    assert!(c.ends().await);
    tokio::time::timeout(T, s.task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn shutdown_waits_at_most_the_close_timeout_for_a_silent_client() {
    let config = Config {
        close_timeout: Duration::from_millis(200),
        ..Config::default()
    };
    let s = start(config, Limits::default()).await;
    let mut c = Client::connect(s.addr, "/echo", "").await;
    s.shutdown.trigger();
    assert_eq!(c.close_code().await, Some(1001));
    // The client never answers: the server drops it and exits.
    assert!(c.ends().await);
    tokio::time::timeout(T, s.task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn the_python_websockets_client_talks_to_the_server() {
    let s = start(Config::default(), Limits::default()).await;
    const PY: &str = r#"
import asyncio, sys
from websockets.asyncio.client import connect
async def main():
    async with connect(f"ws://127.0.0.1:{sys.argv[1]}/echo", compression="deflate", max_size=2**24) as ws:
        ext = [e.name for e in ws.protocol.extensions]
        assert ext == ["permessage-deflate"], ext
        for msg in ["hello", "κόσμε" * 1000, b"\x00\x01" * 70000, ""]:
            await ws.send(msg)
            assert await ws.recv() == msg
    print("ok")
asyncio.run(main())
"#;
    let port = s.addr.port().to_string();
    let out = tokio::task::spawn_blocking(move || {
        celer_test_support::run_tool(Command::new("python3").args(["-c", PY, &port]))
    })
    .await
    .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "ok",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn bad_handshakes_get_their_status() {
    let s = start(Config::default(), Limits::default()).await;
    let mut io = TcpStream::connect(s.addr).await.unwrap();
    io.write_all(b"GET /echo HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 8\r\n\r\n").await.unwrap();
    let mut buf = vec![0; 1024];
    let n = tokio::time::timeout(T, io.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert!(
        buf[..n].starts_with(b"HTTP/1.1 426"),
        "{}",
        String::from_utf8_lossy(&buf[..n])
    );
}
