//! Rejections: the typed failures of extractors, each with a fixed status
//! and a short body.
//!
//! Each failure is its own type, named for what went wrong; the enum grouping
//! one extractor's failures is named `FooRejection`. Rejections are logged at
//! TRACE with the target `celer::rejection`.

use std::fmt;

use http::StatusCode;

use crate::BoxError;
use crate::response::{IntoResponse, Response};

macro_rules! define_rejection {
    ($(#[$meta:meta])* $name:ident, $status:ident, $body:literal) => {
        $(#[$meta])*
        #[derive(Debug)]
        pub struct $name {
            source: Option<BoxError>,
        }

        impl $name {
            #[allow(dead_code)]
            pub(crate) fn new() -> Self {
                $name { source: None }
            }

            #[allow(dead_code)]
            pub(crate) fn with_source(source: impl Into<BoxError>) -> Self {
                $name { source: Some(source.into()) }
            }

            /// The status this rejection is answered with.
            pub fn status(&self) -> StatusCode {
                StatusCode::$status
            }

            /// The body this rejection is answered with.
            pub fn body_text(&self) -> &'static str {
                $body
            }

            /// What went wrong, for a person: the short body followed by
            /// the cause (a serde message, the missing type, ...). This is
            /// the `detail` of the problem+json rendering
            /// ([`App::problem_details`](crate::App::problem_details)) of
            /// client errors; for a server error it stays in the log.
            pub fn detail(&self) -> String {
                match &self.source {
                    Some(source) => format!("{}: {source}", $body),
                    None => $body.to_owned(),
                }
            }
        }

        impl fmt::Display for $name {
            /// The wording is not part of the API.
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match &self.source {
                    Some(source) => write!(f, "{}: {source}", $body),
                    None => f.write_str($body),
                }
            }
        }

        impl std::error::Error for $name {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                self.source.as_deref().map(|s| s as _)
            }
        }

        impl IntoResponse for $name {
            fn into_response(self) -> Response {
                let status = self.status();
                if status.is_server_error() {
                    tracing::error!(target: "celer::error", status = %status, error = %self.detail(), "handler failed");
                } else {
                    tracing::trace!(target: "celer::rejection", status = %status, rejection = %self);
                }
                crate::error::generated(status, $body, &self.detail())
            }
        }
    };
}

/// The shell of a rejection whose failures are kinds of one type (a form, a
/// multipart body): `kind` and an optional cause, the constructors, and
/// `detail`, `Display`, `Error` and `IntoResponse`. The type itself writes
/// `status()` and `body_text()` from its kind. A server error keeps its
/// cause in the log, out of the detail a client sees.
macro_rules! kind_rejection {
    ($(#[$meta:meta])* $name:ident, $kind:ty, $what:literal) => {
        $(#[$meta])*
        #[derive(Debug)]
        pub struct $name {
            kind: $kind,
            source: Option<$crate::BoxError>,
        }

        impl $name {
            fn new(kind: $kind) -> Self {
                $name { kind, source: None }
            }

            fn with_source(kind: $kind, source: impl Into<$crate::BoxError>) -> Self {
                $name {
                    kind,
                    source: Some(source.into()),
                }
            }

            /// What went wrong, for a person: the body text and, for a
            /// client error, its cause.
            pub fn detail(&self) -> String {
                match &self.source {
                    Some(source) if !self.status().is_server_error() => {
                        format!("{}: {source}", self.body_text())
                    }
                    _ => self.body_text().to_owned(),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                match &self.source {
                    Some(source) => write!(f, "{}: {source}", self.body_text()),
                    None => f.write_str(self.body_text()),
                }
            }
        }

        impl std::error::Error for $name {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                self.source.as_deref().map(|s| s as _)
            }
        }

        impl $crate::response::IntoResponse for $name {
            fn into_response(self) -> $crate::response::Response {
                let status = self.status();
                if status.is_server_error() {
                    tracing::error!(target: "celer::error", status = %status, error = %self, $what);
                } else {
                    tracing::trace!(target: "celer::rejection", status = %status, rejection = %self);
                }
                $crate::error::generated(status, self.body_text(), &self.detail())
            }
        }
    };
}
pub(crate) use kind_rejection;

macro_rules! composite_rejection {
    ($(#[$meta:meta])* $name:ident { $($variant:ident),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug)]
        #[non_exhaustive]
        pub enum $name {
            $(
                #[allow(missing_docs)]
                $variant($variant),
            )+
        }

        impl $name {
            /// The status this rejection is answered with.
            pub fn status(&self) -> StatusCode {
                match self {
                    $($name::$variant(inner) => inner.status(),)+
                }
            }

            /// The body this rejection is answered with.
            pub fn body_text(&self) -> &'static str {
                match self {
                    $($name::$variant(inner) => inner.body_text(),)+
                }
            }

            /// What went wrong, for a person; see the `detail` of each
            /// rejection.
            pub fn detail(&self) -> String {
                match self {
                    $($name::$variant(inner) => inner.detail(),)+
                }
            }
        }

        $(
            impl From<$variant> for $name {
                fn from(inner: $variant) -> Self {
                    $name::$variant(inner)
                }
            }
        )+

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self {
                    $($name::$variant(inner) => fmt::Display::fmt(inner, f),)+
                }
            }
        }

        impl std::error::Error for $name {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                match self {
                    $($name::$variant(inner) => Some(inner),)+
                }
            }
        }

        impl IntoResponse for $name {
            fn into_response(self) -> Response {
                match self {
                    $($name::$variant(inner) => inner.into_response(),)+
                }
            }
        }
    };
}

macro_rules! widen_bytes_rejection {
    ($name:ident) => {
        impl From<BytesRejection> for $name {
            fn from(inner: BytesRejection) -> Self {
                match inner {
                    BytesRejection::BodyTooLarge(r) => $name::BodyTooLarge(r),
                    BytesRejection::BodyReadFailed(r) => $name::BodyReadFailed(r),
                    BytesRejection::BodyAlreadyTaken(r) => $name::BodyAlreadyTaken(r),
                }
            }
        }
    };
}

define_rejection!(
    /// The body is larger than the route's body limit (413, RFC 9110 §15.5.14).
    BodyTooLarge, PAYLOAD_TOO_LARGE, "payload too large"
);
define_rejection!(
    /// The body could not be read (the connection failed or was malformed).
    BodyReadFailed, BAD_REQUEST, "failed to read the request body"
);
define_rejection!(
    /// The body was already taken by an earlier extractor: a server bug (500).
    BodyAlreadyTaken, INTERNAL_SERVER_ERROR, "internal server error"
);
define_rejection!(
    /// The body is not valid UTF-8.
    InvalidUtf8, BAD_REQUEST, "request body is not valid utf-8"
);
define_rejection!(
    /// A JSON body was expected but `Content-Type` is not JSON (415).
    MissingJsonContentType, UNSUPPORTED_MEDIA_TYPE, "expected content-type: application/json"
);
define_rejection!(
    /// The body is not syntactically valid JSON.
    JsonSyntaxError, BAD_REQUEST, "malformed json"
);
define_rejection!(
    /// The JSON is valid but does not have the expected shape (422).
    JsonDataError, UNPROCESSABLE_ENTITY, "json does not match the expected shape"
);
define_rejection!(
    /// A form body was expected but `Content-Type` is not a urlencoded form.
    MissingFormContentType, UNSUPPORTED_MEDIA_TYPE,
    "expected content-type: application/x-www-form-urlencoded"
);
define_rejection!(
    /// The form does not have the expected shape (422).
    FormDataError, UNPROCESSABLE_ENTITY, "form does not match the expected shape"
);
define_rejection!(
    /// The query string does not have the expected shape.
    QueryDataError, BAD_REQUEST, "invalid query string"
);
define_rejection!(
    /// The handler asked for a parameter its rule does not have: a server
    /// bug (500).
    MissingParam, INTERNAL_SERVER_ERROR, "internal server error"
);
define_rejection!(
    /// A path parameter could not be converted to the requested type.
    InvalidParam, BAD_REQUEST, "invalid path parameter"
);
define_rejection!(
    /// The handler reads a parameter as a type that disagrees with the
    /// rule's (a number from a `string` parameter, or a type that does not
    /// parse what the rule's type accepted): a server bug (500), logged
    /// with the parameter, the rule and the route.
    ParamTypeMismatch, INTERNAL_SERVER_ERROR, "internal server error"
);
define_rejection!(
    /// The handler asked for shared state that was never installed: a server
    /// bug (500).
    MissingState, INTERNAL_SERVER_ERROR, "internal server error"
);

composite_rejection!(
    /// Failures of [`Request::bytes`](crate::Request::bytes).
    BytesRejection { BodyTooLarge, BodyReadFailed, BodyAlreadyTaken }
);
composite_rejection!(
    /// Failures of [`Request::text`](crate::Request::text).
    TextRejection { BodyTooLarge, BodyReadFailed, BodyAlreadyTaken, InvalidUtf8 }
);
composite_rejection!(
    /// Failures of [`Request::json`](crate::Request::json).
    JsonRejection {
        BodyTooLarge,
        BodyReadFailed,
        BodyAlreadyTaken,
        MissingJsonContentType,
        JsonSyntaxError,
        JsonDataError,
    }
);
composite_rejection!(
    /// Failures of [`Request::form`](crate::Request::form).
    FormRejection {
        BodyTooLarge,
        BodyReadFailed,
        BodyAlreadyTaken,
        MissingFormContentType,
        FormDataError,
    }
);
composite_rejection!(
    /// Failures of [`Request::query`](crate::Request::query).
    QueryRejection { QueryDataError }
);
composite_rejection!(
    /// Failures of [`Request::param`](crate::Request::param).
    ParamRejection { MissingParam, InvalidParam, ParamTypeMismatch }
);

widen_bytes_rejection!(TextRejection);
widen_bytes_rejection!(JsonRejection);
widen_bytes_rejection!(FormRejection);

/// The status and public body of `err` if it is one of this module's
/// rejections (or a `FooRejection` grouping one), so that `?` into
/// [`Error`](crate::Error) keeps a rejection's status instead of turning it
/// into a 500.
pub(crate) fn status_of(
    err: &(dyn std::error::Error + 'static),
) -> Option<(StatusCode, &'static str, String)> {
    macro_rules! leaves {
        ($($leaf:ident),+ $(,)?) => {
            $(
                if let Some(rejection) = err.downcast_ref::<$leaf>() {
                    return Some((rejection.status(), rejection.body_text(), rejection.detail()));
                }
            )+
        };
    }
    leaves!(
        BodyTooLarge,
        BodyReadFailed,
        BodyAlreadyTaken,
        InvalidUtf8,
        MissingJsonContentType,
        JsonSyntaxError,
        JsonDataError,
        MissingFormContentType,
        FormDataError,
        QueryDataError,
        MissingParam,
        InvalidParam,
        ParamTypeMismatch,
        MissingState,
    );
    if let Some(err) = err.downcast_ref::<crate::multipart::MultipartError>() {
        return Some((err.status(), err.body_text(), err.detail()));
    }
    if let Some(err) = err.downcast_ref::<crate::form::FormError>() {
        return Some((err.status(), err.body_text(), err.detail()));
    }
    if let Some(err) = err.downcast_ref::<crate::session::StoreError>()
        && err.is_busy()
    {
        return Some((
            err.status(),
            "session store busy",
            "The session store is busy; try again shortly.".to_owned(),
        ));
    }
    let grouped = err.is::<BytesRejection>()
        || err.is::<TextRejection>()
        || err.is::<JsonRejection>()
        || err.is::<FormRejection>()
        || err.is::<QueryRejection>()
        || err.is::<ParamRejection>();
    if grouped {
        // A grouping enum's source is the rejection it holds.
        return err.source().and_then(status_of);
    }
    None
}
