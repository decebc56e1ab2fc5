//! `Set-Cookie` (RFC 6265bis §4.1): the [`Cookie`] builder, its attributes
//! and the checks made when it is set.

use std::fmt::{self, Write as _};
use std::time::{Duration, SystemTime};

use http::HeaderValue;

use super::{MAX_ATTRIBUTE_VALUE_BYTES, MAX_MAX_AGE, MAX_NAME_VALUE_BYTES};

/// The `SameSite` attribute (RFC 6265bis §4.1.2.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SameSite {
    /// Sent on same-site requests only.
    Strict,
    /// Sent on same-site requests and top-level cross-site navigations
    /// with a safe method.
    Lax,
    /// Sent on every request; needs `Secure` (refused at set time
    /// without it, as browsers drop such a cookie).
    None,
}

impl SameSite {
    fn as_str(self) -> &'static str {
        match self {
            SameSite::Strict => "Strict",
            SameSite::Lax => "Lax",
            SameSite::None => "None",
        }
    }
}

/// A cookie to set: a name, a value and its attributes.
///
/// Built with chained setters and checked by [`Cookie::encode`] (which
/// [`CookieJar::set`](super::CookieJar::set) calls): the name must be an
/// RFC 9110 token, the value `cookie-octet`s (RFC 6265bis §4.1.1; no
/// space, `"`, `,`, `;` or `\`), name and value together at most
/// [`MAX_NAME_VALUE_BYTES`], and the prefixes hold (§4.1.3):
/// `__Secure-` needs `Secure`; `__Host-` needs `Secure`, `Path=/` and no
/// `Domain`. `SameSite=None` and `Partitioned` need `Secure` too.
///
/// ```
/// use celer::cookie::{Cookie, SameSite};
/// use std::time::Duration;
///
/// let cookie = Cookie::new("__Host-theme", "dark")
///     .secure(true)
///     .http_only(true)
///     .path("/")
///     .same_site(SameSite::Lax)
///     .max_age(Duration::from_secs(3600));
/// assert_eq!(
///     cookie.encode().unwrap(),
///     "__Host-theme=dark; Max-Age=3600; Path=/; Secure; HttpOnly; SameSite=Lax"
/// );
///
/// let err = Cookie::new("__Host-theme", "dark").path("/").encode().unwrap_err();
/// assert_eq!(err.to_string(), "cookie `__Host-theme`: the __Host- prefix needs Secure");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cookie {
    name: String,
    value: String,
    max_age: Option<Duration>,
    expires: Option<SystemTime>,
    path: Option<String>,
    domain: Option<String>,
    secure: bool,
    http_only: bool,
    same_site: Option<SameSite>,
    partitioned: bool,
}

impl Cookie {
    /// A session cookie (no `Max-Age`, no `Expires`) without attributes.
    pub fn new(name: impl Into<String>, value: impl Into<String>) -> Cookie {
        Cookie {
            name: name.into(),
            value: value.into(),
            max_age: None,
            expires: None,
            path: None,
            domain: None,
            secure: false,
            http_only: false,
            same_site: None,
            partitioned: false,
        }
    }

    /// A cookie that removes `name` from the client: an empty value,
    /// `Max-Age=0` and an `Expires` in the past (RFC 6265bis §5.7.2). Its
    /// `Path` and `Domain` must be those the cookie was set with; for a
    /// prefixed name, give it `Secure` (and `Path=/` for `__Host-`).
    ///
    /// ```
    /// let gone = celer::cookie::Cookie::removal("theme").path("/");
    /// assert_eq!(
    ///     gone.encode().unwrap(),
    ///     "theme=; Max-Age=0; Expires=Thu, 01 Jan 1970 00:00:00 GMT; Path=/"
    /// );
    /// ```
    pub fn removal(name: impl Into<String>) -> Cookie {
        let mut cookie = Cookie::new(name, "");
        cookie.max_age = Some(Duration::ZERO);
        cookie.expires = Some(SystemTime::UNIX_EPOCH);
        cookie
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The value, as it will be sent.
    pub fn value(&self) -> &str {
        &self.value
    }

    pub(crate) fn set_value(&mut self, value: String) {
        self.value = value;
    }

    /// The name and value, moved out.
    pub(crate) fn into_name_value(self) -> (String, String) {
        (self.name, self.value)
    }

    /// Whether this cookie removes its name (`Max-Age=0`).
    pub(crate) fn is_removal(&self) -> bool {
        self.max_age == Some(Duration::ZERO)
    }

    /// `Max-Age` (§4.1.2.2), in whole seconds; values over
    /// [`MAX_MAX_AGE`] (400 days, the cap of §5.6.2) are sent as the cap.
    pub fn max_age(mut self, max_age: Duration) -> Cookie {
        self.max_age = Some(max_age);
        self
    }

    /// `Expires` (§4.1.2.1) as an HTTP date. When `Max-Age` is set too,
    /// user agents follow `Max-Age`.
    pub fn expires(mut self, at: SystemTime) -> Cookie {
        self.expires = Some(at);
        self
    }

    /// `Path` (§4.1.2.4).
    pub fn path(mut self, path: impl Into<String>) -> Cookie {
        self.path = Some(path.into());
        self
    }

    /// `Domain` (§4.1.2.3). Without it the cookie is host-only, which is
    /// the safer default.
    pub fn domain(mut self, domain: impl Into<String>) -> Cookie {
        self.domain = Some(domain.into());
        self
    }

    /// `Secure` (§4.1.2.5): sent over secure channels only.
    pub fn secure(mut self, secure: bool) -> Cookie {
        self.secure = secure;
        self
    }

    /// `HttpOnly` (§4.1.2.6): hidden from scripts.
    pub fn http_only(mut self, http_only: bool) -> Cookie {
        self.http_only = http_only;
        self
    }

    /// `SameSite` (§4.1.2.7).
    pub fn same_site(mut self, same_site: SameSite) -> Cookie {
        self.same_site = Some(same_site);
        self
    }

    /// `Partitioned` (CHIPS, draft-cutler-httpbis-partitioned-cookies):
    /// kept per top-level site; needs `Secure`.
    pub fn partitioned(mut self, partitioned: bool) -> Cookie {
        self.partitioned = partitioned;
        self
    }

    /// The `Set-Cookie` field value, after the checks listed on
    /// [`Cookie`].
    pub fn encode(&self) -> Result<HeaderValue, CookieError> {
        self.check()?;
        let mut out = String::with_capacity(self.name.len() + self.value.len() + 64);
        out.push_str(&self.name);
        out.push('=');
        out.push_str(&self.value);
        if let Some(max_age) = self.max_age {
            let secs = max_age.as_secs().min(MAX_MAX_AGE.as_secs());
            let _ = write!(out, "; Max-Age={secs}");
        }
        if let Some(at) = self.expires {
            let _ = write!(out, "; Expires={}", httpdate::fmt_http_date(at));
        }
        if let Some(domain) = &self.domain {
            let _ = write!(out, "; Domain={domain}");
        }
        if let Some(path) = &self.path {
            let _ = write!(out, "; Path={path}");
        }
        if self.secure {
            out.push_str("; Secure");
        }
        if self.http_only {
            out.push_str("; HttpOnly");
        }
        if let Some(same_site) = self.same_site {
            let _ = write!(out, "; SameSite={}", same_site.as_str());
        }
        if self.partitioned {
            out.push_str("; Partitioned");
        }
        // Every byte was checked to be visible ASCII or SP.
        HeaderValue::from_str(&out).map_err(|_| self.error(Problem::InvalidValue))
    }

    fn check(&self) -> Result<(), CookieError> {
        if self.name.is_empty() || !self.name.bytes().all(is_tchar) {
            return Err(self.error(Problem::InvalidName));
        }
        if !self.value.bytes().all(is_cookie_octet) {
            return Err(self.error(Problem::InvalidValue));
        }
        // RFC 6265bis §5.7 step 4: user agents ignore longer pairs.
        if self.name.len() + self.value.len() > MAX_NAME_VALUE_BYTES {
            return Err(self.error(Problem::TooLong));
        }
        for attr in [&self.path, &self.domain].into_iter().flatten() {
            // §4.1.1 `av-octet`: no CTLs and no `;`; §5.7 step 3: at most
            // 1024 bytes.
            if !attr.bytes().all(|b| (0x20..0x7f).contains(&b) && b != b';') {
                return Err(self.error(Problem::InvalidAttribute));
            }
            if attr.len() > MAX_ATTRIBUTE_VALUE_BYTES {
                return Err(self.error(Problem::TooLong));
            }
        }
        // §4.1.3: prefixes, compared case-insensitively as §5.7 step 20ff
        // does.
        let is_host = self
            .name
            .get(..7)
            .is_some_and(|p| p.eq_ignore_ascii_case("__host-"));
        let is_secure_prefix = self
            .name
            .get(..9)
            .is_some_and(|p| p.eq_ignore_ascii_case("__secure-"));
        if is_secure_prefix && !self.secure {
            return Err(self.error(Problem::SecurePrefix));
        }
        if is_host {
            if !self.secure {
                return Err(self.error(Problem::HostPrefix("Secure")));
            }
            if self.path.as_deref() != Some("/") {
                return Err(self.error(Problem::HostPrefix("Path=/")));
            }
            if self.domain.is_some() {
                return Err(self.error(Problem::HostPrefix("no Domain")));
            }
        }
        if self.same_site == Some(SameSite::None) && !self.secure {
            return Err(self.error(Problem::NeedsSecure("SameSite=None")));
        }
        if self.partitioned && !self.secure {
            return Err(self.error(Problem::NeedsSecure("Partitioned")));
        }
        Ok(())
    }

    fn error(&self, problem: Problem) -> CookieError {
        CookieError {
            name: self.name.chars().take(64).collect(),
            problem,
        }
    }
}

/// RFC 9110 §5.6.2 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// RFC 6265bis §4.1.1 `cookie-octet`.
pub(crate) fn is_cookie_octet(b: u8) -> bool {
    matches!(b, 0x21 | 0x23..=0x2B | 0x2D..=0x3A | 0x3C..=0x5B | 0x5D..=0x7E)
}

/// A cookie that cannot be set as built: the reason names the cookie and
/// the rule it breaks. Converted into [`Error`](crate::Error) with `?` it
/// is a `500`, as it is the application's mistake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CookieError {
    name: String,
    problem: Problem,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Problem {
    InvalidName,
    InvalidValue,
    InvalidAttribute,
    TooLong,
    SecurePrefix,
    HostPrefix(&'static str),
    NeedsSecure(&'static str),
}

impl fmt::Display for CookieError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cookie `{}`: ", self.name)?;
        match &self.problem {
            Problem::InvalidName => f.write_str("the name must be a non-empty token (RFC 9110 §5.6.2)"),
            Problem::InvalidValue => f.write_str(
                "the value has a byte outside cookie-octet (space, '\"', ',', ';', '\\' or non-ASCII); \
                 percent-encode it, or set it signed or encrypted",
            ),
            Problem::InvalidAttribute => f.write_str("Path and Domain may not hold control characters or ';'"),
            Problem::TooLong => write!(
                f,
                "name and value may be at most {MAX_NAME_VALUE_BYTES} bytes, an attribute at most {MAX_ATTRIBUTE_VALUE_BYTES}"
            ),
            Problem::SecurePrefix => f.write_str("the __Secure- prefix needs Secure"),
            Problem::HostPrefix(what) => write!(f, "the __Host- prefix needs {what}"),
            Problem::NeedsSecure(what) => write!(f, "{what} needs Secure"),
        }
    }
}

impl std::error::Error for CookieError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_attribute() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_784_000_000);
        let cookie = Cookie::new("id", "a1")
            .max_age(Duration::from_secs(60))
            .expires(at)
            .domain("example.com")
            .path("/app")
            .secure(true)
            .http_only(true)
            .same_site(SameSite::None)
            .partitioned(true);
        assert_eq!(
            cookie.encode().unwrap(),
            "id=a1; Max-Age=60; Expires=Tue, 14 Jul 2026 03:33:20 GMT; Domain=example.com; \
             Path=/app; Secure; HttpOnly; SameSite=None; Partitioned"
        );
    }

    #[test]
    fn max_age_capped_at_400_days() {
        let cookie = Cookie::new("a", "b").max_age(Duration::from_secs(u64::MAX));
        assert_eq!(cookie.encode().unwrap(), "a=b; Max-Age=34560000");
    }

    #[test]
    fn prefixes() {
        let host = |c: Cookie| c.encode().map_err(|e| e.to_string());
        assert!(host(Cookie::new("__Secure-a", "1")).is_err());
        assert!(host(Cookie::new("__secure-a", "1")).is_err());
        assert!(host(Cookie::new("__Secure-a", "1").secure(true)).is_ok());
        assert!(
            host(Cookie::new("__Host-a", "1").secure(true))
                .unwrap_err()
                .contains("Path=/")
        );
        assert!(
            host(
                Cookie::new("__HOST-a", "1")
                    .secure(true)
                    .path("/")
                    .domain("x.org")
            )
            .unwrap_err()
            .contains("no Domain")
        );
        assert!(host(Cookie::new("__Host-a", "1").secure(true).path("/")).is_ok());
    }

    #[test]
    fn needs_secure() {
        assert!(
            Cookie::new("a", "1")
                .same_site(SameSite::None)
                .encode()
                .is_err()
        );
        assert!(Cookie::new("a", "1").partitioned(true).encode().is_err());
    }

    #[test]
    fn bad_names_values_attributes() {
        assert!(Cookie::new("", "1").encode().is_err());
        assert!(Cookie::new("a b", "1").encode().is_err());
        assert!(Cookie::new("a=", "1").encode().is_err());
        for bad in [" ", "\"", ",", ";", "\\", "é", "\n"] {
            assert!(Cookie::new("a", bad).encode().is_err(), "{bad:?}");
        }
        assert!(
            Cookie::new("a", "1")
                .path("/x;Domain=evil")
                .encode()
                .is_err()
        );
        assert!(Cookie::new("a", "1").domain("x\r\n").encode().is_err());
        assert!(
            Cookie::new("a", "x".repeat(MAX_NAME_VALUE_BYTES))
                .encode()
                .is_err()
        );
        assert!(
            Cookie::new("a", "x".repeat(MAX_NAME_VALUE_BYTES - 1))
                .encode()
                .is_ok()
        );
    }
}
