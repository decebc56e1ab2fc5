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
}

impl Default for ConnConfig {
    fn default() -> Self {
        ConnConfig {
            limits: Limits::default(),
            server_header: ServerHeader::default(),
            hsts: None,
            http2: true,
        }
    }
}
