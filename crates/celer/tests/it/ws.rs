//! WebSocket routes over loopback: the validate step, the 101's headers,
//! the registry (send, broadcast, close, counts from other threads), the
//! per-route connection limit and compression switch.

use std::net::SocketAddr;
use std::time::Duration;

use celer::serve::Shutdown;
use celer::ws::{
    Accept, CloseCode, Message, Registry, WebSocket, WebSocketRoute, offered_protocols,
};
use celer::{App, Request};
use http::{HeaderName, HeaderValue, StatusCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const T: Duration = Duration::from_secs(20);

struct Client {
    io: TcpStream,
    buf: Vec<u8>,
    head: String,
}

impl Client {
    async fn connect(addr: SocketAddr, path: &str, extra: &str) -> Client {
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
            assert!(c.fill().await > 0, "no response head");
        };
        c.head = String::from_utf8(c.buf.drain(..end).collect()).unwrap();
        c
    }

    fn status(&self) -> u16 {
        self.head[9..12].parse().unwrap()
    }

    async fn fill(&mut self) -> usize {
        let mut chunk = [0u8; 16384];
        let n = tokio::time::timeout(T, self.io.read(&mut chunk))
            .await
            .expect("read timed out")
            .unwrap_or(0);
        self.buf.extend_from_slice(&chunk[..n]);
        n
    }

    async fn send_text(&mut self, text: &str) {
        let mask = [1, 2, 3, 4];
        let mut out = vec![0x81, 0x80 | text.len() as u8];
        out.extend_from_slice(&mask);
        out.extend(text.bytes().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        self.io.write_all(&out).await.unwrap();
    }

    async fn frame(&mut self) -> Option<(u8, u8, Vec<u8>)> {
        loop {
            if self.buf.len() >= 2 {
                let len7 = (self.buf[1] & 0x7F) as usize;
                let (hl, len) = match len7 {
                    126 if self.buf.len() >= 4 => {
                        (4, u16::from_be_bytes([self.buf[2], self.buf[3]]) as usize)
                    }
                    126 | 127 => (usize::MAX, 0),
                    n => (2, n),
                };
                if hl != usize::MAX && self.buf.len() >= hl + len {
                    let b0 = self.buf[0];
                    let p = self.buf[hl..hl + len].to_vec();
                    self.buf.drain(..hl + len);
                    return Some((b0 & 0xF0, b0 & 0x0F, p));
                }
            }
            if self.fill().await == 0 {
                return None;
            }
        }
    }

    async fn text(&mut self) -> String {
        let (_, op, p) = self.frame().await.unwrap();
        assert_eq!(op, 1);
        String::from_utf8(p).unwrap()
    }
}

async fn serve(app: App) -> (SocketAddr, Shutdown) {
    let bound = celer::serve::bind("tcp://127.0.0.1:0").unwrap();
    let addr = bound.tcp_addr().unwrap();
    let shutdown = Shutdown::new();
    tokio::spawn(app.serve(bound, shutdown.clone()));
    (addr, shutdown)
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

async fn drain(mut ws: WebSocket) {
    while ws.recv().await.is_some() {}
}

fn rooms_app(registry: &Registry) -> App {
    let mut app = App::new();
    app.websocket(
        "/rooms/<room>",
        WebSocketRoute::new(|mut ws: WebSocket| async move {
            let room = ws.groups()[0].clone();
            while let Some(msg) = ws.recv().await {
                ws.registry().broadcast(&room, msg);
            }
        })
        .registry(registry.clone())
        .validate(|req: Request| async move {
            let Some(user) = req.cookie("user").map(str::to_owned) else {
                return Err((StatusCode::FORBIDDEN, "log in first"));
            };
            let room = req.param_str("room").unwrap_or_default().into_owned();
            let mut accept = Accept::new()
                .id(user)
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
    app
}

#[tokio::test]
async fn validate_refuses_with_any_status_and_shapes_the_101() {
    let registry = Registry::new();
    let (addr, _s) = serve(rooms_app(&registry)).await;
    let c = Client::connect(addr, "/rooms/a", "").await;
    assert_eq!(c.status(), 403);
    let c = Client::connect(
        addr,
        "/rooms/a",
        "Cookie: user=ada\r\nSec-WebSocket-Protocol: chat.v1, chat.v2\r\n",
    )
    .await;
    assert_eq!(c.status(), 101, "{}", c.head);
    assert!(
        c.head.contains("sec-websocket-protocol: chat.v2"),
        "{}",
        c.head
    );
    assert!(c.head.contains("x-room-size: small"), "{}", c.head);
    assert!(c.head.contains("set-cookie: seen=1; Path=/"), "{}", c.head);
    // A plain GET to a WebSocket route: 426 with the version to use.
    let mut io = TcpStream::connect(addr).await.unwrap();
    io.write_all(b"GET /rooms/a HTTP/1.1\r\nHost: x\r\nCookie: user=x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = vec![0; 1024];
    let n = tokio::time::timeout(T, io.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    let head = String::from_utf8_lossy(&buf[..n]).to_lowercase();
    assert!(
        head.starts_with("http/1.1 426") && head.contains("sec-websocket-version: 13"),
        "{head}"
    );
}

#[tokio::test]
async fn the_registry_sends_broadcasts_and_closes_from_any_thread() {
    let registry = Registry::new();
    let (addr, _s) = serve(rooms_app(&registry)).await;
    let mut ada = Client::connect(addr, "/rooms/a", "Cookie: user=ada\r\n").await;
    let mut bob = Client::connect(addr, "/rooms/a", "Cookie: user=bob\r\n").await;
    let mut cy = Client::connect(addr, "/rooms/b", "Cookie: user=cy\r\n").await;
    eventually(|| registry.count() == 3).await;
    assert_eq!(registry.count_in("a"), 2);
    let mut ids = registry.ids_in("a");
    ids.sort();
    assert_eq!(ids, ["ada", "bob"]);
    // A message in room a reaches both members and not room b.
    ada.send_text("hi room").await;
    assert_eq!(ada.text().await, "hi room");
    assert_eq!(bob.text().await, "hi room");
    // From a plain thread, as a REST handler or a job would.
    let r = registry.clone();
    std::thread::spawn(move || {
        r.send("cy", Message::text("direct")).unwrap();
        assert_eq!(r.broadcast("a", Message::text("to a")), 2);
        assert!(r.send("nobody", Message::text("x")).is_err());
    })
    .join()
    .unwrap();
    assert_eq!(cy.text().await, "direct");
    assert_eq!(ada.text().await, "to a");
    assert_eq!(bob.text().await, "to a");
    assert!(registry.close("bob", CloseCode(4000), "bye"));
    let (_, op, p) = bob.frame().await.unwrap();
    assert_eq!((op, &p[..]), (8, &[0x0F, 0xA0, b'b', b'y', b'e'][..]));
    drop(bob);
    eventually(|| registry.count_in("a") == 1).await;
    // The same id again replaces the old connection, closed with 1008.
    let _ada2 = Client::connect(addr, "/rooms/b", "Cookie: user=ada\r\n").await;
    let (_, op, p) = ada.frame().await.unwrap();
    assert_eq!((op, u16::from_be_bytes([p[0], p[1]])), (8, 1008));
    eventually(|| registry.count_in("a") == 0 && registry.count_in("b") == 2).await;
}

#[tokio::test]
async fn connections_per_route_are_limited() {
    let mut app = App::new();
    app.websocket("/one", WebSocketRoute::new(drain).max_connections(1));
    let (addr, _s) = serve(app).await;
    let first = Client::connect(addr, "/one", "").await;
    assert_eq!(first.status(), 101);
    let second = Client::connect(addr, "/one", "").await;
    assert_eq!(second.status(), 503, "at the limit");
    drop(first);
    tokio::time::timeout(T, async {
        loop {
            if Client::connect(addr, "/one", "").await.status() == 101 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("a slot frees when a connection ends");
}

#[tokio::test]
async fn compression_is_on_by_default_and_off_per_route() {
    let registry = Registry::new();
    let mut app = App::new();
    app.websocket(
        "/z",
        WebSocketRoute::new(drain)
            .registry(registry.clone())
            .validate(|_req: Request| async { Ok::<_, StatusCode>(Accept::new().group("all")) }),
    );
    app.websocket("/plain", WebSocketRoute::new(drain).compression(false));
    let (addr, _s) = serve(app).await;
    let offer = "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n";
    let plain = Client::connect(addr, "/plain", offer).await;
    assert!(
        !plain.head.contains("sec-websocket-extensions"),
        "{}",
        plain.head
    );
    let mut a = Client::connect(addr, "/z", offer).await;
    let mut b = Client::connect(addr, "/z", offer).await;
    assert!(
        a.head
            .contains("sec-websocket-extensions: permessage-deflate"),
        "{}",
        a.head
    );
    eventually(|| registry.count_in("all") == 2).await;
    let json = "{\"event\":\"tick\",\"value\":12345}".repeat(100);
    assert_eq!(registry.broadcast("all", Message::text(json.clone())), 2);
    // Both get the same compressed frame (framed and compressed once).
    let fa = a.frame().await.unwrap();
    let fb = b.frame().await.unwrap();
    assert_eq!(fa.0 & 0x40, 0x40, "RSV1: compressed");
    assert!(fa.2.len() < json.len() / 4);
    assert_eq!(fa, fb);
}
