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
/// over the name up to its `=` (names are short), then `memchr` for the
/// `;` after the value (values may be long). `;` and `=` are ASCII, so
/// every cut is on a character boundary.
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
            let end = match memchr::memchr(b';', &bytes[eq + 1..]) {
                Some(n) => eq + 1 + n,
                None => bytes.len(),
            };
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
    use super::parse_pairs;

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
}
