//! The `file:PATH` source: a file watched with inotify (the `notify`
//! crate), its metadata also polled every interval, so a change is seen at
//! once where inotify works and within an interval where it does not
//! (network file systems, a watch limit reached).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use celer::feed::{Feed, Source, SourceFuture};
use notify::{RecursiveMode, Watcher};
use tokio::sync::Notify;

/// Reads `PATH` when it changes and offers it to the feed; a file that
/// cannot be read (missing, unreadable) is a source failure, and the last
/// good version stays.
///
/// The directory is watched, not the file, so a file replaced by a rename
/// (the atomic way to write one) is seen like one written in place. A
/// writer that writes in place may be seen half-way: that read is not
/// JSON, is refused and counted, and the write's end is read next.
pub struct FileSource {
    path: PathBuf,
}

/// What identifies one content of the file without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

impl FileSource {
    /// A source reading `path`.
    pub fn new(path: impl Into<PathBuf>) -> FileSource {
        FileSource { path: path.into() }
    }
}

impl fmt::Debug for FileSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileSource")
            .field("path", &self.path)
            .finish()
    }
}

impl Source for FileSource {
    fn describe(&self) -> String {
        format!("file:{}", self.path.display())
    }

    fn run(self: Box<Self>, feed: Feed) -> SourceFuture {
        Box::pin(run(self.path, feed))
    }
}

async fn run(path: PathBuf, feed: Feed) {
    let changed = Arc::new(Notify::new());
    // Kept alive for the life of the task; dropping it ends the watch.
    let _watcher = match watch(&path, changed.clone()) {
        Ok(watcher) => Some(watcher),
        Err(err) => {
            tracing::warn!(target: "celer::feed", feed = feed.name(), path = %path.display(),
                error = %err, "cannot watch the file; polling its modification time");
            None
        }
    };
    let mut ticks = tokio::time::interval(feed.interval());
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last: Option<Stamp> = None;
    let mut failing = false;
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = changed.notified() => {}
        }
        match stamp(&path).await {
            Ok(now) if Some(now) == last && !failing => continue,
            Ok(now) => match tokio::fs::read(&path).await {
                Ok(doc) => {
                    last = Some(now);
                    failing = false;
                    let _ = feed.update(doc);
                }
                Err(err) => {
                    failing = true;
                    feed.source_failed(format!("cannot read {}: {err}", path.display()));
                }
            },
            Err(err) => {
                failing = true;
                last = None;
                feed.source_failed(format!("cannot read {}: {err}", path.display()));
            }
        }
    }
}

async fn stamp(path: &Path) -> std::io::Result<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let meta = tokio::fs::metadata(path).await?;
    Ok(Stamp {
        modified: meta.modified().ok(),
        len: meta.len(),
        inode: meta.ino(),
    })
}

/// Watches the directory of `path`, waking `changed` on any event about
/// the file's name.
fn watch(path: &Path, changed: Arc<Notify>) -> notify::Result<notify::RecommendedWatcher> {
    let name = path.file_name().map(|n| n.to_owned());
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
        _ => PathBuf::from("."),
    };
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        let ours = event
            .paths
            .iter()
            .any(|p| p.file_name().map(|n| n.to_owned()) == name);
        if ours {
            changed.notify_one();
        }
    })?;
    watcher.watch(&dir, RecursiveMode::NonRecursive)?;
    Ok(watcher)
}
