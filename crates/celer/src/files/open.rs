//! [`OpenFiles`]: a per-thread cache of open file descriptors, so a file
//! served again within the validity period costs an `fstat` instead of an
//! `open`, an `fstat` and a `close`.
//!
//! Each worker thread keeps its own table (connections never change thread
//! in the per-core model, and no lock is shared). An entry is the open
//! descriptor of a regular file, or the fact that a name does not exist
//! (precompressed siblings are looked for on every request that accepts a
//! coding). The metadata is read again from the descriptor on every hit, so
//! a file changed in place is served with its new length and validators; a
//! file replaced (renamed over) or deleted is served as it was for at most
//! the validity period, as nginx's `open_file_cache` does.
//!
//! Files of at most [`MAX_CACHED_FILE_BYTES`] also keep their bytes, used
//! while the file's length and modification time are those they were read
//! with: such a file is then served with no read at all.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::{File, Metadata};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;

/// Entries kept per thread for one `OpenFiles` (per `Files` instance);
/// past it the table is emptied and starts again.
pub const MAX_OPEN_FILES: usize = 1024;

/// Files this small keep their bytes in the open-file cache (at most
/// [`MAX_OPEN_FILES`] of them per thread: 8 MiB).
pub const MAX_CACHED_FILE_BYTES: u64 = 8 * 1024;

/// A cache of open files for one `Files` configuration.
#[derive(Debug, Clone)]
pub(crate) struct OpenFiles {
    /// Tells configurations apart: a table is never shared by two.
    id: u64,
    valid: Duration,
}

/// What a name was found to be.
#[derive(Debug, Clone)]
#[expect(
    clippy::large_enum_variant,
    reason = "a lookup's answer, moved once and never stored"
)]
pub(crate) enum Cached {
    /// An open regular file, its current metadata, and its bytes when
    /// they are known to be current.
    File(Arc<File>, Metadata, Option<Bytes>),
    /// No such file.
    Missing,
}

struct Entry {
    file: Option<Arc<File>>,
    /// A small file's bytes and the length and time they were read at.
    bytes: Option<(Bytes, u64, Option<SystemTime>)>,
    since: Instant,
}

thread_local! {
    static TABLES: RefCell<HashMap<u64, HashMap<PathBuf, Entry>>> = RefCell::new(HashMap::new());
}

static NEXT_ID: AtomicU64 = AtomicU64::new(0);

impl OpenFiles {
    /// A cache whose entries are trusted for `valid`.
    pub(crate) fn new(valid: Duration) -> OpenFiles {
        OpenFiles {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            valid,
        }
    }

    /// The same validity under a new identity (for a changed configuration).
    pub(crate) fn renewed(&self) -> OpenFiles {
        OpenFiles::new(self.valid)
    }

    /// What `path` was found to be within the validity period, if known;
    /// a cached file's metadata is read again from its descriptor.
    pub(crate) fn get(&self, path: &Path) -> Option<Cached> {
        let file = TABLES.with(|tables| {
            let mut tables = tables.borrow_mut();
            let table = tables.get_mut(&self.id)?;
            let entry = table.get(path)?;
            if entry.since.elapsed() >= self.valid {
                table.remove(path);
                return None;
            }
            Some((entry.file.clone(), entry.bytes.clone()))
        })?;
        match file {
            (None, _) => Some(Cached::Missing),
            (Some(file), bytes) => {
                let meta = file.metadata().ok()?;
                let bytes = bytes
                    .filter(|(_, len, at)| *len == meta.len() && *at == meta.modified().ok())
                    .map(|(data, ..)| data);
                Some(Cached::File(file, meta, bytes))
            }
        }
    }

    /// Remembers what `path` is: an open regular file (with its bytes if
    /// it is small; they are returned), or `None` for a name that does not
    /// exist.
    pub(crate) fn put(
        &self,
        path: PathBuf,
        file: Option<(&Arc<File>, &Metadata)>,
    ) -> Option<Bytes> {
        let bytes = file.and_then(|(file, meta)| read_small(file, meta));
        let file = file.map(|(file, _)| Arc::clone(file));
        let kept = bytes.as_ref().map(|(data, ..)| data.clone());
        TABLES.with(|tables| {
            let mut tables = tables.borrow_mut();
            let table = tables.entry(self.id).or_default();
            if table.len() >= MAX_OPEN_FILES {
                table.clear();
            }
            let since = Instant::now();
            table.insert(path, Entry { file, bytes, since });
        });
        kept
    }
}

/// The whole of a small file, with the length and time it was read at;
/// `None` for a larger one, or one that changed while it was read.
fn read_small(file: &File, meta: &Metadata) -> Option<(Bytes, u64, Option<SystemTime>)> {
    use std::os::unix::fs::FileExt;
    let len = meta.len();
    if len > MAX_CACHED_FILE_BYTES {
        return None;
    }
    let mut data = vec![0; len as usize];
    file.read_exact_at(&mut data, 0).ok()?;
    let after = file.metadata().ok()?;
    let at = meta.modified().ok();
    (after.len() == len && after.modified().ok() == at).then(|| (Bytes::from(data), len, at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_and_the_table_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.txt");
        std::fs::write(&path, "one").unwrap();
        let cache = OpenFiles::new(Duration::from_secs(3600));
        assert!(cache.get(&path).is_none());
        let file = Arc::new(File::open(&path).unwrap());
        let meta = file.metadata().unwrap();
        let kept = cache.put(path.clone(), Some((&file, &meta)));
        assert_eq!(kept.as_deref(), Some(&b"one"[..]));
        match cache.get(&path) {
            Some(Cached::File(_, _, Some(bytes))) => assert_eq!(bytes, "one"),
            other => panic!("{other:?}"),
        }
        // Changed in place: the hit reports the new length, and the kept
        // bytes are no longer offered.
        std::fs::write(&path, "three").unwrap();
        match cache.get(&path) {
            Some(Cached::File(_, meta, None)) => assert_eq!(meta.len(), 5),
            other => panic!("{other:?}"),
        }
        // Another configuration does not see it.
        assert!(cache.renewed().get(&path).is_none());
        let missing = dir.path().join("b.txt");
        cache.put(missing.clone(), None);
        assert!(matches!(cache.get(&missing), Some(Cached::Missing)));
        // At the bound the table starts again.
        for i in 0..MAX_OPEN_FILES {
            cache.put(dir.path().join(format!("n{i}")), None);
        }
        assert!(cache.get(&path).is_none());
        // Expired entries are not used.
        let brief = OpenFiles::new(Duration::ZERO);
        brief.put(path.clone(), None);
        assert!(brief.get(&path).is_none());
    }
}
