//! The dispatcher: a bounded pool of worker threads for blocking or
//! CPU-heavy work, with a bounded queue and backpressure a handler chooses.
//!
//! A handler hands a closure to [`Dispatcher::dispatch`] (answer `503` with
//! `Retry-After` at once when the queue is full) or
//! [`Dispatcher::dispatch_wait`] (wait up to a deadline for a slot) and
//! awaits its value. The queue holds at most [`DispatcherBuilder::queue`]
//! jobs waiting for a thread: a slot (one per queued or running job, counted
//! in one atomic) is taken before the job is queued and given back when it
//! has run, so memory never grows with load.
//!
//! - A job whose requester has gone (its future dropped: the client left, a
//!   timeout fired) is not started; it counts as abandoned.
//! - A job that panics answers `500` and its worker lives on.
//! - [`Dispatcher::shutdown`] refuses new jobs, lets the workers finish
//!   the jobs already queued and joins them.
//! - [`Dispatcher::stats`] reads the counters: queued, running, rejected,
//!   completed, panicked, abandoned.
//!
//! Failures are a [`DispatchError`], which renders like the framework's
//! other rejections, so a handler can return it or `?` it into a
//! `Result<_, DispatchError>`.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use celer::dispatch::{DispatchError, Dispatcher};
//! use celer::{App, Request};
//!
//! let pool = Dispatcher::builder().threads(2).queue(64).build();
//! let mut app = App::new();
//! app.state(pool);
//! app.get("/hash/<word>", |req: Request| async move {
//!     let pool: Dispatcher = req.state::<Dispatcher>().unwrap().clone();
//!     let word: String = req.param("word").unwrap();
//!     // Answered 503 with Retry-After when 64 jobs already wait.
//!     let n = pool.dispatch(move || word.bytes().map(u64::from).sum::<u64>()).await?;
//!     Ok::<_, DispatchError>(n.to_string())
//! });
//! # });
//! ```

mod cell;
mod error;
mod pool;

pub use error::DispatchError;
pub use pool::{DispatchStats, Dispatcher, DispatcherBuilder};

use std::time::Duration;

/// Default number of worker threads: the number of CPUs the process may use.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Default bound of the queue of waiting jobs, in jobs: 1024. Each holds one
/// allocation (the closure, room for its value and the requester's waker);
/// a job over the bound is refused (or waits, with
/// [`Dispatcher::dispatch_wait`]).
pub const DEFAULT_QUEUE: usize = 1024;

/// Default `Retry-After` of a refusal when the queue is full: 1 second.
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);
