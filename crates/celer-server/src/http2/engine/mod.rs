//! The HTTP/2 engine (RFC 9113): frames, HPACK (through `super::hpack`),
//! stream states, flow control both ways and the limits a server keeps
//! against a client, written for one job: serving requests at the least
//! cost per stream (decision 037).
//!
//! The shape is the one `conn` drives: a [`Connection`] that yields each
//! request with a [`SendResponse`], a [`RecvStream`] for its body and a
//! [`SendStream`] for its answer's body. All of a connection's state sits
//! in one [`core::Core`] behind one lock, shared by the connection and the
//! stream handles; handles are used from the connection's own task (the
//! answers `conn` polls) or from a tunnel's, so the lock is almost never
//! contended.
//!
//! - `frame`: the frame head, numbers, and writers of each frame
//! - `core`: the connection's state and what each received frame does
//! - `handles`: the stream handles
//! - `connection`: the handshake and the read/write loop
//!
//! What a request costs here: the frame is read into the connection's
//! buffer, its header block copied once into a shared buffer that the
//! decoded values slice, the request built straight in origin form with
//! `Host` from `:authority`; the answer's head is HPACK-encoded straight
//! into the output buffer, and a body that fits the windows is framed
//! there too. The output leaves in one write per turn of the connection.

mod connection;
mod core;
mod frame;
mod handles;

use std::fmt;

use bytes::Bytes;

pub(crate) use connection::{Builder, Connection};
pub(crate) use handles::{RecvStream, SendResponse, SendStream};

/// An HTTP/2 error code (RFC 9113 §7).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Reason(pub(crate) u32);

impl Reason {
    /// Graceful shutdown, or a stream no longer needed.
    pub(crate) const NO_ERROR: Reason = Reason(0x0);
    /// A protocol error.
    pub(crate) const PROTOCOL_ERROR: Reason = Reason(0x1);
    /// An error of the server's own.
    pub(crate) const INTERNAL_ERROR: Reason = Reason(0x2);
    /// The peer broke flow control.
    pub(crate) const FLOW_CONTROL_ERROR: Reason = Reason(0x3);
    /// A frame on a half-closed stream.
    pub(crate) const STREAM_CLOSED: Reason = Reason(0x5);
    /// A frame of the wrong size.
    pub(crate) const FRAME_SIZE_ERROR: Reason = Reason(0x6);
    /// The stream was refused before any processing.
    pub(crate) const REFUSED_STREAM: Reason = Reason(0x7);
    /// The stream is no longer needed.
    pub(crate) const CANCEL: Reason = Reason(0x8);
    /// The header compression state cannot be kept.
    pub(crate) const COMPRESSION_ERROR: Reason = Reason(0x9);
    /// The peer is generating excessive load.
    pub(crate) const ENHANCE_YOUR_CALM: Reason = Reason(0xb);

    /// The code's name, if it is one RFC 9113 defines (the server never
    /// sends SETTINGS_TIMEOUT, CONNECT_ERROR, INADEQUATE_SECURITY or
    /// HTTP_1_1_REQUIRED, but a client may).
    fn name(self) -> Option<&'static str> {
        const NAMES: [&str; 14] = [
            "NO_ERROR",
            "PROTOCOL_ERROR",
            "INTERNAL_ERROR",
            "FLOW_CONTROL_ERROR",
            "SETTINGS_TIMEOUT",
            "STREAM_CLOSED",
            "FRAME_SIZE_ERROR",
            "REFUSED_STREAM",
            "CANCEL",
            "COMPRESSION_ERROR",
            "CONNECT_ERROR",
            "ENHANCE_YOUR_CALM",
            "INADEQUATE_SECURITY",
            "HTTP_1_1_REQUIRED",
        ];
        NAMES.get(self.0 as usize).copied()
    }
}

impl fmt::Debug for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "Reason({:#x})", self.0),
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// Why a stream or the connection failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Error {
    kind: ErrorKind,
}

/// The kinds of [`Error`].
#[derive(Debug, Clone, PartialEq, Eq)]
enum ErrorKind {
    /// The stream was reset (by the client, or by the engine: `Local`).
    Reset { reason: Reason, local: bool },
    /// The connection ended with a GOAWAY of this reason (sent or received).
    GoAway(Reason),
    /// The transport failed or the client closed it.
    Io(std::io::ErrorKind, String),
    /// A stream handle was used out of turn (a body after its end).
    Misuse(&'static str),
}

impl Error {
    /// The stream was reset.
    pub(super) fn reset(reason: Reason, local: bool) -> Error {
        Error {
            kind: ErrorKind::Reset { reason, local },
        }
    }

    /// The connection is going or gone with `reason`.
    pub(super) fn go_away(reason: Reason) -> Error {
        Error {
            kind: ErrorKind::GoAway(reason),
        }
    }

    /// The transport failed.
    pub(super) fn io(err: &std::io::Error) -> Error {
        Error {
            kind: ErrorKind::Io(err.kind(), err.to_string()),
        }
    }

    /// A handle was used out of turn.
    pub(super) fn misuse(what: &'static str) -> Error {
        Error {
            kind: ErrorKind::Misuse(what),
        }
    }

    /// True when a stream reset is the cause.
    pub(crate) fn is_reset(&self) -> bool {
        matches!(self.kind, ErrorKind::Reset { .. })
    }

    /// True when the transport is the cause.
    pub(crate) fn is_io(&self) -> bool {
        matches!(self.kind, ErrorKind::Io(..))
    }

    /// True when the connection's GOAWAY is the cause.
    pub(crate) fn is_go_away(&self) -> bool {
        matches!(self.kind, ErrorKind::GoAway(_))
    }

    /// The HTTP/2 error code, when there is one.
    pub(crate) fn reason(&self) -> Option<Reason> {
        match self.kind {
            ErrorKind::Reset { reason, .. } | ErrorKind::GoAway(reason) => Some(reason),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ErrorKind::Reset {
                reason,
                local: false,
            } => write!(f, "stream reset by the client: {reason}"),
            ErrorKind::Reset {
                reason,
                local: true,
            } => write!(f, "stream reset: {reason}"),
            ErrorKind::GoAway(reason) => write!(f, "connection closed: {reason}"),
            ErrorKind::Io(_, text) => write!(f, "connection failed: {text}"),
            ErrorKind::Misuse(what) => f.write_str(what),
        }
    }
}

impl std::error::Error for Error {}

impl From<Reason> for Error {
    fn from(reason: Reason) -> Error {
        Error::reset(reason, false)
    }
}

/// The `:protocol` of an extended CONNECT (RFC 8441 §4), in the request's
/// extensions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Protocol(Bytes);

impl Protocol {
    /// The protocol's name (`websocket`).
    pub(crate) fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).unwrap_or("")
    }
}
