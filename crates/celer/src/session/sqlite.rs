//! `SqliteStore`: a server session store in one SQLite database file (WAL
//! mode), its blocking calls on a one-thread [`Dispatcher`].

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures_util::future::BoxFuture;
use rusqlite::{Connection, OptionalExtension, params};

use super::store::{SessionStore, StoreError, new_id};
use super::{Record, now_ms};
use crate::dispatch::Dispatcher;

/// The default number of sessions a [`SqliteStore`] holds: 1,000,000. A
/// new session past it first purges the expired ones, then evicts those
/// closest to expiring (the least recently used).
pub const DEFAULT_MAX_SQLITE_SESSIONS: usize = 1_000_000;

/// The default interval between purges of expired rows: 60 seconds. A
/// purge runs on the store's thread before a save once this long has
/// passed since the last one; an expired row is also deleted when it is
/// loaded, and is never returned.
pub const DEFAULT_PURGE_INTERVAL: Duration = Duration::from_secs(60);

/// How many calls may wait for the store's thread: 1024. A call past it
/// waits up to [`SQLITE_QUEUE_WAIT`] for a place, then fails (`500`).
pub const SQLITE_QUEUE: usize = 1024;

/// How long a call waits for a place in a full queue: 5 seconds.
pub const SQLITE_QUEUE_WAIT: Duration = Duration::from_secs(5);

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS celer_sessions (
    id TEXT PRIMARY KEY NOT NULL,
    record TEXT NOT NULL,
    expires INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS celer_sessions_expires ON celer_sessions (expires);
";

/// Sessions in a SQLite database file, kept across restarts: the server
/// store to use by default when sessions must outlive the process.
///
/// - WAL mode with `synchronous = NORMAL`: a save survives the process
///   dying; the last saves before a power loss may be lost (a session a
///   user has to sign in to again, never a corrupt file).
/// - Every call runs on the store's own thread (a [`Dispatcher`] of one
///   thread, at most [`SQLITE_QUEUE`] calls waiting), never on the server's
///   async threads; one connection, statements compiled once.
/// - A row carries its expiry (now + the ttl of its last save): an expired
///   row reads as absent and is deleted; the others are purged every
///   [`DEFAULT_PURGE_INTERVAL`] ([`purge_interval`](Self::purge_interval)).
/// - At most [`DEFAULT_MAX_SQLITE_SESSIONS`] rows
///   ([`max_sessions`](Self::max_sessions)).
/// - One process per file: the row count is kept in memory.
/// - Calls wait with a deadline, so they need a tokio runtime with its
///   time driver (every Celer server has one).
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use celer::session::{Record, SessionStore, SqliteStore};
/// use std::time::Duration;
///
/// let dir = tempfile::tempdir().unwrap();
/// let store = SqliteStore::open(dir.path().join("sessions.sqlite3")).unwrap();
/// let id = store.save(None, &Record::new(), Duration::from_secs(60)).await.unwrap();
/// assert!(store.load(&id).await.unwrap().is_some());
/// drop(store);
/// // The same file, opened again: the session is still there.
/// let store = SqliteStore::open(dir.path().join("sessions.sqlite3")).unwrap();
/// assert!(store.load(&id).await.unwrap().is_some());
/// assert_eq!(store.len().await.unwrap(), 1);
/// # });
/// ```
#[derive(Clone)]
pub struct SqliteStore {
    db: Arc<Mutex<Db>>,
    thread: Dispatcher,
}

struct Db {
    conn: Connection,
    /// Rows in the table: counted at open, kept by every change.
    rows: usize,
    max_rows: usize,
    purge_every: u64,
    /// When expired rows were last purged (ms since the epoch).
    last_purge: u64,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let db = self.db();
        f.debug_struct("SqliteStore")
            .field("rows", &db.rows)
            .field("max_rows", &db.max_rows)
            .finish_non_exhaustive()
    }
}

// By value: it is the argument of `map_err`.
#[allow(clippy::needless_pass_by_value)]
/// The store's thread refused the call: busy (its queue stayed full for
/// `SQLITE_QUEUE_WAIT`: `503`) or stopped (`500`).
fn dispatch_err(err: crate::dispatch::DispatchError) -> StoreError {
    if err.is_overloaded() {
        StoreError::busy(err)
    } else {
        StoreError::new(err)
    }
}

fn db_err(err: rusqlite::Error) -> StoreError {
    StoreError::new(err)
}

/// Whether `handle` can be an id of [`new_id`]: 43 base64url characters.
/// Anything else is not looked up.
fn is_id(handle: &str) -> bool {
    handle.len() == 43
        && handle
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl SqliteStore {
    /// Opens the database at `path` (creating it and its directory when
    /// missing) in WAL mode with `synchronous = NORMAL`.
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteStore, StoreError> {
        let path = path.as_ref();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|err| StoreError::new(format!("{}: {err}", dir.display())))?;
        }
        let conn = Connection::open(path)
            .map_err(|err| StoreError::new(format!("{}: {err}", path.display())))?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
            .map_err(db_err)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::new(format!(
                "{}: the database refused WAL mode ({mode})",
                path.display()
            )));
        }
        conn.execute_batch(&format!(
            "PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 5000; {SCHEMA}"
        ))
        .map_err(db_err)?;
        let mut db = Db {
            conn,
            rows: 0,
            max_rows: DEFAULT_MAX_SQLITE_SESSIONS,
            purge_every: DEFAULT_PURGE_INTERVAL.as_millis() as u64,
            last_purge: 0,
        };
        db.purge(now_ms()).map_err(db_err)?;
        let rows: i64 = db
            .conn
            .query_row("SELECT COUNT(*) FROM celer_sessions", [], |row| row.get(0))
            .map_err(db_err)?;
        db.rows = rows as usize;
        Ok(SqliteStore {
            db: Arc::new(Mutex::new(db)),
            thread: Dispatcher::builder()
                .threads(1)
                .queue(SQLITE_QUEUE)
                .name("celer-sessions")
                .build(),
        })
    }

    /// Holds at most `max` sessions (at least 1; default
    /// [`DEFAULT_MAX_SQLITE_SESSIONS`]).
    pub fn max_sessions(self, max: usize) -> SqliteStore {
        self.db().max_rows = max.max(1);
        self
    }

    /// Purges expired rows at most this often (default
    /// [`DEFAULT_PURGE_INTERVAL`]).
    pub fn purge_interval(self, every: Duration) -> SqliteStore {
        self.db().purge_every = every.as_millis() as u64;
        self
    }

    /// How many sessions the file holds (expired ones not yet purged
    /// included).
    pub async fn len(&self) -> Result<usize, StoreError> {
        self.run(|db| Ok(db.rows)).await
    }

    /// Whether the file holds no session.
    pub async fn is_empty(&self) -> Result<bool, StoreError> {
        Ok(self.len().await? == 0)
    }

    /// Deletes the expired sessions now; returns how many.
    pub async fn purge(&self) -> Result<usize, StoreError> {
        self.run(|db| db.purge(now_ms())).await
    }

    fn db(&self) -> MutexGuard<'_, Db> {
        self.db.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `job` on the store's thread.
    async fn run<T: Send + 'static>(
        &self,
        job: impl FnOnce(&mut Db) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, StoreError> {
        let db = self.db.clone();
        self.thread
            .dispatch_wait(SQLITE_QUEUE_WAIT, move || {
                let mut db = db.lock().unwrap_or_else(PoisonError::into_inner);
                job(&mut db)
            })
            .await
            .map_err(dispatch_err)?
            .map_err(db_err)
    }
}

impl Db {
    fn purge(&mut self, now: u64) -> rusqlite::Result<usize> {
        let gone = self
            .conn
            .prepare_cached("DELETE FROM celer_sessions WHERE expires <= ?1")?
            .execute([now as i64])?;
        self.rows = self.rows.saturating_sub(gone);
        self.last_purge = now;
        Ok(gone)
    }

    fn load(&mut self, id: &str, now: u64) -> rusqlite::Result<Option<Arc<Record>>> {
        let row: Option<(String, i64)> = self
            .conn
            .prepare_cached("SELECT record, expires FROM celer_sessions WHERE id = ?1")?
            .query_row([id], |row| Ok((row.get(0)?, row.get(1)?)))
            .optional()?;
        let Some((json, expires)) = row else {
            return Ok(None);
        };
        if expires as u64 <= now {
            self.delete(id)?;
            return Ok(None);
        }
        serde_json::from_str(&json)
            .map(|record| Some(Arc::new(record)))
            .map_err(|err| {
                rusqlite::Error::FromSqlConversionFailure(
                    1,
                    rusqlite::types::Type::Text,
                    err.into(),
                )
            })
    }

    fn save(
        &mut self,
        id: Option<&str>,
        json: &str,
        ttl: Duration,
        now: u64,
    ) -> Result<String, StoreError> {
        let expires = now
            .saturating_add(ttl.as_millis() as u64)
            .min(i64::MAX as u64) as i64;
        if now.saturating_sub(self.last_purge) >= self.purge_every {
            self.purge(now).map_err(db_err)?;
        }
        if let Some(id) = id {
            // Only a live row is updated: an expired or unknown id is
            // never revived (a new id is minted below).
            let updated = self
                .conn
                .prepare_cached(
                    "UPDATE celer_sessions SET record = ?2, expires = ?3 \
                     WHERE id = ?1 AND expires > ?4",
                )
                .and_then(|mut s| s.execute(params![id, json, expires, now as i64]))
                .map_err(db_err)?;
            if updated == 1 {
                return Ok(id.to_owned());
            }
        }
        if self.rows >= self.max_rows {
            self.purge(now).map_err(db_err)?;
        }
        if self.rows >= self.max_rows {
            let excess = self.rows + 1 - self.max_rows;
            let gone = self
                .conn
                .prepare_cached(
                    "DELETE FROM celer_sessions WHERE id IN \
                     (SELECT id FROM celer_sessions ORDER BY expires LIMIT ?1)",
                )
                .and_then(|mut s| s.execute([excess as i64]))
                .map_err(db_err)?;
            self.rows = self.rows.saturating_sub(gone);
        }
        let id = new_id()?;
        self.conn
            .prepare_cached("INSERT INTO celer_sessions (id, record, expires) VALUES (?1, ?2, ?3)")
            .and_then(|mut s| s.execute(params![id, json, expires]))
            .map_err(db_err)?;
        self.rows += 1;
        Ok(id)
    }

    fn delete(&mut self, id: &str) -> rusqlite::Result<()> {
        let gone = self
            .conn
            .prepare_cached("DELETE FROM celer_sessions WHERE id = ?1")?
            .execute([id])?;
        self.rows = self.rows.saturating_sub(gone);
        Ok(())
    }
}

impl SessionStore for SqliteStore {
    fn load<'a>(
        &'a self,
        handle: &'a str,
    ) -> BoxFuture<'a, Result<Option<Arc<Record>>, StoreError>> {
        Box::pin(async move {
            if !is_id(handle) {
                return Ok(None);
            }
            let id = handle.to_owned();
            self.run(move |db| db.load(&id, now_ms())).await
        })
    }

    fn save<'a>(
        &'a self,
        handle: Option<&'a str>,
        record: &'a Record,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<String, StoreError>> {
        Box::pin(async move {
            let json = serde_json::to_string(record).map_err(StoreError::new)?;
            let id = handle.filter(|h| is_id(h)).map(str::to_owned);
            let db = self.db.clone();
            self.thread
                .dispatch_wait(SQLITE_QUEUE_WAIT, move || {
                    let mut db = db.lock().unwrap_or_else(PoisonError::into_inner);
                    db.save(id.as_deref(), &json, ttl, now_ms())
                })
                .await
                .map_err(dispatch_err)?
        })
    }

    fn delete<'a>(&'a self, handle: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            if !is_id(handle) {
                return Ok(());
            }
            let id = handle.to_owned();
            self.run(move |db| db.delete(&id)).await
        })
    }
}
