//! Response head and body framing out (RFC 9112 §4, §6, §7); no IO.
//!
//! [`encode_head`] writes the status line and header section into a
//! [`WriteBuf`] and decides the body framing; an [`Encoder`] then frames body
//! data and trailers. Large data is queued by reference, not copied.

use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderValue};
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
    // One pass over the service's fields, comparing names only (standard
    // names compare as enum tags; no hashing).
    let mut keep_alive = req.keep_alive;
    let (mut has_date, mut has_server, mut declared) = (false, false, None);
    let mut has_hsts = hsts.is_none();
    for (name, value) in headers {
        if name == header::CONTENT_LENGTH {
            declared = parse_length(value.as_bytes());
        } else if name == header::DATE {
            has_date = true;
        } else if name == header::SERVER {
            has_server = true;
        } else if name == header::STRICT_TRANSPORT_SECURITY {
            has_hsts = true;
        } else if name == header::CONNECTION
            && tokens(value.as_bytes()).any(|t| t.eq_ignore_ascii_case(b"close"))
        {
            keep_alive = false;
        }
    }
    let no_body_status = status.is_informational() || status == StatusCode::NO_CONTENT;
    let encoder = if no_body_status || status == StatusCode::NOT_MODIFIED || req.is_head {
        Encoder::Skip
    } else if let Some(n) = exact.or(declared) {
        Encoder::Length(n)
    } else if req.version == Version::HTTP_11 {
        Encoder::Chunked
    } else {
        keep_alive = false;
        Encoder::Close
    };

    let server = server.as_ref().filter(|_| !has_server);
    let hsts = hsts.filter(|_| !has_hsts);
    let (line, reason) = status_line(status);
    let mut w = HeadWriter::new(dst.flat_mut(256));
    w.put(line);
    if let Some(reason) = reason {
        w.put(status.as_str().as_bytes());
        w.put(b" ");
        w.put(reason.as_bytes());
        w.put(b"\r\n");
    }
    if !has_date {
        date::with_date_line(|line| w.put(line));
    }
    if let Some(server) = server {
        w.field(SERVER_NAME, server.as_bytes());
    }
    if let Some(hsts) = hsts {
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
    match encoder {
        Encoder::Length(n) => w.content_length(n),
        Encoder::Chunked => w.put(b"transfer-encoding: chunked\r\n"),
        Encoder::Skip if !no_body_status => {
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
    w.finish();
    Framed {
        encoder,
        keep_alive,
    }
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
}

impl<'a> HeadWriter<'a> {
    fn new(out: &'a mut BytesMut) -> HeadWriter<'a> {
        let mut w = HeadWriter {
            out,
            dst: std::ptr::null_mut(),
            room: 0,
            at: 0,
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

    /// `name: value` and CRLF.
    #[inline(always)]
    fn field(&mut self, name: &[u8], value: &[u8]) {
        let n = name.len() + value.len() + 4;
        if n > self.room - self.at {
            self.grow(n);
        }
        #[allow(unsafe_code)]
        // SAFETY: the four copies fill `dst + at .. dst + at + n`, within
        // the spare capacity (checked above, after growing it if needed),
        // which nothing else borrows while the writer writes; the sources
        // are shared slices elsewhere.
        unsafe {
            let d = self.dst.add(self.at);
            std::ptr::copy_nonoverlapping(name.as_ptr(), d, name.len());
            let d = d.add(name.len());
            std::ptr::copy_nonoverlapping(b": ".as_ptr(), d, 2);
            let d = d.add(2);
            std::ptr::copy_nonoverlapping(value.as_ptr(), d, value.len());
            std::ptr::copy_nonoverlapping(b"\r\n".as_ptr(), d.add(value.len()), 2);
        }
        self.at += n;
    }

    fn content_length(&mut self, n: u64) {
        self.field(b"content-length", itoa::Buffer::new().format(n).as_bytes());
    }

    /// Makes the bytes written part of the buffer.
    fn commit(&mut self) {
        let len = self.out.len() + self.at;
        #[allow(unsafe_code)]
        // SAFETY: `put` and `field` wrote the first `at` bytes of the spare
        // capacity in order and without gaps, so the buffer's first `len`
        // bytes are initialized, and `at <= room` keeps `len` within its
        // capacity.
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
