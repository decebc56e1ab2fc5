//! The `Accept`, `Accept-Charset`, `Accept-Language` and `Accept-Encoding`
//! request fields (RFC 9110 §12.5): parsing and the choice of the best offer.
//!
//! Sans-IO and never panicking: a malformed list element is skipped, as
//! RFC 9110 §5.6.1 lets a recipient do, and only the first
//! [`MAX_ACCEPT_ELEMENTS`] elements of a field are looked at, so a huge
//! header costs bounded work.

use std::fmt;

use http::header::{self, HeaderMap, HeaderName};

/// Most list elements read from one `Accept*` field (all its lines
/// together); later elements are ignored. Default is 64.
pub const MAX_ACCEPT_ELEMENTS: usize = 64;

/// Most parameters one element may carry; an element with more is ignored
/// as malformed. Default is 8.
pub const MAX_ACCEPT_PARAMS: usize = 8;

/// A quality value in thousandths, `0..=1000` (RFC 9110 §12.4.2).
pub type Quality = u16;

/// The quality given to `identity` when `Accept-Encoding` does not mention
/// it: acceptable (RFC 9110 §12.5.3) but the least preferred.
const IMPLICIT_IDENTITY: Quality = 1;

/// Which proactive-negotiation field a list comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    /// `Accept`: media ranges (RFC 9110 §12.5.1).
    MediaType,
    /// `Accept-Charset` (RFC 9110 §12.5.2).
    Charset,
    /// `Accept-Language`: language ranges, basic filtering of RFC 4647
    /// (RFC 9110 §12.5.4).
    Language,
    /// `Accept-Encoding`: content codings (RFC 9110 §12.5.3).
    Encoding,
}

impl Field {
    /// Every field, in the order a negotiation consults them.
    pub const ALL: [Field; 4] = [
        Field::MediaType,
        Field::Charset,
        Field::Language,
        Field::Encoding,
    ];

    /// The request header this field is read from.
    ///
    /// ```
    /// use celer::middleware::negotiate::Field;
    /// assert_eq!(Field::Language.header(), http::header::ACCEPT_LANGUAGE);
    /// ```
    pub fn header(self) -> HeaderName {
        match self {
            Field::MediaType => header::ACCEPT,
            Field::Charset => header::ACCEPT_CHARSET,
            Field::Language => header::ACCEPT_LANGUAGE,
            Field::Encoding => header::ACCEPT_ENCODING,
        }
    }

    /// The header's name as written in `Vary`.
    pub(crate) fn vary_name(self) -> &'static str {
        match self {
            Field::MediaType => "Accept",
            Field::Charset => "Accept-Charset",
            Field::Language => "Accept-Language",
            Field::Encoding => "Accept-Encoding",
        }
    }
}

/// One element of an `Accept*` list.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Range {
    /// Lower-cased: `text/html`, `text/*`, `en-us`, `gzip`, `*`.
    value: Box<str>,
    /// Media-type parameters before the weight, names lower-cased.
    params: Vec<(Box<str>, Box<str>)>,
    quality: Quality,
}

/// A parsed `Accept*` field: the client's preferences for one dimension.
///
/// ```
/// use celer::middleware::negotiate::{Accept, Field};
///
/// let accept = Accept::parse(Field::MediaType, "text/*;q=0.5, text/html, */*;q=0.1");
/// assert_eq!(accept.quality("text/html"), 1000);
/// assert_eq!(accept.quality("text/plain"), 500);
/// assert_eq!(accept.quality("image/png"), 100);
/// assert_eq!(accept.best(&["image/png", "text/plain"]), Some(1));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Accept {
    field: Field,
    /// Whether the request carried the field at all.
    present: bool,
    ranges: Vec<Range>,
}

// ===== impl Accept =====

impl Accept {
    /// The preferences of a request that does not send the field: every
    /// offer is acceptable.
    pub fn absent(field: Field) -> Accept {
        Accept {
            field,
            present: false,
            ranges: Vec::new(),
        }
    }

    /// Parses one field value. Malformed elements are skipped.
    pub fn parse(field: Field, value: &str) -> Accept {
        let mut accept = Accept {
            field,
            present: true,
            ranges: Vec::new(),
        };
        accept.extend(value);
        accept
    }

    /// Reads `field` from request headers, joining repeated lines (RFC 9110
    /// §5.3); lines that are not visible ASCII are skipped.
    ///
    /// ```
    /// use celer::middleware::negotiate::{Accept, Field};
    /// let mut headers = http::HeaderMap::new();
    /// headers.append("accept-language", "fr".parse().unwrap());
    /// headers.append("accept-language", "en;q=0.5".parse().unwrap());
    /// let accept = Accept::from_headers(Field::Language, &headers);
    /// assert_eq!(accept.best(&["en", "fr"]), Some(1));
    /// ```
    pub fn from_headers(field: Field, headers: &HeaderMap) -> Accept {
        let mut accept = Accept::absent(field);
        for value in headers.get_all(field.header()) {
            accept.present = true;
            if let Ok(text) = value.to_str() {
                accept.extend(text);
            }
        }
        accept
    }

    /// Whether the request sent the field.
    pub fn is_present(&self) -> bool {
        self.present
    }

    fn extend(&mut self, value: &str) {
        for element in split_outside_quotes(value, b',') {
            if self.ranges.len() >= MAX_ACCEPT_ELEMENTS {
                return;
            }
            if let Some(range) = parse_element(self.field, element) {
                self.ranges.push(range);
            }
        }
    }

    /// The quality the client gives `offer`, `0` when it is not acceptable.
    ///
    /// The most specific matching element decides (RFC 9110 §12.5.1):
    /// `text/html;level=1` over `text/html` over `text/*` over `*/*`; for
    /// languages the longest matching prefix; an exact coding or charset
    /// over `*`. A field that is absent, or present with no well-formed
    /// element, accepts everything at `1000`, except `Accept-Encoding`:
    /// present but empty, it accepts only `identity` (RFC 9110 §12.5.3).
    pub fn quality(&self, offer: &str) -> Quality {
        let offer = Offer::parse(self.field, offer);
        let best = self
            .ranges
            .iter()
            .filter_map(|range| offer.specificity(range).map(|spec| (spec, range.quality)))
            // The first of equally specific elements wins.
            .fold(
                None::<(usize, Quality)>,
                |best, (spec, quality)| match best {
                    Some((best_spec, _)) if best_spec >= spec => best,
                    _ => Some((spec, quality)),
                },
            );
        if let Some((_, quality)) = best {
            return quality;
        }
        if self.field == Field::Encoding && self.present {
            // RFC 9110 §12.5.3: `identity` is acceptable unless excluded;
            // other codings must be listed.
            return if offer.main == "identity" {
                IMPLICIT_IDENTITY
            } else {
                0
            };
        }
        if self.present && !self.ranges.is_empty() {
            0
        } else {
            1000
        }
    }

    /// The index of the best acceptable offer: highest quality, the
    /// earliest offer (the server's preference) among equals; `None` when
    /// none is acceptable.
    pub fn best<S: AsRef<str>>(&self, offers: &[S]) -> Option<usize> {
        let mut best: Option<(usize, Quality)> = None;
        for (idx, offer) in offers.iter().enumerate() {
            let quality = self.quality(offer.as_ref());
            if quality > 0 && best.is_none_or(|(_, best_q)| quality > best_q) {
                best = Some((idx, quality));
            }
        }
        best.map(|(idx, _)| idx)
    }
}

impl fmt::Debug for Accept {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ranges: Vec<String> = self
            .ranges
            .iter()
            .map(|r| format!("{};q={}", r.value, r.quality))
            .collect();
        f.debug_struct("Accept")
            .field("field", &self.field)
            .field("present", &self.present)
            .field("ranges", &ranges)
            .finish()
    }
}

/// A server's offer, split like a range for matching.
struct Offer<'a> {
    field: Field,
    main: String,
    params: Vec<(String, &'a str)>,
}

impl<'a> Offer<'a> {
    fn parse(field: Field, offer: &'a str) -> Offer<'a> {
        let mut parts = split_outside_quotes(offer, b';');
        let mut main = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        if field == Field::Encoding && (main == "x-gzip" || main == "x-compress") {
            // RFC 9110 §8.4.1: x-gzip and x-compress are aliases.
            main.drain(..2);
        }
        let params = parts
            .filter_map(|part| {
                let (name, value) = part.split_once('=')?;
                Some((name.trim().to_ascii_lowercase(), unquote(value.trim())))
            })
            .collect();
        Offer {
            field,
            main,
            params,
        }
    }

    /// How specifically `range` matches this offer, `None` if it does not.
    fn specificity(&self, range: &Range) -> Option<usize> {
        match self.field {
            Field::MediaType => self.media_specificity(range),
            Field::Language => {
                if &*range.value == "*" {
                    return Some(0);
                }
                let prefix_match = self.main.len() > range.value.len()
                    && self.main.starts_with(&*range.value)
                    && self.main.as_bytes()[range.value.len()] == b'-';
                (self.main == *range.value || prefix_match)
                    .then(|| 1 + range.value.matches('-').count())
            }
            Field::Charset | Field::Encoding => {
                if &*range.value == "*" {
                    Some(0)
                } else {
                    (self.main == *range.value).then_some(1)
                }
            }
        }
    }

    fn media_specificity(&self, range: &Range) -> Option<usize> {
        let (offer_type, offer_sub) = self.main.split_once('/')?;
        let (range_type, range_sub) = range.value.split_once('/')?;
        if range_type == "*" {
            return Some(0);
        }
        if range_type != offer_type {
            return None;
        }
        if range_sub == "*" {
            return Some(1);
        }
        if range_sub != offer_sub {
            return None;
        }
        for (name, value) in &range.params {
            let found = self
                .params
                .iter()
                .any(|(n, v)| n == &**name && v.eq_ignore_ascii_case(value));
            if !found {
                return None;
            }
        }
        Some(2 + range.params.len())
    }
}

/// Parses one list element; `None` when malformed.
fn parse_element(field: Field, element: &str) -> Option<Range> {
    let mut parts = split_outside_quotes(element, b';');
    let value = parts.next()?.trim();
    if !valid_range(field, value) {
        return None;
    }
    let mut range = Range {
        value: value.to_ascii_lowercase().into(),
        params: Vec::new(),
        quality: 1000,
    };
    if field == Field::Encoding && (&*range.value == "x-gzip" || &*range.value == "x-compress") {
        // RFC 9110 §8.4.1: x-gzip and x-compress are aliases.
        range.value = range.value[2..].into();
    }
    for (n_params, part) in parts.enumerate() {
        if n_params >= MAX_ACCEPT_PARAMS {
            return None;
        }
        let (name, raw) = part.trim().split_once('=')?;
        if !is_token(name) {
            return None;
        }
        if name.eq_ignore_ascii_case("q") {
            // RFC 9110 §12.4.2: the weight ends the media-type parameters;
            // what follows are extensions, ignored here.
            range.quality = parse_quality(raw)?;
            break;
        }
        let value = unquote(raw);
        if field == Field::MediaType {
            range
                .params
                .push((name.to_ascii_lowercase().into(), value.into()));
        }
    }
    Some(range)
}

fn valid_range(field: Field, value: &str) -> bool {
    match field {
        Field::MediaType => match value.split_once('/') {
            // `*/html` is not a media range (RFC 9110 §12.5.1).
            Some(("*", sub)) => sub == "*",
            Some((kind, sub)) => is_token(kind) && is_token(sub),
            None => false,
        },
        Field::Language => {
            value == "*"
                || (!value.is_empty()
                    && value.split('-').all(|tag| {
                        (1..=8).contains(&tag.len())
                            && tag.bytes().all(|b| b.is_ascii_alphanumeric())
                    }))
        }
        Field::Charset | Field::Encoding => is_token(value),
    }
}

/// `qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )`.
fn parse_quality(raw: &str) -> Option<Quality> {
    let (int, frac) = match raw.split_once('.') {
        Some((int, frac)) => (int, frac),
        None => (raw, ""),
    };
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut thousandths: Quality = 0;
    for idx in 0..3 {
        let digit = frac
            .as_bytes()
            .get(idx)
            .map_or(0, |b| Quality::from(b - b'0'));
        thousandths = thousandths * 10 + digit;
    }
    match int {
        "0" => Some(thousandths),
        "1" if thousandths == 0 => Some(1000),
        _ => None,
    }
}

/// RFC 9110 §5.6.2 token characters.
fn is_token(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

fn unquote(value: &str) -> &str {
    value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(value)
}

/// Splits on `sep` outside quoted strings, skipping empty elements (RFC 9110
/// §5.6.1 list syntax allows them).
fn split_outside_quotes(text: &str, sep: u8) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        loop {
            if rest.is_empty() {
                return None;
            }
            let bytes = rest.as_bytes();
            let mut in_quotes = false;
            let mut escaped = false;
            let mut end = bytes.len();
            for (idx, &b) in bytes.iter().enumerate() {
                if escaped {
                    escaped = false;
                } else if in_quotes && b == b'\\' {
                    escaped = true;
                } else if b == b'"' {
                    in_quotes = !in_quotes;
                } else if b == sep && !in_quotes {
                    end = idx;
                    break;
                }
            }
            let item = &rest[..end];
            rest = rest.get(end + 1..).unwrap_or("");
            if !item.trim().is_empty() {
                return Some(item);
            }
        }
    })
}
