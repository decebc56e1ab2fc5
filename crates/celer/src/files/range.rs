//! The Range header (RFC 9110 §14.1.2, §14.2); no IO.
//!
//! A header that is not a valid `bytes` range set is ignored (the full
//! representation is sent), as RFC 9110 §14.2 allows. Ranges past the end
//! are dropped; if none is left the answer is 416. Overlapping or adjacent
//! ranges are coalesced (§14.2: a server MAY), which also defeats requests
//! that ask for the same bytes many times over; a set that still has more
//! than [`MAX_RANGES`] ranges is ignored, like nginx's `max_ranges`.

/// Most ranges served in one multipart/byteranges answer, after
/// coalescing; a request asking for more gets the whole representation.
pub const MAX_RANGES: usize = 16;

/// Most range specifications parsed from one Range header; a longer set is
/// ignored without being examined further (the whole representation is
/// sent).
pub const MAX_RANGE_SPECS: usize = 256;

/// A byte range, both ends inclusive (`first <= last < len`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ByteRange {
    pub(crate) first: u64,
    pub(crate) last: u64,
}

impl ByteRange {
    /// Number of bytes in the range.
    pub(crate) fn len(self) -> u64 {
        self.last - self.first + 1
    }
}

/// What a Range header asks of a representation of `len` bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ranges {
    /// Send the whole representation: no valid range set, or too many
    /// ranges.
    Ignore,
    /// 416: no range overlaps the representation.
    Unsatisfiable,
    /// 206 with these ranges, in order, non-overlapping.
    Satisfiable(Vec<ByteRange>),
}

/// Parses `value` for a representation of `len` bytes, allowing at most
/// `max` ranges after coalescing.
pub(crate) fn parse(value: &[u8], len: u64, max: usize) -> Ranges {
    let Some(set) = strip_unit(value) else {
        return Ranges::Ignore;
    };
    let mut ranges = Vec::new();
    let mut specs = 0;
    for spec in set.split(|&b| b == b',') {
        let spec = spec.trim_ascii();
        if spec.is_empty() {
            // RFC 9110 §5.6.1: empty list elements are allowed and ignored.
            continue;
        }
        specs += 1;
        if specs > MAX_RANGE_SPECS {
            return Ranges::Ignore;
        }
        match spec_range(spec, len) {
            Spec::Invalid => return Ranges::Ignore,
            Spec::Unsatisfiable => {}
            Spec::Range(r) => ranges.push(r),
        }
    }
    if specs == 0 {
        return Ranges::Ignore;
    }
    if ranges.is_empty() {
        return Ranges::Unsatisfiable;
    }
    coalesce(&mut ranges);
    if ranges.len() > max {
        return Ranges::Ignore;
    }
    Ranges::Satisfiable(ranges)
}

/// The range set after `bytes=` (the unit is case-insensitive, §14.1).
fn strip_unit(value: &[u8]) -> Option<&[u8]> {
    let value = value.trim_ascii();
    let (unit, rest) = value.split_at_checked(6)?;
    unit.eq_ignore_ascii_case(b"bytes=").then_some(rest)
}

enum Spec {
    Invalid,
    Unsatisfiable,
    Range(ByteRange),
}

/// One `first-last`, `first-` or `-suffix` (RFC 9110 §14.1.2).
fn spec_range(spec: &[u8], len: u64) -> Spec {
    let Some(dash) = spec.iter().position(|&b| b == b'-') else {
        return Spec::Invalid;
    };
    let (first, last) = (&spec[..dash], &spec[dash + 1..]);
    match (number(first), number(last)) {
        // A suffix: the last N bytes; N = 0 is unsatisfiable.
        (None, Some(n)) if first.is_empty() => {
            if n == 0 || len == 0 {
                Spec::Unsatisfiable
            } else {
                Spec::Range(ByteRange {
                    first: len.saturating_sub(n),
                    last: len - 1,
                })
            }
        }
        (Some(first), None) if last.is_empty() => bounded(first, u64::MAX, len),
        (Some(first), Some(last)) if first <= last => bounded(first, last, len),
        _ => Spec::Invalid,
    }
}

/// `first-last` clipped to the representation; a first position at or past
/// the end is unsatisfiable.
fn bounded(first: u64, last: u64, len: u64) -> Spec {
    if first >= len {
        return Spec::Unsatisfiable;
    }
    Spec::Range(ByteRange {
        first,
        last: last.min(len - 1),
    })
}

/// A non-empty run of ASCII digits; values past `u64::MAX` saturate (they
/// are past any file's end anyway).
fn number(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(digits.iter().fold(0u64, |n, &d| {
        n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    }))
}

/// Merges overlapping and adjacent ranges. Ranges that neither overlap nor
/// touch keep the order the client asked for; once any merge is needed the
/// result is in ascending order.
fn coalesce(ranges: &mut Vec<ByteRange>) {
    let touches = |a: &ByteRange, b: &ByteRange| {
        a.first <= b.last.saturating_add(1) && b.first <= a.last.saturating_add(1)
    };
    let needs = ranges
        .iter()
        .enumerate()
        .any(|(i, a)| ranges[i + 1..].iter().any(|b| touches(a, b)));
    if !needs {
        return;
    }
    ranges.sort_unstable_by_key(|r| r.first);
    let mut merged: Vec<ByteRange> = Vec::with_capacity(ranges.len());
    for r in ranges.drain(..) {
        match merged.last_mut() {
            Some(prev) if r.first <= prev.last.saturating_add(1) => {
                prev.last = prev.last.max(r.last)
            }
            _ => merged.push(r),
        }
    }
    *ranges = merged;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(first: u64, last: u64) -> ByteRange {
        ByteRange { first, last }
    }

    #[expect(
        clippy::needless_pass_by_value,
        reason = "table rows read better by value"
    )]
    fn check(value: &str, len: u64, want: Ranges) {
        assert_eq!(
            parse(value.as_bytes(), len, MAX_RANGES),
            want,
            "{value:?} of {len}"
        );
    }

    use Ranges::{Ignore, Satisfiable as Ok, Unsatisfiable};

    #[test]
    fn single_ranges() {
        check("bytes=0-4", 13, Ok(vec![r(0, 4)]));
        check("bytes=7-", 13, Ok(vec![r(7, 12)]));
        check("bytes=-5", 13, Ok(vec![r(8, 12)]));
        check("bytes=-50", 13, Ok(vec![r(0, 12)]));
        check("bytes=5-500", 13, Ok(vec![r(5, 12)]));
        check("BYTES=0-0", 13, Ok(vec![r(0, 0)]));
        check(" bytes=12-12 ", 13, Ok(vec![r(12, 12)]));
        check("bytes=0-99999999999999999999999", 13, Ok(vec![r(0, 12)]));
    }

    #[test]
    fn unsatisfiable() {
        check("bytes=13-", 13, Unsatisfiable);
        check("bytes=20-30", 13, Unsatisfiable);
        check("bytes=-0", 13, Unsatisfiable);
        check("bytes=0-", 0, Unsatisfiable);
        check("bytes=-1", 0, Unsatisfiable);
        check("bytes=20-30, 40-", 13, Unsatisfiable);
        // One satisfiable range is enough; the others are dropped.
        check("bytes=20-30,0-1", 13, Ok(vec![r(0, 1)]));
    }

    #[test]
    fn invalid_sets_are_ignored() {
        for value in [
            "bytes=",
            "bytes=,",
            "bytes=5-1",
            "bytes=a-b",
            "bytes=1",
            "bytes=--1",
            "bytes=1-2-3",
            "items=0-1",
            "bytes 0-1",
            "bytes=0-1,x",
            "bytes=+1-2",
            "bytes=-",
            "",
        ] {
            check(value, 13, Ignore);
        }
    }

    #[test]
    fn multiple_ranges_keep_their_order_unless_they_touch() {
        check("bytes=0-1,5-6", 13, Ok(vec![r(0, 1), r(5, 6)]));
        check("bytes=5-6, 0-1", 13, Ok(vec![r(5, 6), r(0, 1)]));
        check("bytes=0-4,3-8", 13, Ok(vec![r(0, 8)]));
        check("bytes=0-1,2-3", 13, Ok(vec![r(0, 3)]));
        check("bytes=8-9,0-1,1-2", 13, Ok(vec![r(0, 2), r(8, 9)]));
        check("bytes=0-,-3", 13, Ok(vec![r(0, 12)]));
        check("bytes=0-0,,2-2", 13, Ok(vec![r(0, 0), r(2, 2)]));
    }

    #[test]
    fn too_many_ranges_are_ignored() {
        let at_limit: Vec<String> = (0..MAX_RANGES).map(|i| format!("{0}-{0}", i * 2)).collect();
        let want: Vec<ByteRange> = (0..MAX_RANGES as u64).map(|i| r(i * 2, i * 2)).collect();
        check(&format!("bytes={}", at_limit.join(",")), 100, Ok(want));
        let over: Vec<String> = (0..=MAX_RANGES)
            .map(|i| format!("{0}-{0}", i * 2))
            .collect();
        check(&format!("bytes={}", over.join(",")), 100, Ignore);
        // The same byte asked for many times coalesces to one range.
        let same = vec!["0-0"; MAX_RANGE_SPECS].join(",");
        check(&format!("bytes={same}"), 100, Ok(vec![r(0, 0)]));
        let too_long = vec!["0-0"; MAX_RANGE_SPECS + 1].join(",");
        check(&format!("bytes={too_long}"), 100, Ignore);
    }
}
