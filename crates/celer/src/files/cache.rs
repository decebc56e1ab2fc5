//! Cache-Control for served files: [`CacheControl`].

use std::time::Duration;

use http::HeaderValue;

/// The `max-age` of fingerprinted names when they are marked immutable: one
/// year, the longest RFC 9111 caches are expected to honour.
const IMMUTABLE_MAX_AGE: u64 = 365 * 24 * 60 * 60;

/// The Cache-Control header sent with files (and their 304s).
///
/// ```
/// use std::time::Duration;
/// use celer::files::CacheControl;
///
/// let cache = CacheControl::new()
///     .max_age(Duration::from_secs(600))
///     .public(true)
///     .immutable_fingerprinted(true);
/// # let _ = cache;
/// ```
///
/// A name is *fingerprinted* when one of its dot- or dash-separated parts
/// before the extension is 8 to 64 lowercase hex digits mixing digits and
/// letters, as bundlers write them: `app.3f2a9c1b.js`,
/// `main-0d4e5f6a7b8c.css`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CacheControl {
    max_age: Option<u64>,
    public: bool,
    immutable: bool,
}

impl CacheControl {
    /// No Cache-Control header at all (caches use heuristics).
    pub fn new() -> CacheControl {
        CacheControl::default()
    }

    /// Sends `max-age` with this many seconds. Default is none.
    pub fn max_age(mut self, age: Duration) -> CacheControl {
        self.max_age = Some(age.as_secs());
        self
    }

    /// Adds `public`: shared caches may store responses even to requests
    /// that carried credentials. Default is false.
    pub fn public(mut self, yes: bool) -> CacheControl {
        self.public = yes;
        self
    }

    /// Sends `max-age=31536000, immutable` for fingerprinted names, whose
    /// content never changes under the same name. Default is false.
    pub fn immutable_fingerprinted(mut self, yes: bool) -> CacheControl {
        self.immutable = yes;
        self
    }

    /// The header values for ordinary and fingerprinted names.
    pub(crate) fn compile(&self) -> Compiled {
        let public = if self.public { "public" } else { "" };
        let value = |age: Option<u64>, immutable: bool| {
            let mut parts: Vec<String> = Vec::new();
            if !public.is_empty() {
                parts.push(public.to_owned());
            }
            if let Some(age) = age {
                parts.push(format!("max-age={age}"));
            }
            if immutable {
                parts.push("immutable".to_owned());
            }
            (!parts.is_empty()).then(|| {
                HeaderValue::try_from(parts.join(", ")).expect("a valid Cache-Control value")
            })
        };
        let plain = value(self.max_age, false);
        let fingerprinted = if self.immutable {
            value(Some(IMMUTABLE_MAX_AGE), true)
        } else {
            plain.clone()
        };
        Compiled {
            plain,
            fingerprinted,
        }
    }
}

/// Cache-Control values ready to send.
#[derive(Debug, Clone, Default)]
pub(crate) struct Compiled {
    plain: Option<HeaderValue>,
    fingerprinted: Option<HeaderValue>,
}

impl Compiled {
    /// The value for a file named `name` (its last path segment).
    pub(crate) fn for_name(&self, name: &[u8]) -> Option<&HeaderValue> {
        if self.fingerprinted != self.plain && is_fingerprinted(name) {
            self.fingerprinted.as_ref()
        } else {
            self.plain.as_ref()
        }
    }
}

/// True when a part of the name before its extension looks like a content
/// hash (see [`CacheControl`]).
pub(crate) fn is_fingerprinted(name: &[u8]) -> bool {
    let stem = match name.iter().rposition(|&b| b == b'.') {
        Some(dot) => &name[..dot],
        None => return false,
    };
    stem.split(|&b| b == b'.' || b == b'-').any(|part| {
        (8..=64).contains(&part.len())
            && part
                .iter()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
            && part.iter().any(u8::is_ascii_digit)
            && part.iter().any(u8::is_ascii_alphabetic)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints() {
        for yes in [
            "app.3f2a9c1b.js",
            "main-0d4e5f6a7b8c.css",
            "a.b.1234abcd.min.js",
        ] {
            assert!(is_fingerprinted(yes.as_bytes()), "{yes}");
        }
        for no in [
            "app.js",
            "20231122.log",
            "deadbeef.js",
            "3f2a9c1b",
            "app.3F2A9C1B.js",
            "report-2024.pdf",
            "a.3f2a9c1.js",
        ] {
            assert!(!is_fingerprinted(no.as_bytes()), "{no}");
        }
    }

    #[test]
    fn values() {
        let c = CacheControl::new().compile();
        assert_eq!(c.for_name(b"a.js"), None);
        let c = CacheControl::new()
            .max_age(Duration::from_secs(60))
            .public(true)
            .compile();
        assert_eq!(c.for_name(b"a.js").unwrap(), "public, max-age=60");
        assert_eq!(c.for_name(b"a.3f2a9c1b.js").unwrap(), "public, max-age=60");
        let c = CacheControl::new()
            .max_age(Duration::from_secs(60))
            .immutable_fingerprinted(true)
            .compile();
        assert_eq!(c.for_name(b"a.js").unwrap(), "max-age=60");
        assert_eq!(
            c.for_name(b"a.3f2a9c1b.js").unwrap(),
            "max-age=31536000, immutable"
        );
        let c = CacheControl::new().immutable_fingerprinted(true).compile();
        assert_eq!(c.for_name(b"a.js"), None);
    }
}
