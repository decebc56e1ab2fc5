//! The pool: worker threads that each wait on their own condition
//! variable, the queue for jobs that find every worker busy, the slot count
//! that bounds it, the counters and the stop.
//!
//! A job submitted while a worker is idle goes straight to that worker
//! (the one idle most recently: its caches are the warmest), which is woken
//! only then; a job that finds every worker busy waits in the queue, which
//! the workers empty before they go idle, and wakes nobody. An idle worker
//! sleeps at once rather than spin or yield its core: see
//! docs/decisions/116-dispatcher-hand-off.md for the figures behind this.
//!
//! The submit path is one compare-and-swap for the slot, one allocation for
//! the job (the [job cell](super::cell)), one lock of the pool's mutex and,
//! when a worker sleeps, one wake-up; the slot count is a single atomic,
//! and waiters of `dispatch_wait` are notified only when there are some
//! (docs/decisions/123-dispatcher-job-cell-and-slot-count.md).

use std::collections::VecDeque;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::Notify;

use super::cell::{self, Counters, Job};
use super::{DEFAULT_QUEUE, DEFAULT_RETRY_AFTER, DispatchError, default_threads};

/// The largest queue bound [`DispatcherBuilder::queue`] accepts: far above
/// any memory, low enough that the slot count never reaches its closed flag.
const MAX_QUEUE: usize = usize::MAX >> 4;

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
    /// The waiting jobs, the idle workers, what is handed to each, the
    /// closed flag.
    state: Mutex<State>,
    /// Each worker thread's condition variable (on `state`), by index:
    /// signalled when something is handed to that worker.
    wake: Box<[Condvar]>,
    /// Jobs held, queued or running, against their bound; closed at
    /// shutdown.
    slots: Slots,
    capacity: usize,
    retry_after: Duration,
    /// Jobs refused (by any submitter).
    rejected: AtomicU64,
    /// Each worker's counters, by index.
    counters: Box<[Counters]>,
}

struct State {
    /// Jobs that found every worker busy, oldest first. Empty whenever a
    /// worker is idle: a worker goes idle only when it finds it empty.
    jobs: VecDeque<Job>,
    /// The workers waiting with nothing handed yet, the most recently idle
    /// last. Whoever takes a worker off this list hands it exactly one
    /// thing: a job, or the stop.
    idle: Vec<usize>,
    /// What is handed to each worker, by index; taken by the worker.
    hands: Box<[Hand]>,
    closed: bool,
}

/// What is handed to an idle worker.
#[derive(Default)]
enum Hand {
    #[default]
    Nothing,
    Job(Job),
    Stop,
}

/// The slot count: one slot per job the pool holds (queue bound plus
/// threads), taken before a job is queued and given back when it has run
/// or was abandoned.
struct Slots {
    /// Slots taken; the top bit is the closed flag.
    held: AtomicUsize,
    /// The bound of `held`.
    limit: usize,
    /// `dispatch_wait` callers waiting for a slot: a freed slot is
    /// announced on `freed` only when there are some.
    waiters: AtomicUsize,
    /// Wakes one waiter per freed slot; every waiter at the close.
    freed: Notify,
}

/// Why no slot was taken.
#[derive(Clone, Copy)]
enum NoSlot {
    Full,
    Closed,
}

/// The closed flag of [`Slots::held`].
const CLOSED: usize = 1 << (usize::BITS - 1);

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
        self.queue = jobs.clamp(1, MAX_QUEUE);
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
                hands: (0..self.threads).map(|_| Hand::Nothing).collect(),
                closed: false,
            }),
            wake: (0..self.threads).map(|_| Condvar::new()).collect(),
            slots: Slots {
                held: AtomicUsize::new(0),
                limit: self.queue + self.threads,
                waiters: AtomicUsize::new(0),
                freed: Notify::new(),
            },
            capacity: self.queue,
            retry_after: self.retry_after,
            rejected: AtomicU64::new(0),
            counters: (0..self.threads).map(|_| Counters::default()).collect(),
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
        shared.slots.try_take().map_err(|no| shared.refusal(no))?;
        self.enqueue(job).await
    }

    /// Like [`dispatch`](Self::dispatch), but when the queue is full waits
    /// up to `deadline` for a slot before refusing the job.
    ///
    /// A freed slot wakes one waiter, but a [`dispatch`](Self::dispatch)
    /// made at that moment may take it first; the waiter then waits on,
    /// still bounded by its deadline.
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
        shared
            .slots
            .take_within(deadline)
            .await
            .map_err(|no| shared.refusal(no))?;
        self.enqueue(job).await
    }

    /// The counters now.
    pub fn stats(&self) -> DispatchStats {
        let shared = &self.owner.shared;
        let queued = lock(&shared.state).jobs.len();
        let mut stats = DispatchStats {
            threads: self.owner.n_threads,
            capacity: shared.capacity,
            queued,
            rejected: shared.rejected.load(Ordering::Relaxed),
            ..DispatchStats::default()
        };
        for counters in shared.counters.iter() {
            // `completed` first, with `Acquire`: the `started` read after it
            // is at least as recent, so `started >= completed`.
            let completed = counters.completed.load(Ordering::Acquire);
            let started = counters.started.load(Ordering::Relaxed);
            stats.completed += completed;
            stats.running += started.saturating_sub(completed) as usize;
            stats.panicked += counters.panicked.load(Ordering::Relaxed);
            stats.abandoned += counters.abandoned.load(Ordering::Relaxed);
        }
        stats
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

    /// Queues `job` in the slot taken and waits for its value.
    async fn enqueue<F, T>(&self, job: F) -> Result<T, DispatchError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let shared = &self.owner.shared;
        let (reply, job) = cell::job(job);
        if let Err(job) = shared.push(job) {
            drop(job);
            shared.slots.give_back();
            return Err(DispatchError::new_stopped());
        }
        reply.await
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
        let counters = &self.counters[me];
        let wake = &self.wake[me];
        let mut state = lock(&self.state);
        loop {
            let job = if let Some(job) = state.jobs.pop_front() {
                job
            } else if state.closed {
                return;
            } else {
                state.idle.push(me);
                loop {
                    // Waiting releases the lock; whoever takes `me` off the
                    // idle list hands it something and signals `wake`.
                    state = wake.wait(state).unwrap_or_else(PoisonError::into_inner);
                    match std::mem::take(&mut state.hands[me]) {
                        Hand::Job(job) => break job,
                        Hand::Stop => return,
                        Hand::Nothing => {} // a spurious wake-up
                    }
                }
            };
            drop(state);
            // A panic of the job's own is its value; this catches one from
            // a drop of what an abandoned job or a gone requester left.
            let waker = catch_unwind(AssertUnwindSafe(|| job.run(counters)))
                .ok()
                .flatten();
            // Before the wake-up: on a shared core the woken requester may
            // run at once, and whatever is left after the wake-up is in
            // its next job's way.
            self.slots.give_back();
            if let Some(waker) = waker {
                waker.wake();
            }
            state = lock(&self.state);
        }
    }

    /// Hands `job` to the idle worker idle last, or queues it when every
    /// worker is busy; gives it back when the pool is closed.
    fn push(&self, job: Job) -> Result<(), Job> {
        let mut state = lock(&self.state);
        if state.closed {
            return Err(job);
        }
        if let Some(idle) = state.idle.pop() {
            state.hands[idle] = Hand::Job(job);
            drop(state);
            self.wake[idle].notify_one();
        } else {
            state.jobs.push_back(job);
        }
        Ok(())
    }

    /// The error for a job that got no slot.
    fn refusal(&self, no: NoSlot) -> DispatchError {
        match no {
            NoSlot::Full => {
                self.rejected.fetch_add(1, Ordering::Relaxed);
                DispatchError::new_overloaded(self.retry_after)
            }
            NoSlot::Closed => DispatchError::new_stopped(),
        }
    }

    /// Refuses new jobs and slot waiters and stops the idle workers; the
    /// busy ones stop when they find the queue empty.
    fn close(&self) {
        let idle = {
            let mut state = lock(&self.state);
            state.closed = true;
            let idle = std::mem::take(&mut state.idle);
            for &worker in &idle {
                state.hands[worker] = Hand::Stop;
            }
            idle
        };
        self.slots.close();
        for worker in idle {
            self.wake[worker].notify_one();
        }
    }
}

// ===== impl Slots =====

impl Slots {
    /// Takes a slot if one is free.
    fn try_take(&self) -> Result<(), NoSlot> {
        // `SeqCst`, as the swap below: ordered with `waiters` (see
        // `take_within`).
        let mut held = self.held.load(Ordering::SeqCst);
        loop {
            if held & CLOSED != 0 {
                return Err(NoSlot::Closed);
            }
            if held >= self.limit {
                return Err(NoSlot::Full);
            }
            match self.held.compare_exchange_weak(
                held,
                held + 1,
                Ordering::SeqCst,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(()),
                Err(now) => held = now,
            }
        }
    }

    /// Takes a slot, waiting up to `deadline` for one to be freed.
    async fn take_within(&self, deadline: Duration) -> Result<(), NoSlot> {
        match self.try_take() {
            Err(NoSlot::Full) => {}
            taken_or_closed => return taken_or_closed,
        }
        let until = tokio::time::Instant::now() + deadline;
        // Counted from here until this future ends (also when dropped).
        let _waiting = Waiting::new(&self.waiters);
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            // Registered before the check below: a slot freed after the
            // check wakes this waiter (or leaves a permit in `freed`), as
            // the one who frees it reads `waiters` after freeing it, and
            // both sides use `SeqCst`.
            freed.as_mut().enable();
            match self.try_take() {
                Err(NoSlot::Full) => {}
                taken_or_closed => return taken_or_closed,
            }
            if tokio::time::timeout_at(until, freed).await.is_err() {
                return self.try_take();
            }
        }
    }

    /// Gives a slot back, and wakes a waiter if there is one.
    fn give_back(&self) {
        self.held.fetch_sub(1, Ordering::SeqCst);
        if self.waiters.load(Ordering::SeqCst) != 0 {
            self.freed.notify_one();
        }
    }

    /// Refuses every slot from now on, waiters included.
    fn close(&self) {
        self.held.fetch_or(CLOSED, Ordering::SeqCst);
        self.freed.notify_waiters();
    }

    /// Slots taken now (for tests).
    #[cfg(test)]
    fn taken(&self) -> usize {
        self.held.load(Ordering::SeqCst) & !CLOSED
    }
}

/// One waiter counted in [`Slots::waiters`] while it lives.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(waiters: &'a AtomicUsize) -> Self {
        waiters.fetch_add(1, Ordering::SeqCst);
        Waiting(waiters)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The lock, also after a panic elsewhere: no code panics while holding it.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests;
