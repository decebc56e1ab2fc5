//! [`TlsInfo`]: what a TLS handshake agreed, handed to the service with the
//! connection's other facts ([`ConnInfo`](crate::ConnInfo)).

/// A TLS protocol version (RFC 8446, RFC 5246).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TlsVersion {
    /// TLS 1.2 (RFC 5246).
    Tls12,
    /// TLS 1.3 (RFC 8446).
    Tls13,
}

impl TlsVersion {
    /// The version's name as OpenSSL and nginx spell it (`TLSv1.3`).
    pub fn as_str(self) -> &'static str {
        match self {
            TlsVersion::Tls12 => "TLSv1.2",
            TlsVersion::Tls13 => "TLSv1.3",
        }
    }
}

impl std::fmt::Display for TlsVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the TLS handshake of a connection agreed: version, cipher suite,
/// the ALPN protocol (RFC 7301) and the server name the client asked for
/// (SNI, RFC 6066 §3). Built once per connection, after the handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsInfo {
    version: TlsVersion,
    cipher_suite: &'static str,
    alpn: Option<Box<[u8]>>,
    server_name: Option<Box<str>>,
}

impl TlsInfo {
    /// The facts of a handshake: for the engine, and for tests that give a
    /// request a TLS connection without one.
    ///
    /// ```
    /// use celer_server::{TlsInfo, TlsVersion};
    /// let info = TlsInfo::new(TlsVersion::Tls13, Some(b"h2"), Some("example.com"));
    /// assert_eq!(info.alpn(), Some(&b"h2"[..]));
    /// assert_eq!(info.server_name(), Some("example.com"));
    /// ```
    pub fn new(version: TlsVersion, alpn: Option<&[u8]>, server_name: Option<&str>) -> TlsInfo {
        TlsInfo {
            version,
            cipher_suite: "",
            alpn: alpn.map(Box::from),
            server_name: server_name.map(Box::from),
        }
    }

    /// Sets the cipher suite's name (rustls's spelling of the IANA name,
    /// e.g. `TLS13_AES_128_GCM_SHA256`).
    pub fn with_cipher_suite(mut self, name: &'static str) -> TlsInfo {
        self.cipher_suite = name;
        self
    }

    /// The negotiated protocol version.
    pub fn version(&self) -> TlsVersion {
        self.version
    }

    /// The negotiated cipher suite's name, e.g. `TLS13_AES_128_GCM_SHA256`;
    /// empty when unknown.
    pub fn cipher_suite(&self) -> &'static str {
        self.cipher_suite
    }

    /// The protocol agreed through ALPN (RFC 7301): `b"h2"` or
    /// `b"http/1.1"`; `None` when the client offered none (the connection
    /// then speaks HTTP/1.1).
    pub fn alpn(&self) -> Option<&[u8]> {
        self.alpn.as_deref()
    }

    /// The host name the client sent in its SNI extension (RFC 6066 §3);
    /// `None` when it sent none (for example when connecting to
    /// an IP address).
    pub fn server_name(&self) -> Option<&str> {
        self.server_name.as_deref()
    }
}
