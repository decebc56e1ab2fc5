//! Request paths turned into relative file paths, refusing every way out of
//! the root.
//!
//! The path is percent-decoded first and checked second, so an encoded
//! `%2e%2e` or `..%2f` is the same `..` as a literal one. An encoded slash
//! (`%2f`) becomes a separator like a literal one. Nothing is normalised
//! away that could change which file is meant: `..` is refused, not
//! resolved, and so are backslashes and NUL bytes.

use std::borrow::Cow;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

use percent_encoding::{AsciiSet, CONTROLS, percent_decode_str, percent_encode};

/// The one hidden name that is served: RFC 8615 well-known URIs.
const WELL_KNOWN: &[u8] = b".well-known";

/// Bytes escaped when a path segment is written back into a `Location`.
const SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'/')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}');

/// A request path that is safe to join onto a root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SafePath {
    /// Decoded segments joined by `/`, without a leading one. No segment is
    /// empty, `.`, `..`, or holds a backslash or NUL. Empty for the root.
    rel: Vec<u8>,
    /// The request path ended in `/`: it names a directory.
    pub(crate) dir_form: bool,
}

/// Why a request path is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Not an absolute path, or it holds `..`, a backslash or NUL: 400.
    Malformed,
    /// A segment starts with a dot and hidden files are not served: 403.
    Hidden,
}

impl SafePath {
    /// Decodes and checks the path of a request target (`Uri::path`).
    pub(crate) fn parse(raw: &str, allow_hidden: bool) -> Result<SafePath, Refusal> {
        let rest = raw.strip_prefix('/').ok_or(Refusal::Malformed)?;
        let decoded: Cow<'_, [u8]> = percent_decode_str(rest).into();
        if decoded.iter().any(|&b| b == b'\\' || b == 0) {
            return Err(Refusal::Malformed);
        }
        let mut rel = Vec::with_capacity(decoded.len());
        let mut hidden = false;
        for seg in decoded.split(|&b| b == b'/') {
            match seg {
                b"" | b"." => continue,
                b".." => return Err(Refusal::Malformed),
                _ => hidden |= is_hidden(seg),
            }
            if !rel.is_empty() {
                rel.push(b'/');
            }
            rel.extend_from_slice(seg);
        }
        if hidden && !allow_hidden {
            return Err(Refusal::Hidden);
        }
        let dir_form = decoded.is_empty() || decoded.ends_with(b"/");
        Ok(SafePath { rel, dir_form })
    }

    /// The path relative to the root; empty for the root itself.
    pub(crate) fn relative(&self) -> &Path {
        Path::new(OsStr::from_bytes(&self.rel))
    }

    /// The last segment, or `None` for the root.
    pub(crate) fn file_name(&self) -> Option<&[u8]> {
        self.rel
            .rsplit(|&b| b == b'/')
            .next()
            .filter(|s| !s.is_empty())
    }

    /// The directory form of this path (`/a/b/`), percent-encoded, for a
    /// `Location` header. Built from the checked segments rather than the
    /// raw target, so `//host` can never become a protocol-relative URL.
    pub(crate) fn dir_href(&self) -> String {
        let mut out = String::with_capacity(self.rel.len() + 2);
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

fn is_hidden(seg: &[u8]) -> bool {
    seg.first() == Some(&b'.') && seg != WELL_KNOWN
}

#[cfg(test)]
mod tests;
