//! WebSocket over HTTP/2 (RFC 8441) over loopback with the `h2` client:
//! the setting advertised only with a WebSocket route, extended CONNECT
//! through the validate step, echo with permessage-deflate, streams
//! multiplexed beside it, a reset removing the registry entry, the
//! per-route limit, a client that never opens its window, and 1001 at
//! shutdown.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use celer::serve::Shutdown;
use celer::ws::{
    Accept, CloseCode, Config, Message, Registry, SendError, SlowConsumer, WebSocket,
    WebSocketRoute, offered_protocols,
};
use celer::{App, Request};
use h2::client::SendRequest;
use h2::{RecvStream, SendStream};
use http::{HeaderName, HeaderValue, Method, StatusCode};
use tokio::net::TcpStream;

const T: Duration = Duration::from_secs(20);

thread_local! {
    /// The client connection tasks this test's thread started, newest last
    /// (aborting one drops its TCP connection).
    static CONNECTIONS: std::cell::RefCell<Vec<tokio::task::JoinHandle<()>>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

async fn serve(app: App) -> (SocketAddr, Shutdown, tokio::task::JoinHandle<()>) {
    let bound = celer::serve::bind("tcp://127.0.0.1:0").unwrap();
    let addr = bound.tcp_addr().unwrap();
    let shutdown = Shutdown::new();
    let task = tokio::spawn({
        let shutdown = shutdown.clone();
        async move { app.serve(bound, shutdown).await.unwrap() }
    });
    (addr, shutdown, task)
}

/// An HTTP/2 connection (prior knowledge) whose SETTINGS have arrived.
async fn connect(addr: SocketAddr, window: u32) -> SendRequest<Bytes> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (client, conn) = h2::client::Builder::new()
        .initial_window_size(window)
        .handshake::<_, Bytes>(tcp)
        .await
        .unwrap();
    let task = tokio::spawn(async move {
        let _ = conn.await;
    });
    CONNECTIONS.with(|c| c.borrow_mut().push(task));
    let mut client = client.ready().await.unwrap();
    // An ordinary request: its answer comes after the server's SETTINGS.
    let (status, body) = get(&mut client, addr, "/hello").await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "hi"));
    client
}

async fn get(
    client: &mut SendRequest<Bytes>,
    addr: SocketAddr,
    path: &str,
) -> (StatusCode, String) {
    let req = http::Request::get(format!("http://{addr}{path}"))
        .body(())
        .unwrap();
    let (res, _) = client.send_request(req, true).unwrap();
    let res = tokio::time::timeout(T, res).await.unwrap().unwrap();
    let status = res.status();
    let mut body = res.into_body();
    let mut text = Vec::new();
    while let Some(chunk) = tokio::time::timeout(T, body.data()).await.unwrap() {
        let chunk = chunk.unwrap();
        let _ = body.flow_control().release_capacity(chunk.len());
        text.extend_from_slice(&chunk);
    }
    (status, String::from_utf8(text).unwrap())
}

/// A WebSocket on one HTTP/2 stream, client side: masks what it sends,
/// reads unmasked server frames.
struct Ws {
    send: SendStream<Bytes>,
    recv: RecvStream,
    buf: BytesMut,
}

/// Opens an extended CONNECT to `path`; the response and, on a 200, the
/// socket.
async fn open(
    client: &mut SendRequest<Bytes>,
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> (http::Response<()>, Option<Ws>, String) {
    let mut req = http::Request::builder()
        .method(Method::CONNECT)
        .uri(format!("http://{addr}{path}"))
        .extension(h2::ext::Protocol::from_static("websocket"));
    let mut has_version = false;
    for (name, value) in headers {
        has_version |= name.eq_ignore_ascii_case("sec-websocket-version");
        req = req.header(*name, *value);
    }
    if !has_version {
        req = req.header("sec-websocket-version", "13");
    }
    let client = &mut *client;
    let mut ready = client.clone().ready().await.unwrap();
    let (res, send) = ready.send_request(req.body(()).unwrap(), false).unwrap();
    let res = tokio::time::timeout(T, res).await.unwrap().unwrap();
    let (parts, mut recv) = res.into_parts();
    let head = http::Response::from_parts(parts, ());
    if head.status() == StatusCode::OK {
        return (
            head,
            Some(Ws {
                send,
                recv,
                buf: BytesMut::new(),
            }),
            String::new(),
        );
    }
    let mut text = Vec::new();
    while let Some(Ok(chunk)) = tokio::time::timeout(T, recv.data()).await.unwrap() {
        text.extend_from_slice(&chunk);
    }
    (head, None, String::from_utf8(text).unwrap())
}

impl Ws {
    fn send_frame(&mut self, opcode: u8, payload: &[u8]) {
        let mask = [7u8, 1, 8, 9];
        let mut out = vec![0x80 | opcode];
        match payload.len() {
            n if n < 126 => out.push(0x80 | n as u8),
            n if n < 65536 => {
                out.push(0x80 | 126);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                out.push(0x80 | 127);
                out.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        out.extend_from_slice(&mask);
        out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        self.send.send_data(Bytes::from(out), false).unwrap();
    }

    /// The next frame: (RSV1 set, opcode, payload), or `None` at the end
    /// of the stream.
    async fn frame(&mut self) -> Option<(bool, u8, Vec<u8>)> {
        loop {
            if self.buf.len() >= 2 {
                let (hl, len) = match self.buf[1] & 0x7F {
                    126 if self.buf.len() >= 4 => {
                        (4, u16::from_be_bytes([self.buf[2], self.buf[3]]) as usize)
                    }
                    127 if self.buf.len() >= 10 => (
                        10,
                        u64::from_be_bytes(self.buf[2..10].try_into().unwrap()) as usize,
                    ),
                    126 | 127 => (usize::MAX, 0),
                    n => (2, n as usize),
                };
                if hl != usize::MAX && self.buf.len() >= hl + len {
                    assert_eq!(self.buf[1] & 0x80, 0, "server frames are not masked");
                    let b0 = self.buf[0];
                    self.buf.advance(hl);
                    let payload = self.buf.split_to(len).to_vec();
                    return Some((b0 & 0x40 != 0, b0 & 0x0F, payload));
                }
            }
            match tokio::time::timeout(T, self.recv.data()).await.unwrap() {
                Some(Ok(data)) => {
                    let _ = self.recv.flow_control().release_capacity(data.len());
                    self.buf.extend_from_slice(&data);
                }
                Some(Err(_)) | None => return None,
            }
        }
    }

    /// The next data message, inflated when compressed.
    async fn message(&mut self) -> (u8, Vec<u8>, bool) {
        let (rsv1, opcode, payload) = self.frame().await.expect("a message");
        let payload = if rsv1 { inflate(&payload) } else { payload };
        (opcode, payload, rsv1)
    }
}

/// permessage-deflate's inflation (RFC 7692 §7.2.2).
fn inflate(data: &[u8]) -> Vec<u8> {
    let mut input = data.to_vec();
    input.extend_from_slice(&[0, 0, 0xFF, 0xFF]);
    let mut z = flate2::Decompress::new(false);
    let mut out = Vec::with_capacity(64 * 1024);
    z.decompress_vec(&input, &mut out, flate2::FlushDecompress::Sync)
        .unwrap();
    out
}

async fn echo(mut ws: WebSocket) {
    while let Some(msg) = ws.recv().await {
        if ws.send(msg).await.is_err() {
            break;
        }
    }
}

async fn drain(mut ws: WebSocket) {
    while ws.recv().await.is_some() {}
}

/// Waits (bounded) until `cond` holds.
async fn eventually(mut cond: impl FnMut() -> bool) {
    tokio::time::timeout(T, async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("condition never held");
}

fn app(registry: &Registry) -> App {
    let mut app = App::new();
    app.get("/hello", |_req: Request| async { "hi" });
    app.websocket("/echo", WebSocketRoute::new(echo));
    app.websocket(
        "/rooms/<room>",
        WebSocketRoute::new(drain)
            .registry(registry.clone())
            .validate(|req: Request| async move {
                let Some(user) = req.headers().get("x-user").cloned() else {
                    return Err((StatusCode::FORBIDDEN, "log in first"));
                };
                let room = req.param_str("room").unwrap_or_default().into_owned();
                let mut accept = Accept::new()
                    .id(user.to_str().unwrap())
                    .group(room)
                    .header(
                        HeaderName::from_static("x-room-size"),
                        HeaderValue::from_static("small"),
                    )
                    .cookie("seen=1; Path=/");
                if offered_protocols(&req).iter().any(|p| p == "chat.v2") {
                    accept = accept.protocol("chat.v2");
                }
                Ok(accept)
            }),
    );
    app.websocket("/limited", WebSocketRoute::new(drain).max_connections(1));
    app.websocket(
        "/feed",
        WebSocketRoute::new(drain)
            .registry(registry.clone())
            .config(Config {
                max_queued_bytes: 64 * 1024,
                slow_consumer: SlowConsumer::Close(CloseCode::POLICY),
                close_timeout: Duration::from_millis(300),
                ..Config::default()
            })
            .validate(|_req: Request| async { Ok::<_, StatusCode>(Accept::new().id("reader")) }),
    );
    app
}

#[tokio::test]
async fn the_setting_is_sent_only_when_the_app_has_a_websocket_route() {
    let mut plain = App::new();
    plain.get("/hello", |_req: Request| async { "hi" });
    let (addr, _s, _t) = serve(plain).await;
    let client = connect(addr, 65_535).await;
    assert!(!client.is_extended_connect_protocol_enabled());

    let (addr, _s, _t) = serve(app(&Registry::new())).await;
    let client = connect(addr, 65_535).await;
    assert!(client.is_extended_connect_protocol_enabled());
}

#[tokio::test]
async fn echo_with_deflate_beside_ordinary_requests_and_a_second_socket() {
    let registry = Registry::new();
    let (addr, _s, _t) = serve(app(&registry)).await;
    let mut client = connect(addr, 65_535).await;
    let (head, ws, _) = open(
        &mut client,
        addr,
        "/echo",
        &[(
            "sec-websocket-extensions",
            "permessage-deflate; client_max_window_bits",
        )],
    )
    .await;
    assert_eq!(head.status(), StatusCode::OK);
    // RFC 8441 §5: no key, no accept, no upgrade fields.
    assert!(head.headers().get("sec-websocket-accept").is_none());
    assert!(head.headers().get("content-length").is_none());
    let ext = head.headers()["sec-websocket-extensions"].to_str().unwrap();
    assert!(ext.starts_with("permessage-deflate"), "{ext}");
    let mut ws = ws.unwrap();

    ws.send_frame(1, b"hello over h2");
    assert_eq!(ws.message().await, (1, b"hello over h2".to_vec(), false));
    let binary: Vec<u8> = (0..=255u8).collect();
    ws.send_frame(2, &binary);
    let (opcode, payload, _) = ws.message().await;
    assert_eq!((opcode, payload), (2, binary));
    // A JSON document large enough to be compressed comes back deflated.
    let doc = (0..40)
        .map(|i| format!(r#"{{"id":{i},"name":"user {i}","active":{}}}"#, i % 2 == 0))
        .collect::<Vec<_>>()
        .join(",");
    ws.send_frame(1, doc.as_bytes());
    let (opcode, payload, compressed) = ws.message().await;
    assert_eq!((opcode, payload.as_slice()), (1, doc.as_bytes()));
    assert!(compressed, "a large message is sent compressed");

    // Ordinary requests and a second socket on the same connection.
    let (room_head, room_ws, _) = open(
        &mut client,
        addr,
        "/rooms/lobby",
        &[
            ("x-user", "ada"),
            ("sec-websocket-protocol", "chat.v1, chat.v2"),
        ],
    )
    .await;
    assert_eq!(room_head.status(), StatusCode::OK);
    assert_eq!(room_head.headers()["sec-websocket-protocol"], "chat.v2");
    assert_eq!(room_head.headers()["x-room-size"], "small");
    assert_eq!(room_head.headers()["set-cookie"], "seen=1; Path=/");
    let mut room_ws = room_ws.unwrap();
    eventually(|| registry.count_in("lobby") == 1).await;
    assert_eq!(get(&mut client, addr, "/hello").await.1, "hi");
    registry.broadcast("lobby", Message::text("to the lobby"));
    assert_eq!(
        room_ws.message().await,
        (1, b"to the lobby".to_vec(), false)
    );
    ws.send_frame(1, b"still here");
    assert_eq!(ws.message().await, (1, b"still here".to_vec(), false));

    // The client's close: echoed, then END_STREAM.
    ws.send_frame(8, &1000u16.to_be_bytes());
    let (_, opcode, payload) = ws.frame().await.unwrap();
    assert_eq!((opcode, payload), (8, 1000u16.to_be_bytes().to_vec()));
    ws.send.send_data(Bytes::new(), true).unwrap();
    assert_eq!(ws.frame().await, None);
    assert_eq!(get(&mut client, addr, "/hello").await.1, "hi");
}

#[tokio::test]
async fn validate_refusals_and_wrong_versions_are_answered() {
    let registry = Registry::new();
    let (addr, _s, _t) = serve(app(&registry)).await;
    let mut client = connect(addr, 65_535).await;
    let (head, ws, text) = open(&mut client, addr, "/rooms/lobby", &[]).await;
    assert_eq!(head.status(), StatusCode::FORBIDDEN);
    assert!(ws.is_none());
    assert_eq!(text, "log in first");

    let (head, _, text) = open(
        &mut client,
        addr,
        "/echo",
        &[("sec-websocket-version", "8")],
    )
    .await;
    assert_eq!(head.status(), StatusCode::BAD_REQUEST);
    assert_eq!(head.headers()["sec-websocket-version"], "13");
    assert!(text.contains("Sec-WebSocket-Version 13"), "{text}");

    // A path with no WebSocket route.
    let (head, _, _) = open(&mut client, addr, "/hello", &[]).await;
    assert_eq!(head.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(registry.count(), 0);
    // The connection still serves.
    assert_eq!(get(&mut client, addr, "/hello").await.1, "hi");
}

#[tokio::test]
async fn a_reset_removes_the_connection_and_the_route_limit_holds() {
    let registry = Registry::new();
    let (addr, _s, _t) = serve(app(&registry)).await;
    let mut client = connect(addr, 65_535).await;
    let (_, ws, _) = open(&mut client, addr, "/rooms/a", &[("x-user", "bob")]).await;
    let mut ws = ws.unwrap();
    eventually(|| registry.ids() == ["bob"]).await;
    ws.send.send_reset(h2::Reason::CANCEL);
    eventually(|| registry.count() == 0).await;
    assert_eq!(get(&mut client, addr, "/hello").await.1, "hi");

    let (first, kept, _) = open(&mut client, addr, "/limited", &[]).await;
    assert_eq!(first.status(), StatusCode::OK);
    let (second, _, text) = open(&mut client, addr, "/limited", &[]).await;
    assert_eq!(second.status(), StatusCode::SERVICE_UNAVAILABLE, "{text}");
    // The slot comes back when the socket goes.
    kept.unwrap().send.send_reset(h2::Reason::CANCEL);
    let mut reopened = StatusCode::SERVICE_UNAVAILABLE;
    tokio::time::timeout(T, async {
        while reopened != StatusCode::OK {
            tokio::time::sleep(Duration::from_millis(10)).await;
            reopened = open(&mut client, addr, "/limited", &[]).await.0.status();
        }
    })
    .await
    .expect("the slot came back");
}

#[tokio::test]
async fn a_connection_that_goes_away_takes_its_sockets_with_it() {
    let registry = Registry::new();
    let (addr, _s, _t) = serve(app(&registry)).await;
    let mut client = connect(addr, 65_535).await;
    let (_, a, _) = open(&mut client, addr, "/rooms/r", &[("x-user", "a")]).await;
    let (_, b, _) = open(&mut client, addr, "/rooms/r", &[("x-user", "b")]).await;
    eventually(|| registry.count_in("r") == 2).await;
    // The TCP connection closes under both streams, with no close frame.
    // The streams' handles stay alive: no RST_STREAM could be sent.
    CONNECTIONS.with(|c| c.borrow_mut().pop().unwrap().abort());
    eventually(|| registry.count() == 0).await;
    drop((a, b, client));
}

#[tokio::test]
async fn a_client_that_never_opens_its_window_is_a_slow_consumer() {
    let registry = Registry::new();
    let (addr, _s, _t) = serve(app(&registry)).await;
    // 16 KiB of stream window, never given back.
    let mut client = connect(addr, 16 * 1024).await;
    let (_, ws, _) = open(&mut client, addr, "/feed", &[]).await;
    let _ws = ws.unwrap();
    eventually(|| registry.count() == 1).await;
    let chunk = "x".repeat(1024);
    let mut full = None;
    for i in 0..10_000 {
        match registry.send("reader", Message::text(chunk.clone())) {
            Ok(()) => tokio::task::yield_now().await,
            Err(err) => {
                full = Some((i, err));
                break;
            }
        }
    }
    let (sent, err) = full.expect("the queue filled");
    assert_eq!(err, SendError::Full);
    // At most the window, the engine's send buffer and the 64 KiB queue went out.
    assert!(
        sent < 1024,
        "{sent} KiB taken by a client that reads nothing"
    );
    // Closed by the policy (the close frame cannot pass the window: the
    // close timeout drops it), and removed.
    eventually(|| registry.count() == 0).await;
}

#[tokio::test]
async fn shutdown_closes_each_socket_with_1001_then_ends_its_stream() {
    let registry = Registry::new();
    let (addr, shutdown, task) = serve(app(&registry)).await;
    let mut client = connect(addr, 65_535).await;
    let (_, ws, _) = open(&mut client, addr, "/rooms/x", &[("x-user", "cy")]).await;
    let mut ws = ws.unwrap();
    let (_, echo, _) = open(&mut client, addr, "/echo", &[]).await;
    let mut echo = echo.unwrap();
    eventually(|| registry.count() == 1).await;
    shutdown.trigger();
    for ws in [&mut ws, &mut echo] {
        let (_, opcode, payload) = ws.frame().await.unwrap();
        assert_eq!(opcode, 8);
        assert_eq!(payload[..2], 1001u16.to_be_bytes());
        // GOAWAY came first: the connection takes no new stream.
        let req = http::Request::get(format!("http://{addr}/hello"))
            .body(())
            .unwrap();
        match client.send_request(req, true) {
            Err(_) => {}
            Ok((res, _)) => assert!(tokio::time::timeout(T, res).await.unwrap().is_err()),
        }
        ws.send_frame(8, &1001u16.to_be_bytes());
        ws.send.send_data(Bytes::new(), true).unwrap();
        // END_STREAM after the close handshake.
        assert_eq!(ws.frame().await, None);
    }
    tokio::time::timeout(T, task).await.unwrap().unwrap();
    assert_eq!(registry.count(), 0);
}

/// One header in HPACK's literal form without indexing (RFC 7541 §6.2.2),
/// no Huffman coding; names and values under 127 bytes.
fn literal(block: &mut Vec<u8>, name: &str, value: &str) {
    block.push(0);
    block.push(name.len() as u8);
    block.extend_from_slice(name.as_bytes());
    block.push(value.len() as u8);
    block.extend_from_slice(value.as_bytes());
}

#[tokio::test]
async fn an_extended_connect_the_server_did_not_offer_is_a_malformed_request() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let mut plain = App::new();
    plain.get("/hello", |_req: Request| async { "hi" });
    let (addr, _s, _t) = serve(plain).await;
    let mut io = TcpStream::connect(addr).await.unwrap();
    let mut block = Vec::new();
    for (name, value) in [
        (":method", "CONNECT"),
        (":protocol", "websocket"),
        (":scheme", "http"),
        (":path", "/hello"),
        (":authority", "localhost"),
        ("sec-websocket-version", "13"),
    ] {
        literal(&mut block, name, value);
    }
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]); // SETTINGS, empty
    let len = (block.len() as u32).to_be_bytes();
    // HEADERS, END_HEADERS, stream 1.
    out.extend_from_slice(&[len[1], len[2], len[3], 1, 0x4, 0, 0, 0, 1]);
    out.extend_from_slice(&block);
    io.write_all(&out).await.unwrap();
    // RFC 8441 §3 and RFC 9113 §8.1.1: `:protocol` without the setting
    // makes the request malformed, a stream error of type PROTOCOL_ERROR.
    let reset = tokio::time::timeout(T, async {
        loop {
            let mut head = [0u8; 9];
            io.read_exact(&mut head).await.unwrap();
            let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
            let mut payload = vec![0u8; len];
            io.read_exact(&mut payload).await.unwrap();
            let stream = u32::from_be_bytes(head[5..9].try_into().unwrap()) & 0x7FFF_FFFF;
            match head[3] {
                // RST_STREAM
                3 if stream == 1 => return u32::from_be_bytes(payload[..4].try_into().unwrap()),
                // HEADERS: the request was answered instead of refused.
                1 if stream == 1 => panic!("answered a :protocol the server did not offer"),
                _ => {}
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(reset, 1, "PROTOCOL_ERROR");
}
