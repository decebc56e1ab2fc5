//! [`Welcome`]: the site `celer serve` shows when no `--root` is given,
//! compiled into the binary and served as a `celer::files::Bundle`.

use std::convert::Infallible;
use std::task::{Context, Poll};

use celer::files::{Bundle, Files};
use http::{Request, Response};
use tower_service::Service;

use crate::Body;
use crate::future::ResponseFuture;

/// The embedded files, by path relative to the site root.
const FILES: &[(&str, &[u8])] = &[
    ("index.html", include_bytes!("../welcome/index.html")),
    ("style.css", include_bytes!("../welcome/style.css")),
    ("celer.svg", include_bytes!("../welcome/celer.svg")),
];

/// A `tower::Service` serving the embedded welcome site from memory, with
/// the same rules as [`StaticSite`](crate::StaticSite) (it is the same
/// [`Files`] service over a [`Bundle`]): ETags from a content hash,
/// conditional requests, ranges, `index.html` for `/`. Bodies are
/// `Bytes::from_static`: no copy.
#[derive(Debug, Clone)]
pub struct Welcome {
    files: Files,
}

impl Welcome {
    /// The welcome site; hashes its files once.
    pub fn new() -> Welcome {
        Welcome {
            files: Files::embedded(Bundle::new(FILES)),
        }
    }
}

impl Default for Welcome {
    fn default() -> Self {
        Welcome::new()
    }
}

impl<B> Service<Request<B>> for Welcome {
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
