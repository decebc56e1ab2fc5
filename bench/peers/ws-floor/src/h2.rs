//! `--h2`: the document of `--doc` over HTTP/2 (RFC 9113), with the least
//! work an HTTP/2 server can do per poll, so that the feed's HTTP/2 loads
//! have a floor as its HTTP/1.1 ones do (decision 172).
//!
//! What it does per request: one HPACK decode (`hpack.rs`: the dynamic
//! table and Huffman strings, as any server must: clients index their repeated
//! fields, so the table is part of the work), then one of the answers
//! `Doc` encoded when it loaded, behind a frame head with the stream's id.
//! Responses never touch a dynamic table of their own: every field is a
//! literal without indexing on a static-table name, or a static
//! `:status`.
//!
//! What it leaves out, being a floor:
//! - a header block split over CONTINUATION frames is refused with a
//!   GOAWAY, as are request trailers (a second HEADERS on a stream);
//!   padded or prioritised HEADERS are taken, their padding and priority
//!   skipped;
//! - request bodies are not read (DATA is discarded);
//! - a response body is sent only when it fits the client's windows at
//!   once; otherwise the stream is refused (`RST_STREAM`
//!   `REFUSED_STREAM`), never queued.

/// The client's connection preface (RFC 9113 section 3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Frame types (RFC 9113 section 6).
mod kind {
    pub const DATA: u8 = 0x0;
    pub const HEADERS: u8 = 0x1;
    pub const RST_STREAM: u8 = 0x3;
    pub const SETTINGS: u8 = 0x4;
    pub const PING: u8 = 0x6;
    pub const GOAWAY: u8 = 0x7;
    pub const WINDOW_UPDATE: u8 = 0x8;
    pub const CONTINUATION: u8 = 0x9;
}

/// Frame flags.
mod flag {
    pub const END_STREAM: u8 = 0x1;
    pub const ACK: u8 = 0x1;
    pub const END_HEADERS: u8 = 0x4;
    pub const PADDED: u8 = 0x8;
    pub const PRIORITY: u8 = 0x20;
}

/// Error codes (RFC 9113 section 7).
mod code {
    pub const PROTOCOL_ERROR: u32 = 0x1;
    pub const FRAME_SIZE_ERROR: u32 = 0x6;
    pub const REFUSED_STREAM: u32 = 0x7;
    pub const COMPRESSION_ERROR: u32 = 0x9;
}

/// The largest frame payload either side sends or takes: the protocol's
/// default, which the floor never raises.
const MAX_FRAME: usize = 16_384;

/// The window every flow-control window starts at (RFC 9113 section 6.9.2).
const DEFAULT_WINDOW: i64 = 65_535;

/// Streams a client may open at once, as the server's SETTINGS say.
const MAX_STREAMS: u32 = 128;

/// A connection's HTTP/2 state after the preface.
pub struct Session {
    decoder: crate::hpack::Decoder,
    /// The highest stream id the client opened.
    last_stream: u32,
    /// What the client lets the floor send: the connection's window, and
    /// what each new stream's window starts at.
    window: i64,
    stream_window: i64,
}

/// A `Doc`'s answers as header blocks, made once, and the bodies of the
/// two that have one; and what requests are checked against.
pub struct Answers {
    etag: Vec<u8>,
    gz_etag: Vec<u8>,
    not_modified: Vec<u8>,
    gz_not_modified: Vec<u8>,
    full: Vec<u8>,
    gzip: Option<Vec<u8>>,
    body: Vec<u8>,
    gz_body: Option<Vec<u8>>,
    not_found: Vec<u8>,
    bad_method: Vec<u8>,
}

/// What a request's fields said, as far as the document's answers care.
#[derive(Default)]
struct Request {
    /// `:method` is GET (`Some(false)`) or HEAD (`Some(true)`).
    head_only: Option<bool>,
    /// `:path` names the document.
    is_document: bool,
    /// `If-None-Match` names the plain or the gzip ETag.
    matches: bool,
    gz_matches: bool,
    /// `Accept-Encoding` offers gzip.
    gzip: bool,
}

/// The path the document is served at.
const DOC_PATH: &[u8] = b"/doc.json";

impl Answers {
    /// The header blocks for a document whose ETags are `etag` and
    /// `gz_etag`.
    pub fn new(etag: &str, gz_etag: &str, body: Vec<u8>, gz_body: Option<Vec<u8>>) -> Answers {
        let fields = |status: u8, etag: &str| {
            let mut out = vec![0x80 | status];
            literal(&mut out, static_name::ETAG, etag.as_bytes());
            literal(&mut out, static_name::CACHE_CONTROL, b"max-age=1");
            literal(&mut out, static_name::VARY, b"accept-encoding");
            out
        };
        let with_body = |etag: &str, gzip: bool, len: usize| {
            let mut out = fields(static_status::OK, etag);
            literal(&mut out, static_name::CONTENT_TYPE, b"application/json");
            if gzip {
                literal(&mut out, static_name::CONTENT_ENCODING, b"gzip");
            }
            literal(
                &mut out,
                static_name::CONTENT_LENGTH,
                len.to_string().as_bytes(),
            );
            out
        };
        let mut bad_method = Vec::new();
        literal(&mut bad_method, static_name::STATUS, b"405");
        Answers {
            etag: etag.as_bytes().to_vec(),
            gz_etag: gz_etag.as_bytes().to_vec(),
            not_modified: fields(static_status::NOT_MODIFIED, etag),
            gz_not_modified: fields(static_status::NOT_MODIFIED, gz_etag),
            full: with_body(etag, false, body.len()),
            gzip: gz_body
                .as_ref()
                .map(|gz| with_body(gz_etag, true, gz.len())),
            body,
            gz_body,
            not_found: vec![0x80 | static_status::NOT_FOUND],
            bad_method,
        }
    }

    /// The header block and body (if any) that answer `request`.
    fn choose(&self, request: &Request) -> (&[u8], Option<&[u8]>) {
        if !request.is_document {
            return (&self.not_found, None);
        }
        let Some(head_only) = request.head_only else {
            return (&self.bad_method, None);
        };
        let (fields, body) = if request.matches {
            (&self.not_modified, None)
        } else if request.gz_matches {
            (&self.gz_not_modified, None)
        } else {
            match (&self.gzip, &self.gz_body, request.gzip) {
                (Some(fields), Some(body), true) => (fields, Some(body.as_slice())),
                _ => (&self.full, Some(self.body.as_slice())),
            }
        };
        (fields, body.filter(|_| !head_only))
    }
}

/// Static-table indices of `:status` values (RFC 7541 appendix A).
mod static_status {
    pub const OK: u8 = 8;
    pub const NOT_MODIFIED: u8 = 11;
    pub const NOT_FOUND: u8 = 13;
}

/// Static-table indices of response field names (RFC 7541 appendix A).
mod static_name {
    pub const STATUS: usize = 8;
    pub const CACHE_CONTROL: usize = 24;
    pub const CONTENT_ENCODING: usize = 26;
    pub const CONTENT_LENGTH: usize = 28;
    pub const CONTENT_TYPE: usize = 31;
    pub const ETAG: usize = 34;
    pub const VARY: usize = 59;
}

/// A literal field without indexing, its name from the static table and
/// its value plain (RFC 7541 section 6.2.2).
fn literal(out: &mut Vec<u8>, name: usize, value: &[u8]) {
    integer(out, 0x00, 4, name);
    integer(out, 0x00, 7, value.len());
    out.extend_from_slice(value);
}

/// An HPACK integer with an N-bit prefix (RFC 7541 section 5.1).
fn integer(out: &mut Vec<u8>, high: u8, prefix: u32, mut value: usize) {
    let max = (1usize << prefix) - 1;
    if value < max {
        out.push(high | value as u8);
        return;
    }
    out.push(high | max as u8);
    value -= max;
    while value >= 0x80 {
        out.push(0x80 | (value & 0x7f) as u8);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Appends a frame head.
fn frame_head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    out.extend_from_slice(&(len as u32).to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
}

/// Appends a GOAWAY with `error`; the connection closes after it.
fn goaway(out: &mut Vec<u8>, last_stream: u32, error: u32) {
    frame_head(out, 8, kind::GOAWAY, 0, 0);
    out.extend_from_slice(&last_stream.to_be_bytes());
    out.extend_from_slice(&error.to_be_bytes());
}

impl Session {
    /// A session whose preface has just arrived: appends the server's
    /// SETTINGS (its preface).
    pub fn start(reply: &mut Vec<u8>) -> Session {
        frame_head(reply, 6, kind::SETTINGS, 0, 0);
        reply.extend_from_slice(&0x3u16.to_be_bytes());
        reply.extend_from_slice(&MAX_STREAMS.to_be_bytes());
        Session {
            decoder: crate::hpack::Decoder::new(),
            last_stream: 0,
            window: DEFAULT_WINDOW,
            stream_window: DEFAULT_WINDOW,
        }
    }

    /// Takes the whole frames at the start of `data`, appending what they
    /// answer to `reply`: `Ok(n)` with the bytes taken, `Err(())` when the
    /// connection is to close after `reply` (a GOAWAY, when the client
    /// broke the protocol, is in it).
    pub fn frames(
        &mut self,
        data: &[u8],
        reply: &mut Vec<u8>,
        doc: Option<&Answers>,
    ) -> Result<usize, ()> {
        let mut at = 0;
        loop {
            let rest = &data[at..];
            if rest.len() < 9 {
                return Ok(at);
            }
            let len = usize::from(rest[0]) << 16 | usize::from(rest[1]) << 8 | usize::from(rest[2]);
            if len > MAX_FRAME {
                goaway(reply, self.last_stream, code::FRAME_SIZE_ERROR);
                return Err(());
            }
            if rest.len() < 9 + len {
                return Ok(at);
            }
            let (kind, flags) = (rest[3], rest[4]);
            let stream = u32::from_be_bytes([rest[5], rest[6], rest[7], rest[8]]) & 0x7fff_ffff;
            let payload = &rest[9..9 + len];
            at += 9 + len;
            let fail = |reply: &mut Vec<u8>, error: u32, last: u32| {
                goaway(reply, last, error);
                Err(())
            };
            match kind {
                kind::SETTINGS if flags & flag::ACK == 0 => {
                    if stream != 0 || len % 6 != 0 {
                        return fail(reply, code::PROTOCOL_ERROR, self.last_stream);
                    }
                    for setting in payload.chunks_exact(6) {
                        let id = u16::from_be_bytes([setting[0], setting[1]]);
                        let value =
                            u32::from_be_bytes([setting[2], setting[3], setting[4], setting[5]]);
                        // SETTINGS_INITIAL_WINDOW_SIZE; the floor opens
                        // streams only to answer them at once, so only new
                        // streams see it.
                        if id == 0x4 {
                            self.stream_window = i64::from(value);
                        }
                    }
                    frame_head(reply, 0, kind::SETTINGS, flag::ACK, 0);
                }
                kind::PING if flags & flag::ACK == 0 => {
                    if len != 8 {
                        return fail(reply, code::FRAME_SIZE_ERROR, self.last_stream);
                    }
                    frame_head(reply, 8, kind::PING, flag::ACK, 0);
                    reply.extend_from_slice(payload);
                }
                kind::WINDOW_UPDATE if stream == 0 && len == 4 => {
                    let more = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]);
                    self.window += i64::from(more & 0x7fff_ffff);
                }
                kind::HEADERS => {
                    if flags & flag::END_HEADERS == 0
                        || stream.is_multiple_of(2)
                        || stream <= self.last_stream
                    {
                        // A split block, or a stream id the client may not
                        // use (RFC 9113 section 5.1.1).
                        return fail(reply, code::PROTOCOL_ERROR, self.last_stream);
                    }
                    self.last_stream = stream;
                    let Some(block) = fragment(payload, flags) else {
                        return fail(reply, code::PROTOCOL_ERROR, self.last_stream);
                    };
                    let mut request = Request::default();
                    // The table is the connection's: a block that fails to
                    // decode leaves it unusable (RFC 9113 section 4.3).
                    let decoded = self.decoder.decode(block, |name, value| {
                        if let Some(doc) = doc {
                            read_field(&mut request, name, value, doc);
                        }
                    });
                    if decoded.is_err() {
                        return fail(reply, code::COMPRESSION_ERROR, self.last_stream);
                    }
                    let (fields, body) = match doc {
                        Some(doc) => doc.choose(&request),
                        None => (&[0x80 | static_status::NOT_FOUND][..], None),
                    };
                    self.respond(stream, fields, body, reply);
                }
                kind::CONTINUATION => {
                    // Only after a HEADERS without END_HEADERS, which the
                    // floor refused above.
                    return fail(reply, code::PROTOCOL_ERROR, self.last_stream);
                }
                kind::GOAWAY => return Err(()),
                // DATA (no body is read), PRIORITY, RST_STREAM (every
                // stream is answered whole as it opens), stream
                // WINDOW_UPDATEs, ACKs and unknown types.
                _ => {}
            }
        }
    }

    /// Answers stream `stream`: its HEADERS, and its body when the
    /// windows hold it; `RST_STREAM` (REFUSED_STREAM) when they do not.
    fn respond(&mut self, stream: u32, fields: &[u8], body: Option<&[u8]>, reply: &mut Vec<u8>) {
        match body {
            None => {
                frame_head(
                    reply,
                    fields.len(),
                    kind::HEADERS,
                    flag::END_HEADERS | flag::END_STREAM,
                    stream,
                );
                reply.extend_from_slice(fields);
            }
            Some(body) if (body.len() as i64) > self.window.min(self.stream_window) => {
                frame_head(reply, 4, kind::RST_STREAM, 0, stream);
                reply.extend_from_slice(&code::REFUSED_STREAM.to_be_bytes());
            }
            Some(body) => {
                frame_head(
                    reply,
                    fields.len(),
                    kind::HEADERS,
                    flag::END_HEADERS,
                    stream,
                );
                reply.extend_from_slice(fields);
                self.window -= body.len() as i64;
                let mut chunks = body.chunks(MAX_FRAME).peekable();
                if body.is_empty() {
                    frame_head(reply, 0, kind::DATA, flag::END_STREAM, stream);
                }
                while let Some(chunk) = chunks.next() {
                    let end = if chunks.peek().is_none() {
                        flag::END_STREAM
                    } else {
                        0
                    };
                    frame_head(reply, chunk.len(), kind::DATA, end, stream);
                    reply.extend_from_slice(chunk);
                }
            }
        }
    }
}

/// A HEADERS payload without its padding and priority fields; `None`
/// when they do not fit.
fn fragment(payload: &[u8], flags: u8) -> Option<&[u8]> {
    let (mut start, mut end) = (0, payload.len());
    if flags & flag::PADDED != 0 {
        let pad = usize::from(*payload.first()?);
        start = 1;
        end = end.checked_sub(pad)?;
    }
    if flags & flag::PRIORITY != 0 {
        start += 5;
    }
    payload.get(start..end)
}

/// Notes what one decoded request field says about the request.
fn read_field(request: &mut Request, name: &[u8], value: &[u8], doc: &Answers) {
    match name {
        b":method" => {
            request.head_only = match value {
                b"GET" => Some(false),
                b"HEAD" => Some(true),
                _ => None,
            }
        }
        b":path" => {
            request.is_document = value.split(|&b| b == b'?').next() == Some(DOC_PATH);
        }
        b"if-none-match" => {
            // RFC 9110 section 13.1.2: weak comparison, `*` matches.
            for tag in value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                let tag = tag.strip_prefix(b"W/").unwrap_or(tag);
                request.matches |= tag == b"*" || tag == doc.etag;
                request.gz_matches |= tag == doc.gz_etag;
            }
        }
        b"accept-encoding" => request.gzip |= crate::offers_gzip(value),
        _ => {}
    }
}
