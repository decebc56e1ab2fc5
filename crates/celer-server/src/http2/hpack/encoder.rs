//! The HPACK encoder (RFC 7541 §3 and §6): one connection's responses and
//! trailers into header blocks, with a dynamic table of our own.
//!
//! What it indexes: every field but those whose values vary or must not be
//! kept. A sensitive value and the credentials (`authorization`,
//! `proxy-authorization`, `cookie`, `set-cookie`) go as never indexed
//! (RFC 7541 §7.1.3), `content-length` without indexing, a field larger
//! than the table without indexing too (indexing it would only empty the
//! table, RFC 7541 §4.4). Anything else already in the dynamic table is
//! one index; the rest is a literal added to the table.
//!
//! Finding a field in the table is a scan, newest entry first, comparing
//! the name (a tag comparison for standard names) and then the value.
//! The table holds at most 4096 / 32 = 128 entries and in practice the
//! dozen or so fields a connection's responses repeat (`server`,
//! `content-type`, `cache-control`, `vary`, `etag`, `date`), with the
//! ones just used at the newest end; a scan of that is a few comparisons
//! with no hashing and no allocation, where a hash map would hash every
//! field's name and value and allocate as entries come and go. The same
//! scan finds the newest entry with the name, for a literal whose name
//! the static table lacks.

use std::collections::VecDeque;

use bytes::BytesMut;
use http::StatusCode;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};

use super::{
    DEFAULT_TABLE_SIZE, ENTRY_OVERHEAD, STATIC_LEN, encode_integer, encode_string,
    static_name_index,
};

/// A dynamic table entry of the encoder.
#[derive(Debug)]
struct Entry {
    /// The field name.
    name: HeaderName,
    /// The field value: a copy, so that the table holds no more than its
    /// size says (a cloned `HeaderValue` may be a slice of a larger
    /// buffer).
    value: Box<[u8]>,
    /// Name length + value length + 32, in bytes (RFC 7541 §4.1).
    size: usize,
}

/// One connection's HPACK encoder.
#[derive(Debug)]
pub(crate) struct Encoder {
    /// The dynamic table, oldest entry first: the newest (index 62) is at
    /// the back, where entries are added; eviction takes from the front.
    table: VecDeque<Entry>,
    /// The sum of the entries' sizes, in bytes.
    size: usize,
    /// The table's maximum size: the peer's SETTINGS_HEADER_TABLE_SIZE,
    /// capped at 4096.
    max_size: usize,
    /// The smallest maximum size since the last block, when the maximum
    /// has changed since then and the next block must say so.
    pending_min: Option<usize>,
}

/// How a literal field is represented (RFC 7541 §6.2): its first byte's
/// flag bits and the width of its name index's prefix.
#[derive(Debug, Clone, Copy)]
struct Literal {
    /// The bits above the index prefix.
    flags: u8,
    /// The width of the name index's prefix, in bits.
    prefix_bits: u32,
}

/// With incremental indexing (RFC 7541 §6.2.1).
const INCREMENTAL: Literal = Literal {
    flags: 0x40,
    prefix_bits: 6,
};

/// Without indexing (RFC 7541 §6.2.2).
const WITHOUT_INDEXING: Literal = Literal {
    flags: 0x00,
    prefix_bits: 4,
};

/// Never indexed (RFC 7541 §6.2.3).
const NEVER_INDEXED: Literal = Literal {
    flags: 0x10,
    prefix_bits: 4,
};

/// The static index of `:status` (RFC 7541 Appendix A), the name of the
/// status codes the static table lacks.
const STATUS_NAME_INDEX: usize = 8;

/// The static index of `content-length` (RFC 7541 Appendix A).
const CONTENT_LENGTH_INDEX: usize = 28;

// ===== impl Encoder =====

impl Encoder {
    /// A table of 4096 bytes, the default the peer allows.
    pub(crate) fn new() -> Encoder {
        Encoder {
            table: VecDeque::new(),
            size: 0,
            max_size: DEFAULT_TABLE_SIZE,
            pending_min: None,
        }
    }

    /// The peer's SETTINGS_HEADER_TABLE_SIZE: the table we use is min(n,
    /// 4096); when that changes, entries are evicted and the next block
    /// starts with a dynamic table size update (RFC 7541 §6.3; if it shrank
    /// and grew again before a block, the minimum first, then the final
    /// size, per §4.2).
    pub(crate) fn set_max_table_size(&mut self, n: usize) {
        let new_size = n.min(DEFAULT_TABLE_SIZE);
        if new_size == self.max_size {
            return;
        }
        self.max_size = new_size;
        self.evict(0);
        self.pending_min = Some(self.pending_min.map_or(new_size, |min| min.min(new_size)));
    }

    /// Appends the header block of a response: `:status`, then `headers`
    /// in the map's iteration order.
    pub(crate) fn encode_response(
        &mut self,
        status: StatusCode,
        headers: &HeaderMap,
        out: &mut BytesMut,
    ) {
        self.size_updates(out);
        // The static table has seven status codes (RFC 7541 Appendix A);
        // any other goes as a literal without indexing, as responses'
        // statuses vary.
        let static_index = match status.as_u16() {
            200 => Some(8),
            204 => Some(9),
            206 => Some(10),
            304 => Some(11),
            400 => Some(12),
            404 => Some(13),
            500 => Some(14),
            _ => None,
        };
        match static_index {
            Some(index) => encode_integer(index, 7, 0x80, out),
            None => {
                let literal = WITHOUT_INDEXING;
                encode_integer(STATUS_NAME_INDEX, literal.prefix_bits, literal.flags, out);
                encode_string(status.as_str().as_bytes(), out);
            }
        }
        self.fields(headers, out);
    }

    /// Appends a block of regular fields only (trailers).
    pub(crate) fn encode_fields(&mut self, headers: &HeaderMap, out: &mut BytesMut) {
        self.size_updates(out);
        self.fields(headers, out);
    }

    /// Appends the size updates a change of the table's maximum since the
    /// last block calls for (RFC 7541 §4.2): the smallest size it went
    /// through, when that is below the final one (the evictions it caused
    /// must be seen by the decoder too), then the final size.
    fn size_updates(&mut self, out: &mut BytesMut) {
        let Some(min) = self.pending_min.take() else {
            return;
        };
        if min < self.max_size {
            encode_integer(min, 5, 0x20, out);
        }
        encode_integer(self.max_size, 5, 0x20, out);
    }

    /// Appends `headers`, in the map's iteration order.
    fn fields(&mut self, headers: &HeaderMap, out: &mut BytesMut) {
        for (name, value) in headers {
            self.field(name, value, out);
        }
    }

    /// Appends one regular field, choosing its representation (see the
    /// module's documentation).
    fn field(&mut self, name: &HeaderName, value: &HeaderValue, out: &mut BytesMut) {
        let value_bytes = value.as_bytes();
        if value.is_sensitive() || is_credential(name) {
            // RFC 7541 §7.1.3: never indexed, so that no intermediary
            // indexes it either; the static table's name index is no
            // secret.
            write_literal(
                NEVER_INDEXED,
                static_name_index(name),
                name,
                value_bytes,
                out,
            );
            return;
        }
        if name == header::CONTENT_LENGTH {
            // Its values differ from response to response: indexing them
            // would only push useful entries out.
            let index = Some(CONTENT_LENGTH_INDEX);
            write_literal(WITHOUT_INDEXING, index, name, value_bytes, out);
            return;
        }
        let (exact, same_name) = self.find(name, value_bytes);
        if let Some(index) = exact {
            encode_integer(index, 7, 0x80, out);
            return;
        }
        let name_index = static_name_index(name).or(same_name);
        let size = name.as_str().len() + value_bytes.len() + ENTRY_OVERHEAD;
        if size > self.max_size {
            // Added to the table, it would empty the table and not stay
            // (RFC 7541 §4.4).
            write_literal(WITHOUT_INDEXING, name_index, name, value_bytes, out);
            return;
        }
        write_literal(INCREMENTAL, name_index, name, value_bytes, out);
        self.insert(name.clone(), value_bytes, size);
    }

    /// Finds `name` and `value` in the dynamic table, newest entry first:
    /// the index of an entry that has both, and of the newest entry with
    /// the name.
    fn find(&self, name: &HeaderName, value: &[u8]) -> (Option<usize>, Option<usize>) {
        let mut same_name = None;
        for (age, entry) in self.table.iter().rev().enumerate() {
            if entry.name != *name {
                continue;
            }
            let index = STATIC_LEN + 1 + age;
            if *entry.value == *value {
                return (Some(index), same_name.or(Some(index)));
            }
            same_name.get_or_insert(index);
        }
        (None, same_name)
    }

    /// Adds an entry of `size` bytes (at most the table's maximum),
    /// evicting the oldest until it fits (RFC 7541 §4.4).
    fn insert(&mut self, name: HeaderName, value: &[u8], size: usize) {
        self.evict(size);
        self.table.push_back(Entry {
            name,
            value: value.into(),
            size,
        });
        self.size += size;
    }

    /// Evicts the oldest entries until `room` more bytes fit (RFC 7541
    /// §4.3).
    fn evict(&mut self, room: usize) {
        while self.size + room > self.max_size {
            let Some(oldest) = self.table.pop_front() else {
                break;
            };
            self.size -= oldest.size;
        }
    }

    /// The dynamic table's size, in bytes (RFC 7541 §4.1).
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn table_size(&self) -> usize {
        self.size
    }
}

/// Whether `name` carries credentials, which are never indexed whatever
/// their value's sensitivity (RFC 7541 §7.1.3 names cookies and
/// authorization as the values an attacker would guess at).
fn is_credential(name: &HeaderName) -> bool {
    name == header::SET_COOKIE
        || name == header::COOKIE
        || name == header::AUTHORIZATION
        || name == header::PROXY_AUTHORIZATION
}

/// Appends a literal field: its name by `name_index` when there is one,
/// else as a string, then its value.
fn write_literal(
    literal: Literal,
    name_index: Option<usize>,
    name: &HeaderName,
    value: &[u8],
    out: &mut BytesMut,
) {
    match name_index {
        Some(index) => encode_integer(index, literal.prefix_bits, literal.flags, out),
        None => {
            encode_integer(0, literal.prefix_bits, literal.flags, out);
            encode_string(name.as_str().as_bytes(), out);
        }
    }
    encode_string(value, out);
}
