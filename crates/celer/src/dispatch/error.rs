//! `DispatchError`: why a dispatched job gave no value, and the response
//! each reason is answered with.

use std::fmt;
use std::time::Duration;

use http::{HeaderValue, StatusCode, header};

use crate::response::{IntoResponse, Response};

/// Why a job sent to a [`Dispatcher`](super::Dispatcher) gave no value.
///
/// As a response: a full queue is `503 Service Unavailable` with
/// `Retry-After`, a stopped dispatcher `503` without it, a panic `500
/// Internal Server Error` (its message logged, never sent).
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use celer::IntoResponse;
/// use celer::dispatch::Dispatcher;
///
/// let pool = Dispatcher::builder().threads(1).build();
/// let err = pool.dispatch(|| panic!("boom")).await.unwrap_err();
/// assert!(err.is_panic());
/// assert_eq!(err.into_response().status(), 500);
/// # });
/// ```
#[derive(Debug)]
pub struct DispatchError {
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    /// The queue was full (and stayed full until the deadline).
    Overloaded { retry_after: Duration },
    /// The job panicked; the panic's message, if it was a string.
    Panicked(String),
    /// The dispatcher was shut down before the job ran.
    Stopped,
}

impl DispatchError {
    pub(crate) fn new_overloaded(retry_after: Duration) -> Self {
        DispatchError {
            kind: Kind::Overloaded { retry_after },
        }
    }

    pub(crate) fn new_panicked(message: String) -> Self {
        DispatchError {
            kind: Kind::Panicked(message),
        }
    }

    pub(crate) fn new_stopped() -> Self {
        DispatchError {
            kind: Kind::Stopped,
        }
    }

    /// The queue was full: answered `503` with `Retry-After`.
    pub fn is_overloaded(&self) -> bool {
        matches!(self.kind, Kind::Overloaded { .. })
    }

    /// The job panicked: answered `500`.
    pub fn is_panic(&self) -> bool {
        matches!(self.kind, Kind::Panicked(_))
    }

    /// The dispatcher was shut down: answered `503`.
    pub fn is_stopped(&self) -> bool {
        matches!(self.kind, Kind::Stopped)
    }

    /// The status this error is answered with.
    pub fn status(&self) -> StatusCode {
        match self.kind {
            Kind::Overloaded { .. } | Kind::Stopped => StatusCode::SERVICE_UNAVAILABLE,
            Kind::Panicked(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl fmt::Display for DispatchError {
    /// The wording is not part of the API.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Overloaded { .. } => f.write_str("dispatcher queue is full"),
            Kind::Panicked(message) => write!(f, "dispatched job panicked: {message}"),
            Kind::Stopped => f.write_str("dispatcher is stopped"),
        }
    }
}

impl std::error::Error for DispatchError {}

impl IntoResponse for DispatchError {
    fn into_response(self) -> Response {
        match self.kind {
            Kind::Overloaded { retry_after } => {
                tracing::debug!(target: "celer::dispatch", "job refused: queue full");
                let mut res = (StatusCode::SERVICE_UNAVAILABLE, "server busy\n").into_response();
                // RFC 9110 §10.2.3: delay-seconds, at least one.
                let secs = retry_after.as_secs().max(1);
                res.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(secs));
                res
            }
            Kind::Panicked(message) => {
                tracing::error!(target: "celer::dispatch", panic = %message, "dispatched job panicked");
                (StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error").into_response()
            }
            Kind::Stopped => {
                (StatusCode::SERVICE_UNAVAILABLE, "server shutting down\n").into_response()
            }
        }
    }
}
