//! The opening handshake of RFC 6455 section 4.1, client side: the upgrade
//! request and the checks on the server's 101 response.

use std::mem::MaybeUninit;

use crate::parse::MAX_HEADERS;

/// The GUID every Sec-WebSocket-Accept is derived with (RFC 6455 section 1.3).
const GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// What the client asks for besides the path.
#[derive(Debug, Clone)]
pub(crate) struct Offer {
    /// Path and query of the WebSocket URL.
    pub(crate) path: String,
    /// The `Host` value.
    pub(crate) authority: String,
    /// Extra header fields (`-H`).
    pub(crate) headers: Vec<(String, String)>,
    /// Sec-WebSocket-Protocol to ask for.
    pub(crate) subprotocol: Option<String>,
    /// Offer permessage-deflate.
    pub(crate) deflate: bool,
}

/// What the server agreed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Agreed {
    /// permessage-deflate is on.
    pub(crate) deflate: bool,
    /// The client must reset its compressor after every message (RFC 7692 section 7.1.1.2).
    pub(crate) client_no_context_takeover: bool,
    /// The server resets its compressor after every message (RFC 7692 section 7.1.1.1).
    pub(crate) server_no_context_takeover: bool,
}

/// Why a handshake failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The response is not HTTP/1.1.
    Malformed,
    /// A status other than 101.
    Status(u16),
    /// 101 without the Upgrade/Connection/Accept RFC 6455 section 4.1 requires.
    Headers,
    /// An extension or extension parameter the client did not offer.
    Extension,
}

/// A random Sec-WebSocket-Key: 16 random bytes, base64 (section 4.1).
pub(crate) fn new_key() -> String {
    let mut nonce = [0u8; 16];
    let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut nonce);
    base64(&nonce)
}

/// The Sec-WebSocket-Accept value for `key` (section 4.2.2, item 5.4).
pub(crate) fn accept_for(key: &str) -> String {
    let mut context = ring::digest::Context::new(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY);
    context.update(key.as_bytes());
    context.update(GUID.as_bytes());
    base64(context.finish().as_ref())
}

impl Offer {
    /// The upgrade request with `key` (section 4.1, client requirements 1 to 12).
    pub(crate) fn encode(&self, key: &str) -> Vec<u8> {
        let has = |name: &str| {
            self.headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case(name))
        };
        let mut head = format!("GET {} HTTP/1.1\r\n", self.path);
        if !has("host") {
            head.push_str(&format!("Host: {}\r\n", self.authority));
        }
        head.push_str("Upgrade: websocket\r\nConnection: Upgrade\r\n");
        head.push_str(&format!(
            "Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
        ));
        if let Some(protocol) = &self.subprotocol {
            head.push_str(&format!("Sec-WebSocket-Protocol: {protocol}\r\n"));
        }
        if self.deflate {
            // RFC 7692 section 7.1: no window-bits parameters are offered, so
            // the server may not limit the client's window (section 7.1.2.2)
            // and the 32 KiB window of the compressor is always allowed.
            head.push_str("Sec-WebSocket-Extensions: permessage-deflate\r\n");
        }
        for (name, value) in &self.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        head.into_bytes()
    }
}

/// Checks the response head at the start of `buf`; `Ok(None)` while incomplete,
/// else the agreement and the head's length.
pub(crate) fn check_response(
    buf: &[u8],
    key: &str,
    offer: &Offer,
) -> Result<Option<(Agreed, usize)>, Refused> {
    let mut headers = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut res = httparse::Response::new(&mut []);
    let len = match httparse::ParserConfig::default().parse_response_with_uninit_headers(
        &mut res,
        buf,
        &mut headers,
    ) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err(Refused::Malformed),
    };
    let status = res.code.unwrap_or(0);
    if status != 101 {
        return Err(Refused::Status(status));
    }
    let value = |name: &str| {
        res.headers
            .iter()
            .filter(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value).into_owned())
            .collect::<Vec<_>>()
            .join(",")
    };
    let has_token = |list: &str, token: &str| {
        list.split(',')
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    };
    // Section 4.1, the client's checks of the response, items 2 to 4.
    if !has_token(&value("upgrade"), "websocket")
        || !has_token(&value("connection"), "upgrade")
        || value("sec-websocket-accept").trim() != accept_for(key)
    {
        return Err(Refused::Headers);
    }
    // Item 6: a subprotocol the client did not ask for fails the handshake.
    let protocol = value("sec-websocket-protocol");
    if !protocol.is_empty() && offer.subprotocol.as_deref() != Some(protocol.trim()) {
        return Err(Refused::Headers);
    }
    let agreed = extensions(&value("sec-websocket-extensions"), offer.deflate)?;
    Ok(Some((agreed, len)))
}

/// Reads the server's Sec-WebSocket-Extensions (item 5; RFC 7692 section 7.1).
fn extensions(list: &str, offered: bool) -> Result<Agreed, Refused> {
    let mut agreed = Agreed::default();
    for extension in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let mut params = extension.split(';').map(str::trim);
        if !params
            .next()
            .is_some_and(|name| name.eq_ignore_ascii_case("permessage-deflate"))
            || !offered
            || agreed.deflate
        {
            return Err(Refused::Extension);
        }
        agreed.deflate = true;
        for param in params {
            let (name, value) = match param.split_once('=') {
                Some((name, value)) => (name.trim(), Some(value.trim().trim_matches('"'))),
                None => (param, None),
            };
            match (name.to_ascii_lowercase().as_str(), value) {
                ("client_no_context_takeover", None) => agreed.client_no_context_takeover = true,
                ("server_no_context_takeover", None) => agreed.server_no_context_takeover = true,
                // A smaller server window is always readable with a 32 KiB one.
                ("server_max_window_bits", Some(bits))
                    if bits.parse::<u8>().is_ok_and(|b| (8..=15).contains(&b)) => {}
                // Section 7.1.2.2: not offered, so the server must not send it.
                _ => return Err(Refused::Extension),
            }
        }
    }
    Ok(agreed)
}

/// Standard base64 with padding (RFC 4648 section 4).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (idx, &b)| n | u32::from(b) << (16 - 8 * idx));
        for idx in 0..4 {
            if idx <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * idx) & 63) as usize]));
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

    fn offer(deflate: bool) -> Offer {
        Offer {
            path: "/chat".to_string(),
            authority: "server.example.com".to_string(),
            headers: Vec::new(),
            subprotocol: None,
            deflate,
        }
    }

    #[test]
    fn accept_matches_the_rfc_example() {
        // RFC 6455 section 1.3.
        assert_eq!(
            accept_for("dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(new_key().len(), 24);
    }

    #[test]
    fn request_carries_the_required_fields() {
        let text = String::from_utf8(offer(true).encode("KEY")).unwrap();
        assert!(text.starts_with("GET /chat HTTP/1.1\r\nHost: server.example.com\r\n"));
        for field in [
            "Upgrade: websocket",
            "Connection: Upgrade",
            "Sec-WebSocket-Key: KEY",
            "Sec-WebSocket-Version: 13",
            "Sec-WebSocket-Extensions: permessage-deflate",
        ] {
            assert!(text.contains(field), "{field}");
        }
    }

    #[test]
    fn responses_are_checked() {
        let key = "dGhlIHNhbXBsZSBub25jZQ==";
        let good = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
                    Connection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n";
        let ok = format!("{good}\r\n");
        assert_eq!(
            check_response(ok.as_bytes(), key, &offer(false)),
            Ok(Some((Agreed::default(), ok.len())))
        );
        assert_eq!(
            check_response(good.as_bytes(), key, &offer(false)),
            Ok(None)
        );
        let deflate = format!(
            "{good}Sec-WebSocket-Extensions: permessage-deflate; \
             client_no_context_takeover; server_max_window_bits=10\r\n\r\n"
        );
        let (agreed, _) = check_response(deflate.as_bytes(), key, &offer(true))
            .unwrap()
            .unwrap();
        assert!(agreed.deflate && agreed.client_no_context_takeover);
        assert_eq!(
            check_response(deflate.as_bytes(), key, &offer(false)),
            Err(Refused::Extension)
        );
        let bits = format!(
            "{good}Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits=9\r\n\r\n"
        );
        assert_eq!(
            check_response(bits.as_bytes(), key, &offer(true)),
            Err(Refused::Extension)
        );
        let wrong = ok.replace("s3pP", "AAAA");
        assert_eq!(
            check_response(wrong.as_bytes(), key, &offer(false)),
            Err(Refused::Headers)
        );
        // Section 4.1, item 6: only the subprotocol asked for may come back.
        let chat = ok.replace("\r\n\r\n", "\r\nSec-WebSocket-Protocol: chat\r\n\r\n");
        assert_eq!(
            check_response(chat.as_bytes(), key, &offer(false)),
            Err(Refused::Headers)
        );
        let asked = Offer {
            subprotocol: Some("chat".to_string()),
            ..offer(false)
        };
        assert!(matches!(
            check_response(chat.as_bytes(), key, &asked),
            Ok(Some(_))
        ));
        assert!(
            String::from_utf8(asked.encode("K"))
                .unwrap()
                .contains("Sec-WebSocket-Protocol: chat\r\n")
        );
        let denied = b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(
            check_response(denied, key, &offer(false)),
            Err(Refused::Status(403))
        );
    }
}
