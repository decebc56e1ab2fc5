//! Files compiled into the binary: [`Bundle`].

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::{DefaultHasher, Hasher};
use std::sync::Arc;

/// A set of files compiled into the binary, served by
/// [`Files::embedded`](super::Files::embedded) with the same semantics as a
/// directory: index files, ETags (from a content hash), conditional requests,
/// ranges and precompressed siblings (an entry `app.js.br` beside `app.js`).
///
/// ```
/// use celer::files::{Bundle, Files};
///
/// static SITE: &[(&str, &[u8])] = &[
///     ("index.html", b"<h1>hello</h1>"),
///     ("css/site.css", b"h1 { color: teal }"),
/// ];
/// let files = Files::embedded(Bundle::new(SITE));
/// # let _ = files;
/// ```
#[derive(Clone)]
pub struct Bundle {
    inner: Arc<Inner>,
}

struct Inner {
    /// Files by relative path (`css/site.css`).
    files: HashMap<&'static str, Entry>,
    /// Every directory that holds a file, relative (`css`); `""` is the
    /// root.
    dirs: HashSet<String>,
}

/// One embedded file.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Entry {
    pub(crate) data: &'static [u8],
    /// Hash of `data`, for the ETag.
    pub(crate) hash: u64,
}

impl Bundle {
    /// A bundle of `(relative path, content)` pairs; paths use `/` and have
    /// no leading slash. Content hashes are computed here, once.
    ///
    /// # Panics
    ///
    /// Panics if a path is empty, absolute, or has an empty, `.` or `..`
    /// segment: such a file could never be requested.
    pub fn new(files: &'static [(&'static str, &'static [u8])]) -> Bundle {
        let mut map = HashMap::with_capacity(files.len());
        let mut dirs = HashSet::new();
        dirs.insert(String::new());
        for &(path, data) in files {
            assert!(
                !path.is_empty() && path.split('/').all(|s| !matches!(s, "" | "." | "..")),
                "bundle path {path:?} is not a relative path"
            );
            let mut hasher = DefaultHasher::new();
            hasher.write(data);
            map.insert(
                path,
                Entry {
                    data,
                    hash: hasher.finish(),
                },
            );
            let mut at = 0;
            while let Some(slash) = path[at..].find('/') {
                dirs.insert(path[..at + slash].to_owned());
                at += slash + 1;
            }
        }
        Bundle {
            inner: Arc::new(Inner { files: map, dirs }),
        }
    }

    /// The file at `path` (relative).
    pub(crate) fn file(&self, path: &[u8]) -> Option<Entry> {
        let path = std::str::from_utf8(path).ok()?;
        self.inner.files.get(path).copied()
    }

    /// True when `path` (relative; `""` for the root) is a directory.
    pub(crate) fn is_dir(&self, path: &[u8]) -> bool {
        std::str::from_utf8(path).is_ok_and(|p| self.inner.dirs.contains(p))
    }
}

impl fmt::Debug for Bundle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<&str> = self.inner.files.keys().copied().collect();
        names.sort_unstable();
        f.debug_struct("Bundle").field("files", &names).finish()
    }
}
