//! The `Cookie` request header's parser (RFC 6265bis §4.2.1, §5.7): no IO,
//! no allocation, bounded by the caller's limits.

/// The `name=value` pairs of one `Cookie` field value, in order.
///
/// RFC 6265bis §4.2.1 writes the field as `cookie-pair *( ";" SP
/// cookie-pair )`; user agents and proxies are less tidy, so this parser
/// follows the lenient reading of §5.7: pairs are split at `;`, optional
/// whitespace (SP, HTAB) around names and values is dropped, the value is
/// what follows the first `=`, and one pair of surrounding double quotes
/// is removed (§4.1.1 `cookie-value`). A pair without `=` or with an empty
/// name names no cookie a server could have set and is skipped. Values are
/// not percent-decoded: the bytes are the application's.
///
/// ```
/// let pairs: Vec<_> = celer::cookie::parse_pairs(r#"a=1; b="two" ;junk; =x; c=="#).collect();
/// assert_eq!(pairs, [("a", "1"), ("b", "two"), ("c", "=")]);
/// ```
pub fn parse_pairs(field: &str) -> impl Iterator<Item = (&str, &str)> + '_ {
    Pairs { rest: field }
}

/// The iterator of [`parse_pairs`]. Each pair is one pass: a byte loop
/// over the name up to its `=` (names are short), then a word-at-a-time
/// search for the `;` after the value (values may be long). `;` and `=`
/// are ASCII, so every cut is on a character boundary.
struct Pairs<'a> {
    rest: &'a str,
}

impl<'a> Iterator for Pairs<'a> {
    type Item = (&'a str, &'a str);

    #[inline]
    fn next(&mut self) -> Option<(&'a str, &'a str)> {
        loop {
            let rest = self.rest;
            let bytes = rest.as_bytes();
            if bytes.is_empty() {
                return None;
            }
            // The name: up to the first `=` or `;`.
            let mut eq = 0;
            while eq < bytes.len() && bytes[eq] != b'=' && bytes[eq] != b';' {
                eq += 1;
            }
            if eq == bytes.len() {
                // A last pair without `=`.
                self.rest = "";
                return None;
            }
            if bytes[eq] == b';' {
                // A pair without `=`: skipped.
                self.rest = &rest[eq + 1..];
                continue;
            }
            let end = next_semicolon(bytes, eq + 1);
            self.rest = if end < bytes.len() {
                &rest[end + 1..]
            } else {
                ""
            };
            let name = trim_ows(&rest[..eq]);
            if name.is_empty() {
                continue;
            }
            let value = trim_ows(&rest[eq + 1..end]);
            let value = match value.as_bytes() {
                [b'"', .., b'"'] if value.len() >= 2 => &value[1..value.len() - 1],
                _ => value,
            };
            return Some((name, value));
        }
    }
}

/// The index of the first `;` in `bytes` at or after `from`, else
/// `bytes.len()`. Eight bytes at a time: a word XORed with `;;;;;;;;` has
/// a zero byte where a `;` is, and `(x - 0x01..) & !x & 0x80..` flags the
/// lowest zero byte exactly (a borrow only flags bytes above it). A
/// `memchr` call costs more in set-up than it saves on fields this short.
#[inline]
pub(crate) fn next_semicolon(bytes: &[u8], from: usize) -> usize {
    next_byte(bytes, from, b';')
}

/// The index of the first `byte` in `bytes` at or after `from`, else
/// `bytes.len()`, eight bytes at a time as [`next_semicolon`].
#[inline]
fn next_byte(bytes: &[u8], from: usize, byte: u8) -> usize {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    let semis: u64 = u64::from_ne_bytes([byte; 8]);
    let mut i = from;
    // Sixteen bytes a step where SSE2 is there (every x86-64): a compare,
    // a mask of the equal bytes, its lowest bit. No run-time dispatch.
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        use std::arch::x86_64::{
            _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8,
        };
        while let Some(chunk) = bytes.get(i..i + 16) {
            #[allow(unsafe_code)]
            // SAFETY: the build enables SSE2 (the `cfg` above), which these
            // intrinsics need; `chunk` is 16 readable bytes, all an
            // unaligned load reads.
            let found = unsafe {
                let block = _mm_loadu_si128(chunk.as_ptr().cast());
                _mm_movemask_epi8(_mm_cmpeq_epi8(block, _mm_set1_epi8(byte as i8)))
            } as u32;
            if found != 0 {
                return i + found.trailing_zeros() as usize;
            }
            i += 16;
        }
    }
    while let Some(chunk) = bytes.get(i..i + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_le_bytes(word) ^ semis;
        let found = x.wrapping_sub(ONES) & !x & HIGHS;
        if found != 0 {
            return i + (found.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < bytes.len() && bytes[i] != byte {
        i += 1;
    }
    i.min(bytes.len())
}

/// The value of the first pair named `name` in `field`, as a range of
/// `field`: what `parse_pairs(field).find(|(n, _)| *n == name)` answers,
/// without taking the other pairs apart. Pairs are split at every `;`
/// (a name holds no `;`, so the first `;` after a pair's start ends it);
/// a pair matches when it is `OWS name OWS "=" value`, which is exactly
/// when its trimmed name is `name`. A `name` that [`parse_pairs`] can
/// never yield (empty, with `=` or `;`, or with whitespace at either
/// end) finds nothing.
pub(crate) fn find_pair(field: &[u8], name: &[u8]) -> Option<(usize, usize)> {
    match (name.first(), name.last()) {
        (Some(&first), Some(&last)) if !ows(first) && !ows(last) => {}
        _ => return None,
    }
    if name.iter().any(|&b| b == b'=' || b == b';') {
        return None;
    }
    let mut start = 0;
    loop {
        let end = next_semicolon(field, start);
        let pair = &field[start..end];
        let mut i = 0;
        while i < pair.len() && ows(pair[i]) {
            i += 1;
        }
        // A byte loop: names are a few bytes, and most pairs differ in
        // the first one (a `memcmp` call costs more).
        let mut k = 0;
        while k < name.len() && i + k < pair.len() && pair[i + k] == name[k] {
            k += 1;
        }
        if k == name.len() {
            let mut eq = i + k;
            while eq < pair.len() && ows(pair[eq]) {
                eq += 1;
            }
            if eq < pair.len() && pair[eq] == b'=' {
                return Some(value_range(field, start + eq + 1, end));
            }
        }
        if end == field.len() {
            return None;
        }
        start = end + 1;
    }
}

/// [`find_pair`] for one name known in advance (a session's cookie):
/// the name's first byte is searched for eight bytes at a time (as
/// [`next_semicolon`]; `memchr::memmem`'s vectorised search measured
/// ~80 instructions of set-up per call on a 60-byte field), and each
/// occurrence of the name is checked to be a pair's name: only OWS back
/// to the field's start or a `;`, then OWS and `=`. The first occurrence
/// that passes is the first pair of that name, which is what
/// [`find_pair`] answers; the pairs before it are not taken apart.
#[derive(Debug)]
pub(crate) struct NameFinder {
    /// `None` for a name no pair can have (empty, with `=` or `;`, or
    /// with whitespace at either end): it finds nothing.
    name: Option<Box<[u8]>>,
}

impl NameFinder {
    /// A finder of the pairs named `name`.
    pub(crate) fn new(name: &str) -> NameFinder {
        let name = name.as_bytes();
        let valid = match (name.first(), name.last()) {
            (Some(&first), Some(&last)) => {
                !ows(first) && !ows(last) && !name.iter().any(|&b| b == b'=' || b == b';')
            }
            _ => false,
        };
        NameFinder {
            name: valid.then(|| name.into()),
        }
    }

    /// The value of the first pair of the name in `field`, as a range of
    /// `field` (what [`find_pair`] answers).
    #[inline]
    pub(crate) fn find(&self, field: &[u8]) -> Option<(usize, usize)> {
        let name = self.name.as_deref()?;
        let len = name.len();
        let mut from = 0;
        loop {
            let at = next_byte(field, from, name[0]);
            if field.len() - at < len {
                return None;
            }
            let mut k = 1;
            while k < len && field[at + k] == name[k] {
                k += 1;
            }
            if k < len {
                from = at + 1;
                continue;
            }
            let mut before = at;
            while before > 0 && ows(field[before - 1]) {
                before -= 1;
            }
            if before == 0 || field[before - 1] == b';' {
                let mut eq = at + len;
                while eq < field.len() && ows(field[eq]) {
                    eq += 1;
                }
                if eq < field.len() && field[eq] == b'=' {
                    let end = next_semicolon(field, eq + 1);
                    return Some(value_range(field, eq + 1, end));
                }
            }
            from = at + 1;
        }
    }
}

/// SP or HTAB (RFC 9110 §5.6.3 OWS).
#[inline]
fn ows(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// The value between `from` (after the `=`) and `to` (the pair's end):
/// OWS dropped at both ends, then one pair of double quotes.
#[inline]
fn value_range(field: &[u8], mut from: usize, mut to: usize) -> (usize, usize) {
    while from < to && ows(field[from]) {
        from += 1;
    }
    while to > from && ows(field[to - 1]) {
        to -= 1;
    }
    if to - from >= 2 && field[from] == b'"' && field[to - 1] == b'"' {
        from += 1;
        to -= 1;
    }
    (from, to)
}

/// `s` without leading and trailing SP and HTAB (RFC 9110 §5.6.3 OWS).
#[inline]
fn trim_ows(s: &str) -> &str {
    let bytes = s.as_bytes();
    let (mut start, mut end) = (0, bytes.len());
    while start < end && matches!(bytes[start], b' ' | b'\t') {
        start += 1;
    }
    while end > start && matches!(bytes[end - 1], b' ' | b'\t') {
        end -= 1;
    }
    &s[start..end]
}

#[cfg(test)]
mod tests {
    use super::{NameFinder, find_pair, next_semicolon, parse_pairs};

    fn all(field: &str) -> Vec<(&str, &str)> {
        parse_pairs(field).collect()
    }

    #[test]
    fn canonical_form() {
        assert_eq!(all("a=1; b=2"), [("a", "1"), ("b", "2")]);
    }

    #[test]
    fn lenient_whitespace_and_separators() {
        assert_eq!(all(" a = 1 ;;\tb=2;"), [("a", "1"), ("b", "2")]);
    }

    #[test]
    fn quotes_removed_once() {
        assert_eq!(all(r#"a=""x"""#), [("a", "\"x\"")]);
        assert_eq!(all(r#"a=""#), [("a", "\"")]);
        assert_eq!(all(r#"a="""#), [("a", "")]);
    }

    #[test]
    fn empty_value_kept_nameless_skipped() {
        assert_eq!(all("a=; =b; c"), [("a", "")]);
    }

    #[test]
    fn value_keeps_later_equals() {
        assert_eq!(all("t=abc==; u=a=b"), [("t", "abc=="), ("u", "a=b")]);
    }

    /// The block-at-a-time search (sixteen bytes, then eight) finds the
    /// first `;` wherever it sits in a block, after another `;` in the
    /// same block, or in the tail.
    #[test]
    fn semicolon_search_agrees_with_a_byte_loop() {
        let mut field = [b'a'; 72];
        for len in 0..field.len() {
            for from in 0..=len {
                for at in [
                    None,
                    Some(0),
                    Some(7),
                    Some(8),
                    Some(15),
                    Some(16),
                    Some(17),
                    Some(31),
                    Some(32),
                    Some(47),
                    Some(48),
                    Some(len.saturating_sub(1)),
                ] {
                    field.iter_mut().for_each(|b| *b = b'a');
                    if let Some(at) = at.filter(|&at| at < len) {
                        field[at] = b';';
                        if at + 1 < len {
                            field[at + 1] = b';';
                        }
                    }
                    // Bytes whose XOR with `;` borrows across bytes, and
                    // one with the high bit set.
                    if len > 3 && from == 0 {
                        field[1] = b';' ^ 0x01;
                        field[2] = b';' | 0x80;
                    }
                    let bytes = &field[..len];
                    let expect = (from..len).find(|&i| bytes[i] == b';').unwrap_or(len);
                    assert_eq!(next_semicolon(bytes, from), expect, "{bytes:?} from {from}");
                }
            }
        }
    }

    /// `find_pair` answers what the parser's first pair of that name is,
    /// on tidy, untidy and hostile fields and on names no pair can have.
    #[test]
    fn find_pair_agrees_with_the_parser() {
        let fields = [
            "theme=dark; sid=abc; lang=en",
            " sid = \"q\" ;sid=3",
            "sidx=1; sid=2",
            "x=sid=7; sid\t=8",
            "sid; sid=9",
            "s id=1; sid =2",
            "=sid; a b=c; sid=\"",
            "a=\"\"; sid=\"\"\"",
            "sid=",
            "sid",
            "",
            ";;;",
            "a=1;sid=\"x\" ; b=2",
            "averyveryverylongname=averyveryverylongvalue; sid=after-a-long-pair",
            "xxxxxxxxxxxxxxxxsid=1; ssssssssssssssid=2;   \t sid\t= 3 ; sid=4",
            "theme=dark; lang=en; a=1; b=2; x=3; s=4; averyveryverylongname=5",
        ];
        let names = [
            "sid",
            "a",
            "a b",
            "b",
            "x",
            "s",
            "",
            " sid",
            "sid ",
            "a=b",
            "a;",
            "theme",
            "averyveryverylongname",
        ];
        for field in fields {
            for name in names {
                let expect = parse_pairs(field).find(|(n, _)| *n == name).map(|(_, v)| v);
                let got = find_pair(field.as_bytes(), name.as_bytes()).map(|(s, e)| &field[s..e]);
                assert_eq!(got, expect, "{field:?} {name:?}");
                let found = NameFinder::new(name).find(field.as_bytes());
                assert_eq!(
                    found.map(|(s, e)| &field[s..e]),
                    expect,
                    "{field:?} {name:?}"
                );
            }
        }
    }

    /// Every field of up to six bytes over the bytes that matter (name
    /// bytes, OWS, `=`, `;`, `"`): `find_pair` answers what the parser's
    /// first pair of the name is.
    #[test]
    fn find_pair_agrees_with_the_parser_on_every_short_field() {
        const ALPHABET: &[u8] = b"as =;\"\t";
        let names = ["a", "s", "as", "a s", "sa"];
        let finders = names.map(NameFinder::new);
        let mut field = Vec::new();
        for len in 0..=6u32 {
            for mut n in 0..ALPHABET.len().pow(len) {
                field.clear();
                for _ in 0..len {
                    field.push(ALPHABET[n % ALPHABET.len()]);
                    n /= ALPHABET.len();
                }
                let text = std::str::from_utf8(&field).unwrap();
                for (k, name) in names.into_iter().enumerate() {
                    let expect = parse_pairs(text).find(|(n, _)| *n == name).map(|(_, v)| v);
                    let got = find_pair(&field, name.as_bytes()).map(|(s, e)| &text[s..e]);
                    assert_eq!(got, expect, "{text:?} {name:?}");
                    let found = finders[k].find(&field).map(|(s, e)| &text[s..e]);
                    assert_eq!(found, expect, "{text:?} {name:?}");
                }
            }
        }
    }
}
