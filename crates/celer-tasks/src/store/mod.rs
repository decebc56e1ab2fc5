//! The store: where tasks, results and idempotency keys live, behind the
//! [`Store`] trait; [`SqliteStore`] is the default.
//!
//! Every state change is one committed transaction. A running task holds a
//! lease (`owner`, until when); [`Store::claim`] takes tasks that are due
//! and tasks whose lease ran out (their process died), counting an attempt
//! each time, so a task runs at least once and may run more than once.
//! [`Store::finish`] and the other writes of a running task name the
//! attempt they belong to, and change nothing when the task has moved on
//! (a newer attempt, a cancel), so a late worker cannot overwrite a newer
//! outcome.

mod sqlite;

pub use sqlite::{DB_FILE, Durability, SCHEMA_VERSION, SqliteStore};

use std::fmt;
use std::time::Duration;

use crate::keys::{ApiKey, KeyHash, KeyId, NewKey, StoredKey};
use crate::model::{
    ListFilter, Millis, NewTask, Outcome, ResultChunk, Stats, Submitted, Task, TaskId,
};

/// A failure of the store itself (disk, database), answered `500`.
#[derive(Debug, Clone)]
pub struct StoreError {
    message: String,
}

impl StoreError {
    /// An error with `message`.
    pub fn new(message: impl Into<String>) -> StoreError {
        StoreError {
            message: message.into(),
        }
    }
}

impl fmt::Display for StoreError {
    /// The wording is not part of the API.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "task store: {}", self.message)
    }
}

impl std::error::Error for StoreError {}

/// A running task's claim: which attempt, held by whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The task.
    pub id: TaskId,
    /// The attempt number (1 for the first run).
    pub attempt: u32,
}

/// One submission, for [`Store::submit_many`].
#[derive(Debug, Clone)]
pub struct Submit {
    /// The task.
    pub task: NewTask,
    /// Its `Idempotency-Key`, if any.
    pub idempotency_key: Option<String>,
}

/// One attempt's end, for [`Store::finish_many`].
#[derive(Debug, Clone)]
pub struct Finish {
    /// The attempt.
    pub claim: Claim,
    /// How it ended.
    pub outcome: Outcome,
    /// The delay before a retry, if it is queued again.
    pub backoff: Duration,
}

/// The operations the task API and its runner need from a store. Methods
/// block; callers run them off the async threads.
pub trait Store: Send + Sync + 'static {
    /// Inserts a task, or with `idempotency_key` returns the task the key
    /// made before (same submission) or a conflict (other submission). Keys
    /// are kept for `key_ttl`. With `max_queued` tasks queued already the
    /// task is refused ([`Submitted::QueueFull`](crate::model::Submitted)).
    /// A task with a `key_id` is checked against that API key, in the same
    /// transaction: revoked ([`Submitted::KeyRevoked`]) or over one of its
    /// quotas ([`Submitted::OverQuota`]) is refused; an accepted one counts
    /// in the key's hourly windows.
    fn submit(
        &self,
        task: &NewTask,
        idempotency_key: Option<&str>,
        key_ttl: Duration,
        max_queued: u64,
        now: Millis,
    ) -> Result<Submitted, StoreError>;

    /// Several submits in one transaction (a group commit): each as
    /// [`Store::submit`] would answer it, in order, as if made one after
    /// the other; all committed before this returns. The outer error is
    /// the group failing: none of it is stored. The default runs
    /// [`Store::submit`] for each, each answer its own.
    fn submit_many(
        &self,
        submits: &[Submit],
        key_ttl: Duration,
        max_queued: u64,
        now: Millis,
    ) -> Result<Vec<Result<Submitted, StoreError>>, StoreError> {
        Ok(submits
            .iter()
            .map(|s| {
                self.submit(
                    &s.task,
                    s.idempotency_key.as_deref(),
                    key_ttl,
                    max_queued,
                    now,
                )
            })
            .collect())
    }

    /// A task by id.
    fn get(&self, id: TaskId) -> Result<Option<Task>, StoreError>;

    /// A succeeded task's result, as JSON text.
    fn result(&self, id: TaskId) -> Result<Option<String>, StoreError>;

    /// Up to `max` bytes of a succeeded task's result from `offset`, and
    /// its length, without reading the rest: large results are sent in
    /// such slices. `None` when the task has no result (or is gone).
    fn result_chunk(
        &self,
        id: TaskId,
        offset: u64,
        max: usize,
    ) -> Result<Option<ResultChunk>, StoreError>;

    /// Stores a new API key under the SHA-256 `hash` of its token, with
    /// `hint` (the token's first characters) for people to tell keys apart.
    fn create_key(
        &self,
        key: &NewKey,
        hash: &KeyHash,
        hint: &str,
        now: Millis,
    ) -> Result<ApiKey, StoreError>;

    /// Every API key, revoked ones included, oldest first.
    fn keys(&self) -> Result<Vec<ApiKey>, StoreError>;

    /// The API key whose token hashes to `hash`.
    fn key_by_hash(&self, hash: &KeyHash) -> Result<Option<StoredKey>, StoreError>;

    /// Revokes an API key (at once: its next request is refused). `None`
    /// when there is no such key; a revoked key stays revoked.
    fn revoke_key(&self, id: KeyId, now: Millis) -> Result<Option<ApiKey>, StoreError>;

    /// Tasks matching `filter`, newest first.
    fn list(&self, filter: &ListFilter) -> Result<Vec<Task>, StoreError>;

    /// Counts by state and kind; wait and run time percentiles over the
    /// most recent `window` finished tasks.
    fn stats(&self, window: usize) -> Result<Stats, StoreError>;

    /// Cancels: a queued task at once (it never runs); a running one is
    /// marked, for its worker to stop. `None` when there is no such task.
    fn cancel(&self, id: TaskId, now: Millis) -> Result<Option<Task>, StoreError>;

    /// Claims up to `max` tasks for `owner` until `now + lease`: due queued
    /// tasks by priority then `run_at`, and running tasks whose lease ran
    /// out. A task out of attempts whose lease ran out becomes dead; one
    /// asked to cancel becomes cancelled.
    fn claim(
        &self,
        owner: &str,
        max: usize,
        lease: Duration,
        now: Millis,
    ) -> Result<Vec<Task>, StoreError>;

    /// Extends `owner`'s leases on `claims` to `until`; returns the claims
    /// whose tasks were asked to cancel or are no longer this attempt's.
    fn renew(&self, owner: &str, claims: &[Claim], until: Millis)
    -> Result<Vec<Claim>, StoreError>;

    /// Records a running attempt's progress (0 to 1).
    fn progress(&self, claim: &Claim, progress: f64, now: Millis) -> Result<(), StoreError>;

    /// Ends an attempt. A retryable failure with attempts left queues the
    /// task again at `now + backoff`; without attempts left it is dead.
    /// `None` when the task had moved on (the attempt is stale).
    fn finish(
        &self,
        claim: &Claim,
        outcome: &Outcome,
        backoff: Duration,
        now: Millis,
    ) -> Result<Option<Task>, StoreError>;

    /// Ends several attempts at `now` in one transaction (a group commit):
    /// each outcome as [`Store::finish`] would record it, all committed
    /// before this returns; the tasks after it, in order (`None` for a
    /// stale attempt). The default runs [`Store::finish`] for each.
    fn finish_many(
        &self,
        outcomes: &[Finish],
        now: Millis,
    ) -> Result<Vec<Option<Task>>, StoreError> {
        outcomes
            .iter()
            .map(|f| self.finish(&f.claim, &f.outcome, f.backoff, now))
            .collect()
    }

    /// Gives a claimed task back unrun (a stopping process): queued again,
    /// due now, the attempt not counted.
    fn release(&self, claim: &Claim, now: Millis) -> Result<(), StoreError>;

    /// Deletes tasks finished before `finished_before`, idempotency keys
    /// expired by `now` and API key usage older than the quota window;
    /// returns the tasks deleted.
    fn purge(&self, finished_before: Millis, now: Millis) -> Result<u64, StoreError>;

    /// How many tasks are queued.
    fn queued(&self) -> Result<u64, StoreError>;
}
