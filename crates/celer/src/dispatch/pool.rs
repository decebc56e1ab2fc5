//! The pool: worker threads waiting on one queue, the slots that bound it,
//! the counters and the stop.

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
    /// The waiting jobs and the closed flag; guarded by one lock that the
    /// workers wait on through `ready`.
    queue: Mutex<Queue>,
    /// Signalled once per queued job, and to all at close.
    ready: Condvar,
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

struct Queue {
    jobs: VecDeque<Job>,
    closed: bool,
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
            queue: Mutex::new(Queue {
                jobs: VecDeque::with_capacity(self.queue.min(4096)),
                closed: false,
            }),
            ready: Condvar::new(),
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
                    .spawn(move || shared.work())
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
    /// A worker thread: takes jobs until the queue is closed and empty.
    fn work(&self) {
        loop {
            let job = {
                let mut queue = lock(&self.queue);
                loop {
                    if let Some(job) = queue.jobs.pop_front() {
                        break job;
                    }
                    if queue.closed {
                        return;
                    }
                    queue = self
                        .ready
                        .wait(queue)
                        .unwrap_or_else(PoisonError::into_inner);
                }
            };
            self.queued.fetch_sub(1, Ordering::Relaxed);
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

    fn push(&self, job: Job) -> Result<(), DispatchError> {
        let mut queue = lock(&self.queue);
        if queue.closed {
            return Err(DispatchError::new_stopped());
        }
        queue.jobs.push_back(job);
        self.queued.fetch_add(1, Ordering::Relaxed);
        drop(queue);
        self.ready.notify_one();
        Ok(())
    }

    fn reject(&self) -> DispatchError {
        self.rejected.fetch_add(1, Ordering::Relaxed);
        DispatchError::new_overloaded(self.retry_after)
    }

    fn close(&self) {
        lock(&self.queue).closed = true;
        self.slots.close();
        self.ready.notify_all();
    }
}

/// The lock, also after a panic elsewhere: no code panics while holding it.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests;
