//! Static files: [`Files`], a service that serves a directory or an
//! embedded [`Bundle`] with HTTP's full semantics for stored
//! representations, and [`Offload`], which lets an app answer with a file or
//! an upstream URL the server then sends.
//!
//! [`Files`] answers GET and HEAD:
//!
//! - strong ETags from a file's length and modification time in
//!   nanoseconds (stable across restarts; for a [`Bundle`], from a content
//!   hash) and Last-Modified;
//! - conditional requests in RFC 9110 §13.2.2 order: If-Match and
//!   If-Unmodified-Since (412), If-None-Match and If-Modified-Since (304,
//!   keeping ETag, Last-Modified, Cache-Control and Vary), If-Range;
//! - Range: single, suffix and open-ended ranges (206), several ranges as
//!   multipart/byteranges (coalesced when they overlap, at most
//!   [`MAX_RANGES`]), 416 with `Content-Range: bytes */LEN`;
//! - precompressed siblings (`a.js.br`, `a.js.zst`, `a.js.gz`) chosen by
//!   Accept-Encoding q-values, with `Vary: Accept-Encoding` and their own
//!   ETag;
//! - index files, an optional HTML directory listing, content types by
//!   extension (`charset=utf-8` for text), Cache-Control rules
//!   ([`CacheControl`]), policies for hidden names ([`Hidden`]) and symlinks
//!   ([`Symlinks`]); no request path leaves the root;
//! - HEAD gets exactly the head GET would get;
//! - optionally, descriptors kept open for reuse ([`Files::open_file_cache`]).
//!
//! File bodies are `celer_server::file::FileBody` regions carrying the
//! `SendFile` marker, so Celer's HTTP/1 engine sends them with `sendfile(2)`
//! on plain TCP, and every other transport reads them in 64 KiB pieces.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! use celer::files::{CacheControl, Files};
//! use std::time::Duration;
//! use tower::ServiceExt;
//!
//! let dir = tempfile::tempdir().unwrap();
//! std::fs::write(dir.path().join("hello.txt"), "Hello, World!").unwrap();
//! let files = Files::new(dir.path())
//!     .unwrap()
//!     .cache_control(CacheControl::new().max_age(Duration::from_secs(60)));
//!
//! // As a tower service, seeing whole request paths:
//! let req = http::Request::get("/hello.txt")
//!     .header("range", "bytes=7-")
//!     .body(())
//!     .unwrap();
//! let res = files.clone().oneshot(req).await.unwrap();
//! assert_eq!(res.status(), 206);
//! assert_eq!(res.headers()["content-range"], "bytes 7-12/13");
//!
//! // Mounted in an app, under a prefix:
//! let mut app = celer::App::new();
//! app.get("/static/<path:file>", files.handler("file"));
//! # });
//! ```
//!
//! # Differences from `tower_http::services::ServeDir`
//!
//! ETags and If-Match/If-None-Match/If-Range are supported, multipart
//! ranges are served, file bodies can go out with `sendfile(2)`, and file
//! system calls run inline (like nginx without thread pools) rather than on
//! a blocking pool: `open` and `fstat` of a cached file cost less than a
//! thread hand-off.

mod body;
mod bundle;
mod cache;
pub(crate) mod conditional;
pub(crate) mod encoding;
pub(crate) mod listing;
mod mime;
pub mod offload;
mod open;
mod path;
mod range;
mod resolve;
mod respond;

use std::convert::Infallible;
use std::future::{Ready, ready};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{HeaderMap, Method};
use tower_service::Service;

pub use self::bundle::Bundle;
pub use self::cache::CacheControl;
pub use self::listing::MAX_LISTING_ENTRIES;
pub use self::offload::{Offload, OffloadLayer};
use self::open::OpenFiles;
pub use self::open::{MAX_CACHED_FILE_BYTES, MAX_OPEN_FILES};
use self::path::SafePath;
pub use self::range::{MAX_RANGE_SPECS, MAX_RANGES};
use self::respond::Answer;
use crate::{Handler, Request, Response};

/// Index file names tried, in order, for a directory by default.
pub const INDEX: &str = "index.html";

/// What happens to names starting with a dot (`.env`, `.git/`), except
/// `.well-known` (RFC 8615), which is always served.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Hidden {
    /// 403 Forbidden.
    #[default]
    Deny,
    /// 404 Not Found, and left out of listings: as if they did not exist.
    Ignore,
    /// Served like any other name, and listed.
    Allow,
}

/// What happens to symbolic links on the way to a file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Symlinks {
    /// Followed wherever they lead, even out of the root.
    Follow,
    /// Followed while their target stays under the root; 403 otherwise.
    #[default]
    WithinRoot,
    /// Never followed: a request whose path crosses a link gets 403.
    Deny,
}

/// A `tower::Service` serving the files of a directory or of an embedded
/// [`Bundle`]; see the [module documentation](self).
///
/// Cloning is cheap (one reference count). The service is generic over the
/// request body, which it never reads, and its future is ready at once.
#[derive(Debug, Clone)]
pub struct Files {
    config: Arc<Config>,
}

#[derive(Debug, Clone)]
struct Config {
    source: Source,
    index: Vec<String>,
    listing: bool,
    hidden: Hidden,
    symlinks: Symlinks,
    cache: CacheControl,
    compiled_cache: cache::Compiled,
    precompressed: bool,
    max_ranges: usize,
    open_files: Option<OpenFiles>,
}

#[derive(Debug, Clone)]
enum Source {
    /// A directory: canonical (absolute, no symlinks).
    Dir(PathBuf),
    /// Files compiled into the binary.
    Bundle(Bundle),
}

impl Files {
    /// Serves the directory `root`. Symlinks in `root` itself are resolved
    /// once, here.
    ///
    /// # Errors
    ///
    /// When `root` does not exist or is not a directory; the message names
    /// the path.
    pub fn new(root: impl AsRef<Path>) -> io::Result<Files> {
        let root = root.as_ref();
        let canonical = std::fs::canonicalize(root)
            .map_err(|err| io::Error::new(err.kind(), format!("{}: {err}", root.display())))?;
        if !std::fs::metadata(&canonical)?.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("{}: not a directory", root.display()),
            ));
        }
        Ok(Files::with_source(Source::Dir(canonical)))
    }

    /// Serves the files of `bundle`, from memory.
    pub fn embedded(bundle: Bundle) -> Files {
        Files::with_source(Source::Bundle(bundle))
    }

    fn with_source(source: Source) -> Files {
        Files {
            config: Arc::new(Config {
                source,
                index: vec![INDEX.to_owned()],
                listing: false,
                hidden: Hidden::default(),
                symlinks: Symlinks::default(),
                cache: CacheControl::default(),
                compiled_cache: cache::Compiled::default(),
                precompressed: true,
                max_ranges: MAX_RANGES,
                open_files: None,
            }),
        }
    }

    fn with(mut self, f: impl FnOnce(&mut Config)) -> Files {
        let config = Arc::make_mut(&mut self.config);
        f(config);
        // A changed configuration (perhaps a clone of another) never reads
        // files cached under the other's policies.
        config.open_files = config.open_files.as_ref().map(OpenFiles::renewed);
        self
    }

    /// The file names tried, in order, for a directory; none means a
    /// directory has no index. Default is `index.html`.
    pub fn index<I, S>(self, names: I) -> Files
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let names = names.into_iter().map(Into::into).collect();
        self.with(|c| c.index = names)
    }

    /// Lists a directory that has no index file as an HTML page (names
    /// sorted and escaped, at most [`MAX_LISTING_ENTRIES`]). Directories of
    /// a [`Bundle`] are never listed. Default is false (404).
    pub fn listing(self, yes: bool) -> Files {
        self.with(|c| c.listing = yes)
    }

    /// What names starting with a dot get. Default is [`Hidden::Deny`].
    pub fn hidden(self, policy: Hidden) -> Files {
        self.with(|c| c.hidden = policy)
    }

    /// What symbolic links get. Default is [`Symlinks::WithinRoot`].
    pub fn symlinks(self, policy: Symlinks) -> Files {
        self.with(|c| c.symlinks = policy)
    }

    /// The Cache-Control header of files and their 304s. Default is none.
    pub fn cache_control(self, cache: CacheControl) -> Files {
        self.with(|c| {
            c.compiled_cache = cache.compile();
            c.cache = cache;
        })
    }

    /// Serves `name.br`, `name.zst` or `name.gz` instead of `name` to
    /// clients that accept that coding (the best q-value wins; on a tie br,
    /// then zstd, then gzip), with `Content-Encoding`, and sends
    /// `Vary: Accept-Encoding` with every file. A sibling is used only when
    /// `name` itself exists. Default is true.
    pub fn precompressed(self, yes: bool) -> Files {
        self.with(|c| c.precompressed = yes)
    }

    /// Keeps files open for reuse: a file (or a missing name) found again
    /// within `valid` costs an `fstat` instead of an `open`, an `fstat` and
    /// a `close` (metadata is read again on every use, so a file changed in
    /// place is served as it now is), and a file of at most
    /// [`MAX_CACHED_FILE_BYTES`] is served from memory while its length and
    /// modification time are unchanged. A file replaced or deleted, or one
    /// created where none was, is seen at most `valid` late, as with
    /// nginx's `open_file_cache`. Each worker thread keeps at most
    /// [`MAX_OPEN_FILES`] entries. `None` (or zero) turns it off. Default is
    /// off.
    pub fn open_file_cache(self, valid: Option<Duration>) -> Files {
        let cache = valid.filter(|v| !v.is_zero()).map(OpenFiles::new);
        self.with(|c| c.open_files = cache)
    }

    /// Most ranges served in one multipart answer after coalescing; a
    /// request asking for more gets the whole file (200). Default is
    /// [`MAX_RANGES`].
    pub fn max_ranges(self, n: usize) -> Files {
        self.with(|c| c.max_ranges = n.max(1))
    }

    /// The canonical root directory; `None` for a bundle.
    pub fn root(&self) -> Option<&Path> {
        match &self.config.source {
            Source::Dir(root) => Some(root),
            Source::Bundle(_) => None,
        }
    }

    /// A handler serving the path held by the route parameter `param` (a
    /// `<path:NAME>` parameter), for [`App`](crate::App) routes:
    /// `app.get("/static/<path:file>", files.handler("file"))`.
    ///
    /// A directory asked for without its trailing slash is redirected to
    /// the request path plus `/`.
    pub fn handler(&self, param: &str) -> impl Handler<(Request,)> + Clone {
        let files = self.clone();
        let param: Arc<str> = param.into();
        move |req: Request| ready(files.respond_param(&req, &param))
    }

    fn respond_param(&self, req: &Request, param: &str) -> Response {
        let head = req.method() == Method::HEAD;
        let Some(decoded) = req.param_str(param) else {
            // The route has no such parameter: a bug in the app, not the
            // client's request.
            tracing::error!(target: "celer::files", param, "route has no such path parameter");
            return Answer::INTERNAL.into_response(head);
        };
        let path = match SafePath::from_decoded(decoded.as_bytes()) {
            Ok(path) => path,
            Err(_) => return Answer::BAD_REQUEST.into_response(head),
        };
        // The redirect for a directory: this request's own path plus `/`,
        // with leading slashes collapsed so it can never name another host.
        let raw = req.path();
        let base = format!("/{}", raw.trim_start_matches('/'));
        let redirect = Redirect {
            base: &base,
            whole: true,
            query: req.uri().query(),
        };
        self.respond_path(req.method(), &path, req.headers(), &redirect)
    }

    /// The response to a request for the raw (percent-encoded) path `path`,
    /// as a tower service sees it.
    fn respond_uri(&self, method: &Method, uri: &http::Uri, headers: &HeaderMap) -> Response {
        let head = method == Method::HEAD;
        match SafePath::parse(uri.path()) {
            Ok(path) => {
                let redirect = Redirect {
                    base: "",
                    whole: false,
                    query: uri.query(),
                };
                self.respond_path(method, &path, headers, &redirect)
            }
            Err(_) => Answer::BAD_REQUEST.into_response(head),
        }
    }

    fn respond_path(
        &self,
        method: &Method,
        path: &SafePath,
        headers: &HeaderMap,
        redirect: &Redirect<'_>,
    ) -> Response {
        let head = match *method {
            Method::GET => false,
            Method::HEAD => true,
            // RFC 9110 §15.5.6: 405 names the methods that are allowed.
            _ => return Answer::MethodNotAllowed.into_response(false),
        };
        match self.config.find(path, headers, redirect) {
            Ok(resolve::Found::Rep(rep)) => {
                respond::representation(head, headers, &rep, self.config.max_ranges)
            }
            Ok(resolve::Found::Listing(page)) => resolve::listing_response(page, head),
            Err(answer) => answer.into_response(head),
        }
    }

    /// Serves `path`, relative to the root and already decoded, for
    /// [`Offload`]: the request's conditionals and ranges apply.
    pub(crate) fn respond_offloaded(
        &self,
        method: &Method,
        decoded: &[u8],
        headers: &HeaderMap,
    ) -> Option<Response> {
        let path = SafePath::from_decoded(decoded).ok()?;
        let redirect = Redirect {
            base: "",
            whole: false,
            query: None,
        };
        Some(self.respond_path(method, &path, headers, &redirect))
    }
}

/// How to build the redirect of a directory asked for without its slash.
#[derive(Debug)]
struct Redirect<'a> {
    /// The request path (when `whole`) or the prefix before the served path.
    base: &'a str,
    /// `base` is the whole request path: append `/` to it.
    whole: bool,
    query: Option<&'a str>,
}

impl Redirect<'_> {
    fn location(&self, path: &SafePath) -> String {
        let mut href = if self.whole {
            format!("{}/", self.base)
        } else {
            path.dir_href(self.base)
        };
        if let Some(query) = self.query {
            href.push('?');
            href.push_str(query);
        }
        href
    }
}

impl<B> Service<http::Request<B>> for Files {
    type Response = Response;
    type Error = Infallible;
    type Future = Ready<Result<Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        ready(Ok(self.respond_uri(req.method(), req.uri(), req.headers())))
    }
}
