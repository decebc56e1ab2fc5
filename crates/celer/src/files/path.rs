//! Request paths turned into relative file paths, refusing every way out of
//! the root.
//!
//! The path is percent-decoded first and checked second, so an encoded
//! `%2e%2e` or `..%2f` is the same `..` as a literal one. An encoded slash
//! (`%2f`) becomes a separator like a literal one. Nothing is normalised
//! away that could change which file is meant: `..` is refused, not
//! resolved, and so are backslashes and NUL bytes. Decoding happens once:
//! `%252e` is the three characters `%2e`, never a dot.

use std::borrow::Cow;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

use percent_encoding::{AsciiSet, CONTROLS, percent_decode_str, percent_encode};

/// The one hidden name that is served by default: RFC 8615 well-known URIs.
const WELL_KNOWN: &[u8] = b".well-known";

/// Bytes escaped when a path segment is written back into a URL.
pub(crate) const SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'/')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'\\')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}')
    .add(b'\'')
    .add(0x7f);

/// A request path that is safe to join onto a root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SafePath {
    /// Decoded segments joined by `/`, without a leading one. No segment is
    /// empty, `.`, `..`, or holds a backslash or NUL. Empty for the root.
    rel: Vec<u8>,
    /// The request path ended in `/`: it names a directory.
    pub(crate) dir_form: bool,
    /// A segment starts with a dot (other than `.well-known`).
    pub(crate) hidden: bool,
}

/// A request path that could name something outside the root: it is not
/// absolute, or holds `..`, a backslash or NUL. Answered 400.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Malformed;

impl SafePath {
    /// Decodes and checks the path of a request target (`Uri::path`).
    pub(crate) fn parse(raw: &str) -> Result<SafePath, Malformed> {
        let rest = raw.strip_prefix('/').ok_or(Malformed)?;
        // Borrows when there is nothing to decode.
        let decoded: Cow<'_, [u8]> = percent_decode_str(rest).into();
        SafePath::from_decoded(&decoded)
    }

    /// Checks an already decoded path relative to the root (a router's
    /// `<path:rest>` parameter); a leading slash is allowed.
    pub(crate) fn from_decoded(decoded: &[u8]) -> Result<SafePath, Malformed> {
        if decoded.iter().any(|&b| b == b'\\' || b == 0) {
            return Err(Malformed);
        }
        let mut rel = Vec::with_capacity(decoded.len());
        let mut hidden = false;
        for seg in decoded.split(|&b| b == b'/') {
            match seg {
                b"" | b"." => continue,
                b".." => return Err(Malformed),
                _ => hidden |= is_hidden(seg),
            }
            if !rel.is_empty() {
                rel.push(b'/');
            }
            rel.extend_from_slice(seg);
        }
        let dir_form = decoded.is_empty() || decoded.ends_with(b"/");
        Ok(SafePath {
            rel,
            dir_form,
            hidden,
        })
    }

    /// The path relative to the root; empty for the root itself.
    pub(crate) fn relative(&self) -> &Path {
        Path::new(OsStr::from_bytes(&self.rel))
    }

    /// The relative path as bytes (`a/b.txt`); empty for the root.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.rel
    }

    /// The last segment, or `None` for the root.
    pub(crate) fn file_name(&self) -> Option<&[u8]> {
        self.rel
            .rsplit(|&b| b == b'/')
            .next()
            .filter(|s| !s.is_empty())
    }

    /// The directory form of this path (`/a/b/`), percent-encoded, for a
    /// `Location` header, under `base` (the part of the request path before
    /// the served path; empty when the service sees whole paths). Built from
    /// the checked segments rather than the raw target, so `//host` can
    /// never become a protocol-relative URL.
    pub(crate) fn dir_href(&self, base: &str) -> String {
        let mut out = String::with_capacity(base.len() + self.rel.len() + 2);
        out.push_str(base.trim_end_matches('/'));
        for seg in self.rel.split(|&b| b == b'/').filter(|s| !s.is_empty()) {
            out.push('/');
            out.extend(percent_encode(seg, SEGMENT));
        }
        out.push('/');
        out
    }
}

/// True when a path below the root has a hidden component other than
/// `.well-known`; used again after symlinks are resolved.
pub(crate) fn has_hidden(rel: &Path) -> bool {
    rel.components().any(|c| match c {
        Component::Normal(name) => is_hidden(name.as_bytes()),
        _ => false,
    })
}

/// A name starting with a dot, other than `.well-known`.
pub(crate) fn is_hidden(seg: &[u8]) -> bool {
    seg.first() == Some(&b'.') && seg != WELL_KNOWN
}

#[cfg(test)]
mod tests;
