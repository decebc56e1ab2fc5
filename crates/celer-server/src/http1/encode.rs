//! Response head and body framing out (RFC 9112 §4, §6, §7); no IO.
//!
//! [`encode_head`] writes the status line and header section into a
//! [`WriteBuf`] and decides the body framing; an [`Encoder`] then frames body
//! data and trailers. Large data is queued by reference, not copied.

use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{StatusCode, Version};

use crate::common::{ServerHeader, date};
use crate::http1::io::WriteBuf;
use crate::http1::parse::tokens;

/// Facts about the request that shape the response framing.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReqFacts {
    pub(crate) version: Version,
    pub(crate) is_head: bool,
    pub(crate) keep_alive: bool,
}

/// How the response body is framed on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoder {
    /// No body is sent (HEAD, 1xx, 204, 304).
    Skip,
    /// Exactly this many bytes remain.
    Length(u64),
    /// Chunked coding.
    Chunked,
    /// Everything until the connection closes (HTTP/1.0 without a length).
    Close,
}

/// The framing decision for one response.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Framed {
    pub(crate) encoder: Encoder,
    pub(crate) keep_alive: bool,
}

/// Writes the status line and headers; decides the framing.
///
/// `exact` is the body's exact length when known. The service's own
/// Content-Length and Transfer-Encoding fields are replaced by the engine's
/// framing so the two can never disagree.
pub(crate) fn encode_head(
    status: StatusCode,
    headers: &HeaderMap,
    exact: Option<u64>,
    req: ReqFacts,
    server: &ServerHeader,
    hsts: Option<&HeaderValue>,
    dst: &mut WriteBuf,
) -> Framed {
    let out = dst.flat_mut(HEAD_ROOM);
    match one_pass(status, headers, exact, req, server.as_ref(), hsts, out) {
        Some(framed) => framed,
        None => two_passes(status, headers, exact, req, server.as_ref(), hsts, out),
    }
}

/// Spare room made in the write buffer before a head is written: enough
/// for the usual head whole, so that [`one_pass`] seldom declines for want
/// of room (with 256 it declined for most heads of a feed's `304` once the
/// buffer had been written through).
const HEAD_ROOM: usize = 1024;

/// What the service's fields say that shapes the rest of the head.
#[derive(Default)]
struct Seen {
    date: bool,
    server: bool,
    hsts: bool,
    /// The last Content-Length field's value, when it is a length.
    declared: Option<u64>,
}

impl Seen {
    /// Notes a field other than Content-Length and Connection.
    #[inline(always)]
    fn note(&mut self, name: &HeaderName) {
        if name == header::DATE {
            self.date = true;
        } else if name == header::SERVER {
            self.server = true;
        } else if name == header::STRICT_TRANSPORT_SECURITY {
            self.hsts = true;
        }
    }
}

/// The head in one pass over the service's fields, for the usual answer:
/// a status with a line of its own, no Connection field, and a head that
/// fits the buffer's spare room. The status line is written, then room is
/// left for the Date, Server and HSTS lines (which only the fields can say
/// are not wanted) and the fields follow; the lines go into that room at
/// the end, and the fields move down over what the lines did not take.
/// `None`, with nothing written, for any other answer.
fn one_pass(
    status: StatusCode,
    headers: &HeaderMap,
    exact: Option<u64>,
    req: ReqFacts,
    server: Option<&HeaderValue>,
    hsts: Option<&HeaderValue>,
    out: &mut BytesMut,
) -> Option<Framed> {
    let (line, None) = status_line(status) else {
        return None;
    };
    let gap = date::LINE_LEN
        + server.map_or(0, |v| SERVER_NAME.len() + v.len() + 4)
        + hsts.map_or(0, |v| HSTS_NAME.len() + v.len() + 4);
    let mut w = HeadWriter::new(out);
    if !w.fits(line.len() + gap) {
        return None;
    }
    w.put(line);
    let gap_start = w.at;
    w.skip(gap);
    let mut seen = Seen::default();
    for (name, value) in headers {
        if name == header::CONTENT_LENGTH {
            seen.declared = parse_length(value.as_bytes());
            continue;
        }
        if name == header::TRANSFER_ENCODING {
            continue;
        }
        if name == header::CONNECTION {
            // Whether it is written depends on fields not seen yet.
            return None;
        }
        seen.note(name);
        let (name, value) = (name.as_str().as_bytes(), value.as_bytes());
        if !w.fits(name.len() + value.len() + 4) {
            return None;
        }
        w.field(name, value);
    }
    if !w.fits(TAIL_MAX) {
        return None;
    }
    let mut at = gap_start;
    if !seen.date {
        date::with_date_line(|line| w.put_at(&mut at, line));
    }
    if let Some(server) = server.filter(|_| !seen.server) {
        w.field_at(&mut at, SERVER_NAME, server.as_bytes());
    }
    if let Some(hsts) = hsts.filter(|_| !seen.hsts) {
        w.field_at(&mut at, HSTS_NAME, hsts.as_bytes());
    }
    w.close_gap(at, gap_start + gap);
    let mut keep_alive = req.keep_alive;
    let encoder = framing(status, exact, seen.declared, req, &mut keep_alive);
    put_tail(
        &mut w,
        status,
        encoder,
        seen.declared,
        exact,
        keep_alive,
        req,
        false,
    );
    w.finish();
    Some(Framed {
        encoder,
        keep_alive,
    })
}

/// The head for any answer: a first pass over the service's fields for
/// what they say, then the head written in order.
fn two_passes(
    status: StatusCode,
    headers: &HeaderMap,
    exact: Option<u64>,
    req: ReqFacts,
    server: Option<&HeaderValue>,
    hsts: Option<&HeaderValue>,
    out: &mut BytesMut,
) -> Framed {
    // One pass over the service's fields, comparing names only (standard
    // names compare as enum tags; no hashing).
    let mut keep_alive = req.keep_alive;
    let mut seen = Seen::default();
    for (name, value) in headers {
        if name == header::CONTENT_LENGTH {
            seen.declared = parse_length(value.as_bytes());
        } else if name == header::CONNECTION {
            if tokens(value.as_bytes()).any(|t| t.eq_ignore_ascii_case(b"close")) {
                keep_alive = false;
            }
        } else {
            seen.note(name);
        }
    }
    let encoder = framing(status, exact, seen.declared, req, &mut keep_alive);

    let (line, reason) = status_line(status);
    let mut w = HeadWriter::new(out);
    w.put(line);
    if let Some(reason) = reason {
        w.put(status.as_str().as_bytes());
        w.put(b" ");
        w.put(reason.as_bytes());
        w.put(b"\r\n");
    }
    if !seen.date {
        date::with_date_line(|line| w.put(line));
    }
    if let Some(server) = server.filter(|_| !seen.server) {
        w.field(SERVER_NAME, server.as_bytes());
    }
    if let Some(hsts) = hsts.filter(|_| !seen.hsts) {
        w.field(HSTS_NAME, hsts.as_bytes());
    }
    let mut wrote_connection = false;
    for (name, value) in headers {
        if name == header::CONTENT_LENGTH || name == header::TRANSFER_ENCODING {
            continue;
        }
        if name == header::CONNECTION {
            if !keep_alive && status != StatusCode::SWITCHING_PROTOCOLS {
                continue;
            }
            wrote_connection = true;
        }
        w.field(name.as_str().as_bytes(), value.as_bytes());
    }
    put_tail(
        &mut w,
        status,
        encoder,
        seen.declared,
        exact,
        keep_alive,
        req,
        wrote_connection,
    );
    w.finish();
    Framed {
        encoder,
        keep_alive,
    }
}

/// Whether answers with `status` never have a body or a length (1xx, 204).
#[inline(always)]
fn no_body_status(status: StatusCode) -> bool {
    status.is_informational() || status == StatusCode::NO_CONTENT
}

/// How the body is framed; clears `keep_alive` for a body delimited by
/// the connection's close.
fn framing(
    status: StatusCode,
    exact: Option<u64>,
    declared: Option<u64>,
    req: ReqFacts,
    keep_alive: &mut bool,
) -> Encoder {
    if no_body_status(status) || status == StatusCode::NOT_MODIFIED || req.is_head {
        Encoder::Skip
    } else if let Some(n) = exact.or(declared) {
        Encoder::Length(n)
    } else if req.version == Version::HTTP_11 {
        Encoder::Chunked
    } else {
        *keep_alive = false;
        Encoder::Close
    }
}

/// The most [`put_tail`] writes: `content-length: ` with 20 digits and
/// CRLF (longer than `transfer-encoding: chunked` and CRLF), then
/// `connection: keep-alive` and CRLF, then the empty line.
const TAIL_MAX: usize = (16 + 20 + 2) + 24 + 2;

/// The framing field, the connection field the engine adds and the empty
/// line that ends the head.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn put_tail(
    w: &mut HeadWriter<'_>,
    status: StatusCode,
    encoder: Encoder,
    declared: Option<u64>,
    exact: Option<u64>,
    keep_alive: bool,
    req: ReqFacts,
    wrote_connection: bool,
) {
    match encoder {
        Encoder::Length(n) => w.content_length(n),
        Encoder::Chunked => w.put(b"transfer-encoding: chunked\r\n"),
        Encoder::Skip if !no_body_status(status) => {
            // HEAD and 304 describe the representation a GET would get: the
            // service's own Content-Length wins, then the body's length.
            let n = match status {
                StatusCode::NOT_MODIFIED => declared,
                _ => declared.or(exact),
            };
            if let Some(n) = n {
                w.content_length(n);
            }
        }
        Encoder::Skip | Encoder::Close => {}
    }
    if !keep_alive {
        w.put(b"connection: close\r\n");
    } else if req.version == Version::HTTP_10 && !wrote_connection {
        w.put(b"connection: keep-alive\r\n");
    }
    w.put(b"\r\n");
}

const SERVER_NAME: &[u8] = b"server";
const HSTS_NAME: &[u8] = b"strict-transport-security";

/// The status line: the whole line for common codes, or else `HTTP/1.1 `
/// and the reason phrase to write after the code.
fn status_line(status: StatusCode) -> (&'static [u8], Option<&'static str>) {
    let line: &'static [u8] = match status.as_u16() {
        200 => b"HTTP/1.1 200 OK\r\n",
        204 => b"HTTP/1.1 204 No Content\r\n",
        206 => b"HTTP/1.1 206 Partial Content\r\n",
        301 => b"HTTP/1.1 301 Moved Permanently\r\n",
        302 => b"HTTP/1.1 302 Found\r\n",
        304 => b"HTTP/1.1 304 Not Modified\r\n",
        400 => b"HTTP/1.1 400 Bad Request\r\n",
        404 => b"HTTP/1.1 404 Not Found\r\n",
        _ => {
            let reason = status.canonical_reason().unwrap_or("Unknown");
            return (b"HTTP/1.1 ", Some(reason));
        }
    };
    (line, None)
}

/// Writes a response head into a buffer's spare capacity: a field is one
/// room check and straight copies, and the buffer's length is set once at
/// the end, where `BufMut::put_slice` checked the capacity, called `memcpy`
/// and moved the length for each of the four pieces of every field. A
/// piece that does not fit grows the buffer first.
struct HeadWriter<'a> {
    out: &'a mut BytesMut,
    /// The start of `out`'s spare capacity.
    dst: *mut u8,
    /// The spare capacity's length.
    room: usize,
    /// Bytes written into the spare capacity so far (`at <= room`).
    at: usize,
    /// A gap left by `skip` is still open: some of the first `at` bytes
    /// are not written yet, and nothing may be committed.
    gap: bool,
}

impl<'a> HeadWriter<'a> {
    fn new(out: &'a mut BytesMut) -> HeadWriter<'a> {
        let mut w = HeadWriter {
            out,
            dst: std::ptr::null_mut(),
            room: 0,
            at: 0,
            gap: false,
        };
        w.take_room();
        w
    }

    /// Points the writer at the buffer's spare capacity.
    fn take_room(&mut self) {
        let spare = self.out.spare_capacity_mut();
        self.dst = spare.as_mut_ptr().cast::<u8>();
        self.room = spare.len();
        self.at = 0;
    }

    /// Makes room for `n` more bytes after those written.
    #[cold]
    #[inline(never)]
    fn grow(&mut self, n: usize) {
        self.commit();
        self.out.reserve(n);
        self.take_room();
    }

    #[inline(always)]
    fn put(&mut self, src: &[u8]) {
        let n = src.len();
        if n > self.room - self.at {
            self.grow(n);
        }
        #[allow(unsafe_code)]
        // SAFETY: `dst + at .. dst + at + n` lies within the spare capacity
        // (checked above, after growing it if needed), which nothing else
        // borrows while the writer writes, and `src` is a shared slice
        // elsewhere, so the two do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.dst.add(self.at), n);
        }
        self.at += n;
    }

    /// Whether `n` more bytes fit the room without growing it.
    #[inline(always)]
    fn fits(&self, n: usize) -> bool {
        n <= self.room - self.at
    }

    /// Leaves `n` bytes of the room unwritten, for [`put_at`] to fill and
    /// [`close_gap`] to close before the head is committed.
    ///
    /// [`put_at`]: HeadWriter::put_at
    /// [`close_gap`]: HeadWriter::close_gap
    fn skip(&mut self, n: usize) {
        assert!(self.fits(n) && !self.gap, "response head past its room");
        self.at += n;
        self.gap = true;
    }

    /// Writes `src` at `*at`, inside a gap left by
    /// [`skip`](HeadWriter::skip), and moves `*at` past it.
    #[inline(always)]
    fn put_at(&mut self, at: &mut usize, src: &[u8]) {
        let n = src.len();
        assert!(n <= self.at - *at, "response head past its gap");
        #[allow(unsafe_code)]
        // SAFETY: `dst + at .. dst + at + n` lies before `self.at`, so
        // within the spare capacity, which nothing else borrows while the
        // writer writes; `src` is a shared slice elsewhere.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.dst.add(*at), n);
        }
        *at += n;
    }

    /// `name: value` and CRLF at `*at`, inside a gap left by
    /// [`skip`](HeadWriter::skip); moves `*at` past them.
    #[inline(always)]
    fn field_at(&mut self, at: &mut usize, name: &[u8], value: &[u8]) {
        let n = name.len() + value.len() + 4;
        assert!(n <= self.at - *at, "response head past its gap");
        #[allow(unsafe_code)]
        // SAFETY: `dst + at .. dst + at + n` lies before `self.at` (checked
        // above), so within the spare capacity, which nothing else borrows
        // while the writer writes; the sources are shared slices elsewhere.
        unsafe {
            copy_field(self.dst.add(*at), name, value);
        }
        *at += n;
    }

    /// Closes the gap `filled .. end` that [`put_at`](HeadWriter::put_at)
    /// left unfilled, moving what was written after it down.
    fn close_gap(&mut self, filled: usize, end: usize) {
        assert!(
            filled <= end && end <= self.at,
            "response head gap out of order"
        );
        self.gap = false;
        if filled == end {
            return;
        }
        #[allow(unsafe_code)]
        // SAFETY: both ranges lie within `0 .. self.at`, so within the spare
        // capacity; `ptr::copy` allows them to overlap.
        unsafe {
            std::ptr::copy(self.dst.add(end), self.dst.add(filled), self.at - end);
        }
        self.at -= end - filled;
    }

    /// `name: value` and CRLF.
    #[inline(always)]
    fn field(&mut self, name: &[u8], value: &[u8]) {
        let n = name.len() + value.len() + 4;
        if n > self.room - self.at {
            self.grow(n);
        }
        #[allow(unsafe_code)]
        // SAFETY: `dst + at .. dst + at + n` lies within the spare capacity
        // (checked above, after growing it if needed), which nothing else
        // borrows while the writer writes; the sources are shared slices
        // elsewhere.
        unsafe {
            copy_field(self.dst.add(self.at), name, value);
        }
        self.at += n;
    }

    fn content_length(&mut self, n: u64) {
        self.field(b"content-length", itoa::Buffer::new().format(n).as_bytes());
    }

    /// Makes the bytes written part of the buffer.
    fn commit(&mut self) {
        assert!(!self.gap, "response head committed with a gap");
        let len = self.out.len() + self.at;
        #[allow(unsafe_code)]
        // SAFETY: `put` and `field` wrote the first `at` bytes of the spare
        // capacity in order, and a gap `skip` left has been filled by
        // `put_at` and closed by `close_gap` (checked above), so the
        // buffer's first `len` bytes are initialized, and `at <= room`
        // keeps `len` within its capacity.
        unsafe {
            self.out.set_len(len);
        }
        self.at = 0;
        self.room = 0;
    }

    fn finish(mut self) {
        self.commit();
    }
}

/// Copies `name: value` and CRLF to `d`.
///
/// # Safety
///
/// `d` is valid for writes of `name.len() + value.len() + 4` bytes, and
/// that range overlaps neither `name` nor `value`.
#[allow(unsafe_code)]
#[inline(always)]
unsafe fn copy_field(d: *mut u8, name: &[u8], value: &[u8]) {
    // SAFETY: the four copies fill `d .. d + name.len() + value.len() + 4`
    // in order, which the caller guarantees is writable and apart from the
    // sources.
    unsafe {
        std::ptr::copy_nonoverlapping(name.as_ptr(), d, name.len());
        let d = d.add(name.len());
        std::ptr::copy_nonoverlapping(b": ".as_ptr(), d, 2);
        let d = d.add(2);
        std::ptr::copy_nonoverlapping(value.as_ptr(), d, value.len());
        std::ptr::copy_nonoverlapping(b"\r\n".as_ptr(), d.add(value.len()), 2);
    }
}

/// A Content-Length value: ASCII digits only, at most 19 of them.
fn parse_length(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(v.iter().fold(0u64, |n, &d| n * 10 + u64::from(d - b'0')))
}

/// Why body data could not be framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FrameError {
    /// The body yielded more bytes than its declared length.
    TooLong,
    /// The body ended before its declared length.
    TooShort,
}

impl Encoder {
    /// Frames one piece of body data.
    pub(crate) fn data(&mut self, mut data: Bytes, dst: &mut WriteBuf) -> Result<(), FrameError> {
        match self {
            Encoder::Skip => Ok(()),
            Encoder::Close => {
                dst.put_bytes(data);
                Ok(())
            }
            Encoder::Length(left) => {
                let n = data.len() as u64;
                if n > *left {
                    data.truncate(*left as usize);
                    *left = 0;
                    dst.put_bytes(data);
                    return Err(FrameError::TooLong);
                }
                *left -= n;
                dst.put_bytes(data);
                Ok(())
            }
            Encoder::Chunked => {
                if data.is_empty() {
                    return Ok(());
                }
                let mut line = [0u8; 18];
                let len = hex_line(data.len(), &mut line);
                dst.put(&line[..len]);
                dst.put_bytes(data);
                dst.put(b"\r\n");
                Ok(())
            }
        }
    }

    /// Ends the body, with trailers when the framing can carry them.
    pub(crate) fn finish(
        &mut self,
        trailers: Option<&HeaderMap>,
        dst: &mut WriteBuf,
    ) -> Result<(), FrameError> {
        match self {
            Encoder::Chunked => {
                dst.put(b"0\r\n");
                for (name, value) in trailers.into_iter().flatten() {
                    dst.put(name.as_str().as_bytes());
                    dst.put(b": ");
                    dst.put(value.as_bytes());
                    dst.put(b"\r\n");
                }
                dst.put(b"\r\n");
                Ok(())
            }
            Encoder::Length(left) if *left > 0 => Err(FrameError::TooShort),
            _ => Ok(()),
        }
    }
}

/// Writes `{len:x}\r\n` into `buf`; returns the length written.
fn hex_line(mut len: usize, buf: &mut [u8; 18]) -> usize {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut tmp = [0u8; 16];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = DIGITS[len & 15];
        len >>= 4;
        if len == 0 {
            break;
        }
    }
    let n = tmp.len() - i;
    buf[..n].copy_from_slice(&tmp[i..]);
    buf[n] = b'\r';
    buf[n + 1] = b'\n';
    n + 2
}

#[cfg(test)]
mod tests;
