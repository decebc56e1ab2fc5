//! Redirect responses, which always carry their `Location`.

use http::StatusCode;
use http::header::{self, HeaderValue};

use super::{IntoResponse, Response};
use crate::Body;

/// A redirect: a 3xx status and a `Location` header.
///
/// ```
/// use celer::response::{IntoResponse, Redirect};
/// let res = Redirect::see_other("/users/7").into_response();
/// assert_eq!(res.status(), 303);
/// assert_eq!(res.headers()["location"], "/users/7");
/// ```
#[derive(Debug, Clone)]
pub struct Redirect {
    status: StatusCode,
    location: String,
}

impl Redirect {
    /// `302 Found` (RFC 9110 §15.4.3).
    pub fn found(location: impl Into<String>) -> Self {
        Redirect::with_status(StatusCode::FOUND, location)
    }

    /// `303 See Other` (RFC 9110 §15.4.4): the client follows with a GET.
    pub fn see_other(location: impl Into<String>) -> Self {
        Redirect::with_status(StatusCode::SEE_OTHER, location)
    }

    /// `307 Temporary Redirect` (RFC 9110 §15.4.8): the method is kept.
    pub fn temporary(location: impl Into<String>) -> Self {
        Redirect::with_status(StatusCode::TEMPORARY_REDIRECT, location)
    }

    /// `308 Permanent Redirect` (RFC 9110 §15.4.9): the method is kept.
    pub fn permanent(location: impl Into<String>) -> Self {
        Redirect::with_status(StatusCode::PERMANENT_REDIRECT, location)
    }

    /// A redirect with any status; `201 Created` with a `Location` works too.
    ///
    /// ```
    /// use celer::response::{IntoResponse, Redirect};
    /// let res = Redirect::with_status(http::StatusCode::CREATED, "/items/1").into_response();
    /// assert_eq!(res.headers()["location"], "/items/1");
    /// ```
    pub fn with_status(status: StatusCode, location: impl Into<String>) -> Self {
        Redirect {
            status,
            location: location.into(),
        }
    }
}

impl IntoResponse for Redirect {
    fn into_response(self) -> Response {
        match HeaderValue::try_from(self.location) {
            Ok(location) => {
                let mut res = Response::new(Body::empty());
                *res.status_mut() = self.status;
                res.headers_mut().insert(header::LOCATION, location);
                res
            }
            Err(err) => crate::Error::from(err).into_response(),
        }
    }
}
