//! The engine's error type: opaque, with `is_*` predicates.

use std::error::Error as StdError;
use std::fmt;

/// A boxed error that can cross threads, as used at the `Service` boundary.
pub type BoxError = Box<dyn StdError + Send + Sync>;

/// An error from the engine, most often seen by a service while it reads a
/// request body.
pub struct Error {
    inner: Box<ErrorImpl>,
}

struct ErrorImpl {
    kind: Kind,
    cause: Option<BoxError>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The socket failed.
    Io,
    /// The body grew past `Limits::max_body_bytes`.
    BodyTooLarge,
    /// The body stalled for longer than `Limits::body_timeout`.
    BodyTimeout,
    /// The chunked coding of the body was malformed.
    InvalidBody,
    /// The client closed the connection before the body ended.
    IncompleteBody,
    /// A TLS certificate, key or setting could not be used.
    TlsConfig,
}

impl Error {
    pub(crate) fn new(kind: Kind) -> Error {
        Error {
            inner: Box::new(ErrorImpl { kind, cause: None }),
        }
    }

    pub(crate) fn with<C: Into<BoxError>>(mut self, cause: C) -> Error {
        self.inner.cause = Some(cause.into());
        self
    }

    pub(crate) fn new_io(err: std::io::Error) -> Error {
        Error::new(Kind::Io).with(err)
    }

    pub(crate) fn new_tls_config(message: String) -> Error {
        Error::new(Kind::TlsConfig).with(message)
    }

    pub(crate) fn kind(&self) -> Kind {
        self.inner.kind
    }

    /// True when the socket failed.
    pub fn is_io(&self) -> bool {
        self.inner.kind == Kind::Io
    }

    /// True when the request body was larger than the configured limit.
    pub fn is_body_too_large(&self) -> bool {
        self.inner.kind == Kind::BodyTooLarge
    }

    /// True when the request body stalled past the body timeout.
    pub fn is_timeout(&self) -> bool {
        self.inner.kind == Kind::BodyTimeout
    }

    /// True when the request body's framing was malformed.
    pub fn is_invalid_body(&self) -> bool {
        self.inner.kind == Kind::InvalidBody
    }

    /// True when a TLS certificate or key file (or another TLS setting)
    /// could not be used; the message names the file and the problem.
    pub fn is_tls_config(&self) -> bool {
        self.inner.kind == Kind::TlsConfig
    }

    /// True when the client went away before the body ended.
    pub fn is_incomplete(&self) -> bool {
        self.inner.kind == Kind::IncompleteBody
    }

    fn description(&self) -> &'static str {
        match self.inner.kind {
            Kind::Io => "connection error",
            Kind::BodyTooLarge => "request body too large",
            Kind::BodyTimeout => "request body timed out",
            Kind::InvalidBody => "invalid request body framing",
            Kind::IncompleteBody => "connection closed before the request body ended",
            Kind::TlsConfig => "invalid TLS configuration",
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut t = f.debug_tuple("celer_server::Error");
        t.field(&self.inner.kind);
        if let Some(cause) = &self.inner.cause {
            t.field(cause);
        }
        t.finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.inner.cause {
            Some(cause) => write!(f, "{}: {cause}", self.description()),
            None => f.write_str(self.description()),
        }
    }
}

impl StdError for Error {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.inner
            .cause
            .as_ref()
            .map(|c| &**c as &(dyn StdError + 'static))
    }
}

impl From<Error> for std::io::Error {
    fn from(err: Error) -> std::io::Error {
        let kind = match err.kind() {
            Kind::BodyTimeout => std::io::ErrorKind::TimedOut,
            Kind::IncompleteBody => std::io::ErrorKind::UnexpectedEof,
            Kind::Io => std::io::ErrorKind::Other,
            Kind::BodyTooLarge | Kind::InvalidBody => std::io::ErrorKind::InvalidData,
            Kind::TlsConfig => std::io::ErrorKind::InvalidInput,
        };
        std::io::Error::new(kind, err)
    }
}
