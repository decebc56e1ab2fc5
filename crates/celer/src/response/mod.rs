//! Responses: the [`IntoResponse`] trait and helpers for text, HTML, JSON,
//! redirects and bare statuses.
//!
//! A handler returns anything that implements [`IntoResponse`]: a string, a
//! status, a `(StatusCode, body)` pair, [`Json`], [`Html`], [`Redirect`], a
//! full [`Response`] built with `http::Response::builder()`, or a
//! `Result` of those. Streaming bodies are built with
//! [`Body::from_stream`](crate::Body::from_stream).

mod redirect;

use std::borrow::Cow;
use std::convert::Infallible;

use bytes::Bytes;
use http::StatusCode;
use http::header::{self, HeaderMap, HeaderValue};
use serde::Serialize;

use crate::{Body, BoxError};

pub use self::redirect::Redirect;

/// The response type of handlers and of [`App`](crate::App).
pub type Response<B = Body> = http::Response<B>;

/// Converts a value into a [`Response`].
///
/// ```
/// use celer::response::IntoResponse;
/// use http::StatusCode;
///
/// let res = (StatusCode::CREATED, "made").into_response();
/// assert_eq!(res.status(), StatusCode::CREATED);
/// assert_eq!(res.headers()["content-type"], "text/plain; charset=utf-8");
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a response: it does not implement `IntoResponse`",
    label = "not `IntoResponse`",
    note = "a handler returns a `String`, `&'static str`, `StatusCode`, `Json<T>`, `Html<T>`, `Redirect`, `Response`, `()`, a tuple such as `(StatusCode, T)` or `(StatusCode, [(HeaderName, V); N], T)`, or a `Result<T, E>` whose `T` and `E` both implement `IntoResponse`",
    note = "for errors: `celer::Error` takes any `std::error::Error` with `?` (a 500 whose detail is logged), or implement `IntoResponse` for your own error type"
)]
pub trait IntoResponse {
    /// Performs the conversion.
    fn into_response(self) -> Response;
}

const TEXT: HeaderValue = HeaderValue::from_static("text/plain; charset=utf-8");
const HTML: HeaderValue = HeaderValue::from_static("text/html; charset=utf-8");
const JSON: HeaderValue = HeaderValue::from_static("application/json");
const OCTETS: HeaderValue = HeaderValue::from_static("application/octet-stream");

#[inline]
fn with_type(body: Body, content_type: HeaderValue) -> Response {
    let mut res = Response::new(body);
    res.headers_mut().insert(header::CONTENT_TYPE, content_type);
    res
}

/// A `text/plain; charset=utf-8` response.
///
/// ```
/// let res = celer::response::text("hi");
/// assert_eq!(res.headers()["content-type"], "text/plain; charset=utf-8");
/// ```
pub fn text(body: impl Into<Body>) -> Response {
    with_type(body.into(), TEXT)
}

/// A `text/html; charset=utf-8` response.
///
/// ```
/// let res = celer::response::html("<p>hi</p>");
/// assert_eq!(res.headers()["content-type"], "text/html; charset=utf-8");
/// ```
pub fn html(body: impl Into<Body>) -> Response {
    with_type(body.into(), HTML)
}

/// An `application/json` response; a value that fails to serialize gives a
/// 500 (the detail is logged).
///
/// ```
/// let res = celer::response::json(&serde_json::json!({"ok": true}));
/// assert_eq!(res.headers()["content-type"], "application/json");
/// ```
pub fn json<T: Serialize + ?Sized>(value: &T) -> Response {
    match serde_json::to_vec(value) {
        Ok(bytes) => with_type(bytes.into(), JSON),
        Err(err) => crate::Error::from(err).into_response(),
    }
}

/// A response with an empty body and the given status.
///
/// ```
/// let res = celer::response::status(http::StatusCode::NO_CONTENT);
/// assert_eq!(res.status(), 204);
/// ```
pub fn status(status: StatusCode) -> Response {
    let mut res = Response::new(Body::empty());
    *res.status_mut() = status;
    res
}

/// A JSON body: an extractor for requests and a response.
///
/// ```
/// use celer::response::{IntoResponse, Json};
/// let res = Json(vec![1, 2]).into_response();
/// assert_eq!(res.headers()["content-type"], "application/json");
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Json<T>(pub T);

impl<T: Serialize> IntoResponse for Json<T> {
    #[inline]
    fn into_response(self) -> Response {
        json(&self.0)
    }
}

/// An HTML body.
///
/// ```
/// use celer::response::{Html, IntoResponse};
/// let res = Html("<h1>hi</h1>").into_response();
/// assert_eq!(res.headers()["content-type"], "text/html; charset=utf-8");
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Html<T>(pub T);

impl<T: Into<Body>> IntoResponse for Html<T> {
    #[inline]
    fn into_response(self) -> Response {
        html(self.0)
    }
}

// ===== impl IntoResponse =====

impl<B> IntoResponse for http::Response<B>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    #[inline]
    fn into_response(self) -> Response {
        self.map(Body::new)
    }
}

impl IntoResponse for Body {
    #[inline]
    fn into_response(self) -> Response {
        Response::new(self)
    }
}

impl IntoResponse for &'static str {
    #[inline]
    fn into_response(self) -> Response {
        text(self)
    }
}

impl IntoResponse for String {
    #[inline]
    fn into_response(self) -> Response {
        text(self)
    }
}

impl IntoResponse for Cow<'static, str> {
    #[inline]
    fn into_response(self) -> Response {
        match self {
            Cow::Borrowed(s) => text(s),
            Cow::Owned(s) => text(s),
        }
    }
}

impl IntoResponse for &'static [u8] {
    #[inline]
    fn into_response(self) -> Response {
        with_type(self.into(), OCTETS)
    }
}

impl IntoResponse for Vec<u8> {
    #[inline]
    fn into_response(self) -> Response {
        with_type(self.into(), OCTETS)
    }
}

impl IntoResponse for Bytes {
    #[inline]
    fn into_response(self) -> Response {
        with_type(self.into(), OCTETS)
    }
}

impl IntoResponse for StatusCode {
    #[inline]
    fn into_response(self) -> Response {
        status(self)
    }
}

impl IntoResponse for () {
    #[inline]
    fn into_response(self) -> Response {
        Response::new(Body::empty())
    }
}

impl IntoResponse for Infallible {
    #[inline]
    fn into_response(self) -> Response {
        match self {}
    }
}

impl<T: IntoResponse, E: IntoResponse> IntoResponse for Result<T, E> {
    #[inline]
    fn into_response(self) -> Response {
        match self {
            Ok(ok) => ok.into_response(),
            Err(err) => err.into_response(),
        }
    }
}

impl<T: IntoResponse> IntoResponse for (StatusCode, T) {
    #[inline]
    fn into_response(self) -> Response {
        let mut res = self.1.into_response();
        *res.status_mut() = self.0;
        res
    }
}

impl<T: IntoResponse> IntoResponse for (HeaderMap, T) {
    #[inline]
    fn into_response(self) -> Response {
        let mut res = self.1.into_response();
        res.headers_mut().extend(self.0);
        res
    }
}

impl<T: IntoResponse> IntoResponse for (StatusCode, HeaderMap, T) {
    #[inline]
    fn into_response(self) -> Response {
        let mut res = (self.1, self.2).into_response();
        *res.status_mut() = self.0;
        res
    }
}

/// Header fields with a body: `([(CONTENT_TYPE, "text/csv")], body)`.
///
/// Names are anything that converts into a `HeaderName` (a constant such
/// as `header::LOCATION`, or a `&str`), values anything that converts into
/// a `HeaderValue` (a `&'static str`, a `String` such as a
/// [`url_for`](crate::App::url_for) result, a `HeaderValue`). A field that
/// does not convert is a `500` with a log line naming it. Fields replace
/// those of the body's response with the same name.
///
/// ```
/// use celer::response::{IntoResponse, Json};
/// use http::{StatusCode, header};
///
/// let location = String::from("/notes/7");
/// let res = (StatusCode::CREATED, [(header::LOCATION, location)], Json(7)).into_response();
/// assert_eq!(res.status(), 201);
/// assert_eq!(res.headers()["location"], "/notes/7");
/// ```
impl<K, V, T, const N: usize> IntoResponse for ([(K, V); N], T)
where
    K: TryInto<header::HeaderName>,
    K::Error: std::fmt::Display,
    V: TryInto<HeaderValue>,
    V::Error: std::fmt::Display,
    T: IntoResponse,
{
    #[inline]
    fn into_response(self) -> Response {
        let mut res = self.1.into_response();
        let mut fields = self.0.into_iter();
        for (name, value) in fields.by_ref() {
            match (name.try_into(), value.try_into()) {
                (Ok(name), Ok(value)) => {
                    res.headers_mut().insert(name, value);
                }
                (name, value) => return invalid_field(name.err(), value.err()),
            }
        }
        // Nothing is left to drop; forgetting the exhausted iterator saves
        // the call that would look.
        std::mem::forget(fields);
        res
    }
}

/// A status, header fields and a body.
impl<K, V, T, const N: usize> IntoResponse for (StatusCode, [(K, V); N], T)
where
    K: TryInto<header::HeaderName>,
    K::Error: std::fmt::Display,
    V: TryInto<HeaderValue>,
    V::Error: std::fmt::Display,
    T: IntoResponse,
{
    #[inline]
    fn into_response(self) -> Response {
        let mut res = (self.1, self.2).into_response();
        // A field that did not convert keeps its 500.
        if res.extensions().get::<InvalidField>().is_none() {
            *res.status_mut() = self.0;
        }
        res
    }
}

/// Header fields alone, with an empty body: `(StatusCode::SEE_OTHER,
/// [(LOCATION, url)])`.
impl<K, V, const N: usize> IntoResponse for [(K, V); N]
where
    K: TryInto<header::HeaderName>,
    K::Error: std::fmt::Display,
    V: TryInto<HeaderValue>,
    V::Error: std::fmt::Display,
{
    #[inline]
    fn into_response(self) -> Response {
        (self, ()).into_response()
    }
}

#[cold]
fn invalid_field(
    name: Option<impl std::fmt::Display>,
    value: Option<impl std::fmt::Display>,
) -> Response {
    let what = match (name, value) {
        (Some(err), _) => format!("invalid header name: {err}"),
        (None, Some(err)) => format!("invalid header value: {err}"),
        (None, None) => "invalid header field".to_owned(),
    };
    let mut res = crate::Error::internal(what).into_response();
    res.extensions_mut().insert(InvalidField);
    res
}

/// Marks the 500 of a header field that did not convert.
#[derive(Clone, Copy, Debug)]
struct InvalidField;
