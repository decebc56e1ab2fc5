//! Response head and body framing out (RFC 9112 §4, §6, §7); no IO.
//!
//! [`encode_head`] writes the status line and header section into a
//! [`WriteBuf`] and decides the body framing; an [`Encoder`] then frames body
//! data and trailers. Large data is queued by reference, not copied.

use bytes::{BufMut, Bytes, BytesMut};
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

    let out = dst.flat_mut(256);
    put_status_line(out, status);
    if !has_date {
        date::with_date_line(|line| out.put_slice(line));
    }
    if let Some(server) = server.as_ref().filter(|_| !has_server) {
        out.put_slice(b"server: ");
        out.put_slice(server.as_bytes());
        out.put_slice(b"\r\n");
    }
    if let Some(hsts) = hsts.filter(|_| !has_hsts) {
        out.put_slice(b"strict-transport-security: ");
        out.put_slice(hsts.as_bytes());
        out.put_slice(b"\r\n");
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
        out.put_slice(name.as_str().as_bytes());
        out.put_slice(b": ");
        out.put_slice(value.as_bytes());
        out.put_slice(b"\r\n");
    }
    match encoder {
        Encoder::Length(n) => put_content_length(out, n),
        Encoder::Chunked => out.put_slice(b"transfer-encoding: chunked\r\n"),
        Encoder::Skip if !no_body_status => {
            // HEAD and 304 describe the representation a GET would get: the
            // service's own Content-Length wins, then the body's length.
            let n = match status {
                StatusCode::NOT_MODIFIED => declared,
                _ => declared.or(exact),
            };
            if let Some(n) = n {
                put_content_length(out, n);
            }
        }
        Encoder::Skip | Encoder::Close => {}
    }
    if !keep_alive {
        out.put_slice(b"connection: close\r\n");
    } else if req.version == Version::HTTP_10 && !wrote_connection {
        out.put_slice(b"connection: keep-alive\r\n");
    }
    out.put_slice(b"\r\n");
    Framed {
        encoder,
        keep_alive,
    }
}

/// Writes `HTTP/1.1 <code> <reason>\r\n`, in one copy for common codes.
fn put_status_line(out: &mut BytesMut, status: StatusCode) {
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
            out.put_slice(b"HTTP/1.1 ");
            out.put_slice(status.as_str().as_bytes());
            out.put_u8(b' ');
            out.put_slice(status.canonical_reason().unwrap_or("Unknown").as_bytes());
            out.put_slice(b"\r\n");
            return;
        }
    };
    out.put_slice(line);
}

/// A Content-Length value: ASCII digits only, at most 19 of them.
fn parse_length(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(v.iter().fold(0u64, |n, &d| n * 10 + u64::from(d - b'0')))
}

fn put_content_length(out: &mut BytesMut, n: u64) {
    out.put_slice(b"content-length: ");
    out.put_slice(itoa::Buffer::new().format(n).as_bytes());
    out.put_slice(b"\r\n");
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
