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

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::{File, Metadata};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Entries kept per thread for one [`OpenFiles`] (per `Files` instance);
/// past it the table is emptied and starts again.
pub const MAX_OPEN_FILES: usize = 1024;

/// A cache of open files for one `Files` configuration.
#[derive(Debug, Clone)]
pub(crate) struct OpenFiles {
    /// Tells configurations apart: a table is never shared by two.
    id: u64,
    valid: Duration,
}

/// What a name was found to be.
#[derive(Debug, Clone)]
pub(crate) enum Cached {
    /// An open regular file and its current metadata.
    File(Arc<File>, Metadata),
    /// No such file.
    Missing,
}

struct Entry {
    file: Option<Arc<File>>,
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
            Some(entry.file.clone())
        })?;
        match file {
            None => Some(Cached::Missing),
            Some(file) => match file.metadata() {
                Ok(meta) => Some(Cached::File(file, meta)),
                Err(_) => None,
            },
        }
    }

    /// Remembers what `path` is: an open regular file, or `None` for a
    /// name that does not exist.
    pub(crate) fn put(&self, path: PathBuf, file: Option<Arc<File>>) {
        TABLES.with(|tables| {
            let mut tables = tables.borrow_mut();
            let table = tables.entry(self.id).or_default();
            if table.len() >= MAX_OPEN_FILES {
                table.clear();
            }
            let since = Instant::now();
            table.insert(path, Entry { file, since });
        });
    }
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
        cache.put(path.clone(), Some(Arc::new(File::open(&path).unwrap())));
        // Changed in place: the hit reports the new length.
        std::fs::write(&path, "three").unwrap();
        match cache.get(&path) {
            Some(Cached::File(_, meta)) => assert_eq!(meta.len(), 5),
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
