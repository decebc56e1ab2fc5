//! `SqliteStore`: the embedded store, one SQLite database in WAL mode under
//! the data directory, one committed transaction per state change.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rusqlite::{Connection, MAIN_DB, OptionalExtension, Row, TransactionBehavior, params};

use super::{Claim, Finish, Store, StoreError, Submit};
use crate::keys::{ApiKey, KeyHash, KeyId, NewKey, OverQuota, Quota, Quotas, StoredKey};
use crate::model::{
    ListFilter, Millis, NewTask, Outcome, Percentiles, ResultChunk, Stats, Submitted, Task, TaskId,
    millis,
};

/// The database's file name inside the data directory.
pub const DB_FILE: &str = "tasks.sqlite3";

/// What a commit survives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// A commit survives the process dying (kill -9, a panic, OOM); the last
    /// commits before a power loss or kernel crash may be lost. SQLite's
    /// `synchronous = NORMAL` in WAL mode: no fsync per commit.
    #[default]
    Process,
    /// A commit survives a power loss too: `synchronous = FULL`, an fsync
    /// of the log per commit.
    PowerLoss,
}

/// Statements kept compiled per connection. rusqlite's default (16) is
/// fewer than the statements of a task's life (submit, claim, finish,
/// the reads), so they evicted each other and were compiled again.
const STATEMENT_CACHE: usize = 64;

/// SQLite's page cache, in KiB (its default is 2 MiB): the queue's index
/// pages and the recent tasks stay in memory.
const CACHE_KIB: u32 = 16 * 1024;

/// The SQLite store. One connection, used by one thread at a time.
#[derive(Debug)]
pub struct SqliteStore {
    /// The connection; every method takes it for the length of one
    /// transaction.
    conn: Mutex<Connection>,
    /// Tasks in the `queued` state: counted at open, then kept by each
    /// transaction that moves one in or out (under the connection's lock,
    /// after its commit), so a submit does not count the queue.
    queued: AtomicU64,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS tasks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    input TEXT NOT NULL,
    priority INTEGER NOT NULL,
    run_at INTEGER NOT NULL,
    timeout_ms INTEGER NOT NULL,
    max_attempts INTEGER NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    progress REAL,
    error TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    result TEXT,
    lease_owner TEXT,
    lease_until INTEGER,
    created_at INTEGER NOT NULL,
    started_at INTEGER,
    finished_at INTEGER,
    updated_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS tasks_due ON tasks (state, priority DESC, run_at, id);
CREATE INDEX IF NOT EXISTS tasks_lease ON tasks (state, lease_until);
CREATE INDEX IF NOT EXISTS tasks_finished ON tasks (finished_at);
CREATE INDEX IF NOT EXISTS tasks_kind ON tasks (kind, id);
CREATE TABLE IF NOT EXISTS idempotency (
    key TEXT PRIMARY KEY,
    task_id INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS idempotency_expiry ON idempotency (expires_at);
";

/// Changes to [`SCHEMA`], in order: migration `n` takes a database from
/// `PRAGMA user_version` `n` to `n + 1`. Databases made before a change
/// are brought up to date when opened; a migration never drops data.
const MIGRATIONS: &[&str] = &[
    // 1: API keys (docs/decisions/112-task-api-keys.md): the keys, the
    // key of each task, and each key's submissions of the last hour.
    "
ALTER TABLE tasks ADD COLUMN key_id INTEGER;
CREATE INDEX tasks_key ON tasks (key_id, state);
CREATE TABLE api_keys (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    hash BLOB NOT NULL UNIQUE,
    hint TEXT NOT NULL,
    max_concurrent INTEGER,
    per_hour INTEGER,
    input_bytes_per_hour INTEGER,
    max_input_bytes INTEGER,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
);
CREATE TABLE key_usage (
    key_id INTEGER NOT NULL,
    at INTEGER NOT NULL,
    input_bytes INTEGER NOT NULL
);
CREATE INDEX key_usage_window ON key_usage (key_id, at);
",
    // 2: partial indexes (docs/decisions/122-task-partial-indexes.md):
    // each index holds only the tasks its queries look for, so a submit
    // writes the table, the queue's index and `tasks_kind`, and the tasks
    // that have finished are in no index a submit or a claim touches.
    "
DROP INDEX tasks_due;
CREATE INDEX tasks_due ON tasks (priority DESC, run_at, id) WHERE state = 'queued';
DROP INDEX tasks_lease;
CREATE INDEX tasks_lease ON tasks (lease_until) WHERE state = 'running';
DROP INDEX tasks_finished;
CREATE INDEX tasks_finished ON tasks (finished_at) WHERE finished_at IS NOT NULL;
DROP INDEX tasks_key;
CREATE INDEX tasks_key ON tasks (key_id, state) WHERE key_id IS NOT NULL;
",
];

/// The schema version this code writes (`PRAGMA user_version`): one per
/// change of the schema since the first release.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

const KEY_COLUMNS: &str = "id, name, hint, max_concurrent, per_hour, input_bytes_per_hour, \
                           max_input_bytes, created_at, revoked_at";

macro_rules! columns {
    () => {
        "id, kind, input, priority, run_at, timeout_ms, max_attempts, state, attempts, progress, \
         error, cancel_requested, result IS NOT NULL, created_at, started_at, finished_at, \
         updated_at, key_id"
    };
}

const COLUMNS: &str = columns!();
const GET: &str = concat!("SELECT ", columns!(), " FROM tasks WHERE id = ?1");

// The statements that look tasks up by state, lease, finish time or key:
// each must search its partial index (`MIGRATIONS` 2), which holds only
// the rows its `WHERE` names, never scan the table (checked by the test
// `statements_search_their_partial_indexes`).

/// The highest priority among queued tasks.
const TOP_LEVEL: &str = "SELECT MAX(priority) FROM tasks WHERE state = 'queued'";
/// The next priority level down.
const NEXT_LEVEL: &str = "SELECT MAX(priority) FROM tasks WHERE state = 'queued' AND priority < ?1";
/// Due tasks of one priority level.
const DUE_AT_LEVEL: &str = "SELECT id FROM tasks WHERE state = 'queued' AND priority = ?3 \
                            AND run_at <= ?1 ORDER BY run_at, id LIMIT ?2";
/// Due tasks of every level from one down.
const DUE_BELOW: &str = "SELECT id FROM tasks WHERE state = 'queued' AND priority <= ?3 \
                         AND run_at <= ?1 ORDER BY priority DESC, run_at, id LIMIT ?2";
/// The queue's length, counted at open.
const COUNT_QUEUED: &str = "SELECT COUNT(*) FROM tasks WHERE state = 'queued'";
/// Running tasks whose lease ran out.
const EXPIRED: &str = "SELECT id FROM tasks WHERE state = 'running' AND lease_until < ?1 LIMIT ?2";
/// Ends the expired attempts of tasks asked to cancel.
const EXPIRED_CANCELLED: &str = "UPDATE tasks SET state = 'cancelled', finished_at = ?1, \
     updated_at = ?1, lease_owner = NULL, lease_until = NULL \
     WHERE state = 'running' AND lease_until < ?1 AND cancel_requested = 1";
/// Ends the expired last attempts.
const EXPIRED_DEAD: &str = "UPDATE tasks SET state = 'dead', finished_at = ?1, updated_at = ?1, \
     lease_owner = NULL, lease_until = NULL, \
     error = 'the lease of its last attempt ran out (the worker died or stalled)' \
     WHERE state = 'running' AND lease_until < ?1 AND attempts >= max_attempts";
/// Deletes tasks finished before a time.
const PURGE_FINISHED: &str = "DELETE FROM tasks WHERE finished_at IS NOT NULL AND finished_at < ?1";
/// The most recently finished tasks' wait and run times.
const RECENT_TIMES: &str = "SELECT started_at - created_at, finished_at - started_at FROM tasks \
     WHERE finished_at IS NOT NULL AND started_at IS NOT NULL \
     ORDER BY finished_at DESC LIMIT ?1";
/// An API key's queued and running tasks.
const KEY_LIVE: &str =
    "SELECT COUNT(*) FROM tasks WHERE key_id = ?1 AND state IN ('queued', 'running')";

// By value: it is the argument of `map_err`.
#[allow(clippy::needless_pass_by_value)]
fn db_err(err: rusqlite::Error) -> StoreError {
    StoreError::new(err.to_string())
}

fn task_of(row: &Row<'_>) -> rusqlite::Result<Task> {
    let state: String = row.get(7)?;
    Ok(Task {
        id: row.get(0)?,
        kind: row.get(1)?,
        input: row.get(2)?,
        priority: row.get(3)?,
        run_at: row.get(4)?,
        timeout_ms: row.get(5)?,
        max_attempts: row.get(6)?,
        state: state.parse().map_err(|err: String| {
            rusqlite::Error::FromSqlConversionFailure(7, rusqlite::types::Type::Text, err.into())
        })?,
        attempts: row.get(8)?,
        progress: row.get(9)?,
        error: row.get(10)?,
        cancel_requested: row.get(11)?,
        has_result: row.get(12)?,
        created_at: row.get(13)?,
        started_at: row.get(14)?,
        finished_at: row.get(15)?,
        updated_at: row.get(16)?,
        key_id: row.get(17)?,
    })
}

fn key_of(row: &Row<'_>) -> rusqlite::Result<ApiKey> {
    let quota = |i: usize| -> rusqlite::Result<Option<u64>> {
        Ok(row.get::<_, Option<i64>>(i)?.map(|n| n.max(0) as u64))
    };
    Ok(ApiKey {
        id: row.get(0)?,
        name: row.get(1)?,
        hint: row.get(2)?,
        quotas: Quotas {
            max_concurrent: quota(3)?,
            per_hour: quota(4)?,
            input_bytes_per_hour: quota(5)?,
            max_input_bytes: quota(6)?,
        },
        created_at: row.get(7)?,
        revoked_at: row.get(8)?,
    })
}

fn key_in(conn: &Connection, id: KeyId) -> rusqlite::Result<Option<ApiKey>> {
    conn.prepare_cached(&format!("SELECT {KEY_COLUMNS} FROM api_keys WHERE id = ?1"))?
        .query_row([id], key_of)
        .optional()
}

/// Seconds to wait for an hourly window's entry made at `at` to leave it:
/// at least 1.
fn until_out(at: Millis, now: Millis) -> Duration {
    let window = millis(crate::keys::QUOTA_WINDOW);
    let ms = at.saturating_add(window).saturating_sub(now).max(1) as u64;
    Duration::from_secs(ms.div_ceil(1000))
}

/// Why key `key_id` may not submit `input_bytes` more at `now`: revoked,
/// or over a quota; `None` when it may.
fn key_refusal(
    conn: &Connection,
    key_id: KeyId,
    input_bytes: u64,
    now: Millis,
) -> rusqlite::Result<Option<Submitted>> {
    let Some(key) = key_in(conn, key_id)? else {
        return Ok(Some(Submitted::KeyRevoked));
    };
    if key.revoked_at.is_some() {
        return Ok(Some(Submitted::KeyRevoked));
    }
    let q = key.quotas;
    let over = |quota, limit, retry_after| {
        Ok(Some(Submitted::OverQuota(OverQuota {
            quota,
            limit,
            retry_after,
        })))
    };
    if let Some(limit) = q.max_input_bytes
        && input_bytes > limit
    {
        return over(Quota::MaxInputBytes, limit, None);
    }
    if let Some(limit) = q.max_concurrent {
        let live: i64 = conn
            .prepare_cached(KEY_LIVE)?
            .query_row([key_id], |row| row.get(0))?;
        if live as u64 >= limit {
            // No telling when one ends: ask again in a second.
            return over(Quota::MaxConcurrent, limit, Some(Duration::from_secs(1)));
        }
    }
    if q.per_hour.is_none() && q.input_bytes_per_hour.is_none() {
        return Ok(None);
    }
    let since = now.saturating_sub(millis(crate::keys::QUOTA_WINDOW));
    let (count, bytes): (i64, i64) = conn
        .prepare_cached(
            "SELECT COUNT(*), COALESCE(SUM(input_bytes), 0) FROM key_usage \
             WHERE key_id = ?1 AND at > ?2",
        )?
        .query_row(params![key_id, since], |row| Ok((row.get(0)?, row.get(1)?)))?;
    let (count, bytes) = (count.max(0) as u64, bytes.max(0) as u64);
    let mut window = conn.prepare_cached(
        "SELECT at, input_bytes FROM key_usage WHERE key_id = ?1 AND at > ?2 ORDER BY at",
    )?;
    if let Some(limit) = q.per_hour
        && count >= limit
    {
        // Fits again when `count - limit + 1` entries have left the window.
        let skip = (count - limit) as usize;
        let at: Option<Millis> = window
            .query_map(params![key_id, since], |row| row.get(0))?
            .nth(skip)
            .transpose()?;
        return over(Quota::PerHour, limit, at.map(|at| until_out(at, now)));
    }
    if let Some(limit) = q.input_bytes_per_hour
        && bytes + input_bytes > limit
    {
        if input_bytes > limit {
            return over(Quota::InputBytesPerHour, limit, None);
        }
        // Fits again when enough of the oldest input has left the window.
        let mut left = bytes;
        let mut retry = None;
        let rows = window.query_map(params![key_id, since], |row| {
            Ok((row.get::<_, Millis>(0)?, row.get::<_, i64>(1)?))
        })?;
        for row in rows {
            let (at, n) = row?;
            left = left.saturating_sub(n.max(0) as u64);
            if left + input_bytes <= limit {
                retry = Some(until_out(at, now));
                break;
            }
        }
        return over(Quota::InputBytesPerHour, limit, retry);
    }
    Ok(None)
}

/// Brings the schema up to [`SCHEMA_VERSION`], in one transaction (two
/// processes opening one old database migrate it once).
fn migrate(conn: &mut Connection) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let version: i64 = tx.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    for (n, migration) in MIGRATIONS.iter().enumerate().skip(version.max(0) as usize) {
        tx.execute_batch(migration)?;
        tx.execute_batch(&format!("PRAGMA user_version = {}", n + 1))?;
    }
    tx.commit()
}

fn get_in(conn: &Connection, id: TaskId) -> rusqlite::Result<Option<Task>> {
    conn.prepare_cached(GET)?
        .query_row([id], task_of)
        .optional()
}

/// Runs `sql` through the connection's statement cache: a statement is
/// compiled once per connection, not once per call.
fn exec(conn: &Connection, sql: &str, params: impl rusqlite::Params) -> rusqlite::Result<usize> {
    conn.prepare_cached(sql)?.execute(params)
}

/// Whether `task` is the submission `new` (the same body under one key).
fn same_submission(task: &Task, new: &NewTask) -> bool {
    let input = |text: &str| serde_json::from_str::<serde_json::Value>(text).ok();
    task.kind == new.kind
        && input(&task.input) == input(&new.input)
        && task.priority == new.priority
        && task.timeout_ms == new.timeout_ms
        && task.max_attempts == new.max_attempts
}

// Single-row writes in the hot path say `OR FAIL`: the constraints of a
// one-row write are checked before it writes, and any error rolls the
// whole transaction back (the `Transaction` is dropped uncommitted), so it
// is as safe as the default `ABORT`; but SQLite then keeps no statement
// journal, a copy of every page the statement touches.

/// Ends `claim`'s attempt inside `tx`: the task after it (`None` when the
/// attempt is stale) and whether it was queued again for a retry.
fn finish_in(
    tx: &Connection,
    claim: &Claim,
    outcome: &Outcome,
    backoff: Duration,
    now: Millis,
) -> rusqlite::Result<(Option<Task>, bool)> {
    let current: Option<(u32, u32)> = tx
        .prepare_cached(
            "SELECT attempts, max_attempts FROM tasks WHERE id = ?1 AND state = 'running'",
        )?
        .query_row([claim.id], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    let Some((attempts, max_attempts)) = current.filter(|(a, _)| *a == claim.attempt) else {
        return Ok((None, false));
    };
    macro_rules! end {
        () => {
            "lease_owner = NULL, lease_until = NULL, updated_at = ?2"
        };
    }
    macro_rules! returning {
        () => {
            concat!(" RETURNING ", columns!())
        };
    }
    let requeued =
        matches!(outcome, Outcome::Failed { retry: true, .. }) && attempts < max_attempts;
    let task = match outcome {
        Outcome::Succeeded(result) => tx
            .prepare_cached(concat!(
                "UPDATE OR FAIL tasks SET state = 'succeeded', result = ?3, error = NULL, \
                 progress = 1.0, finished_at = ?2, ",
                end!(),
                " WHERE id = ?1",
                returning!()
            ))?
            .query_row(params![claim.id, now, result], task_of),
        Outcome::Cancelled => tx
            .prepare_cached(concat!(
                "UPDATE OR FAIL tasks SET state = 'cancelled', finished_at = ?2, ",
                end!(),
                " WHERE id = ?1",
                returning!()
            ))?
            .query_row(params![claim.id, now], task_of),
        Outcome::Failed { error, retry: true } if attempts < max_attempts => tx
            .prepare_cached(concat!(
                "UPDATE OR FAIL tasks SET state = 'queued', error = ?3, run_at = ?4, ",
                end!(),
                " WHERE id = ?1",
                returning!()
            ))?
            .query_row(
                params![claim.id, now, error, now.saturating_add(millis(backoff))],
                task_of,
            ),
        Outcome::Failed { error, retry } => {
            let state = if *retry { "dead" } else { "failed" };
            tx.prepare_cached(concat!(
                "UPDATE OR FAIL tasks SET state = ?4, error = ?3, finished_at = ?2, ",
                end!(),
                " WHERE id = ?1",
                returning!()
            ))?
            .query_row(params![claim.id, now, error, state], task_of)
        }
    }
    .optional()?;
    Ok((task, requeued))
}

/// Priority levels [`due_in`] visits one at a time before it reads the
/// rest of the queue in one pass.
const DUE_LEVELS: usize = 16;

/// Adds to `ids` the queued tasks due at `now`, highest priority first,
/// then earliest `run_at`, then oldest, until `ids` holds `max`.
///
/// Tasks due later are never read: the queue may hold many more of them
/// than are due (tasks scheduled hours ahead), and a read of them all per
/// claim made every claim, and so every submit's share of the runner's
/// polls, grow with the queue. One range of `tasks_due` per priority level
/// (`state, priority, run_at <= now`) reads only due tasks; the next level
/// down is one seek (`MAX(priority) … < p`). After [`DUE_LEVELS`] levels
/// (a queue using many distinct priorities) the rest is read in one pass
/// as before, so the cost is never more than that pass and a few seeks.
fn due_in(tx: &Connection, now: Millis, max: usize, ids: &mut Vec<TaskId>) -> rusqlite::Result<()> {
    let mut level: Option<i64> = tx
        .prepare_cached(TOP_LEVEL)?
        .query_row([], |row| row.get(0))?;
    let mut visited = 0;
    while let Some(priority) = level {
        if ids.len() >= max {
            return Ok(());
        }
        if visited == DUE_LEVELS {
            let mut stmt = tx.prepare_cached(DUE_BELOW)?;
            let rows = stmt.query_map(params![now, (max - ids.len()) as i64, priority], |row| {
                row.get(0)
            })?;
            for id in rows {
                ids.push(id?);
            }
            return Ok(());
        }
        let mut stmt = tx.prepare_cached(DUE_AT_LEVEL)?;
        let rows = stmt.query_map(params![now, (max - ids.len()) as i64, priority], |row| {
            row.get(0)
        })?;
        for id in rows {
            ids.push(id?);
        }
        visited += 1;
        level = tx
            .prepare_cached(NEXT_LEVEL)?
            .query_row([priority], |row| row.get(0))?;
    }
    Ok(())
}

/// One submit inside `tx` (see [`Store::submit`]); `room` says whether
/// the queue has room for one more task.
fn submit_in(
    tx: &Connection,
    task: &NewTask,
    idempotency_key: Option<&str>,
    key_ttl: Duration,
    room: bool,
    now: Millis,
) -> rusqlite::Result<Submitted> {
    if let Some(key) = idempotency_key {
        let known: Option<TaskId> = tx
            .prepare_cached("SELECT task_id FROM idempotency WHERE key = ?1 AND expires_at > ?2")
            .and_then(|mut stmt| {
                stmt.query_row(params![key, now], |row| row.get(0))
                    .optional()
            })?;
        if let Some(id) = known {
            // The task may have been purged while its key lives on: then
            // the key is free again.
            if let Some(existing) = get_in(tx, id)? {
                return Ok(if same_submission(&existing, task) {
                    Submitted::Existing(existing)
                } else {
                    Submitted::KeyConflict
                });
            }
        }
    }
    let input_bytes = task.input.len() as u64;
    if let Some(key_id) = task.key_id
        && let Some(refusal) = key_refusal(tx, key_id, input_bytes, now)?
    {
        return Ok(refusal);
    }
    if !room {
        return Ok(Submitted::QueueFull);
    }
    // The insert gives the row back: no second read of it.
    let created = tx
        .prepare_cached(concat!(
            "INSERT INTO tasks (kind, input, priority, run_at, timeout_ms, max_attempts, state, \
             created_at, updated_at, key_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'queued', ?7, ?7, ?8) \
             RETURNING ",
            columns!()
        ))?
        .query_row(
            params![
                task.kind,
                task.input,
                task.priority,
                task.run_at,
                task.timeout_ms,
                task.max_attempts,
                now,
                task.key_id
            ],
            task_of,
        )?;
    let id = created.id;
    if let Some(key_id) = task.key_id {
        exec(
            tx,
            "INSERT INTO key_usage (key_id, at, input_bytes) VALUES (?1, ?2, ?3)",
            params![key_id, now, input_bytes as i64],
        )?;
    }
    if let Some(key) = idempotency_key {
        exec(
            tx,
            "INSERT OR REPLACE INTO idempotency (key, task_id, expires_at) VALUES (?1, ?2, ?3)",
            params![key, id, now.saturating_add(millis(key_ttl))],
        )?;
    }
    Ok(Submitted::Created(created))
}

// ===== impl SqliteStore =====

impl SqliteStore {
    /// Opens (creating when missing) the store in `data_dir`, itself created
    /// when missing.
    pub fn open(data_dir: &Path, durability: Durability) -> Result<SqliteStore, StoreError> {
        std::fs::create_dir_all(data_dir)
            .map_err(|err| StoreError::new(format!("{}: {err}", data_dir.display())))?;
        let mut conn = Connection::open(data_dir.join(DB_FILE)).map_err(db_err)?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
            .map_err(db_err)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::new(format!(
                "the database refused WAL mode ({mode})"
            )));
        }
        let synchronous = match durability {
            Durability::Process => "NORMAL",
            Durability::PowerLoss => "FULL",
        };
        conn.execute_batch(&format!(
            "PRAGMA synchronous = {synchronous}; PRAGMA busy_timeout = 5000; \
             PRAGMA temp_store = MEMORY; PRAGMA cache_size = -{CACHE_KIB}; {SCHEMA}"
        ))
        .map_err(db_err)?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .map_err(db_err)?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::new(format!(
                "the database's schema (version {version}) is newer than this program's \
                 ({SCHEMA_VERSION})"
            )));
        }
        migrate(&mut conn).map_err(db_err)?;
        let queued: i64 = conn
            .query_row(COUNT_QUEUED, [], |row| row.get(0))
            .map_err(db_err)?;
        Ok(SqliteStore {
            conn: Mutex::new(conn),
            queued: AtomicU64::new(queued as u64),
        })
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Store for SqliteStore {
    fn submit(
        &self,
        task: &NewTask,
        idempotency_key: Option<&str>,
        key_ttl: Duration,
        max_queued: u64,
        now: Millis,
    ) -> Result<Submitted, StoreError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db_err)?;
        let queued = self.queued.load(Ordering::Relaxed);
        let submitted = submit_in(
            &tx,
            task,
            idempotency_key,
            key_ttl,
            queued < max_queued,
            now,
        )
        .map_err(db_err)?;
        tx.commit().map_err(db_err)?;
        if matches!(submitted, Submitted::Created(_)) {
            self.queued.fetch_add(1, Ordering::Relaxed);
        }
        Ok(submitted)
    }

    fn submit_many(
        &self,
        submits: &[Submit],
        key_ttl: Duration,
        max_queued: u64,
        now: Millis,
    ) -> Result<Vec<Result<Submitted, StoreError>>, StoreError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db_err)?;
        let mut queued = self.queued.load(Ordering::Relaxed);
        let mut answers = Vec::with_capacity(submits.len());
        for submit in submits {
            // A failing statement leaves the transaction open with the
            // submit half done: the whole group is rolled back (dropping
            // `tx`) and every submit of it answered with the error. No
            // savepoint per submit: they cost a page copy each.
            let submitted = submit_in(
                &tx,
                &submit.task,
                submit.idempotency_key.as_deref(),
                key_ttl,
                queued < max_queued,
                now,
            )
            .map_err(db_err)?;
            queued += u64::from(matches!(submitted, Submitted::Created(_)));
            answers.push(Ok(submitted));
        }
        // One commit for the group, before any submit of it is answered.
        tx.commit().map_err(db_err)?;
        self.queued.store(queued, Ordering::Relaxed);
        Ok(answers)
    }

    fn get(&self, id: TaskId) -> Result<Option<Task>, StoreError> {
        get_in(&self.conn(), id).map_err(db_err)
    }

    fn result(&self, id: TaskId) -> Result<Option<String>, StoreError> {
        self.conn()
            .prepare_cached("SELECT result FROM tasks WHERE id = ?1 AND state = 'succeeded'")
            .and_then(|mut stmt| stmt.query_row([id], |row| row.get(0)).optional())
            .map(Option::flatten)
            .map_err(db_err)
    }

    fn result_chunk(
        &self,
        id: TaskId,
        offset: u64,
        max: usize,
    ) -> Result<Option<ResultChunk>, StoreError> {
        let conn = self.conn();
        let stored: Option<bool> = conn
            .prepare_cached(
                "SELECT result IS NOT NULL AND state = 'succeeded' FROM tasks WHERE id = ?1",
            )
            .and_then(|mut stmt| stmt.query_row([id], |row| row.get(0)).optional())
            .map_err(db_err)?;
        if stored != Some(true) {
            return Ok(None);
        }
        // Incremental I/O: only the slice asked for is read from the page
        // cache, never the whole value.
        let blob = conn
            .blob_open(MAIN_DB, c"tasks", c"result", id, true)
            .map_err(db_err)?;
        let total = blob.len() as u64;
        let start = offset.min(total) as usize;
        let end = (start + max).min(blob.len());
        let mut bytes = vec![0u8; end - start];
        blob.read_at_exact(&mut bytes, start).map_err(db_err)?;
        Ok(Some(ResultChunk { total, bytes }))
    }

    fn create_key(
        &self,
        key: &NewKey,
        hash: &KeyHash,
        hint: &str,
        now: Millis,
    ) -> Result<ApiKey, StoreError> {
        let conn = self.conn();
        let quota = |q: Option<u64>| q.map(|n| n.min(i64::MAX as u64) as i64);
        exec(
            &conn,
            "INSERT INTO api_keys (name, hash, hint, max_concurrent, per_hour, \
             input_bytes_per_hour, max_input_bytes, created_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                key.name,
                &hash[..],
                hint,
                quota(key.quotas.max_concurrent),
                quota(key.quotas.per_hour),
                quota(key.quotas.input_bytes_per_hour),
                quota(key.quotas.max_input_bytes),
                now
            ],
        )
        .map_err(db_err)?;
        key_in(&conn, conn.last_insert_rowid())
            .map_err(db_err)?
            .ok_or_else(|| StoreError::new("inserted key not found"))
    }

    fn keys(&self) -> Result<Vec<ApiKey>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!("SELECT {KEY_COLUMNS} FROM api_keys ORDER BY id"))
            .map_err(db_err)?;
        let rows = stmt.query_map([], key_of).map_err(db_err)?;
        rows.collect::<Result<_, _>>().map_err(db_err)
    }

    fn key_by_hash(&self, hash: &KeyHash) -> Result<Option<StoredKey>, StoreError> {
        self.conn()
            .prepare_cached(&format!(
                "SELECT {KEY_COLUMNS}, hash FROM api_keys WHERE hash = ?1"
            ))
            .and_then(|mut stmt| {
                stmt.query_row([&hash[..]], |row| {
                    Ok(StoredKey {
                        key: key_of(row)?,
                        hash: row.get(9)?,
                    })
                })
                .optional()
            })
            .map_err(db_err)
    }

    fn revoke_key(&self, id: KeyId, now: Millis) -> Result<Option<ApiKey>, StoreError> {
        let conn = self.conn();
        exec(
            &conn,
            "UPDATE api_keys SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL",
            params![id, now],
        )
        .map_err(db_err)?;
        key_in(&conn, id).map_err(db_err)
    }

    fn list(&self, filter: &ListFilter) -> Result<Vec<Task>, StoreError> {
        let mut sql = format!("SELECT {COLUMNS} FROM tasks WHERE id < ?1");
        let mut args: Vec<rusqlite::types::Value> = vec![filter.before.unwrap_or(i64::MAX).into()];
        if let Some(kind) = &filter.kind {
            args.push(kind.clone().into());
            sql.push_str(&format!(" AND kind = ?{}", args.len()));
        }
        if !filter.states.is_empty() {
            let mut marks = Vec::new();
            for state in &filter.states {
                args.push(state.as_str().to_owned().into());
                marks.push(format!("?{}", args.len()));
            }
            sql.push_str(&format!(" AND state IN ({})", marks.join(", ")));
        }
        args.push((filter.limit as i64).into());
        sql.push_str(&format!(" ORDER BY id DESC LIMIT ?{}", args.len()));
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(&sql).map_err(db_err)?;
        let rows = stmt
            .query_map(rusqlite::params_from_iter(args), task_of)
            .map_err(db_err)?;
        rows.collect::<Result<_, _>>().map_err(db_err)
    }

    fn stats(&self, window: usize) -> Result<Stats, StoreError> {
        let conn = self.conn();
        let mut stats = Stats::default();
        for state in crate::model::STATES {
            stats.by_state.insert(state.as_str().to_owned(), 0);
        }
        let mut stmt = conn
            .prepare_cached("SELECT kind, state, COUNT(*) FROM tasks GROUP BY kind, state")
            .map_err(db_err)?;
        let rows = stmt
            .query_map([], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, i64>(2)?,
                ))
            })
            .map_err(db_err)?;
        for row in rows {
            let (kind, state, n) = row.map_err(db_err)?;
            *stats.by_state.entry(state.clone()).or_default() += n as u64;
            *stats
                .by_kind
                .entry(kind)
                .or_insert_with(BTreeMap::new)
                .entry(state)
                .or_default() += n as u64;
        }
        let mut stmt = conn.prepare_cached(RECENT_TIMES).map_err(db_err)?;
        let rows = stmt
            .query_map([window as i64], |row| {
                Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?))
            })
            .map_err(db_err)?;
        let (mut waits, mut runs) = (Vec::new(), Vec::new());
        for row in rows {
            let (wait, run) = row.map_err(db_err)?;
            waits.push(wait.max(0));
            runs.push(run.max(0));
        }
        stats.wait_ms = Percentiles::of(&mut waits);
        stats.run_ms = Percentiles::of(&mut runs);
        Ok(stats)
    }

    fn cancel(&self, id: TaskId, now: Millis) -> Result<Option<Task>, StoreError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db_err)?;
        let dequeued = exec(
            &tx,
            "UPDATE tasks SET state = 'cancelled', finished_at = ?2, updated_at = ?2 \
             WHERE id = ?1 AND state = 'queued'",
            params![id, now],
        )
        .map_err(db_err)?;
        exec(
            &tx,
            "UPDATE tasks SET cancel_requested = 1, updated_at = ?2 \
             WHERE id = ?1 AND state = 'running' AND cancel_requested = 0",
            params![id, now],
        )
        .map_err(db_err)?;
        let task = get_in(&tx, id).map_err(db_err)?;
        tx.commit().map_err(db_err)?;
        self.queued.fetch_sub(dequeued as u64, Ordering::Relaxed);
        Ok(task)
    }

    fn claim(
        &self,
        owner: &str,
        max: usize,
        lease: Duration,
        now: Millis,
    ) -> Result<Vec<Task>, StoreError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db_err)?;
        // Leases that ran out: the process holding them died or stalled.
        exec(&tx, EXPIRED_CANCELLED, [now]).map_err(db_err)?;
        exec(&tx, EXPIRED_DEAD, [now]).map_err(db_err)?;
        let until = now.saturating_add(millis(lease));
        let mut ids: Vec<TaskId> = {
            let mut stmt = tx.prepare_cached(EXPIRED).map_err(db_err)?;
            let rows = stmt
                .query_map(params![now, max as i64], |row| row.get(0))
                .map_err(db_err)?;
            rows.collect::<Result<_, _>>().map_err(db_err)?
        };
        let expired = ids.len();
        if ids.len() < max {
            due_in(&tx, now, max, &mut ids).map_err(db_err)?;
        }
        let mut claimed = Vec::with_capacity(ids.len());
        {
            // The update gives the claimed row back: no second read per task.
            let mut stmt = tx
                .prepare_cached(concat!(
                    "UPDATE OR FAIL tasks SET state = 'running', attempts = attempts + 1, \
                     progress = NULL, lease_owner = ?2, lease_until = ?3, started_at = ?4, \
                     updated_at = ?4 WHERE id = ?1 RETURNING ",
                    columns!()
                ))
                .map_err(db_err)?;
            for id in ids {
                if let Some(task) = stmt
                    .query_row(params![id, owner, until, now], task_of)
                    .optional()
                    .map_err(db_err)?
                {
                    claimed.push(task);
                }
            }
        }
        tx.commit().map_err(db_err)?;
        self.queued.fetch_sub(
            (claimed.len().saturating_sub(expired)) as u64,
            Ordering::Relaxed,
        );
        Ok(claimed)
    }

    fn renew(
        &self,
        owner: &str,
        claims: &[Claim],
        until: Millis,
    ) -> Result<Vec<Claim>, StoreError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db_err)?;
        let mut stop = Vec::new();
        for claim in claims {
            let renewed = exec(
                &tx,
                "UPDATE tasks SET lease_until = ?4 WHERE id = ?1 AND state = 'running' \
                     AND attempts = ?2 AND lease_owner = ?3 AND cancel_requested = 0",
                params![claim.id, claim.attempt, owner, until],
            )
            .map_err(db_err)?;
            if renewed == 0 {
                stop.push(claim.clone());
            }
        }
        tx.commit().map_err(db_err)?;
        Ok(stop)
    }

    fn progress(&self, claim: &Claim, progress: f64, now: Millis) -> Result<(), StoreError> {
        exec(
            &self.conn(),
            "UPDATE tasks SET progress = ?3, updated_at = ?4 \
                 WHERE id = ?1 AND attempts = ?2 AND state = 'running'",
            params![claim.id, claim.attempt, progress.clamp(0.0, 1.0), now],
        )
        .map_err(db_err)?;
        Ok(())
    }

    fn finish(
        &self,
        claim: &Claim,
        outcome: &Outcome,
        backoff: Duration,
        now: Millis,
    ) -> Result<Option<Task>, StoreError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db_err)?;
        let (task, requeued) = finish_in(&tx, claim, outcome, backoff, now).map_err(db_err)?;
        tx.commit().map_err(db_err)?;
        self.queued
            .fetch_add(u64::from(requeued), Ordering::Relaxed);
        Ok(task)
    }

    fn finish_many(
        &self,
        outcomes: &[Finish],
        now: Millis,
    ) -> Result<Vec<Option<Task>>, StoreError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db_err)?;
        let mut tasks = Vec::with_capacity(outcomes.len());
        let mut requeued = 0;
        for finish in outcomes {
            let (task, again) = finish_in(&tx, &finish.claim, &finish.outcome, finish.backoff, now)
                .map_err(db_err)?;
            tasks.push(task);
            requeued += u64::from(again);
        }
        // One commit for the group: every outcome in it is durable (or none
        // is) before any of them is acknowledged.
        tx.commit().map_err(db_err)?;
        self.queued.fetch_add(requeued, Ordering::Relaxed);
        Ok(tasks)
    }

    fn release(&self, claim: &Claim, now: Millis) -> Result<(), StoreError> {
        let requeued = exec(
            &self.conn(),
            "UPDATE tasks SET state = 'queued', attempts = attempts - 1, run_at = ?3, \
                 lease_owner = NULL, lease_until = NULL, updated_at = ?3 \
                 WHERE id = ?1 AND attempts = ?2 AND state = 'running' AND cancel_requested = 0",
            params![claim.id, claim.attempt, now],
        )
        .map_err(db_err)?;
        self.queued.fetch_add(requeued as u64, Ordering::Relaxed);
        Ok(())
    }

    fn purge(&self, finished_before: Millis, now: Millis) -> Result<u64, StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(db_err)?;
        let n = exec(&tx, PURGE_FINISHED, [finished_before]).map_err(db_err)?;
        exec(&tx, "DELETE FROM idempotency WHERE expires_at <= ?1", [now]).map_err(db_err)?;
        exec(
            &tx,
            "DELETE FROM key_usage WHERE at <= ?1",
            [now.saturating_sub(millis(crate::keys::QUOTA_WINDOW))],
        )
        .map_err(db_err)?;
        tx.commit().map_err(db_err)?;
        Ok(n as u64)
    }

    fn queued(&self) -> Result<u64, StoreError> {
        Ok(self.queued.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each statement that looks tasks up by state, lease, finish time or
    /// key searches the partial index made for it: a query whose `WHERE`
    /// does not imply the index's own is planned as a scan of the table,
    /// which works, gives the same answers, and grows with the table.
    #[test]
    fn statements_search_their_partial_indexes() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path(), Durability::Process).unwrap();
        let conn = store.conn();
        // The count of the queue, once at open, reads the queue's index
        // whole; every other statement seeks into its index.
        for (sql, index, seek) in [
            (TOP_LEVEL, "tasks_due", true),
            (NEXT_LEVEL, "tasks_due", true),
            (DUE_AT_LEVEL, "tasks_due", true),
            (DUE_BELOW, "tasks_due", true),
            (COUNT_QUEUED, "tasks_due", false),
            (EXPIRED, "tasks_lease", true),
            (EXPIRED_CANCELLED, "tasks_lease", true),
            (EXPIRED_DEAD, "tasks_lease", true),
            (PURGE_FINISHED, "tasks_finished", true),
            (RECENT_TIMES, "tasks_finished", true),
            (KEY_LIVE, "tasks_key", true),
        ] {
            let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            let n = stmt.parameter_count();
            let plan: Vec<String> = stmt
                .query_map(
                    rusqlite::params_from_iter(std::iter::repeat_n(1, n)),
                    |row| row.get(3),
                )
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            // One step, on the index: `SEARCH tasks USING [COVERING]
            // INDEX tasks_due (…)`, or `SCAN …` for the count.
            let [step] = plan.as_slice() else {
                panic!("{sql}\nplanned as: {plan:?}");
            };
            let verb = if seek { "SEARCH" } else { "SCAN" };
            let on_index = step.starts_with(&format!("{verb} tasks USING "))
                && (step.contains(&format!("INDEX {index} "))
                    || step.ends_with(&format!("INDEX {index}")));
            assert!(on_index, "{sql}\nplanned as: {step}");
        }
    }
}
