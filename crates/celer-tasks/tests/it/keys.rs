//! API keys in the SQLite store, with explicit clocks: tokens checked by
//! hash, revocation, each quota at its edge and its `Retry-After`, the
//! hourly windows purged; an old database migrated with its tasks kept;
//! results read in slices.

use std::time::Duration;

use celer::auth::KeyCheck;
use celer_tasks::keys::{self, NewKey, OverQuota, Quota, Quotas};
use celer_tasks::model::{NewTask, Outcome, Submitted};
use celer_tasks::store::{Durability, SCHEMA_VERSION, SqliteStore, Store};

const TTL: Duration = Duration::from_secs(3600);
const MAX_QUEUED: u64 = 1000;
const HOUR: i64 = 3_600_000;

fn open(dir: &tempfile::TempDir) -> SqliteStore {
    SqliteStore::open(dir.path(), Durability::Process).unwrap()
}

fn task(input: &str, key_id: Option<i64>) -> NewTask {
    NewTask {
        kind: "echo".to_owned(),
        input: input.to_owned(),
        priority: 0,
        run_at: 0,
        timeout_ms: 1000,
        max_attempts: 1,
        key_id,
    }
}

fn key(store: &SqliteStore, quotas: Quotas) -> i64 {
    let new = NewKey {
        name: "test".to_owned(),
        quotas,
    };
    keys::create_key(store, &new, 0).unwrap().0.id
}

fn submit(store: &SqliteStore, input: &str, key_id: i64, now: i64) -> Submitted {
    store
        .submit(&task(input, Some(key_id)), None, TTL, MAX_QUEUED, now)
        .unwrap()
}

fn accepted(submitted: Submitted) -> celer_tasks::Task {
    match submitted {
        Submitted::Created(task) => task,
        other => panic!("expected a new task, got {other:?}"),
    }
}

fn refused(submitted: Submitted) -> OverQuota {
    match submitted {
        Submitted::OverQuota(over) => over,
        other => panic!("expected a quota refusal, got {other:?}"),
    }
}

#[test]
fn tokens_are_checked_by_hash_and_revocation_is_seen_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let (created, token) = keys::create_key(
        &store,
        &NewKey {
            name: "ci".to_owned(),
            quotas: Quotas::default(),
        },
        1_000,
    )
    .unwrap();
    assert!(token.starts_with(keys::TOKEN_PREFIX));
    assert!(token.starts_with(&created.hint));
    assert_eq!(created.hint.len(), keys::HINT_CHARS);
    // Only the hash is stored: the token is nowhere in the database.
    let db = std::fs::read(dir.path().join(celer_tasks::store::DB_FILE)).unwrap();
    let wal = std::fs::read(
        dir.path()
            .join(format!("{}-wal", celer_tasks::store::DB_FILE)),
    )
    .unwrap_or_default();
    for bytes in [&db, &wal] {
        assert!(!bytes.windows(token.len()).any(|w| w == token.as_bytes()));
    }

    assert_eq!(
        keys::check_token(&store, &token).unwrap(),
        KeyCheck::Valid(created.id.to_string())
    );
    let mut wrong = token.clone();
    wrong.pop();
    wrong.push('A');
    assert_eq!(
        keys::check_token(&store, &wrong).unwrap(),
        KeyCheck::Unknown
    );
    assert_eq!(keys::check_token(&store, "").unwrap(), KeyCheck::Unknown);

    let revoked = store.revoke_key(created.id, 2_000).unwrap().unwrap();
    assert_eq!(revoked.revoked_at, Some(2_000));
    // Revoking again keeps the first time.
    let again = store.revoke_key(created.id, 3_000).unwrap().unwrap();
    assert_eq!(again.revoked_at, Some(2_000));
    assert_eq!(
        keys::check_token(&store, &token).unwrap(),
        KeyCheck::Revoked
    );
    assert!(store.revoke_key(999, 3_000).unwrap().is_none());
    // A submit under a revoked (or unknown) key is refused in its own
    // transaction, whatever let the request in.
    assert_eq!(
        submit(&store, "1", created.id, 4_000),
        Submitted::KeyRevoked
    );
    assert_eq!(submit(&store, "1", 999, 4_000), Submitted::KeyRevoked);

    let listed = store.keys().unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].name, "ci");
    // Names are bounded.
    let long = NewKey {
        name: "n".repeat(keys::MAX_KEY_NAME_BYTES + 1),
        quotas: Quotas::default(),
    };
    assert!(keys::create_key(&store, &long, 0).is_err());
}

#[test]
fn max_concurrent_counts_queued_and_running_tasks_of_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let limited = key(
        &store,
        Quotas {
            max_concurrent: Some(2),
            ..Quotas::default()
        },
    );
    let other = key(&store, Quotas::default());
    let first = accepted(submit(&store, "1", limited, 0));
    assert_eq!(first.key_id, Some(limited));
    accepted(submit(&store, "2", limited, 0));
    let over = refused(submit(&store, "3", limited, 0));
    assert_eq!(
        over,
        OverQuota {
            quota: Quota::MaxConcurrent,
            limit: 2,
            retry_after: Some(Duration::from_secs(1)),
        }
    );
    // Another key and no key are not counted against it.
    accepted(submit(&store, "3", other, 0));
    accepted(
        store
            .submit(&task("3", None), None, TTL, MAX_QUEUED, 0)
            .unwrap(),
    );
    // Running still counts; finished does not.
    let claimed = store
        .claim("w", 10, Duration::from_secs(30), 1)
        .unwrap()
        .into_iter()
        .find(|t| t.id == first.id)
        .unwrap();
    refused(submit(&store, "3", limited, 2));
    let claim = celer_tasks::store::Claim {
        id: claimed.id,
        attempt: claimed.attempts,
    };
    store
        .finish(
            &claim,
            &Outcome::Succeeded("1".to_owned()),
            Duration::ZERO,
            3,
        )
        .unwrap();
    accepted(submit(&store, "3", limited, 4));
}

#[test]
fn per_hour_refuses_the_task_over_the_limit_until_the_oldest_leaves_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let id = key(
        &store,
        Quotas {
            per_hour: Some(2),
            ..Quotas::default()
        },
    );
    accepted(submit(&store, "1", id, 0));
    accepted(submit(&store, "2", id, 10_000));
    let over = refused(submit(&store, "3", id, 20_000));
    assert_eq!(over.quota, Quota::PerHour);
    assert_eq!(over.limit, 2);
    // The first leaves the window at 0 + 1 h: 3580 s from now.
    assert_eq!(over.retry_after, Some(Duration::from_secs(3_580)));
    // A millisecond before it leaves: still over, 1 s to wait.
    let over = refused(submit(&store, "3", id, HOUR - 1));
    assert_eq!(over.retry_after, Some(Duration::from_secs(1)));
    // At the edge the first is out, so one more fits, and then not.
    accepted(submit(&store, "3", id, HOUR));
    let over = refused(submit(&store, "4", id, HOUR));
    assert_eq!(over.retry_after, Some(Duration::from_secs(10)));
    // A refused submission did not count: after the second leaves, one fits.
    accepted(submit(&store, "4", id, HOUR + 10_000));
}

#[test]
fn input_bytes_are_limited_per_task_and_per_hour() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let id = key(
        &store,
        Quotas {
            max_input_bytes: Some(10),
            input_bytes_per_hour: Some(20),
            ..Quotas::default()
        },
    );
    let ten = "\"12345678\"";
    assert_eq!(ten.len(), 10);
    accepted(submit(&store, ten, id, 0));
    // One byte over the per-task limit: refused, and no wait helps.
    let over = refused(submit(&store, "\"123456789\"", id, 0));
    assert_eq!(
        over,
        OverQuota {
            quota: Quota::MaxInputBytes,
            limit: 10,
            retry_after: None,
        }
    );
    accepted(submit(&store, ten, id, 5_000));
    // 20 of 20 bytes used: one byte more waits for the first 10 to leave.
    let over = refused(submit(&store, "1", id, 6_000));
    assert_eq!(over.quota, Quota::InputBytesPerHour);
    assert_eq!(over.limit, 20);
    assert_eq!(over.retry_after, Some(Duration::from_secs(3_594)));
    accepted(submit(&store, "1", id, HOUR));

    // A key whose hourly budget is smaller than one input: never fits.
    let small = key(
        &store,
        Quotas {
            input_bytes_per_hour: Some(5),
            ..Quotas::default()
        },
    );
    let over = refused(submit(&store, ten, small, 0));
    assert_eq!(
        (over.quota, over.retry_after),
        (Quota::InputBytesPerHour, None)
    );
}

#[test]
fn an_idempotent_retry_is_not_counted_and_purge_drops_old_usage() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let id = key(
        &store,
        Quotas {
            per_hour: Some(1),
            ..Quotas::default()
        },
    );
    let first = accepted(
        store
            .submit(&task("1", Some(id)), Some("k"), TTL, MAX_QUEUED, 0)
            .unwrap(),
    );
    // The same key and body again: the same task, no quota asked.
    match store
        .submit(&task("1", Some(id)), Some("k"), TTL, MAX_QUEUED, 1)
        .unwrap()
    {
        Submitted::Existing(task) => assert_eq!(task.id, first.id),
        other => panic!("{other:?}"),
    }
    refused(submit(&store, "2", id, 2));
    store.purge(0, HOUR).unwrap();
    accepted(submit(&store, "2", id, HOUR));
}

/// The schema before API keys (version 0), as the first release wrote it.
const SCHEMA_V0: &str = "
CREATE TABLE tasks (
    id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, input TEXT NOT NULL,
    priority INTEGER NOT NULL, run_at INTEGER NOT NULL, timeout_ms INTEGER NOT NULL,
    max_attempts INTEGER NOT NULL, state TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
    progress REAL, error TEXT, cancel_requested INTEGER NOT NULL DEFAULT 0, result TEXT,
    lease_owner TEXT, lease_until INTEGER, created_at INTEGER NOT NULL, started_at INTEGER,
    finished_at INTEGER, updated_at INTEGER NOT NULL
);
CREATE TABLE idempotency (key TEXT PRIMARY KEY, task_id INTEGER NOT NULL, expires_at INTEGER NOT NULL);
INSERT INTO tasks (kind, input, priority, run_at, timeout_ms, max_attempts, state, attempts,
    result, created_at, finished_at, updated_at)
    VALUES ('echo', '{\"value\":1}', 0, 5, 1000, 3, 'succeeded', 1, '1', 5, 6, 6);
INSERT INTO tasks (kind, input, priority, run_at, timeout_ms, max_attempts, state, created_at,
    updated_at) VALUES ('echo', '{\"value\":2}', 0, 5, 1000, 3, 'queued', 5, 5);
";

#[test]
fn a_database_from_before_api_keys_is_migrated_with_its_tasks() {
    let dir = tempfile::tempdir().unwrap();
    {
        let conn =
            rusqlite::Connection::open(dir.path().join(celer_tasks::store::DB_FILE)).unwrap();
        conn.execute_batch(SCHEMA_V0).unwrap();
    }
    let store = open(&dir);
    let version: i64 = rusqlite::Connection::open(dir.path().join(celer_tasks::store::DB_FILE))
        .unwrap()
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    let old = store.get(1).unwrap().unwrap();
    assert_eq!((old.state.as_str(), old.key_id), ("succeeded", None));
    assert_eq!(store.result(1).unwrap().as_deref(), Some("1"));
    assert_eq!(store.queued().unwrap(), 1);
    let id = key(&store, Quotas::default());
    assert_eq!(accepted(submit(&store, "3", id, 10)).id, 3);
    drop(store);
    // Opening again migrates nothing twice.
    let store = open(&dir);
    assert_eq!(store.keys().unwrap().len(), 1);
    assert_eq!(store.get(3).unwrap().unwrap().key_id, Some(id));

    // A database from a newer program is refused, not damaged.
    drop(store);
    rusqlite::Connection::open(dir.path().join(celer_tasks::store::DB_FILE))
        .unwrap()
        .execute_batch(&format!("PRAGMA user_version = {}", SCHEMA_VERSION + 1))
        .unwrap();
    let err = SqliteStore::open(dir.path(), Durability::Process).unwrap_err();
    assert!(err.to_string().contains("newer"), "{err}");
}

#[test]
fn a_result_is_read_in_slices() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let created = accepted(
        store
            .submit(&task("1", None), None, TTL, MAX_QUEUED, 0)
            .unwrap(),
    );
    assert_eq!(store.result_chunk(created.id, 0, 10).unwrap(), None);
    let claimed = store.claim("w", 1, Duration::from_secs(30), 0).unwrap();
    let result: String = (0..100_000)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    let claim = celer_tasks::store::Claim {
        id: claimed[0].id,
        attempt: 1,
    };
    store
        .finish(
            &claim,
            &Outcome::Succeeded(result.clone()),
            Duration::ZERO,
            1,
        )
        .unwrap();
    let mut read = Vec::new();
    loop {
        let chunk = store
            .result_chunk(created.id, read.len() as u64, 4096)
            .unwrap()
            .unwrap();
        assert_eq!(chunk.total, 100_000);
        assert!(chunk.bytes.len() <= 4096);
        if chunk.bytes.is_empty() {
            break;
        }
        read.extend_from_slice(&chunk.bytes);
    }
    assert_eq!(read, result.as_bytes());
    // Past the end: nothing, not an error.
    let past = store
        .result_chunk(created.id, 1 << 40, 10)
        .unwrap()
        .unwrap();
    assert!(past.bytes.is_empty());
    assert_eq!(store.result_chunk(999, 0, 10).unwrap(), None);
}
