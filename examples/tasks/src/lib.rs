//! An app with the task API: two Rust task kinds and a route that runs
//! CPU work on the dispatcher.
//!
//! - `primes` (blocking, on the task API's threads): counts the primes
//!   below `below`, reports progress, stops when cancelled;
//! - `countdown` (async): waits `seconds`, one progress report a second;
//! - `GET /primes/<int:below>` counts them inside the request on a
//!   `Dispatcher` of its own: `503` with `Retry-After` when its queue is
//!   full.

use std::time::Duration;

use celer::dispatch::{DispatchError, Dispatcher};
use celer::{App, Request};
use celer_tasks::{Context, Kinds, TaskError, Tasks};
use serde::{Deserialize, Serialize};

/// The `primes` kind's input.
#[derive(Debug, Deserialize)]
pub struct PrimesInput {
    /// Count the primes below this number (at most 50,000,000).
    pub below: u64,
}

/// The `primes` kind's output.
#[derive(Debug, Serialize)]
pub struct PrimesOutput {
    /// How many primes are below `below`.
    pub count: u64,
    /// The attempt that found it.
    pub attempt: u32,
}

/// Largest `below` the app accepts.
pub const MAX_BELOW: u64 = 50_000_000;

fn is_prime(n: u64) -> bool {
    n >= 2
        && (2..)
            .take_while(|d| d * d <= n)
            .all(|d| !n.is_multiple_of(d))
}

/// Counts primes below `below`; `tick` is told the fraction done every
/// 1/100th and may stop the count by returning `false`.
pub fn count_primes(below: u64, mut tick: impl FnMut(f64) -> bool) -> Option<u64> {
    let step = (below / 100).max(1);
    let mut count = 0;
    for n in 0..below {
        if n.is_multiple_of(step) && !tick(n as f64 / below as f64) {
            return None;
        }
        count += u64::from(is_prime(n));
    }
    Some(count)
}

/// The app's task kinds, with the built-in `echo`.
pub fn kinds() -> Kinds {
    let mut kinds = Kinds::new();
    kinds.register_blocking("primes", |input: PrimesInput, ctx: &Context| {
        if input.below > MAX_BELOW {
            return Err(TaskError::fail(format!("below is over {MAX_BELOW}")));
        }
        let count = count_primes(input.below, |done| {
            ctx.progress(done);
            !ctx.is_cancelled()
        })
        .ok_or_else(TaskError::cancelled)?;
        Ok(PrimesOutput {
            count,
            attempt: ctx.attempt(),
        })
    });
    kinds.register("countdown", |seconds: u32, ctx: Context| async move {
        for left in (0..seconds).rev() {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs(1)) => {}
                () = ctx.cancelled() => return Err(TaskError::cancelled()),
            }
            ctx.progress(f64::from(seconds - left) / f64::from(seconds.max(1)));
        }
        Ok("liftoff")
    });
    kinds
}

/// The app: the task API at `/tasks`, and `/primes/<below>` on `pool`.
pub fn app(tasks: &Tasks, pool: Dispatcher) -> App {
    let mut app = App::new();
    app.mount("/tasks", tasks.app());
    app.state(pool);
    app.get("/primes/<int:below>", |req: Request| async move {
        let pool = req.state::<Dispatcher>().expect("pool").clone();
        let below: u64 = req.param("below").unwrap_or(0).min(1_000_000);
        let count = pool
            .dispatch(move || count_primes(below, |_| true).unwrap_or(0))
            .await?;
        Ok::<_, DispatchError>(count.to_string())
    });
    app
}
