//! Celer's bundled apps, each a `tower::Service` generic over the request
//! body (they never read it):
//!
//! - [`StaticSite`]: a directory served over GET and HEAD, with no way out
//!   of its root;
//! - [`Welcome`]: the embedded site `celer serve` shows without `--root`;
//! - [`tasks::with_tasks`]: the task API at `/tasks` beside a site
//!   (`celer serve --tasks`);
//! - [`feed`]: live JSON feeds at `/feeds` from files, Redis and
//!   upstream URLs, with a page at `/feeds/` (`celer serve --feed`).
//!
//! Both are thin users of `celer::files::Files` (a directory and an
//! embedded bundle) and answer with `celer::Body`, whose size is exact for
//! files, so the engine sends `Content-Length` and, for file regions on
//! plain TCP, uses `sendfile(2)`.
//!
//! # Layout
//!
//! - `static_site`, `welcome`: the two services
//! - `future`: the services' response future
//!
//! Both answer `OPTIONS *` (RFC 9110 §9.3.7), a question about the server
//! as a whole: 200 with the methods their resources take in `Allow`.

pub mod feed;
pub mod future;
pub mod static_site;
pub mod tasks;
pub mod welcome;

pub use celer::Body;
pub use static_site::StaticSite;
pub use welcome::Welcome;

/// The answer to `OPTIONS *` (RFC 9110 §9.3.7) when `req` is one: 200, no
/// content, and in `Allow` the methods the sites' resources take (other
/// methods, `OPTIONS` on a resource included, are 405 there). `None` for
/// any other request.
pub(crate) fn asterisk<B>(req: &http::Request<B>) -> Option<http::Response<Body>> {
    if req.method() != http::Method::OPTIONS || req.uri() != "*" {
        return None;
    }
    let mut res = http::Response::new(Body::empty());
    res.headers_mut().insert(
        http::header::ALLOW,
        http::HeaderValue::from_static("GET, HEAD"),
    );
    res.headers_mut().insert(
        http::header::CONTENT_LENGTH,
        http::HeaderValue::from_static("0"),
    );
    Some(res)
}

/// Adds `GET /` and `GET /<path:rest>` (and so `HEAD`) to `app`, each
/// answered by `site`: a bundled site behind the routes of an app.
pub(crate) fn forward_to_site<S>(app: &mut celer::App, site: S)
where
    S: tower_service::Service<
            http::Request<Body>,
            Response = http::Response<Body>,
            Error = std::convert::Infallible,
        > + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send,
{
    let forward = move |req: celer::Request| {
        let mut site = site.clone();
        async move {
            match site.call(req.into_http()).await {
                Ok(res) => res,
                Err(never) => match never {},
            }
        }
    };
    app.get("/", forward.clone());
    app.get("/<path:rest>", forward);
}
