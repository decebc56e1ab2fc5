//! `Tasks`: the handle an app keeps: the store behind its own thread, the
//! runner, the kinds, the event feed, and the stop.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use celer::dispatch::{DispatchError, Dispatcher};
use tokio::sync::{Notify, broadcast};

use crate::kind::{Cancel, Kinds};
use crate::limits;
use crate::model::{Submitted, now_millis};
use crate::store::{Durability, SqliteStore, Store, StoreError, Submit};

/// Most submits committed in one transaction.
const MAX_SUBMIT_GROUP: usize = 256;

/// A submit waiting for the group commit: its number, the submission, and
/// where its answer goes.
type PendingSubmit = (
    u64,
    Submit,
    tokio::sync::oneshot::Sender<Result<Submitted, StoreError>>,
);

/// Submits waiting for the store's thread.
#[derive(Default)]
pub(crate) struct SubmitQueue {
    next: u64,
    pending: Vec<PendingSubmit>,
}

/// How a [`Tasks`] runs. [`TasksConfig::new`] has the documented defaults.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TasksConfig {
    /// Where the SQLite store lives (created when missing).
    pub data_dir: PathBuf,
    /// What a commit survives. Default: [`Durability::Process`].
    pub durability: Durability,
    /// Tasks running at once in this process. Default:
    /// [`DEFAULT_CONCURRENCY`](limits::DEFAULT_CONCURRENCY).
    pub concurrency: usize,
    /// Threads for blocking kinds. Default: the number of CPUs.
    pub blocking_threads: usize,
    /// A running task's lease. Default: [`DEFAULT_LEASE`](limits::DEFAULT_LEASE).
    pub lease: Duration,
    /// How long finished tasks are kept. Default:
    /// [`DEFAULT_RETENTION`](limits::DEFAULT_RETENTION).
    pub retention: Duration,
    /// How long idempotency keys are kept. Default:
    /// [`IDEMPOTENCY_TTL`](limits::IDEMPOTENCY_TTL).
    pub idempotency_ttl: Duration,
    /// How long a cancelled running task may take to stop. Default:
    /// [`CANCEL_GRACE`](limits::CANCEL_GRACE).
    pub cancel_grace: Duration,
    /// Most tasks queued at once; a submit over it is answered `503`.
    /// Default: [`MAX_QUEUED`](limits::MAX_QUEUED).
    pub max_queued: u64,
    /// First retry delay, doubled per attempt. Default:
    /// [`BACKOFF_BASE`](limits::BACKOFF_BASE).
    pub backoff_base: Duration,
    /// Whether every API request needs `Authorization: Bearer <token>` of
    /// a live API key ([`crate::keys`]): `401` without one, `403` for a
    /// revoked one; tasks record the key that submitted them and count
    /// against its quotas. The dashboard's page and its script and style
    /// are served without a key (they hold no data). Default: `false`.
    pub require_key: bool,
}

impl TasksConfig {
    /// The defaults, with the store in `data_dir`.
    pub fn new(data_dir: impl Into<PathBuf>) -> TasksConfig {
        TasksConfig {
            data_dir: data_dir.into(),
            durability: Durability::default(),
            concurrency: limits::DEFAULT_CONCURRENCY,
            blocking_threads: celer::dispatch::default_threads(),
            lease: limits::DEFAULT_LEASE,
            retention: limits::DEFAULT_RETENTION,
            idempotency_ttl: limits::IDEMPOTENCY_TTL,
            cancel_grace: limits::CANCEL_GRACE,
            max_queued: limits::MAX_QUEUED,
            backoff_base: limits::BACKOFF_BASE,
            require_key: false,
        }
    }
}

/// The task API's engine: store, runner and kinds. Cloning shares it; the
/// runner runs on its own thread until [`Tasks::shutdown`].
#[derive(Clone)]
pub struct Tasks {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) store: Arc<dyn Store>,
    /// The store's own thread: every store call runs there, in order, so
    /// no async thread blocks on the disk. Its queue bound answers 503.
    pub(crate) db: Dispatcher,
    /// Threads for blocking kinds.
    pub(crate) pool: Dispatcher,
    pub(crate) kinds: Kinds,
    pub(crate) config: TasksConfig,
    /// Task snapshots after each change, for `/tasks/{id}/events`.
    pub(crate) events: broadcast::Sender<Arc<crate::model::Task>>,
    /// Wakes the runner (a submit, a finished task).
    pub(crate) wake: Notify,
    /// Set once at shutdown.
    pub(crate) stop: Cancel,
    /// This process's lease owner name.
    pub(crate) owner: String,
    /// Open event streams, bounded by `MAX_EVENT_STREAMS`.
    pub(crate) streams: Arc<tokio::sync::Semaphore>,
    /// The tasks this process runs.
    pub(crate) running: crate::runner::RunningMap,
    /// Submits waiting for their group commit ([`Inner::submit`]).
    pub(crate) submits: Arc<Mutex<SubmitQueue>>,
    /// The runner's thread, taken by the first shutdown.
    pub(crate) runner: Mutex<Option<JoinHandle<()>>>,
}

/// Why a store call gave no answer: the store failed (500) or its queue is
/// full or stopped (503).
#[derive(Debug)]
pub enum CallError {
    /// The store failed.
    Store(StoreError),
    /// The store's thread refused the call.
    Busy(DispatchError),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Store(err) => err.fmt(f),
            CallError::Busy(err) => err.fmt(f),
        }
    }
}

impl std::error::Error for CallError {}

impl Tasks {
    /// Opens the SQLite store in `config.data_dir` and starts the runner.
    pub fn open(config: TasksConfig, kinds: Kinds) -> Result<Tasks, StoreError> {
        let store = SqliteStore::open(&config.data_dir, config.durability)?;
        Ok(Tasks::with_store(Arc::new(store), config, kinds))
    }

    /// Starts the runner over any store.
    pub fn with_store(store: Arc<dyn Store>, config: TasksConfig, kinds: Kinds) -> Tasks {
        let (events, _) = broadcast::channel(limits::EVENT_BACKLOG);
        let inner = Arc::new(Inner {
            store,
            db: Dispatcher::builder()
                .threads(1)
                .queue(limits::STORE_QUEUE)
                .name("celer-tasks-db")
                .build(),
            pool: Dispatcher::builder()
                .threads(config.blocking_threads)
                .name("celer-tasks-blocking")
                .build(),
            kinds,
            config,
            events,
            wake: Notify::new(),
            stop: Cancel::default(),
            owner: format!("{}:{}", std::process::id(), fastrand::u64(..)),
            streams: Arc::new(tokio::sync::Semaphore::new(limits::MAX_EVENT_STREAMS)),
            running: Arc::default(),
            submits: Arc::default(),
            runner: Mutex::new(None),
        });
        let thread = std::thread::Builder::new()
            .name("celer-tasks".to_owned())
            .spawn({
                let inner = inner.clone();
                move || crate::runner::run(&inner)
            })
            .expect("spawn the task runner thread");
        *inner.runner.lock().unwrap_or_else(PoisonError::into_inner) = Some(thread);
        Tasks { inner }
    }

    /// Runs `op` on the store's thread.
    pub async fn call<T, F>(&self, op: F) -> Result<T, CallError>
    where
        F: FnOnce(&dyn Store) -> Result<T, StoreError> + Send + 'static,
        T: Send + 'static,
    {
        self.inner.call(op).await
    }

    /// The store itself, for what runs outside requests (reading the API
    /// keys at start). Its methods block: async code uses [`Tasks::call`].
    pub fn store(&self) -> &dyn Store {
        &*self.inner.store
    }

    /// The kinds this API runs.
    pub fn kinds(&self) -> &Kinds {
        &self.inner.kinds
    }

    /// Stops the runner: no more claims; running tasks are stopped and
    /// given back to the store (queued again, the attempt not counted), so
    /// another process or the next start runs them. Returns when done.
    pub fn shutdown(&self) {
        self.inner.stop.set();
        self.inner.wake.notify_one();
        let thread = self
            .inner
            .runner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
        self.inner.pool.shutdown();
        self.inner.db.shutdown();
    }
}

impl std::fmt::Debug for Tasks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tasks")
            .field("data_dir", &self.inner.config.data_dir)
            .field("kinds", &self.inner.kinds)
            .finish()
    }
}

impl Inner {
    pub(crate) async fn call<T, F>(&self, op: F) -> Result<T, CallError>
    where
        F: FnOnce(&dyn Store) -> Result<T, StoreError> + Send + 'static,
        T: Send + 'static,
    {
        let store = self.store.clone();
        match self.db.dispatch(move || op(&*store)).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(err)) => Err(CallError::Store(err)),
            Err(err) => Err(CallError::Busy(err)),
        }
    }

    /// Like `call`, but waits for a slot: the runner's own calls.
    pub(crate) async fn call_wait<T, F>(&self, op: F) -> Result<T, CallError>
    where
        F: FnOnce(&dyn Store) -> Result<T, StoreError> + Send + 'static,
        T: Send + 'static,
    {
        let store = self.store.clone();
        match self
            .db
            .dispatch_wait(Duration::from_secs(60), move || op(&*store))
            .await
        {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(err)) => Err(CallError::Store(err)),
            Err(err) => Err(CallError::Busy(err)),
        }
    }

    /// Stores a submission through the group commit: the submission joins
    /// the waiting ones and a flush job is queued on the store's thread
    /// (its queue bound answers `503` as for any call). The first flush to
    /// run commits every waiting submission in one transaction and answers
    /// each after the commit; later flushes find theirs done. Submissions
    /// that arrive together share a commit, and none waits for a timer.
    pub(crate) async fn submit(&self, submit: Submit) -> Result<Submitted, CallError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let seq = {
            let mut queue = self.submits.lock().unwrap_or_else(PoisonError::into_inner);
            let seq = queue.next;
            queue.next += 1;
            queue.pending.push((seq, submit, reply));
            seq
        };
        let queue = self.submits.clone();
        let store = self.store.clone();
        let events = self.publisher();
        let ttl = self.config.idempotency_ttl;
        let max_queued = self.config.max_queued;
        let flushed = self
            .db
            .dispatch(move || flush_submits(&queue, &*store, &events, ttl, max_queued))
            .await;
        if let Err(err) = flushed {
            // Refused (queue full, stopping): take the submission back
            // unless an earlier flush has it already, whose answer counts.
            let mut queue = self.submits.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(at) = queue.pending.iter().position(|(n, ..)| *n == seq) {
                queue.pending.remove(at);
                return Err(CallError::Busy(err));
            }
        }
        match answer.await {
            Ok(Ok(submitted)) => Ok(submitted),
            Ok(Err(err)) => Err(CallError::Store(err)),
            Err(_) => Err(CallError::Store(StoreError::new(
                "the store stopped before answering",
            ))),
        }
    }

    /// A handle that publishes task snapshots. Store calls publish from
    /// inside their closure, on the store's one thread, right after the
    /// change is committed: subscribers then see the changes in commit
    /// order (a task's `queued` before its `running`), which publishing
    /// after the call returns, from whichever task awaited it, does not
    /// guarantee.
    pub(crate) fn publisher(&self) -> Publisher {
        Publisher(self.events.clone())
    }
}

/// Publishes task snapshots to `/events` subscribers (see
/// [`Inner::publisher`]).
#[derive(Clone)]
pub(crate) struct Publisher(broadcast::Sender<Arc<crate::model::Task>>);

impl Publisher {
    /// Sends a snapshot; no subscriber is not an error.
    pub(crate) fn publish(&self, task: &crate::model::Task) {
        let _ = self.0.send(Arc::new(task.clone()));
    }
}

/// The store thread's side of [`Inner::submit`]: commits the waiting
/// submissions (up to [`MAX_SUBMIT_GROUP`]) in one transaction, then
/// answers each.
fn flush_submits(
    queue: &Mutex<SubmitQueue>,
    store: &dyn Store,
    events: &Publisher,
    ttl: Duration,
    max_queued: u64,
) -> Result<(), StoreError> {
    let group: Vec<PendingSubmit> = {
        let mut queue = queue.lock().unwrap_or_else(PoisonError::into_inner);
        let n = queue.pending.len().min(MAX_SUBMIT_GROUP);
        queue.pending.drain(..n).collect()
    };
    if group.is_empty() {
        return Ok(());
    }
    let (submits, replies): (Vec<Submit>, Vec<_>) = group
        .into_iter()
        .map(|(_, submit, reply)| (submit, reply))
        .unzip();
    match store.submit_many(&submits, ttl, max_queued, now_millis()) {
        Ok(answers) => {
            // Published here, after the commit and on the store's thread:
            // before any later change to these tasks (see `publisher`).
            for answer in &answers {
                if let Ok(Submitted::Created(task)) = answer {
                    events.publish(task);
                }
            }
            for (reply, answer) in replies.into_iter().zip(answers) {
                let _ = reply.send(answer);
            }
        }
        Err(err) => {
            for reply in replies {
                let _ = reply.send(Err(err.clone()));
            }
        }
    }
    Ok(())
}
