//! Cookies (RFC 6265bis): a typed jar read from the request, cookies set
//! with every attribute and checked when set, signed and encrypted values
//! with key rotation.
//!
//! - [`CookieJar`] is extracted from a request (`req.extract::<CookieJar>()`
//!   or [`CookieJar::from_headers`]); it reads cookies by name
//!   ([`CookieJar::get`]), signed ones ([`CookieJar::get_signed`]) and
//!   encrypted ones ([`CookieJar::get_private`]), and collects the cookies
//!   to set, which a `(jar, response)` pair sends as `Set-Cookie` fields.
//! - [`Cookie`] builds a cookie to set; [`Cookie::encode`] refuses what
//!   user agents would drop or what breaks a prefix's promise.
//! - [`SigningKeys`] sign (HMAC-SHA-256 or HMAC-SHA-512 over name and
//!   value); [`EncryptionKeys`] encrypt (AES-256-GCM, the name as
//!   associated data). Tampered, truncated and renamed cookies read as
//!   absent.
//!
//! # Limits
//!
//! | limit | default | at the limit |
//! |---|---|---|
//! | [`MAX_COOKIE_HEADER_BYTES`] | 8 KiB over all `Cookie` fields | `431` when extracting the jar |
//! | [`MAX_COOKIES`] | 64 pairs | `431` when extracting the jar |
//! | [`MAX_NAME_VALUE_BYTES`] | 4096 | [`CookieError`] when setting |
//! | [`MAX_ATTRIBUTE_VALUE_BYTES`] | 1024 | [`CookieError`] when setting |
//! | [`MAX_MAX_AGE`] | 400 days | sent as the cap |
//! | [`MAX_KEYS`] | 16 | [`KeyError`] when building keys |
//!
//! # Example
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use celer::cookie::{Cookie, CookieJar, SameSite, SigningKeys, Algorithm};
//! use celer::{App, Error, Request};
//!
//! async fn visit(mut req: Request) -> Result<(CookieJar, String), Error> {
//!     let keys = req.state::<SigningKeys>()?.clone();
//!     let mut jar = req.extract::<CookieJar>().await?;
//!     let n: u32 = jar.get_signed(&keys, "visits").and_then(|v| v.parse().ok()).unwrap_or(0);
//!     let cookie = Cookie::new("visits", (n + 1).to_string())
//!         .http_only(true)
//!         .same_site(SameSite::Lax)
//!         .path("/");
//!     jar.set_signed(&keys, cookie)?;
//!     Ok((jar, format!("visit {}", n + 1)))
//! }
//!
//! let mut app = App::new();
//! app.state(SigningKeys::new(Algorithm::Sha256, [[42u8; 32]]).unwrap());
//! app.get("/", visit);
//! let client = celer::test::TestClient::new(app);
//! let first = client.get("/").await;
//! assert_eq!(first.text(), "visit 1");
//! let set = first.header("set-cookie").unwrap().split(';').next().unwrap().to_owned();
//! let second = client.get("/").header("cookie", set.as_str()).send().await;
//! assert_eq!(second.text(), "visit 2");
//! // A forged count reads as no cookie.
//! let forged = client.get("/").header("cookie", "visits=99").send().await;
//! assert_eq!(forged.text(), "visit 1");
//! # });
//! ```
//!
//! Own parsing rather than the `cookie` crate: see
//! `docs/decisions/120-cookies-sessions-csrf-auth.md`.

mod ascii;
mod crypto;
mod parse;
mod set;

use std::fmt;
use std::time::Duration;

use http::{HeaderMap, StatusCode, header};

pub(crate) use self::ascii::CookieText;
use self::ascii::Shared;
pub use self::crypto::{Algorithm, EncryptionKeys, KeyError, MIN_KEY_BYTES, SigningKeys};
pub(crate) use self::parse::NameFinder;
pub use self::parse::parse_pairs;
pub use self::set::{Cookie, CookieError, SameSite};

use crate::extract::FromRequest;
use crate::response::{IntoResponse, Response};
use crate::{Error, Request};

/// The most bytes read from a request's `Cookie` fields, all lines
/// together: 8 KiB, twice what one browser cookie may hold
/// (RFC 6265bis §5.7 step 4 caps a pair at 4096 bytes). Past it the jar's
/// extraction is a `431 Request Header Fields Too Large` (RFC 6585 §5).
pub const MAX_COOKIE_HEADER_BYTES: usize = 8 * 1024;

/// The most cookie pairs a request may carry: 64. Past it the jar's
/// extraction is a `431`.
pub const MAX_COOKIES: usize = 64;

/// The most bytes of a cookie's name and value together when set: 4096
/// (RFC 6265bis §5.7 step 4; user agents drop longer ones).
pub const MAX_NAME_VALUE_BYTES: usize = 4096;

/// The most bytes of a `Path` or `Domain` attribute value when set: 1024
/// (RFC 6265bis §5.7 step 3).
pub const MAX_ATTRIBUTE_VALUE_BYTES: usize = 1024;

/// The longest `Max-Age` sent: 400 days (RFC 6265bis §5.6.2; user agents
/// cap longer ones to it).
pub const MAX_MAX_AGE: Duration = Duration::from_secs(400 * 24 * 3600);

/// The most keys in one [`SigningKeys`] or [`EncryptionKeys`]: 16, as each
/// listed key costs a check of every cookie that does not verify.
pub const MAX_KEYS: usize = 16;

/// The cookies of a request, and the cookies to set on its response.
///
/// Reading: the first pair of a name wins (user agents send the cookie
/// with the longest path first, RFC 6265bis §5.8.3 step 2). Writing:
/// [`CookieJar::set`] checks the cookie at once and keeps its
/// `Set-Cookie` value; answering `(jar, response)` appends them. A cookie
/// set in this request is also what [`CookieJar::get`] returns afterwards.
#[derive(Debug, Default, Clone)]
pub struct CookieJar {
    /// The request's `Cookie` fields (the UTF-8 ones), joined by `;`:
    /// pairs are parsed from it where asked, so reading a jar costs no
    /// allocation per pair. One ASCII field, the usual case, is the
    /// request's own field (shared, not copied).
    text: CookieText,
    /// What was set in this request; `None` until the first
    /// [`set`](CookieJar::set): a jar that only reads allocates nothing
    /// and is moved and dropped as its text and one word.
    changes: Option<Box<Changes>>,
}

/// A jar's cookies set in this request.
#[derive(Debug, Default, Clone)]
struct Changes {
    /// Cookies set, newest first: `None` for a removal. They hide the
    /// request's pairs of the same name.
    set: Vec<(Box<str>, Option<Box<str>>)>,
    /// `Set-Cookie` values to send.
    headers: Vec<http::HeaderValue>,
}

impl CookieJar {
    /// An empty jar.
    pub fn new() -> CookieJar {
        CookieJar::default()
    }

    /// The cookies of a request's `Cookie` fields, within
    /// [`MAX_COOKIE_HEADER_BYTES`] and [`MAX_COOKIES`]. Fields that are not
    /// UTF-8 are skipped (no cookie a server sets has such bytes).
    ///
    /// ```
    /// let mut headers = http::HeaderMap::new();
    /// headers.append("cookie", "a=1; b=2".parse().unwrap());
    /// headers.append("cookie", "a=3".parse().unwrap());
    /// let jar = celer::cookie::CookieJar::from_headers(&headers).unwrap();
    /// assert_eq!(jar.get("a"), Some("1"));
    /// assert_eq!(jar.get_all("a").collect::<Vec<_>>(), ["1", "3"]);
    /// assert_eq!(jar.len(), 3);
    /// ```
    pub fn from_headers(headers: &HeaderMap) -> Result<CookieJar, CookieRejection> {
        Ok(CookieJar::from_text(text_of(headers)?))
    }

    /// A jar of the request's cookie text (see [`text_of`]).
    fn from_text(text: CookieText) -> CookieJar {
        CookieJar {
            text,
            changes: None,
        }
    }

    /// The cookies set in this request, newest first.
    fn set_pairs(&self) -> &[(Box<str>, Option<Box<str>>)] {
        self.changes.as_deref().map_or(&[], |changes| &changes.set)
    }

    /// The request's pairs whose names were not set since.
    fn request_pairs(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        parse_pairs(self.text.as_str())
            .filter(|(n, _)| !self.set_pairs().iter().any(|(s, _)| &**s == *n))
    }

    /// The value of the first cookie called `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        if let Some((_, value)) = self.set_pairs().iter().find(|(n, _)| &**n == name) {
            return value.as_deref();
        }
        let text = self.text.as_str();
        parse::find_pair(text.as_bytes(), name.as_bytes()).map(|(start, end)| &text[start..end])
    }

    /// The values of every cookie called `name`, in request order.
    pub fn get_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        let set = self.set_pairs().iter().find(|(n, _)| &**n == name);
        let from_request = set.is_none().then(|| {
            parse_pairs(self.text.as_str())
                .filter(move |(n, _)| *n == name)
                .map(|(_, v)| v)
        });
        set.and_then(|(_, v)| v.as_deref())
            .into_iter()
            .chain(from_request.into_iter().flatten())
    }

    /// Every pair: those set in this request (newest first), then the
    /// request's, in request order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        self.set_pairs()
            .iter()
            .filter_map(|(n, v)| Some((&**n, v.as_deref()?)))
            .chain(self.request_pairs())
    }

    /// How many pairs the request carried (plus those set since).
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// Whether there are no pairs.
    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }

    /// The verified value of the first signed cookie `name` that one of
    /// `keys` verifies; `None` when absent or not verified.
    pub fn get_signed(&self, keys: &SigningKeys, name: &str) -> Option<String> {
        self.get_all(name)
            .find_map(|value| keys.verify(name, value))
    }

    /// The decrypted value of the first encrypted cookie `name` one of
    /// `keys` opens; `None` when absent or not opened.
    ///
    /// ```
    /// use celer::cookie::{Cookie, CookieJar, EncryptionKeys};
    /// let keys = EncryptionKeys::new([[3u8; 32]]).unwrap();
    /// let mut jar = CookieJar::new();
    /// jar.set_private(&keys, Cookie::new("id", "user 7; admin").http_only(true)).unwrap();
    /// assert_eq!(jar.get_private(&keys, "id").as_deref(), Some("user 7; admin"));
    /// ```
    pub fn get_private(&self, keys: &EncryptionKeys, name: &str) -> Option<String> {
        self.get_all(name)
            .find_map(|value| keys.decrypt(name, value))
    }

    /// Sets `cookie`: checks it ([`Cookie::encode`]), keeps its
    /// `Set-Cookie` value for the response, and makes it what
    /// [`get`](CookieJar::get) reads (a removal cookie removes the name).
    pub fn set(&mut self, cookie: Cookie) -> Result<(), CookieError> {
        let encoded = cookie.encode()?;
        let changes = self.changes.get_or_insert_with(Box::default);
        changes.headers.push(encoded);
        let removal = cookie.is_removal();
        let (name, value) = cookie.into_name_value();
        changes.set.retain(|(n, _)| **n != *name);
        changes
            .set
            .insert(0, (name.into(), (!removal).then(|| value.into())));
        Ok(())
    }

    /// Sets `cookie` with its value signed by the first of `keys`.
    pub fn set_signed(
        &mut self,
        keys: &SigningKeys,
        mut cookie: Cookie,
    ) -> Result<(), CookieError> {
        let signed = keys.sign(cookie.name(), cookie.value());
        cookie.set_value(signed);
        self.set(cookie)
    }

    /// Sets `cookie` with its value encrypted by the first of `keys`; any
    /// UTF-8 value may be stored this way, as the sealed form is
    /// base64url. A sealed value over [`MAX_NAME_VALUE_BYTES`] is refused.
    pub fn set_private(&mut self, keys: &EncryptionKeys, mut cookie: Cookie) -> Result<(), Error> {
        let sealed = keys.encrypt(cookie.name(), cookie.value())?;
        cookie.set_value(sealed);
        Ok(self.set(cookie)?)
    }

    /// Removes cookie `name` from the client (see [`Cookie::removal`]); the
    /// `path` must be the one it was set with.
    pub fn remove(&mut self, name: &str, path: &str) -> Result<(), CookieError> {
        let mut cookie = Cookie::removal(name).path(path);
        let lower = name.to_ascii_lowercase();
        if lower.starts_with("__secure-") || lower.starts_with("__host-") {
            cookie = cookie.secure(true);
        }
        self.set(cookie)
    }

    /// The `Set-Cookie` values to send, in the order they were set.
    pub fn changes(&self) -> &[http::HeaderValue] {
        self.changes
            .as_deref()
            .map_or(&[], |changes| &changes.headers)
    }

    /// Appends the `Set-Cookie` fields to `headers` (for middleware that
    /// holds a response already).
    pub fn write_to(self, headers: &mut HeaderMap) {
        for value in self.changes.into_iter().flat_map(|changes| changes.headers) {
            headers.append(header::SET_COOKIE, value);
        }
    }
}

/// Fields shorter than this many bytes are not scanned for `;` by
/// [`check_fields`]: three bytes per pair allowed.
const PAIR_BOUND_BYTES: usize = 3 * MAX_COOKIES;

/// Checks the limits on `Cookie` fields: [`MAX_COOKIE_HEADER_BYTES`] over
/// all of them, [`MAX_COOKIES`] pairs in the UTF-8 ones. A field holds at
/// most one pair more than it has `;`, so the pairs are counted one by
/// one only when the `;` allow more than the limit.
fn check_fields<'a, I: Iterator<Item = &'a http::HeaderValue>>(
    fields: impl Fn() -> I,
) -> Result<(), CookieRejection> {
    let (mut total, mut most) = (0usize, 0usize);
    for field in fields() {
        total = total.saturating_add(field.len());
        if total > MAX_COOKIE_HEADER_BYTES {
            return Err(CookieRejection::TooLarge);
        }
        // A pair takes at least three bytes with its `;` ("a=;"), so a
        // field shorter than that many per pair allowed holds no more;
        // only a longer one has its `;` counted.
        most += if field.len() < PAIR_BOUND_BYTES {
            field.len().div_ceil(3)
        } else {
            1 + memchr::memchr_iter(b';', field.as_bytes()).count()
        };
    }
    if most <= MAX_COOKIES {
        return Ok(());
    }
    let mut pairs = 0usize;
    for field in fields() {
        if let Ok(field) = std::str::from_utf8(field.as_bytes()) {
            pairs += parse_pairs(field).count();
            if pairs > MAX_COOKIES {
                return Err(CookieRejection::TooMany);
            }
        }
    }
    Ok(())
}

/// The text of `headers`' `Cookie` fields as a jar reads it, under the
/// jar's limits (a `431` past them): one field is shared with the request
/// when it is ASCII (the usual case); several are joined by `;` (pairs
/// never span fields); fields that are not UTF-8 are skipped.
pub(crate) fn text_of(headers: &HeaderMap) -> Result<CookieText, CookieRejection> {
    let all = headers.get_all(header::COOKIE);
    let mut fields = all.iter();
    Ok(match (fields.next(), fields.next()) {
        (None, _) => CookieText::default(),
        // One field, the usual case: checked once, shared when ASCII.
        (Some(field), None) => {
            check_fields(|| std::iter::once(field))?;
            match Shared::new(field) {
                Some(shared) => CookieText::Shared(shared),
                None => std::str::from_utf8(field.as_bytes())
                    .map_or_else(|_| CookieText::default(), |t| CookieText::Owned(t.into())),
            }
        }
        (Some(_), Some(_)) => {
            check_fields(|| all.iter())?;
            let mut text = String::new();
            for field in &all {
                if let Ok(field) = std::str::from_utf8(field.as_bytes()) {
                    text.push_str(field);
                    text.push(';');
                }
            }
            CookieText::Owned(text.into_boxed_str())
        }
    })
}

/// The request's cookie text ([`text_of`]), read once a request: the
/// first extraction that needs it (the jar's, the session's) keeps it on
/// the request for the next, which shares it (a reference count). A
/// change of the headers (`Request::headers_mut`) drops what was kept.
/// Refusals are not kept: each extraction over the limits is a `431`.
pub(crate) fn request_text(req: &mut Request) -> Result<CookieText, CookieRejection> {
    let (headers, kept) = req.cookie_cache();
    if let Some(text) = kept {
        return Ok(text.clone());
    }
    let text = text_of(headers)?;
    *kept = Some(text.clone());
    Ok(text)
}

/// [`request_text`] for a request that cannot keep it: what an earlier
/// extraction kept, else read now.
pub(crate) fn request_text_ref(req: &Request) -> Result<CookieText, CookieRejection> {
    match req.cookies_kept() {
        Some(text) => Ok(text.clone()),
        None => text_of(req.headers()),
    }
}

/// The value of the first pair `name` finds in `text` (what the jar's
/// [`get`](CookieJar::get) answers), shared with `text` when that is
/// shared, else copied.
pub(crate) fn find_value(text: CookieText, name: &NameFinder) -> Option<CookieText> {
    match text {
        CookieText::Shared(shared) => {
            let (start, end) = name.find(shared.as_str().as_bytes())?;
            shared.slice(start, end).map(CookieText::Shared)
        }
        CookieText::Owned(text) => {
            let (start, end) = name.find(text.as_bytes())?;
            Some(CookieText::Owned(text[start..end].into()))
        }
    }
}

/// `(jar, response)`: the response with the jar's `Set-Cookie` fields
/// appended.
impl<T: IntoResponse> IntoResponse for (CookieJar, T) {
    fn into_response(self) -> Response {
        let (jar, inner) = self;
        let mut res = inner.into_response();
        jar.write_to(res.headers_mut());
        res
    }
}

impl FromRequest for CookieJar {
    type Rejection = CookieRejection;

    async fn from_request(req: &mut Request) -> Result<Self, Self::Rejection> {
        request_text(req).map(CookieJar::from_text)
    }
}

/// A request whose cookies are over the limits: `431 Request Header Fields
/// Too Large` (RFC 6585 §5), which names the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CookieRejection {
    /// More than [`MAX_COOKIE_HEADER_BYTES`] of `Cookie` fields.
    TooLarge,
    /// More than [`MAX_COOKIES`] pairs.
    TooMany,
}

impl CookieRejection {
    /// The status: `431`.
    pub fn status(&self) -> StatusCode {
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE
    }

    /// What went wrong, for a person.
    pub fn detail(&self) -> String {
        match self {
            CookieRejection::TooLarge => {
                format!("the Cookie header is over {MAX_COOKIE_HEADER_BYTES} bytes")
            }
            CookieRejection::TooMany => format!("the request carries over {MAX_COOKIES} cookies"),
        }
    }
}

impl fmt::Display for CookieRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.detail())
    }
}

impl IntoResponse for CookieRejection {
    fn into_response(self) -> Response {
        tracing::trace!(target: "celer::rejection", status = %self.status(), rejection = %self);
        crate::error::generated(self.status(), "Cookies Too Large", &self.detail())
    }
}

/// With `?` a handler returning [`Error`] keeps the `431` and the detail.
impl From<CookieRejection> for Error {
    fn from(rejection: CookieRejection) -> Error {
        Error::status(rejection.status(), rejection.detail())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The session's value of cookie `name` in `headers`: the request's
    /// text read as the jar reads it, then searched with [`NameFinder`].
    fn find(headers: &HeaderMap, name: &str) -> Result<Option<String>, CookieRejection> {
        let found = find_value(text_of(headers)?, &NameFinder::new(name));
        Ok(found.map(|value| value.as_str().to_owned()))
    }

    /// The session's lookup answers what the jar's `get` answers, on tidy
    /// and untidy fields, several fields, and names that are prefixes of
    /// others.
    #[test]
    fn find_agrees_with_the_jar() {
        let cases: &[&[&str]] = &[
            &["theme=dark; sid=abc; lang=en"],
            &["sidx=1; sid=2"],
            &[" sid = \"q\" ;sid=3"],
            &["a=1", "sid=4; sid=5"],
            &["sid", "=sid", "si=d; sid=6"],
            &["x=sid=7; sid\t=8"],
            &[""],
            &["sid="],
            &["theme=é; sid=10"],
            &["lang=é", "sid=11"],
            &["sid=é; sid=12"],
            &["sid=1;", ";sid=2"],
            &["a=1; sid", "=3"],
        ];
        for fields in cases {
            let mut headers = HeaderMap::new();
            for field in *fields {
                headers.append(header::COOKIE, field.parse().unwrap());
            }
            let jar = CookieJar::from_headers(&headers).unwrap();
            for name in ["sid", "si", "x", "a", "theme"] {
                assert_eq!(
                    find(&headers, name).unwrap().as_deref(),
                    jar.get(name),
                    "{fields:?} {name}"
                );
            }
        }
        // A field that is not UTF-8 is skipped whole, by both.
        let mut headers = HeaderMap::new();
        headers.append(
            header::COOKIE,
            http::HeaderValue::from_bytes(b"sid=\xe9; a=1").unwrap(),
        );
        headers.append(header::COOKIE, "sid=13".parse().unwrap());
        let jar = CookieJar::from_headers(&headers).unwrap();
        assert_eq!(jar.get("sid"), Some("13"));
        assert_eq!(jar.get("a"), None);
        assert_eq!(find(&headers, "sid").unwrap().as_deref(), Some("13"));
        assert!(find(&headers, "a").unwrap().is_none());
        let mut headers = HeaderMap::new();
        headers.append(
            header::COOKIE,
            "a=1;".repeat(MAX_COOKIES + 1).parse().unwrap(),
        );
        assert!(matches!(find(&headers, "a"), Err(CookieRejection::TooMany)));
        // Many `;` but few pairs: within the limit.
        let mut headers = HeaderMap::new();
        headers.append(
            header::COOKIE,
            format!("a=1{}", ";".repeat(200)).parse().unwrap(),
        );
        assert_eq!(find(&headers, "a").unwrap().as_deref(), Some("1"));
    }

    /// The text a request keeps is read once, shared by the jar and the
    /// session's lookup, dropped when the headers may change, and a
    /// refusal is not kept.
    #[test]
    fn the_request_keeps_its_cookie_text_until_its_headers_change() {
        let mut req = Request::builder()
            .uri("/")
            .header("cookie", "sid=1; theme=dark")
            .body(())
            .unwrap();
        assert!(req.cookies_kept().is_none());
        let first = request_text(&mut req).unwrap();
        assert_eq!(first.as_str(), "sid=1; theme=dark");
        let kept = req.cookies_kept().expect("kept").as_str().as_ptr();
        assert_eq!(kept, first.as_str().as_ptr(), "shared, not copied");
        // A header added after: the kept text is dropped and read again.
        req.headers_mut()
            .append(header::COOKIE, "lang=en".parse().unwrap());
        assert!(req.cookies_kept().is_none());
        let jar = CookieJar::from_text(request_text(&mut req).unwrap());
        assert_eq!(jar.get("lang"), Some("en"));
        assert_eq!(
            request_text_ref(&req).unwrap().as_str(),
            "sid=1; theme=dark;lang=en;"
        );
        // Over the limit: refused on every extraction, nothing kept.
        req.headers_mut().insert(
            header::COOKIE,
            "a=1;".repeat(MAX_COOKIES + 1).parse().unwrap(),
        );
        for _ in 0..2 {
            assert_eq!(
                request_text(&mut req).unwrap_err(),
                CookieRejection::TooMany
            );
            assert!(req.cookies_kept().is_none());
        }
        assert_eq!(
            request_text_ref(&req).unwrap_err(),
            CookieRejection::TooMany
        );
    }

    /// The shortest fields of `MAX_COOKIES` and one more pairs sit on
    /// either side of the length under which `;` are not counted; short
    /// fields that together hold too many pairs are still counted.
    #[test]
    fn pair_limit_at_the_short_field_bound() {
        let field = |n: usize| vec!["a="; n].join(";");
        let check = |fields: &[String]| {
            let mut headers = HeaderMap::new();
            for field in fields {
                headers.append(header::COOKIE, field.parse().unwrap());
            }
            (
                find(&headers, "a").map(|v| v.is_some()),
                CookieJar::from_headers(&headers).map(|jar| jar.len()),
            )
        };
        let most = field(MAX_COOKIES);
        assert!(most.len() < PAIR_BOUND_BYTES);
        assert_eq!(check(&[most]), (Ok(true), Ok(MAX_COOKIES)));
        let over = field(MAX_COOKIES + 1);
        assert!(over.len() >= PAIR_BOUND_BYTES);
        let refused = (Err(CookieRejection::TooMany), Err(CookieRejection::TooMany));
        assert_eq!(check(&[over]), refused);
        let thirds = vec![field(MAX_COOKIES / 3 + 1); 3];
        assert!(thirds.iter().all(|f| f.len() < PAIR_BOUND_BYTES));
        assert_eq!(check(&thirds), refused);
    }
}
