//! `--sse` on a gzip-coded event stream, over loopback: a small server in
//! the test writes the stream as a server that compresses for many
//! subscribers does (the gzip header, then each event one raw deflate
//! segment from a fresh compressor ended by a sync flush, the same bytes
//! to every subscriber) when the request asks for gzip, and variants: a
//! continuous compressor per subscriber, every byte its own chunk, a
//! corrupt segment, another coding, the stream's end with its trailer.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use flate2::{Compress, Compression, FlushCompress};

use crate::sse::{read_head, watch};
use crate::support::bench;

/// The 10-byte gzip header (no flags, OS unknown).
const HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];

/// What the server sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Independent segments, one compression per event for everyone.
    Shared,
    /// One continuous compressor per subscriber, sync-flushed per event.
    Dependent,
    /// Every body byte its own chunk, written on its own.
    Bytewise,
    /// The first event's segment has an invalid block type.
    Corrupt,
    /// `Content-Encoding: br` (the body is plain).
    Brotli,
    /// The first event, then the end of the member (with a wrong ISIZE
    /// when false) and of the body.
    End(bool),
}

/// `plain` through `c`, ended by a sync flush (RFC 1951 §3.2.4).
fn sync(c: &mut Compress, plain: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(plain.len() + 1024);
    let start = c.total_in();
    while ((c.total_in() - start) as usize) < plain.len() {
        let taken = (c.total_in() - start) as usize;
        out.reserve(64 * 1024);
        c.compress_vec(&plain[taken..], &mut out, FlushCompress::None)
            .unwrap();
    }
    loop {
        out.reserve(64 * 1024);
        c.compress_vec(&[], &mut out, FlushCompress::Sync).unwrap();
        if out.len() < out.capacity() {
            break;
        }
    }
    out
}

/// One independent segment.
fn segment(plain: &[u8]) -> Vec<u8> {
    sync(&mut Compress::new(Compression::default(), false), plain)
}

/// One chunk of a chunked body, or one per byte.
fn chunked(body: &[u8], bytewise: bool) -> Vec<Vec<u8>> {
    let frame = |part: &[u8]| {
        let mut out = format!("{:x}\r\n", part.len()).into_bytes();
        out.extend_from_slice(part);
        out.extend_from_slice(b"\r\n");
        out
    };
    if bytewise {
        body.chunks(1).map(frame).collect()
    } else {
        vec![frame(body)]
    }
}

/// A subscriber: its socket, its compressor (`Dependent`), whether it
/// asked for gzip, and the plain bytes it was sent.
struct Subscriber {
    stream: TcpStream,
    compress: Option<Compress>,
    gzip: bool,
}

impl Subscriber {
    /// Writes `event`, whose shared segment is `shared`.
    fn send(&mut self, mode: Mode, event: &[u8], shared: &[u8]) -> bool {
        let body = match (&mut self.compress, self.gzip) {
            (Some(c), true) => sync(c, event),
            (None, true) => shared.to_vec(),
            (_, false) => event.to_vec(),
        };
        chunked(&body, mode == Mode::Bytewise)
            .iter()
            .all(|chunk| self.stream.write_all(chunk).is_ok())
    }
}

/// Starts the server publishing `file`; returns its stream's URL.
fn gzip_server(file: std::path::PathBuf, mode: Mode) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/events", listener.local_addr().unwrap());
    let subscribers: Arc<Mutex<Vec<Subscriber>>> = Arc::default();
    let event = |doc: &[u8]| {
        let text = String::from_utf8_lossy(doc).replace('\n', " ");
        format!("id: x\ndata: {text}\n\n").into_bytes()
    };
    let watched = subscribers.clone();
    watch(file.clone(), move |now| {
        let plain = event(now);
        // Compressed once, the same bytes for every subscriber.
        let shared = segment(&plain);
        watched
            .lock()
            .unwrap()
            .retain_mut(|s| s.send(mode, &plain, &shared));
    });
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            stream.set_nodelay(true).unwrap();
            let head = read_head(&mut stream);
            let gzip = String::from_utf8_lossy(&head)
                .to_ascii_lowercase()
                .contains("\r\naccept-encoding: gzip\r\n");
            let mut subscribers = subscribers.lock().unwrap();
            let coding = match (mode, gzip) {
                (Mode::Brotli, _) => "Content-Encoding: br\r\n",
                (_, true) => "Content-Encoding: gzip\r\nVary: Accept-Encoding\r\n",
                (_, false) => "",
            };
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n{coding}\
                 Transfer-Encoding: chunked\r\n\r\n"
            );
            if stream.write_all(head.as_bytes()).is_err() {
                continue;
            }
            let plain = event(&std::fs::read(&file).unwrap());
            let mut sub = Subscriber {
                stream,
                compress: (mode == Mode::Dependent)
                    .then(|| Compress::new(Compression::default(), false)),
                gzip: gzip && mode != Mode::Brotli,
            };
            let mut first = if sub.gzip {
                HEADER.to_vec()
            } else {
                Vec::new()
            };
            first.extend(match (mode, sub.gzip) {
                (_, false) => plain.clone(),
                (Mode::Corrupt, _) => vec![0x07, 1, 2, 3, 0, 0, 0xff, 0xff],
                (Mode::Dependent, _) => sync(sub.compress.as_mut().unwrap(), &plain),
                _ => segment(&plain),
            });
            if let Mode::End(good) = mode {
                let mut crc = flate2::Crc::new();
                crc.update(&plain);
                first.extend_from_slice(&[0x03, 0x00]);
                first.extend_from_slice(&crc.sum().to_le_bytes());
                let isize = plain.len() as u32 + u32::from(!good);
                first.extend_from_slice(&isize.to_le_bytes());
            }
            let mut ok = chunked(&first, mode == Mode::Bytewise)
                .iter()
                .all(|chunk| sub.stream.write_all(chunk).is_ok());
            if let Mode::End(_) = mode {
                let _ = sub.stream.write_all(b"0\r\n\r\n");
                ok = false;
            }
            if ok {
                subscribers.push(sub);
            }
        }
    });
    url
}

/// Runs `--sse N` against a server in `mode`, asking for gzip with `-H`
/// when `ask`; returns the report's `sse` object.
fn run(mode: Mode, n: &str, rounds: &str, ask: bool) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("doc.json");
    let long = "abcdefghij".repeat(500);
    std::fs::write(
        &file,
        format!("{{\"rows\": [1, 2, 3], \"long\": \"{long}\"}}\n"),
    )
    .unwrap();
    let url = gzip_server(file.clone(), mode);
    let mut argv = vec![
        "--sse",
        n,
        "--sse-file",
        file.to_str().unwrap(),
        "--rounds",
        rounds,
        "-t",
        "1",
        "--ramp",
        "100ms",
        "--timeout",
        "5s",
    ];
    if ask {
        argv.extend(["-H", "Accept-Encoding: gzip"]);
    }
    argv.push(&url);
    let report = bench(&argv);
    assert_eq!(report["mode"], "sse");
    report["sse"].clone()
}

#[test]
fn gzip_arrivals_equal_plain_ones_with_one_inflate_per_segment() {
    let plain = run(Mode::Shared, "4", "3", false);
    let gzip = run(Mode::Shared, "4", "3", true);
    for sse in [&plain, &gzip] {
        assert_eq!(sse["ready"], 4, "{sse}");
        assert_eq!(sse["complete_updates"], 3, "{sse}");
        assert_eq!(sse["missing"], 0, "{sse}");
        assert_eq!(sse["latency_us"]["count"], 12, "{sse}");
        assert!(sse["errors"].as_object().unwrap().is_empty(), "{sse}");
    }
    // Without -H the server sent no gzip.
    assert!(plain.get("gzip").is_none(), "{plain}");
    let counts = &gzip["gzip"];
    assert_eq!(counts["streams"], 4, "{gzip}");
    // The first version and three updates, each received by 4
    // subscribers on one thread and inflated once.
    assert_eq!(counts["segments"], 16, "{gzip}");
    assert_eq!(counts["inflated"], 4, "{gzip}");
    assert_eq!(counts["continuous"], 0, "{gzip}");
    let compressed = counts["compressed_bytes"].as_u64().unwrap();
    let plain_bytes = counts["plain_bytes"].as_u64().unwrap();
    assert!(compressed * 10 < plain_bytes, "{gzip}");
}

#[test]
fn a_stream_split_at_every_byte_gives_every_arrival() {
    let sse = run(Mode::Bytewise, "3", "2", true);
    assert_eq!(sse["ready"], 3, "{sse}");
    assert_eq!(sse["complete_updates"], 2, "{sse}");
    assert_eq!(sse["latency_us"]["count"], 6, "{sse}");
    assert_eq!(sse["gzip"]["inflated"], 3, "{sse}");
    assert_eq!(sse["gzip"]["continuous"], 0, "{sse}");
}

#[test]
fn dependent_segments_are_read_through_the_fallback() {
    let sse = run(Mode::Dependent, "3", "2", true);
    assert_eq!(sse["ready"], 3, "{sse}");
    assert_eq!(sse["complete_updates"], 2, "{sse}");
    assert_eq!(sse["latency_us"]["count"], 6, "{sse}");
    assert!(sse["errors"].as_object().unwrap().is_empty(), "{sse}");
    assert!(sse["lost"].as_object().unwrap().is_empty(), "{sse}");
    // Each subscriber's updates refer to its first event.
    assert_eq!(sse["gzip"]["continuous"], 3, "{sse}");
}

#[test]
fn a_corrupt_gzip_stream_is_an_error() {
    let sse = run(Mode::Corrupt, "3", "1", true);
    assert_eq!(sse["ready"], 0, "{sse}");
    assert_eq!(sse["errors"]["gzip"], 3, "{sse}");
}

#[test]
fn another_content_coding_is_refused() {
    let sse = run(Mode::Brotli, "3", "1", true);
    assert_eq!(sse["ready"], 0, "{sse}");
    assert_eq!(sse["errors"]["content_encoding"], 3, "{sse}");
}

#[test]
fn the_end_of_the_stream_checks_its_trailer() {
    let sse = run(Mode::End(true), "2", "1", true);
    assert_eq!(sse["lost"]["closed"], 2, "{sse}");
    let sse = run(Mode::End(false), "2", "1", true);
    assert_eq!(sse["lost"]["gzip"], 2, "{sse}");
}
