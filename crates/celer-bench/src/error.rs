//! The error a bench run can end with before or instead of a report.

use std::error::Error as StdError;
use std::fmt;

type Cause = Box<dyn StdError + Send + Sync>;

/// Why a bench run could not start or finish.
///
/// The `Display` output is one lowercase line meant for a terminal, the cause
/// included; its wording is not part of the API. Use the `is_*` predicates to tell kinds
/// apart.
pub struct Error {
    inner: Box<ErrorImpl>,
}

struct ErrorImpl {
    kind: Kind,
    message: String,
    cause: Option<Cause>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A bad argument or input file.
    Usage,
    /// The target could not be resolved or reached before the run.
    Connect,
    /// Local IO: reading a file, writing a report, starting a thread.
    Io,
}

// ===== impl Error =====

impl Error {
    pub(crate) fn usage(message: impl Into<String>) -> Error {
        Error::new(Kind::Usage, message.into(), None)
    }

    pub(crate) fn connect(message: impl Into<String>, cause: impl Into<Cause>) -> Error {
        Error::new(Kind::Connect, message.into(), Some(cause.into()))
    }

    pub(crate) fn io(message: impl Into<String>, cause: impl Into<Cause>) -> Error {
        Error::new(Kind::Io, message.into(), Some(cause.into()))
    }

    fn new(kind: Kind, message: String, cause: Option<Cause>) -> Error {
        Error {
            inner: Box::new(ErrorImpl {
                kind,
                message,
                cause,
            }),
        }
    }

    /// The arguments or an input file they name are invalid.
    pub fn is_usage(&self) -> bool {
        self.inner.kind == Kind::Usage
    }

    /// The target could not be resolved or reached.
    pub fn is_connect(&self) -> bool {
        self.inner.kind == Kind::Connect
    }

    /// A local IO operation failed (files, threads, report output).
    pub fn is_io(&self) -> bool {
        self.inner.kind == Kind::Io
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("kind", &self.inner.kind)
            .field("message", &self.inner.message)
            .field("cause", &self.inner.cause)
            .finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.inner.message)?;
        if let Some(cause) = &self.inner.cause {
            write!(f, ": {cause}")?;
        }
        Ok(())
    }
}

/// The cause is printed as part of the one-line message, so `source()` stays
/// `None` and an error chain printer does not repeat it.
impl StdError for Error {}
