//! Compression middleware: gzip, brotli and zstd on the fly, chosen by
//! `Accept-Encoding`.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! use celer::middleware::compression::{Coding, Compression};
//! use celer::{App, Request};
//! use tower::ServiceExt;
//!
//! let mut app = App::new();
//! app.middleware(Compression::new().gzip_level(4));
//! app.get("/", |_req: Request| async { "hello ".repeat(1000) });
//!
//! let req = http::Request::get("/").header("accept-encoding", "gzip, br;q=0.5")
//!     .body(celer::Body::empty()).unwrap();
//! let res = app.oneshot(req).await.unwrap();
//! assert_eq!(res.headers()["content-encoding"], "gzip");
//! assert_eq!(res.headers()["vary"], "Accept-Encoding");
//! assert!(res.headers().get("content-length").is_none());
//! # });
//! ```
//!
//! What is compressed, and how:
//!
//! - The coding is the client's best by `Accept-Encoding` q-values (RFC 9110
//!   §12.5.3), the server's order ([`Compression::codings`]) breaking ties.
//!   A request without `Accept-Encoding` gets the identity: RFC 9110 allows
//!   any coding then, but old clients that send nothing cannot decode.
//! - Left alone: responses that already have a `Content-Encoding`, `206` or
//!   any response with `Content-Range`, `Cache-Control: no-transform`
//!   (RFC 9110 §7.7), 1xx and 204, types that are compressed already
//!   (images but SVG, audio, video, archives, woff fonts, PDF), event
//!   streams (`text/event-stream`: why in [`crate::sse`]), and bodies
//!   whose size is known and under [`Compression::min_size`].
//! - Every other response gets `Vary: Accept-Encoding` (appended once), as
//!   its bytes depend on that header even when the identity is chosen.
//! - A compressed response loses `Content-Length` and `Accept-Ranges`, and
//!   its `ETag` is made weak (`"x"` becomes `W/"x"`). Weak, not suffixed:
//!   the decoded content is the same as the identity's, which is what a
//!   weak validator states (RFC 9110 §8.8.1), and conditional requests keep
//!   working with handlers that compare `If-None-Match` weakly, as RFC 9110
//!   §13.1.2 requires, without rewriting request headers. Strong comparison
//!   serves only ranges, which compressed responses never carry. A `304` to
//!   a request that would have been compressed gets the same weak `ETag`
//!   and `Vary`.
//! - The body streams: each inner frame is compressed as it arrives, and
//!   when the inner body has nothing ready the encoder is flushed, so slow
//!   streams arrive piece by piece while bulk bodies compress in full
//!   blocks. Memory per response is the encoder's state (at most about
//!   2 MiB, zstd) plus the output of one 64 KiB piece of input: a large
//!   frame is compressed piece by piece. `HEAD` gets the headers `GET` would and no encoder.
//! - The engine's zero-copy marker is dropped with the body it describes.

mod body;
mod encoder;

use std::fmt;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use http::header::{
    ACCEPT_RANGES, CACHE_CONTROL, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_RANGE, CONTENT_TYPE,
    ETAG, HeaderMap, HeaderValue,
};
use http::{Method, StatusCode};
use http_body::Body as _;

use self::body::CompressBody;
use crate::middleware::append_vary;
use crate::middleware::negotiate::{Accept, Field};
use crate::{Body, Handler, Next, Request, Response};

/// Bodies of a known size under this many bytes are sent as they are.
/// Default is 1024 bytes.
pub const DEFAULT_MIN_SIZE: u64 = 1024;

/// Default gzip level (zlib's own default).
pub const DEFAULT_GZIP_LEVEL: u32 = 6;

/// Default brotli quality: fast enough to run per response.
pub const DEFAULT_BROTLI_LEVEL: u32 = 4;

/// Default zstd level (the library's own default).
pub const DEFAULT_ZSTD_LEVEL: u32 = 3;

/// A content coding the middleware can apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Coding {
    /// `gzip` (RFC 1952), via flate2.
    Gzip,
    /// `br` (RFC 7932), via the brotli crate.
    Brotli,
    /// `zstd` (RFC 8878), via the zstd crate.
    Zstd,
}

impl Coding {
    /// The coding's name in `Accept-Encoding` and `Content-Encoding`.
    ///
    /// ```
    /// assert_eq!(celer::middleware::compression::Coding::Brotli.as_str(), "br");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Coding::Gzip => "gzip",
            Coding::Brotli => "br",
            Coding::Zstd => "zstd",
        }
    }
}

/// Compression middleware; see the [module documentation](self).
#[derive(Clone)]
pub struct Compression {
    config: Arc<Config>,
}

#[derive(Clone)]
struct Config {
    /// Codings offered, in the server's order of preference.
    codings: Vec<Coding>,
    min_size: u64,
    gzip_level: u32,
    brotli_level: u32,
    zstd_level: u32,
}

// ===== impl Compression =====

impl Compression {
    /// Compression with zstd, brotli and gzip (preferred in that order on
    /// equal q-values) at their default levels.
    pub fn new() -> Compression {
        Compression {
            config: Arc::new(Config {
                codings: vec![Coding::Zstd, Coding::Brotli, Coding::Gzip],
                min_size: DEFAULT_MIN_SIZE,
                gzip_level: DEFAULT_GZIP_LEVEL,
                brotli_level: DEFAULT_BROTLI_LEVEL,
                zstd_level: DEFAULT_ZSTD_LEVEL,
            }),
        }
    }

    fn config(&mut self) -> &mut Config {
        Arc::make_mut(&mut self.config)
    }

    /// Sets the codings offered, most preferred first; the client's
    /// q-values decide, this order breaks ties. An empty list turns
    /// compression off.
    ///
    /// Default is zstd, brotli, gzip (zstd compresses about as well as
    /// brotli at these levels, faster).
    pub fn codings(mut self, codings: impl IntoIterator<Item = Coding>) -> Self {
        let mut list = Vec::new();
        for coding in codings {
            if !list.contains(&coding) {
                list.push(coding);
            }
        }
        self.config().codings = list;
        self
    }

    /// Sets the size under which a body of known size is not compressed,
    /// in bytes. Bodies of unknown size (streams) are always compressed.
    ///
    /// Default is [`DEFAULT_MIN_SIZE`], 1024 bytes.
    pub fn min_size(mut self, bytes: u64) -> Self {
        self.config().min_size = bytes;
        self
    }

    /// Sets the gzip level, 0 (stored) to 9 (smallest, slowest).
    ///
    /// Default is [`DEFAULT_GZIP_LEVEL`], 6.
    ///
    /// # Panics
    ///
    /// Panics if `level` is over 9.
    pub fn gzip_level(mut self, level: u32) -> Self {
        assert!(level <= 9, "gzip level {level} is over 9");
        self.config().gzip_level = level;
        self
    }

    /// Sets the brotli quality, 0 to 11.
    ///
    /// Default is [`DEFAULT_BROTLI_LEVEL`], 4.
    ///
    /// # Panics
    ///
    /// Panics if `level` is over 11.
    pub fn brotli_level(mut self, level: u32) -> Self {
        assert!(level <= 11, "brotli level {level} is over 11");
        self.config().brotli_level = level;
        self
    }

    /// Sets the zstd level, 1 to 19 (the slower 20 to 22 need windows that
    /// break the per-response memory bound).
    ///
    /// Default is [`DEFAULT_ZSTD_LEVEL`], 3.
    ///
    /// # Panics
    ///
    /// Panics if `level` is not in `1..=19`.
    pub fn zstd_level(mut self, level: u32) -> Self {
        assert!(
            (1..=19).contains(&level),
            "zstd level {level} is not in 1..=19"
        );
        self.config().zstd_level = level;
        self
    }

    fn level(&self, coding: Coding) -> u32 {
        match coding {
            Coding::Gzip => self.config.gzip_level,
            Coding::Brotli => self.config.brotli_level,
            Coding::Zstd => self.config.zstd_level,
        }
    }

    /// The coding for a request's headers; `None` for the identity.
    fn choose(&self, headers: &HeaderMap) -> Option<Coding> {
        let accept = Accept::from_headers(Field::Encoding, headers);
        if !accept.is_present() {
            return None;
        }
        let mut offers: Vec<&str> = self.config.codings.iter().map(|c| c.as_str()).collect();
        // The identity last: preferred only when the client rates it higher.
        offers.push("identity");
        let idx = accept.best(&offers)?;
        self.config.codings.get(idx).copied()
    }

    async fn run(self, req: Request, next: Next) -> Response {
        let coding = self.choose(req.headers());
        let is_head = *req.method() == Method::HEAD;
        let mut res = next.run(req).await;
        if !self.eligible(&res) {
            return res;
        }
        append_vary(res.headers_mut(), "Accept-Encoding");
        let Some(coding) = coding else {
            return res;
        };
        weaken_etag(res.headers_mut());
        if res.status() == StatusCode::NOT_MODIFIED {
            return res;
        }
        let headers = res.headers_mut();
        headers.insert(CONTENT_ENCODING, HeaderValue::from_static(coding.as_str()));
        headers.remove(CONTENT_LENGTH);
        headers.remove(ACCEPT_RANGES);
        crate::serve::forget_zero_copy(res.extensions_mut());
        let inner = std::mem::take(res.body_mut());
        let inner = if is_head { Body::empty() } else { inner };
        *res.body_mut() = Body::new(CompressBody::new(inner, coding, self.level(coding)));
        res
    }

    /// Whether the response may be compressed at all, whatever the client
    /// accepts.
    fn eligible(&self, res: &Response) -> bool {
        let status = res.status();
        if status.is_informational()
            || status == StatusCode::NO_CONTENT
            || status == StatusCode::PARTIAL_CONTENT
        {
            return false;
        }
        let headers = res.headers();
        if headers.contains_key(CONTENT_RANGE) || headers.contains_key(CONTENT_ENCODING) {
            return false;
        }
        // RFC 9110 §7.7: an intermediary must not transform such content;
        // the middleware stands where one would.
        let no_transform = headers.get_all(CACHE_CONTROL).iter().any(|value| {
            value.to_str().is_ok_and(|text| {
                text.split(',')
                    .any(|d| d.trim().eq_ignore_ascii_case("no-transform"))
            })
        });
        if no_transform || self.config.codings.is_empty() {
            return false;
        }
        if headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| is_compressed_type(t) || is_event_stream(t))
        {
            return false;
        }
        if status == StatusCode::NOT_MODIFIED {
            return true;
        }
        // A HEAD response has lost its body but kept the length.
        let known = headers
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
            .or_else(|| res.body().size_hint().exact());
        known.is_none_or(|len| len >= self.config.min_size)
    }
}

impl Default for Compression {
    fn default() -> Self {
        Compression::new()
    }
}

impl fmt::Debug for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Compression")
            .field("codings", &self.config.codings)
            .field("min_size", &self.config.min_size)
            .field("gzip_level", &self.config.gzip_level)
            .field("brotli_level", &self.config.brotli_level)
            .field("zstd_level", &self.config.zstd_level)
            .finish()
    }
}

impl crate::handler::sealed::Dispatch<(Request, Next)> for Compression {}

impl Handler<(Request, Next)> for Compression {
    fn call(&self, req: Request, next: Next) -> BoxFuture<'static, Response> {
        Box::pin(self.clone().run(req, next))
    }
}

/// `"x"` becomes `W/"x"`; weak tags stay.
fn weaken_etag(headers: &mut HeaderMap) {
    let Some(etag) = headers.get(ETAG) else {
        return;
    };
    if etag.as_bytes().starts_with(b"\"") {
        let mut weak = b"W/".to_vec();
        weak.extend_from_slice(etag.as_bytes());
        if let Ok(value) = HeaderValue::from_bytes(&weak) {
            headers.insert(ETAG, value);
        }
    }
}

/// `text/event-stream`: left alone, see the `sse` module (a compressor
/// per subscriber, a flush per event, secrets of events mixed in one
/// compression context).
fn is_event_stream(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("").trim();
    essence.eq_ignore_ascii_case("text/event-stream")
}

/// Types whose content is compressed already; compressing again wastes CPU
/// for nothing or makes them larger.
fn is_compressed_type(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("").trim();
    let essence = essence.to_ascii_lowercase();
    let Some((kind, sub)) = essence.split_once('/') else {
        return false;
    };
    match kind {
        "image" => sub != "svg+xml" && sub != "bmp" && sub != "x-icon",
        "audio" | "video" => true,
        "font" => sub == "woff" || sub == "woff2",
        "application" => {
            matches!(
                sub,
                "zip"
                    | "gzip"
                    | "x-gzip"
                    | "zstd"
                    | "x-bzip2"
                    | "x-xz"
                    | "x-7z-compressed"
                    | "x-rar-compressed"
                    | "vnd.rar"
                    | "java-archive"
                    | "epub+zip"
                    | "pdf"
                    | "x-brotli"
                    | "wasm-gz"
            ) || sub.starts_with("vnd.openxmlformats")
                || sub.ends_with("+zip")
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests;
