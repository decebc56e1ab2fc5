//! A minimal event-stream server for measuring `--sse` itself:
//! `cargo run --release -p celer-bench --example sse_server -- PORT FILE`.
//!
//! Serves `text/event-stream` on every path of 127.0.0.1:PORT and pushes
//! FILE (a JSON document, its newlines turned to spaces) as one event to
//! every subscriber whenever it changes (polled every 5 ms). A request
//! with `Accept-Encoding: gzip` gets the stream gzip-coded as a fan-out
//! server sends it: the gzip header, then each event one raw deflate
//! segment from a fresh compressor (level 6) ended by a sync flush,
//! compressed once per update and the same bytes for every subscriber.
//! Each event is one HTTP/1.1 chunk. It does the least a server can, so
//! that the load generator's own CPU time per delivery is what a run of
//! `celer bench --sse` against it shows.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flate2::{Compress, Compression, FlushCompress};

/// The gzip header (RFC 1952 §2.3): no flags, OS unknown.
const HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];

/// A subscriber and whether it asked for gzip.
struct Subscriber {
    stream: TcpStream,
    gzip: bool,
}

/// One segment: `plain` through a fresh raw compressor, sync-flushed.
fn segment(plain: &[u8]) -> Vec<u8> {
    let mut c = Compress::new(Compression::new(6), false);
    let mut out = Vec::with_capacity(plain.len() + 1024);
    while (c.total_in() as usize) < plain.len() {
        let taken = c.total_in() as usize;
        out.reserve(64 * 1024);
        c.compress_vec(&plain[taken..], &mut out, FlushCompress::None)
            .expect("deflate");
    }
    loop {
        out.reserve(64 * 1024);
        c.compress_vec(&[], &mut out, FlushCompress::Sync)
            .expect("deflate");
        if out.len() < out.capacity() {
            return out;
        }
    }
}

/// One HTTP/1.1 chunk.
fn chunk(body: &[u8]) -> Vec<u8> {
    let mut out = format!("{:x}\r\n", body.len()).into_bytes();
    out.extend_from_slice(body);
    out.extend_from_slice(b"\r\n");
    out
}

/// The event carrying `doc`.
fn event(doc: &[u8]) -> Vec<u8> {
    let mut out = b"data: ".to_vec();
    out.extend(doc.iter().map(|&b| if b == b'\n' { b' ' } else { b }));
    out.extend_from_slice(b"\n\n");
    out
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(port), Some(file)) = (args.next(), args.next()) else {
        eprintln!("usage: sse_server PORT FILE");
        std::process::exit(2);
    };
    let listener = TcpListener::bind(format!("127.0.0.1:{port}")).expect("bind");
    let subscribers: Arc<Mutex<Vec<Subscriber>>> = Arc::default();
    let current = Arc::new(Mutex::new(std::fs::read(&file).expect("read FILE")));
    {
        let (subscribers, current, file) = (subscribers.clone(), current.clone(), file.clone());
        std::thread::spawn(move || {
            loop {
                std::thread::sleep(Duration::from_millis(5));
                let Ok(now) = std::fs::read(&file) else {
                    continue;
                };
                if now.is_empty() || *current.lock().unwrap() == now {
                    continue;
                }
                let plain = event(&now);
                let (plain_chunk, gzip_chunk) = (chunk(&plain), chunk(&segment(&plain)));
                *current.lock().unwrap() = now;
                subscribers.lock().unwrap().retain_mut(|s| {
                    let bytes = if s.gzip { &gzip_chunk } else { &plain_chunk };
                    s.stream.write_all(bytes).is_ok()
                });
            }
        });
    }
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { continue };
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
            head.push(byte[0]);
        }
        if head.is_empty() {
            continue;
        }
        let gzip = String::from_utf8_lossy(&head)
            .to_ascii_lowercase()
            .contains("\r\naccept-encoding: gzip");
        let mut out = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n{}Transfer-Encoding: chunked\r\n\r\n",
            if gzip {
                "Content-Encoding: gzip\r\nVary: Accept-Encoding\r\n"
            } else {
                ""
            }
        )
        .into_bytes();
        let mut subscribers = subscribers.lock().unwrap();
        let plain = event(&current.lock().unwrap());
        if gzip {
            let mut first = HEADER.to_vec();
            first.extend(segment(&plain));
            out.extend(chunk(&first));
        } else {
            out.extend(chunk(&plain));
        }
        if stream.write_all(&out).is_ok() {
            subscribers.push(Subscriber { stream, gzip });
        }
    }
}
