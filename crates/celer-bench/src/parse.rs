//! Strict HTTP/1.1 response parsing: status line, header fields and body framing (RFC 9112).
//!
//! This module performs no IO. `parse_head` looks at the bytes received so far
//! and answers "complete", "need more" or "malformed"; `BodyDecoder` consumes
//! body bytes as they arrive, so a body of any size passes through a bounded
//! buffer.

use std::mem::MaybeUninit;

/// Most header fields accepted in one response; more is a malformed response.
pub(crate) const MAX_HEADERS: usize = 64;

/// Most hex digits accepted in a chunk size (a `u64`); more is malformed.
const MAX_CHUNK_SIZE_DIGITS: u8 = 16;

/// Why a response is malformed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Malformed {
    /// The status line or a header field does not follow RFC 9112 section 4 and 5.
    Head,
    /// The status code is outside 100..=599 (RFC 9110 section 15).
    Status,
    /// More than `MAX_HEADERS` header fields.
    TooManyHeaders,
    /// An invalid or conflicting Content-Length (RFC 9112 section 6.3).
    ContentLength,
    /// Transfer-Encoding together with Content-Length (RFC 9112 section 6.1).
    TransferEncoding,
    /// A chunked body that breaks RFC 9112 section 7.1.
    Chunk,
}

/// How the body of a response is delimited (RFC 9112 section 6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// No body: 1xx, 204, 304 or a response to HEAD.
    Empty,
    /// Exactly this many bytes follow the head.
    Length(u64),
    /// Chunked transfer coding.
    Chunked,
    /// The body runs until the server closes the connection.
    Close,
}

/// A complete response head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Head {
    /// Bytes taken by the status line, the header fields and the empty line.
    pub(crate) len: usize,
    /// The status code, 100..=599.
    pub(crate) status: u16,
    /// How the body is delimited.
    pub(crate) framing: Framing,
    /// The connection cannot carry another request after this response.
    pub(crate) close: bool,
}

impl Head {
    /// Whether this is an interim (1xx) response that a final response follows.
    ///
    /// 101 Switching Protocols ends HTTP/1.1 on the connection, so it is final.
    pub(crate) fn is_interim(&self) -> bool {
        (100..200).contains(&self.status) && self.status != 101
    }
}

/// Parses a response head from the start of `buf`.
///
/// Returns `Ok(None)` while the head is incomplete. `request_was_head` tells
/// whether the request was a HEAD, whose response has no body whatever its
/// header fields say (RFC 9112 section 6.3, item 1).
pub(crate) fn parse_head(buf: &[u8], request_was_head: bool) -> Result<Option<Head>, Malformed> {
    let mut headers = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut res = httparse::Response::new(&mut []);
    let len = match httparse::ParserConfig::default().parse_response_with_uninit_headers(
        &mut res,
        buf,
        &mut headers,
    ) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(Malformed::TooManyHeaders),
        Err(_) => return Err(Malformed::Head),
    };
    let status = res.code.unwrap_or(0);
    if !(100..=599).contains(&status) {
        return Err(Malformed::Status);
    }
    let fields = Fields::scan(res.headers)?;
    // HTTP/1.0 closes unless the server opts in (RFC 9112 section 9.3).
    let close = if res.version == Some(0) {
        !fields.keep_alive
    } else {
        fields.close
    };
    let framing = framing(status, request_was_head, &fields)?;
    let close = close || framing == Framing::Close;
    Ok(Some(Head {
        len,
        status,
        framing,
        close,
    }))
}

/// Chooses the body framing, following the order of RFC 9112 section 6.3.
fn framing(status: u16, request_was_head: bool, fields: &Fields) -> Result<Framing, Malformed> {
    if request_was_head || (100..200).contains(&status) || status == 204 || status == 304 {
        return Ok(Framing::Empty);
    }
    match (fields.transfer_encoding, fields.content_length) {
        // A server MUST NOT send both (section 6.1); treat it as the error it is.
        (Some(_), Some(_)) => Err(Malformed::TransferEncoding),
        (Some(true), None) => Ok(Framing::Chunked),
        // A response whose final coding is not chunked runs to close (item 4).
        (Some(false), None) => Ok(Framing::Close),
        (None, Some(n)) => Ok(Framing::Length(n)),
        (None, None) => Ok(Framing::Close),
    }
}

/// The header fields that matter for framing and connection reuse.
#[derive(Debug, Default)]
struct Fields {
    /// `Some(final coding is chunked)` when Transfer-Encoding is present.
    transfer_encoding: Option<bool>,
    content_length: Option<u64>,
    close: bool,
    keep_alive: bool,
}

impl Fields {
    fn scan(headers: &[httparse::Header<'_>]) -> Result<Fields, Malformed> {
        let mut fields = Fields::default();
        for header in headers {
            let name = header.name.as_bytes();
            if name.eq_ignore_ascii_case(b"content-length") {
                let n = parse_content_length(header.value)?;
                // Repeated fields must agree (RFC 9112 section 6.3, item 5).
                if fields.content_length.is_some_and(|prev| prev != n) {
                    return Err(Malformed::ContentLength);
                }
                fields.content_length = Some(n);
            } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
                let last = header
                    .value
                    .rsplit(|&b| b == b',')
                    .next()
                    .map(trim)
                    .unwrap_or_default();
                fields.transfer_encoding = Some(last.eq_ignore_ascii_case(b"chunked"));
            } else if name.eq_ignore_ascii_case(b"connection") {
                for token in header.value.split(|&b| b == b',').map(trim) {
                    fields.close |= token.eq_ignore_ascii_case(b"close");
                    fields.keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
                }
            }
        }
        Ok(fields)
    }
}

/// Content-Length is `1*DIGIT` (RFC 9110 section 8.6); lists are rejected.
fn parse_content_length(value: &[u8]) -> Result<u64, Malformed> {
    if value.is_empty() || value.len() > 19 || !value.iter().all(u8::is_ascii_digit) {
        return Err(Malformed::ContentLength);
    }
    Ok(value
        .iter()
        .fold(0u64, |n, &digit| n * 10 + u64::from(digit - b'0')))
}

fn trim(bytes: &[u8]) -> &[u8] {
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |i| i + 1);
    &bytes[start..end]
}

/// What one call to `BodyDecoder::decode` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Progress {
    /// Bytes of the input that belong to this body.
    pub(crate) consumed: usize,
    /// The body is complete.
    pub(crate) done: bool,
}

/// Incremental body decoder; it counts body bytes and keeps none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyDecoder {
    /// Bytes left of a Content-Length body.
    Length(u64),
    /// Inside a chunked body.
    Chunked(Chunk),
    /// Until the server closes.
    Close,
    /// Complete.
    Done,
}

/// States of the chunked decoder (RFC 9112 section 7.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Chunk {
    /// In the hex chunk size.
    Size { size: u64, digits: u8 },
    /// Whitespace after the size, before a chunk extension (BWS).
    SizeSpace { size: u64 },
    /// In a chunk extension, until CR.
    Extension { size: u64 },
    /// After the CR that ends the chunk-size line.
    SizeLf { size: u64 },
    /// Chunk data left.
    Data(u64),
    /// Expecting the CR after chunk data.
    DataCr,
    /// Expecting the LF after chunk data.
    DataLf,
    /// At the start of a trailer line or the final empty line.
    TrailerStart,
    /// Inside a trailer field line.
    TrailerLine,
    /// After the CR of a trailer field line.
    TrailerLf,
    /// After the CR of the final empty line.
    EndLf,
}

impl BodyDecoder {
    /// A decoder for a body with this framing.
    pub(crate) fn new(framing: Framing) -> BodyDecoder {
        match framing {
            Framing::Empty | Framing::Length(0) => BodyDecoder::Done,
            Framing::Length(n) => BodyDecoder::Length(n),
            Framing::Chunked => BodyDecoder::Chunked(Chunk::Size { size: 0, digits: 0 }),
            Framing::Close => BodyDecoder::Close,
        }
    }

    /// Body data bytes that follow at once (not framing): the rest of a
    /// Content-Length body, of the current chunk, or everything until
    /// close; 0 while chunk framing is being read or when done.
    pub(crate) fn data_ahead(&self) -> u64 {
        match self {
            BodyDecoder::Done => 0,
            BodyDecoder::Close => u64::MAX,
            BodyDecoder::Length(left) => *left,
            BodyDecoder::Chunked(Chunk::Data(left)) => *left,
            BodyDecoder::Chunked(_) => 0,
        }
    }

    /// Consumes the body bytes at the start of `buf`.
    pub(crate) fn decode(&mut self, buf: &[u8]) -> Result<Progress, Malformed> {
        let consumed = match self {
            BodyDecoder::Done => 0,
            BodyDecoder::Close => buf.len(),
            BodyDecoder::Length(left) => {
                let n = usize::try_from(*left).map_or(buf.len(), |left| left.min(buf.len()));
                *left -= n as u64;
                if *left == 0 {
                    *self = BodyDecoder::Done;
                }
                n
            }
            BodyDecoder::Chunked(state) => {
                let (n, done) = decode_chunked(state, buf)?;
                if done {
                    *self = BodyDecoder::Done;
                }
                n
            }
        };
        Ok(Progress {
            consumed,
            done: *self == BodyDecoder::Done,
        })
    }
}

/// Runs the chunked state machine over `buf`; returns bytes consumed and completion.
fn decode_chunked(state: &mut Chunk, buf: &[u8]) -> Result<(usize, bool), Malformed> {
    let mut i = 0;
    while i < buf.len() {
        if let Chunk::Data(left) = state {
            let n = usize::try_from(*left).map_or(buf.len() - i, |left| left.min(buf.len() - i));
            *left -= n as u64;
            i += n;
            if *left == 0 {
                *state = Chunk::DataCr;
            }
            continue;
        }
        let byte = buf[i];
        i += 1;
        *state = match (*state, byte) {
            (Chunk::Size { size, digits }, _) if byte.is_ascii_hexdigit() => {
                if digits == MAX_CHUNK_SIZE_DIGITS {
                    return Err(Malformed::Chunk);
                }
                let digit = (byte as char).to_digit(16).unwrap_or(0);
                Chunk::Size {
                    size: size << 4 | u64::from(digit),
                    digits: digits + 1,
                }
            }
            (Chunk::Size { digits: 0, .. }, _) => return Err(Malformed::Chunk),
            (Chunk::Size { size, .. } | Chunk::SizeSpace { size }, b' ' | b'\t') => {
                Chunk::SizeSpace { size }
            }
            (Chunk::Size { size, .. } | Chunk::SizeSpace { size }, b';') => {
                Chunk::Extension { size }
            }
            (Chunk::Size { size, .. } | Chunk::Extension { size }, b'\r') => Chunk::SizeLf { size },
            (Chunk::Extension { .. }, b'\n') => return Err(Malformed::Chunk),
            (Chunk::Extension { size }, _) => Chunk::Extension { size },
            (Chunk::SizeLf { size: 0 }, b'\n') => Chunk::TrailerStart,
            (Chunk::SizeLf { size }, b'\n') => Chunk::Data(size),
            (Chunk::DataCr, b'\r') => Chunk::DataLf,
            (Chunk::DataLf, b'\n') => Chunk::Size { size: 0, digits: 0 },
            (Chunk::TrailerStart, b'\r') => Chunk::EndLf,
            (Chunk::TrailerStart, b'\n') => return Err(Malformed::Chunk),
            (Chunk::TrailerLine, b'\r') => Chunk::TrailerLf,
            (Chunk::TrailerLine, b'\n') => return Err(Malformed::Chunk),
            (Chunk::TrailerStart | Chunk::TrailerLine, _) => Chunk::TrailerLine,
            (Chunk::TrailerLf, b'\n') => Chunk::TrailerStart,
            (Chunk::EndLf, b'\n') => return Ok((i, true)),
            _ => return Err(Malformed::Chunk),
        };
    }
    Ok((i, false))
}

#[cfg(test)]
mod tests;
