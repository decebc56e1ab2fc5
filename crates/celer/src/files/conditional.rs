//! Validators and conditional requests (RFC 9110 §8.8, §13); no IO.
//!
//! [`evaluate`] applies the preconditions in the order RFC 9110 §13.2.2
//! fixes: If-Match, then If-Unmodified-Since (only without If-Match), then
//! If-None-Match, then If-Modified-Since (only without If-None-Match), and
//! finally If-Range, which decides whether a Range header is honoured.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::header::{self, HeaderMap, HeaderValue};

/// The validators of one representation.
#[derive(Debug, Clone)]
pub(crate) struct Validators {
    /// The strong entity tag, quotes included: `"1a-17f3c2..."`.
    pub(crate) etag: HeaderValue,
    /// The modification time, truncated to whole seconds (what an HTTP-date
    /// can say), with its formatted header value.
    pub(crate) modified: Option<(SystemTime, HeaderValue)>,
}

impl Validators {
    /// Validators of a file: a strong ETag from its length and modification
    /// time in nanoseconds, stable across restarts, and Last-Modified.
    pub(crate) fn of_file(len: u64, modified: Option<SystemTime>) -> Validators {
        let nanos = modified
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        let etag = format!("\"{len:x}-{nanos:x}\"");
        Validators {
            etag: HeaderValue::try_from(etag).expect("hex digits are a valid header value"),
            modified: modified.map(|t| {
                let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
                let t = UNIX_EPOCH + Duration::from_secs(secs);
                let value = HeaderValue::try_from(httpdate::fmt_http_date(t))
                    .expect("an HTTP-date is a valid header value");
                (t, value)
            }),
        }
    }

    /// Validators of embedded content: a strong ETag from its length and a
    /// content hash; no modification time.
    pub(crate) fn of_content(len: u64, hash: u64) -> Validators {
        let etag = format!("\"{len:x}-{hash:016x}\"");
        Validators {
            etag: HeaderValue::try_from(etag).expect("hex digits are a valid header value"),
            modified: None,
        }
    }

    fn last_modified(&self) -> Option<SystemTime> {
        self.modified.as_ref().map(|(t, _)| *t)
    }
}

/// What the preconditions decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Serve the representation; `range` says whether a Range header may be
    /// honoured (false when If-Range did not match).
    Proceed { range: bool },
    /// 304 Not Modified.
    NotModified,
    /// 412 Precondition Failed.
    PreconditionFailed,
}

/// Evaluates the request's preconditions against `v` for a GET or HEAD.
pub(crate) fn evaluate(headers: &HeaderMap, v: &Validators) -> Outcome {
    let fields = Fields::of(headers);
    let etag = v.etag.as_bytes();
    // RFC 9110 §13.2.2 step 1: If-Match, strong comparison.
    if fields.if_match.is_present() {
        if !list_matches(
            headers,
            fields.if_match,
            header::IF_MATCH,
            etag,
            Compare::Strong,
        ) {
            return Outcome::PreconditionFailed;
        }
    } else if let Some(since) = date(fields.if_unmodified_since) {
        // Step 2: If-Unmodified-Since, only without If-Match; an invalid
        // date is ignored (§13.1.4). Without a modification time the
        // condition cannot be evaluated, and is false.
        if v.last_modified().is_none_or(|lm| lm > since) {
            return Outcome::PreconditionFailed;
        }
    }
    // Step 3: If-None-Match, weak comparison; for GET and HEAD a match is
    // 304 (§13.1.2).
    if fields.if_none_match.is_present() {
        if list_matches(
            headers,
            fields.if_none_match,
            header::IF_NONE_MATCH,
            etag,
            Compare::Weak,
        ) {
            return Outcome::NotModified;
        }
    } else if let Some(since) = date(fields.if_modified_since) {
        // Step 4: If-Modified-Since, only without If-None-Match (§13.1.3).
        if v.last_modified().is_some_and(|lm| lm <= since) {
            return Outcome::NotModified;
        }
    }
    // Step 5: If-Range (§13.1.5), meaningful only with Range.
    let range = !fields.range.is_present() || if_range_matches(fields.if_range, v);
    Outcome::Proceed { range }
}

/// The request fields the preconditions read, found in one pass over the
/// request's fields: a standard name compares as an enum tag, where a
/// lookup by name hashes the name and probes the map, once per name (six
/// lookups cost ~4× this pass on a request of a few fields).
#[derive(Default)]
struct Fields<'a> {
    if_match: Field<'a>,
    if_none_match: Field<'a>,
    if_modified_since: Field<'a>,
    if_unmodified_since: Field<'a>,
    range: Field<'a>,
    if_range: Field<'a>,
}

/// The values of one field name in a request.
#[derive(Debug, Clone, Copy, Default)]
enum Field<'a> {
    #[default]
    Absent,
    One(&'a HeaderValue),
    /// More than one: read with `HeaderMap::get_all` (rare).
    Many,
}

impl<'a> Fields<'a> {
    fn of(headers: &'a HeaderMap) -> Fields<'a> {
        let mut fields = Fields::default();
        for (name, value) in headers {
            let field = if name == header::IF_NONE_MATCH {
                &mut fields.if_none_match
            } else if name == header::IF_MODIFIED_SINCE {
                &mut fields.if_modified_since
            } else if name == header::IF_MATCH {
                &mut fields.if_match
            } else if name == header::IF_UNMODIFIED_SINCE {
                &mut fields.if_unmodified_since
            } else if name == header::RANGE {
                &mut fields.range
            } else if name == header::IF_RANGE {
                &mut fields.if_range
            } else {
                continue;
            };
            *field = match field {
                Field::Absent => Field::One(value),
                _ => Field::Many,
            };
        }
        fields
    }
}

impl Field<'_> {
    fn is_present(self) -> bool {
        !matches!(self, Field::Absent)
    }
}

/// RFC 9110 §13.1.5: an entity tag must match strongly; a date must equal
/// the Last-Modified date exactly. Anything else (a weak tag, garbage, two
/// fields) does not match, so the full representation is sent.
fn if_range_matches(field: Field<'_>, v: &Validators) -> bool {
    let value = match field {
        Field::Absent => return true,
        Field::Many => return false,
        Field::One(value) => value.as_bytes().trim_ascii(),
    };
    if value.starts_with(b"\"") {
        return value == v.etag.as_bytes();
    }
    if value.starts_with(b"W/") {
        return false;
    }
    let Some(date) = std::str::from_utf8(value)
        .ok()
        .and_then(|s| httpdate::parse_http_date(s).ok())
    else {
        return false;
    };
    v.last_modified() == Some(date)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Compare {
    Strong,
    Weak,
}

/// True when any field of `name` (`field` its values) is `*` or lists a
/// tag equal to `etag` (which is strong) under `cmp` (RFC 9110 §8.8.3.2).
fn list_matches(
    headers: &HeaderMap,
    field: Field<'_>,
    name: header::HeaderName,
    etag: &[u8],
    cmp: Compare,
) -> bool {
    let matches = |value: &HeaderValue| {
        let value = value.as_bytes();
        // The usual case: the one tag the client was given, sent back as
        // it came; a strong tag equal to `etag` matches either way.
        if value == etag {
            return true;
        }
        if value.trim_ascii() == b"*" {
            return true;
        }
        tags(value).any(|(weak, tag)| tag == etag && (cmp == Compare::Weak || !weak))
    };
    match field {
        Field::Absent => false,
        Field::One(value) => matches(value),
        Field::Many => headers.get_all(name).iter().any(matches),
    }
}

/// The entity tags of a list: `(weak, "opaque")`, quotes kept. Elements that
/// are not entity tags are skipped.
fn tags(value: &[u8]) -> impl Iterator<Item = (bool, &[u8])> {
    let mut rest = value;
    std::iter::from_fn(move || {
        loop {
            rest = rest.trim_ascii_start();
            while let [b',', tail @ ..] = rest {
                rest = tail.trim_ascii_start();
            }
            if rest.is_empty() {
                return None;
            }
            let weak = rest.starts_with(b"W/");
            let body = if weak { &rest[2..] } else { rest };
            if body.first() == Some(&b'"') {
                if let Some(close) = body[1..].iter().position(|&b| b == b'"') {
                    let tag = &body[..close + 2];
                    rest = &body[close + 2..];
                    return Some((weak, tag));
                }
                return None;
            }
            // Not a tag: skip to the next comma.
            match rest.iter().position(|&b| b == b',') {
                Some(comma) => rest = &rest[comma..],
                None => return None,
            }
        }
    })
}

/// A valid HTTP-date in `field`; `None` if absent, repeated or invalid
/// (RFC 9110 §13.1.3, §13.1.4: such fields are ignored).
fn date(field: Field<'_>) -> Option<SystemTime> {
    let Field::One(value) = field else {
        return None;
    };
    httpdate::parse_http_date(value.to_str().ok()?.trim()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v() -> Validators {
        Validators::of_file(13, Some(UNIX_EPOCH + Duration::new(1_700_000_000, 123)))
    }

    fn check(headers: &[(&str, &str)], want: Outcome) {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.append(
                header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        assert_eq!(evaluate(&map, &v()), want, "{headers:?}");
    }

    const GO: Outcome = Outcome::Proceed { range: true };
    const FULL: Outcome = Outcome::Proceed { range: false };
    const NM: Outcome = Outcome::NotModified;
    const PF: Outcome = Outcome::PreconditionFailed;
    const LM: &str = "Tue, 14 Nov 2023 22:13:20 GMT";
    const BEFORE: &str = "Tue, 14 Nov 2023 22:13:19 GMT";
    const AFTER: &str = "Tue, 14 Nov 2023 22:13:21 GMT";

    #[test]
    fn etag_is_strong_and_from_length_and_nanoseconds() {
        let want = format!("\"d-{:x}\"", 1_700_000_000_000_000_123u128);
        assert_eq!(v().etag, want.as_str());
        assert_eq!(v().modified.unwrap().1, LM);
    }

    #[test]
    fn if_match() {
        let tag = v().etag.to_str().unwrap().to_owned();
        check(&[("if-match", &tag)], GO);
        check(&[("if-match", "*")], GO);
        check(&[("if-match", &format!("\"x\", {tag}"))], GO);
        check(&[("if-match", &format!("W/{tag}"))], PF);
        check(&[("if-match", "\"other\"")], PF);
        check(&[("if-match", "\"other\""), ("if-match", &tag)], GO);
        check(&[("if-match", "\"a\""), ("if-match", "\"b\"")], PF);
        // If-Unmodified-Since is ignored when If-Match is present.
        check(&[("if-match", &tag), ("if-unmodified-since", BEFORE)], GO);
    }

    #[test]
    fn if_unmodified_since() {
        check(&[("if-unmodified-since", LM)], GO);
        check(&[("if-unmodified-since", AFTER)], GO);
        check(&[("if-unmodified-since", BEFORE)], PF);
        check(&[("if-unmodified-since", "yesterday")], GO);
    }

    #[test]
    fn if_none_match() {
        let tag = v().etag.to_str().unwrap().to_owned();
        check(&[("if-none-match", &tag)], NM);
        check(&[("if-none-match", &format!("W/{tag}"))], NM);
        check(&[("if-none-match", &format!("\"a\",W/\"b\" , {tag}"))], NM);
        check(&[("if-none-match", "*")], NM);
        // Several fields are one list (RFC 9110 §5.3).
        check(
            &[("if-none-match", "\"other\""), ("if-none-match", &tag)],
            NM,
        );
        check(
            &[("if-none-match", "\"a\""), ("if-none-match", "\"b\"")],
            GO,
        );
        check(&[("if-none-match", "\"other\"")], GO);
        // If-Modified-Since is ignored when If-None-Match is present.
        check(
            &[("if-none-match", "\"other\""), ("if-modified-since", AFTER)],
            GO,
        );
        // If-Match is evaluated first.
        check(&[("if-match", "\"other\""), ("if-none-match", &tag)], PF);
    }

    #[test]
    fn if_modified_since() {
        check(&[("if-modified-since", LM)], NM);
        check(&[("if-modified-since", AFTER)], NM);
        check(&[("if-modified-since", BEFORE)], GO);
        check(&[("if-modified-since", "garbage")], GO);
        check(&[("if-modified-since", LM), ("if-modified-since", LM)], GO);
    }

    #[test]
    fn if_range() {
        let tag = v().etag.to_str().unwrap().to_owned();
        check(&[("range", "bytes=0-1"), ("if-range", &tag)], GO);
        check(
            &[("range", "bytes=0-1"), ("if-range", &format!("W/{tag}"))],
            FULL,
        );
        check(&[("range", "bytes=0-1"), ("if-range", "\"stale\"")], FULL);
        check(&[("range", "bytes=0-1"), ("if-range", LM)], GO);
        check(&[("range", "bytes=0-1"), ("if-range", AFTER)], FULL);
        check(&[("range", "bytes=0-1"), ("if-range", "nonsense")], FULL);
        check(&[("if-range", "\"stale\"")], GO);
        // Two If-Range fields: not one valid validator, so the whole.
        check(
            &[
                ("range", "bytes=0-1"),
                ("if-range", &tag),
                ("if-range", &tag),
            ],
            FULL,
        );
    }
}
