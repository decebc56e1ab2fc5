//! The floor over loopback: the upgrade, echo, broadcast, control frames,
//! and what it refuses at its limits; the document's polls; event streams,
//! plain and gzip-coded; and both over TLS (a real server process, a raw
//! client, or curl for TLS).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Bound on every read and on the server's start.
const WAIT: Duration = Duration::from_secs(5);

/// The server process, killed when dropped.
struct Floor {
    child: Child,
    port: u16,
}

impl Drop for Floor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start() -> Floor {
    start_with(&[])
}

fn start_with(args: &[&str]) -> Floor {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let child = Command::new(env!("CARGO_BIN_EXE_peer-ws-floor"))
        .arg(port.to_string())
        .args(args)
        .stderr(Stdio::null())
        .spawn()
        .expect("the floor starts");
    let floor = Floor { child, port };
    for _ in 0..100 {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return floor;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("the floor did not listen on {port}");
}

fn connect(floor: &Floor) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", floor.port)).expect("connect");
    s.set_read_timeout(Some(WAIT)).expect("timeout");
    s
}

/// The response head to `request`, read up to its blank line.
fn head(s: &mut TcpStream, request: &[u8]) -> String {
    s.write_all(request).expect("write");
    read_head(s)
}

/// A response head, read up to its blank line.
fn read_head(s: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte) {
            Ok(1) => got.push(byte[0]),
            other => panic!("head cut short after {got:?}: {other:?}"),
        }
    }
    String::from_utf8(got).expect("ASCII head")
}

/// Opens a WebSocket on `path` with the key of RFC 6455 section 1.3.
fn open(floor: &Floor, path: &str) -> TcpStream {
    let mut s = connect(floor);
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    let got = head(&mut s, request.as_bytes());
    assert!(got.starts_with("HTTP/1.1 101 "), "{got}");
    assert!(
        got.contains("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"),
        "{got}"
    );
    s
}

/// A masked client frame (RFC 6455 section 5.2).
fn frame(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mask = [0x37, 0xfa, 0x21, 0x3d];
    let mut out = vec![u8::from(fin) << 7 | opcode];
    match payload.len() {
        n @ 0..=125 => out.push(0x80 | n as u8),
        n @ 126..=0xFFFF => {
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
    out
}

/// The next server frame: first byte and payload; it must be unmasked.
fn read_frame(s: &mut TcpStream) -> (u8, Vec<u8>) {
    let mut h = [0u8; 2];
    s.read_exact(&mut h).expect("frame head");
    assert_eq!(h[1] & 0x80, 0, "server frames are unmasked");
    let len = match h[1] & 0x7F {
        126 => {
            let mut b = [0u8; 2];
            s.read_exact(&mut b).expect("length");
            usize::from(u16::from_be_bytes(b))
        }
        127 => {
            let mut b = [0u8; 8];
            s.read_exact(&mut b).expect("length");
            usize::try_from(u64::from_be_bytes(b)).expect("length")
        }
        n => usize::from(n),
    };
    let mut payload = vec![0u8; len];
    s.read_exact(&mut payload).expect("payload");
    (h[0], payload)
}

/// Reads a close frame with `code`, then the end of the connection.
fn expect_close(s: &mut TcpStream, code: u16) {
    let (first, payload) = read_frame(s);
    assert_eq!(first, 0x88, "a close frame");
    assert_eq!(payload[..2], code.to_be_bytes(), "{payload:?}");
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).expect("end of stream");
    assert!(rest.is_empty(), "nothing after the close: {rest:?}");
}

#[test]
fn echo_sends_each_message_back_unmasked() {
    let floor = start();
    let mut s = open(&floor, "/echo");
    let long = vec![b'x'; 300];
    let mut batch = frame(true, 0x1, b"hello");
    batch.extend(frame(true, 0x2, &long));
    s.write_all(&batch).expect("write");
    assert_eq!(read_frame(&mut s), (0x81, b"hello".to_vec()));
    assert_eq!(read_frame(&mut s), (0x82, long));
    // A frame split over two segments.
    let split = frame(true, 0x1, b"in two parts");
    s.write_all(&split[..5]).expect("write");
    s.flush().expect("flush");
    std::thread::sleep(Duration::from_millis(20));
    s.write_all(&split[5..]).expect("write");
    assert_eq!(read_frame(&mut s), (0x81, b"in two parts".to_vec()));
}

#[test]
fn ping_gets_pong_and_close_is_answered() {
    let floor = start();
    let mut s = open(&floor, "/");
    s.write_all(&frame(true, 0x9, b"are you there"))
        .expect("write");
    assert_eq!(read_frame(&mut s), (0x8A, b"are you there".to_vec()));
    s.write_all(&frame(true, 0x8, &1000u16.to_be_bytes()))
        .expect("write");
    expect_close(&mut s, 1000);
}

#[test]
fn broadcast_reaches_every_subscriber_and_the_sender() {
    let floor = start();
    let mut subs: Vec<_> = (0..20).map(|_| open(&floor, "/broadcast")).collect();
    let message = b"celer-bench:0000000000000001:000000:abcdefgh";
    subs[3]
        .write_all(&frame(true, 0x1, message))
        .expect("write");
    for s in &mut subs {
        assert_eq!(read_frame(s), (0x81, message.to_vec()));
    }
    // A subscriber that leaves is no longer sent to; the others still are.
    drop(subs.remove(0));
    subs[0]
        .write_all(&frame(true, 0x2, b"second"))
        .expect("write");
    for s in &mut subs {
        assert_eq!(read_frame(s), (0x82, b"second".to_vec()));
    }
}

#[test]
fn what_the_floor_does_not_support_is_refused_with_a_close() {
    let floor = start();
    let mut s = open(&floor, "/echo");
    s.write_all(&frame(false, 0x1, b"part")).expect("write");
    expect_close(&mut s, 1003);
    let mut s = open(&floor, "/echo");
    let mut unmasked = frame(true, 0x1, b"");
    unmasked[1] = 0;
    s.write_all(&unmasked[..2]).expect("write");
    expect_close(&mut s, 1002);
    let mut s = open(&floor, "/echo");
    s.write_all(&[0xC1, 0x80, 0, 0, 0, 0]).expect("write");
    expect_close(&mut s, 1002);
}

#[test]
fn a_message_over_the_limit_fails_the_connection_with_1009() {
    let floor = start();
    let mut s = open(&floor, "/echo");
    let at_limit = vec![b'a'; 64 * 1024];
    s.write_all(&frame(true, 0x2, &at_limit)).expect("write");
    assert_eq!(read_frame(&mut s), (0x82, at_limit));
    // Only the head is sent: the length alone is refused.
    let over = frame(true, 0x2, &vec![b'a'; 64 * 1024 + 1]);
    s.write_all(&over[..14]).expect("write");
    expect_close(&mut s, 1009);
}

#[test]
fn bad_upgrades_get_an_http_status() {
    let floor = start();
    let cases: [(&[u8], &str); 4] = [
        (b"GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 404 "),
        (b"GET /echo HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 426 "),
        (
            b"GET /echo HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
              Sec-WebSocket-Key: short\r\nSec-WebSocket-Version: 13\r\n\r\n",
            "HTTP/1.1 400 ",
        ),
        (b"POST /echo HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 400 "),
    ];
    for (request, status) in cases {
        let mut s = connect(&floor);
        assert!(head(&mut s, request).starts_with(status), "{status}");
    }
    // A head over 8 KiB: 431.
    let mut s = connect(&floor);
    let mut long = b"GET /echo HTTP/1.1\r\n".to_vec();
    long.extend(b"X-Filler: 0123456789abcdef\r\n".repeat(300));
    assert!(head(&mut s, &long).starts_with("HTTP/1.1 431 "));
}

/// A document for `--doc` and its gzip copy, in a directory of their own.
fn doc_files(tag: &str) -> (std::path::PathBuf, Vec<u8>, Vec<u8>) {
    let dir = std::env::temp_dir().join(format!("ws-floor-doc-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let body = b"{\"rows\":[1,2,3]}".to_vec();
    // Any bytes do for the copy: the floor serves it as it is.
    let gz = b"\x1f\x8bnot-really-gzip".to_vec();
    std::fs::write(dir.join("doc.json"), &body).expect("write the document");
    std::fs::write(dir.join("doc.json.gz"), &gz).expect("write its copy");
    (dir, body, gz)
}

/// Reads one response: its head, then Content-Length bytes of body
/// (none for a 304 or when `head_only`).
fn response(s: &mut TcpStream, head_only: bool) -> (String, Vec<u8>) {
    let head = read_head(s);
    let len = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .map_or(0, |n| n.trim().parse().expect("a length"));
    let mut body = vec![
        0u8;
        if head_only || head.contains(" 304 ") {
            0
        } else {
            len
        }
    ];
    s.read_exact(&mut body).expect("the body");
    (head, body)
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// `--doc`: the file, its gzip copy when offered gzip, 304 for either
/// ETag, HEAD without a body, all on one keep-alive connection, pipelined.
#[test]
fn document_answers_polls_on_one_connection() {
    let (dir, body, gz) = doc_files("polls");
    let file = dir.join("doc.json");
    let floor = start_with(&["--doc", file.to_str().expect("a UTF-8 path")]);
    let mut s = connect(&floor);
    s.write_all(b"GET /doc.json HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("write");
    let (head, got) = response(&mut s, false);
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    assert_eq!(got, body);
    assert_eq!(header(&head, "content-encoding"), None);
    let etag = header(&head, "etag").expect("an ETag").to_owned();

    // Three requests in one write: gzip, conditional, HEAD.
    let three = format!(
        "GET /doc.json?x=1 HTTP/1.1\r\nHost: x\r\nAccept-Encoding: br, gzip;q=0.5\r\n\r\n\
         GET /doc.json HTTP/1.1\r\nHost: x\r\nIf-None-Match: W/{etag}\r\n\r\n\
         HEAD /doc.json HTTP/1.1\r\nHost: x\r\n\r\n"
    );
    s.write_all(three.as_bytes()).expect("write");
    let (head, got) = response(&mut s, false);
    assert_eq!(header(&head, "content-encoding"), Some("gzip"), "{head}");
    assert_eq!(got, gz);
    let gz_etag = header(&head, "etag").expect("an ETag").to_owned();
    assert_ne!(gz_etag, etag, "the gzip copy has an ETag of its own");
    let (head, got) = response(&mut s, false);
    assert!(head.starts_with("HTTP/1.1 304 "), "{head}");
    assert_eq!(header(&head, "etag"), Some(etag.as_str()));
    assert!(got.is_empty());
    let (head, _) = response(&mut s, true);
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    assert_eq!(
        header(&head, "content-length"),
        Some(body.len().to_string().as_str())
    );

    // gzip refused with q=0 gets the file; the copy's ETag gets a 304.
    let two = format!(
        "GET /doc.json HTTP/1.1\r\nAccept-Encoding: gzip;q=0\r\n\r\n\
         GET /doc.json HTTP/1.1\r\nIf-None-Match: \"other\", {gz_etag}\r\n\r\n"
    );
    s.write_all(two.as_bytes()).expect("write");
    let (head, got) = response(&mut s, false);
    assert_eq!(header(&head, "content-encoding"), None, "{head}");
    assert_eq!(got, body);
    let (head, _) = response(&mut s, false);
    assert!(head.starts_with("HTTP/1.1 304 "), "{head}");
    assert_eq!(header(&head, "etag"), Some(gz_etag.as_str()));
    let _ = std::fs::remove_dir_all(dir);
}

/// `--doc`: what the floor does not serve is refused and the connection
/// closed; `Connection: close` is honoured after the answer; WebSocket
/// paths still upgrade beside it.
#[test]
fn document_refusals_and_close() {
    let (dir, body, _) = doc_files("refusals");
    let file = dir.join("doc.json");
    let floor = start_with(&["--doc", file.to_str().expect("a UTF-8 path")]);
    let ended = |s: &mut TcpStream| {
        let mut rest = Vec::new();
        s.read_to_end(&mut rest).expect("the close");
        rest.is_empty()
    };
    for (request, status) in [
        (
            "POST /doc.json HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
            "405",
        ),
        (
            "GET /doc.json HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello",
            "400",
        ),
        ("GET /doc.json HTTP/1.0\r\n\r\n", "400"),
        ("GET /doc.json HTTP/1.1\r\nno colon here\r\n\r\n", "400"),
    ] {
        let mut s = connect(&floor);
        let got = head(&mut s, request.as_bytes());
        assert!(
            got.starts_with(&format!("HTTP/1.1 {status} ")),
            "{request:?}: {got}"
        );
        assert!(ended(&mut s), "{request:?}: closed after the refusal");
    }
    // A document connection asking for another path afterwards.
    let mut s = connect(&floor);
    s.write_all(b"GET /doc.json HTTP/1.1\r\n\r\nGET /other HTTP/1.1\r\n\r\n")
        .expect("write");
    let (head_ok, got) = response(&mut s, false);
    assert!(head_ok.starts_with("HTTP/1.1 200 "), "{head_ok}");
    assert_eq!(got, body);
    let (head_404, _) = response(&mut s, false);
    assert!(head_404.starts_with("HTTP/1.1 404 "), "{head_404}");
    assert!(ended(&mut s));

    let mut s = connect(&floor);
    s.write_all(b"GET /doc.json HTTP/1.1\r\nConnection: close\r\n\r\n")
        .expect("write");
    let (head_ok, got) = response(&mut s, false);
    assert!(head_ok.starts_with("HTTP/1.1 200 "), "{head_ok}");
    assert_eq!(got, body);
    assert!(ended(&mut s), "Connection: close ends the connection");

    let mut ws = open(&floor, "/echo");
    ws.write_all(&frame(true, 0x1, b"still a floor"))
        .expect("write");
    assert_eq!(read_frame(&mut ws), (0x81, b"still a floor".to_vec()));
    let _ = std::fs::remove_dir_all(dir);
}

/// A feed's file for `--sse`, in a directory of its own; the document has
/// line breaks, which its event turns into spaces.
fn feed_file(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("ws-floor-sse-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let file = dir.join("doc.json");
    // Written under another name, then renamed: a child process another
    // test forks while the file is open inherits its descriptor, and that
    // copy's close at exec is an IN_CLOSE_WRITE on the file's name, which
    // the floor, by then watching, would take for a second version.
    let first = dir.join(".doc.json.first");
    std::fs::write(&first, b"{\"v\":1,\n\"rows\":[1,2,3]}").expect("write the feed's file");
    std::fs::rename(&first, &file).expect("rename it into place");
    file
}

/// The event of version `n` of a feed: its id, as long as celer's.
fn event(n: u32, data: &str) -> String {
    format!("id: {n:032x}\ndata: {data}\n\n")
}

/// Replaces the feed's file as `celer bench --sse` does: a sibling file
/// renamed over it.
fn rename_over(file: &std::path::Path, body: &[u8]) {
    let tmp = file.with_file_name(".doc.json.new");
    std::fs::write(&tmp, body).expect("write the new version");
    std::fs::rename(&tmp, file).expect("rename it over the file");
}

/// Reads one chunk of a chunked body (RFC 9112 section 7.1).
fn read_chunk(s: &mut TcpStream) -> Vec<u8> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        s.read_exact(&mut byte).expect("a chunk size");
        line.push(byte[0]);
    }
    let size = std::str::from_utf8(&line[..line.len() - 2]).expect("ASCII size");
    let size = usize::from_str_radix(size, 16).expect("a hexadecimal size");
    let mut data = vec![0u8; size + 2];
    s.read_exact(&mut data).expect("the chunk");
    assert!(data.ends_with(b"\r\n"), "a chunk ends with CRLF");
    data.truncate(size);
    data
}

/// Subscribes to `/feeds/doc/events`, with `extra` header lines; the head.
fn subscribe(floor: &Floor, extra: &str) -> (TcpStream, String) {
    let mut s = connect(floor);
    let request = format!(
        "GET /feeds/doc/events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n{extra}\r\n"
    );
    let got = head(&mut s, request.as_bytes());
    (s, got)
}

/// `--sse`: a subscriber gets the current version at once, then one event
/// per change, whether the file is renamed over or written in place; an
/// unknown feed is 404.
#[test]
fn sse_sends_the_current_version_then_each_change() {
    let file = feed_file("plain");
    let spec = format!("doc={}", file.to_str().expect("a UTF-8 path"));
    let floor = start_with(&["--sse", &spec]);
    let (mut s, got) = subscribe(&floor, "");
    assert!(got.starts_with("HTTP/1.1 200 "), "{got}");
    assert_eq!(header(&got, "content-type"), Some("text/event-stream"));
    assert_eq!(header(&got, "transfer-encoding"), Some("chunked"));
    assert_eq!(header(&got, "content-encoding"), None);
    assert_eq!(
        read_chunk(&mut s),
        event(1, r#"{"v":1, "rows":[1,2,3]}"#).as_bytes()
    );
    let (mut other, _) = subscribe(&floor, "");
    assert_eq!(
        read_chunk(&mut other),
        event(1, r#"{"v":1, "rows":[1,2,3]}"#).as_bytes()
    );
    rename_over(&file, b"{\"v\":2}");
    for s in [&mut s, &mut other] {
        assert_eq!(read_chunk(s), event(2, r#"{"v":2}"#).as_bytes());
    }
    std::fs::write(&file, b"{\"v\":3}\r\n").expect("write in place");
    assert_eq!(read_chunk(&mut s), event(3, r#"{"v":3}  "#).as_bytes());

    let mut s = connect(&floor);
    let got = head(
        &mut s,
        b"GET /feeds/nope/events HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    assert!(got.starts_with("HTTP/1.1 404 "), "{got}");
    let _ = std::fs::remove_dir_all(file.parent().expect("its directory"));
}

/// `--sse` offered gzip: a gzip-coded stream whose header comes once and
/// whose events each inflate on their own (a fresh compressor each, sync
/// flushed) and together, in one raw inflater, to the plain events.
#[test]
fn sse_gzip_streams_decode_to_the_events() {
    use flate2::{Decompress, FlushDecompress};
    let inflate = |z: &mut Decompress, bytes: &[u8]| {
        let mut out = Vec::with_capacity(64 * 1024);
        let before = z.total_in();
        z.decompress_vec(bytes, &mut out, FlushDecompress::Sync)
            .expect("valid deflate");
        assert_eq!(z.total_in() - before, bytes.len() as u64, "all of it taken");
        out
    };
    let file = feed_file("gzip");
    let spec = format!("doc={}", file.to_str().expect("a UTF-8 path"));
    let floor = start_with(&["--sse", &spec]);
    let (mut s, got) = subscribe(&floor, "Accept-Encoding: br, gzip\r\n");
    assert!(got.starts_with("HTTP/1.1 200 "), "{got}");
    assert_eq!(header(&got, "content-encoding"), Some("gzip"));
    let first = read_chunk(&mut s);
    assert_eq!(first[..4], [0x1f, 0x8b, 0x08, 0x00], "the gzip header");
    let mut z = Decompress::new(false);
    assert_eq!(
        inflate(&mut z, &first[10..]),
        event(1, r#"{"v":1, "rows":[1,2,3]}"#).as_bytes()
    );
    let big = format!("{{\"v\":2,\"pad\":\"{}\"}}", "ab".repeat(20_000));
    rename_over(&file, big.as_bytes());
    let second = read_chunk(&mut s);
    let want = event(2, &big);
    assert_eq!(inflate(&mut z, &second), want.as_bytes());
    assert!(second.ends_with(&[0, 0, 0xff, 0xff]), "a sync flush");
    assert_eq!(
        inflate(&mut Decompress::new(false), &second),
        want.as_bytes()
    );
    // A subscriber without gzip gets the plain stream.
    let (mut plain, got) = subscribe(&floor, "Accept-Encoding: gzip;q=0\r\n");
    assert_eq!(header(&got, "content-encoding"), None, "{got}");
    assert_eq!(read_chunk(&mut plain), want.as_bytes());
    let _ = std::fs::remove_dir_all(file.parent().expect("its directory"));
}

/// A self-signed ECDSA P-256 certificate and key (openssl), in `dir`.
fn cert(dir: &std::path::Path) -> (String, String) {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let ok = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args(["-nodes", "-days", "1", "-subj", "/CN=localhost", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(Stdio::null())
        .status()
        .expect("openssl runs");
    assert!(ok.success(), "openssl made a certificate");
    let path = |p: std::path::PathBuf| p.to_str().expect("a UTF-8 path").to_string();
    (path(cert), path(key))
}

/// curl's `-w` figures and body for `args` (TLS unverified, bounded).
fn curl(args: &[&str]) -> String {
    let out = Command::new("curl")
        .args(["-sk", "--max-time", "5"])
        .args(args)
        .output()
        .expect("curl runs");
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// `--tls`: the document's answers over TLS 1.3 (AES-128-GCM, HTTP/1.1 by
/// ALPN), two on one connection, and 304 for its ETag; through rustls's
/// connection, and with `--own-records` sealed and opened by the floor.
#[test]
fn tls_answers_polls() {
    tls_polls("");
    tls_polls("--own-records");
}

/// A floor serving a fresh `--doc` over TLS with `flags` (empty ones
/// skipped): the floor, its scratch directory, the document and its gzip
/// copy, and the document's URL.
fn tls_doc(tag: &str, flags: &[&str]) -> (Floor, std::path::PathBuf, Vec<u8>, Vec<u8>, String) {
    let (dir, body, gz) = doc_files(tag);
    let (cert, key) = cert(&dir);
    let file = dir.join("doc.json");
    let mut args = vec![
        "--doc",
        file.to_str().expect("a UTF-8 path"),
        "--tls",
        &cert,
        &key,
    ];
    args.extend(flags.iter().filter(|m| !m.is_empty()));
    let floor = start_with(&args);
    let url = format!("https://127.0.0.1:{}/doc.json", floor.port);
    (floor, dir, body, gz, url)
}

fn tls_polls(mode: &str) {
    let (_floor, dir, body, _, url) = tls_doc(&format!("tls{mode}"), &[mode]);
    let got = curl(&[
        "-w",
        "|%{http_code} %{http_version} %{num_connects}\n",
        &url,
        &url,
    ]);
    let body = String::from_utf8(body).expect("UTF-8 document");
    let lines: Vec<&str> = got.lines().collect();
    assert_eq!(
        lines,
        [format!("{body}|200 1.1 1"), format!("{body}|200 1.1 0")]
    );
    let verbose = Command::new("curl")
        .args(["-skv", "--max-time", "5", "-o", "/dev/null", &url])
        .output()
        .expect("curl runs");
    let log = String::from_utf8_lossy(&verbose.stderr);
    assert!(log.contains("TLSv1.3 / TLS_AES_128_GCM_SHA256"), "{log}");
    let head = curl(&["-D", "-", "-o", "/dev/null", &url]);
    let etag = header(&head, "etag").expect("an ETag").to_string();
    let code = curl(&[
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "-H",
        &format!("If-None-Match: {etag}"),
        &url,
    ]);
    assert_eq!(code, "304");
    let _ = std::fs::remove_dir_all(dir);
}

/// `--h2`: the document over HTTP/2 by ALPN (curl's nghttp2 reads every
/// frame): full and gzip answers and a 304 for each ETag, several streams
/// on one connection, HEAD without a body, 404 and 405; HTTP/1.1 clients
/// still get HTTP/1.1. Through rustls's connection and with
/// `--own-records`.
#[test]
fn http2_answers_polls() {
    http2_polls("");
    http2_polls("--own-records");
}

fn http2_polls(mode: &str) {
    let (floor, dir, body, gz, url) = tls_doc(&format!("h2{mode}"), &["--h2", mode]);
    let body = String::from_utf8(body).expect("UTF-8 document");
    // Three streams on one connection.
    let got = curl(&[
        "--http2",
        "-w",
        "|%{http_code} %{http_version} %{num_connects}\n",
        &url,
        &url,
        &url,
    ]);
    let lines: Vec<&str> = got.lines().collect();
    assert_eq!(
        lines,
        [
            format!("{body}|200 2 1"),
            format!("{body}|200 2 0"),
            format!("{body}|200 2 0")
        ]
    );
    let head = curl(&["--http2", "-D", "-", "-o", "/dev/null", &url]);
    assert!(head.starts_with("HTTP/2 200"), "{head}");
    assert_eq!(header(&head, "content-type"), Some("application/json"));
    assert_eq!(header(&head, "cache-control"), Some("max-age=1"));
    assert_eq!(
        header(&head, "content-length"),
        Some(body.len().to_string().as_str())
    );
    let etag = header(&head, "etag").expect("an ETag").to_string();
    // gzip when offered: the copy as it is, with its own ETag.
    let gz_head = curl(&[
        "--http2",
        "-H",
        "Accept-Encoding: gzip",
        "-D",
        "-",
        "-o",
        "/dev/null",
        &url,
    ]);
    assert_eq!(header(&gz_head, "content-encoding"), Some("gzip"));
    assert_eq!(
        header(&gz_head, "content-length"),
        Some(gz.len().to_string().as_str())
    );
    let gz_etag = header(&gz_head, "etag").expect("an ETag").to_string();
    assert_ne!(gz_etag, etag);
    for (tag, want) in [
        (&etag, "304"),
        (&gz_etag, "304"),
        (&"\"other\"".to_string(), "200"),
    ] {
        let code = curl(&[
            "--http2",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-H",
            &format!("If-None-Match: W/\"x\", {tag}"),
            &url,
        ]);
        assert_eq!(code, want, "If-None-Match: {tag}");
    }
    // HEAD: the head alone (curl waits for no body).
    let head_only = curl(&["--http2", "-I", "-w", "|%{size_download}", &url]);
    assert!(head_only.starts_with("HTTP/2 200"), "{head_only}");
    assert!(head_only.ends_with("|0"), "{head_only}");
    let code = |extra: &[&str], url: &str| {
        let mut a = vec![
            "--http2",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code} %{http_version}",
        ];
        a.extend_from_slice(extra);
        a.push(url);
        curl(&a)
    };
    let other = format!("https://127.0.0.1:{}/other", floor.port);
    assert_eq!(code(&[], &other), "404 2");
    assert_eq!(code(&["-X", "DELETE"], &url), "405 2");
    assert_eq!(code(&["--http1.1"], &url), "200 1.1");
    let _ = std::fs::remove_dir_all(dir);
}

/// `--tls` with `--sse`: the gzip-coded stream over TLS, read by curl,
/// decodes to the current version and then the change (through rustls's
/// connection, and with `--own-records`).
#[test]
fn tls_sse_streams_the_changes() {
    tls_sse("");
    tls_sse("--own-records");
}

fn tls_sse(mode: &str) {
    let file = feed_file(&format!("tls{mode}"));
    let dir = file.parent().expect("its directory").to_path_buf();
    let (cert, key) = cert(&dir);
    let spec = format!("doc={}", file.to_str().expect("a UTF-8 path"));
    let mut args = vec!["--sse", &spec, "--tls", &cert, &key];
    args.extend([mode].into_iter().filter(|m| !m.is_empty()));
    let floor = start_with(&args);
    let url = format!("https://127.0.0.1:{}/feeds/doc/events", floor.port);
    let mut child = Command::new("curl")
        .args(["-skN", "--compressed", "--max-time", "10", &url])
        .stdout(Stdio::piped())
        .spawn()
        .expect("curl runs");
    let mut out = child.stdout.take().expect("its output");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = out.read(&mut buf) {
            if tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut got = Vec::new();
    let mut until = |want: &[u8]| {
        while !got.windows(want.len()).any(|w| w == want) {
            let more = rx
                .recv_timeout(WAIT)
                .unwrap_or_else(|_| panic!("no {want:?} in {got:?}"));
            got.extend_from_slice(&more);
        }
    };
    until(event(1, r#"{"v":1, "rows":[1,2,3]}"#).as_bytes());
    rename_over(&file, b"{\"v\":2}");
    let both = event(1, r#"{"v":1, "rows":[1,2,3]}"#) + &event(2, r#"{"v":2}"#);
    until(both.as_bytes());
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(dir);
}
