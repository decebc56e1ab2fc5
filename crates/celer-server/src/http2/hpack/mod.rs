//! HPACK (RFC 7541): the header compression of HTTP/2, both ways.
//!
//! - `decoder`: a request's header block (HEADERS and its CONTINUATIONs,
//!   joined) into [`Field`]s, with the dynamic table the peer's encoder
//!   drives, the header list limit of RFC 9113 §6.5.2 and the field rules
//!   of RFC 9113 §8.2.1
//! - `encoder`: a response's or trailers' fields into a header block, with
//!   a dynamic table of our own within the size the peer allows
//! - `huffman`: the Huffman code of Appendix B, rebuilt from its code
//!   lengths
//!
//! This file holds what both directions share: the static table
//! (Appendix A), the table entries in their parsed form, and the integer
//! (§5.1) and string (§5.2) primitives.
//!
//! The codec does no IO: blocks go in and out as bytes. A block that
//! cannot be decoded is a [`DecodeError`], which the connection turns into
//! a COMPRESSION_ERROR (RFC 9113 §4.3); a field that decodes but breaks
//! HTTP/2's rules is only reported in [`Decoded`], since it concerns one
//! stream.

use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderName, HeaderValue};

mod decoder;
mod encoder;
mod huffman;
#[cfg(test)]
mod tests;

pub(crate) use decoder::Decoder;
pub(crate) use encoder::Encoder;

/// The dynamic table's size before either side says otherwise, in bytes:
/// the default of SETTINGS_HEADER_TABLE_SIZE (RFC 9113 §6.5.2), and the
/// most the encoder ever uses.
const DEFAULT_TABLE_SIZE: usize = 4096;

/// What an entry adds to a table's size besides its name and value, in
/// bytes (RFC 7541 §4.1); RFC 9113 §6.5.2 counts a header list the same
/// way.
const ENTRY_OVERHEAD: usize = 32;

/// The largest integer the decoder accepts: RFC 7541 §5.1 has a decoder
/// refuse integers past its own limits. An integer in a block is an
/// index, a table size or a string length; at 2 MiB this is past any
/// valid index or table size, and past any string of a header block the
/// engine would take in.
const MAX_INTEGER: usize = 1 << 21;

/// The number of entries in the static table (RFC 7541 Appendix A); the
/// dynamic table's entries come after them, from index 62.
const STATIC_LEN: usize = 61;

/// A pseudo-header field (RFC 9113 §8.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pseudo {
    /// `:method`.
    Method,
    /// `:scheme`.
    Scheme,
    /// `:authority`.
    Authority,
    /// `:path`.
    Path,
    /// `:protocol` (RFC 8441, extended CONNECT).
    Protocol,
    /// `:status`.
    Status,
}

/// One decoded field.
#[derive(Debug, Clone)]
pub(crate) enum Field {
    /// A pseudo-header field and its value, whose only check was RFC 9113
    /// §8.2.1's (no NUL, CR or LF): the engine parses it as what it is.
    Pseudo(Pseudo, Bytes),
    /// A regular field. The value is marked sensitive when the peer sent
    /// it as never indexed (RFC 7541 §6.2.3), so that it stays so if it is
    /// sent on.
    Header(HeaderName, HeaderValue),
}

/// What a whole block decoded to, besides the fields handed to the sink.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Decoded {
    /// The list passed `max_list_size` (RFC 9113 §6.5.2 accounting: name +
    /// value + 32 per field); fields from the one that crossed it on were
    /// not handed to the sink.
    pub(crate) oversize: bool,
    /// A field was malformed as HTTP/2 defines it (RFC 9113 §8.2.1: a name
    /// with an uppercase letter or a byte a field name may not hold, an
    /// unknown pseudo-header name, a value with a byte a field value may
    /// not hold, or a regular field's value starting or ending with space
    /// or tab); it was not handed to the sink. The stream gets
    /// PROTOCOL_ERROR. Fields past the list limit are decoded only as far
    /// as the dynamic table needs, so only the ones before it count here.
    pub(crate) malformed: bool,
}

/// The block could not be decoded: a connection error COMPRESSION_ERROR
/// (RFC 9113 §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DecodeError;

// ===== impl Pseudo =====

impl Pseudo {
    /// The field name, colon included.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Pseudo::Method => ":method",
            Pseudo::Scheme => ":scheme",
            Pseudo::Authority => ":authority",
            Pseudo::Path => ":path",
            Pseudo::Protocol => ":protocol",
            Pseudo::Status => ":status",
        }
    }

    /// The pseudo-header field `name` stands for, if any of the six.
    fn from_name(name: &[u8]) -> Option<Pseudo> {
        Some(match name {
            b":method" => Pseudo::Method,
            b":scheme" => Pseudo::Scheme,
            b":authority" => Pseudo::Authority,
            b":path" => Pseudo::Path,
            b":protocol" => Pseudo::Protocol,
            b":status" => Pseudo::Status,
            _ => return None,
        })
    }
}

// ===== table entries =====

/// A table entry's name, parsed once when the entry is made, so that a
/// reference to it costs a clone.
#[derive(Debug, Clone)]
enum Name {
    /// One of the six pseudo-header names.
    Pseudo(Pseudo),
    /// A valid, lowercase field name.
    Header(HeaderName),
    /// A name HTTP/2 does not allow, kept only as its length in bytes (the
    /// table's size counts it): every field using it is malformed.
    Malformed(usize),
}

/// A table entry's value, checked once against the rules for its name.
#[derive(Debug, Clone)]
enum Value {
    /// The value of a pseudo-header field.
    Pseudo(Bytes),
    /// The value of a regular field.
    Header(HeaderValue),
    /// A value HTTP/2 does not allow for the name (or any value of a
    /// malformed name), kept only as its length in bytes.
    Malformed(usize),
}

/// A static or dynamic table entry in its parsed form.
#[derive(Debug, Clone)]
struct Entry {
    /// The field name.
    name: Name,
    /// The field value.
    value: Value,
    /// Name length + value length + 32, in bytes: the entry's share of the
    /// table (RFC 7541 §4.1) and its field's share of a header list (RFC
    /// 9113 §6.5.2).
    size: usize,
}

impl Name {
    /// Parses a literal name: a pseudo-header name, or a field name that
    /// is lowercase and valid (RFC 9113 §8.2.1), else a malformed one.
    fn parse(raw: &[u8]) -> Name {
        if raw.first() == Some(&b':') {
            return Pseudo::from_name(raw).map_or(Name::Malformed(raw.len()), Name::Pseudo);
        }
        // `from_lowercase` refuses an uppercase letter as it refuses any
        // byte a name may not hold (RFC 9113 §8.2.1), in one pass; a
        // standard name comes back without an allocation.
        HeaderName::from_lowercase(raw).map_or(Name::Malformed(raw.len()), Name::Header)
    }

    /// The name's length in bytes, as the peer sent it.
    fn len(&self) -> usize {
        match self {
            Name::Pseudo(pseudo) => pseudo.name().len(),
            Name::Header(name) => name.as_str().len(),
            Name::Malformed(len) => *len,
        }
    }
}

impl Value {
    /// Checks `raw` as the value of a field named `name`.
    fn parse(name: &Name, raw: Bytes) -> Value {
        match name {
            Name::Header(_) => header_value(raw).map_or_else(Value::Malformed, Value::Header),
            Name::Pseudo(_) if is_valid_pseudo_value(&raw) => Value::Pseudo(raw),
            Name::Pseudo(_) | Name::Malformed(_) => Value::Malformed(raw.len()),
        }
    }

    /// The value's length in bytes, as the peer sent it.
    fn len(&self) -> usize {
        match self {
            Value::Pseudo(value) => value.len(),
            Value::Header(value) => value.len(),
            Value::Malformed(len) => *len,
        }
    }
}

impl Entry {
    /// An entry from a parsed name and value.
    fn new(name: Name, value: Value) -> Entry {
        let size = name.len() + value.len() + ENTRY_OVERHEAD;
        Entry { name, value, size }
    }

    /// The field this entry stands for, or `None` when it is malformed.
    fn field(&self) -> Option<Field> {
        match (&self.name, &self.value) {
            (Name::Header(name), Value::Header(value)) => {
                Some(Field::Header(name.clone(), value.clone()))
            }
            (Name::Pseudo(pseudo), Value::Pseudo(value)) => {
                Some(Field::Pseudo(*pseudo, value.clone()))
            }
            _ => None,
        }
    }
}

/// Checks a regular field's value: bytes `HeaderValue` accepts (which
/// leaves out NUL, CR and LF) and no space or tab at either end (RFC 9113
/// §8.2.1). The value is kept without a copy; on refusal, its length.
fn header_value(raw: Bytes) -> Result<HeaderValue, usize> {
    let len = raw.len();
    let edge_is_blank = |byte: Option<&u8>| matches!(byte, Some(b' ' | b'\t'));
    if edge_is_blank(raw.first()) || edge_is_blank(raw.last()) {
        return Err(len);
    }
    HeaderValue::from_maybe_shared(raw).map_err(|_| len)
}

/// Checks a pseudo-header field's value: no NUL, CR or LF (RFC 9113
/// §8.2.1). What else it must be depends on the field, which the engine
/// knows.
fn is_valid_pseudo_value(raw: &[u8]) -> bool {
    // No early return, so that the loop vectorises.
    raw.iter()
        .fold(true, |ok, &byte| ok & !matches!(byte, 0 | b'\r' | b'\n'))
}

// ===== the static table =====

/// A static-table entry for a pseudo-header field.
const fn pseudo(pseudo: Pseudo, name: &'static str, value: &'static str) -> Entry {
    Entry {
        name: Name::Pseudo(pseudo),
        value: Value::Pseudo(Bytes::from_static(value.as_bytes())),
        size: name.len() + value.len() + ENTRY_OVERHEAD,
    }
}

/// A static-table entry for a regular field. Each of these names is one
/// `HeaderName` knows, so `from_static` makes its standard form: comparing
/// or cloning it touches no bytes.
const fn header(name: &'static str, value: &'static str) -> Entry {
    Entry {
        name: Name::Header(HeaderName::from_static(name)),
        value: Value::Header(HeaderValue::from_static(value)),
        size: name.len() + value.len() + ENTRY_OVERHEAD,
    }
}

/// The static table (RFC 7541 Appendix A), from index 1, with its names
/// and values already parsed.
static STATIC_TABLE: [Entry; STATIC_LEN] = [
    pseudo(Pseudo::Authority, ":authority", ""),
    pseudo(Pseudo::Method, ":method", "GET"),
    pseudo(Pseudo::Method, ":method", "POST"),
    pseudo(Pseudo::Path, ":path", "/"),
    pseudo(Pseudo::Path, ":path", "/index.html"),
    pseudo(Pseudo::Scheme, ":scheme", "http"),
    pseudo(Pseudo::Scheme, ":scheme", "https"),
    pseudo(Pseudo::Status, ":status", "200"),
    pseudo(Pseudo::Status, ":status", "204"),
    pseudo(Pseudo::Status, ":status", "206"),
    pseudo(Pseudo::Status, ":status", "304"),
    pseudo(Pseudo::Status, ":status", "400"),
    pseudo(Pseudo::Status, ":status", "404"),
    pseudo(Pseudo::Status, ":status", "500"),
    header("accept-charset", ""),
    header("accept-encoding", "gzip, deflate"),
    header("accept-language", ""),
    header("accept-ranges", ""),
    header("accept", ""),
    header("access-control-allow-origin", ""),
    header("age", ""),
    header("allow", ""),
    header("authorization", ""),
    header("cache-control", ""),
    header("content-disposition", ""),
    header("content-encoding", ""),
    header("content-language", ""),
    header("content-length", ""),
    header("content-location", ""),
    header("content-range", ""),
    header("content-type", ""),
    header("cookie", ""),
    header("date", ""),
    header("etag", ""),
    header("expect", ""),
    header("expires", ""),
    header("from", ""),
    header("host", ""),
    header("if-match", ""),
    header("if-modified-since", ""),
    header("if-none-match", ""),
    header("if-range", ""),
    header("if-unmodified-since", ""),
    header("last-modified", ""),
    header("link", ""),
    header("location", ""),
    header("max-forwards", ""),
    header("proxy-authenticate", ""),
    header("proxy-authorization", ""),
    header("range", ""),
    header("referer", ""),
    header("refresh", ""),
    header("retry-after", ""),
    header("server", ""),
    header("set-cookie", ""),
    header("strict-transport-security", ""),
    header("transfer-encoding", ""),
    header("user-agent", ""),
    header("vary", ""),
    header("via", ""),
    header("www-authenticate", ""),
];

/// The index of the first static entry whose name is `name`, if any.
///
/// A scan: the names are in their standard form, so each comparison is
/// one of two small tags, and the encoder asks only when it writes a
/// literal, not for a field its dynamic table already holds.
fn static_name_index(name: &HeaderName) -> Option<usize> {
    // The pseudo-header entries come first; no regular name matches them.
    let first_regular = 15;
    STATIC_TABLE[first_regular - 1..]
        .iter()
        .position(|entry| matches!(&entry.name, Name::Header(known) if known == name))
        .map(|at| at + first_regular)
}

// ===== integers (RFC 7541 §5.1) =====

/// Reads an integer whose first byte keeps its low `prefix_bits` bits
/// for it (1 to 8), at `*pos`, and moves `*pos` past it. Past the end of
/// `block` or over [`MAX_INTEGER`], an error.
fn decode_integer(block: &[u8], pos: &mut usize, prefix_bits: u32) -> Result<usize, DecodeError> {
    let prefix_max = (1usize << prefix_bits) - 1;
    let first = *block.get(*pos).ok_or(DecodeError)?;
    *pos += 1;
    let mut value = usize::from(first) & prefix_max;
    if value < prefix_max {
        return Ok(value);
    }
    // Seven bits a byte, least significant first, while the top bit is
    // set. Any integer up to the bound fits in three such bytes; a fourth
    // is allowed (an encoder may pad with a zero group), a fifth is not.
    let mut shift = 0;
    loop {
        let byte = *block.get(*pos).ok_or(DecodeError)?;
        *pos += 1;
        value += usize::from(byte & 0x7f) << shift;
        if value > MAX_INTEGER {
            return Err(DecodeError);
        }
        if byte & 0x80 == 0 {
            return Ok(value);
        }
        shift += 7;
        if shift > 21 {
            return Err(DecodeError);
        }
    }
}

/// Appends `value` as an integer with a `prefix_bits`-bit prefix (1 to
/// 8), the first byte's other bits being `flags`.
fn encode_integer(value: usize, prefix_bits: u32, flags: u8, out: &mut BytesMut) {
    let prefix_max = (1usize << prefix_bits) - 1;
    if value < prefix_max {
        out.put_u8(flags | value as u8);
        return;
    }
    out.put_u8(flags | prefix_max as u8);
    let mut rest = value - prefix_max;
    while rest >= 0x80 {
        out.put_u8(0x80 | (rest & 0x7f) as u8);
        rest >>= 7;
    }
    out.put_u8(rest as u8);
}

// ===== strings (RFC 7541 §5.2) =====

/// Appends `text` as a string literal: Huffman-coded when that is
/// shorter, as it is for most header text, else as it is.
fn encode_string(text: &[u8], out: &mut BytesMut) {
    let huffman_len = huffman::encoded_len(text);
    if huffman_len < text.len() {
        encode_integer(huffman_len, 7, 0x80, out);
        huffman::encode(text, out);
    } else {
        encode_integer(text.len(), 7, 0, out);
        out.extend_from_slice(text);
    }
}

/// Reads a string literal at `*pos` and moves `*pos` past it. A raw one
/// is a slice of `block`, without a copy; a Huffman-coded one is decoded
/// into `scratch` and split off it, so that the strings of one block
/// share one buffer. A length past the end of the block, or a Huffman
/// string the code refuses, is an error.
fn decode_string(
    block: &Bytes,
    pos: &mut usize,
    scratch: &mut BytesMut,
) -> Result<Bytes, DecodeError> {
    let huffman_coded = *block.get(*pos).ok_or(DecodeError)? & 0x80 != 0;
    let len = decode_integer(block, pos, 7)?;
    let start = *pos;
    let end = start
        .checked_add(len)
        .filter(|&end| end <= block.len())
        .ok_or(DecodeError)?;
    *pos = end;
    if !huffman_coded {
        return Ok(block.slice(start..end));
    }
    // Every code is at least 5 bits long, so `len` bytes decode to at most
    // `len * 8 / 5`. The first Huffman string of a block reserves room for
    // the rest of the block at that rate, so that the block's strings need
    // one buffer at most (none when the last block's was given back).
    let most = len * 8 / 5;
    scratch.clear();
    if scratch.capacity() < most {
        scratch.reserve((block.len() - start) * 8 / 5);
    }
    scratch.resize(most, 0);
    let decoded_len = huffman::decode(&block[start..end], scratch)?;
    scratch.truncate(decoded_len);
    Ok(scratch.split().freeze())
}
