//! The opening handshake: checking the client's request (RFC 6455 §4.2 on
//! HTTP/1.1, RFC 8441 §5 on HTTP/2) and computing `Sec-WebSocket-Accept`.

use http::{HeaderMap, HeaderValue, Method, StatusCode, Version, header};

/// The GUID every accept key hashes in (RFC 6455 §1.3).
const GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// Why a request is not a WebSocket handshake the server can accept, with
/// the status to answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandshakeError {
    /// 400, 405 or 426 (with `Sec-WebSocket-Version: 13`, §4.4).
    pub status: StatusCode,
    /// What was wrong, for the response body.
    pub reason: &'static str,
}

impl std::fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.reason)
    }
}

impl std::error::Error for HandshakeError {}

/// The reason given when `Sec-WebSocket-Version` is not 13.
const VERSION_REQUIRED: &str = "Sec-WebSocket-Version 13 is required";

impl HandshakeError {
    /// True when the version is what is wrong: the answer then carries
    /// `Sec-WebSocket-Version: 13` (RFC 6455 §4.4).
    pub fn is_version(&self) -> bool {
        self.reason == VERSION_REQUIRED
    }
}

/// A checked handshake request: what the 101 needs.
#[derive(Debug, Clone)]
pub struct Handshake {
    /// The `Sec-WebSocket-Accept` value; `None` on HTTP/2, which has no
    /// key and no accept (RFC 8441 §5).
    pub accept: Option<HeaderValue>,
    /// The subprotocols offered, in the client's order of preference.
    pub protocols: Vec<String>,
    /// The `Sec-WebSocket-Extensions` values, for [`super::deflate::negotiate`].
    pub extensions: Vec<String>,
}

fn bad(reason: &'static str) -> HandshakeError {
    HandshakeError {
        status: StatusCode::BAD_REQUEST,
        reason,
    }
}

fn has_token(headers: &HeaderMap, name: header::HeaderName, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

/// Checks a request against RFC 6455 §4.2.1.
pub fn check(
    method: &Method,
    version: Version,
    headers: &HeaderMap,
) -> Result<Handshake, HandshakeError> {
    if method != Method::GET {
        return Err(HandshakeError {
            status: StatusCode::METHOD_NOT_ALLOWED,
            reason: "a WebSocket handshake is a GET",
        });
    }
    if version < Version::HTTP_11 {
        return Err(bad("a WebSocket handshake needs HTTP/1.1"));
    }
    if !has_token(headers, header::UPGRADE, "websocket") {
        return Err(HandshakeError {
            status: StatusCode::UPGRADE_REQUIRED,
            reason: "this resource is a WebSocket: Upgrade: websocket is required",
        });
    }
    if !has_token(headers, header::CONNECTION, "upgrade") {
        return Err(bad("Connection: upgrade is required"));
    }
    let mut keys = headers.get_all(header::SEC_WEBSOCKET_KEY).iter();
    let key = match (keys.next(), keys.next()) {
        (Some(k), None) => k.as_bytes(),
        _ => return Err(bad("exactly one Sec-WebSocket-Key is required")),
    };
    // §4.1: the key is 16 random bytes, base64-encoded: 24 characters.
    if key.len() != 24
        || !key[..22]
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
        || &key[22..] != b"=="
    {
        return Err(bad("Sec-WebSocket-Key is not 16 bytes in base64"));
    }
    if headers
        .get(header::SEC_WEBSOCKET_VERSION)
        .map(HeaderValue::as_bytes)
        != Some(b"13")
    {
        return Err(HandshakeError {
            status: StatusCode::UPGRADE_REQUIRED,
            reason: VERSION_REQUIRED,
        });
    }
    Ok(offers(headers, Some(accept_key(key))))
}

/// Checks an HTTP/2 request against RFC 8441 §4 and §5: an extended
/// CONNECT whose `:protocol` (`protocol`) is `websocket`, with
/// `Sec-WebSocket-Version: 13`; no `Sec-WebSocket-Key` is needed and
/// none is answered. A wrong version is answered 400 with
/// `Sec-WebSocket-Version: 13` (RFC 6455 §4.4): 426 would need an
/// `Upgrade` field (RFC 9110 §15.5.22), which HTTP/2 forbids (RFC 9113
/// §8.2.2).
pub fn check_extended_connect(
    method: &Method,
    protocol: Option<&str>,
    headers: &HeaderMap,
) -> Result<Handshake, HandshakeError> {
    if method != Method::CONNECT || protocol.is_none() {
        return Err(bad(
            "over HTTP/2 a WebSocket opens with an extended CONNECT (RFC 8441)",
        ));
    }
    // The protocol is an upgrade token (RFC 8441 §4), compared as one.
    if !protocol.is_some_and(|p| p.eq_ignore_ascii_case("websocket")) {
        return Err(bad("this resource speaks the websocket protocol only"));
    }
    if headers
        .get(header::SEC_WEBSOCKET_VERSION)
        .map(HeaderValue::as_bytes)
        != Some(b"13")
    {
        return Err(bad(VERSION_REQUIRED));
    }
    Ok(offers(headers, None))
}

/// The subprotocols and extensions a handshake offers.
fn offers(headers: &HeaderMap, accept: Option<HeaderValue>) -> Handshake {
    let list = |name| {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty())
            .collect::<Vec<_>>()
    };
    Handshake {
        accept,
        protocols: list(header::SEC_WEBSOCKET_PROTOCOL),
        extensions: headers
            .get_all(header::SEC_WEBSOCKET_EXTENSIONS)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(str::to_owned)
            .collect(),
    }
}

/// `Sec-WebSocket-Accept` for a key: base64(SHA-1(key + GUID)) (§4.2.2).
pub fn accept_key(key: &[u8]) -> HeaderValue {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY);
    ctx.update(key);
    ctx.update(GUID);
    let digest = ctx.finish();
    HeaderValue::from_str(&base64(digest.as_ref())).expect("base64 is a valid header value")
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | (u32::from(b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rfc_example_key() {
        // RFC 6455 §1.3.
        assert_eq!(
            accept_key(b"dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
        assert_eq!(base64(b"ab"), "YWI=");
        assert_eq!(base64(b"a"), "YQ==");
    }

    #[test]
    fn requests_are_checked() {
        let mut h = HeaderMap::new();
        h.insert(header::UPGRADE, HeaderValue::from_static("WebSocket"));
        h.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, Upgrade"),
        );
        h.insert(
            header::SEC_WEBSOCKET_KEY,
            HeaderValue::from_static("dGhlIHNhbXBsZSBub25jZQ=="),
        );
        h.insert(
            header::SEC_WEBSOCKET_VERSION,
            HeaderValue::from_static("13"),
        );
        h.insert(
            header::SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_static("chat, superchat"),
        );
        let ok = check(&Method::GET, Version::HTTP_11, &h).unwrap();
        assert_eq!(ok.protocols, ["chat", "superchat"]);
        assert_eq!(
            check(&Method::POST, Version::HTTP_11, &h)
                .unwrap_err()
                .status,
            405
        );
        let mut v8 = h.clone();
        v8.insert(header::SEC_WEBSOCKET_VERSION, HeaderValue::from_static("8"));
        assert_eq!(
            check(&Method::GET, Version::HTTP_11, &v8)
                .unwrap_err()
                .status,
            426
        );
        let mut short = h.clone();
        short.insert(
            header::SEC_WEBSOCKET_KEY,
            HeaderValue::from_static("c2hvcnQ="),
        );
        assert_eq!(
            check(&Method::GET, Version::HTTP_11, &short)
                .unwrap_err()
                .status,
            400
        );
        assert_eq!(
            check(&Method::GET, Version::HTTP_10, &h)
                .unwrap_err()
                .status,
            400
        );
        assert!(ok.accept.is_some());
    }

    #[test]
    fn extended_connect_requests_are_checked() {
        let mut h = HeaderMap::new();
        h.insert(
            header::SEC_WEBSOCKET_VERSION,
            HeaderValue::from_static("13"),
        );
        h.insert(
            header::SEC_WEBSOCKET_EXTENSIONS,
            HeaderValue::from_static("permessage-deflate"),
        );
        let ok = check_extended_connect(&Method::CONNECT, Some("websocket"), &h).unwrap();
        assert_eq!(ok.accept, None);
        assert_eq!(ok.extensions, ["permessage-deflate"]);
        let refused = |method: &Method, protocol, h: &HeaderMap| {
            check_extended_connect(method, protocol, h).unwrap_err()
        };
        assert_eq!(refused(&Method::GET, None, &h).status, 400);
        assert_eq!(refused(&Method::CONNECT, None, &h).status, 400);
        assert_eq!(
            refused(&Method::CONNECT, Some("webtransport"), &h).status,
            400
        );
        let mut v8 = h.clone();
        v8.insert(header::SEC_WEBSOCKET_VERSION, HeaderValue::from_static("8"));
        let e = refused(&Method::CONNECT, Some("websocket"), &v8);
        assert_eq!(e.status, 400);
        assert!(e.is_version());
    }
}
