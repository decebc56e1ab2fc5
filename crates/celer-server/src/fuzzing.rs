//! Entry points for the fuzz targets in `fuzz/`: each takes arbitrary bytes,
//! drives one parser or a whole connection with them, and asserts
//! properties, not only the absence of a crash.
//!
//! Built with the `fuzzing` feature (the fuzz workspace turns it on) and in
//! this crate's tests, which replay every input checked in under
//! `fuzz/corpus/` through the same functions, so a crash the fuzzer found
//! once stays fixed on stable Rust without the fuzzer.
//!
//! - [`request_head`]: `http1::parse`. The outcome is the same whole, byte
//!   by byte and at every split; a parsed head respects every limit; every
//!   field value it made without a check is one `HeaderValue` accepts.
//! - [`request_body`]: `http1::decode`, Content-Length and chunked. The
//!   outcome is the same whole and in pieces; no more data comes out than
//!   went in, nor more than the body limit.
//! - [`connection`]: the HTTP/1.1 engine on an in-memory stream, with time
//!   paused, the client closing its side or waiting: the connection ends
//!   (no hang) and everything written back is a sequence of HTTP/1.1
//!   responses.
//! - [`http2_connection`]: the HTTP/2 engine the same way, after the
//!   client preface: the connection ends, and what it writes back is
//!   HTTP/2 frames a server may send, on the streams it may send them on.
//! - [`tls_records`]: the TLS record layer against rustls's client, both
//!   ways, across suites, lengths, sequence numbers and key updates: every
//!   byte arrives unchanged.
//! - [`ws_frame`]: the WebSocket frame decoder (`ws::frame::Decoder`). The
//!   outcome is the same whole, byte by byte and at every split; text is
//!   UTF-8, messages respect the limit, control payloads are at most 125
//!   bytes, and a decoded message framed again decodes to itself.
//! - [`fastcgi_session`], [`scgi_header`]: the gateway parsers (their
//!   properties are documented in `gateway::fuzz`).
//! - [`hpack_block`]: the HPACK decoder on a sequence of blocks, and the
//!   encoder on what it decoded. Every decoded field is one HTTP/2 allows,
//!   the list respects its limit, and the regular fields, encoded and
//!   decoded again by a second pair, come back the same, block after block.

use std::convert::Infallible;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{HeaderValue, Request, Response, StatusCode};
use http_body::Body;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower_service::Service;

use crate::Incoming;
use crate::common::ConnConfig;
pub use crate::gateway::fuzz::{fastcgi_session, scgi_header};
use crate::http1::decode::{Decoded, Decoder};
use crate::http1::parse::{self, Parsed};
use crate::http1::serve_connection;
use crate::limits::Limits;
use crate::shutdown::Shutdown;

/// Inputs longer than this are split at a few points only, not at every
/// byte (each split parses the input again from its start).
const EVERY_SPLIT_MAX: usize = 512;

/// Tight limits, so that inputs of a few hundred bytes reach every edge.
fn small_limits() -> Limits {
    Limits {
        max_head_bytes: 512,
        max_headers: 8,
        max_uri_bytes: 64,
        max_body_bytes: Some(256),
        max_chunk_ext_bytes: 32,
        max_drain_bytes: 256,
        head_timeout: Duration::from_secs(2),
        body_timeout: Duration::from_secs(2),
        keep_alive_timeout: Duration::from_secs(2),
        write_timeout: Duration::from_secs(2),
        // HTTP/2's (only the HTTP/2 target reads them): two streams at
        // once, small windows, few cancelled streams before rapid reset.
        h2_max_concurrent_streams: 2,
        h2_stream_window: 1024,
        h2_connection_window: 2048,
        h2_max_cancelled_streams: 4,
        ..Limits::default()
    }
}

/// The limits chosen by the first byte of a fuzz input, and the rest.
fn split_input(data: &[u8]) -> (Limits, &[u8]) {
    match data.split_first() {
        Some((&selector, rest)) if selector & 1 == 1 => (small_limits(), rest),
        Some((_, rest)) => (Limits::default(), rest),
        None => (Limits::default(), data),
    }
}

/// The piece sizes an input is fed in: whole, byte by byte and every split
/// for short inputs; whole, halves and a few odd sizes for long ones.
fn steps(len: usize) -> Vec<usize> {
    if len <= EVERY_SPLIT_MAX {
        (1..=len.max(1)).collect()
    } else {
        vec![len, len / 2 + 1, 7, 64, 1000]
    }
}

// ===== request heads =====

/// Parses `data` (after a first byte choosing the limits) as a request head
/// fed in pieces of every size; panics if two disagree or a limit is passed.
pub fn request_head(data: &[u8]) {
    let (limits, input) = split_input(data);
    let whole = parse_in_pieces(input, input.len(), &limits);
    for step in steps(input.len()) {
        let parts = parse_in_pieces(input, step, &limits);
        assert_eq!(
            parts, whole,
            "pieces of {step} disagree with the whole input"
        );
    }
    if let HeadOutcome::Complete { head_len, .. } = &whole {
        assert!(*head_len <= limits.max_head_bytes, "head over its limit");
    }
}

/// What parsing an input came to, in a form two runs can compare.
#[derive(Debug, PartialEq, Eq)]
enum HeadOutcome {
    Complete { head_len: usize, summary: String },
    Partial,
    Rejected(StatusCode, &'static str),
}

fn parse_in_pieces(input: &[u8], step: usize, limits: &Limits) -> HeadOutcome {
    let mut buf = BytesMut::new();
    for piece in input.chunks(step.max(1)) {
        buf.extend_from_slice(piece);
        let before = buf.len();
        let mut request = Request::new(Incoming::empty());
        match parse::parse_head(&mut buf, limits, &mut request) {
            Ok(Parsed::Complete(head)) => {
                check_request(&request, limits);
                return HeadOutcome::Complete {
                    head_len: before - buf.len(),
                    summary: format!(
                        "{} {} {:?} {:?} ka={} ec={} up={} {:?}",
                        request.method(),
                        request.uri(),
                        request.version(),
                        head.body,
                        head.keep_alive,
                        head.expect_continue,
                        head.upgrade,
                        request.headers()
                    ),
                };
            }
            Ok(Parsed::Partial) => {}
            Err(reject) => {
                assert!(
                    matches!(
                        reject.status.as_u16(),
                        400 | 413 | 414 | 417 | 431 | 501 | 505
                    ),
                    "unexpected rejection status {}",
                    reject.status
                );
                return HeadOutcome::Rejected(reject.status, reject.reason);
            }
        }
    }
    HeadOutcome::Partial
}

/// A parsed request respects the limits, and each of its field values is
/// one `HeaderValue::from_bytes` accepts (the parser builds them without
/// that check).
fn check_request(request: &Request<Incoming>, limits: &Limits) {
    assert!(
        request.headers().len() <= limits.max_headers,
        "too many fields"
    );
    let target = request
        .uri()
        .path_and_query()
        .map_or(0, |target| target.as_str().len());
    assert!(
        target <= limits.max_uri_bytes.max(1),
        "target over its limit"
    );
    for value in request.headers().values() {
        assert!(
            HeaderValue::from_bytes(value.as_bytes()).is_ok(),
            "field value {value:?} is not a valid HeaderValue"
        );
    }
}

// ===== request bodies =====

/// Decodes `data` as a request body: after a first byte choosing the limits
/// and the framing (chunked, or a Content-Length from the next two bytes),
/// fed in pieces of every size; panics if two disagree or a limit is passed.
pub fn request_body(data: &[u8]) {
    let (limits, rest) = split_input(data);
    let chunked = data.first().is_none_or(|b| b & 2 == 0);
    let (len, input) = match rest {
        [hi, lo, input @ ..] if !chunked => (u64::from(u16::from_be_bytes([*hi, *lo])), input),
        _ => (0, rest),
    };
    let make = || {
        if chunked {
            Decoder::chunked()
        } else {
            Decoder::length(len)
        }
    };
    let whole = decode_in_pieces(make(), input, input.len(), &limits);
    for step in steps(input.len()) {
        let parts = decode_in_pieces(make(), input, step, &limits);
        assert_eq!(
            parts, whole,
            "pieces of {step} disagree with the whole input"
        );
    }
    if let BodyOutcome::Done { data, rest, .. } | BodyOutcome::Partial { data, rest } = &whole {
        assert!(data.len() + rest.len() <= input.len(), "more out than in");
        if let Some(max) = limits.max_body_bytes.filter(|_| chunked) {
            assert!(data.len() as u64 <= max, "body over its limit");
        }
        if !chunked {
            assert!(data.len() as u64 <= len, "more than the Content-Length");
        }
    }
}

/// What decoding an input came to, in a form two runs can compare.
#[derive(Debug, PartialEq, Eq)]
enum BodyOutcome {
    Done {
        data: Vec<u8>,
        trailers: Vec<(String, Vec<u8>)>,
        rest: Vec<u8>,
    },
    Partial {
        data: Vec<u8>,
        rest: Vec<u8>,
    },
    Rejected(StatusCode, &'static str),
}

fn decode_in_pieces(
    mut decoder: Decoder,
    input: &[u8],
    step: usize,
    limits: &Limits,
) -> BodyOutcome {
    let mut buf = BytesMut::new();
    let mut data = Vec::new();
    let mut trailers = Vec::new();
    let mut pieces = input.chunks(step.max(1));
    loop {
        match decoder.decode(&mut buf, limits) {
            Ok(Decoded::Data(bytes)) => {
                assert!(!bytes.is_empty(), "an empty data piece");
                data.extend_from_slice(&bytes);
            }
            Ok(Decoded::Trailers(fields)) => {
                assert!(
                    fields.len() <= limits.max_headers,
                    "too many trailer fields"
                );
                trailers = fields
                    .iter()
                    .map(|(name, value)| (name.to_string(), value.as_bytes().to_vec()))
                    .collect();
            }
            Ok(Decoded::End) => {
                let mut rest = buf.to_vec();
                pieces.for_each(|piece| rest.extend_from_slice(piece));
                return BodyOutcome::Done {
                    data,
                    trailers,
                    rest,
                };
            }
            Ok(Decoded::Partial) => match pieces.next() {
                Some(piece) => buf.extend_from_slice(piece),
                None => {
                    return BodyOutcome::Partial {
                        data,
                        rest: buf.to_vec(),
                    };
                }
            },
            Err(reject) => return BodyOutcome::Rejected(reject.status, reject.reason),
        }
    }
}

// ===== whole connections =====

/// Serves `data` as what a client sent on one HTTP/1.1 connection, with
/// time paused. The first byte chooses: bit 0 the small limits, bit 1
/// whether the client keeps its side open once it has written (so that
/// the connection ends on the server's deadlines, not on the end of the
/// stream), the rest the size of the client's writes. Panics if the
/// connection outlives an hour of virtual time or writes back anything but
/// HTTP/1.1 responses.
pub fn connection(data: &[u8]) {
    let (limits, input) = split_input(data);
    let selector = data.first().copied().unwrap_or(0);
    let half_close = selector & 2 == 0;
    let step = usize::from(selector >> 2).max(1);
    let output = paused_runtime().block_on(async {
        let (client, server) = tokio::io::duplex(16 * 1024);
        let config = Arc::new(ConnConfig {
            limits,
            http2: false,
            ..ConnConfig::default()
        });
        let shutdown = Shutdown::new();
        let serve = serve_connection(server, Echo, config, &shutdown);
        let all = async { tokio::join!(serve, client_side(client, input, step, half_close)).1 };
        tokio::time::timeout(Duration::from_secs(3600), all)
            .await
            .expect("the connection did not end within an hour of virtual time")
    });
    check_responses(&output);
}

/// A current-thread runtime whose clock is paused: it jumps to the next
/// timer whenever every task waits, so deadlines pass at once.
fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime")
}

/// The client of a fuzzed connection: writes `input` in pieces of `step`
/// bytes, then closes its side if `half_close` (else keeps it open until
/// the server closes, as most clients do), and returns all the server
/// wrote.
async fn client_side(
    client: tokio::io::DuplexStream,
    input: &[u8],
    step: usize,
    half_close: bool,
) -> Vec<u8> {
    let (mut reader, mut writer) = tokio::io::split(client);
    let write = async {
        for piece in input.chunks(step) {
            if writer.write_all(piece).await.is_err() {
                return;
            }
        }
        if half_close {
            let _ = writer.shutdown().await;
        }
    };
    let read = async {
        let mut output = Vec::new();
        let _ = reader.read_to_end(&mut output).await;
        output
    };
    // The write half lives until both are done: a client that does not
    // close its side keeps it open until the server closes.
    tokio::join!(write, read).1
}

/// Checks that `output` is a sequence of HTTP/1.1 response heads, each
/// followed by its body as its framing says; the last may be cut short
/// (the engine closes a connection whose body failed).
fn check_responses(mut output: &[u8]) {
    while !output.is_empty() {
        assert!(
            output.starts_with(b"HTTP/1.1 "),
            "output does not start a response: {:?}",
            String::from_utf8_lossy(&output[..output.len().min(64)])
        );
        let Some(end) = output.windows(4).position(|w| w == b"\r\n\r\n") else {
            panic!("a response head without its end");
        };
        let head = std::str::from_utf8(&output[..end]).expect("a response head in ASCII");
        let code: u16 = head[9..12].parse().expect("a three-digit status");
        assert!((100..600).contains(&code), "status {code}");
        output = &output[end + 4..];
        if code < 200 || code == 204 || code == 304 || head.contains(HEAD_MARK) {
            continue;
        }
        let field = |name: &str| {
            head.lines().skip(1).find_map(|line| {
                let (key, value) = line.split_once(':')?;
                key.eq_ignore_ascii_case(name).then(|| value.trim())
            })
        };
        if let Some(len) = field("content-length") {
            let len: usize = len.parse().expect("a numeric content-length");
            // A body cut short ends the output.
            output = &output[len.min(output.len())..];
        } else if field("transfer-encoding").is_some() {
            output = skip_chunked(output);
        } else {
            // Close-delimited: the rest is the body.
            return;
        }
    }
}

/// The bytes after a chunked body at the front of `output` (an empty slice
/// when it is cut short).
fn skip_chunked(mut output: &[u8]) -> &[u8] {
    loop {
        let Some(line_end) = output.windows(2).position(|w| w == b"\r\n") else {
            return &[];
        };
        let line = std::str::from_utf8(&output[..line_end]).expect("a chunk size in ASCII");
        let size = usize::from_str_radix(line, 16).expect("a hexadecimal chunk size");
        output = &output[line_end + 2..];
        if size == 0 {
            // Trailer fields, then the empty line.
            let Some(end) = output.windows(2).position(|w| w == b"\r\n") else {
                return &[];
            };
            if end == 0 {
                return &output[2..];
            }
            let Some(trailers_end) = output.windows(4).position(|w| w == b"\r\n\r\n") else {
                return &[];
            };
            return &output[trailers_end + 4..];
        }
        if output.len() < size + 2 {
            return &[];
        }
        assert_eq!(
            &output[size..size + 2],
            b"\r\n",
            "chunk data not followed by CRLF"
        );
        output = &output[size + 2..];
    }
}

/// The field [`Echo`] marks its answers to HEAD with, so that
/// [`check_responses`] knows they carry no body.
const HEAD_MARK: &str = "x-fuzz-head";

/// The service behind the fuzzed connection: a request to a target that
/// starts with `/e` gets its own body back, streamed; any other gets the
/// number of body bytes it sent, once all have been read.
#[derive(Debug, Clone, Copy)]
struct Echo;

impl Echo {
    async fn answer(request: Request<Incoming>) -> Response<Incoming> {
        if request.uri().path().starts_with("/e") {
            return Response::new(request.into_body());
        }
        let mut body = request.into_body();
        let mut count = 0;
        while let Some(frame) = poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
            match frame {
                Ok(frame) => count += frame.data_ref().map_or(0, Bytes::len),
                Err(_) => break,
            }
        }
        Response::new(Incoming::full(Bytes::from(count.to_string())))
    }
}

impl Service<Request<Incoming>> for Echo {
    type Response = Response<Incoming>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Incoming>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Incoming>) -> Self::Future {
        let head = request.method() == http::Method::HEAD;
        Box::pin(async move {
            let mut response = Echo::answer(request).await;
            if head {
                response
                    .headers_mut()
                    .insert(HEAD_MARK, HeaderValue::from_static("1"));
            }
            Ok(response)
        })
    }
}

// ===== whole HTTP/2 connections =====

/// The client connection preface (RFC 9113 §3.4), put before every
/// HTTP/2 input so that the fuzzer's bytes are frames from the start.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Serves the client preface and then `data` as what a client sent on one
/// HTTP/2 connection, with time paused. The first byte chooses: bit 0 the
/// small limits, bit 1 a shutdown a virtual second in, bit 2 whether the
/// client closes its side once it has written (else it waits for the
/// server to close, as HTTP/2 clients do), the rest the size of the
/// client's writes. Panics if the connection outlives an hour of virtual
/// time or writes back anything [`check_frames`] refuses.
pub fn http2_connection(data: &[u8]) {
    let (limits, input) = split_input(data);
    let selector = data.first().copied().unwrap_or(0);
    let shutdown_early = selector & 2 == 2;
    let half_close = selector & 4 == 4;
    let step = usize::from(selector >> 3).max(1);
    let output = paused_runtime().block_on(async {
        let (client, server) = tokio::io::duplex(16 * 1024);
        let config = Arc::new(ConnConfig {
            limits,
            http2: true,
            ..ConnConfig::default()
        });
        let shutdown = Shutdown::new();
        let serve = crate::http2::serve_connection(server, Echo, config, shutdown.watch());
        let stop = async {
            if shutdown_early {
                tokio::time::sleep(Duration::from_secs(1)).await;
                shutdown.trigger();
            }
        };
        let whole = [H2_PREFACE, input].concat();
        let client = client_side(client, &whole, step, half_close);
        let all = async { tokio::join!(serve, stop, client).2 };
        tokio::time::timeout(Duration::from_secs(3600), all)
            .await
            .expect("the connection did not end within an hour of virtual time")
    });
    check_frames(&output, input);
}

/// One frame's header (RFC 9113 §4.1).
#[derive(Debug, Clone, Copy)]
struct FrameHead {
    len: usize,
    kind: u8,
    flags: u8,
    stream: u32,
}

/// Splits the frames off the front of `bytes`; the second half is a last
/// frame cut short (empty when every frame is whole).
fn frames(mut bytes: &[u8]) -> (Vec<(FrameHead, &[u8])>, &[u8]) {
    let mut found = Vec::new();
    while bytes.len() >= 9 {
        let head = FrameHead {
            len: usize::from(bytes[0]) << 16 | usize::from(bytes[1]) << 8 | usize::from(bytes[2]),
            kind: bytes[3],
            flags: bytes[4],
            stream: u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]) & 0x7fff_ffff,
        };
        if bytes.len() < 9 + head.len {
            break;
        }
        found.push((head, &bytes[9..9 + head.len]));
        bytes = &bytes[9 + head.len..];
    }
    (found, bytes)
}

/// Checks what the server wrote on an HTTP/2 connection whose client sent
/// `input` after the preface:
/// - it starts with the server's SETTINGS (not an acknowledgement);
/// - every frame is of a type a server sends (never PRIORITY, PUSH_PROMISE
///   or an unknown type) on the stream kind its type allows;
/// - no frame is longer than the largest frame size the client allowed;
/// - a header block is followed by its CONTINUATIONs and nothing between;
/// - HEADERS and DATA go only on streams the client opened with HEADERS,
///   DATA only after the response's HEADERS, and nothing after a frame
///   that ended the stream;
/// - after a GOAWAY, no stream past its last stream id gets an answer.
///
/// The last frame may be cut short: the engine may drop a connection with
/// bytes still unwritten, which its peer reads as the end.
fn check_frames(output: &[u8], input: &[u8]) {
    use std::collections::{HashMap, HashSet};
    const DATA: u8 = 0;
    const HEADERS: u8 = 1;
    const RST_STREAM: u8 = 3;
    const SETTINGS: u8 = 4;
    const PING: u8 = 6;
    const GOAWAY: u8 = 7;
    const WINDOW_UPDATE: u8 = 8;
    const CONTINUATION: u8 = 9;
    const END_STREAM: u8 = 0x1;
    const END_HEADERS: u8 = 0x4;

    // What the client's well-formed frames allow: the streams it opened
    // and the largest frame size it announced (never below the default).
    let mut max_frame = 16_384usize;
    let mut opened = HashSet::new();
    for (head, payload) in frames(input).0 {
        match head.kind {
            HEADERS => {
                opened.insert(head.stream);
            }
            SETTINGS if head.flags & 1 == 0 => {
                for setting in payload.chunks_exact(6) {
                    if u16::from_be_bytes([setting[0], setting[1]]) == 5 {
                        let value =
                            u32::from_be_bytes([setting[2], setting[3], setting[4], setting[5]]);
                        max_frame = max_frame.max(usize::try_from(value).unwrap_or(usize::MAX));
                    }
                }
            }
            _ => {}
        }
    }

    let (sent, _cut) = frames(output);
    let Some((first, _)) = sent.first() else {
        panic!("the server wrote no SETTINGS frame");
    };
    assert!(
        first.kind == SETTINGS && first.flags & 1 == 0 && first.stream == 0,
        "the server's first frame is not its SETTINGS: {first:?}"
    );
    // Per stream: whether the response's HEADERS went, and whether it ended.
    let mut answered: HashMap<u32, bool> = HashMap::new();
    let mut continuing: Option<u32> = None;
    let mut last_allowed = u32::MAX;
    for (head, payload) in &sent {
        assert!(
            head.len <= max_frame,
            "a frame over the client's size: {head:?}"
        );
        if let Some(stream) = continuing {
            assert!(
                head.kind == CONTINUATION && head.stream == stream,
                "a header block on stream {stream} interrupted by {head:?}"
            );
        }
        match head.kind {
            SETTINGS | PING | GOAWAY => assert_eq!(head.stream, 0, "{head:?} on a stream"),
            WINDOW_UPDATE => {}
            RST_STREAM => assert_ne!(head.stream, 0, "RST_STREAM on stream 0"),
            HEADERS | DATA => {
                let stream = head.stream;
                assert!(
                    stream % 2 == 1 && opened.contains(&stream),
                    "{head:?} on a stream the client did not open"
                );
                assert!(
                    stream <= last_allowed,
                    "{head:?} past the GOAWAY's last stream"
                );
                let ended = answered.get(&stream).copied();
                assert_ne!(ended, Some(true), "{head:?} after the stream ended");
                if head.kind == DATA {
                    assert_eq!(
                        ended,
                        Some(false),
                        "DATA before the response's HEADERS: {head:?}"
                    );
                }
                answered.insert(stream, head.flags & END_STREAM != 0);
            }
            CONTINUATION => assert!(continuing.is_some(), "a CONTINUATION out of a header block"),
            other => panic!("the server sent a frame of type {other}: {head:?}"),
        }
        if matches!(head.kind, HEADERS | CONTINUATION) {
            continuing = (head.flags & END_HEADERS == 0).then_some(head.stream);
        }
        if head.kind == GOAWAY && payload.len() >= 4 {
            let last =
                u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]) & 0x7fff_ffff;
            last_allowed = last_allowed.min(last);
        }
    }
}

/// Records sealed by Celer opened by rustls, and sealed by rustls opened by
/// Celer, on one TLS connection: the input picks the suite (TLS 1.3 or
/// 1.2; AES-GCM or ChaCha20-Poly1305), then a sequence of sends each way
/// of any length and key updates from either side. Every byte must arrive
/// unchanged, neither side may fail, and both `close_notify`s arrive.
pub fn tls_records(data: &[u8]) {
    crate::tls::differential::run(data);
}

/// The WebSocket frame decoder on arbitrary bytes. The first byte picks
/// the settings (bit 0: permessage-deflate; bit 1: small limits), the rest
/// is the client's stream.
pub fn ws_frame(data: &[u8]) {
    use crate::ws::frame::{DecodeConfig, Decoded, Decoder, Status};
    let Some((&flags, stream)) = data.split_first() else {
        return;
    };
    let config = DecodeConfig {
        max_frame_bytes: if flags & 2 != 0 { 64 } else { 1 << 20 },
        max_message_bytes: if flags & 2 != 0 { 100 } else { 1 << 20 },
        deflate: flags & 1 != 0,
        client_no_context_takeover: flags & 4 != 0,
    };
    /// What a decode run produced: items (debug-printed) and the error.
    fn run(
        config: DecodeConfig,
        pieces: &mut dyn Iterator<Item = &[u8]>,
    ) -> (Vec<String>, Option<String>) {
        let mut d = Decoder::new(config);
        let mut items = Vec::new();
        for piece in pieces {
            let mut rest = piece;
            loop {
                match d.decode(rest) {
                    Ok(Status::Complete(n, item)) => {
                        assert!(
                            n <= rest.len() && n > 0 || rest.is_empty(),
                            "used {n} of {}",
                            rest.len()
                        );
                        check(&config, &item);
                        items.push(format!("{item:?}"));
                        rest = &rest[n..];
                        if matches!(item, Decoded::Close(_)) {
                            return (items, None);
                        }
                    }
                    Ok(Status::Partial) => break,
                    Err(e) => return (items, Some(format!("{e:?}"))),
                }
            }
        }
        (items, None)
    }
    fn check(config: &DecodeConfig, item: &Decoded) {
        match item {
            Decoded::Message(m) => {
                assert!(m.as_bytes().len() <= config.max_message_bytes);
                if let crate::ws::Message::Text(t) = m {
                    assert!(std::str::from_utf8(t).is_ok(), "text is UTF-8");
                }
            }
            Decoded::Ping(p) | Decoded::Pong(p) => assert!(p.len() <= 125),
            Decoded::Close(Some(c)) => assert!(c.code.is_valid_on_wire() && c.reason.len() <= 123),
            Decoded::Close(None) => {}
        }
    }
    let whole = run(config, &mut std::iter::once(stream));
    let bytewise = run(config, &mut stream.chunks(1));
    assert_eq!(whole, bytewise, "byte by byte");
    let splits: Vec<usize> = if stream.len() <= 64 {
        (0..=stream.len()).collect()
    } else {
        vec![1, stream.len() / 3, stream.len() / 2, stream.len() - 1]
    };
    for at in splits {
        let (a, b) = stream.split_at(at);
        assert_eq!(whole, run(config, &mut [a, b].into_iter()), "split at {at}");
    }
    // A decoded uncompressed message, framed again, decodes to itself.
    let mut d = Decoder::new(config);
    let mut rest = stream;
    while let Ok(Status::Complete(n, item)) = d.decode(rest) {
        rest = &rest[n..];
        if let Decoded::Message(m) = item {
            let opcode = if matches!(m, crate::ws::Message::Text(_)) {
                1u8
            } else {
                2
            };
            let payload = m.as_bytes();
            let mut wire = vec![0x80 | opcode];
            match payload.len() {
                n if n < 126 => wire.push(0x80 | n as u8),
                n if n <= 0xFFFF => {
                    wire.push(0x80 | 126);
                    wire.extend_from_slice(&(n as u16).to_be_bytes());
                }
                n => {
                    wire.push(0x80 | 127);
                    wire.extend_from_slice(&(n as u64).to_be_bytes());
                }
            }
            wire.extend_from_slice(&[0, 0, 0, 0]);
            wire.extend_from_slice(payload);
            let mut again = Decoder::new(DecodeConfig {
                deflate: false,
                ..config
            });
            match again.decode(&wire) {
                Ok(Status::Complete(_, Decoded::Message(m2))) => assert_eq!(m, m2),
                // The inflated message may pass the frame limit uncompressed.
                Err(e) if e.code == crate::ws::CloseCode::TOO_BIG => {}
                other => panic!("re-framed message: {other:?}"),
            }
        }
        if rest.is_empty() {
            break;
        }
    }
}

// ===== HPACK =====

/// Decodes `data` as a sequence of HPACK header blocks on one decoder, and
/// sends the regular fields of each through an encoder and a second
/// decoder. The first byte picks the settings: bit 0 the table size we
/// advertise (256 or 4096 bytes), bit 1 the header list limit (200 bytes
/// or 16 KiB), bits 2 to 7 before which blocks the encoder's table size
/// changes (to sizes from 0 to 65,536, sometimes twice in a row). Then each
/// block is a length byte (255: the rest of the input) and that many bytes.
///
/// Panics if a decoded field is one HTTP/2 refuses (a name that is not a
/// valid lowercase one, a value `HeaderValue` refuses or with space or tab
/// at an edge, a pseudo-header value with NUL, CR or LF), if the fields
/// handed over pass the list limit, if a table passes its size, or if the
/// re-encoded fields do not decode to themselves (names, values, order,
/// sensitivity) with both tables the same size after every block.
pub fn hpack_block(data: &[u8]) {
    use crate::http2::hpack::{Decoded, Decoder, Encoder, Field};
    use http::{HeaderMap, HeaderName, header};

    /// Table sizes the peer may set for the encoder.
    const SIZES: [usize; 7] = [0, 40, 100, 256, 1000, 4096, 65_536];
    let Some((&selector, mut rest)) = data.split_first() else {
        return;
    };
    let table_size = if selector & 1 != 0 { 256 } else { 4096 };
    let max_list_size = if selector & 2 != 0 { 200 } else { 16 * 1024 };
    let mut decoder = Decoder::new(table_size);
    let mut encoder = Encoder::new();
    let mut echo = Decoder::new(4096);
    let mut encoder_max = 4096;
    let mut block_number = 0usize;
    while let Some((&len, tail)) = rest.split_first() {
        let len = if len == 255 {
            tail.len()
        } else {
            usize::from(len).min(tail.len())
        };
        let (block, after) = tail.split_at(len);
        rest = after;
        block_number += 1;

        // Arbitrary bytes: an error, or fields HTTP/2 allows.
        let mut fields = Vec::new();
        let mut sink = |field| fields.push(field);
        if decoder
            .decode(Bytes::copy_from_slice(block), max_list_size, &mut sink)
            .is_err()
        {
            // A compression error ends the connection, and the sequence.
            return;
        }
        assert!(
            decoder.table_size() <= table_size,
            "decoder table over its size"
        );
        let mut list_size = 0;
        let mut headers = HeaderMap::new();
        for field in fields {
            match field {
                Field::Pseudo(pseudo, value) => {
                    assert!(
                        !value.iter().any(|&b| matches!(b, 0 | b'\r' | b'\n')),
                        "{pseudo:?} value {value:?}"
                    );
                    list_size += pseudo.name().len() + value.len() + 32;
                }
                Field::Header(name, value) => {
                    let text = name.as_str().as_bytes();
                    assert!(
                        HeaderName::from_lowercase(text).is_ok() && !text.starts_with(b":"),
                        "name {name:?}"
                    );
                    assert!(
                        HeaderValue::from_bytes(value.as_bytes()).is_ok(),
                        "value {value:?}"
                    );
                    let blank = |b: Option<&u8>| matches!(b, Some(b' ' | b'\t'));
                    assert!(
                        !blank(value.as_bytes().first()) && !blank(value.as_bytes().last()),
                        "value {value:?}"
                    );
                    list_size += text.len() + value.len() + 32;
                    headers.append(name, value);
                }
            }
        }
        assert!(
            list_size <= max_list_size,
            "{list_size} bytes of fields handed over"
        );

        // The peer's table size changes now and then before a block.
        if (selector >> 2) & (1 << (block_number % 6)) != 0 {
            let size = SIZES[(block_number + usize::from(selector)) % SIZES.len()];
            encoder.set_max_table_size(size);
            encoder_max = size.min(4096);
            if !block_number.is_multiple_of(2) {
                let size = SIZES[(block_number * 3) % SIZES.len()];
                encoder.set_max_table_size(size);
                encoder_max = size.min(4096);
            }
        }

        // What was decoded, encoded and decoded again, is itself.
        let mut out = BytesMut::new();
        let mut want = Vec::new();
        if block_number.is_multiple_of(2) {
            encoder.encode_fields(&headers, &mut out);
        } else {
            let code = 100 + (block_number * 37 + len) % 900;
            let status = StatusCode::from_u16(code as u16).expect("a status code");
            encoder.encode_response(status, &headers, &mut out);
            want.push(format!(":status: {}", status.as_str()));
        }
        for (name, value) in &headers {
            // A sensitive value stays so; credentials become so (the
            // encoder never indexes them).
            let credential = [
                header::SET_COOKIE,
                header::COOKIE,
                header::AUTHORIZATION,
                header::PROXY_AUTHORIZATION,
            ]
            .contains(name);
            let sensitive = value.is_sensitive() || credential;
            want.push(format!("{name}: {:?} {sensitive}", value.as_bytes()));
        }
        let mut got = Vec::new();
        let echoed = echo.decode(out.freeze(), usize::MAX, &mut |field| {
            got.push(match field {
                Field::Pseudo(pseudo, value) => {
                    format!("{}: {}", pseudo.name(), String::from_utf8_lossy(&value))
                }
                Field::Header(name, value) => {
                    format!("{name}: {:?} {}", value.as_bytes(), value.is_sensitive())
                }
            })
        });
        assert_eq!(
            echoed,
            Ok(Decoded::default()),
            "re-encoded block {block_number}"
        );
        assert_eq!(got, want, "re-encoded block {block_number}");
        assert_eq!(
            encoder.table_size(),
            echo.table_size(),
            "tables out of step"
        );
        assert!(
            encoder.table_size() <= encoder_max,
            "encoder table over its size"
        );
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    /// Every input checked in for `target`: its corpus and its crashes
    /// turned into regression inputs.
    fn inputs(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
        let mut found = Vec::new();
        for dir in [
            root.join("corpus").join(target),
            root.join("regressions").join(target),
        ] {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries {
                let path = entry.unwrap().path();
                found.push((path.clone(), std::fs::read(&path).unwrap()));
            }
        }
        found.sort();
        found
    }

    fn replay(target: &str, run: fn(&[u8])) {
        let inputs = inputs(target);
        assert!(!inputs.is_empty(), "no inputs checked in for {target}");
        for (path, input) in inputs {
            eprintln!("{target}: {}", path.display());
            run(&input);
        }
    }

    #[test]
    fn request_head_corpus_replays() {
        replay("request_head", super::request_head);
    }

    #[test]
    fn request_body_corpus_replays() {
        replay("request_body", super::request_body);
    }

    #[test]
    fn connection_corpus_replays() {
        replay("connection", super::connection);
    }

    #[test]
    fn http2_connection_corpus_replays() {
        replay("http2_connection", super::http2_connection);
    }

    #[test]
    fn tls_records_corpus_replays() {
        replay("tls_records", super::tls_records);
    }

    #[test]
    fn ws_frame_corpus_replays() {
        replay("ws_frame", super::ws_frame);
    }

    #[test]
    fn fastcgi_session_corpus_replays() {
        replay("fastcgi_session", super::fastcgi_session);
    }

    #[test]
    fn scgi_header_corpus_replays() {
        replay("scgi_header", super::scgi_header);
    }

    #[test]
    fn hpack_block_corpus_replays() {
        replay("hpack_block", super::hpack_block);
    }
}
