//! Streaming `multipart/form-data` (RFC 7578): a body read part by part,
//! each part's bytes handed to the handler or written to disk as they
//! arrive, never the whole upload in memory.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use celer::multipart::Multipart;
//! use celer::{App, Error, Request};
//!
//! async fn upload(mut req: Request) -> Result<String, Error> {
//!     let mut form: Multipart = req.extract().await?;
//!     let mut out = Vec::new();
//!     while let Some(mut part) = form.next_part().await? {
//!         match part.file_name().map(str::to_owned) {
//!             // A file: stream it (here, count it; `part.save(path)`
//!             // writes it to disk).
//!             Some(name) => {
//!                 let mut n = 0;
//!                 while let Some(chunk) = part.chunk().await? {
//!                     n += chunk.len();
//!                 }
//!                 out.push(format!("{name}: {n} bytes"));
//!             }
//!             // A field: read it, up to `Limits::field_bytes`.
//!             None => out.push(format!("{}={}", part.name().to_owned(), part.text().await?)),
//!         }
//!     }
//!     Ok(out.join(", "))
//! }
//!
//! let mut app = App::new();
//! app.post("/upload", upload).body_limit(64 * 1024 * 1024);
//! let body = "--b\r\ncontent-disposition: form-data; name=\"title\"\r\n\r\nhi\r\n\
//!             --b\r\ncontent-disposition: form-data; name=\"f\"; filename=\"../../etc/passwd\"\r\n\r\n\
//!             root\r\n--b--\r\n";
//! let res = celer::test::TestClient::new(app)
//!     .post("/upload")
//!     .header("content-type", "multipart/form-data; boundary=b")
//!     .body(body)
//!     .send()
//!     .await;
//! assert_eq!(res.text(), "title=hi, passwd: 4 bytes");
//! # });
//! ```
//!
//! Every resource a client holds is limited ([`Limits`], defaults in
//! [`limits`]): parts per body, bytes per part head, bytes before the first
//! boundary, bytes per in-memory field and per part; the whole body stays
//! under the route's body limit. A body past a limit is answered `413`, a
//! malformed or truncated one `400`, one that is not `multipart/form-data`
//! `415` ([`MultipartError`]).
//!
//! The parser (`parse.rs`) is our own and sans-IO; docs/decisions/125
//! says why.

pub mod limits;
mod parse;

use std::fmt;
use std::path::Path;

use bytes::{Bytes, BytesMut};
use http::StatusCode;
use http_body_util::BodyExt;

use crate::extract::FromRequest;
use crate::extract::rejection::{BodyTooLarge, kind_rejection};
use crate::{Body, Request};

pub use limits::{
    Limits, MAX_FIELD_BYTES, MAX_HEAD_BYTES, MAX_PART_BYTES, MAX_PARTS, MAX_PREAMBLE_BYTES,
};
use parse::{Event, ParseError, Parser, PartHead};

#[doc(hidden)]
pub mod fuzzing {
    //! The parser's entry point for the `multipart` fuzz target
    //! (fuzz/fuzz_targets/multipart.rs); the crate's tests replay
    //! fuzz/corpus/multipart through it.

    use bytes::BytesMut;

    use super::{Event, Limits, ParseError, Parser, PartHead};

    type Outcome = (Vec<(PartHead, Vec<u8>)>, Result<(), ParseError>);

    fn run(data: &[u8], splits: &[usize]) -> Outcome {
        let limits = Limits {
            parts: 64,
            head_bytes: 512,
            preamble_bytes: 256,
            ..Limits::default()
        };
        let mut parser = Parser::new("XyZ", limits);
        let mut buf = BytesMut::new();
        let mut pieces = Vec::new();
        let mut at = 0;
        for &split in splits {
            let split = split.clamp(at, data.len());
            pieces.push(&data[at..split]);
            at = split;
        }
        pieces.push(&data[at..]);
        let mut pieces = pieces.into_iter();
        let mut parts: Vec<(PartHead, Vec<u8>)> = Vec::new();
        let mut eof = false;
        let mut in_part = false;
        // Each step consumes input or ends: a bound on the steps catches a
        // loop that does not.
        for _ in 0..(data.len() * 4 + 64) {
            match parser.next(&mut buf, eof) {
                Ok(Event::NeedMore) => match pieces.next() {
                    Some(piece) => buf.extend_from_slice(piece),
                    None => eof = true,
                },
                Ok(Event::Part(head)) => {
                    assert!(!in_part, "a part began inside a part");
                    assert!(parts.len() < limits.parts, "more parts than the limit");
                    in_part = true;
                    parts.push((head, Vec::new()));
                }
                Ok(Event::Data(data)) => {
                    assert!(in_part && !data.is_empty(), "data outside a part");
                    parts.last_mut().expect("a part").1.extend_from_slice(&data);
                }
                Ok(Event::PartEnd) => {
                    assert!(in_part, "a part ended outside a part");
                    in_part = false;
                }
                Ok(Event::End) => return (parts, Ok(())),
                Err(err) => return (parts, Err(err)),
            }
            // A buffer holds at most the unconsumed input: a head under
            // its limit or a delimiter's length of body, plus one piece.
            assert!(buf.len() <= data.len(), "the buffer grew past the input");
        }
        panic!("the multipart parser did not finish");
    }

    /// Parses `data` whole and cut at three points taken from its first
    /// bytes: the parts, their bodies and the outcome must be the same.
    pub fn multipart(data: &[u8]) {
        let whole = run(data, &[]);
        let seed = |i: usize| data.get(i).map_or(0, |&b| b as usize);
        let n = data.len().max(1);
        let splits = [seed(0) * 7 % n, seed(1) * 13 % n, seed(2) * 31 % n];
        let mut sorted = splits;
        sorted.sort_unstable();
        let cut = run(data, &sorted);
        assert_eq!(whole, cut, "the outcome depends on how the bytes arrive");
        let bytewise: Vec<usize> = (1..data.len().min(512)).collect();
        if data.len() <= 512 {
            assert_eq!(whole, run(data, &bytewise), "byte by byte differs");
        }
    }

    #[cfg(test)]
    mod tests {
        /// Every checked-in input of fuzz/corpus/multipart and
        /// fuzz/regressions/multipart.
        #[test]
        fn the_fuzz_corpus_should_replay() {
            let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
            let mut seen = 0;
            for dir in ["corpus/multipart", "regressions/multipart"] {
                let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
                    continue;
                };
                for entry in entries {
                    let data = std::fs::read(entry.expect("entry").path()).expect("read");
                    super::multipart(&data);
                    seen += 1;
                }
            }
            assert!(seen > 0, "no corpus under fuzz/corpus/multipart");
        }
    }
}

/// A `multipart/form-data` body being read part by part. Extract it with
/// `req.extract::<Multipart>()` (default [`Limits`]) or
/// [`Multipart::with_limits`].
pub struct Multipart {
    body: Body,
    buf: BytesMut,
    parser: Parser,
    eof: bool,
    limits: Limits,
    /// The current part's body has not been read to its end.
    in_part: bool,
    /// Bytes of the current part so far.
    part_read: u64,
}

impl fmt::Debug for Multipart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Multipart")
            .field("parser", &self.parser)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl FromRequest for Multipart {
    type Rejection = MultipartError;

    async fn from_request(req: &mut Request) -> Result<Self, Self::Rejection> {
        Multipart::with_limits(req, Limits::default())
    }
}

impl Multipart {
    /// Takes the body of `req` (under the route's body limit) to read it
    /// as `multipart/form-data` under `limits`.
    ///
    /// ```
    /// use celer::multipart::{Limits, Multipart};
    /// let mut req = celer::Request::builder()
    ///     .method("POST")
    ///     .uri("/")
    ///     .header("content-type", "text/plain")
    ///     .body(())
    ///     .unwrap();
    /// let err = Multipart::with_limits(&mut req, Limits::default()).unwrap_err();
    /// assert_eq!(err.status(), 415);
    /// ```
    pub fn with_limits(req: &mut Request, limits: Limits) -> Result<Multipart, MultipartError> {
        let content_type = req
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let essence = content_type.split(';').next().unwrap_or("").trim();
        if !essence.eq_ignore_ascii_case("multipart/form-data") {
            return Err(MultipartError::new(Kind::NotMultipart));
        }
        let boundary = parse::boundary_of(content_type)
            .ok_or_else(|| MultipartError::new(Kind::BadBoundary))?;
        let parser = Parser::new(boundary, limits);
        Ok(Multipart {
            body: req.take_body(),
            buf: BytesMut::new(),
            parser,
            eof: false,
            limits,
            in_part: false,
            part_read: 0,
        })
    }

    /// The next part, or `None` after the last. What the handler left
    /// unread of the previous part is skipped.
    pub async fn next_part(&mut self) -> Result<Option<Part<'_>>, MultipartError> {
        while self.in_part {
            self.next_chunk().await?;
        }
        match self.next_event().await? {
            Event::Part(head) => {
                self.in_part = true;
                self.part_read = 0;
                let file_name = head.raw_file_name.as_deref().and_then(sanitize_file_name);
                Ok(Some(Part {
                    form: self,
                    head,
                    file_name,
                }))
            }
            Event::End => Ok(None),
            // The parser yields data only inside a part.
            _ => Err(MultipartError::new(Kind::Parse(
                ParseError::MalformedDelimiter,
            ))),
        }
    }

    async fn next_event(&mut self) -> Result<Event, MultipartError> {
        loop {
            match self.parser.next(&mut self.buf, self.eof) {
                Ok(Event::NeedMore) => self.fill().await?,
                Ok(event) => return Ok(event),
                Err(err) => return Err(MultipartError::new(Kind::Parse(err))),
            }
        }
    }

    async fn fill(&mut self) -> Result<(), MultipartError> {
        loop {
            match self.body.frame().await {
                None => {
                    self.eof = true;
                    return Ok(());
                }
                Some(Err(err)) => {
                    return Err(if err.is::<BodyTooLarge>() {
                        MultipartError::new(Kind::BodyTooLarge)
                    } else {
                        MultipartError::with_source(Kind::ReadFailed, err)
                    });
                }
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        if !data.is_empty() {
                            self.buf.extend_from_slice(&data);
                            return Ok(());
                        }
                    }
                }
            }
        }
    }

    /// The next chunk of the current part, `None` at its end.
    async fn next_chunk(&mut self) -> Result<Option<Bytes>, MultipartError> {
        if !self.in_part {
            return Ok(None);
        }
        match self.next_event().await? {
            Event::Data(data) => {
                self.part_read += data.len() as u64;
                if self.part_read > self.limits.part_bytes {
                    return Err(MultipartError::new(Kind::PartTooLarge));
                }
                Ok(Some(data))
            }
            Event::PartEnd => {
                self.in_part = false;
                Ok(None)
            }
            _ => Err(MultipartError::new(Kind::Parse(
                ParseError::MalformedDelimiter,
            ))),
        }
    }
}

/// One part of a [`Multipart`] body: a field or a file.
pub struct Part<'a> {
    form: &'a mut Multipart,
    head: PartHead,
    file_name: Option<String>,
}

impl fmt::Debug for Part<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Part")
            .field("name", &self.head.name)
            .field("file_name", &self.file_name)
            .field("content_type", &self.head.content_type)
            .finish()
    }
}

impl Part<'_> {
    /// The field's name (`Content-Disposition: form-data; name=...`).
    pub fn name(&self) -> &str {
        &self.head.name
    }

    /// The file's name made safe to use as one path component: see
    /// [`sanitize_file_name`]. `None` for a field that is not a file, or
    /// when nothing is left of the name.
    pub fn file_name(&self) -> Option<&str> {
        self.file_name.as_deref()
    }

    /// The `filename` parameter exactly as the client sent it: never use it
    /// as a path.
    pub fn raw_file_name(&self) -> Option<&str> {
        self.head.raw_file_name.as_deref()
    }

    /// The part's `Content-Type`, if it has one (RFC 7578 §4.4 says
    /// `text/plain` otherwise).
    pub fn content_type(&self) -> Option<&str> {
        self.head.content_type.as_deref()
    }

    /// The next chunk of the part's body, `None` at its end; past
    /// [`Limits::part_bytes`] it fails with a `413`.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, MultipartError> {
        self.form.next_chunk().await
    }

    /// The whole part in memory, up to [`Limits::field_bytes`] (`413`
    /// past it).
    pub async fn bytes(&mut self) -> Result<Bytes, MultipartError> {
        let limit = self.form.limits.field_bytes;
        let mut all = BytesMut::new();
        while let Some(chunk) = self.chunk().await? {
            if all.len() + chunk.len() > limit {
                return Err(MultipartError::new(Kind::FieldTooLarge));
            }
            all.extend_from_slice(&chunk);
        }
        Ok(all.freeze())
    }

    /// The whole part as UTF-8 text, up to [`Limits::field_bytes`].
    pub async fn text(&mut self) -> Result<String, MultipartError> {
        let bytes = self.bytes().await?;
        String::from_utf8(bytes.into())
            .map_err(|err| MultipartError::with_source(Kind::InvalidUtf8, err))
    }

    /// Streams the part into a new file at `path` (failing if it exists)
    /// and returns its length. A part that fails midway (too large,
    /// truncated) leaves no file behind.
    pub async fn save(&mut self, path: impl AsRef<Path>) -> Result<u64, MultipartError> {
        use tokio::io::AsyncWriteExt;
        let path = path.as_ref();
        let mut file = tokio::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .await
            .map_err(|err| MultipartError::with_source(Kind::Io, err))?;
        let result = async {
            let mut total = 0u64;
            while let Some(chunk) = self.chunk().await? {
                total += chunk.len() as u64;
                file.write_all(&chunk)
                    .await
                    .map_err(|err| MultipartError::with_source(Kind::Io, err))?;
            }
            file.flush()
                .await
                .map_err(|err| MultipartError::with_source(Kind::Io, err))?;
            Ok(total)
        }
        .await;
        if result.is_err() {
            drop(file);
            let _ = tokio::fs::remove_file(path).await;
        }
        result
    }
}

/// The longest file name [`sanitize_file_name`] keeps, in bytes (most file
/// systems allow 255).
pub const MAX_FILE_NAME_BYTES: usize = 255;

/// `raw` made safe as one path component: only what follows the last `/`
/// or `\`, without control characters, surrounding white space or leading
/// dots (no `..`, no hidden files), cut to [`MAX_FILE_NAME_BYTES`]. `None`
/// when nothing is left.
///
/// ```
/// use celer::multipart::sanitize_file_name as s;
/// assert_eq!(s("../../etc/passwd").as_deref(), Some("passwd"));
/// assert_eq!(s(r"C:\Users\me\cv.pdf").as_deref(), Some("cv.pdf"));
/// assert_eq!(s("a\u{0}b\r\n.txt").as_deref(), Some("ab.txt"));
/// assert_eq!(s(".."), None);
/// assert_eq!(s(" .bashrc ").as_deref(), Some("bashrc"));
/// ```
pub fn sanitize_file_name(raw: &str) -> Option<String> {
    let last = raw.rsplit(['/', '\\']).next().unwrap_or(raw);
    let clean: String = last.chars().filter(|c| !c.is_control()).collect();
    let clean = clean.trim().trim_start_matches('.').trim_start();
    let mut end = clean.len().min(MAX_FILE_NAME_BYTES);
    while !clean.is_char_boundary(end) {
        end -= 1;
    }
    let clean = clean[..end].trim_end();
    (!clean.is_empty()).then(|| clean.to_owned())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    NotMultipart,
    BadBoundary,
    Parse(ParseError),
    BodyTooLarge,
    PartTooLarge,
    FieldTooLarge,
    InvalidUtf8,
    ReadFailed,
    Io,
}

kind_rejection!(
    /// Why a multipart body was refused: `415` when it is not
    /// `multipart/form-data`, `413` past a limit, `400` when malformed or
    /// truncated, `500` when a file could not be written.
    MultipartError,
    Kind,
    "multipart upload failed"
);

impl MultipartError {
    /// The status this error is answered with.
    pub fn status(&self) -> StatusCode {
        match self.kind {
            Kind::NotMultipart => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Kind::Parse(ParseError::TooManyParts | ParseError::HeadTooLarge)
            | Kind::BodyTooLarge
            | Kind::PartTooLarge
            | Kind::FieldTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Kind::Io => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::BAD_REQUEST,
        }
    }

    /// The short body this error is answered with.
    pub fn body_text(&self) -> &'static str {
        match self.kind {
            Kind::NotMultipart => "expected content-type: multipart/form-data",
            Kind::BadBoundary => "the multipart boundary parameter is missing or invalid",
            Kind::Parse(err) => err.as_str(),
            Kind::BodyTooLarge => "payload too large",
            Kind::PartTooLarge => "a multipart part is too large",
            Kind::FieldTooLarge => "a multipart field is too large",
            Kind::InvalidUtf8 => "a multipart field is not valid utf-8",
            Kind::ReadFailed => "failed to read the request body",
            Kind::Io => "internal server error",
        }
    }
}
