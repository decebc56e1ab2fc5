//! The pool: worker threads that each wait at their own hand-off place,
//! the queue for jobs that find every worker busy, the slots that bound
//! it, the counters and the stop.
//!
//! A job submitted while a worker is idle goes straight to that worker
//! (the one idle most recently: its caches are the warmest), which is woken
//! only then; a job that finds every worker busy waits in the queue, which
//! the workers empty before they go idle, and wakes nobody. An idle worker
//! sleeps at once rather than spin or yield its core: see
//! docs/decisions/116-dispatcher-hand-off.md for the figures behind this.

use std::collections::VecDeque;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

use super::{DEFAULT_QUEUE, DEFAULT_RETRY_AFTER, DispatchError, default_threads};

/// A bounded pool of worker threads for blocking or CPU-heavy work.
///
/// Cloning is cheap and shares the pool. The threads stop when
/// [`Dispatcher::shutdown`] is called or the last clone is dropped (after
/// running the jobs already queued). See the [module](super) for the
/// behaviour at the bounds.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let pool = celer::dispatch::Dispatcher::builder().threads(2).queue(8).build();
/// assert_eq!(pool.dispatch(|| 6 * 7).await.unwrap(), 42);
/// pool.shutdown();
/// # });
/// ```
#[derive(Clone)]
pub struct Dispatcher {
    /// Owned by the clones; its drop closes the queue.
    owner: Arc<Owner>,
}

/// Builds a [`Dispatcher`].
#[derive(Debug, Clone)]
pub struct DispatcherBuilder {
    threads: usize,
    queue: usize,
    retry_after: Duration,
    name: String,
}

/// A snapshot of a dispatcher's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct DispatchStats {
    /// Worker threads.
    pub threads: usize,
    /// The queue's bound, in jobs.
    pub capacity: usize,
    /// Jobs waiting in the queue now.
    pub queued: usize,
    /// Jobs running now.
    pub running: usize,
    /// Jobs refused because the queue was full (total).
    pub rejected: u64,
    /// Jobs that ran to their end, panics included (total).
    pub completed: u64,
    /// Jobs that panicked (total, also counted in `completed`).
    pub panicked: u64,
    /// Jobs not started because their requester had gone (total).
    pub abandoned: u64,
}

/// The part the clones own; dropping it closes the queue.
struct Owner {
    shared: Arc<Shared>,
    /// The worker threads, taken by the first `shutdown`.
    threads: Mutex<Vec<JoinHandle<()>>>,
    n_threads: usize,
}

/// What the workers and the clones share.
struct Shared {
    /// The waiting jobs, the idle workers and the closed flag.
    state: Mutex<State>,
    /// Each worker thread's hand-off place, by index.
    workers: Box<[Worker]>,
    /// One permit per job the pool may hold (queue bound plus threads):
    /// taken before a job is queued, given back when it has run, so the
    /// hand-off path releases nothing. Closed at shutdown.
    slots: Arc<Semaphore>,
    capacity: usize,
    retry_after: Duration,
    queued: AtomicUsize,
    running: AtomicUsize,
    rejected: AtomicU64,
    completed: AtomicU64,
    panicked: AtomicU64,
    abandoned: AtomicU64,
}

struct State {
    /// Jobs that found every worker busy, oldest first. Empty whenever a
    /// worker is idle: a worker goes idle only when it finds it empty.
    jobs: VecDeque<Job>,
    /// The workers waiting at their hand-off place with nothing handed yet,
    /// the most recently idle last. Whoever takes a worker off this list
    /// hands it exactly one thing: a job, or the stop.
    idle: Vec<usize>,
    closed: bool,
}

/// One worker thread's hand-off place.
struct Worker {
    hand: Mutex<Hand>,
    /// Signalled when something is handed to the worker asleep on it.
    wake: Condvar,
}

/// What is handed to a worker, and whether it sleeps.
#[derive(Default)]
struct Hand {
    job: Option<Job>,
    stop: bool,
    /// The worker waits on `wake` (set under the lock before it sleeps,
    /// cleared when it wakes): only then does a hand-off wake it.
    asleep: bool,
}

/// A queued job: the work (which replies on its own channel) and its slot.
struct Job {
    run: Box<dyn FnOnce(&Shared) + Send>,
    slot: OwnedSemaphorePermit,
}

// ===== impl DispatcherBuilder =====

impl DispatcherBuilder {
    /// Worker threads, 1 to 4096. Default is the number of CPUs
    /// ([`default_threads`](super::default_threads)).
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = threads.clamp(1, 4096);
        self
    }

    /// The bound of the queue of jobs waiting for a worker, at least one.
    /// Default is [`DEFAULT_QUEUE`](super::DEFAULT_QUEUE).
    pub fn queue(mut self, jobs: usize) -> Self {
        self.queue = jobs.clamp(1, Semaphore::MAX_PERMITS / 2);
        self
    }

    /// The `Retry-After` sent with a refusal when the queue is full
    /// (rounded to whole seconds, at least one). Default is
    /// [`DEFAULT_RETRY_AFTER`](super::DEFAULT_RETRY_AFTER).
    pub fn retry_after(mut self, delay: Duration) -> Self {
        self.retry_after = delay;
        self
    }

    /// The worker threads' name prefix. Default is `celer-dispatch`.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Starts the worker threads.
    ///
    /// # Panics
    ///
    /// When the operating system refuses to start a thread.
    pub fn build(self) -> Dispatcher {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                jobs: VecDeque::with_capacity(self.queue.min(4096)),
                idle: Vec::with_capacity(self.threads),
                closed: false,
            }),
            workers: (0..self.threads)
                .map(|_| Worker {
                    hand: Mutex::new(Hand::default()),
                    wake: Condvar::new(),
                })
                .collect(),
            slots: Arc::new(Semaphore::new(self.queue.saturating_add(self.threads))),
            capacity: self.queue,
            retry_after: self.retry_after,
            queued: AtomicUsize::new(0),
            running: AtomicUsize::new(0),
            rejected: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            panicked: AtomicU64::new(0),
            abandoned: AtomicU64::new(0),
        });
        let threads = (0..self.threads)
            .map(|idx| {
                let shared = shared.clone();
                std::thread::Builder::new()
                    .name(format!("{}-{idx}", self.name))
                    .spawn(move || shared.work(idx))
                    .expect("spawn a dispatcher thread")
            })
            .collect();
        Dispatcher {
            owner: Arc::new(Owner {
                shared,
                threads: Mutex::new(threads),
                n_threads: self.threads,
            }),
        }
    }
}

impl Default for DispatcherBuilder {
    fn default() -> Self {
        DispatcherBuilder {
            threads: default_threads(),
            queue: DEFAULT_QUEUE,
            retry_after: DEFAULT_RETRY_AFTER,
            name: "celer-dispatch".to_owned(),
        }
    }
}

// ===== impl Dispatcher =====

impl Dispatcher {
    /// A builder with the defaults.
    pub fn builder() -> DispatcherBuilder {
        DispatcherBuilder::default()
    }

    /// A dispatcher with the defaults.
    pub fn new() -> Dispatcher {
        Dispatcher::builder().build()
    }

    /// Runs `job` on a worker thread and gives its value. When the queue
    /// is full the job is refused at once ([`DispatchError::is_overloaded`]:
    /// `503` with `Retry-After`).
    ///
    /// The job is queued when the future is first polled. Dropping the
    /// future before the job starts means the job never runs.
    pub async fn dispatch<F, T>(&self, job: F) -> Result<T, DispatchError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let shared = &self.owner.shared;
        let slot = match shared.slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(tokio::sync::TryAcquireError::NoPermits) => return Err(shared.reject()),
            Err(tokio::sync::TryAcquireError::Closed) => return Err(DispatchError::new_stopped()),
        };
        self.enqueue(slot, job).await
    }

    /// Like [`dispatch`](Self::dispatch), but when the queue is full waits
    /// up to `deadline` for a slot before refusing the job.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use std::time::Duration;
    /// let pool = celer::dispatch::Dispatcher::builder().threads(1).queue(1).build();
    /// let n = pool.dispatch_wait(Duration::from_secs(5), || 1 + 1).await.unwrap();
    /// assert_eq!(n, 2);
    /// # });
    /// ```
    pub async fn dispatch_wait<F, T>(&self, deadline: Duration, job: F) -> Result<T, DispatchError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let shared = &self.owner.shared;
        let acquire = shared.slots.clone().acquire_owned();
        let slot = match tokio::time::timeout(deadline, acquire).await {
            Ok(Ok(slot)) => slot,
            Ok(Err(_closed)) => return Err(DispatchError::new_stopped()),
            Err(_elapsed) => return Err(shared.reject()),
        };
        self.enqueue(slot, job).await
    }

    /// The counters now.
    pub fn stats(&self) -> DispatchStats {
        let shared = &self.owner.shared;
        DispatchStats {
            threads: self.owner.n_threads,
            capacity: shared.capacity,
            queued: shared.queued.load(Ordering::Relaxed),
            running: shared.running.load(Ordering::Relaxed),
            rejected: shared.rejected.load(Ordering::Relaxed),
            completed: shared.completed.load(Ordering::Relaxed),
            panicked: shared.panicked.load(Ordering::Relaxed),
            abandoned: shared.abandoned.load(Ordering::Relaxed),
        }
    }

    /// Stops the pool: new jobs and jobs waiting for a slot are refused
    /// ([`DispatchError::is_stopped`]), the jobs already queued run, and
    /// this call returns when every worker thread has ended. Running jobs
    /// are not interrupted. Calling it again, or from a job, returns at once
    /// (a job's own thread is not waited for).
    pub fn shutdown(&self) {
        self.owner.shared.close();
        let threads = std::mem::take(&mut *lock(&self.owner.threads));
        let current = std::thread::current().id();
        for thread in threads {
            if thread.thread().id() != current {
                // A worker never panics: jobs run under `catch_unwind`.
                let _ = thread.join();
            }
        }
    }

    /// Queues `job` in the slot held and waits for its reply.
    async fn enqueue<F, T>(&self, slot: OwnedSemaphorePermit, job: F) -> Result<T, DispatchError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let run = Box::new(move |shared: &Shared| shared.run(job, tx));
        self.owner.shared.push(Job { run, slot })?;
        // The sender is dropped unsent only when the job was abandoned, which
        // needs this receiver gone; a reply always comes otherwise.
        rx.await
            .unwrap_or_else(|_| Err(DispatchError::new_stopped()))
    }
}

impl Default for Dispatcher {
    fn default() -> Self {
        Dispatcher::new()
    }
}

impl fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dispatcher")
            .field("stats", &self.stats())
            .finish()
    }
}

// ===== impl Owner =====

impl Drop for Owner {
    fn drop(&mut self) {
        // The workers drain the queue and end on their own; nobody waits.
        self.shared.close();
    }
}

// ===== impl Shared =====

impl Shared {
    /// Worker thread `me`: runs the queued jobs, then waits idle for one to
    /// be handed to it, until the pool is closed and the queue empty.
    fn work(&self, me: usize) {
        let worker = &self.workers[me];
        loop {
            let job = {
                let mut state = lock(&self.state);
                if let Some(job) = state.jobs.pop_front() {
                    self.queued.fetch_sub(1, Ordering::Relaxed);
                    job
                } else if state.closed {
                    return;
                } else {
                    state.idle.push(me);
                    drop(state);
                    match worker.wait() {
                        Some(job) => job,
                        None => return,
                    }
                }
            };
            let Job { run, slot } = job;
            run(self);
            drop(slot);
        }
    }

    /// Runs one job unless its requester has gone, and replies.
    fn run<F, T>(&self, job: F, reply: oneshot::Sender<Result<T, DispatchError>>)
    where
        F: FnOnce() -> T,
    {
        if reply.is_closed() {
            self.abandoned.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.running.fetch_add(1, Ordering::Relaxed);
        let outcome = catch_unwind(AssertUnwindSafe(job));
        self.running.fetch_sub(1, Ordering::Relaxed);
        self.completed.fetch_add(1, Ordering::Relaxed);
        let value = outcome.map_err(|payload| {
            self.panicked.fetch_add(1, Ordering::Relaxed);
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic payload".to_owned());
            DispatchError::new_panicked(message)
        });
        let _ = reply.send(value);
    }

    /// Hands `job` to the idle worker idle last, or queues it when every
    /// worker is busy.
    fn push(&self, job: Job) -> Result<(), DispatchError> {
        let mut state = lock(&self.state);
        if state.closed {
            return Err(DispatchError::new_stopped());
        }
        if let Some(idle) = state.idle.pop() {
            drop(state);
            self.workers[idle].give(Some(job));
        } else {
            state.jobs.push_back(job);
            self.queued.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    fn reject(&self) -> DispatchError {
        self.rejected.fetch_add(1, Ordering::Relaxed);
        DispatchError::new_overloaded(self.retry_after)
    }

    /// Refuses new jobs and stops the idle workers; the busy ones stop
    /// when they find the queue empty.
    fn close(&self) {
        let idle = {
            let mut state = lock(&self.state);
            state.closed = true;
            std::mem::take(&mut state.idle)
        };
        self.slots.close();
        for idle in idle {
            self.workers[idle].give(None);
        }
    }
}

// ===== impl Worker =====

impl Worker {
    /// Waits for what is handed: the job, or `None` for the stop.
    fn wait(&self) -> Option<Job> {
        let mut hand = lock(&self.hand);
        loop {
            if let Some(job) = hand.job.take() {
                return Some(job);
            }
            if hand.stop {
                return None;
            }
            hand.asleep = true;
            hand = self.wake.wait(hand).unwrap_or_else(PoisonError::into_inner);
            hand.asleep = false;
        }
    }

    /// Hands a job (`None`: the stop) to this worker, taken off the idle
    /// list by the caller; wakes it only when it sleeps.
    fn give(&self, job: Option<Job>) {
        let mut hand = lock(&self.hand);
        match job {
            Some(job) => hand.job = Some(job),
            None => hand.stop = true,
        }
        let asleep = hand.asleep;
        drop(hand);
        if asleep {
            self.wake.notify_one();
        }
    }
}

/// The lock, also after a panic elsewhere: no code panics while holding it.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests;
