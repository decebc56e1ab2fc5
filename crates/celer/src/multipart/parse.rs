//! The `multipart/form-data` parser (RFC 7578 over RFC 2046 §5.1): sans-IO,
//! it reads from a buffer the caller fills and hands out part heads and
//! body chunks, holding at most one part head plus one delimiter's length
//! of body at a time.

use bytes::{Buf, Bytes, BytesMut};
use memchr::memmem::Finder;

use super::limits::Limits;

/// What the parser found in the buffer.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Event {
    /// More input is needed (or the end of input, if there is none).
    NeedMore,
    /// A part begins; its head, already parsed.
    Part(PartHead),
    /// A chunk of the current part's body.
    Data(Bytes),
    /// The current part ended.
    PartEnd,
    /// The close delimiter was read; the rest (the epilogue) is ignored.
    End,
}

/// The parsed head of a part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PartHead {
    /// The field name from `Content-Disposition: form-data; name=...`.
    pub(super) name: String,
    /// The `filename` parameter as sent, if any.
    pub(super) raw_file_name: Option<String>,
    /// The part's `Content-Type`, if any (RFC 7578 §4.4: `text/plain` when
    /// absent).
    pub(super) content_type: Option<String>,
}

/// Why a body is not acceptable `multipart/form-data`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ParseError {
    /// The first boundary did not come within the preamble limit.
    NoBoundary,
    /// A part's head is larger than the limit.
    HeadTooLarge,
    /// A part's head is not a valid header block (or has too many fields).
    MalformedHead,
    /// A part has no `Content-Disposition: form-data` with a `name`.
    MissingName,
    /// A delimiter is followed by something other than `--` or CRLF.
    MalformedDelimiter,
    /// More parts than the limit.
    TooManyParts,
    /// The body ended before the close delimiter.
    Truncated,
}

impl ParseError {
    /// A short description, for error bodies.
    pub(super) fn as_str(self) -> &'static str {
        match self {
            ParseError::NoBoundary => "the multipart boundary never came",
            ParseError::HeadTooLarge => "a multipart part's header block is too large",
            ParseError::MalformedHead => "a multipart part's header block is malformed",
            ParseError::MissingName => "a multipart part has no form-data name",
            ParseError::MalformedDelimiter => "a multipart delimiter is malformed",
            ParseError::TooManyParts => "too many multipart parts",
            ParseError::Truncated => "the multipart body ended before its closing boundary",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before the first dash-boundary; `seen` bytes of preamble so far.
    Preamble { seen: usize },
    /// Right after a delimiter: `--` (close) or padding then CRLF.
    AfterDelimiter,
    /// Reading a part's head.
    Head,
    /// Reading a part's body.
    Body,
    /// After the close delimiter.
    Done,
}

/// The parser. Feed it with [`Parser::next`] and a buffer holding the
/// input not yet consumed.
pub(super) struct Parser {
    /// `\r\n--boundary`; the dash-boundary is `delimiter[2..]`.
    delimiter: Vec<u8>,
    finder: Finder<'static>,
    state: State,
    parts: usize,
    limits: Limits,
}

impl std::fmt::Debug for Parser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Parser")
            .field("state", &self.state)
            .field("parts", &self.parts)
            .finish_non_exhaustive()
    }
}

/// Transport padding after a boundary (RFC 2046 §5.1.1 `transport-padding`)
/// longer than this is refused as malformed.
const MAX_PADDING: usize = 64;

impl Parser {
    /// A parser for `boundary` (already checked by [`boundary_of`]).
    pub(super) fn new(boundary: &str, limits: Limits) -> Parser {
        let mut delimiter = Vec::with_capacity(boundary.len() + 4);
        delimiter.extend_from_slice(b"\r\n--");
        delimiter.extend_from_slice(boundary.as_bytes());
        let finder = Finder::new(&delimiter).into_owned();
        Parser {
            delimiter,
            finder,
            state: State::Preamble { seen: 0 },
            parts: 0,
            limits,
        }
    }

    /// The next event from `buf`, consuming what it used. `eof` says no
    /// more input will come: then `NeedMore` becomes `Truncated`.
    pub(super) fn next(&mut self, buf: &mut BytesMut, eof: bool) -> Result<Event, ParseError> {
        let event = self.step(buf)?;
        if event == Event::NeedMore && eof {
            return Err(match self.state {
                State::Preamble { .. } => ParseError::NoBoundary,
                State::Done => return Ok(Event::End),
                _ => ParseError::Truncated,
            });
        }
        Ok(event)
    }

    fn step(&mut self, buf: &mut BytesMut) -> Result<Event, ParseError> {
        loop {
            match self.state {
                State::Done => {
                    // RFC 2046 §5.1.1: the epilogue is to be ignored.
                    buf.clear();
                    return Ok(Event::End);
                }
                State::Preamble { seen } => {
                    let dash_boundary = &self.delimiter[2..];
                    // The body may start with the dash-boundary itself.
                    if seen == 0
                        && buf.len() >= dash_boundary.len()
                        && buf.starts_with(dash_boundary)
                    {
                        buf.advance(dash_boundary.len());
                        self.state = State::AfterDelimiter;
                        continue;
                    }
                    if seen == 0
                        && buf.len() < dash_boundary.len()
                        && dash_boundary.starts_with(buf)
                    {
                        return Ok(Event::NeedMore);
                    }
                    if let Some(at) = self.finder.find(buf) {
                        if seen + at > self.limits.preamble_bytes {
                            return Err(ParseError::NoBoundary);
                        }
                        buf.advance(at + self.delimiter.len());
                        self.state = State::AfterDelimiter;
                        continue;
                    }
                    let keep = self.delimiter.len() - 1;
                    let drop = buf.len().saturating_sub(keep);
                    let seen = seen + drop;
                    if seen > self.limits.preamble_bytes {
                        return Err(ParseError::NoBoundary);
                    }
                    buf.advance(drop);
                    self.state = State::Preamble { seen };
                    return Ok(Event::NeedMore);
                }
                State::AfterDelimiter => {
                    if buf.len() < 2 {
                        return Ok(Event::NeedMore);
                    }
                    if &buf[..2] == b"--" {
                        self.state = State::Done;
                        continue;
                    }
                    let padding = buf.iter().take_while(|&&b| b == b' ' || b == b'\t').count();
                    if padding > MAX_PADDING {
                        return Err(ParseError::MalformedDelimiter);
                    }
                    if buf.len() < padding + 2 {
                        return Ok(Event::NeedMore);
                    }
                    if &buf[padding..padding + 2] != b"\r\n" {
                        return Err(ParseError::MalformedDelimiter);
                    }
                    buf.advance(padding + 2);
                    self.parts += 1;
                    if self.parts > self.limits.parts {
                        return Err(ParseError::TooManyParts);
                    }
                    self.state = State::Head;
                }
                State::Head => {
                    // The head ends with an empty line; a part with no
                    // fields starts with it.
                    let end = if buf.starts_with(b"\r\n") {
                        Some(0)
                    } else {
                        memchr::memmem::find(buf, b"\r\n\r\n").map(|at| at + 2)
                    };
                    let Some(end) = end else {
                        // A blank line still to come would put `end` at
                        // `buf.len() - 1` at the earliest (its first three
                        // bytes already here): past the limit only once the
                        // buffer holds more than `head_bytes + 1` bytes, or
                        // a head within it would be refused when it arrives
                        // in pieces and parsed when whole.
                        if buf.len() > self.limits.head_bytes + 1 {
                            return Err(ParseError::HeadTooLarge);
                        }
                        return Ok(Event::NeedMore);
                    };
                    if end > self.limits.head_bytes {
                        return Err(ParseError::HeadTooLarge);
                    }
                    let head = parse_head(&buf[..end + 2])?;
                    buf.advance(end + 2);
                    self.state = State::Body;
                    return Ok(Event::Part(head));
                }
                State::Body => {
                    if let Some(at) = self.finder.find(buf) {
                        if at > 0 {
                            return Ok(Event::Data(buf.split_to(at).freeze()));
                        }
                        buf.advance(self.delimiter.len());
                        self.state = State::AfterDelimiter;
                        return Ok(Event::PartEnd);
                    }
                    // Everything but a possible start of the delimiter is data.
                    let keep = self.delimiter.len() - 1;
                    let safe = buf.len().saturating_sub(keep);
                    if safe == 0 {
                        return Ok(Event::NeedMore);
                    }
                    // A `\r` in the kept tail may begin the delimiter; any
                    // earlier byte cannot.
                    return Ok(Event::Data(buf.split_to(safe).freeze()));
                }
            }
        }
    }
}

/// The most header fields a part's head may have.
const MAX_PART_FIELDS: usize = 16;

fn parse_head(block: &[u8]) -> Result<PartHead, ParseError> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_PART_FIELDS];
    let parsed = match httparse::parse_headers(block, &mut fields) {
        Ok(httparse::Status::Complete((_, parsed))) => parsed,
        _ => return Err(ParseError::MalformedHead),
    };
    let mut disposition = None;
    let mut content_type = None;
    for field in parsed {
        if field.name.eq_ignore_ascii_case("content-disposition") {
            disposition = Some(field.value);
        } else if field.name.eq_ignore_ascii_case("content-type") {
            let value = std::str::from_utf8(field.value).map_err(|_| ParseError::MalformedHead)?;
            content_type = Some(value.trim().to_owned());
        }
    }
    let disposition = disposition.ok_or(ParseError::MissingName)?;
    let (name, raw_file_name) = parse_disposition(disposition)?;
    Ok(PartHead {
        name,
        raw_file_name,
        content_type,
    })
}

/// `form-data; name="field"; filename="a.txt"` (RFC 7578 §4.2, parameters
/// as in RFC 6266 §4.1: tokens or quoted strings).
fn parse_disposition(value: &[u8]) -> Result<(String, Option<String>), ParseError> {
    // Browsers send names and filenames as raw UTF-8 (percent-encoding
    // only `"`, CR and LF; WHATWG HTML "multipart/form-data encoding").
    let value = std::str::from_utf8(value).map_err(|_| ParseError::MalformedHead)?;
    let (kind, mut rest) = value.split_once(';').unwrap_or((value, ""));
    if !kind.trim().eq_ignore_ascii_case("form-data") {
        return Err(ParseError::MissingName);
    }
    let mut name = None;
    let mut file_name = None;
    loop {
        rest = rest.trim_start_matches([' ', '\t', ';']);
        if rest.is_empty() {
            break;
        }
        let Some((key, after)) = rest.split_once('=') else {
            return Err(ParseError::MalformedHead);
        };
        let key = key.trim();
        let after = after.trim_start();
        let (val, tail) = if let Some(quoted) = after.strip_prefix('"') {
            let mut out = String::new();
            let mut chars = quoted.char_indices();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                match c {
                    '"' => {
                        end = Some(i + 1);
                        break;
                    }
                    '\\' => match chars.next() {
                        Some((_, escaped)) => out.push(escaped),
                        None => return Err(ParseError::MalformedHead),
                    },
                    c => out.push(c),
                }
            }
            let end = end.ok_or(ParseError::MalformedHead)?;
            (out, &quoted[end..])
        } else {
            let end = after.find(';').unwrap_or(after.len());
            (after[..end].trim().to_owned(), &after[end..])
        };
        if key.eq_ignore_ascii_case("name") {
            name = Some(val);
        } else if key.eq_ignore_ascii_case("filename") {
            file_name = Some(val);
        }
        // `filename*` (RFC 7578 §4.2: not to be used) and unknown
        // parameters are ignored.
        rest = tail;
        if !rest.is_empty() && !rest.starts_with([';', ' ', '\t']) {
            return Err(ParseError::MalformedHead);
        }
    }
    let name = name.ok_or(ParseError::MissingName)?;
    Ok((name, file_name))
}

/// The boundary of a `multipart/form-data` content type, if it is one with
/// a valid boundary (RFC 2046 §5.1.1: 1 to 70 characters from `bchars`).
pub(super) fn boundary_of(content_type: &str) -> Option<&str> {
    let (essence, params) = content_type.split_once(';')?;
    if !essence.trim().eq_ignore_ascii_case("multipart/form-data") {
        return None;
    }
    for param in params.split(';') {
        let Some((key, value)) = param.split_once('=') else {
            continue;
        };
        if !key.trim().eq_ignore_ascii_case("boundary") {
            continue;
        }
        let value = value.trim();
        let value = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or(value);
        let bchars = |c: char| c.is_ascii_alphanumeric() || "'()+_,-./:=? ".contains(c);
        let valid =
            (1..=70).contains(&value.len()) && value.chars().all(bchars) && !value.ends_with(' ');
        return valid.then_some(value);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(
        input: &[u8],
        chunk: usize,
        limits: Limits,
    ) -> Result<Vec<(PartHead, Vec<u8>)>, ParseError> {
        let mut parser = Parser::new("XyZ", limits);
        let mut buf = BytesMut::new();
        let mut out: Vec<(PartHead, Vec<u8>)> = Vec::new();
        let mut chunks = input.chunks(chunk.max(1));
        let mut eof = false;
        loop {
            match parser.next(&mut buf, eof)? {
                Event::NeedMore => match chunks.next() {
                    Some(c) => buf.extend_from_slice(c),
                    None => eof = true,
                },
                Event::Part(head) => out.push((head, Vec::new())),
                Event::Data(d) => out.last_mut().unwrap().1.extend_from_slice(&d),
                Event::PartEnd => {}
                Event::End => return Ok(out),
            }
        }
    }

    const BODY: &[u8] = b"preamble\r\n--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nhello\r\n--XyZ  \r\nContent-Disposition: form-data; name=\"f\"; filename=\"x\\\"y.txt\"\r\nContent-Type: text/plain\r\n\r\nline\r\n--Xy\r\n\r\n--XyZ--\r\nepilogue";

    #[test]
    fn parts_should_come_out_the_same_whatever_the_chunking() {
        for chunk in [1, 2, 3, 7, 16, 1000] {
            let parts = all(BODY, chunk, Limits::default()).unwrap();
            assert_eq!(parts.len(), 2, "chunk {chunk}");
            assert_eq!(parts[0].0.name, "a");
            assert_eq!(parts[0].1, b"hello");
            assert_eq!(parts[1].0.raw_file_name.as_deref(), Some("x\"y.txt"));
            assert_eq!(parts[1].0.content_type.as_deref(), Some("text/plain"));
            assert_eq!(parts[1].1, b"line\r\n--Xy\r\n");
        }
    }

    #[test]
    fn a_body_without_its_close_delimiter_should_be_truncated() {
        let cut = &BODY[..BODY.len() - 20];
        assert_eq!(all(cut, 5, Limits::default()), Err(ParseError::Truncated));
        assert_eq!(
            all(b"no boundary at all", 5, Limits::default()),
            Err(ParseError::NoBoundary)
        );
    }

    /// A head whose blank line ends it at exactly the limit is taken
    /// however it arrives; one byte more is refused however it arrives
    /// (the buffer may hold `head_bytes + 1` bytes with the blank line
    /// not yet whole).
    #[test]
    fn a_head_at_its_limit_should_not_depend_on_the_chunking() {
        let head = b"Content-Disposition: form-data; name=\"a\"\r\n";
        let body = |pad: usize| {
            let mut body = b"--XyZ\r\n".to_vec();
            body.extend_from_slice(head);
            body.extend_from_slice(format!("X-Pad: {}\r\n\r\n", "p".repeat(pad)).as_bytes());
            body.extend_from_slice(b"v\r\n--XyZ--\r\n");
            body
        };
        // `end` counts the head up to its last field's line end.
        let end = |pad: usize| head.len() + "X-Pad: \r\n".len() + pad;
        let limit = end(10);
        let limits = Limits {
            head_bytes: limit,
            ..Limits::default()
        };
        for chunk in 1..=limit + 8 {
            let parts = all(&body(10), chunk, limits).unwrap();
            assert_eq!((parts.len(), parts[0].1.as_slice()), (1, b"v".as_slice()));
            assert_eq!(
                all(&body(11), chunk, limits),
                Err(ParseError::HeadTooLarge),
                "chunk {chunk}"
            );
        }
    }

    #[test]
    fn limits_should_hold() {
        let limits = Limits {
            parts: 1,
            ..Limits::default()
        };
        assert_eq!(all(BODY, 4, limits), Err(ParseError::TooManyParts));
        let limits = Limits {
            head_bytes: 40,
            ..Limits::default()
        };
        assert_eq!(all(BODY, 4, limits), Err(ParseError::HeadTooLarge));
        let limits = Limits {
            preamble_bytes: 4,
            ..Limits::default()
        };
        assert_eq!(all(BODY, 4, limits), Err(ParseError::NoBoundary));
    }

    #[test]
    fn boundaries_should_follow_rfc_2046() {
        assert_eq!(
            boundary_of("multipart/form-data; boundary=abc"),
            Some("abc")
        );
        assert_eq!(
            boundary_of("Multipart/Form-Data; charset=x; boundary=\"a b\""),
            Some("a b")
        );
        assert_eq!(boundary_of("multipart/form-data"), None);
        assert_eq!(boundary_of("multipart/form-data; boundary="), None);
        assert_eq!(
            boundary_of(&format!("multipart/form-data; boundary={}", "a".repeat(71))),
            None
        );
        assert_eq!(boundary_of("multipart/mixed; boundary=abc"), None);
    }

    #[test]
    fn heads_should_need_a_form_data_name() {
        let body = b"--XyZ\r\nContent-Type: text/plain\r\n\r\nx\r\n--XyZ--";
        assert_eq!(
            all(body, 3, Limits::default()),
            Err(ParseError::MissingName)
        );
        let body = b"--XyZ\r\nContent-Disposition: form-data; name=\"a\r\n\r\nx\r\n--XyZ--";
        assert_eq!(
            all(body, 3, Limits::default()),
            Err(ParseError::MalformedHead)
        );
        let body = b"--XyZ garbage\r\n\r\n--XyZ--";
        assert_eq!(
            all(body, 3, Limits::default()),
            Err(ParseError::MalformedDelimiter)
        );
    }
}
