//! The HPACK decoder (RFC 7541 §3 and §6): one connection's header blocks
//! into fields, with the dynamic table the peer's encoder drives.
//!
//! A block is always decoded to its end when it can be, even once a field
//! is malformed or the list is over its limit: the peer's encoder has
//! already changed its table for every field, and ours must follow, or
//! the next block would be read against a different table.
//!
//! Table entries keep their parsed form (a pseudo-header, a `HeaderName`
//! or a malformed marker, and a checked value), so a field that refers to
//! one costs a clone. Entries own their bytes (a copy, not a slice of the
//! block that brought them), so the table holds no more than its size
//! says, plus a fixed amount per entry.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};

use super::{
    DecodeError, Decoded, Entry, Field, Name, STATIC_LEN, STATIC_TABLE, Value, decode_integer,
    decode_string,
};

/// The most Huffman buffer a decoder keeps between blocks, in bytes; a
/// larger one, left by an unusually large block, is given back.
const SCRATCH_KEEP: usize = 16 * 1024;

/// One connection's HPACK decoder.
#[derive(Debug)]
pub(crate) struct Decoder {
    /// The dynamic table, newest entry first (index 62).
    table: VecDeque<Entry>,
    /// The sum of the entries' sizes, in bytes.
    size: usize,
    /// The table's maximum size, as the peer last set it, in bytes.
    max_size: usize,
    /// The SETTINGS_HEADER_TABLE_SIZE we advertise: no size update may
    /// pass it (RFC 7541 §6.3).
    limit: usize,
    /// Where Huffman-coded strings are decoded; each is split off it, so
    /// the strings of a block share its allocation, and a later block
    /// reuses it once they are all dropped.
    scratch: BytesMut,
}

/// How a literal field is represented (RFC 7541 §6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Indexing {
    /// With incremental indexing: the field is added to the table.
    Incremental,
    /// Without indexing: the table is left as it is.
    Without,
    /// Never indexed: as without, and every intermediary must keep it so.
    Never,
}

/// A literal field's name, as read: parsed only when it is needed.
#[derive(Debug)]
enum LiteralName {
    /// The name of a table entry, already parsed.
    Indexed(Name),
    /// A literal name's bytes.
    Raw(Bytes),
}

impl LiteralName {
    /// The name's length in bytes.
    fn len(&self) -> usize {
        match self {
            LiteralName::Indexed(name) => name.len(),
            LiteralName::Raw(raw) => raw.len(),
        }
    }

    /// The name in parsed form.
    fn parse(self) -> Name {
        match self {
            LiteralName::Indexed(name) => name,
            LiteralName::Raw(raw) => Name::parse(&raw),
        }
    }
}

/// The list-size accounting and outcome of one block.
#[derive(Debug)]
struct Block {
    /// What the block came to so far.
    decoded: Decoded,
    /// The size of the list so far (RFC 9113 §6.5.2), in bytes.
    list_size: usize,
    /// The largest list the sink may receive, in bytes.
    max_list_size: usize,
}

impl Block {
    /// Counts a field of `size` bytes (name + value + 32) into the list;
    /// whether it may be handed to the sink, false from the field that
    /// passes the limit on.
    fn admit(&mut self, size: usize) -> bool {
        self.list_size = self.list_size.saturating_add(size);
        if self.list_size > self.max_list_size {
            self.decoded.oversize = true;
        }
        !self.decoded.oversize
    }
}

// ===== impl Decoder =====

impl Decoder {
    /// `max_table_size`: the SETTINGS_HEADER_TABLE_SIZE we advertise (4096
    /// by default); a size update above it is an error.
    pub(crate) fn new(max_table_size: usize) -> Decoder {
        Decoder {
            table: VecDeque::new(),
            size: 0,
            max_size: max_table_size,
            limit: max_table_size,
            scratch: BytesMut::new(),
        }
    }

    /// Decodes one whole header block (HEADERS plus its CONTINUATIONs,
    /// joined). Literal values that are not Huffman-coded are zero-copy
    /// slices of `block`; Huffman-decoded ones share one buffer per block.
    /// Always decodes the whole block when it can (so the dynamic table
    /// stays in step with the peer's), even after oversize or malformed
    /// fields.
    // The block is handed over whole, as the engine joined it; the fields
    // keep slices of it rather than the decoder borrowing it.
    #[allow(clippy::needless_pass_by_value)]
    pub(crate) fn decode(
        &mut self,
        block: Bytes,
        max_list_size: usize,
        sink: &mut dyn FnMut(Field),
    ) -> Result<Decoded, DecodeError> {
        let mut state = Block {
            decoded: Decoded::default(),
            list_size: 0,
            max_list_size,
        };
        let mut pos = 0;
        let mut fields_seen = false;
        let result = loop {
            let Some(&first) = block.get(pos) else {
                break Ok(state.decoded);
            };
            // The representation is told by the first byte's leading bits
            // (RFC 7541 §6).
            let step = if first & 0x80 != 0 {
                self.indexed(&block, &mut pos, &mut state, sink)
            } else if first & 0x40 != 0 {
                self.literal(&block, &mut pos, 6, Indexing::Incremental, &mut state, sink)
            } else if first & 0x20 != 0 {
                // A dynamic table size update belongs at the start of a
                // block only (RFC 7541 §4.2).
                if fields_seen {
                    break Err(DecodeError);
                }
                self.size_update(&block, &mut pos)
            } else if first & 0x10 != 0 {
                self.literal(&block, &mut pos, 4, Indexing::Never, &mut state, sink)
            } else {
                self.literal(&block, &mut pos, 4, Indexing::Without, &mut state, sink)
            };
            if let Err(error) = step {
                break Err(error);
            }
            fields_seen |= first & 0xe0 != 0x20;
        };
        if self.scratch.capacity() > SCRATCH_KEEP {
            self.scratch = BytesMut::new();
        }
        result
    }

    /// An indexed field (RFC 7541 §6.1): a whole entry of either table.
    fn indexed(
        &self,
        block: &Bytes,
        pos: &mut usize,
        state: &mut Block,
        sink: &mut dyn FnMut(Field),
    ) -> Result<(), DecodeError> {
        let index = decode_integer(block, pos, 7)?;
        let entry = self.entry(index)?;
        if state.admit(entry.size) {
            match entry.field() {
                Some(field) => sink(field),
                None => state.decoded.malformed = true,
            }
        }
        Ok(())
    }

    /// A literal field (RFC 7541 §6.2), its name from an entry of either
    /// table or a literal of its own; with incremental indexing, the
    /// field is added to the table whether or not the sink receives it.
    fn literal(
        &mut self,
        block: &Bytes,
        pos: &mut usize,
        prefix_bits: u32,
        indexing: Indexing,
        state: &mut Block,
        sink: &mut dyn FnMut(Field),
    ) -> Result<(), DecodeError> {
        // Index 0 means a literal name follows (RFC 7541 §6.2.1).
        let name_index = decode_integer(block, pos, prefix_bits)?;
        let name = match name_index {
            0 => LiteralName::Raw(decode_string(block, pos, &mut self.scratch)?),
            index => LiteralName::Indexed(self.entry(index)?.name.clone()),
        };
        let raw_value = decode_string(block, pos, &mut self.scratch)?;
        let admitted = state.admit(name.len() + raw_value.len() + super::ENTRY_OVERHEAD);
        if !admitted && indexing != Indexing::Incremental {
            // Past the limit and not for the table: nothing more to do.
            return Ok(());
        }
        let name = name.parse();
        if indexing == Indexing::Incremental {
            // The entry owns a copy of its value: a slice would keep the
            // whole block (or its Huffman buffer) alive for as long as the
            // entry lives.
            let value = Value::parse(&name, Bytes::copy_from_slice(&raw_value));
            let entry = Entry::new(name, value);
            if admitted {
                match entry.field() {
                    Some(field) => sink(field),
                    None => state.decoded.malformed = true,
                }
            }
            self.insert(entry);
            return Ok(());
        }
        match name {
            Name::Header(name) => match super::header_value(raw_value) {
                Ok(mut value) => {
                    // RFC 7541 §7.1.3: a never-indexed value stays so if
                    // it is sent on; `HeaderValue` carries that as
                    // sensitivity, which our encoder honours.
                    value.set_sensitive(indexing == Indexing::Never);
                    sink(Field::Header(name, value));
                }
                Err(_) => state.decoded.malformed = true,
            },
            Name::Pseudo(pseudo) if super::is_valid_pseudo_value(&raw_value) => {
                sink(Field::Pseudo(pseudo, raw_value));
            }
            Name::Pseudo(_) | Name::Malformed(_) => state.decoded.malformed = true,
        }
        Ok(())
    }

    /// A dynamic table size update (RFC 7541 §6.3): the new maximum, at
    /// most the size we advertise, evicting what no longer fits.
    fn size_update(&mut self, block: &Bytes, pos: &mut usize) -> Result<(), DecodeError> {
        let new_size = decode_integer(block, pos, 5)?;
        if new_size > self.limit {
            return Err(DecodeError);
        }
        self.max_size = new_size;
        self.evict(0);
        Ok(())
    }

    /// The entry at `index` (from 1): the static table, then the dynamic
    /// table newest first. Index 0, or one past both, is an error (RFC 7541
    /// §2.3.3).
    fn entry(&self, index: usize) -> Result<&Entry, DecodeError> {
        match index {
            0 => Err(DecodeError),
            1..=STATIC_LEN => Ok(&STATIC_TABLE[index - 1]),
            _ => self.table.get(index - STATIC_LEN - 1).ok_or(DecodeError),
        }
    }

    /// Adds an entry, evicting the oldest until it fits; an entry larger
    /// than the table empties it and is not added (RFC 7541 §4.4).
    fn insert(&mut self, entry: Entry) {
        self.evict(entry.size);
        if entry.size <= self.max_size {
            self.size += entry.size;
            self.table.push_front(entry);
        }
    }

    /// Evicts the oldest entries until `room` more bytes fit, or the table
    /// is empty (RFC 7541 §4.3).
    fn evict(&mut self, room: usize) {
        while self.size + room > self.max_size {
            let Some(oldest) = self.table.pop_back() else {
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

    /// The dynamic table's entries, newest first, as text: for the tests
    /// that compare it with RFC 7541 Appendix C's.
    #[cfg(test)]
    pub(super) fn table_entries(&self) -> Vec<(String, String)> {
        let text = |entry: &Entry| {
            let name = match &entry.name {
                Name::Pseudo(pseudo) => pseudo.name().to_owned(),
                Name::Header(name) => name.as_str().to_owned(),
                Name::Malformed(len) => format!("<malformed name of {len} bytes>"),
            };
            let value = match &entry.value {
                Value::Pseudo(value) => String::from_utf8_lossy(value).into_owned(),
                Value::Header(value) => String::from_utf8_lossy(value.as_bytes()).into_owned(),
                Value::Malformed(len) => format!("<malformed value of {len} bytes>"),
            };
            (name, value)
        };
        self.table.iter().map(text).collect()
    }
}
