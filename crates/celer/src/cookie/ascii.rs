//! Cookie text shared with the request instead of copied: a `Cookie`
//! field checked once to be ASCII, kept as the request's own `HeaderValue`
//! (a reference count, no copy), and read as `&str` without checking its
//! UTF-8 again on every read.
//!
//! The one `unsafe` block here turns bytes into `&str`; the check that
//! makes it sound sits in the only constructor, and the bytes of a
//! `HeaderValue` never change.
#![allow(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]

use http::HeaderValue;

/// Text from a `Cookie` field: a range of a field that is all ASCII,
/// shared with the request, or an owned copy (a field with other UTF-8,
/// or a jar of several fields).
#[derive(Clone)]
pub(crate) enum CookieText {
    /// `field[start..end]`, where all of `field` is ASCII.
    Shared(Shared),
    /// Text of its own.
    Owned(Box<str>),
}

/// A range of an ASCII `Cookie` field (see [`CookieText::Shared`]). Its
/// fields are private to this module, so every value was checked by
/// [`Shared::new`].
#[derive(Clone)]
pub(crate) struct Shared {
    field: HeaderValue,
    start: usize,
    end: usize,
}

impl Shared {
    /// The whole of `field`, when it is all ASCII.
    #[inline]
    pub(crate) fn new(field: &HeaderValue) -> Option<Shared> {
        field
            .as_bytes()
            .is_ascii()
            .then(|| Shared::checked(field.clone()))
    }

    /// `field`, which the caller checked to be ASCII.
    #[inline]
    fn checked(field: HeaderValue) -> Shared {
        let end = field.len();
        Shared {
            field,
            start: 0,
            end,
        }
    }

    /// `start..end` of this text (relative to it); `None` out of bounds.
    #[inline]
    pub(crate) fn slice(self, start: usize, end: usize) -> Option<Shared> {
        (start <= end && end <= self.end - self.start).then(|| Shared {
            start: self.start + start,
            end: self.start + end,
            field: self.field,
        })
    }

    /// The text.
    #[inline]
    pub(crate) fn as_str(&self) -> &str {
        let bytes = &self.field.as_bytes()[self.start..self.end];
        // SAFETY: `checked`, the only constructor, is called by `new` on
        // fields it checked to be all ASCII, and `slice`
        // only narrows the range; a
        // `HeaderValue`'s bytes never change. Any range of ASCII bytes is
        // valid UTF-8.
        unsafe { std::str::from_utf8_unchecked(bytes) }
    }
}

impl CookieText {
    /// The text.
    #[inline]
    pub(crate) fn as_str(&self) -> &str {
        match self {
            CookieText::Shared(shared) => shared.as_str(),
            CookieText::Owned(text) => text,
        }
    }
}

impl Default for CookieText {
    fn default() -> Self {
        CookieText::Owned(Box::default())
    }
}

impl std::fmt::Debug for CookieText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ascii_fields_are_shared() {
        let ascii = HeaderValue::from_static("a=1; b=2");
        let shared = Shared::new(&ascii).expect("ASCII");
        assert_eq!(shared.as_str(), "a=1; b=2");
        assert_eq!(shared.clone().slice(3, 8).unwrap().as_str(), "; b=2");
        assert_eq!(
            shared
                .clone()
                .slice(3, 8)
                .unwrap()
                .slice(2, 3)
                .unwrap()
                .as_str(),
            "b"
        );
        assert!(shared.clone().slice(4, 9).is_none());
        assert!(shared.slice(5, 4).is_none());
        let utf8 = HeaderValue::from_bytes("a=é".as_bytes()).unwrap();
        assert!(Shared::new(&utf8).is_none());
        let latin1 = HeaderValue::from_bytes(b"a=\xe9").unwrap();
        assert!(Shared::new(&latin1).is_none());
    }
}
