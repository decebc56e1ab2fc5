//! From a checked request path to what is served: the file system (or the
//! bundle), symlink and hidden-name policies, index files, listings and
//! precompressed siblings.
//!
//! File system calls run inline: `open` (with `O_NOFOLLOW` unless links are
//! followed anywhere, and `O_NONBLOCK` so a FIFO cannot block) and `fstat`
//! on the open descriptor, so the metadata describes the bytes that will be
//! sent. Parent directories are checked with `lstat` only when the path has
//! more than one segment and links are not followed anywhere.

use std::ffi::OsString;
use std::fs::{File, Metadata, OpenOptions};
use std::io;

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Response, StatusCode};

use super::body::Content;
use super::bundle::{Bundle, Entry};
use super::conditional::Validators;
use super::encoding::{self, Coding};
use super::open::Cached;
use super::path::{SafePath, has_hidden};
use super::respond::{Answer, Rep};
use super::{Config, Hidden, Redirect, Source, Symlinks, listing, mime};
use crate::Body;

/// An open file: its descriptor, its metadata, and its bytes when the
/// open-file cache keeps them.
#[derive(Debug)]
struct Opened {
    file: Arc<File>,
    meta: Metadata,
    bytes: Option<Bytes>,
}

impl Opened {
    /// Where the file's bytes are served from.
    fn content(self) -> Content {
        match self.bytes {
            Some(bytes) => Content::Memory(bytes),
            None => Content::File(self.file),
        }
    }
}

/// What a request resolved to.
#[derive(Debug)]
pub(crate) enum Found {
    /// A representation to serve.
    Rep(Rep),
    /// A directory listing page.
    Listing(String),
}

impl Config {
    /// Finds what `path` names.
    pub(super) fn find(
        &self,
        path: &SafePath,
        headers: &HeaderMap,
        redirect: &Redirect<'_>,
    ) -> Result<Found, Answer> {
        if path.hidden {
            self.hidden_answer()?;
        }
        match &self.source {
            Source::Dir(root) => self.find_in_dir(root, path, headers, redirect),
            Source::Bundle(bundle) => self.find_in_bundle(bundle, path, headers, redirect),
        }
    }

    /// The answer for a hidden name under the policy; `Ok` when allowed.
    fn hidden_answer(&self) -> Result<(), Answer> {
        match self.hidden {
            Hidden::Deny => Err(Answer::FORBIDDEN),
            Hidden::Ignore => Err(Answer::NOT_FOUND),
            Hidden::Allow => Ok(()),
        }
    }

    fn find_in_dir(
        &self,
        root: &Path,
        path: &SafePath,
        headers: &HeaderMap,
        redirect: &Redirect<'_>,
    ) -> Result<Found, Answer> {
        let rel = path.relative();
        let opened = self.open(root, rel)?;
        if opened.meta.is_dir() {
            drop(opened);
            if !path.dir_form {
                return Err(Answer::ToDirectory(redirect.location(path)));
            }
            for index in &self.index {
                let rel_index = rel.join(index);
                match self.open(root, &rel_index) {
                    Ok(found) if found.meta.is_file() => {
                        let rep = self.file_rep(root, &rel_index, index.as_bytes(), found, headers);
                        return Ok(Found::Rep(rep));
                    }
                    Ok(_) => {}
                    Err(answer) if answer == Answer::NOT_FOUND => {}
                    Err(answer) => return Err(answer),
                }
            }
            if !self.listing {
                return Err(Answer::NOT_FOUND);
            }
            let title = if rel.as_os_str().is_empty() {
                "/".to_owned()
            } else {
                format!("/{}/", String::from_utf8_lossy(path.as_bytes()))
            };
            let page = listing::page(&root.join(rel), &title, self.hidden == Hidden::Allow)
                .map_err(|err| io_answer(&err))?;
            return Ok(Found::Listing(page));
        }
        if path.dir_form {
            // A file asked for as a directory (`/a.txt/`), as ENOTDIR would say.
            return Err(Answer::NOT_FOUND);
        }
        if !opened.meta.is_file() {
            // FIFOs, sockets and devices.
            return Err(Answer::FORBIDDEN);
        }
        let name = path.file_name().unwrap_or_default();
        Ok(Found::Rep(self.file_rep(root, rel, name, opened, headers)))
    }

    /// The representation of an open regular file, or of its precompressed
    /// sibling when the client accepts one that exists.
    fn file_rep(
        &self,
        root: &Path,
        rel: &Path,
        name: &[u8],
        opened: Opened,
        headers: &HeaderMap,
    ) -> Rep {
        let meta = &opened.meta;
        let (len, validators) = (
            meta.len(),
            Validators::of_file(meta.len(), meta.modified().ok()),
        );
        let mut rep = Rep {
            content: opened.content(),
            len,
            validators,
            content_type: mime::content_type(name),
            encoding: None,
            cache: self.compiled_cache.for_name(name).cloned(),
            vary: self.precompressed,
        };
        if self.precompressed {
            if let Some((coding, found)) = self.sibling(root, rel, headers) {
                rep.len = found.meta.len();
                rep.validators = Validators::of_file(rep.len, found.meta.modified().ok());
                rep.content = found.content();
                rep.encoding = Some(coding);
            }
        }
        rep
    }

    /// The best precompressed sibling of `rel` that the client accepts.
    fn sibling(&self, root: &Path, rel: &Path, headers: &HeaderMap) -> Option<(Coding, Opened)> {
        encoding::preferred(headers).find_map(|coding| {
            let mut name = OsString::from(rel.as_os_str());
            name.push(coding.suffix());
            match self.open(root, Path::new(&name)) {
                Ok(found) if found.meta.is_file() => Some((coding, found)),
                _ => None,
            }
        })
    }

    /// Opens `rel` under `root` under the symlink policy; the metadata is
    /// read from the open descriptor. With an open-file cache, a regular
    /// file or a missing name found within its validity is not looked up
    /// again.
    fn open(&self, root: &Path, rel: &Path) -> Result<Opened, Answer> {
        let full = root.join(rel);
        let Some(cache) = &self.open_files else {
            let (file, meta) = self.open_uncached(root, rel, &full)?;
            return Ok(Opened {
                file,
                meta,
                bytes: None,
            });
        };
        match cache.get(&full) {
            Some(Cached::File(file, meta, bytes)) => return Ok(Opened { file, meta, bytes }),
            Some(Cached::Missing) => return Err(Answer::NOT_FOUND),
            None => {}
        }
        match self.open_uncached(root, rel, &full) {
            Ok((file, meta)) if meta.is_file() => {
                let bytes = cache.put(full, Some((&file, &meta)));
                Ok(Opened { file, meta, bytes })
            }
            Ok((file, meta)) => Ok(Opened {
                file,
                meta,
                bytes: None,
            }),
            Err(answer) => {
                if answer == Answer::NOT_FOUND {
                    cache.put(full, None);
                }
                Err(answer)
            }
        }
    }

    fn open_uncached(
        &self,
        root: &Path,
        rel: &Path,
        full: &Path,
    ) -> Result<(Arc<File>, Metadata), Answer> {
        let file = match self.symlinks {
            Symlinks::Follow => open_file(full, false),
            Symlinks::WithinRoot | Symlinks::Deny => {
                self.check_parents(root, rel)?;
                match open_file(full, true) {
                    // The last component is a link (O_NOFOLLOW says ELOOP).
                    Err(err) if err.raw_os_error() == Some(libc::ELOOP) => {
                        let real = self.confine_link(root, full)?;
                        open_file(&real, false)
                    }
                    other => other,
                }
            }
        }
        .map_err(|err| io_answer(&err))?;
        let meta = file.metadata().map_err(|err| io_answer(&err))?;
        Ok((Arc::new(file), meta))
    }

    /// Checks the directories leading to `rel`: a link among them must
    /// resolve under the root (or is refused under [`Symlinks::Deny`]).
    fn check_parents(&self, root: &Path, rel: &Path) -> Result<(), Answer> {
        let mut parents = rel.components();
        parents.next_back();
        let mut at = root.to_path_buf();
        for part in parents {
            at.push(part);
            let meta = std::fs::symlink_metadata(&at).map_err(|err| io_answer(&err))?;
            if meta.file_type().is_symlink() {
                self.confine_link(root, &root.join(rel))?;
                return Ok(());
            }
        }
        Ok(())
    }

    /// Resolves a path that crosses a link; the result must lie under the
    /// root and pass the hidden-name policy.
    fn confine_link(&self, root: &Path, full: &Path) -> Result<PathBuf, Answer> {
        if self.symlinks == Symlinks::Deny {
            return Err(Answer::FORBIDDEN);
        }
        let real = std::fs::canonicalize(full).map_err(|err| io_answer(&err))?;
        let Ok(rel) = real.strip_prefix(root) else {
            return Err(Answer::FORBIDDEN);
        };
        if has_hidden(rel) {
            self.hidden_answer()?;
        }
        Ok(real)
    }

    fn find_in_bundle(
        &self,
        bundle: &Bundle,
        path: &SafePath,
        headers: &HeaderMap,
        redirect: &Redirect<'_>,
    ) -> Result<Found, Answer> {
        let rel = path.as_bytes();
        if let Some(entry) = bundle.file(rel) {
            if path.dir_form {
                return Err(Answer::NOT_FOUND);
            }
            let name = path.file_name().unwrap_or_default();
            return Ok(Found::Rep(
                self.bundle_rep(bundle, rel, name, entry, headers),
            ));
        }
        if !bundle.is_dir(rel) {
            return Err(Answer::NOT_FOUND);
        }
        if !path.dir_form {
            return Err(Answer::ToDirectory(redirect.location(path)));
        }
        for index in &self.index {
            let mut joined = rel.to_vec();
            if !joined.is_empty() {
                joined.push(b'/');
            }
            joined.extend_from_slice(index.as_bytes());
            if let Some(entry) = bundle.file(&joined) {
                return Ok(Found::Rep(self.bundle_rep(
                    bundle,
                    &joined,
                    index.as_bytes(),
                    entry,
                    headers,
                )));
            }
        }
        Err(Answer::NOT_FOUND)
    }

    fn bundle_rep(
        &self,
        bundle: &Bundle,
        rel: &[u8],
        name: &[u8],
        entry: Entry,
        headers: &HeaderMap,
    ) -> Rep {
        let (entry, coding) = self
            .precompressed
            .then(|| {
                encoding::preferred(headers).find_map(|coding| {
                    let mut sibling = rel.to_vec();
                    sibling.extend_from_slice(coding.suffix().as_bytes());
                    bundle.file(&sibling).map(|e| (e, Some(coding)))
                })
            })
            .flatten()
            .unwrap_or((entry, None));
        let len = entry.data.len() as u64;
        Rep {
            content: Content::Static(entry.data),
            len,
            validators: Validators::of_content(len, entry.hash),
            content_type: mime::content_type(name),
            encoding: coding,
            cache: self.compiled_cache.for_name(name).cloned(),
            vary: self.precompressed,
        }
    }
}

/// Opens a file for reading without blocking on FIFOs; with `no_follow`, a
/// link as the last component fails with ELOOP.
fn open_file(path: &Path, no_follow: bool) -> io::Result<File> {
    let flags = if no_follow {
        libc::O_NONBLOCK | libc::O_NOFOLLOW
    } else {
        libc::O_NONBLOCK
    };
    OpenOptions::new().read(true).custom_flags(flags).open(path)
}

/// The listing page as a response.
pub(crate) fn listing_response(page: String, head: bool) -> Response<Body> {
    let len = page.len() as u64;
    let body = if head {
        Body::empty()
    } else {
        Body::from(Bytes::from(page))
    };
    let mut res = Response::new(body);
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    res.headers_mut()
        .insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    res
}

/// The answer for a file-system error.
fn io_answer(err: &io::Error) -> Answer {
    let status = match err.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory => StatusCode::NOT_FOUND,
        io::ErrorKind::PermissionDenied => StatusCode::FORBIDDEN,
        // A name too long or a symlink loop is the client's path (or a broken
        // link), not a server fault.
        _ if matches!(err.raw_os_error(), Some(libc::ENAMETOOLONG | libc::ELOOP)) => {
            StatusCode::NOT_FOUND
        }
        _ => {
            tracing::warn!(target: "celer::files", error = %err, "file system error");
            StatusCode::INTERNAL_SERVER_ERROR
        }
    };
    Answer::Status(status)
}
