//! Response filters that transform a whole body: middleware that buffers
//! a response of chosen media types, up to a limit, and hands it to a
//! function (Valum's buffering filters), e.g. to inject a banner, rewrite
//! links or minify.
//!
//! A response passes through untouched when its media type is not one the
//! filter was made for, when it has a `Content-Encoding` (compressed bytes
//! are opaque: install the filter inside compression, so it sees the
//! response first), when it is a `206`, `204` or `304`, or when the request
//! was `HEAD`. A filtered response loses its `ETag` and `Accept-Ranges`
//! (they described the old bytes) and gets a new `Content-Length`.
//!
//! A body larger than the limit ([`DEFAULT_MAX_FILTERED_BYTES`] unless
//! [`BodyFilter::max_bytes`] says otherwise) is answered `500`, logged
//! with the limit's name: a filter that silently did not apply could leave
//! a page without what it must have. A body whose `Content-Length` is over
//! the limit is refused before anything is read; a streamed one as soon as
//! it passes the limit, so memory stays bounded either way.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use celer::template::filter::BodyFilter;
//!
//! let banner = BodyFilter::new(&["text/html"], |body| {
//!     let page = String::from_utf8_lossy(&body);
//!     page.replacen("<body>", "<body><p class=\"banner\">staging</p>", 1).into()
//! });
//! let mut app = celer::App::new();
//! app.middleware(banner.into_middleware());
//! app.get("/", |_req: celer::Request| async { celer::response::Html("<body>hi</body>") });
//! app.get("/api", |_req: celer::Request| async { "<body>" });
//! let client = celer::test::TestClient::new(app);
//! assert_eq!(client.get("/").await.text(), "<body><p class=\"banner\">staging</p>hi</body>");
//! assert_eq!(client.get("/api").await.text(), "<body>"); // text/plain: untouched
//! # });
//! ```

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderValue};
use http::{Method, StatusCode};
use http_body::Body as _;
use http_body_util::BodyExt;

use crate::handler::Handler;
use crate::response::IntoResponse;
use crate::{Body, Error, Next, Request, Response};

/// The largest body a [`BodyFilter`] buffers by default: 8 MiB.
pub const DEFAULT_MAX_FILTERED_BYTES: usize = 8 * 1024 * 1024;

type FilterFn = dyn Fn(Bytes) -> Bytes + Send + Sync;

/// Middleware that buffers responses of some media types and transforms
/// their bodies. See the [module](self) docs.
#[derive(Clone)]
pub struct BodyFilter {
    types: Arc<[String]>,
    max_bytes: usize,
    f: Arc<FilterFn>,
}

impl std::fmt::Debug for BodyFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BodyFilter")
            .field("types", &self.types)
            .field("max_bytes", &self.max_bytes)
            .finish_non_exhaustive()
    }
}

impl BodyFilter {
    /// A filter applying `f` to responses whose media type (the
    /// `Content-Type` without parameters, compared case-insensitively) is
    /// one of `types`, e.g. `&["text/html"]`.
    pub fn new(types: &[&str], f: impl Fn(Bytes) -> Bytes + Send + Sync + 'static) -> BodyFilter {
        BodyFilter {
            types: types.iter().map(|t| t.to_ascii_lowercase()).collect(),
            max_bytes: DEFAULT_MAX_FILTERED_BYTES,
            f: Arc::new(f),
        }
    }

    /// The largest body buffered; a larger one is answered `500`.
    pub fn max_bytes(mut self, max_bytes: usize) -> BodyFilter {
        self.max_bytes = max_bytes;
        self
    }

    /// The middleware.
    pub fn into_middleware(self) -> impl Handler<(Request, Next)> + Clone {
        move |req: Request, next: Next| {
            let filter = self.clone();
            async move { filter.handle(req, next).await }
        }
    }

    fn applies(&self, head_request: bool, res: &Response) -> bool {
        if head_request
            || matches!(
                res.status(),
                StatusCode::PARTIAL_CONTENT | StatusCode::NO_CONTENT | StatusCode::NOT_MODIFIED
            )
            || res.status().is_informational()
            || res.headers().contains_key(header::CONTENT_ENCODING)
        {
            return false;
        }
        let Some(ct) = res
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
        else {
            return false;
        };
        let media = ct.split(';').next().unwrap_or("").trim();
        self.types.iter().any(|t| t.eq_ignore_ascii_case(media))
    }

    async fn handle(&self, req: Request, next: Next) -> Response {
        let head = req.method() == Method::HEAD;
        let res = next.run(req).await;
        if !self.applies(head, &res) {
            return res;
        }
        let (mut parts, body) = res.into_parts();
        let bytes = match self.collect(body).await {
            Ok(bytes) => bytes,
            Err(err) => return err.into_response(),
        };
        let out = (self.f)(bytes);
        parts.headers.remove(header::ETAG);
        parts.headers.remove(header::ACCEPT_RANGES);
        parts
            .headers
            .insert(header::CONTENT_LENGTH, HeaderValue::from(out.len()));
        Response::from_parts(parts, Body::from(out))
    }

    /// Reads `body` whole, refusing more than `max_bytes`.
    async fn collect(&self, mut body: Body) -> Result<Bytes, Error> {
        let over = || {
            Error::internal(format!(
                "response body over the filter's limit of {} bytes (BodyFilter::max_bytes)",
                self.max_bytes
            ))
        };
        if body.size_hint().lower() > self.max_bytes as u64 {
            return Err(over());
        }
        let mut buf = BytesMut::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(Error::boxed)?;
            if let Ok(data) = frame.into_data() {
                if buf.len() + data.len() > self.max_bytes {
                    return Err(over());
                }
                buf.extend_from_slice(&data);
            }
        }
        Ok(buf.freeze())
    }
}
