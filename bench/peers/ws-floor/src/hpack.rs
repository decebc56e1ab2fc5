//! An HPACK decoder (RFC 7541) for `--h2`: the dynamic table, Huffman
//! strings and size updates, and nothing allocated per field except the
//! entries a block adds to the table.
//!
//! Huffman strings are decoded with the canonical form of the RFC's code
//! (appendix B): its codes are assigned in order of (length, symbol), so
//! the code lengths alone rebuild it. Decoding compares the next 30 bits,
//! left-aligned, against each length's last code, shortest first.

use std::collections::VecDeque;
use std::sync::OnceLock;

/// The dynamic table's size when the server's SETTINGS name none: the
/// floor advertises no other.
const TABLE_SIZE: usize = 4096;

/// Bytes an entry adds to a table's size besides its name and value
/// (RFC 7541 section 4.1).
const ENTRY_OVERHEAD: usize = 32;

/// The static table (RFC 7541 appendix A), from index 1.
const STATIC: [(&[u8], &[u8]); 61] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

/// The Huffman code's lengths in bits, by symbol: bytes 0–255, then EOS
/// (RFC 7541 appendix B).
#[rustfmt::skip]
const CODE_LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28,
    28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,
    6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6,
    5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,
    13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,
    15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5,
    6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28,
    20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23,
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,
    22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23,
    21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25,
    19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,
    20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23,
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
    30,
];

/// The shortest and longest code.
const MIN_LEN: usize = 5;
const MAX_LEN: usize = 30;

/// The canonical code, by length: the symbols in code order, and per
/// length the first code and where its symbols start in that order.
struct Code {
    symbols: [u16; 257],
    /// Per length: one past its last code, left-aligned to 30 bits (0
    /// when the length has no codes, 0 never being above a code).
    limit: [u32; MAX_LEN + 1],
    first: [u32; MAX_LEN + 1],
    start: [u16; MAX_LEN + 1],
}

fn code() -> &'static Code {
    static CODE: OnceLock<Code> = OnceLock::new();
    CODE.get_or_init(|| {
        let mut order: Vec<u16> = (0..257).collect();
        order.sort_by_key(|&s| (CODE_LENGTHS[usize::from(s)], s));
        let mut code = Code {
            symbols: [0; 257],
            limit: [0; MAX_LEN + 1],
            first: [0; MAX_LEN + 1],
            start: [0; MAX_LEN + 1],
        };
        let (mut next, mut len) = (0u32, MIN_LEN);
        for (i, &symbol) in order.iter().enumerate() {
            let l = usize::from(CODE_LENGTHS[usize::from(symbol)]);
            if l != len {
                next <<= l - len;
                len = l;
            }
            if code.limit[l] == 0 {
                code.first[l] = next;
                code.start[l] = i as u16;
            }
            code.symbols[i] = symbol;
            next += 1;
            code.limit[l] = next << (MAX_LEN - l);
        }
        code
    })
}

/// Decodes a Huffman string into `out`; false when it is malformed (EOS
/// in it, or padding longer than 7 bits or not all ones).
fn huffman(input: &[u8], out: &mut Vec<u8>) -> bool {
    let code = code();
    // Bits not yet decoded, at the low end of `acc`.
    let (mut acc, mut bits) = (0u64, 0usize);
    let mut bytes = input.iter();
    loop {
        while bits <= 56 {
            match bytes.next() {
                Some(&b) => {
                    acc = acc << 8 | u64::from(b);
                    bits += 8;
                }
                None => break,
            }
        }
        if bits == 0 {
            return true;
        }
        // The next 30 bits, left-aligned; past the end, ones (EOS's
        // prefix), so that a short tail never matches a real code.
        let window = if bits >= MAX_LEN {
            (acc >> (bits - MAX_LEN)) as u32 & ((1 << MAX_LEN) - 1)
        } else {
            ((acc << (MAX_LEN - bits)) as u32 | ((1 << (MAX_LEN - bits)) - 1))
                & ((1 << MAX_LEN) - 1)
        };
        let Some(len) = (MIN_LEN..=MAX_LEN).find(|&l| window < code.limit[l]) else {
            return false;
        };
        if len > bits {
            // What is left is padding: at most 7 bits, all ones.
            return bits <= 7 && acc & ((1 << bits) - 1) == (1 << bits) - 1;
        }
        let at = code.start[len] as u32 + (window >> (MAX_LEN - len)) - code.first[len];
        let symbol = code.symbols[at as usize];
        if symbol == 256 {
            return false;
        }
        out.push(symbol as u8);
        bits -= len;
        acc &= (1u64 << bits) - 1;
    }
}

/// A dynamic table entry: its name and value.
type Entry = (Box<[u8]>, Box<[u8]>);

/// One connection's decoder.
pub struct Decoder {
    /// The dynamic table, newest first, and its size.
    table: VecDeque<Entry>,
    size: usize,
    max: usize,
    /// Decoded Huffman strings of the block being read.
    scratch: Vec<u8>,
}

/// Where a field's name or value is while a block is read.
#[derive(Clone, Copy)]
enum Text {
    /// In the block, at this range.
    Block(usize, usize),
    /// In the decoder's scratch buffer.
    Scratch(usize, usize),
    /// The name of entry `index` (from 1).
    EntryName(usize),
}

impl Decoder {
    pub fn new() -> Decoder {
        Decoder {
            table: VecDeque::new(),
            size: 0,
            max: TABLE_SIZE,
            scratch: Vec::new(),
        }
    }

    /// Decodes one whole header block, calling `field` with each name and
    /// value; `Err(())` when the block is malformed (a compression error:
    /// the connection is done).
    pub fn decode(&mut self, block: &[u8], mut field: impl FnMut(&[u8], &[u8])) -> Result<(), ()> {
        self.scratch.clear();
        let mut at = 0;
        let mut fields_seen = false;
        while at < block.len() {
            let b = block[at];
            if b & 0x80 != 0 {
                // Indexed field (section 6.1).
                let index = integer(block, &mut at, 7)?;
                let (name, value) = self.entry(index)?;
                field(name, value);
            } else if b & 0xe0 == 0x20 {
                // Dynamic table size update (section 6.3): only before
                // the block's first field.
                if fields_seen {
                    return Err(());
                }
                let size = integer(block, &mut at, 5)?;
                if size > TABLE_SIZE {
                    return Err(());
                }
                self.max = size;
                self.evict(0);
                continue;
            } else {
                // A literal (section 6.2): with incremental indexing
                // (01), without (0000) or never indexed (0001).
                let indexing = b & 0x40 != 0;
                let index = integer(block, &mut at, if indexing { 6 } else { 4 })?;
                let name = if index == 0 {
                    self.string(block, &mut at)?
                } else {
                    self.entry(index)?;
                    Text::EntryName(index)
                };
                let value = self.string(block, &mut at)?;
                let (n, v) = (self.text(block, name), self.text(block, value));
                field(n, v);
                if indexing {
                    let entry: Entry = (n.into(), v.into());
                    self.insert(entry);
                }
            }
            fields_seen = true;
        }
        Ok(())
    }

    /// Static or dynamic entry `index` (from 1).
    fn entry(&self, index: usize) -> Result<(&[u8], &[u8]), ()> {
        match index {
            0 => Err(()),
            1..=61 => Ok(STATIC[index - 1]),
            _ => self
                .table
                .get(index - 62)
                .map(|(n, v)| (&n[..], &v[..]))
                .ok_or(()),
        }
    }

    /// A string literal (section 5.2) at `at`.
    fn string(&mut self, block: &[u8], at: &mut usize) -> Result<Text, ()> {
        let huffman_coded = *block.get(*at).ok_or(())? & 0x80 != 0;
        let len = integer(block, at, 7)?;
        let end = at
            .checked_add(len)
            .filter(|&e| e <= block.len())
            .ok_or(())?;
        let raw = (*at, end);
        *at = end;
        if !huffman_coded {
            return Ok(Text::Block(raw.0, raw.1));
        }
        let start = self.scratch.len();
        if !huffman(&block[raw.0..raw.1], &mut self.scratch) {
            return Err(());
        }
        Ok(Text::Scratch(start, self.scratch.len()))
    }

    fn text<'a>(&'a self, block: &'a [u8], text: Text) -> &'a [u8] {
        match text {
            Text::Block(s, e) => &block[s..e],
            Text::Scratch(s, e) => &self.scratch[s..e],
            Text::EntryName(index) => self.entry(index).map_or(&[][..], |(name, _)| name),
        }
    }

    /// Adds an entry, evicting the oldest as needed; one larger than the
    /// table empties it (section 4.4).
    fn insert(&mut self, entry: Entry) {
        let size = entry.0.len() + entry.1.len() + ENTRY_OVERHEAD;
        self.evict(size);
        if size <= self.max {
            self.size += size;
            self.table.push_front(entry);
        }
    }

    /// Evicts the oldest entries until `room` more bytes fit.
    fn evict(&mut self, room: usize) {
        while self.size + room > self.max {
            match self.table.pop_back() {
                Some((n, v)) => self.size -= n.len() + v.len() + ENTRY_OVERHEAD,
                None => break,
            }
        }
    }
}

/// An integer with an N-bit prefix (section 5.1) at `at`.
fn integer(block: &[u8], at: &mut usize, prefix: u32) -> Result<usize, ()> {
    let max = (1usize << prefix) - 1;
    let mut value = usize::from(*block.get(*at).ok_or(())?) & max;
    *at += 1;
    if value < max {
        return Ok(value);
    }
    for shift in (0..28).step_by(7) {
        let b = *block.get(*at).ok_or(())?;
        *at += 1;
        value += usize::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(value);
        }
    }
    // Longer than any size this decoder takes.
    Err(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
            .collect()
    }

    fn fields(d: &mut Decoder, block: &[u8]) -> Vec<(String, String)> {
        let mut out = Vec::new();
        d.decode(block, |n, v| {
            out.push((
                String::from_utf8_lossy(n).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            ))
        })
        .expect("a valid block");
        out
    }

    #[test]
    fn huffman_decodes_the_rfc_example() {
        // RFC 7541 appendix C.4.1.
        let mut out = Vec::new();
        assert!(huffman(&hex("f1e3c2e5f23a6ba0ab90f4ff"), &mut out));
        assert_eq!(out, b"www.example.com");
    }

    #[test]
    fn huffman_refuses_bad_padding_and_eos() {
        let mut out = Vec::new();
        // 'a' (00011) then three zero bits of padding.
        assert!(!huffman(&[0b0001_1000], &mut out));
        // A whole byte of ones after a complete symbol: padding over 7 bits.
        assert!(!huffman(&[0b0001_1111, 0xff], &mut out));
        // EOS itself (30 ones) inside the string.
        assert!(!huffman(&[0xff, 0xff, 0xff, 0xff], &mut out));
    }

    #[test]
    fn a_request_then_the_same_from_the_table() {
        // Two blocks from an independent encoder (incremental indexing,
        // every string Huffman-coded, codes of 5 to 30 bits among them);
        // the second names the dynamic table only.
        let want = [
            (":method", "GET"),
            (":scheme", "https"),
            (":path", "/doc.json?x=1"),
            (":authority", "127.0.0.1:8443"),
            ("user-agent", "h2load nghttp2/1.52.0"),
            ("if-none-match", "\"682a257fcb140969\""),
            ("accept-encoding", "gzip, deflate, br"),
            ("x-odd", "\u{0}\u{ff}~{|}"),
        ];
        let want: Vec<_> = want
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        let mut d = Decoder::new();
        let first = hex(concat!(
            "8287448a6243917e883d5fe79803418a089d5c0b8170dc79a6997a8f9c541c72",
            "2954d3a5358980aed89707698efe5c7843136eca48c2d01f71ffe7508d9bd9ab",
            "fa5242cb40d25fa523b34084f2b1e4938effc7fff1ffffe3ffdfffdff3ffdf"
        ));
        assert_eq!(fields(&mut d, &first), want);
        assert_eq!(fields(&mut d, &hex("8287c3c2c1c0bfbe")), want);
    }

    #[test]
    fn size_updates_evict_and_bad_indices_fail() {
        let mut d = Decoder::new();
        // A literal with indexing: "custom-key: custom-value" (RFC 7541 C.2.1).
        let block = hex("400a637573746f6d2d6b65790d637573746f6d2d686561646572");
        assert_eq!(
            fields(&mut d, &block),
            [("custom-key".into(), "custom-header".into())]
        );
        assert_eq!(d.table.len(), 1);
        // A size update to 0 empties the table; index 62 is then unknown.
        assert_eq!(fields(&mut d, &[0x20]), []);
        assert_eq!(d.table.len(), 0);
        assert!(d.decode(&[0xbe], |_, _| {}).is_err());
        // Over the advertised size, or after a field: refused.
        assert!(
            Decoder::new()
                .decode(&[0x3f, 0xe2, 0x1f], |_, _| {})
                .is_err()
        );
        assert!(Decoder::new().decode(&[0x82, 0x20], |_, _| {}).is_err());
        // A string longer than the block.
        assert!(
            Decoder::new()
                .decode(&[0x04, 0x05, b'a'], |_, _| {})
                .is_err()
        );
    }
}
