//! The task as stored and as shown: states, the submission, outcomes,
//! list filters, statistics; time as milliseconds since the Unix epoch.

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// A task's number, unique in its store, increasing with submission.
pub type TaskId = i64;

/// Milliseconds since the Unix epoch.
pub type Millis = i64;

/// Now, in [`Millis`].
pub fn now_millis() -> Millis {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as Millis)
}

/// `d` in whole milliseconds, saturating.
pub(crate) fn millis(d: Duration) -> Millis {
    Millis::try_from(d.as_millis()).unwrap_or(Millis::MAX)
}

/// A task's state. `queued` and `running` move on; the others are final.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Waiting for its `run_at` and a free worker (also between retries).
    Queued,
    /// Claimed by a worker under a lease.
    Running,
    /// Ran and stored its result.
    Succeeded,
    /// Failed with an error the kind marked as not worth a retry.
    Failed,
    /// Cancelled before it ran, or stopped while it ran.
    Cancelled,
    /// Failed on every one of its attempts.
    Dead,
}

/// Every state, in lifecycle order.
pub const STATES: [State; 6] = [
    State::Queued,
    State::Running,
    State::Succeeded,
    State::Failed,
    State::Cancelled,
    State::Dead,
];

impl State {
    /// The lowercase name, as in JSON and in the store.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Queued => "queued",
            State::Running => "running",
            State::Succeeded => "succeeded",
            State::Failed => "failed",
            State::Cancelled => "cancelled",
            State::Dead => "dead",
        }
    }

    /// Whether the task will not change any more.
    pub fn is_final(self) -> bool {
        !matches!(self, State::Queued | State::Running)
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for State {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        STATES
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| format!("unknown state {s:?}"))
    }
}

/// A submission, checked: what a store inserts.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTask {
    /// The kind's name.
    pub kind: String,
    /// The input, as JSON text.
    pub input: String,
    /// Higher runs first among due tasks.
    pub priority: i32,
    /// Not before this time.
    pub run_at: Millis,
    /// Run time limit per attempt, in milliseconds.
    pub timeout_ms: i64,
    /// Attempts before the task is dead.
    pub max_attempts: u32,
    /// The API key that submits it, whose quotas it counts against.
    pub key_id: Option<crate::keys::KeyId>,
}

/// A task as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    /// Its number.
    pub id: TaskId,
    /// The kind's name.
    pub kind: String,
    /// The input, as JSON text.
    pub input: String,
    /// Higher runs first among due tasks.
    pub priority: i32,
    /// Not before this time (moved by retries).
    pub run_at: Millis,
    /// Run time limit per attempt, in milliseconds.
    pub timeout_ms: i64,
    /// Attempts before the task is dead.
    pub max_attempts: u32,
    /// Where it is now.
    pub state: State,
    /// Attempts started so far (a claim counts one).
    pub attempts: u32,
    /// The kind's last progress report, 0 to 1.
    pub progress: Option<f64>,
    /// The last attempt's error.
    pub error: Option<String>,
    /// A cancel was asked while it ran.
    pub cancel_requested: bool,
    /// Whether a result is stored.
    pub has_result: bool,
    /// When it was submitted.
    pub created_at: Millis,
    /// When its last attempt started.
    pub started_at: Option<Millis>,
    /// When it reached its final state.
    pub finished_at: Option<Millis>,
    /// When it last changed.
    pub updated_at: Millis,
    /// The API key that submitted it.
    pub key_id: Option<crate::keys::KeyId>,
}

/// How an attempt ended, as the runner reports it.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// A result, as JSON text.
    Succeeded(String),
    /// An error; `retry` says whether another attempt may help.
    Failed {
        /// What went wrong, for the task's `error`.
        error: String,
        /// Whether to retry (with backoff, while attempts remain).
        retry: bool,
    },
    /// The attempt stopped because a cancel was asked.
    Cancelled,
}

/// What `GET /tasks` selects.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListFilter {
    /// Only these states (any, when empty).
    pub states: Vec<State>,
    /// Only this kind.
    pub kind: Option<String>,
    /// Only tasks older than this one (the cursor: newest first).
    pub before: Option<TaskId>,
    /// At most this many.
    pub limit: usize,
}

/// What a submit did.
#[derive(Debug, Clone, PartialEq)]
pub enum Submitted {
    /// A new task.
    Created(Task),
    /// The idempotency key was known with the same submission: its task.
    Existing(Task),
    /// The idempotency key was known with another submission.
    KeyConflict,
    /// [`MAX_QUEUED`](crate::limits::MAX_QUEUED) tasks are queued.
    QueueFull,
    /// The submitting API key was revoked (or deleted) since the request
    /// was let in.
    KeyRevoked,
    /// The submitting API key's quota refuses the task.
    OverQuota(crate::keys::OverQuota),
}

/// A slice of a stored result, read without loading the rest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultChunk {
    /// The whole result's length, in bytes.
    pub total: u64,
    /// The bytes from the offset asked for (empty at the end).
    pub bytes: Vec<u8>,
}

/// Counts and times over the store.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Stats {
    /// Tasks per state.
    pub by_state: std::collections::BTreeMap<String, u64>,
    /// Tasks per kind, then per state.
    pub by_kind: std::collections::BTreeMap<String, std::collections::BTreeMap<String, u64>>,
    /// Submission to last start, over the most recent finished tasks, ms.
    pub wait_ms: Percentiles,
    /// Last start to finish, over the most recent finished tasks, ms.
    pub run_ms: Percentiles,
}

/// Percentiles of a sample, in milliseconds; zero over no sample.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Percentiles {
    /// How many values.
    pub count: u64,
    /// Median.
    pub p50: i64,
    /// 90th percentile.
    pub p90: i64,
    /// 99th percentile.
    pub p99: i64,
    /// Largest.
    pub max: i64,
}

impl Percentiles {
    /// Over `values`, which it sorts.
    pub fn of(values: &mut [i64]) -> Percentiles {
        values.sort_unstable();
        let at = |p: f64| {
            let idx = ((values.len() as f64 - 1.0) * p).round() as usize;
            values.get(idx).copied().unwrap_or(0)
        };
        Percentiles {
            count: values.len() as u64,
            p50: at(0.5),
            p90: at(0.9),
            p99: at(0.99),
            max: values.last().copied().unwrap_or(0),
        }
    }
}

/// `ms` as RFC 3339 UTC, `2026-11-26T01:02:03.456Z`.
pub fn rfc3339(ms: Millis) -> String {
    let nanos = i128::from(ms) * 1_000_000;
    let at = time::OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    at.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// An RFC 3339 date-time (with `Z` or an offset) as [`Millis`].
pub fn parse_rfc3339(text: &str) -> Option<Millis> {
    let at =
        time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()?;
    Millis::try_from(at.unix_timestamp_nanos() / 1_000_000).ok()
}
