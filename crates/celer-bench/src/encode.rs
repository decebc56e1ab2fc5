//! Request serialisation: every request is encoded once, before the run.

use crate::Error;
use crate::target::{Origin, Target};

/// What every request carries besides its path.
#[derive(Debug, Clone)]
pub(crate) struct RequestParts {
    /// Method token, e.g. `GET`.
    pub(crate) method: String,
    /// Header fields as `(name, value)`, validated.
    pub(crate) headers: Vec<(String, String)>,
    /// Body bytes, possibly empty.
    pub(crate) body: Vec<u8>,
    /// Whether to ask the server to close after each response.
    pub(crate) close: bool,
}

/// A request ready to be written.
#[derive(Debug, Clone)]
pub(crate) struct Encoded {
    /// The whole request: head and body.
    pub(crate) bytes: Vec<u8>,
    /// Whether the method is HEAD (the response then has no body).
    pub(crate) is_head: bool,
}

impl RequestParts {
    /// Validates the method and `Name: value` header arguments.
    pub(crate) fn new(
        method: &str,
        headers: &[String],
        body: Vec<u8>,
        close: bool,
    ) -> Result<RequestParts, Error> {
        if method.is_empty() || !method.bytes().all(is_token_byte) {
            return Err(Error::usage(format!("invalid method '{method}'")));
        }
        let mut parsed = Vec::with_capacity(headers.len());
        for header in headers {
            let (name, value) = header.split_once(':').ok_or_else(|| {
                Error::usage(format!("invalid header '{header}': expected 'Name: value'"))
            })?;
            let value = value.trim();
            let value_ok = value
                .bytes()
                .all(|b| b == b'\t' || (b >= 0x20 && b != 0x7f));
            if name.is_empty() || !name.bytes().all(is_token_byte) || !value_ok {
                return Err(Error::usage(format!("invalid header '{header}'")));
            }
            parsed.push((name.to_string(), value.to_string()));
        }
        Ok(RequestParts {
            method: method.to_string(),
            headers: parsed,
            body,
            close,
        })
    }

    fn has_header(&self, name: &str) -> bool {
        self.headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case(name))
    }

    /// Encodes the request for one target (RFC 9112 section 3).
    pub(crate) fn encode(&self, origin: &Origin, target: &Target) -> Encoded {
        let mut head = format!("{} {} HTTP/1.1\r\n", self.method, target.path);
        if !self.has_header("host") {
            head.push_str(&format!("Host: {}\r\n", origin.authority));
        }
        for (name, value) in &self.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        let needs_length = !self.body.is_empty() || matches!(self.method.as_str(), "POST" | "PUT");
        if needs_length
            && !self.has_header("content-length")
            && !self.has_header("transfer-encoding")
        {
            head.push_str(&format!("Content-Length: {}\r\n", self.body.len()));
        }
        if self.close && !self.has_header("connection") {
            head.push_str("Connection: close\r\n");
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(&self.body);
        Encoded {
            bytes,
            is_head: self.method.eq_ignore_ascii_case("HEAD"),
        }
    }
}

/// `tchar` of RFC 9110 section 5.6.2.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::parse_url;

    #[test]
    fn request_is_encoded_with_host_length_and_close() {
        let (origin, target) = parse_url("http://h:81/p", 1).unwrap();
        let parts =
            RequestParts::new("POST", &["X-A: 1".to_string()], b"hi".to_vec(), true).unwrap();
        let encoded = parts.encode(&origin, &target);
        assert_eq!(
            encoded.bytes,
            b"POST /p HTTP/1.1\r\nHost: h:81\r\nX-A: 1\r\nContent-Length: 2\r\n\
              Connection: close\r\n\r\nhi"
        );
        assert!(!encoded.is_head);
    }

    #[test]
    fn user_host_header_wins() {
        let (origin, target) = parse_url("http://h/", 1).unwrap();
        let parts = RequestParts::new("HEAD", &["host: other".to_string()], vec![], false).unwrap();
        let encoded = parts.encode(&origin, &target);
        assert_eq!(encoded.bytes, b"HEAD / HTTP/1.1\r\nhost: other\r\n\r\n");
        assert!(encoded.is_head);
    }

    #[test]
    fn invalid_headers_and_methods_are_rejected() {
        assert!(RequestParts::new("GE T", &[], vec![], false).is_err());
        assert!(RequestParts::new("GET", &["NoColon".to_string()], vec![], false).is_err());
        assert!(RequestParts::new("GET", &["A: b\r\nc".to_string()], vec![], false).is_err());
    }
}
