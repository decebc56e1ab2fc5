//! [`StaticSite`]: a directory served over GET and HEAD.
//!
//! A request goes through three steps, each a function:
//!
//! 1. `Read::from_method` and `SafePath::parse`: no IO; 405, 400 or 403.
//! 2. `StaticSite::resolve`: the file system; symlinks are resolved and the
//!    result must still lie under the root; directories get their
//!    `index.html` or a redirect to the slash form.
//! 3. `StaticSite::open`: the file is opened, its metadata read from the
//!    open descriptor, and the response built from that.
//!
//! Conditional requests, ranges and ETags will go between 3 and the
//! response (see `common::respond`); the request head is kept for them.

use std::convert::Infallible;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::task::{Context, Poll};

use http::request::Parts;
use http::{Request, Response, StatusCode};
use tower_service::Service;

use crate::body::Body;
use crate::common::mime;
use crate::common::path::{SafePath, has_hidden};
use crate::common::respond::{self, Answer, Read, Representation};
use crate::future::ResponseFuture;

/// The file served for a directory.
const INDEX: &str = "index.html";

/// A `tower::Service` that serves the files under a directory.
///
/// - GET and HEAD only; other methods get 405 with `Allow: GET, HEAD`.
/// - `Content-Type` from the file extension, `Content-Length` and
///   `Last-Modified` from the file's metadata; bodies stream in 64 KiB chunks.
/// - A directory serves its `index.html`; asked for without a trailing
///   slash, it answers 301 to the slash form. There are no listings.
/// - 404 for what does not exist, 403 for what cannot be read, for special
///   files, and for hidden names (a segment starting with `.`, except
///   `.well-known`) unless [`StaticSite::serve_hidden`] allows them.
/// - No request reaches outside the root: the path is percent-decoded and
///   then refused (400) if it holds `..`, a backslash or NUL; symlinks are
///   resolved and must end under the root (403 otherwise).
///
/// The service is generic over the request body, which it never reads.
#[derive(Debug, Clone)]
pub struct StaticSite {
    inner: Arc<Config>,
}

#[derive(Debug)]
struct Config {
    /// The canonical root: absolute, no symlinks.
    root: PathBuf,
    /// Serve names starting with a dot.
    hidden: bool,
}

/// A file found for a request, not yet opened.
#[derive(Debug)]
struct Target {
    /// The canonical path, under the root.
    path: PathBuf,
    /// The content type, from the name the client asked for.
    content_type: &'static str,
}

impl StaticSite {
    /// Serves `root`, which must be a directory. Symlinks in `root` itself
    /// are resolved once, here.
    pub fn new(root: impl AsRef<Path>) -> io::Result<StaticSite> {
        let root = root.as_ref();
        let canonical = std::fs::canonicalize(root)
            .map_err(|err| io::Error::new(err.kind(), format!("{}: {err}", root.display())))?;
        if !std::fs::metadata(&canonical)?.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("{}: not a directory", root.display()),
            ));
        }
        Ok(StaticSite {
            inner: Arc::new(Config {
                root: canonical,
                hidden: false,
            }),
        })
    }

    /// Serves hidden files and directories (names starting with `.`) too.
    /// Default is false: they get 403, except `.well-known`.
    pub fn serve_hidden(self, yes: bool) -> StaticSite {
        StaticSite {
            inner: Arc::new(Config {
                root: self.inner.root.clone(),
                hidden: yes,
            }),
        }
    }

    /// The canonical root directory.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }
}

impl<B> Service<Request<B>> for StaticSite {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> ResponseFuture {
        // The head moves into the future (no copy); the body is never read.
        let (head, _body) = req.into_parts();
        let checked = Read::from_method(&head.method).and_then(|read| {
            let path = SafePath::parse(head.uri.path(), self.inner.hidden)?;
            Ok((read, path))
        });
        let (read, path) = match checked {
            Ok(checked) => checked,
            Err(answer) => return ResponseFuture::ready(answer.into_response()),
        };
        let config = self.inner.clone();
        ResponseFuture::boxed(async move {
            match config.serve(read, &path, &head).await {
                Ok(res) => res,
                Err(answer) => answer.into_response(),
            }
        })
    }
}

impl Config {
    async fn serve(
        &self,
        read: Read,
        path: &SafePath,
        head: &Parts,
    ) -> Result<Response<Body>, Answer> {
        let target = self.resolve(path, head.uri.query()).await?;
        let rep = open(&target).await?;
        Ok(respond::representation(read, rep))
    }

    /// Finds the file for `path`, or the answer when there is none.
    async fn resolve(&self, path: &SafePath, query: Option<&str>) -> Result<Target, Answer> {
        let real = self.confine(&self.root.join(path.relative())).await?;
        let meta = tokio::fs::metadata(&real)
            .await
            .map_err(|err| io_answer(&err))?;
        if meta.is_dir() {
            if !path.dir_form {
                let mut href = path.dir_href();
                if let Some(query) = query {
                    href.push('?');
                    href.push_str(query);
                }
                return Err(Answer::ToDirectory(href));
            }
            let index = self.confine(&real.join(INDEX)).await?;
            let meta = tokio::fs::metadata(&index)
                .await
                .map_err(|err| io_answer(&err))?;
            if !meta.is_file() {
                return Err(Answer::NOT_FOUND);
            }
            return Ok(Target {
                path: index,
                content_type: mime::content_type(INDEX.as_bytes()),
            });
        }
        if path.dir_form {
            // A file asked for as a directory (`/a.txt/`), as ENOTDIR would say.
            return Err(Answer::NOT_FOUND);
        }
        if !meta.is_file() {
            // FIFOs, sockets and devices: opening one could block or worse.
            return Err(Answer::FORBIDDEN);
        }
        let name = path.file_name().unwrap_or(INDEX.as_bytes());
        Ok(Target {
            path: real,
            content_type: mime::content_type(name),
        })
    }

    /// Resolves every symlink in `path` and checks the result is under the
    /// root and, unless allowed, not hidden.
    async fn confine(&self, path: &Path) -> Result<PathBuf, Answer> {
        let real = tokio::fs::canonicalize(path)
            .await
            .map_err(|err| io_answer(&err))?;
        let Ok(rel) = real.strip_prefix(&self.root) else {
            return Err(Answer::FORBIDDEN);
        };
        if !self.hidden && has_hidden(rel) {
            return Err(Answer::FORBIDDEN);
        }
        Ok(real)
    }
}

/// Opens the target; length and modification time come from the open
/// descriptor, so they describe the bytes that will be read.
async fn open(target: &Target) -> Result<Representation, Answer> {
    let file = tokio::fs::File::open(&target.path)
        .await
        .map_err(|err| io_answer(&err))?;
    let meta = file.metadata().await.map_err(|err| io_answer(&err))?;
    if !meta.is_file() {
        // Swapped for something else since `resolve` looked.
        return Err(Answer::FORBIDDEN);
    }
    Ok(Representation {
        content_type: target.content_type,
        len: meta.len(),
        modified: meta.modified().ok(),
        body: Body::file(file, meta.len()),
    })
}

/// The answer for a file-system error.
fn io_answer(err: &io::Error) -> Answer {
    let status = match err.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory => StatusCode::NOT_FOUND,
        io::ErrorKind::PermissionDenied => StatusCode::FORBIDDEN,
        // A name too long or a symlink loop is the client's path (or a broken
        // link), not a server fault.
        _ if matches!(err.raw_os_error(), Some(libc::ENAMETOOLONG | libc::ELOOP)) => {
            StatusCode::NOT_FOUND
        }
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    Answer::Status(status)
}

#[cfg(test)]
mod tests;
