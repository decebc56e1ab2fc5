//! Request body framing in (RFC 9112 §6 and §7.1): Content-Length and
//! chunked with trailers; no IO.
//!
//! A [`Decoder`] takes bytes off the front of the read buffer and yields data
//! slices that share the buffer's memory. It is strict: chunk sizes are hex
//! digits only, every line ends in CRLF, and every limit is counted.

use bytes::{Bytes, BytesMut};
use http::StatusCode;
use http::header::{HeaderMap, HeaderName, HeaderValue};

use crate::common::Reject;
use crate::http1::parse::HEADERS_CAP;
use crate::limits::Limits;

/// What one call to [`Decoder::decode`] produced.
#[derive(Debug, PartialEq)]
pub(crate) enum Decoded {
    /// Body bytes.
    Data(Bytes),
    /// The trailer section of a chunked body; the body has ended.
    Trailers(HeaderMap),
    /// The body has ended.
    End,
    /// More bytes are needed.
    Partial,
}

/// Body framing state for one request.
#[derive(Debug, Clone)]
pub(crate) struct Decoder {
    kind: Kind,
    /// Bytes of body data delivered so far.
    seen: u64,
    /// Chunk-extension bytes seen so far.
    ext_bytes: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Length(u64),
    Chunked(Chunked),
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunked {
    /// Reading hex digits; `digits` counts them, leading zeros included.
    Size { size: u64, digits: u8 },
    /// Whitespace after the size, before `;` or CR.
    SizeWs { size: u64 },
    /// Inside a chunk extension, until CR.
    Ext { size: u64 },
    /// Expecting the LF that ends the size line.
    SizeLf { size: u64 },
    /// Inside chunk data.
    Data { left: u64 },
    /// Expecting the CR after chunk data.
    DataCr,
    /// Expecting the LF after chunk data.
    DataLf,
    /// After the last chunk: a trailer section, then the final CRLF.
    Trailers,
}

/// Most hex digits (leading zeros included) in one chunk size.
const MAX_SIZE_DIGITS: u8 = 32;

const fn bad(reason: &'static str) -> Reject {
    Reject::new(StatusCode::BAD_REQUEST, reason)
}

impl Decoder {
    /// A decoder for exactly `len` bytes.
    pub(crate) fn length(len: u64) -> Decoder {
        Decoder::with(if len == 0 {
            Kind::Done
        } else {
            Kind::Length(len)
        })
    }

    /// A decoder for a chunked body.
    pub(crate) fn chunked() -> Decoder {
        Decoder::with(Kind::Chunked(Chunked::Size { size: 0, digits: 0 }))
    }

    fn with(kind: Kind) -> Decoder {
        Decoder {
            kind,
            seen: 0,
            ext_bytes: 0,
        }
    }

    /// True once the whole body has been decoded.
    pub(crate) fn is_done(&self) -> bool {
        self.kind == Kind::Done
    }

    /// Bytes still expected, when the framing says so.
    pub(crate) fn remaining(&self) -> Option<u64> {
        match self.kind {
            Kind::Length(n) => Some(n),
            Kind::Done => Some(0),
            Kind::Chunked(_) => None,
        }
    }

    /// Takes the next piece of body off the front of `buf`.
    pub(crate) fn decode(
        &mut self,
        buf: &mut BytesMut,
        limits: &Limits,
    ) -> Result<Decoded, Reject> {
        match self.kind {
            Kind::Done => Ok(Decoded::End),
            Kind::Length(left) => {
                if buf.is_empty() {
                    return Ok(Decoded::Partial);
                }
                let n = left.min(buf.len() as u64);
                let data = buf.split_to(n as usize).freeze();
                self.seen += n;
                self.kind = if n == left {
                    Kind::Done
                } else {
                    Kind::Length(left - n)
                };
                Ok(Decoded::Data(data))
            }
            Kind::Chunked(state) => self.decode_chunked(state, buf, limits),
        }
    }

    /// The chunked state machine (RFC 9112 §7.1); one arm per grammar step.
    fn decode_chunked(
        &mut self,
        mut state: Chunked,
        buf: &mut BytesMut,
        limits: &Limits,
    ) -> Result<Decoded, Reject> {
        let mut at = 0;
        let result = loop {
            if let Chunked::Data { left } = state {
                buf.advance_to(&mut at);
                if buf.is_empty() {
                    break Ok(Decoded::Partial);
                }
                let n = left.min(buf.len() as u64);
                let data = buf.split_to(n as usize).freeze();
                self.seen += n;
                if limits.max_body_bytes.is_some_and(|max| self.seen > max) {
                    break Err(Reject::new(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        "request body too large",
                    ));
                }
                state = if n == left {
                    Chunked::DataCr
                } else {
                    Chunked::Data { left: left - n }
                };
                self.kind = Kind::Chunked(state);
                return Ok(Decoded::Data(data));
            }
            if state == Chunked::Trailers {
                buf.advance_to(&mut at);
                break self.trailers(buf, limits);
            }
            let Some(&b) = buf.get(at) else {
                buf.advance_to(&mut at);
                break Ok(Decoded::Partial);
            };
            at += 1;
            state = match state {
                Chunked::Size { size, digits } => match hex(b) {
                    Some(d) => {
                        if digits >= MAX_SIZE_DIGITS || size >> 60 != 0 {
                            break Err(bad("chunk size too large"));
                        }
                        Chunked::Size {
                            size: size << 4 | u64::from(d),
                            digits: digits + 1,
                        }
                    }
                    None if digits == 0 => break Err(bad("invalid chunk size")),
                    None => match b {
                        b'\r' => Chunked::SizeLf { size },
                        b';' => Chunked::Ext { size },
                        b' ' | b'\t' => Chunked::SizeWs { size },
                        _ => break Err(bad("invalid chunk size")),
                    },
                },
                Chunked::SizeWs { size } => match b {
                    b' ' | b'\t' => Chunked::SizeWs { size },
                    b';' => Chunked::Ext { size },
                    b'\r' => Chunked::SizeLf { size },
                    _ => break Err(bad("invalid chunk size")),
                },
                Chunked::Ext { size } => {
                    self.ext_bytes += 1;
                    if self.ext_bytes > limits.max_chunk_ext_bytes {
                        break Err(bad("chunk extensions too large"));
                    }
                    match b {
                        b'\r' => Chunked::SizeLf { size },
                        b'\t' => Chunked::Ext { size },
                        0..=0x1f | 0x7f => break Err(bad("invalid chunk extension")),
                        _ => Chunked::Ext { size },
                    }
                }
                Chunked::SizeLf { size } => match b {
                    b'\n' if size == 0 => Chunked::Trailers,
                    b'\n' => {
                        if limits
                            .max_body_bytes
                            .is_some_and(|max| self.seen + size > max)
                        {
                            break Err(Reject::new(
                                StatusCode::PAYLOAD_TOO_LARGE,
                                "request body too large",
                            ));
                        }
                        Chunked::Data { left: size }
                    }
                    _ => break Err(bad("invalid chunk size line ending")),
                },
                Chunked::DataCr => match b {
                    b'\r' => Chunked::DataLf,
                    _ => break Err(bad("missing crlf after chunk data")),
                },
                Chunked::DataLf => match b {
                    b'\n' => Chunked::Size { size: 0, digits: 0 },
                    _ => break Err(bad("missing crlf after chunk data")),
                },
                Chunked::Data { .. } | Chunked::Trailers => unreachable!("handled above"),
            };
            self.kind = Kind::Chunked(state);
        };
        if result.is_err() {
            self.kind = Kind::Done;
        }
        result
    }

    /// The trailer section: field lines up to an empty line (RFC 9112 §7.1.2).
    fn trailers(&mut self, buf: &mut BytesMut, limits: &Limits) -> Result<Decoded, Reject> {
        if buf.len() < 2 {
            return Ok(Decoded::Partial);
        }
        if &buf[..2] == b"\r\n" {
            let _ = buf.split_to(2);
            self.kind = Kind::Done;
            return Ok(Decoded::End);
        }
        let Some(end) = find_blank_line(buf) else {
            if buf.len() > limits.max_head_bytes {
                return Err(Reject::new(
                    StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                    "trailer section too large",
                ));
            }
            return Ok(Decoded::Partial);
        };
        if end > limits.max_head_bytes {
            return Err(Reject::new(
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                "trailer section too large",
            ));
        }
        let section = buf.split_to(end);
        self.kind = Kind::Done;
        let max = limits.max_headers.min(HEADERS_CAP);
        let mut parsed = vec![httparse::EMPTY_HEADER; max];
        let fields = match httparse::parse_headers(&section, &mut parsed) {
            Ok(httparse::Status::Complete((_, fields))) => fields,
            Err(httparse::Error::TooManyHeaders) => {
                return Err(Reject::new(
                    StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                    "too many trailer fields",
                ));
            }
            _ => return Err(bad("invalid trailer section")),
        };
        let mut map = HeaderMap::with_capacity(fields.len());
        for f in fields {
            let name = HeaderName::from_bytes(f.name.as_bytes())
                .map_err(|_| bad("invalid trailer name"))?;
            let value =
                HeaderValue::from_bytes(f.value).map_err(|_| bad("invalid trailer value"))?;
            map.append(name, value);
        }
        Ok(Decoded::Trailers(map))
    }
}

/// Index just past the first CRLF CRLF.
fn find_blank_line(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

trait AdvanceTo {
    /// Drops the first `*at` bytes and resets `*at` to zero.
    fn advance_to(&mut self, at: &mut usize);
}

impl AdvanceTo for BytesMut {
    fn advance_to(&mut self, at: &mut usize) {
        if *at > 0 {
            bytes::Buf::advance(self, *at);
            *at = 0;
        }
    }
}

#[cfg(test)]
mod tests;
