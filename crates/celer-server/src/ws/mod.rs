//! WebSocket (RFC 6455) with permessage-deflate (RFC 7692), on a connection
//! handed over after `101 Switching Protocols`.
//!
//! - `handshake`: checking the upgrade request, `Sec-WebSocket-Accept`
//! - `frame`: the sans-IO frame codec (parse, encode, masking, UTF-8, close codes)
//! - `utf8`: incremental UTF-8 validation across frames
//! - `deflate`: permessage-deflate negotiation, compression and inflation
//! - `conn`: the connection driver ([`WebSocket`]): automatic pongs, pings
//!   to a silent peer, the close handshake, the bounded outgoing queue
//!   other threads push to ([`Sender`]), graceful shutdown with 1001
//!
//! The framework's `app.websocket(...)` route and its registry build on
//! this module; it can also be used directly on an [`crate::upgrade::Upgraded`].

mod conn;
pub mod deflate;
pub mod frame;
pub mod handshake;
mod utf8;

use std::time::Duration;

use bytes::Bytes;

use crate::limits;

pub use self::conn::{Prepared, SendError, Sender, Transport, WebSocket};
pub use self::deflate::Deflate;

/// A data message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// A text message; the bytes are UTF-8 (checked on receipt; the sender
    /// of an outgoing one vouches for them).
    Text(Bytes),
    /// A binary message.
    Binary(Bytes),
}

impl Message {
    /// A text message.
    pub fn text(text: impl Into<String>) -> Message {
        Message::Text(Bytes::from(text.into()))
    }

    /// A binary message.
    pub fn binary(data: impl Into<Bytes>) -> Message {
        Message::Binary(data.into())
    }

    /// The payload.
    pub fn as_bytes(&self) -> &Bytes {
        match self {
            Message::Text(b) | Message::Binary(b) => b,
        }
    }

    /// The text of a text message.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Message::Text(b) => std::str::from_utf8(b).ok(),
            Message::Binary(_) => None,
        }
    }
}

/// A close status code (RFC 6455 §7.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CloseCode(pub u16);

impl CloseCode {
    /// 1000: normal closure.
    pub const NORMAL: CloseCode = CloseCode(1000);
    /// 1001: going away (the server shuts down).
    pub const GOING_AWAY: CloseCode = CloseCode(1001);
    /// 1002: protocol error.
    pub const PROTOCOL: CloseCode = CloseCode(1002);
    /// 1003: a data type the endpoint does not accept.
    pub const UNSUPPORTED: CloseCode = CloseCode(1003);
    /// 1007: payload inconsistent with its type (text not UTF-8).
    pub const INVALID_PAYLOAD: CloseCode = CloseCode(1007);
    /// 1008: policy violation (also: a consumer too slow, by policy).
    pub const POLICY: CloseCode = CloseCode(1008);
    /// 1009: message too big.
    pub const TOO_BIG: CloseCode = CloseCode(1009);
    /// 1011: unexpected server condition.
    pub const INTERNAL: CloseCode = CloseCode(1011);
    /// 1013: try again later (also: a consumer too slow, by policy).
    pub const TRY_AGAIN_LATER: CloseCode = CloseCode(1013);

    /// Whether the code may appear in a close frame (§7.4.1, §7.4.2, and
    /// the IANA registry): 1000–1003, 1007–1014, and 3000–4999.
    pub fn is_valid_on_wire(self) -> bool {
        matches!(self.0, 1000..=1003 | 1007..=1014 | 3000..=4999)
    }
}

/// A close frame's code and reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloseFrame {
    /// The status code.
    pub code: CloseCode,
    /// The reason, at most 123 bytes of UTF-8.
    pub reason: String,
}

/// What a connection does when its outgoing queue would pass
/// [`Config::max_queued_bytes`] (a client that reads slower than it is
/// sent to).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlowConsumer {
    /// Closes the connection with this code (1008 or 1013 are usual);
    /// what was queued is dropped and the close frame goes next.
    Close(CloseCode),
    /// Drops the oldest queued messages to make room (for feeds where
    /// only the latest state matters).
    DropOldest,
}

/// Per-connection settings and limits. Every field documents its default.
#[derive(Debug, Clone)]
pub struct Config {
    /// Largest frame payload accepted; larger closes with 1009. Default
    /// [`limits::WS_MAX_FRAME_BYTES`].
    pub max_frame_bytes: u64,
    /// Largest message accepted (after decompression); larger closes with
    /// 1009. Default [`limits::WS_MAX_MESSAGE_BYTES`].
    pub max_message_bytes: usize,
    /// Most bytes queued for a client; past it `slow_consumer` applies.
    /// Default [`limits::WS_MAX_QUEUED_BYTES`].
    pub max_queued_bytes: usize,
    /// What happens at `max_queued_bytes`. Default closes with 1008.
    pub slow_consumer: SlowConsumer,
    /// Silence from the client before the server pings: a ping goes out
    /// after one to two intervals without a frame. Default
    /// [`limits::WS_PING_INTERVAL`].
    pub ping_interval: Duration,
    /// Silence after the server's ping before the peer counts as dead and
    /// the connection is dropped (any frame counts as an answer). Default [`limits::WS_PING_TIMEOUT`].
    pub ping_timeout: Duration,
    /// Time for the client's close frame (and end of stream) after the
    /// server's close. Default [`limits::WS_CLOSE_TIMEOUT`].
    pub close_timeout: Duration,
    /// Offer permessage-deflate when the client asks for it. Default on.
    pub compression: bool,
    /// zlib level 0–9 for outgoing messages. Default 6 (zlib's and Node
    /// `ws`'s default).
    pub compression_level: u32,
    /// Outgoing messages shorter than this are sent uncompressed. Default
    /// 128 bytes: below it deflate's block overhead outweighs the savings.
    pub compress_min_bytes: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_frame_bytes: limits::WS_MAX_FRAME_BYTES,
            max_message_bytes: limits::WS_MAX_MESSAGE_BYTES,
            max_queued_bytes: limits::WS_MAX_QUEUED_BYTES,
            slow_consumer: SlowConsumer::Close(CloseCode::POLICY),
            ping_interval: limits::WS_PING_INTERVAL,
            ping_timeout: limits::WS_PING_TIMEOUT,
            close_timeout: limits::WS_CLOSE_TIMEOUT,
            compression: true,
            compression_level: 6,
            compress_min_bytes: 128,
        }
    }
}
