//! [`Welcome`]: the site `celer serve` shows when no `--root` is given,
//! compiled into the binary.

use std::convert::Infallible;
use std::os::unix::ffi::OsStrExt;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use tower_service::Service;

use crate::body::Body;
use crate::common::mime;
use crate::common::path::SafePath;
use crate::common::respond::{self, Answer, Read, Representation};
use crate::future::ResponseFuture;

/// The file served for `/`.
const INDEX: &str = "index.html";

/// The embedded files, by path relative to the site root.
const FILES: &[(&str, &[u8])] = &[
    ("index.html", include_bytes!("../welcome/index.html")),
    ("style.css", include_bytes!("../welcome/style.css")),
    ("celer.svg", include_bytes!("../welcome/celer.svg")),
];

/// A `tower::Service` serving the embedded welcome site from memory, with
/// the same rules as [`StaticSite`](crate::StaticSite): GET and HEAD, 405
/// with `Allow` otherwise, `index.html` for `/`, 404 for the rest. Bodies are
/// `Bytes::from_static`: no copy, no allocation.
#[derive(Debug, Clone, Copy, Default)]
pub struct Welcome;

impl Welcome {
    /// The welcome site.
    pub fn new() -> Welcome {
        Welcome
    }

    /// The embedded file named `name` (relative, no leading slash).
    fn lookup(name: &[u8]) -> Option<&'static [u8]> {
        FILES
            .iter()
            .find(|(n, _)| n.as_bytes() == name)
            .map(|(_, data)| *data)
    }

    fn answer(read: Read, path: &SafePath) -> Response<Body> {
        let name = match (path.relative().as_os_str().as_bytes(), path.dir_form) {
            (b"", true) => INDEX.as_bytes(),
            // `/%2e` and the like: the root without its slash.
            (b"", false) => return Answer::ToDirectory("/".to_owned()).into_response(),
            // The root is the only directory.
            (_, true) => return Answer::NOT_FOUND.into_response(),
            (name, false) => name,
        };
        let Some(data) = Welcome::lookup(name) else {
            return Answer::NOT_FOUND.into_response();
        };
        let rep = Representation {
            content_type: mime::content_type(name),
            len: data.len() as u64,
            modified: None,
            body: Body::full(Bytes::from_static(data)),
        };
        respond::representation(read, rep)
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
        let res = Read::from_method(req.method()).and_then(|read| {
            let path = SafePath::parse(req.uri().path(), false)?;
            Ok(Welcome::answer(read, &path))
        });
        ResponseFuture::ready(res.unwrap_or_else(Answer::into_response))
    }
}

#[cfg(test)]
mod tests;
