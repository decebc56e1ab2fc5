//! [`Reject`]: a request the engine answers itself, on any protocol, with
//! the same plain-text response: its status, and a body that repeats the
//! status code and gives a one-line reason.

use http::header::{self, HeaderValue};
use http::{Response, StatusCode};

/// Why a request was refused: the status to answer and a short reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reject {
    pub(crate) status: StatusCode,
    pub(crate) reason: &'static str,
}

impl Reject {
    /// A refusal with `status` and `reason` (lowercase, no period).
    pub(crate) const fn new(status: StatusCode, reason: &'static str) -> Reject {
        Reject { status, reason }
    }

    /// The answer to a service that failed; the failure itself goes to
    /// the log, never to the client.
    pub(crate) const fn internal() -> Reject {
        Reject::new(StatusCode::INTERNAL_SERVER_ERROR, "internal server error")
    }

    /// The response: the status, `Content-Type: text/plain; charset=utf-8`
    /// and the body `CODE reason` and a newline. The protocol engine adds
    /// its framing, `Date` and `Server` as for any response.
    pub(crate) fn response(self) -> Response<String> {
        let mut response = Response::new(format!("{} {}\n", self.status.as_u16(), self.reason));
        *response.status_mut() = self.status;
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_plain_text_naming_its_status_and_reason() {
        let response = Reject::new(StatusCode::URI_TOO_LONG, "request target too long").response();
        assert_eq!(response.status(), StatusCode::URI_TOO_LONG);
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            "text/plain; charset=utf-8"
        );
        assert_eq!(response.body(), "414 request target too long\n");
    }
}
