//! The runner: one thread with its own runtime that claims due tasks,
//! runs each under its timeout and cancellation, renews leases, records
//! outcomes with backoff for retries, and purges old tasks.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::kind::{Cancel, Context};
use crate::limits;
use crate::model::{Outcome, Task, TaskId, now_millis};
use crate::store::{Claim, Finish};
use crate::tasks::Inner;

/// How often old tasks and keys are purged.
const PURGE_INTERVAL: Duration = Duration::from_secs(60);

/// A task this process runs: its attempt and its stop signal.
#[derive(Debug)]
pub(crate) struct Running {
    attempt: u32,
    pub(crate) cancel: Cancel,
}

/// The tasks this process runs, by id; shared with the API, whose cancel
/// stops a local task at once.
pub(crate) type RunningMap = Arc<Mutex<HashMap<TaskId, Running>>>;

/// Most outcomes committed in one transaction.
const MAX_FINISH_GROUP: usize = 256;

/// An outcome waiting for its commit, and where to say it is committed:
/// the task after it, `None` for a stale attempt; the channel is dropped
/// when the commit failed.
type Pending = (Finish, tokio::sync::oneshot::Sender<Option<Task>>);

/// Sends outcomes to the group commit.
type Finisher = tokio::sync::mpsc::UnboundedSender<Pending>;

/// The group commit of outcomes: takes every outcome that is waiting
/// (up to [`MAX_FINISH_GROUP`]), commits them in one transaction, then
/// answers each. Outcomes that arrive during a commit wait for the next
/// one, so a group forms only under load and nothing is held back when
/// idle; no attempt's outcome is acknowledged (published, its task taken
/// off the running map) before its commit.
async fn group_commit(inner: Arc<Inner>, mut rx: tokio::sync::mpsc::UnboundedReceiver<Pending>) {
    let mut group: Vec<Pending> = Vec::new();
    while rx.recv_many(&mut group, MAX_FINISH_GROUP).await > 0 {
        let (finishes, replies): (Vec<Finish>, Vec<_>) = group.drain(..).unzip();
        let ids: Vec<TaskId> = finishes.iter().map(|f| f.claim.id).collect();
        let events = inner.publisher();
        match inner
            .call_wait(move |store| {
                let tasks = store.finish_many(&finishes, now_millis())?;
                tasks.iter().flatten().for_each(|task| events.publish(task));
                Ok(tasks)
            })
            .await
        {
            Ok(tasks) => {
                for (reply, task) in replies.into_iter().zip(tasks) {
                    let _ = reply.send(task);
                }
            }
            Err(err) => {
                tracing::error!(target: "celer::tasks", ids = ?ids, error = %err, "cannot record outcomes");
            }
        }
    }
}

/// The runner thread's body.
pub(crate) fn run(inner: &Arc<Inner>) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            tracing::error!(target: "celer::tasks", error = %err, "cannot start the task runner");
            return;
        }
    };
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, main_loop(inner.clone()));
}

async fn main_loop(inner: Arc<Inner>) {
    let running: RunningMap = inner.running.clone();
    let mut tasks = tokio::task::JoinSet::new();
    let renew_every = inner.config.lease / limits::RENEW_FRACTION;
    let mut next_renew = Instant::now() + renew_every;
    let mut next_purge = Instant::now();
    let (finisher, outcomes) = tokio::sync::mpsc::unbounded_channel();
    let committer = tokio::task::spawn_local(group_commit(inner.clone(), outcomes));
    while !inner.stop.is_set() {
        while tasks.try_join_next().is_some() {}
        let free = inner
            .config
            .concurrency
            .saturating_sub(lock(&running).len());
        if free > 0 {
            claim(&inner, &running, &mut tasks, &finisher, free).await;
        }
        if Instant::now() >= next_renew {
            renew(&inner, &running).await;
            next_renew = Instant::now() + renew_every;
        }
        if Instant::now() >= next_purge {
            purge(&inner).await;
            next_purge = Instant::now() + PURGE_INTERVAL;
        }
        tokio::select! {
            () = inner.wake.notified() => {}
            () = tokio::time::sleep(limits::POLL_INTERVAL) => {}
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
    // Stopping: drop the running attempts and give their tasks back.
    tasks.abort_all();
    while tasks.join_next().await.is_some() {}
    // Outcomes already sent are committed before the rest is given back.
    drop(finisher);
    let _ = committer.await;
    let claims: Vec<Claim> = lock(&running)
        .drain()
        .map(|(id, run)| Claim {
            id,
            attempt: run.attempt,
        })
        .collect();
    let now = now_millis();
    for claim in claims {
        let result = inner
            .call_wait(move |store| store.release(&claim, now))
            .await;
        if let Err(err) = result {
            tracing::warn!(target: "celer::tasks", error = %err, "cannot give a task back at shutdown");
        }
    }
}

async fn claim(
    inner: &Arc<Inner>,
    running: &RunningMap,
    tasks: &mut tokio::task::JoinSet<()>,
    finisher: &Finisher,
    free: usize,
) {
    let owner = inner.owner.clone();
    let lease = inner.config.lease;
    let events = inner.publisher();
    let claimed = inner
        .call_wait(move |store| {
            let claimed = store.claim(&owner, free, lease, now_millis())?;
            claimed.iter().for_each(|task| events.publish(task));
            Ok(claimed)
        })
        .await;
    let claimed = match claimed {
        Ok(claimed) => claimed,
        Err(err) => {
            tracing::error!(target: "celer::tasks", error = %err, "cannot claim tasks");
            return;
        }
    };
    for task in claimed {
        let cancel = Cancel::default();
        if task.cancel_requested {
            cancel.set();
        }
        lock(running).insert(
            task.id,
            Running {
                attempt: task.attempts,
                cancel: cancel.clone(),
            },
        );
        tasks.spawn_local(execute(
            inner.clone(),
            running.clone(),
            finisher.clone(),
            task,
            cancel,
        ));
    }
}

async fn renew(inner: &Arc<Inner>, running: &RunningMap) {
    let claims: Vec<Claim> = lock(running)
        .iter()
        .map(|(id, run)| Claim {
            id: *id,
            attempt: run.attempt,
        })
        .collect();
    if claims.is_empty() {
        return;
    }
    let owner = inner.owner.clone();
    let until = now_millis() + crate::model::millis(inner.config.lease);
    match inner
        .call_wait(move |store| store.renew(&owner, &claims, until))
        .await
    {
        Ok(stop) => {
            let running = lock(running);
            for claim in stop {
                if let Some(run) = running.get(&claim.id) {
                    run.cancel.set();
                }
            }
        }
        Err(err) => tracing::error!(target: "celer::tasks", error = %err, "cannot renew leases"),
    }
}

async fn purge(inner: &Arc<Inner>) {
    let retention = crate::model::millis(inner.config.retention);
    let now = now_millis();
    match inner
        .call_wait(move |store| store.purge(now.saturating_sub(retention), now))
        .await
    {
        Ok(0) => {}
        Ok(n) => tracing::info!(target: "celer::tasks", purged = n, "finished tasks purged"),
        Err(err) => tracing::error!(target: "celer::tasks", error = %err, "cannot purge tasks"),
    }
}

/// Runs one attempt and records its outcome (through the group commit).
async fn execute(
    inner: Arc<Inner>,
    running: RunningMap,
    finisher: Finisher,
    task: Task,
    cancel: Cancel,
) {
    let claim = Claim {
        id: task.id,
        attempt: task.attempts,
    };
    let outcome = attempt(&inner, &task, &claim, &cancel).await;
    let backoff = backoff(inner.config.backoff_base, task.attempts);
    let (reply, committed) = tokio::sync::oneshot::channel();
    let finish = Finish {
        claim,
        outcome,
        backoff,
    };
    // The task leaves the running map once its outcome is committed (and
    // published by the group commit), or the commit failed (logged; the
    // lease runs out and another attempt runs it).
    if finisher.send((finish, reply)).is_ok() {
        let _ = committed.await;
    }
    lock(&running).remove(&task.id);
    inner.wake.notify_one();
}

async fn attempt(inner: &Arc<Inner>, task: &Task, claim: &Claim, cancel: &Cancel) -> Outcome {
    let Some(kind) = inner.kinds.get(&task.kind) else {
        return Outcome::Failed {
            error: format!("unknown kind {:?}", task.kind),
            retry: false,
        };
    };
    let ctx = Context {
        id: task.id,
        attempt: task.attempts,
        cancel: cancel.clone(),
        progress: progress_reporter(inner, claim),
        dispatcher: inner.pool.clone(),
    };
    let mut handle = tokio::spawn(kind.call(&task.input, ctx));
    let timeout = Duration::from_millis(task.timeout_ms.max(0) as u64);
    let grace = inner.config.cancel_grace;
    let outcome = tokio::select! {
        joined = &mut handle => match joined {
            Ok(Ok(result)) if result.len() > limits::MAX_RESULT_BYTES => Outcome::Failed {
                error: format!("result of {} bytes is over the limit of {}", result.len(), limits::MAX_RESULT_BYTES),
                retry: false,
            },
            Ok(Ok(result)) => Outcome::Succeeded(result),
            Ok(Err(err)) => Outcome::Failed { error: err.message().to_owned(), retry: err.is_retryable() },
            Err(err) => Outcome::Failed { error: panic_message(err), retry: true },
        },
        () = tokio::time::sleep(timeout) => {
            handle.abort();
            Outcome::Failed { error: format!("timed out after {} ms", task.timeout_ms), retry: true }
        }
        () = async { cancel.wait().await; tokio::time::sleep(grace).await } => {
            handle.abort();
            tracing::warn!(target: "celer::tasks", id = task.id, "task ignored its cancel; dropped after the grace period");
            Outcome::Cancelled
        }
    };
    match outcome {
        Outcome::Succeeded(_) => outcome,
        _ if cancel.is_set() => Outcome::Cancelled,
        _ => outcome,
    }
}

fn panic_message(err: tokio::task::JoinError) -> String {
    if !err.is_panic() {
        return "the attempt was stopped".to_owned();
    }
    let payload = err.into_panic();
    let text = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    format!("panicked: {text}")
}

/// Progress reports: each is published at once and stored on the store's
/// thread, best effort (dropped when the store is busy).
fn progress_reporter(inner: &Arc<Inner>, claim: &Claim) -> Arc<dyn Fn(f64) + Send + Sync> {
    let weak = Arc::downgrade(inner);
    let claim = claim.clone();
    // Kinds on the blocking pool report from threads without a runtime.
    let runtime = tokio::runtime::Handle::current();
    Arc::new(move |fraction| {
        let Some(inner) = weak.upgrade() else { return };
        let claim = claim.clone();
        let events = inner.publisher();
        runtime.spawn(async move {
            let _ = inner
                .call(move |store| {
                    store.progress(&claim, fraction, now_millis())?;
                    if let Some(task) = store.get(claim.id)? {
                        events.publish(&task);
                    }
                    Ok(())
                })
                .await;
        });
    })
}

/// The delay before attempt `attempts + 1`: `base` doubled per attempt,
/// capped at [`BACKOFF_MAX`](limits::BACKOFF_MAX), with jitter (a uniform
/// draw in its upper half) so that failures at one moment spread out.
pub(crate) fn backoff(base: Duration, attempts: u32) -> Duration {
    let exp = attempts.saturating_sub(1).min(30);
    let full = base.saturating_mul(1u32 << exp).min(limits::BACKOFF_MAX);
    let half = full / 2;
    half + half.mul_f64(fastrand::f64())
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_and_is_capped() {
        let base = Duration::from_secs(1);
        for attempts in 1..=40u32 {
            let full = base
                .saturating_mul(1u32 << attempts.saturating_sub(1).min(30))
                .min(limits::BACKOFF_MAX);
            let delay = backoff(base, attempts);
            assert!(delay >= full / 2 && delay <= full, "{attempts}: {delay:?}");
        }
    }
}
