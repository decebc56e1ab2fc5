//! HTTP/2 over cleartext by prior knowledge: the `h2` crate's client and
//! curl as real clients, and hand-written frames for what a well-behaved
//! client never sends (floods, resets, more streams than allowed).

use std::future::poll_fn;
use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use celer_server::Limits;
use celer_test_support::{Raw, bounded, run_tool};
use h2::client::SendRequest;
use h2::{Reason, RecvStream, SendStream};
use http::{HeaderMap, HeaderValue, Request, StatusCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

use crate::support::{
    gate, pulled, short_timeouts, start, start_default, start_http1_only, test_file_bytes,
};

// ---- the h2 client ----

type ConnTask = JoinHandle<Result<(), h2::Error>>;

/// An HTTP/2 client connection by prior knowledge, driven in its own task.
async fn connect(addr: SocketAddr) -> (SendRequest<Bytes>, ConnTask) {
    connect_with(addr, h2::client::Builder::new()).await
}

async fn connect_with(
    addr: SocketAddr,
    builder: h2::client::Builder,
) -> (SendRequest<Bytes>, ConnTask) {
    let tcp = bounded(TcpStream::connect(addr)).await.expect("connect");
    tcp.set_nodelay(true).unwrap();
    let (client, conn) = bounded(builder.handshake(tcp)).await.expect("handshake");
    (client, tokio::spawn(conn))
}

fn request(method: &str, path: &str) -> http::request::Builder {
    Request::builder()
        .method(method)
        .uri(format!("http://celer.test{path}"))
}

fn get(path: &str) -> Request<()> {
    request("GET", path).body(()).unwrap()
}

/// A whole response.
#[derive(Debug)]
struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
    trailers: Option<HeaderMap>,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Sends a request with no body and reads the whole response.
async fn fetch(client: &SendRequest<Bytes>, req: Request<()>) -> Reply {
    let mut client = bounded(client.clone().ready()).await.expect("ready");
    let (response, _send) = client.send_request(req, true).expect("send_request");
    reply(response).await
}

/// Sends a request whose body is `data` (then `trailers`), reading the
/// response at the same time (an echo answers while the body is still
/// being sent).
async fn fetch_with_body(
    client: &SendRequest<Bytes>,
    req: Request<()>,
    data: Bytes,
    trailers: Option<HeaderMap>,
) -> Reply {
    let mut client = bounded(client.clone().ready()).await.expect("ready");
    let (response, mut send) = client.send_request(req, false).expect("send_request");
    let (reply, ()) = tokio::join!(reply(response), send_body(&mut send, data, trailers));
    reply
}

async fn reply(response: h2::client::ResponseFuture) -> Reply {
    let response = bounded(response).await.expect("response");
    let (parts, mut body) = response.into_parts();
    let data = read_body(&mut body).await.expect("response body");
    let trailers = bounded(body.trailers()).await.expect("trailers");
    Reply {
        status: parts.status,
        headers: parts.headers,
        body: data,
        trailers,
    }
}

/// Reads a body to its end, giving the window back as it goes.
async fn read_body(body: &mut RecvStream) -> Result<Bytes, h2::Error> {
    let mut out = BytesMut::new();
    while let Some(chunk) = bounded(body.data()).await {
        let chunk = chunk?;
        let _ = body.flow_control().release_capacity(chunk.len());
        out.extend_from_slice(&chunk);
    }
    Ok(out.freeze())
}

/// Sends `data` within the server's flow-control windows, then `trailers`
/// (or ends the stream with the last piece).
async fn send_body(send: &mut SendStream<Bytes>, mut data: Bytes, trailers: Option<HeaderMap>) {
    while !data.is_empty() {
        send.reserve_capacity(data.len());
        let n = bounded(poll_fn(|cx| send.poll_capacity(cx)))
            .await
            .expect("stream open")
            .expect("capacity");
        let piece = data.split_to(n.min(data.len()));
        let end = data.is_empty() && trailers.is_none();
        send.send_data(piece, end).expect("send_data");
    }
    if let Some(t) = trailers {
        send.send_trailers(t).expect("send_trailers");
    }
}

fn pattern(len: usize) -> Bytes {
    (0..len)
        .map(|i| (i % 251) as u8)
        .collect::<Vec<u8>>()
        .into()
}

// ---- raw frames ----

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const WINDOW_UPDATE: u8 = 0x8;
const CONTINUATION: u8 = 0x9;

const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;

const NO_ERROR: u32 = 0x0;
const REFUSED_STREAM: u32 = 0x7;
const ENHANCE_YOUR_CALM: u32 = 0xb;

/// One frame as read from the wire.
#[derive(Debug, Clone)]
struct Frame {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
}

impl Frame {
    fn word(&self, at: usize) -> u32 {
        u32::from_be_bytes(self.payload[at..at + 4].try_into().unwrap())
    }

    /// A `RST_STREAM`'s error code.
    fn rst_code(&self) -> u32 {
        assert_eq!(self.kind, RST_STREAM, "{self:?}");
        self.word(0)
    }

    /// A `GOAWAY`'s last stream id and error code.
    fn goaway(&self) -> (u32, u32) {
        assert_eq!(self.kind, GOAWAY, "{self:?}");
        (self.word(0) & 0x7fff_ffff, self.word(4))
    }
}

/// Takes the first whole frame off `buf`.
fn take_frame(buf: &mut BytesMut) -> Option<Frame> {
    if buf.len() < 9 {
        return None;
    }
    let len = u32::from_be_bytes([0, buf[0], buf[1], buf[2]]) as usize;
    if buf.len() < 9 + len {
        return None;
    }
    let head = buf.split_to(9);
    Some(Frame {
        kind: head[3],
        flags: head[4],
        stream: u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff,
        payload: buf.split_to(len).to_vec(),
    })
}

/// Every whole frame in `bytes`.
fn frames_in(bytes: &[u8]) -> Vec<Frame> {
    let mut buf = BytesMut::from(bytes);
    std::iter::from_fn(|| take_frame(&mut buf)).collect()
}

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).unwrap();
    let mut out = len.to_be_bytes()[1..].to_vec();
    out.extend_from_slice(&[kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// An HPACK integer with an `n`-bit prefix (RFC 7541 §5.1).
fn hpack_int(out: &mut Vec<u8>, first: u8, n: u32, value: usize) {
    let max = (1usize << n) - 1;
    if value < max {
        out.push(first | value as u8);
        return;
    }
    out.push(first | max as u8);
    let mut rest = value - max;
    while rest >= 128 {
        out.push((rest % 128) as u8 | 0x80);
        rest /= 128;
    }
    out.push(rest as u8);
}

/// A literal field without indexing, its name from the static table.
fn hpack_indexed_name(out: &mut Vec<u8>, index: usize, value: &[u8]) {
    hpack_int(out, 0x00, 4, index);
    hpack_int(out, 0x00, 7, value.len());
    out.extend_from_slice(value);
}

/// A literal field without indexing, with a literal name.
fn hpack_literal(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.push(0x00);
    hpack_int(out, 0x00, 7, name.len());
    out.extend_from_slice(name);
    hpack_int(out, 0x00, 7, value.len());
    out.extend_from_slice(value);
}

/// The header block of `GET path`: `:method GET`, `:scheme http` and (for
/// `/`) `:path /` from the static table, the rest literal.
fn get_block(path: &str) -> Vec<u8> {
    let mut out = vec![0x82, 0x86];
    if path == "/" {
        out.push(0x84);
    } else {
        hpack_indexed_name(&mut out, 4, path.as_bytes());
    }
    hpack_indexed_name(&mut out, 1, b"celer.test");
    out
}

/// The status of a response header block whose `:status` is one of the
/// static table's (the engine sends those indexed, and first).
fn status_of(block: &[u8]) -> u16 {
    match block[0] {
        0x88 => 200,
        0x89 => 204,
        0x8a => 206,
        0x8b => 304,
        0x8c => 400,
        0x8d => 404,
        0x8e => 500,
        b => panic!("status not from the static table: {b:#x}"),
    }
}

/// How a header block represents each field (RFC 7541 §6), the name as
/// an index (0: a literal name).
#[derive(Debug, PartialEq)]
enum Repr {
    Indexed(usize),
    Incremental(usize),
    WithoutIndexing(usize),
    NeverIndexed(usize),
    SizeUpdate,
}

/// An HPACK integer with an `n`-bit prefix at `*at` (RFC 7541 §5.1).
fn hpack_read_int(block: &[u8], at: &mut usize, n: u32) -> usize {
    let max = (1usize << n) - 1;
    let mut value = usize::from(block[*at]) & max;
    *at += 1;
    if value == max {
        let mut shift = 0;
        loop {
            let b = block[*at];
            *at += 1;
            value += usize::from(b & 0x7f) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                break;
            }
        }
    }
    value
}

/// The representations of a header block's fields, in order (strings
/// are skipped, not decoded).
fn representations(block: &[u8]) -> Vec<Repr> {
    let mut at = 0;
    let mut out = Vec::new();
    while at < block.len() {
        let b = block[at];
        let repr = if b & 0x80 != 0 {
            Repr::Indexed(hpack_read_int(block, &mut at, 7))
        } else if b & 0x40 != 0 {
            Repr::Incremental(hpack_read_int(block, &mut at, 6))
        } else if b & 0x20 != 0 {
            hpack_read_int(block, &mut at, 5);
            Repr::SizeUpdate
        } else if b & 0x10 != 0 {
            Repr::NeverIndexed(hpack_read_int(block, &mut at, 4))
        } else {
            Repr::WithoutIndexing(hpack_read_int(block, &mut at, 4))
        };
        if let Repr::Incremental(name) | Repr::WithoutIndexing(name) | Repr::NeverIndexed(name) =
            repr
        {
            // A literal name, then the value: each a length and its bytes.
            for _ in 0..if name == 0 { 2 } else { 1 } {
                let len = hpack_read_int(block, &mut at, 7);
                at += len;
            }
        }
        out.push(repr);
    }
    assert_eq!(at, block.len(), "a field ran past the block");
    out
}

/// A client speaking frames by hand.
struct RawH2 {
    io: TcpStream,
    buf: BytesMut,
    /// Frames of streams read while looking for another's.
    held: Vec<Frame>,
    /// Connection frames read while looking for a stream's.
    control: Vec<Frame>,
}

impl RawH2 {
    /// Connects, sends the preface and empty SETTINGS, acknowledges the
    /// server's SETTINGS; returns the client and the server's settings.
    async fn handshake(addr: SocketAddr) -> (RawH2, Vec<(u16, u32)>) {
        let io = bounded(TcpStream::connect(addr)).await.expect("connect");
        io.set_nodelay(true).unwrap();
        let mut c = RawH2 {
            io,
            buf: BytesMut::new(),
            held: Vec::new(),
            control: Vec::new(),
        };
        let mut hello = PREFACE.to_vec();
        hello.extend(frame(SETTINGS, 0, 0, &[]));
        c.send(&hello).await;
        let settings = c.until(|f| f.kind == SETTINGS && f.flags & ACK == 0).await;
        c.send(&frame(SETTINGS, ACK, 0, &[])).await;
        let pairs = settings
            .payload
            .chunks(6)
            .map(|s| {
                (
                    u16::from_be_bytes([s[0], s[1]]),
                    u32::from_be_bytes([s[2], s[3], s[4], s[5]]),
                )
            })
            .collect();
        (c, pairs)
    }

    async fn send(&mut self, bytes: &[u8]) {
        bounded(self.io.write_all(bytes)).await.expect("write");
    }

    /// Opens stream `id` with `GET path`, no body.
    async fn get(&mut self, id: u32, path: &str) {
        self.send(&frame(
            HEADERS,
            END_HEADERS | END_STREAM,
            id,
            &get_block(path),
        ))
        .await;
    }

    /// The next frame; `None` once the server closed the connection.
    async fn next(&mut self) -> Option<Frame> {
        loop {
            if let Some(f) = take_frame(&mut self.buf) {
                return Some(f);
            }
            self.buf.reserve(16 * 1024);
            match bounded(self.io.read_buf(&mut self.buf)).await {
                Ok(0) => return None,
                Ok(_) => {}
                Err(err) if err.kind() == std::io::ErrorKind::ConnectionReset => return None,
                Err(err) => panic!("read: {err}"),
            }
        }
    }

    /// Skips frames up to the first that `pred` accepts.
    async fn until(&mut self, pred: impl Fn(&Frame) -> bool) -> Frame {
        loop {
            let f = self.next().await.expect("connection closed early");
            if pred(&f) {
                return f;
            }
        }
    }

    /// Every frame until the server closes the connection.
    async fn rest(&mut self) -> Vec<Frame> {
        let mut out = Vec::new();
        while let Some(f) = self.next().await {
            out.push(f);
        }
        out
    }

    /// The next frame of stream `id`; frames of other streams are kept
    /// for later, the connection's own in `control`.
    async fn on_stream(&mut self, id: u32) -> Frame {
        if let Some(at) = self.held.iter().position(|f| f.stream == id) {
            return self.held.remove(at);
        }
        loop {
            let f = self.next().await.expect("connection closed early");
            if f.stream == id {
                return f;
            }
            if f.stream == 0 {
                self.control.push(f);
            } else {
                self.held.push(f);
            }
        }
    }

    /// Reads stream `id`'s response: status and body (DATA until
    /// END_STREAM).
    async fn response(&mut self, id: u32) -> (u16, Vec<u8>) {
        let head = self.on_stream(id).await;
        assert_eq!(head.kind, HEADERS, "{head:?}");
        let status = status_of(&head.payload);
        let mut body = Vec::new();
        let mut done = head.flags & END_STREAM != 0;
        while !done {
            let f = self.on_stream(id).await;
            assert_eq!(f.kind, DATA, "{f:?}");
            body.extend_from_slice(&f.payload);
            done = f.flags & END_STREAM != 0;
        }
        (status, body)
    }
}

/// curl speaking HTTP/2 by prior knowledge; returns success and stdout.
async fn curl(args: Vec<String>) -> (bool, String) {
    let out = tokio::task::spawn_blocking(move || {
        run_tool(
            Command::new("curl")
                .args(["-sS", "--http2-prior-knowledge"])
                .args(&args),
        )
    })
    .await
    .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.success(), format!("{text}{err}"))
}

// ---- requests and responses ----

#[tokio::test]
async fn prior_knowledge_get_head_and_a_second_request() {
    let srv = start_default().await;
    let (client, _conn) = connect(srv.addr).await;

    let r = fetch(&client, get("/hello")).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "Hello, World!");
    assert_eq!(r.header("content-length"), Some("13"));
    assert_eq!(r.header("server"), Some("celer"));
    let date = r.header("date").expect("date");
    assert!(httpdate::parse_http_date(date).is_ok(), "{date}");
    assert_eq!(r.trailers, None);

    // HEAD: the same head, and the HEADERS frame ends the stream.
    let mut ready = bounded(client.clone().ready()).await.unwrap();
    let (response, _) = ready
        .send_request(request("HEAD", "/hello").body(()).unwrap(), true)
        .unwrap();
    let response = bounded(response).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-length"], "13");
    assert!(response.body().is_end_stream());

    // A second request on the same connection; `:authority` becomes `Host`.
    let r = fetch(&client, get("/describe")).await;
    assert!(r.text().starts_with("GET HTTP/2.0\n"), "{}", r.text());
    assert!(r.text().contains("host: celer.test\n"), "{}", r.text());
    let r = fetch(&client, get("/missing")).await;
    assert_eq!(
        (r.status, r.text().as_str()),
        (StatusCode::NOT_FOUND, "not found")
    );
}

/// The date changes every second, so it goes as a literal HPACK never
/// indexes: it neither adds an entry to each connection's table every
/// second nor is looked for among the stale ones (decision 169). Fields
/// that repeat are still indexed: the second answer's `server` is a
/// reference to the entry the first one added.
#[tokio::test]
async fn the_date_is_a_literal_never_indexed() {
    // Static-table indices (RFC 7541 Appendix A); 62 on is the dynamic table.
    const DATE: usize = 33;
    const SERVER: usize = 54;
    const DYNAMIC: usize = 62;
    let srv = start_default().await;
    let (mut c, _) = RawH2::handshake(srv.addr).await;
    let mut blocks = Vec::new();
    for id in [1, 3] {
        c.get(id, "/hello").await;
        let head = c.on_stream(id).await;
        assert_eq!(head.kind, HEADERS, "{head:?}");
        assert_eq!(status_of(&head.payload), 200);
        blocks.push(representations(&head.payload));
    }
    for reprs in &blocks {
        assert!(reprs.contains(&Repr::NeverIndexed(DATE)), "{reprs:?}");
        assert!(!reprs.contains(&Repr::Incremental(DATE)), "{reprs:?}");
    }
    assert!(blocks[0].contains(&Repr::Incremental(SERVER)), "{blocks:?}");
    assert!(
        blocks[1]
            .iter()
            .any(|r| matches!(r, Repr::Indexed(i) if *i >= DYNAMIC)),
        "{blocks:?}"
    );
}

#[tokio::test]
async fn curl_by_prior_knowledge() {
    let srv = start_default().await;
    let url = format!("http://{}", srv.addr);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("up.bin");
    std::fs::write(&file, vec![b'u'; 300_000]).unwrap();
    // One request per run: curl 7.88.1 fails to reuse a prior-knowledge
    // connection ("Error in the HTTP2 framing layer" before sending
    // anything; curl/curl#10634, fixed in 8.0).
    let w = "\n%{http_version} %{response_code}";
    let (ok, text) = curl(vec!["-i".into(), format!("{url}/hello")]).await;
    assert!(ok, "{text}");
    assert!(text.starts_with("HTTP/2 200 \r\n"), "{text}");
    assert!(text.contains("\r\ncontent-length: 13\r\n"), "{text}");
    assert!(text.contains("\r\nserver: celer\r\n"), "{text}");
    assert!(text.ends_with("\r\n\r\nHello, World!"), "{text}");
    let (ok, text) = curl(vec!["-w".into(), w.into(), format!("{url}/stream")]).await;
    assert!(ok, "{text}");
    assert_eq!(text, "one,two,three\n2 200");
    let upload = vec![
        "-w".into(),
        w.into(),
        "--data-binary".into(),
        format!("@{}", file.display()),
        format!("{url}/collect"),
    ];
    let (ok, text) = curl(upload).await;
    assert!(ok, "{text}");
    assert_eq!(text, "len=300000\n2 200");
}

#[tokio::test]
async fn fifty_concurrent_streams_on_one_connection() {
    let srv = start_default().await;
    let (client, _conn) = connect(srv.addr).await;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..50 {
        let client = client.clone();
        tasks.spawn(async move { (i, fetch(&client, get(&format!("/echo-path?n={i}"))).await) });
    }
    let mut seen = Vec::new();
    while let Some(done) = bounded(tasks.join_next()).await {
        let (i, r) = done.unwrap();
        assert_eq!(r.status, 200);
        // The target in origin form, as HTTP/1.1 gives it (`:scheme` and
        // `:authority` are not part of the URI the service sees).
        assert_eq!(r.text(), format!("/echo-path?n={i}"));
        seen.push(i);
    }
    seen.sort_unstable();
    assert_eq!(seen, (0..50).collect::<Vec<_>>());
}

#[tokio::test]
async fn a_large_request_body_streams_through_the_windows() {
    // 1 MiB: four times the stream window, the whole connection window.
    let srv = start_default().await;
    let (client, _conn) = connect(srv.addr).await;
    let data = pattern(1 << 20);
    let r = fetch_with_body(
        &client,
        request("POST", "/echo").body(()).unwrap(),
        data.clone(),
        None,
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), data.len());
    assert!(r.body == data, "the echo differs");

    let declared = request("POST", "/collect")
        .header("content-length", data.len())
        .body(())
        .unwrap();
    let r = fetch_with_body(&client, declared, data.clone(), None).await;
    assert_eq!(r.text(), "len=1048576");
}

#[tokio::test]
async fn trailers_both_ways() {
    let srv = start_default().await;
    let (client, _conn) = connect(srv.addr).await;
    let mut trailers = HeaderMap::new();
    trailers.insert("x-sum", HeaderValue::from_static("42"));
    let r = fetch_with_body(
        &client,
        request("POST", "/collect").body(()).unwrap(),
        pattern(100_000),
        Some(trailers),
    )
    .await;
    assert_eq!(r.text(), "len=100000 x-sum=42");

    let r = fetch(&client, get("/stream")).await;
    assert_eq!(r.text(), "one,two,three");
    // Unknown length: no content-length, and no HTTP/1.1 framing fields.
    assert_eq!(r.header("content-length"), None);
    assert_eq!(r.header("transfer-encoding"), None);
    let t = r.trailers.expect("trailers");
    assert_eq!(t["x-checksum"], "abc");
}

#[tokio::test]
async fn http1_fields_are_dropped_and_upgrades_refused() {
    let srv = start_default().await;
    let (client, conn) = connect(srv.addr).await;
    // `connection: close` means nothing in HTTP/2 (RFC 9113 §8.2.2): the
    // field is dropped and the connection goes on.
    let r = fetch(&client, get("/close")).await;
    assert_eq!((r.status, r.text().as_str()), (StatusCode::OK, "bye"));
    assert_eq!(r.header("connection"), None);
    // A 101 cannot be a final answer; the service's upgrade is refused.
    let r = fetch(&client, get("/upgrade")).await;
    assert_eq!(r.status, 500);
    assert_eq!(r.text(), "500 internal server error\n");
    assert_eq!(fetch(&client, get("/hello")).await.status, 200);
    assert!(!conn.is_finished());
}

#[tokio::test]
async fn a_body_shorter_than_its_content_length_resets_the_stream() {
    let srv = start_default().await;
    let (client, conn) = connect(srv.addr).await;
    let mut ready = bounded(client.clone().ready()).await.unwrap();
    let (response, _) = ready.send_request(get("/short"), true).unwrap();
    // 3 of the 10 declared bytes: the server says the response is broken
    // (RFC 9113 §8.1.1) instead of ending it as if it were whole. The
    // reset may overtake the client's read of the head or of the 3 bytes.
    let err = match bounded(response).await {
        Err(err) => err,
        Ok(response) => {
            assert_eq!(response.headers()["content-length"], "10");
            let mut body = response.into_body();
            loop {
                match bounded(body.data()).await {
                    Some(Ok(data)) => assert_eq!(data, "abc"),
                    Some(Err(err)) => break err,
                    None => panic!("the stream ended as if the body were whole"),
                }
            }
        }
    };
    assert!(err.is_reset() && err.is_remote(), "{err:?}");
    assert_eq!(err.reason(), Some(Reason::INTERNAL_ERROR));
    // Only the stream: the connection serves on.
    assert_eq!(fetch(&client, get("/hello")).await.status, 200);
    assert!(!conn.is_finished());
}

#[tokio::test]
async fn file_bodies_are_read_and_sent_in_frames() {
    let srv = start_default().await;
    let (client, _conn) = connect(srv.addr).await;
    let r = fetch(&client, get("/file?1000,300000")).await;
    assert_eq!(r.header("content-length"), Some("300000"));
    assert!(r.body[..] == crate::support::test_file_bytes()[1000..301_000]);
}

#[tokio::test]
async fn unread_request_bodies_give_their_window_back() {
    let srv = start_default().await;
    let (client, conn) = connect(srv.addr).await;
    // Three bodies of 2 MiB each, twice the connection window, that the
    // handler never reads: the stream is reset once answered, and what
    // the server received for it does not count against the next.
    for _ in 0..3 {
        let mut ready = bounded(client.clone().ready()).await.unwrap();
        let (response, mut send) = ready
            .send_request(request("POST", "/ignore").body(()).unwrap(), false)
            .unwrap();
        let mut left = 2usize << 20;
        while left > 0 {
            send.reserve_capacity(left);
            match bounded(poll_fn(|cx| send.poll_capacity(cx))).await {
                Some(Ok(n)) => {
                    let n = n.min(left);
                    left -= n;
                    if send.send_data(pattern(n), left == 0).is_err() {
                        break;
                    }
                }
                // Reset by the server once it answered.
                Some(Err(_)) | None => break,
            }
        }
        let r = reply(response).await;
        assert_eq!(r.text(), "ignored");
    }
    // A body as large as the whole connection window still goes through.
    let post = request("POST", "/collect").body(()).unwrap();
    let r = fetch_with_body(&client, post, pattern(1 << 20), None).await;
    assert_eq!(r.text(), "len=1048576");
    assert!(!conn.is_finished());
}

/// A request the handler answered without reading is read to its end
/// before the answer goes out: a client that then resets it, or sends a
/// malformed rest, gets no response that raced its mistake (what h2spec's
/// §5.1 and §8.1 cases check), and an honest client gets the answer once
/// its body is done.
#[tokio::test]
async fn an_unread_request_is_read_to_its_end_before_the_answer() {
    let srv = start_default().await;
    let (mut c, _) = RawH2::handshake(srv.addr).await;
    // `/ignore` answers at once without reading; the stream stays open.
    c.send(&frame(HEADERS, END_HEADERS, 1, &get_block("/ignore")))
        .await;
    c.send(&frame(DATA, 0, 1, b"part")).await;
    c.send(&frame(DATA, END_STREAM, 1, b"end")).await;
    assert_eq!(c.response(1).await, (200, b"ignored".to_vec()));
    // Reset while the server waits for the rest: no response at all.
    c.send(&frame(HEADERS, END_HEADERS, 3, &get_block("/ignore")))
        .await;
    c.send(&frame(RST_STREAM, 0, 3, &0x8u32.to_be_bytes()))
        .await;
    // A second HEADERS without END_STREAM is malformed (RFC 9113 §8.1):
    // the stream is reset with PROTOCOL_ERROR, not answered.
    c.send(&frame(HEADERS, END_HEADERS, 5, &get_block("/ignore")))
        .await;
    c.send(&frame(HEADERS, END_HEADERS, 5, &get_block("/ignore")))
        .await;
    let f = c.on_stream(5).await;
    assert_eq!(
        (f.kind, f.payload.as_slice()),
        (RST_STREAM, &1u32.to_be_bytes()[..])
    );
    c.get(7, "/hello").await;
    assert_eq!(c.response(7).await, (200, b"Hello, World!".to_vec()));
    assert!(
        c.held.iter().all(|f| f.stream != 3),
        "stream 3 was answered: {:?}",
        c.held
    );
}

// ---- limits ----

#[tokio::test]
async fn declared_body_over_the_limit_is_413_before_it_is_read() {
    let limits = Limits {
        max_body_bytes: Some(1000),
        ..Limits::default()
    };
    let srv = start(limits).await;
    let (client, _conn) = connect(srv.addr).await;
    let post = |n: usize| {
        request("POST", "/collect")
            .header("content-length", n)
            .body(())
            .unwrap()
    };
    let r = fetch_with_body(&client, post(1000), pattern(1000), None).await;
    assert_eq!((r.status, r.text().as_str()), (StatusCode::OK, "len=1000"));

    // The head alone is answered; no body byte is sent.
    let mut ready = bounded(client.clone().ready()).await.unwrap();
    let (response, _send) = ready.send_request(post(1001), false).unwrap();
    let r = reply(response).await;
    assert_eq!(r.status, 413);
    assert_eq!(r.text(), "413 request body too large\n");
    // The connection goes on.
    assert_eq!(fetch(&client, get("/hello")).await.status, 200);
}

#[tokio::test]
async fn undeclared_body_growing_past_the_limit_fails_in_the_service() {
    let limits = Limits {
        max_body_bytes: Some(1000),
        ..Limits::default()
    };
    let srv = start(limits).await;
    let (client, _conn) = connect(srv.addr).await;
    let post = || request("POST", "/collect").body(()).unwrap();
    let r = fetch_with_body(&client, post(), pattern(1000), None).await;
    assert_eq!(r.text(), "len=1000");
    // `/collect` answers 413 when the body reports `is_body_too_large`.
    let r = fetch_with_body(&client, post(), pattern(1001), None).await;
    assert_eq!(
        (r.status, r.text().as_str()),
        (StatusCode::PAYLOAD_TOO_LARGE, "too large")
    );
    assert_eq!(fetch(&client, get("/hello")).await.status, 200);
}

#[tokio::test]
async fn too_many_header_fields_is_431() {
    let limits = Limits {
        max_headers: 10,
        ..Limits::default()
    };
    let srv = start(limits).await;
    let (client, _conn) = connect(srv.addr).await;
    let with = |n: usize| {
        let mut b = request("GET", "/hello");
        for i in 0..n {
            b = b.header(format!("x-{i}"), "v");
        }
        b.body(()).unwrap()
    };
    assert_eq!(fetch(&client, with(10)).await.status, 200);
    let r = fetch(&client, with(11)).await;
    assert_eq!(r.status, 431);
    assert_eq!(r.text(), "431 too many header fields\n");
}

#[tokio::test]
async fn too_long_a_path_is_414() {
    let limits = Limits {
        max_uri_bytes: 100,
        ..Limits::default()
    };
    let srv = start(limits).await;
    let (client, _conn) = connect(srv.addr).await;
    let with = |n: usize| get(&format!("/echo-path{}", "a".repeat(n - 10)));
    assert_eq!(fetch(&client, with(100)).await.status, 200);
    assert_eq!(fetch(&client, with(101)).await.status, 414);
}

#[tokio::test]
async fn a_header_list_over_max_head_bytes_is_431_from_the_engine() {
    let limits = Limits {
        max_head_bytes: 1024,
        ..Limits::default()
    };
    let srv = start(limits).await;
    let (client, conn) = connect(srv.addr).await;
    let with = |n: usize| {
        request("GET", "/hello")
            .header("x-pad", "p".repeat(n))
            .body(())
            .unwrap()
    };
    assert_eq!(fetch(&client, with(500)).await.status, 200);

    // The engine answers a bare 431 itself (then resets the stream);
    // the service never sees the request.
    let mut ready = bounded(client.clone().ready()).await.unwrap();
    let (response, _send) = ready.send_request(with(2000), true).unwrap();
    let response = bounded(response).await.expect("a response");
    assert_eq!(response.status(), 431);
    assert!(response.body().is_end_stream());
    // The connection survives, and so does the server.
    assert_eq!(fetch(&client, get("/hello")).await.status, 200);
    assert!(!conn.is_finished());
    let (fresh, _conn) = connect(srv.addr).await;
    assert_eq!(fetch(&fresh, get("/hello")).await.text(), "Hello, World!");
}

#[tokio::test]
async fn settings_follow_the_limits() {
    let limits = Limits {
        max_head_bytes: 8000,
        h2_max_concurrent_streams: 7,
        h2_stream_window: 100_000,
        h2_connection_window: 3 << 20,
        h2_max_frame_size: 32 * 1024,
        ..Limits::default()
    };
    let srv = start(limits).await;
    let (mut c, settings) = RawH2::handshake(srv.addr).await;
    // MAX_CONCURRENT_STREAMS, INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE,
    // MAX_HEADER_LIST_SIZE (RFC 9113 §6.5.2).
    for pair in [(0x3, 7), (0x4, 100_000), (0x5, 32 * 1024), (0x6, 8000)] {
        assert!(settings.contains(&pair), "{pair:?} in {settings:?}");
    }
    // The connection window grows from the initial 65,535 to 3 MiB.
    let update = c.until(|f| f.kind == WINDOW_UPDATE && f.stream == 0).await;
    assert_eq!(update.word(0), (3 << 20) - 65_535);
}

#[tokio::test]
async fn streams_past_the_concurrency_limit_are_refused() {
    let limits = Limits {
        h2_max_concurrent_streams: 2,
        ..Limits::default()
    };
    let srv = start(limits).await;
    let key = "h2-concurrency";
    let gate = gate(key);
    let (mut c, settings) = RawH2::handshake(srv.addr).await;
    // SETTINGS_MAX_CONCURRENT_STREAMS (0x3) is announced.
    assert!(settings.contains(&(0x3, 2)), "{settings:?}");

    c.get(1, &format!("/hold?{key}")).await;
    c.get(3, &format!("/hold?{key}")).await;
    gate.started(2).await;
    c.get(5, &format!("/hold?{key}")).await;
    let refused = c.on_stream(5).await;
    assert_eq!(refused.rst_code(), REFUSED_STREAM);

    gate.open();
    let released = format!("released {key}").into_bytes();
    assert_eq!(c.response(1).await, (200, released.clone()));
    assert_eq!(c.response(3).await, (200, released));
    assert_eq!(gate.started_so_far(), 2, "the refused stream never ran");
    // With the two streams done, a new one is served.
    c.get(7, "/hello").await;
    assert_eq!(c.response(7).await, (200, b"Hello, World!".to_vec()));
}

// ---- rapid reset (CVE-2023-44487) ----

/// Opens a `/hold?key` stream, waits until its handler runs, resets it and
/// waits until the handler is dropped.
async fn open_and_cancel(client: &SendRequest<Bytes>, key: &str, nth: u64) {
    let mut ready = bounded(client.clone().ready()).await.unwrap();
    let (_response, mut send) = ready
        .send_request(get(&format!("/hold?{key}")), true)
        .unwrap();
    let gate = gate(key);
    gate.started(nth).await;
    send.send_reset(Reason::CANCEL);
    // The server stops the handler: the work is not done for nothing.
    gate.ended(nth).await;
}

#[tokio::test]
async fn rapid_reset_past_the_limit_gets_enhance_your_calm() {
    let srv = start_with_cancel_limit(4).await;
    let key = "h2-rapid-reset";
    let (client, conn) = connect(srv.addr).await;
    for nth in 1..=4 {
        open_and_cancel(&client, key, nth).await;
    }
    assert!(!conn.is_finished());
    open_and_cancel(&client, key, 5).await;
    let err = bounded(conn).await.unwrap().expect_err("GOAWAY");
    assert!(err.is_go_away() && err.is_remote(), "{err:?}");
    assert_eq!(err.reason(), Some(Reason::ENHANCE_YOUR_CALM), "{err:?}");

    // Only that connection is cut off.
    assert_a_fresh_client_is_served(srv.addr).await;
}

#[tokio::test]
async fn a_burst_of_opened_and_reset_streams_gets_enhance_your_calm() {
    let srv = start_with_cancel_limit(4).await;
    let key = "h2-rapid-reset-raw";
    let (mut c, _) = RawH2::handshake(srv.addr).await;
    // The attack as seen in the wild: HEADERS and RST_STREAM, over and
    // over, in one write.
    let mut burst = Vec::new();
    for i in 0..1000 {
        let id = 2 * i + 1;
        burst.extend(frame(
            HEADERS,
            END_HEADERS | END_STREAM,
            id,
            &get_block(&format!("/hold?{key}")),
        ));
        burst.extend(frame(RST_STREAM, 0, id, &0x8u32.to_be_bytes()));
    }
    c.send(&burst).await;
    // Whichever limit comes first closes the connection: the engine's on
    // streams reset before they were taken (20), or the driver's on
    // streams cancelled while their handler ran. Either way few of the
    // thousand streams were opened and fewer handlers ran.
    let frames = c.rest().await;
    let goaway = frames.iter().find(|f| f.kind == GOAWAY).expect("GOAWAY");
    let (last, code) = goaway.goaway();
    assert_eq!(code, ENHANCE_YOUR_CALM, "{frames:?}");
    assert!(last < 100, "{last}");
    assert!(gate(key).started_so_far() < 50);
    assert_a_fresh_client_is_served(srv.addr).await;
}

#[tokio::test]
async fn cancelling_below_the_limit_or_among_many_answers_keeps_the_connection() {
    let srv = start_with_cancel_limit(4).await;
    let key = "h2-cancel-below-limit";
    let (client, conn) = connect(srv.addr).await;
    // At the limit: 4 cancelled out of 4.
    for nth in 1..=4 {
        open_and_cancel(&client, key, nth).await;
    }
    assert_eq!(fetch(&client, get("/hello")).await.status, 200);
    // Past the limit but not half of the streams: 7 cancelled out of 15.
    for _ in 0..7 {
        assert_eq!(fetch(&client, get("/hello")).await.status, 200);
    }
    for nth in 5..=7 {
        open_and_cancel(&client, key, nth).await;
    }
    assert_eq!(fetch(&client, get("/hello")).await.text(), "Hello, World!");
    assert!(!conn.is_finished());
}

// ---- flow control and timeouts ----

#[tokio::test]
async fn a_response_stalled_by_flow_control_is_reset_after_the_write_timeout() {
    let srv = start(short_timeouts()).await;
    let mut builder = h2::client::Builder::new();
    builder.initial_window_size(16 * 1024);
    let (client, conn) = connect_with(srv.addr, builder).await;
    let mut ready = bounded(client.clone().ready()).await.unwrap();
    let (response, _send) = ready.send_request(get("/big"), true).unwrap();
    let response = bounded(response).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-length"], "1048576");
    // Read without ever releasing capacity: the window stays shut.
    let mut body = response.into_body();
    let mut got = 0;
    let err = loop {
        match bounded(body.data()).await {
            Some(Ok(chunk)) => got += chunk.len(),
            Some(Err(err)) => break err,
            None => panic!("the body ended after {got} bytes"),
        }
    };
    assert_eq!(got, 16 * 1024);
    assert!(err.is_reset() && err.is_remote(), "{err:?}");
    assert_eq!(err.reason(), Some(Reason::CANCEL));
    // The connection and the server still serve.
    assert_eq!(fetch(&client, get("/hello")).await.status, 200);
    assert!(!conn.is_finished());
    let (fresh, _conn) = connect(srv.addr).await;
    assert_eq!(fetch(&fresh, get("/big")).await.body.len(), 1 << 20);
}

/// Opens a connection whose streams start with a shut send window
/// (`SETTINGS_INITIAL_WINDOW_SIZE` 0) and sends `GET /hello` on stream 1;
/// returns once the response head has come.
async fn hello_with_a_shut_window(addr: SocketAddr) -> RawH2 {
    let (mut c, _) = RawH2::handshake(addr).await;
    c.send(&frame(SETTINGS, 0, 0, &[0, 4, 0, 0, 0, 0])).await;
    c.until(|f| f.kind == SETTINGS && f.flags & ACK != 0).await;
    c.get(1, "/hello").await;
    let head = c.on_stream(1).await;
    assert_eq!(head.kind, HEADERS, "{head:?}");
    assert_eq!(status_of(&head.payload), 200);
    assert_eq!(head.flags & END_STREAM, 0, "{head:?}");
    c
}

#[tokio::test]
async fn a_small_response_waits_in_the_engine_until_the_window_opens() {
    let srv = start(short_timeouts()).await;
    let mut c = hello_with_a_shut_window(srv.addr).await;
    // Nothing more while the window is shut (and no reset).
    let early = tokio::time::timeout(Duration::from_millis(100), c.on_stream(1)).await;
    assert!(early.is_err(), "{early:?}");
    c.send(&frame(WINDOW_UPDATE, 0, 1, &1000u32.to_be_bytes()))
        .await;
    let data = c.on_stream(1).await;
    assert_eq!(data.kind, DATA, "{data:?}");
    assert_eq!(data.payload, b"Hello, World!");
    assert_ne!(data.flags & END_STREAM, 0, "{data:?}");
}

/// Opens `streams` streams for `path(id)` on a connection whose client
/// shut every stream window (`SETTINGS_INITIAL_WINDOW_SIZE` 0) and reads
/// each response head.
async fn stalled_streams(addr: SocketAddr, streams: u32, path: impl Fn(u32) -> String) -> RawH2 {
    let (mut c, _) = RawH2::handshake(addr).await;
    c.send(&frame(SETTINGS, 0, 0, &[0, 4, 0, 0, 0, 0])).await;
    c.until(|f| f.kind == SETTINGS && f.flags & ACK != 0).await;
    for i in 0..streams {
        c.get(2 * i + 1, &path(2 * i + 1)).await;
    }
    for i in 0..streams {
        let head = c.on_stream(2 * i + 1).await;
        assert_eq!(head.kind, HEADERS, "{head:?}");
        assert_eq!(status_of(&head.payload), 200);
    }
    c
}

#[tokio::test]
async fn a_stalled_client_makes_the_server_read_nothing_ahead() {
    let srv = start_default().await;
    // 64 streams of 4 MiB each: before, each stream read a 64 KiB piece
    // ahead of the client's shut window, 4 MiB in all.
    let mut c = stalled_streams(srv.addr, 64, |_| "/counted?stall,4194304".into()).await;
    // Every answer has sent its head and waits: nothing was pulled.
    assert_eq!(pulled("stall"), 0);
    // A window of 1,000 bytes on one stream: at most one piece is read.
    c.send(&frame(WINDOW_UPDATE, 0, 1, &1000u32.to_be_bytes()))
        .await;
    let data = c.on_stream(1).await;
    assert_eq!((data.kind, data.payload.len()), (DATA, 1000), "{data:?}");
    assert_eq!(pulled("stall"), 64 * 1024);
}

#[tokio::test]
async fn a_file_is_read_only_as_far_as_the_window_allows() {
    let srv = start_default().await;
    let mut c = stalled_streams(srv.addr, 4, |id| format!("/file?{id},100000")).await;
    // Windows of 1,000 then 70,000 bytes on stream 3: the data is exactly
    // the granted bytes of the file (read in pieces of at most the grant).
    let file = test_file_bytes();
    c.send(&frame(WINDOW_UPDATE, 0, 3, &1000u32.to_be_bytes()))
        .await;
    let data = c.on_stream(3).await;
    assert_eq!(data.payload, &file[3..1003]);
    c.send(&frame(WINDOW_UPDATE, 0, 0, &200_000u32.to_be_bytes()))
        .await;
    c.send(&frame(WINDOW_UPDATE, 0, 3, &150_000u32.to_be_bytes()))
        .await;
    let mut body = data.payload.clone();
    while body.len() < 100_000 {
        let f = c.on_stream(3).await;
        assert_eq!(f.kind, DATA, "{f:?}");
        assert!(f.payload.len() <= 16 * 1024);
        body.extend_from_slice(&f.payload);
        assert_eq!(f.flags & END_STREAM != 0, body.len() == 100_000);
    }
    assert!(body == file[3..100_003]);
}

#[tokio::test]
async fn a_small_response_held_by_a_shut_window_does_not_hold_the_connection() {
    let srv = start(short_timeouts()).await;
    let mut c = hello_with_a_shut_window(srv.addr).await;
    // The answer is queued in h2 and the handler done: with no stream in
    // flight, the keep-alive timeout sends GOAWAY and the write timeout
    // then closes the connection; the body never went out.
    let rest = c.rest().await;
    assert!(rest.iter().all(|f| f.kind != DATA), "{rest:?}");
    assert!(rest.iter().any(|f| f.kind == GOAWAY), "{rest:?}");
    assert_a_fresh_client_is_served(srv.addr).await;
}

#[tokio::test]
async fn a_stalled_request_body_times_out_in_the_service() {
    let srv = start(short_timeouts()).await;
    let (client, _conn) = connect(srv.addr).await;
    let mut ready = bounded(client.clone().ready()).await.unwrap();
    let (response, mut send) = ready
        .send_request(request("POST", "/collect").body(()).unwrap(), false)
        .unwrap();
    send.send_data(Bytes::from_static(b"part"), false).unwrap();
    // No more data and no end of stream: `/collect` sees the timeout.
    let r = reply(response).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.text(), "request body timed out");
}

#[tokio::test]
async fn a_partial_preface_is_closed_at_the_head_timeout() {
    let srv = start(short_timeouts()).await;
    let mut c = Raw::connect(srv.addr).await;
    c.send(&PREFACE[..16]).await;
    // Still an HTTP/1.1 head as far as the server knows: a late one.
    let all = c.read_to_close().await;
    let text = String::from_utf8_lossy(&all);
    assert!(text.starts_with("HTTP/1.1 408 "), "{text}");
}

#[tokio::test]
async fn a_preface_with_nothing_after_is_closed_at_the_head_timeout() {
    let srv = start(short_timeouts()).await;
    let mut c = Raw::connect(srv.addr).await;
    c.send(PREFACE).await;
    // No SETTINGS and no stream: the server's SETTINGS, then GOAWAY.
    let frames = frames_in(&c.read_to_close().await);
    assert_eq!(frames[0].kind, SETTINGS, "{frames:?}");
    let goaway = frames.iter().find(|f| f.kind == GOAWAY).expect("GOAWAY");
    assert_eq!(goaway.goaway().1, NO_ERROR);
}

#[tokio::test]
async fn an_idle_connection_gets_goaway_then_closes() {
    let srv = start(short_timeouts()).await;
    let (mut c, _) = RawH2::handshake(srv.addr).await;
    c.get(1, "/hello").await;
    assert_eq!(c.response(1).await.0, 200);
    // Idle past the keep-alive timeout: GOAWAY(2^31-1) and a PING; the
    // acknowledged PING brings the final GOAWAY naming stream 1.
    let first = c.until(|f| f.kind == GOAWAY).await;
    assert_eq!(first.goaway(), (0x7fff_ffff, NO_ERROR));
    let ping = c.until(|f| f.kind == PING).await;
    c.send(&frame(PING, ACK, 0, &ping.payload)).await;
    let last = c.until(|f| f.kind == GOAWAY).await;
    assert_eq!(last.goaway(), (1, NO_ERROR));
    assert!(c.rest().await.is_empty());

    // The h2 client sees a clean end.
    let (client, conn) = connect(srv.addr).await;
    assert_eq!(fetch(&client, get("/hello")).await.status, 200);
    bounded(conn).await.unwrap().expect("a clean close");
}

#[tokio::test]
async fn a_client_that_never_reads_is_dropped() {
    let limits = Limits {
        write_timeout: Duration::from_millis(100),
        keep_alive_timeout: Duration::from_millis(100),
        ..Limits::default()
    };
    let srv = start(limits).await;
    // Windows wide open, so only the socket holds the server back.
    let mut hello = PREFACE.to_vec();
    let mut settings = 0x4u16.to_be_bytes().to_vec();
    settings.extend(0x7fff_ffffu32.to_be_bytes());
    hello.extend(frame(SETTINGS, 0, 0, &settings));
    hello.extend(frame(WINDOW_UPDATE, 0, 0, &0x7fff_0000u32.to_be_bytes()));
    for id in 0..32 {
        hello.extend(frame(
            HEADERS,
            END_HEADERS | END_STREAM,
            2 * id + 1,
            &get_block("/big"),
        ));
    }
    let mut c = Raw::connect(srv.addr).await;
    c.send(&hello).await;
    // Each stream waits for the socket up to the write timeout and is
    // reset; with none left, the keep-alive timeout sends GOAWAY, and the
    // client, still not reading, is dropped a write timeout later. The
    // stall is long against those timeouts, so late timers on a loaded
    // machine still fire inside it.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let all = c.read_to_close().await;
    assert!(
        all.len() < 32 << 20,
        "the server wrote all {} bytes",
        all.len()
    );
    assert_a_fresh_client_is_served(srv.addr).await;
}

#[tokio::test]
async fn requests_keep_an_idle_connection_alive() {
    let limits = Limits {
        head_timeout: Duration::from_millis(300),
        keep_alive_timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let srv = start(limits).await;
    let (mut c, _) = RawH2::handshake(srv.addr).await;
    // A request every 100 ms for a second: each resets the keep-alive
    // timeout, and neither it nor the head timeout ends the connection.
    for i in 0..10 {
        let id = 2 * i + 1;
        c.get(id, "/hello").await;
        assert_eq!(c.response(id).await.0, 200);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        c.control.iter().all(|f| f.kind != GOAWAY),
        "{:?}",
        c.control
    );
    // Then idle: GOAWAY.
    let goaway = c.until(|f| f.kind == GOAWAY).await;
    assert_eq!(goaway.goaway(), (0x7fff_ffff, NO_ERROR));
}

// ---- shutdown ----

#[tokio::test]
async fn shutdown_lets_a_stream_in_flight_finish() {
    let srv = start_default().await;
    let key = "h2-shutdown";
    let gate = gate(key);
    let (client, conn) = connect(srv.addr).await;
    let mut ready = bounded(client.clone().ready()).await.unwrap();
    let (response, _send) = ready
        .send_request(get(&format!("/hold-big?{key}")), true)
        .unwrap();
    gate.started(1).await;
    srv.shutdown.trigger();
    gate.open();
    let r = reply(response).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), 1 << 20);
    assert!(r.body.iter().all(|&b| b == b'h'));
    bounded(conn).await.unwrap().expect("a clean close");
    bounded(srv.task).await.unwrap().unwrap();
}

#[tokio::test]
async fn shutdown_serves_no_stream_opened_after_goaway() {
    let srv = start_default().await;
    let key = "h2-shutdown-raw";
    let gate = gate(key);
    let (mut c, _) = RawH2::handshake(srv.addr).await;
    c.get(1, &format!("/hold?{key}")).await;
    gate.started(1).await;
    srv.shutdown.trigger();
    let first = c.until(|f| f.kind == GOAWAY).await;
    assert_eq!(first.goaway(), (0x7fff_ffff, NO_ERROR));
    let ping = c.until(|f| f.kind == PING).await;
    c.send(&frame(PING, ACK, 0, &ping.payload)).await;
    let last = c.until(|f| f.kind == GOAWAY).await;
    assert_eq!(last.goaway(), (1, NO_ERROR));

    // Too late: stream 3 is ignored; stream 1 finishes.
    c.get(3, "/hello").await;
    gate.open();
    assert_eq!(
        c.response(1).await,
        (200, format!("released {key}").into_bytes())
    );
    let rest = c.rest().await;
    assert!(rest.iter().all(|f| f.stream != 3), "{rest:?}");
    bounded(srv.task).await.unwrap().unwrap();
}

// ---- frame-level abuse ----

#[tokio::test]
async fn a_continuation_flood_ends_the_connection() {
    let limits = Limits {
        max_head_bytes: 4096,
        ..Limits::default()
    };
    let srv = start(limits).await;
    let (c, _) = RawH2::handshake(srv.addr).await;
    let (mut read, mut write) = c.io.into_split();

    // Read on a side task, until the server closes.
    let frames = tokio::spawn(async move {
        let mut all = c.buf.to_vec();
        loop {
            let mut chunk = vec![0u8; 16 * 1024];
            match bounded(read.read(&mut chunk)).await {
                Ok(0) | Err(_) => break,
                Ok(n) => all.extend_from_slice(&chunk[..n]),
            }
        }
        all
    });

    // HEADERS without END_HEADERS, then CONTINUATION frames of 16 fields
    // of 1,000 bytes each, 64 MiB in all unless the server stops us (the
    // socket buffers hold a few MiB).
    let mut piece = Vec::new();
    for i in 0..16 {
        hpack_literal(&mut piece, format!("x-pad-{i}").as_bytes(), &[b'p'; 1000]);
    }
    let head = frame(HEADERS, 0, 1, &get_block("/hello"));
    let cont = frame(CONTINUATION, 0, 1, &piece);
    let mut sent = 0usize;
    let mut stopped = write.write_all(&head).await.is_err();
    while !stopped && sent < 64 << 20 {
        match bounded(write.write_all(&cont)).await {
            Ok(()) => sent += cont.len(),
            Err(_) => stopped = true,
        }
    }
    assert!(stopped, "the server took {sent} bytes of header block");

    let frames = frames_in(&bounded(frames).await.unwrap());
    let goaway = frames.iter().find(|f| f.kind == GOAWAY).expect("GOAWAY");
    // h2 decodes the block as it arrives and gives up once the decoded
    // list is far past the limit ("header_list_way_too_large").
    assert_eq!(goaway.goaway(), (0, ENHANCE_YOUR_CALM), "{frames:?}");
    assert!(frames.iter().all(|f| f.kind != HEADERS), "{frames:?}");

    assert_a_fresh_client_is_served(srv.addr).await;
}

#[tokio::test]
async fn a_thousand_pings_are_each_acknowledged() {
    let srv = start_default().await;
    let (mut c, _) = RawH2::handshake(srv.addr).await;
    let mut pings = Vec::new();
    for i in 0u64..1000 {
        pings.extend(frame(PING, 0, 0, &i.to_be_bytes()));
    }
    c.send(&pings).await;
    for i in 0u64..1000 {
        let ack = c.until(|f| f.kind == PING).await;
        assert_eq!(ack.flags, ACK);
        assert_eq!(ack.payload, i.to_be_bytes());
    }
    c.get(1, "/hello").await;
    assert_eq!(c.response(1).await, (200, b"Hello, World!".to_vec()));
}

// ---- HTTP/1.1 on the same listener ----

#[tokio::test]
async fn without_http2_the_preface_is_an_http1_error() {
    let srv = start_http1_only(Limits::default()).await;
    let mut c = Raw::connect(srv.addr).await;
    let mut hello = PREFACE.to_vec();
    hello.extend(frame(SETTINGS, 0, 0, &[]));
    c.send(&hello).await;
    let r = c.response().await;
    assert_eq!(r.status, 505, "{r:?}");
    assert!(c.is_closed().await);

    // The h2 client cannot get in either; HTTP/1.1 is still served.
    let (client, conn) = connect(srv.addr).await;
    let mut ready = bounded(client.ready()).await.unwrap();
    let (response, _) = ready.send_request(get("/hello"), true).unwrap();
    assert!(bounded(response).await.is_err());
    assert!(bounded(conn).await.unwrap().is_err());
    let mut c = Raw::connect(srv.addr).await;
    c.send(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!(c.response().await.text(), "Hello, World!");
}

#[tokio::test]
async fn http1_and_pri_requests_share_the_listener() {
    let srv = start_default().await;
    let mut c = Raw::connect(srv.addr).await;
    c.send(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!(c.response().await.text(), "Hello, World!");

    // `PRI` is a method token like any other once the line is not the
    // preface, even when it arrives a byte at a time.
    let mut c = Raw::connect(srv.addr).await;
    c.send_bytewise(b"PRI /x HTTP/1.1\r\nHost: x\r\n\r\n").await;
    let r = c.response().await;
    assert_eq!((r.status, r.text().as_str()), (404, "not found"));
    c.send(b"PRI /echo-path?q HTTP/1.1\r\nHost: x\r\n\r\n")
        .await;
    assert_eq!(c.response().await.text(), "/echo-path?q");

    // After an HTTP/1.1 request, the preface is no longer a way in.
    c.send(PREFACE).await;
    let r = c.response().await;
    assert_eq!(r.status, 505, "{r:?}");
    assert!(c.is_closed().await);
}

/// A server that ends a connection after `max` cancelled streams (and
/// half of all).
async fn start_with_cancel_limit(max: u64) -> crate::support::TestServer {
    start(Limits {
        h2_max_cancelled_streams: max,
        ..Limits::default()
    })
    .await
}

/// A new connection to `addr` gets `/hello` answered.
async fn assert_a_fresh_client_is_served(addr: std::net::SocketAddr) {
    let (fresh, _conn) = connect(addr).await;
    assert_eq!(fetch(&fresh, get("/hello")).await.status, 200);
}
