//! Celer's task API: long-running work submitted, watched, cancelled and
//! fetched over HTTP, on a durable store, nothing lost when the process
//! dies.
//!
//! ```no_run
//! use celer_tasks::{Kinds, Tasks, TasksConfig, TaskError};
//!
//! #[derive(serde::Deserialize)]
//! struct Resize { width: u32 }
//!
//! let mut kinds = Kinds::new(); // has `echo`
//! kinds.register_blocking("resize", |input: Resize, ctx: &celer_tasks::Context| {
//!     ctx.progress(0.5);
//!     if ctx.is_cancelled() { return Err(TaskError::cancelled()); }
//!     Ok(input.width * 2)
//! });
//! let tasks = Tasks::open(TasksConfig::new("data"), kinds).unwrap();
//! let mut app = celer::App::new();
//! app.mount("/tasks", tasks.app());
//! ```
//!
//! # Guarantees
//!
//! - Every state change is one committed SQLite transaction (WAL mode).
//! - A running task holds a lease renewed by its process; when the process
//!   dies the task runs again after the lease, its attempts counted: tasks
//!   run **at least once**. A kind sees the attempt in [`Context::attempt`].
//! - Failures a kind marks retryable, panics, timeouts and lost leases are
//!   retried with exponential backoff and jitter until `max_attempts`, then
//!   the task is `dead`; [`TaskError::fail`] ends it `failed` at once.
//! - `Idempotency-Key` on a submit: the same key with the same submission
//!   gives the same task (`200`), with another submission `422`; keys are
//!   kept for [`limits::IDEMPOTENCY_TTL`].
//! - Finished tasks and results are purged after the retention
//!   ([`limits::DEFAULT_RETENTION`]).
//! - With [`TasksConfig::require_key`], every API request needs
//!   `Authorization: Bearer <token>` of a live API key ([`keys`]): stored
//!   as its SHA-256, compared in constant time, with per-key quotas
//!   answered `429` and `Retry-After`.
//! - Results are sent in slices read from the store
//!   ([`limits::RESULT_CHUNK_BYTES`]), never loaded whole.
//!
//! # Layout
//!
//! - `model`: states, tasks, submissions, statistics, time;
//! - `store/`: the [`Store`] trait and [`SqliteStore`];
//! - `kind`: [`Kinds`], [`Context`], [`TaskError`], the `echo` kind;
//!   `command`: [`CommandKind`], programs the operator names;
//! - `runner`: claims, runs, renews leases, records outcomes, purges;
//! - `tasks`: [`Tasks`], the handle (store thread, runner thread);
//! - `keys`: API keys, their quotas, [`TaskKeys`] for the bearer middleware;
//! - `api`: the HTTP routes; `openapi`: their OpenAPI document;
//!   `results`: results sent in slices;
//!   `dashboard`: the page at `/ui`; `limits`: every bound.
//!
//! **Architecture Invariant:** the framework (`celer`) never names this
//! crate (it names SQLite only in its optional session store); this crate
//! uses only the framework's public API.

pub mod api;
pub mod command;
mod dashboard;
pub mod keys;
mod kind;
pub mod limits;
pub mod model;
pub mod openapi;
mod results;
mod runner;
pub mod store;
mod tasks;

pub use command::CommandKind;
pub use keys::TaskKeys;
pub use kind::{Context, Kinds, TaskError};
pub use model::{State, Task, TaskId};
pub use store::{Durability, SqliteStore, Store, StoreError};
pub use tasks::{CallError, Tasks, TasksConfig};

impl Tasks {
    /// The HTTP API as an app to mount, e.g. at `/tasks`.
    pub fn app(&self) -> celer::App {
        api::app(self)
    }
}
