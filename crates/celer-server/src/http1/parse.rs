//! Request head parsing (RFC 9112 §2–§7) on top of httparse; no IO.
//!
//! [`parse_head`] looks at the bytes read so far and answers `Partial` (read
//! more), `Complete` (the head has been split off the buffer, written into
//! the caller's `http::Request` and its framing decided) or a [`Reject`]: the
//! status and reason the connection answers with before it closes.

use std::mem::MaybeUninit;

use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderName, HeaderValue};
use http::{Method, Request, StatusCode, Uri, Version};

use crate::body::Incoming;
pub(crate) use crate::common::Reject;
use crate::limits::Limits;

/// The most header fields the parser can hold, whatever the limit says.
pub(crate) const HEADERS_CAP: usize = 256;

/// How the request body is framed (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyLen {
    /// No body.
    Empty,
    /// Exactly this many bytes (Content-Length).
    Length(u64),
    /// Chunked transfer coding.
    Chunked,
}

/// What a parsed request head says beyond the request itself: the body's
/// framing and the connection's facts.
///
/// The request is written in place into the caller's `http::Request`, so
/// its 200-odd bytes are not moved from frame to frame on every request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Head {
    pub(crate) body: BodyLen,
    pub(crate) keep_alive: bool,
    pub(crate) expect_continue: bool,
    pub(crate) upgrade: bool,
}

impl Reject {
    /// A 400 with `reason`.
    const fn bad(reason: &'static str) -> Reject {
        Reject::new(StatusCode::BAD_REQUEST, reason)
    }
}

/// The outcome of looking at the bytes read so far.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Parsed {
    /// A whole head was split off the front of the buffer and written into
    /// the request.
    Complete(Head),
    /// More bytes are needed.
    Partial,
}

#[derive(Clone, Copy)]
struct Span {
    name: (usize, usize),
    value: (usize, usize),
}

/// Parses one request head from the front of `buf` into `request`, a fresh
/// `Request::new(Incoming::empty())`.
///
/// On `Complete` the head's bytes are removed from `buf` and anything after
/// them (a body, or the next pipelined request) stays; the request's method,
/// target, version and fields are set. On `Partial` the request is left
/// untouched; after a rejection it is partly written and must be dropped.
pub(crate) fn parse_head(
    buf: &mut BytesMut,
    limits: &Limits,
    request: &mut Request<Incoming>,
) -> Result<Parsed, Reject> {
    let mut spans = [MaybeUninit::<Span>::uninit(); HEADERS_CAP];
    let max_headers = limits.max_headers.min(HEADERS_CAP);
    let (len, method, path, version, count) = {
        let mut headers = [MaybeUninit::<httparse::Header<'_>>::uninit(); HEADERS_CAP];
        let mut req = httparse::Request::new(&mut []);
        let status = req.parse_with_uninit_headers(buf, &mut headers[..max_headers]);
        let len = match status {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) => return partial(buf, limits),
            Err(httparse::Error::Version) if other_version(buf).is_none() => {
                return partial(buf, limits);
            }
            Err(httparse::Error::Version) if newer_minor(buf).is_some() => {
                return as_http11(buf, limits, request);
            }
            Err(err) => {
                return Err(
                    limit_on_prefix(buf, limits).unwrap_or_else(|| reject_parse_error(err, buf))
                );
            }
        };
        let base = buf.as_ptr() as usize;
        // The target's end bounds the request line's length from below
        // (`HTTP/1.1` and its line end follow), so a cheap test comes
        // before the exact one.
        let target_end = req
            .path
            .map_or(0, |path| path.as_ptr() as usize - base + path.len());
        if len > limits.max_head_bytes || target_end + LINE_TAIL_MAX > line_limit(limits) {
            if let Some(reject) = limit_on_prefix(buf, limits) {
                return Err(reject);
            }
            if len > limits.max_head_bytes {
                return Err(too_large(buf));
            }
        }
        for (slot, h) in spans.iter_mut().zip(req.headers.iter()) {
            let name = h.name.as_ptr() as usize - base;
            let value = h.value.as_ptr() as usize - base;
            slot.write(Span {
                name: (name, name + h.name.len()),
                value: (value, value + h.value.len()),
            });
        }
        let method = parse_method(req.method.unwrap_or_default())?;
        let path = req.path.unwrap_or_default();
        let path = (path.as_ptr() as usize - base, path.len());
        let version = match req.version {
            Some(0) => Version::HTTP_10,
            _ => Version::HTTP_11,
        };
        (len, method, path, version, req.headers.len())
    };
    if path.1 > limits.max_uri_bytes {
        return Err(Reject::new(
            StatusCode::URI_TOO_LONG,
            "request target too long",
        ));
    }
    let head = buf.split_to(len).freeze();
    let uri = parse_uri(&method, head.slice(path.0..path.0 + path.1))?;
    *request.method_mut() = method;
    *request.uri_mut() = uri;
    *request.version_mut() = version;
    let mut facts = Facts::new(version);
    let headers = request.headers_mut();
    headers.reserve(count);
    for span in &spans[..count] {
        #[allow(unsafe_code)]
        // SAFETY: the loop over `req.headers` above wrote the first `count`
        // slots, and `Span` is `Copy` plain data.
        let span = unsafe { span.assume_init() };
        let name = &head[span.name.0..span.name.1];
        let name = header_name(name)?;
        #[allow(unsafe_code)]
        // SAFETY: `from_maybe_shared_unchecked` requires every byte to be
        // one `HeaderValue::from_bytes` would accept: HTAB, or 0x20..=0xFF
        // but DEL (0x7F). Every byte here is in a field value httparse
        // accepted, and httparse accepts only HTAB, 0x20..=0x7E and
        // 0x80..=0xFF there, each of which the constructor's precondition
        // allows (DEL and the other control bytes fail the parse);
        // `valid_field_bytes` in the tests checks this byte by byte.
        let value = unsafe {
            HeaderValue::from_maybe_shared_unchecked(head.slice(span.value.0..span.value.1))
        };
        facts.observe(&name, &value)?;
        headers.append(name, value);
    }
    let body = facts.framing(limits)?;
    let keep_alive = facts.keep_alive();
    Ok(Parsed::Complete(Head {
        body,
        keep_alive,
        expect_continue: facts.expect_continue,
        upgrade: facts.upgrade,
    }))
}

/// The field name for `bytes`. The names browsers and load generators send
/// most, in their usual spellings, are matched directly; anything else goes
/// through `HeaderName::from_bytes`, which lowercases and classifies it.
fn header_name(bytes: &[u8]) -> Result<HeaderName, Reject> {
    let known = match bytes {
        b"Host" | b"host" => header::HOST,
        b"User-Agent" | b"user-agent" => header::USER_AGENT,
        b"Accept" | b"accept" => header::ACCEPT,
        b"Accept-Encoding" | b"accept-encoding" => header::ACCEPT_ENCODING,
        b"Accept-Language" | b"accept-language" => header::ACCEPT_LANGUAGE,
        b"Connection" | b"connection" => header::CONNECTION,
        b"Content-Length" | b"content-length" => header::CONTENT_LENGTH,
        b"Content-Type" | b"content-type" => header::CONTENT_TYPE,
        b"Cookie" | b"cookie" => header::COOKIE,
        b"Referer" | b"referer" => header::REFERER,
        b"Cache-Control" | b"cache-control" => header::CACHE_CONTROL,
        b"If-None-Match" | b"if-none-match" => header::IF_NONE_MATCH,
        b"If-Modified-Since" | b"if-modified-since" => header::IF_MODIFIED_SINCE,
        b"Origin" | b"origin" => header::ORIGIN,
        b"Authorization" | b"authorization" => header::AUTHORIZATION,
        b"Range" | b"range" => header::RANGE,
        b"Upgrade-Insecure-Requests" | b"upgrade-insecure-requests" => {
            header::UPGRADE_INSECURE_REQUESTS
        }
        _ => return other_header_name(bytes),
    };
    Ok(known)
}

/// [`header_name`] for the names it does not match first: the common names
/// `http` has no constant for, which `from_bytes` would copy into an
/// allocation of their own (browsers' fetch metadata and client hints, the
/// fields a proxy in front adds), then anything else. Out of the first
/// match so that the names every request has are not slowed by these.
#[inline(never)]
fn other_header_name(bytes: &[u8]) -> Result<HeaderName, Reject> {
    // A name built at compile time: a static `Bytes`, shared, never copied.
    macro_rules! name {
        ($name:literal) => {
            const { HeaderName::from_static($name) }
        };
    }
    let known = match bytes {
        b"Sec-Fetch-Site" | b"sec-fetch-site" => name!("sec-fetch-site"),
        b"Sec-Fetch-Mode" | b"sec-fetch-mode" => name!("sec-fetch-mode"),
        b"Sec-Fetch-User" | b"sec-fetch-user" => name!("sec-fetch-user"),
        b"Sec-Fetch-Dest" | b"sec-fetch-dest" => name!("sec-fetch-dest"),
        b"sec-ch-ua" | b"Sec-CH-UA" => name!("sec-ch-ua"),
        b"sec-ch-ua-mobile" | b"Sec-CH-UA-Mobile" => name!("sec-ch-ua-mobile"),
        b"sec-ch-ua-platform" | b"Sec-CH-UA-Platform" => name!("sec-ch-ua-platform"),
        b"Priority" | b"priority" => name!("priority"),
        b"X-Forwarded-For" | b"x-forwarded-for" => name!("x-forwarded-for"),
        b"X-Forwarded-Proto" | b"x-forwarded-proto" => name!("x-forwarded-proto"),
        b"X-Forwarded-Host" | b"x-forwarded-host" => name!("x-forwarded-host"),
        b"X-Real-IP" | b"x-real-ip" => name!("x-real-ip"),
        b"X-Requested-With" | b"x-requested-with" => name!("x-requested-with"),
        _ => return HeaderName::from_bytes(bytes).map_err(|_| Reject::bad("invalid header name")),
    };
    Ok(known)
}

/// The answer to a head that is not complete yet: `Partial`, or the limit
/// the bytes reach first had they come one at a time. A request line longer
/// than [`line_limit`] is refused even when its end and part of the header
/// section follow in the same read (found by the `request_head` fuzz
/// target: whole, such a head waited for more; byte by byte it got 414).
fn partial(buf: &[u8], limits: &Limits) -> Result<Parsed, Reject> {
    // A prefix of `line_cut` bytes with no line end is refused as too long
    // a request line; one of `head_cut` bytes as too large a head.
    let line_cut = line_limit(limits) + 1;
    let head_cut = limits.max_head_bytes;
    let line_end = buf.iter().position(|&b| b == b'\n').unwrap_or(buf.len());
    let line_hit = line_end >= line_cut;
    if buf.len() >= head_cut && !(line_hit && line_cut < head_cut) {
        return Err(too_large(&buf[..head_cut]));
    }
    if line_hit {
        return Err(Reject::new(
            StatusCode::URI_TOO_LONG,
            "request line too long",
        ));
    }
    Ok(Parsed::Partial)
}

/// Bytes of a request line without its end that [`partial`] refuses.
fn line_limit(limits: &Limits) -> usize {
    limits.max_uri_bytes + 32
}

/// Bytes a request line has at most after its target: ` HTTP/1.1\r\n`.
const LINE_TAIL_MAX: usize = 11;

/// The limit the bytes would have hit had they come in smaller pieces: a
/// prefix of `buf` that [`partial`] refuses while the head in it is still
/// undecided. Looked at first, so that an answer never depends on how the
/// bytes were split: a long request line is refused as too long whether or
/// not an error or a line end comes after the limit (found by the
/// `request_head` fuzz target).
#[cold]
#[inline(never)]
fn limit_on_prefix(buf: &[u8], limits: &Limits) -> Option<Reject> {
    let mut cuts = [line_limit(limits) + 1, limits.max_head_bytes];
    cuts.sort_unstable();
    for cut in cuts {
        let prefix = buf.get(..cut)?;
        if let Err(reject) = partial(prefix, limits) {
            return undecided(prefix, limits).then_some(reject);
        }
    }
    None
}

/// True when `prefix` is the start of a head the parser cannot yet accept
/// or refuse, limits aside.
///
/// Through `parse_head` itself, with limits that cannot be reached: a
/// second call site of httparse would stop it being inlined into
/// `parse_head` (about 40 instructions a request).
#[cold]
#[inline(never)]
fn undecided(prefix: &[u8], limits: &Limits) -> bool {
    let unlimited = Limits {
        max_head_bytes: usize::MAX,
        max_uri_bytes: usize::MAX / 2,
        ..limits.clone()
    };
    let mut request = Request::new(Incoming::empty());
    let mut copy = BytesMut::from(prefix);
    matches!(
        parse_head(&mut copy, &unlimited, &mut request),
        Ok(Parsed::Partial)
    )
}

fn too_large(buf: &[u8]) -> Reject {
    if buf.contains(&b'\n') {
        Reject::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "request header section too large",
        )
    } else {
        Reject::new(StatusCode::URI_TOO_LONG, "request line too long")
    }
}

fn reject_parse_error(err: httparse::Error, buf: &[u8]) -> Reject {
    use httparse::Error as E;
    match err {
        E::HeaderName => Reject::bad("invalid header name"),
        E::HeaderValue => Reject::bad("invalid header value"),
        E::NewLine => Reject::bad("invalid line ending"),
        E::Status | E::Token => Reject::bad("invalid request line"),
        E::TooManyHeaders => Reject::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "too many header fields",
        ),
        E::Version => {
            if other_version(buf) == Some(true) {
                Reject::new(
                    StatusCode::HTTP_VERSION_NOT_SUPPORTED,
                    "http version not supported",
                )
            } else {
                Reject::bad("invalid http version")
            }
        }
    }
}

/// Whether a request line httparse refused for its version names another
/// HTTP version (505) or is malformed (400); `None` while the bytes read so
/// far cannot tell. The answer depends only on the version field and the
/// byte or two that end it, so it does not depend on how the bytes were
/// split (the `request_head` fuzz target checks that).
fn other_version(buf: &[u8]) -> Option<bool> {
    // RFC 9112 §3: request-line = method SP request-target SP HTTP-version;
    // httparse reports a version error only after both spaces.
    let line_end = buf.iter().position(|&b| b == b'\n').unwrap_or(buf.len());
    let line = &buf[..line_end];
    let Some(first) = line.iter().position(|&b| b == b' ') else {
        return Some(false);
    };
    let Some(second) = line[first + 1..].iter().position(|&b| b == b' ') else {
        return Some(false);
    };
    let rest = &buf[first + 1 + second + 1..];
    let field_end = rest.iter().position(|&b| matches!(b, b' ' | b'\r' | b'\n'));
    let Some(field_end) = field_end else {
        // The field goes on: undecided while it can still become a version.
        return if version_prefix(rest) {
            None
        } else {
            Some(false)
        };
    };
    let field = &rest[..field_end];
    let ends_line = match &rest[field_end..] {
        [b'\n', ..] | [b'\r', b'\n', ..] => true,
        // A CR whose LF has not arrived yet.
        [b'\r'] => {
            return if well_formed_version(field) {
                None
            } else {
                Some(false)
            };
        }
        _ => false,
    };
    Some(ends_line && well_formed_version(field) && field[5] != b'1')
}

/// Where the minor digit of an `HTTP/1.2` to `HTTP/1.9` version field is,
/// once the request line has ended; `None` for any other line.
fn newer_minor(buf: &[u8]) -> Option<usize> {
    let line_end = buf.iter().position(|&b| b == b'\n')?;
    let line = &buf[..line_end];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let first = line.iter().position(|&b| b == b' ')?;
    let second = first + 1 + line[first + 1..].iter().position(|&b| b == b' ')?;
    match &line[second + 1..] {
        [b'H', b'T', b'T', b'P', b'/', b'1', b'.', b'2'..=b'9'] => Some(line.len() - 1),
        _ => None,
    }
}

/// A request of a later HTTP/1 minor version, processed as HTTP/1.1, the
/// highest minor version this server implements (RFC 9110 §2.5): the
/// version field is rewritten in the buffer and the head parsed again.
#[cold]
#[inline(never)]
fn as_http11(
    buf: &mut BytesMut,
    limits: &Limits,
    request: &mut Request<Incoming>,
) -> Result<Parsed, Reject> {
    if let Some(at) = newer_minor(buf) {
        buf[at] = b'1';
    }
    parse_head(buf, limits, request)
}

/// `HTTP/d.d`, or `HTTP/d` (as HTTP/2 is often written).
fn well_formed_version(field: &[u8]) -> bool {
    matches!(field, [b'H', b'T', b'T', b'P', b'/', major] | [b'H', b'T', b'T', b'P', b'/', major, b'.', b'0'..=b'9'] if major.is_ascii_digit())
}

/// True when more bytes could still make `field` a [`well_formed_version`].
fn version_prefix(field: &[u8]) -> bool {
    let pattern: [fn(u8) -> bool; 8] = [
        |b| b == b'H',
        |b| b == b'T',
        |b| b == b'T',
        |b| b == b'P',
        |b| b == b'/',
        |b| b.is_ascii_digit(),
        |b| b == b'.',
        |b| b.is_ascii_digit(),
    ];
    field.len() <= pattern.len() && field.iter().zip(pattern).all(|(&b, ok)| ok(b))
}

fn parse_method(token: &str) -> Result<Method, Reject> {
    match token {
        "GET" => Ok(Method::GET),
        "POST" => Ok(Method::POST),
        "HEAD" => Ok(Method::HEAD),
        _ => Method::from_bytes(token.as_bytes()).map_err(|_| Reject::bad("invalid method")),
    }
}

/// Checks the request-target form against the method (RFC 9112 §3.2).
fn parse_uri(method: &Method, target: Bytes) -> Result<Uri, Reject> {
    let bad = || Reject::bad("invalid request target");
    match target.first() {
        Some(b'/') => {}
        Some(b'*') if target.len() == 1 => {
            if method != Method::OPTIONS {
                return Err(bad());
            }
        }
        Some(_) if method == Method::CONNECT => {
            // authority-form
            if target.contains(&b'#') {
                return Err(bad());
            }
            return Uri::from_maybe_shared(target).map_err(|_| bad());
        }
        Some(_) => {
            // absolute-form: must carry a scheme and an authority
            let uri = Uri::from_maybe_shared(target).map_err(|_| bad())?;
            if uri.scheme().is_none() || uri.authority().is_none() {
                return Err(bad());
            }
            return Ok(uri);
        }
        None => return Err(bad()),
    }
    // A fragment is not part of a request target; `Uri` would drop it
    // silently, which shows as a shorter path-and-query.
    let len = target.len();
    let uri = Uri::from_maybe_shared(target).map_err(|_| bad())?;
    match uri.path_and_query() {
        Some(pq) if pq.as_str().len() == len => Ok(uri),
        _ => Err(bad()),
    }
}

/// What the header section says about framing and the connection.
struct Facts {
    version: Version,
    hosts: u32,
    content_length: Option<u64>,
    chunked: bool,
    transfer_encoding: bool,
    close: bool,
    keep_alive: bool,
    upgrade_token: bool,
    upgrade_header: bool,
    expect_continue: bool,
    upgrade: bool,
}

impl Facts {
    fn new(version: Version) -> Facts {
        Facts {
            version,
            hosts: 0,
            content_length: None,
            chunked: false,
            transfer_encoding: false,
            close: false,
            keep_alive: false,
            upgrade_token: false,
            upgrade_header: false,
            expect_continue: false,
            upgrade: false,
        }
    }

    fn observe(&mut self, name: &HeaderName, value: &HeaderValue) -> Result<(), Reject> {
        if name == header::HOST {
            self.hosts += 1;
            if self.hosts > 1 {
                return Err(Reject::bad("repeated host header"));
            }
            if !valid_host(value.as_bytes()) {
                return Err(Reject::bad("invalid host header"));
            }
        } else if name == header::CONTENT_LENGTH {
            self.observe_content_length(value.as_bytes())?;
        } else if name == header::TRANSFER_ENCODING {
            self.observe_transfer_encoding(value.as_bytes())?;
        } else if name == header::CONNECTION {
            for token in tokens(value.as_bytes()) {
                if token.eq_ignore_ascii_case(b"close") {
                    self.close = true;
                } else if token.eq_ignore_ascii_case(b"keep-alive") {
                    self.keep_alive = true;
                } else if token.eq_ignore_ascii_case(b"upgrade") {
                    self.upgrade_token = true;
                }
            }
        } else if name == header::UPGRADE {
            self.upgrade_header = true;
        } else if name == header::EXPECT {
            if !value.as_bytes().eq_ignore_ascii_case(b"100-continue") {
                return Err(Reject::new(
                    StatusCode::EXPECTATION_FAILED,
                    "unsupported expectation",
                ));
            }
            self.expect_continue = self.version == Version::HTTP_11;
        }
        Ok(())
    }

    /// RFC 9112 §6.3 ¶5: a list of identical values is one value; any other
    /// difference, sign or non-digit is fatal.
    fn observe_content_length(&mut self, value: &[u8]) -> Result<(), Reject> {
        let conflict = || Reject::bad("conflicting content-length");
        for token in value.split(|&b| b == b',') {
            let token = trim(token);
            if token.is_empty() || token.len() > 19 || !token.iter().all(u8::is_ascii_digit) {
                return Err(Reject::bad("invalid content-length"));
            }
            let n = token
                .iter()
                .fold(0u64, |n, &d| n * 10 + u64::from(d - b'0'));
            match self.content_length {
                Some(prev) if prev != n => return Err(conflict()),
                _ => self.content_length = Some(n),
            }
        }
        Ok(())
    }

    /// RFC 9112 §6.1: chunked must be last and only once; other codings are
    /// not implemented (501).
    fn observe_transfer_encoding(&mut self, value: &[u8]) -> Result<(), Reject> {
        self.transfer_encoding = true;
        let mut any = false;
        for token in value.split(|&b| b == b',') {
            let token = trim(token);
            if token.is_empty() {
                continue;
            }
            any = true;
            if self.chunked {
                return Err(Reject::bad("chunked must be the final transfer coding"));
            }
            if token.eq_ignore_ascii_case(b"chunked") {
                self.chunked = true;
            } else {
                return Err(Reject::new(
                    StatusCode::NOT_IMPLEMENTED,
                    "unsupported transfer coding",
                ));
            }
        }
        if !any {
            return Err(Reject::bad("empty transfer-encoding"));
        }
        Ok(())
    }

    fn framing(&mut self, limits: &Limits) -> Result<BodyLen, Reject> {
        if self.version == Version::HTTP_11 && self.hosts == 0 {
            return Err(Reject::bad("missing host header"));
        }
        self.upgrade = self.upgrade_token && self.upgrade_header;
        if self.transfer_encoding {
            if self.content_length.is_some() {
                return Err(Reject::bad("content-length with transfer-encoding"));
            }
            if self.version == Version::HTTP_10 {
                return Err(Reject::bad("transfer-encoding in http/1.0"));
            }
            if !self.chunked {
                return Err(Reject::bad("chunked must be the final transfer coding"));
            }
            return Ok(BodyLen::Chunked);
        }
        match self.content_length {
            None | Some(0) => Ok(BodyLen::Empty),
            Some(n) if limits.max_body_bytes.is_some_and(|max| n > max) => Err(Reject::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "request body too large",
            )),
            Some(n) => Ok(BodyLen::Length(n)),
        }
    }

    fn keep_alive(&self) -> bool {
        match self.version {
            Version::HTTP_10 => self.keep_alive && !self.close,
            _ => !self.close,
        }
    }
}

/// Comma-separated list members with optional whitespace removed.
pub(crate) fn tokens(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(trim)
        .filter(|t| !t.is_empty())
}

fn trim(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|b| !matches!(b, b' ' | b'\t'));
    let Some(start) = start else { return &[] };
    let end = s
        .iter()
        .rposition(|b| !matches!(b, b' ' | b'\t'))
        .unwrap_or(start);
    &s[start..=end]
}

/// `uri-host [ ":" port ]` as RFC 9110 §7.2 and RFC 3986 §3.2.2–§3.2.3
/// define it: a reg-name or IPv4 address, or an IP literal in brackets,
/// then at most one `:` and a port of digits only; empty is allowed. A
/// value that breaks this is answered 400 (RFC 9112 §3.2).
fn valid_host(value: &[u8]) -> bool {
    let (host, port) = match value.strip_prefix(b"[") {
        Some(rest) => {
            let Some(close) = rest.iter().position(|&b| b == b']') else {
                return false;
            };
            let literal = &rest[..close];
            // IPv6address (with `:`) or IPvFuture (`v`...), RFC 3986 §3.2.2.
            let shaped = literal.contains(&b':') || literal.first() == Some(&b'v');
            if !shaped
                || !literal
                    .iter()
                    .all(|&b| b == b':' || REG_NAME_BYTES[b as usize])
            {
                return false;
            }
            (&[][..], &rest[close + 1..])
        }
        None => match value.iter().position(|&b| b == b':') {
            Some(colon) => (&value[..colon], &value[colon..]),
            None => (value, &[][..]),
        },
    };
    let port_ok = match port {
        [] => true,
        [b':', digits @ ..] => digits.iter().all(u8::is_ascii_digit),
        _ => false,
    };
    port_ok && host.iter().all(|&b| REG_NAME_BYTES[b as usize])
}

/// Bytes of a reg-name or IPv4 address (RFC 3986 §3.2.2): unreserved,
/// sub-delims and `%` of a percent-encoding.
static REG_NAME_BYTES: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'.' | b'-'
                    | b'_'
                    | b'~'
                    | b'%'
                    | b'!'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'('
                    | b')'
                    | b'*'
                    | b'+'
                    | b','
                    | b';'
                    | b'='
            );
        b += 1;
    }
    table
};

#[cfg(test)]
mod tests;
