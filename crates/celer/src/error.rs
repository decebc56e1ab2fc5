//! The handler error type: turns any error into a response, keeping internal
//! detail in the log.

use std::borrow::Cow;
use std::fmt;

use http::{HeaderValue, StatusCode, header};

use crate::BoxError;
use crate::response::{IntoResponse, Response};

/// An error returned by a handler.
///
/// Any `std::error::Error` converts into it with `?`; such an error becomes a
/// `500 Internal Server Error` whose detail is logged (target
/// `celer::error`) and never sent. [`Error::status`] gives a client error with
/// a public message, `&'static str` or `String`.
///
/// It is answered as `text/plain`, or as RFC 9457 `application/problem+json`
/// when the app asks for it with
/// [`App::problem_details`](crate::App::problem_details).
///
/// ```
/// use celer::{Error, Request};
///
/// async fn handler(req: Request) -> Result<String, Error> {
///     let n: u32 = "12".parse()?;
///     if n > 100 {
///         return Err(Error::status(http::StatusCode::BAD_REQUEST, format!("{n} is too big")));
///     }
///     Ok(format!("{} {n}", req.path()))
/// }
/// # let _ = handler;
/// ```
pub struct Error {
    status: StatusCode,
    message: Option<Cow<'static, str>>,
    /// What a problem+json answer says in `detail`: a rejection's detail.
    detail: Option<String>,
    source: Option<BoxError>,
}

impl Error {
    /// An error answered with `status` and `message` as body.
    ///
    /// ```
    /// let id = 7;
    /// let err = celer::Error::status(http::StatusCode::NOT_FOUND, format!("no note {id}"));
    /// assert_eq!(err.message(), "no note 7");
    /// ```
    pub fn status(status: StatusCode, message: impl Into<Cow<'static, str>>) -> Self {
        Error {
            status,
            message: Some(message.into()),
            detail: None,
            source: None,
        }
    }

    /// The public message: the one given to [`Error::status`], a
    /// rejection's short body, or the status's reason phrase.
    ///
    /// ```
    /// assert_eq!(celer::Error::internal("disk on fire").message(), "Internal Server Error");
    /// ```
    pub fn message(&self) -> &str {
        match &self.message {
            Some(message) => message,
            None => self.status.canonical_reason().unwrap_or("error"),
        }
    }

    /// What went wrong in more words, when the error came from a
    /// rejection (see each rejection's `detail`); never for a server error.
    pub fn detail(&self) -> Option<&str> {
        if self.status.is_server_error() {
            return None;
        }
        self.detail.as_deref()
    }

    /// An internal error (500) whose detail is logged, not sent.
    ///
    /// ```
    /// let err = celer::Error::internal("database is gone");
    /// assert_eq!(err.status_code(), 500);
    /// ```
    pub fn internal(source: impl Into<BoxError>) -> Self {
        Error {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: None,
            detail: None,
            source: Some(source.into()),
        }
    }

    /// A boxed error, such as a body stream's (from
    /// [`Request::take_body`](crate::Request::take_body)): a rejection it
    /// carries keeps its status (a body over the limit is a `413`),
    /// anything else is a `500`.
    ///
    /// ```
    /// let err = celer::Error::boxed("broken pipe".into());
    /// assert_eq!(err.status_code(), 500);
    /// ```
    pub fn boxed(err: BoxError) -> Self {
        match crate::extract::rejection::status_of(&*err) {
            Some((status, message, detail)) => Error {
                status,
                message: Some(Cow::Borrowed(message)),
                detail: Some(detail),
                source: Some(err),
            },
            None => Error::internal(err),
        }
    }

    /// The status this error is answered with.
    pub fn status_code(&self) -> StatusCode {
        self.status
    }
}

/// Any error converts with `?`. Extractor rejections
/// ([`extract::rejection`](crate::extract::rejection)) keep their status and
/// short body (a malformed JSON body stays a 400, a body over the limit a
/// 413); every other error becomes a 500.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// #[derive(serde::Deserialize)]
/// struct Item { name: String }
///
/// async fn create(mut req: celer::Request) -> Result<String, celer::Error> {
///     let item: Item = req.json().await?;
///     Ok(item.name)
/// }
///
/// let req = celer::Request::builder()
///     .method("POST")
///     .uri("/items")
///     .header("content-type", "application/json")
///     .body(r#"{"name": 5}"#)
///     .unwrap();
/// let err = create(req).await.unwrap_err();
/// assert_eq!(err.status_code(), 422);
/// # });
/// ```
impl<E> From<E> for Error
where
    E: std::error::Error + Send + Sync + 'static,
{
    fn from(err: E) -> Self {
        match crate::extract::rejection::status_of(&err) {
            Some((status, message, detail)) => Error {
                status,
                message: Some(Cow::Borrowed(message)),
                detail: Some(detail),
                source: Some(Box::new(err)),
            },
            None => Error::internal(err),
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("status", &self.status)
            .field("message", &self.message)
            .field("source", &self.source)
            .finish()
    }
}

impl fmt::Display for Error {
    /// The wording is not part of the API.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.source, &self.message) {
            (Some(source), _) => write!(f, "{source}"),
            (None, Some(message)) => f.write_str(message),
            (None, None) => write!(f, "{}", self.status),
        }
    }
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::error!(target: "celer::error", status = %self.status, error = %self, "handler failed");
        } else if self.source.is_some() {
            tracing::trace!(target: "celer::rejection", status = %self.status, rejection = %self);
        }
        let detail = self.detail().map(str::to_owned);
        let message = self.message().to_owned();
        let detail = detail.as_deref().unwrap_or(&message);
        generated(self.status, message.clone(), detail)
    }
}

/// Marks an error response the framework wrote (a rejection, an
/// [`Error`]): status handlers may render it, and problem+json rendering
/// takes its detail from here.
#[derive(Clone, Debug)]
pub(crate) struct Generated {
    /// Sent as `detail` for client errors only.
    pub(crate) detail: Option<Box<str>>,
}

/// A `text/plain` error response the framework wrote, with its detail
/// kept for problem+json.
pub(crate) fn generated(
    status: StatusCode,
    body: impl Into<crate::Body>,
    detail: &str,
) -> Response {
    let mut res = (status, crate::response::text(body)).into_response();
    let detail = (!status.is_server_error()).then(|| detail.into());
    res.extensions_mut().insert(Generated { detail });
    res
}

/// Whether a status handler may replace the body of `res`: the framework
/// wrote it, or there is none.
pub(crate) fn is_replaceable(res: &Response) -> bool {
    use http_body::Body as _;
    res.extensions().get::<Generated>().is_some()
        || (res.body().size_hint().exact() == Some(0)
            && !res.headers().contains_key(header::CONTENT_TYPE))
}

const PROBLEM_JSON: HeaderValue = HeaderValue::from_static("application/problem+json");

/// Renders an error response as RFC 9457 problem details (§3: `type`,
/// `title`, `status`, `detail`), when it is one the framework wrote or one
/// without a body. Others pass unchanged.
pub(crate) fn into_problem(res: Response) -> Response {
    let status = res.status();
    if !(status.is_client_error() || status.is_server_error()) || !is_replaceable(&res) {
        return res;
    }
    let (mut parts, _body) = res.into_parts();
    let detail = parts
        .extensions
        .remove::<Generated>()
        .and_then(|generated| generated.detail);
    // RFC 9457 §4.2.1: "about:blank" means the status says it all; the
    // title is then the reason phrase.
    let mut problem = serde_json::json!({
        "type": "about:blank",
        "title": status.canonical_reason().unwrap_or("Error"),
        "status": status.as_u16(),
    });
    if let Some(detail) = detail {
        problem["detail"] = serde_json::Value::from(&*detail);
    }
    let body = serde_json::to_vec(&problem).unwrap_or_default();
    parts.headers.insert(header::CONTENT_TYPE, PROBLEM_JSON);
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, crate::Body::from(body))
}
