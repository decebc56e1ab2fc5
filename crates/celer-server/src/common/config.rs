//! [`ConnConfig`]: the settings every connection of a server shares,
//! whatever protocol it speaks.

use http::header::HeaderValue;

use crate::limits::Limits;

/// The `Server` header the engine adds, if any.
pub(crate) type ServerHeader = Option<HeaderValue>;

/// Settings shared by every connection of a server, whatever it speaks.
#[derive(Debug, Clone)]
pub struct ConnConfig {
    /// The limits enforced on each connection.
    pub limits: Limits,
    /// The `Server` header value, or `None` to send none.
    pub server_header: Option<HeaderValue>,
    /// The `Strict-Transport-Security` value added to every response, or
    /// `None` (the default) to add none.
    pub hsts: Option<HeaderValue>,
    /// Serve a plain connection that opens with the HTTP/2 preface as
    /// HTTP/2 (prior knowledge, RFC 9113 §3.3). Default is true.
    pub http2: bool,
    /// Advertise `SETTINGS_ENABLE_CONNECT_PROTOCOL = 1` on HTTP/2 and accept
    /// extended CONNECT requests (RFC 8441 §3, §4): WebSocket over HTTP/2.
    /// Browsers read the setting as a promise that WebSockets work here,
    /// so it is on only when the service serves some (the framework sets
    /// it when an app has a WebSocket route). Default is false: a
    /// `:protocol` is then a malformed request (RFC 8441 §3, RFC 9113
    /// §8.1.1), reset with `PROTOCOL_ERROR`.
    pub extended_connect: bool,
}

impl Default for ConnConfig {
    fn default() -> Self {
        ConnConfig {
            limits: Limits::default(),
            server_header: ServerHeader::default(),
            hsts: None,
            http2: true,
            extended_connect: false,
        }
    }
}
