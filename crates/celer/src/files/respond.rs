//! Responses of the file service: a representation answered under the
//! request's conditionals and ranges, and the short status answers.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Response, StatusCode};

use super::body::{Content, Pieces};
use super::conditional::{self, Outcome, Validators};
use super::encoding::Coding;
use super::range::{self, ByteRange, Ranges};
use crate::Body;

/// The methods the service answers, named in `Allow` on a 405.
const ALLOW: &str = "GET, HEAD";

/// The content type of status answers.
const TEXT: &str = "text/plain; charset=utf-8";

/// What a successful GET would send, and how it is described.
#[derive(Debug)]
pub(crate) struct Rep {
    pub(crate) content: Content,
    pub(crate) len: u64,
    pub(crate) validators: Validators,
    pub(crate) content_type: &'static str,
    /// The coding of a precompressed sibling, if one was chosen.
    pub(crate) encoding: Option<Coding>,
    pub(crate) cache: Option<HeaderValue>,
    /// The answer depends on Accept-Encoding (precompressed siblings on).
    pub(crate) vary: bool,
}

/// An answer other than a representation, decided before or instead of
/// reading a file. Small, so it travels in `Err` cheaply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    /// A short plain-text answer: "404 Not Found".
    Status(StatusCode),
    /// 405 with `Allow: GET, HEAD`.
    MethodNotAllowed,
    /// 301 to the directory form of a path (`/docs` → `/docs/`), so
    /// relative links inside its index resolve against the directory.
    ToDirectory(String),
}

impl Answer {
    pub(crate) const NOT_FOUND: Answer = Answer::Status(StatusCode::NOT_FOUND);
    pub(crate) const FORBIDDEN: Answer = Answer::Status(StatusCode::FORBIDDEN);
    pub(crate) const BAD_REQUEST: Answer = Answer::Status(StatusCode::BAD_REQUEST);
    pub(crate) const INTERNAL: Answer = Answer::Status(StatusCode::INTERNAL_SERVER_ERROR);

    /// The response; HEAD gets the same head and no body.
    pub(crate) fn into_response(self, head: bool) -> Response<Body> {
        match self {
            Answer::Status(code) => status(code, head),
            Answer::MethodNotAllowed => {
                let mut res = status(StatusCode::METHOD_NOT_ALLOWED, head);
                res.headers_mut()
                    .insert(header::ALLOW, HeaderValue::from_static(ALLOW));
                res
            }
            Answer::ToDirectory(href) => {
                let mut res = status(StatusCode::MOVED_PERMANENTLY, head);
                if let Ok(location) = HeaderValue::try_from(href) {
                    res.headers_mut().insert(header::LOCATION, location);
                }
                res
            }
        }
    }
}

/// The answer to a GET (or HEAD, `head`) for `rep` under the request's
/// preconditions (RFC 9110 §13.2.2) and Range (§14.2).
pub(crate) fn representation(
    head: bool,
    headers: &HeaderMap,
    rep: &Rep,
    max_ranges: usize,
) -> Response<Body> {
    let range = match conditional::evaluate(headers, &rep.validators) {
        Outcome::NotModified => return not_modified(rep),
        Outcome::PreconditionFailed => return status(StatusCode::PRECONDITION_FAILED, head),
        // RFC 9110 §14.2: range handling is defined for GET only; a Range
        // on HEAD is ignored.
        Outcome::Proceed { range } if range && !head => single_field(headers, header::RANGE),
        Outcome::Proceed { .. } => None,
    };
    let ranges = range.map_or(Ranges::Ignore, |value| {
        range::parse(value.as_bytes(), rep.len, max_ranges)
    });
    match ranges {
        Ranges::Ignore => whole(head, rep),
        Ranges::Unsatisfiable => unsatisfiable(rep.len),
        Ranges::Satisfiable(ranges) if ranges.len() == 1 => partial(rep, ranges[0]),
        Ranges::Satisfiable(ranges) => multipart(rep, &ranges),
    }
}

/// The value of a field sent exactly once.
fn single_field(headers: &HeaderMap, name: header::HeaderName) -> Option<&HeaderValue> {
    let mut values = headers.get_all(name).iter();
    match (values.next(), values.next()) {
        (Some(value), None) => Some(value),
        _ => None,
    }
}

/// 200 with the whole representation.
fn whole(head: bool, rep: &Rep) -> Response<Body> {
    let (body, mark) = if head {
        // The engine sends no body for HEAD; dropping ours closes the file.
        (Body::empty(), None)
    } else {
        rep.content.region(0, rep.len)
    };
    let mut res = Response::new(body);
    if let Some(mark) = mark {
        res.extensions_mut().insert(mark);
    }
    let headers = res.headers_mut();
    describe(headers, rep);
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(rep.content_type),
    );
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(rep.len));
    res
}

/// 206 with one range (RFC 9110 §15.3.7.1).
fn partial(rep: &Rep, r: ByteRange) -> Response<Body> {
    let (body, mark) = rep.content.region(r.first, r.len());
    let mut res = Response::new(body);
    *res.status_mut() = StatusCode::PARTIAL_CONTENT;
    if let Some(mark) = mark {
        res.extensions_mut().insert(mark);
    }
    let headers = res.headers_mut();
    describe(headers, rep);
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(rep.content_type),
    );
    headers.insert(header::CONTENT_RANGE, content_range(r, rep.len));
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(r.len()));
    res
}

/// 206 with several ranges as multipart/byteranges (RFC 9110 §14.6).
fn multipart(rep: &Rep, ranges: &[ByteRange]) -> Response<Body> {
    let boundary = boundary();
    let mut body = Pieces::default();
    for (i, r) in ranges.iter().enumerate() {
        let lead = if i == 0 { "" } else { "\r\n" };
        body.push_bytes(format!(
            "{lead}--{boundary}\r\ncontent-type: {}\r\ncontent-range: bytes {}-{}/{}\r\n\r\n",
            rep.content_type, r.first, r.last, rep.len
        ));
        body.push_region(&rep.content, r.first, r.len());
    }
    body.push_bytes(format!("\r\n--{boundary}--\r\n"));
    let len = body.len();
    let mut res = Response::new(Body::new(body));
    *res.status_mut() = StatusCode::PARTIAL_CONTENT;
    let headers = res.headers_mut();
    describe(headers, rep);
    let content_type = format!("multipart/byteranges; boundary={boundary}");
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::try_from(content_type).expect("a valid content type"),
    );
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    res
}

/// 416 with `Content-Range: bytes */LEN` (RFC 9110 §15.5.17).
fn unsatisfiable(len: u64) -> Response<Body> {
    let mut res = status(StatusCode::RANGE_NOT_SATISFIABLE, false);
    let value = HeaderValue::try_from(format!("bytes */{len}")).expect("digits");
    res.headers_mut().insert(header::CONTENT_RANGE, value);
    res
}

/// 304 with the fields a 200 would have carried that RFC 9110 §15.4.5
/// requires (ETag, Cache-Control, Vary), and Last-Modified.
fn not_modified(rep: &Rep) -> Response<Body> {
    let mut res = Response::new(Body::empty());
    *res.status_mut() = StatusCode::NOT_MODIFIED;
    let headers = res.headers_mut();
    headers.insert(header::ETAG, rep.validators.etag.clone());
    if let Some((_, date)) = &rep.validators.modified {
        headers.insert(header::LAST_MODIFIED, date.clone());
    }
    if let Some(cache) = &rep.cache {
        headers.insert(header::CACHE_CONTROL, cache.clone());
    }
    if rep.vary {
        headers.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    }
    res
}

/// The fields every 200 and 206 carries.
fn describe(headers: &mut HeaderMap, rep: &Rep) {
    headers.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    headers.insert(header::ETAG, rep.validators.etag.clone());
    if let Some((_, date)) = &rep.validators.modified {
        headers.insert(header::LAST_MODIFIED, date.clone());
    }
    if let Some(cache) = &rep.cache {
        headers.insert(header::CACHE_CONTROL, cache.clone());
    }
    if rep.vary {
        headers.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    }
    if let Some(coding) = rep.encoding {
        headers.insert(
            header::CONTENT_ENCODING,
            HeaderValue::from_static(coding.token()),
        );
    }
}

fn content_range(r: ByteRange, len: u64) -> HeaderValue {
    let value = format!("bytes {}-{}/{len}", r.first, r.last);
    HeaderValue::try_from(value).expect("digits")
}

/// A multipart boundary: 20 hex digits from a per-process random key and a
/// counter, so a file's content cannot be made to contain it in advance.
fn boundary() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(n);
    format!("{:016x}{:04x}", hasher.finish(), n & 0xffff)
}

/// A short plain-text answer with `status`: "404 Not Found".
pub(crate) fn status(status: StatusCode, head: bool) -> Response<Body> {
    let text = format!(
        "{} {}\n",
        status.as_str(),
        status.canonical_reason().unwrap_or("")
    );
    let len = text.len() as u64;
    let body = if head {
        Body::empty()
    } else {
        Body::from(Bytes::from(text))
    };
    let mut res = Response::new(body);
    *res.status_mut() = status;
    res.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(TEXT));
    res.headers_mut()
        .insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    res
}
