//! Extractors: typed values read from a request, with typed rejections.
//!
//! The [`Request`] methods (`bytes`, `text`, `json`, `form`, `query`,
//! `param`) are the built-in extractors. [`FromRequest`] lets an application
//! define its own and read them with [`Request::extract`].
//!
//! Body extractors enforce a size limit: [`DEFAULT_BODY_LIMIT`] unless the
//! app ([`App::body_limit`](crate::App::body_limit)) or the route
//! ([`RouteBuilder::body_limit`](crate::app::RouteBuilder::body_limit))
//! sets another. A larger body is answered with `413 Payload Too Large`,
//! before any of it is read when `Content-Length` already says so.

pub mod rejection;

use std::future::Future;

use bytes::{Bytes, BytesMut};
use http_body::Body as _;
use http_body_util::BodyExt;
use serde::de::DeserializeOwned;

use self::rejection::{BodyReadFailed, BodyTooLarge, BytesRejection, TextRejection};
use crate::response::IntoResponse;
use crate::{Body, Request};

pub use crate::response::Json;

/// The default limit on a request body read by an extractor: 2 MiB (bytes).
pub const DEFAULT_BODY_LIMIT: usize = 2 * 1024 * 1024;

/// A value that can be extracted from a request.
///
/// ```
/// use celer::extract::FromRequest;
/// use celer::Request;
/// use http::StatusCode;
///
/// struct ApiKey(String);
///
/// impl FromRequest for ApiKey {
///     type Rejection = (StatusCode, &'static str);
///
///     async fn from_request(req: &mut Request) -> Result<Self, Self::Rejection> {
///         match req.headers().get("x-api-key").and_then(|v| v.to_str().ok()) {
///             Some(key) => Ok(ApiKey(key.to_owned())),
///             None => Err((StatusCode::UNAUTHORIZED, "missing api key")),
///         }
///     }
/// }
///
/// async fn handler(mut req: Request) -> Result<String, (StatusCode, &'static str)> {
///     let ApiKey(key) = req.extract::<ApiKey>().await?;
///     Ok(key)
/// }
/// # let _ = handler;
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be extracted from a request",
    label = "not `FromRequest`",
    note = "`req.extract::<T>()` takes `Json<T>`, `Form<T>`, `Query<T>`, `Bytes`, `String`, or a type of yours that implements `FromRequest`"
)]
pub trait FromRequest: Sized {
    /// The rejection answered when extraction fails.
    type Rejection: IntoResponse;

    /// Extracts the value; body extractors take the body out of `req`.
    fn from_request(
        req: &mut Request,
    ) -> impl Future<Output = Result<Self, Self::Rejection>> + Send;
}

/// A urlencoded form body (`application/x-www-form-urlencoded`).
///
/// ```
/// use celer::extract::Form;
/// #[derive(serde::Deserialize)]
/// struct Login { user: String }
///
/// async fn login(mut req: celer::Request) -> Result<String, celer::extract::rejection::FormRejection> {
///     let Form(login) = req.extract::<Form<Login>>().await?;
///     Ok(login.user)
/// }
/// # let _ = login;
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Form<T>(pub T);

/// A deserialized query string.
///
/// ```
/// use celer::extract::Query;
/// #[derive(serde::Deserialize)]
/// struct Page { n: u32 }
///
/// async fn page(mut req: celer::Request) -> Result<String, celer::extract::rejection::QueryRejection> {
///     let Query(page) = req.extract::<Query<Page>>().await?;
///     Ok(page.n.to_string())
/// }
/// # let _ = page;
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Query<T>(pub T);

impl<T: DeserializeOwned + Send> FromRequest for Json<T> {
    type Rejection = rejection::JsonRejection;

    async fn from_request(req: &mut Request) -> Result<Self, Self::Rejection> {
        req.json().await.map(Json)
    }
}

impl<T: DeserializeOwned + Send> FromRequest for Form<T> {
    type Rejection = rejection::FormRejection;

    async fn from_request(req: &mut Request) -> Result<Self, Self::Rejection> {
        req.form().await.map(Form)
    }
}

impl<T: DeserializeOwned + Send> FromRequest for Query<T> {
    type Rejection = rejection::QueryRejection;

    async fn from_request(req: &mut Request) -> Result<Self, Self::Rejection> {
        req.query().map(Query)
    }
}

impl FromRequest for Bytes {
    type Rejection = BytesRejection;

    async fn from_request(req: &mut Request) -> Result<Self, Self::Rejection> {
        req.bytes().await
    }
}

impl FromRequest for String {
    type Rejection = TextRejection;

    async fn from_request(req: &mut Request) -> Result<Self, Self::Rejection> {
        req.text().await
    }
}

/// `body` cut off at `limit` bytes: past it, the stream yields a
/// [`BodyTooLarge`] error (RFC 9110 §15.5.14). A declared length over the
/// limit fails at the first poll.
pub(crate) fn limited(body: Body, limit: usize) -> Body {
    use http_body::SizeHint;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    struct Limited {
        body: Body,
        left: u64,
    }

    impl http_body::Body for Limited {
        type Data = Bytes;
        type Error = crate::BoxError;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<http_body::Frame<Bytes>, crate::BoxError>>> {
            if self.body.size_hint().lower() > self.left {
                return Poll::Ready(Some(Err(Box::new(BodyTooLarge::new()))));
            }
            let frame = match Pin::new(&mut self.body).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => frame,
                other => return other,
            };
            if let Some(data) = frame.data_ref() {
                match self.left.checked_sub(data.len() as u64) {
                    Some(left) => self.left = left,
                    None => return Poll::Ready(Some(Err(Box::new(BodyTooLarge::new())))),
                }
            }
            Poll::Ready(Some(Ok(frame)))
        }

        fn is_end_stream(&self) -> bool {
            self.body.is_end_stream()
        }

        fn size_hint(&self) -> SizeHint {
            self.body.size_hint()
        }
    }

    if body.is_end_stream() {
        return body;
    }
    Body::new(Limited {
        body,
        left: limit as u64,
    })
}

/// Reads a whole body, refusing more than `limit` bytes.
pub(crate) async fn read_limited(mut body: Body, limit: usize) -> Result<Bytes, BytesRejection> {
    // RFC 9110 §15.5.14: refuse early when the declared length is too large.
    if body.size_hint().lower() > limit as u64 {
        return Err(BodyTooLarge::new().into());
    }
    let mut first: Option<Bytes> = None;
    let mut rest = BytesMut::new();
    let mut total = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(BodyReadFailed::with_source)?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        total = total.saturating_add(data.len());
        if total > limit {
            return Err(BodyTooLarge::new().into());
        }
        match &first {
            None => first = Some(data),
            Some(_) => rest.extend_from_slice(&data),
        }
    }
    Ok(match first {
        None => Bytes::new(),
        Some(first) if rest.is_empty() => first,
        Some(first) => {
            let mut all = BytesMut::with_capacity(total);
            all.extend_from_slice(&first);
            all.extend_from_slice(&rest);
            all.freeze()
        }
    })
}
