//! [`StaticSite`]: a directory served over GET and HEAD, by
//! `celer::files::Files`.

use std::convert::Infallible;
use std::io;
use std::path::Path;
use std::task::{Context, Poll};

use celer::files::{Files, Hidden};
use http::{Request, Response};
use tower_service::Service;

use crate::Body;
use crate::future::ResponseFuture;

/// A `tower::Service` that serves the files under a directory: a
/// [`Files`] service with its defaults (see `celer::files` for the
/// semantics: ETags, conditional requests, ranges, precompressed siblings,
/// index files, no way out of the root).
///
/// - 404 for what does not exist, 403 for what cannot be read, for special
///   files, and for hidden names (a segment starting with `.`, except
///   `.well-known`) unless [`StaticSite::serve_hidden`] allows them.
/// - Symlinks are followed while they stay under the root (403 otherwise).
///
/// The service is generic over the request body, which it never reads.
#[derive(Debug, Clone)]
pub struct StaticSite {
    files: Files,
}

impl StaticSite {
    /// Serves `root`, which must be a directory. Symlinks in `root` itself
    /// are resolved once, here.
    pub fn new(root: impl AsRef<Path>) -> io::Result<StaticSite> {
        Ok(StaticSite {
            files: Files::new(root)?,
        })
    }

    /// Serves with a configured [`Files`] service (listing, policies,
    /// Cache-Control).
    pub fn with_files(files: Files) -> StaticSite {
        StaticSite { files }
    }

    /// Serves hidden files and directories (names starting with `.`) too.
    /// Default is false: they get 403, except `.well-known`.
    pub fn serve_hidden(self, yes: bool) -> StaticSite {
        let policy = if yes { Hidden::Allow } else { Hidden::Deny };
        StaticSite {
            files: self.files.hidden(policy),
        }
    }

    /// The canonical root directory.
    pub fn root(&self) -> &Path {
        self.files.root().unwrap_or(Path::new("/"))
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
        if let Some(res) = crate::asterisk(&req) {
            return std::future::ready(Ok(res));
        }
        self.files.call(req)
    }
}

#[cfg(test)]
mod tests;
