//! The handler error type: turns any error into a response, keeping internal
//! detail in the log.

use std::fmt;

use http::StatusCode;

use crate::BoxError;
use crate::response::{IntoResponse, Response};

/// An error returned by a handler.
///
/// Any `std::error::Error` converts into it with `?`; such an error becomes a
/// `500 Internal Server Error` whose detail is logged (target
/// `celer::error`) and never sent. [`Error::status`] gives a client error with
/// a short public message.
///
/// ```
/// use celer::{Error, Request};
///
/// async fn handler(req: Request) -> Result<String, Error> {
///     let n: u32 = "12".parse()?;
///     if n > 100 {
///         return Err(Error::status(http::StatusCode::BAD_REQUEST, "too big"));
///     }
///     Ok(format!("{} {n}", req.path()))
/// }
/// # let _ = handler;
/// ```
pub struct Error {
    status: StatusCode,
    message: Option<&'static str>,
    source: Option<BoxError>,
}

impl Error {
    /// An error answered with `status` and `message` as body.
    pub fn status(status: StatusCode, message: &'static str) -> Self {
        Error {
            status,
            message: Some(message),
            source: None,
        }
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
            source: Some(source.into()),
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
            Some((status, message)) => Error {
                status,
                message: Some(message),
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
        match (&self.source, self.message) {
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
        let message = self
            .message
            .or(self.status.canonical_reason())
            .unwrap_or("error");
        (self.status, message).into_response()
    }
}
