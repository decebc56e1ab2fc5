//! The job cell: one allocation per job, shared by the requester's future
//! and the worker that runs it, holding the closure, its value and the
//! requester's waker, with a three-flag atomic state.
//!
//! It replaces a boxed closure plus a `tokio::sync::oneshot` (two
//! allocations, more atomic operations on the hand-off path; see
//! docs/decisions/123-dispatcher-job-cell-and-slot-count.md).
//!
//! Who touches what:
//!
//! - the closure: only the worker the job was handed to, once, in
//!   [`Run::run`] (the type-erased [`Job`] is moved, never cloned, from
//!   the submitter through the queue to one worker);
//! - the value: written by that worker before it sets `DONE`, read by the
//!   requester only after it has seen `DONE`;
//! - the waker: the requester's while `WAKER` is clear (it writes it, then
//!   sets `WAKER`; to replace it, it clears `WAKER` first, and if it finds
//!   `DONE` set in doing so it leaves the waker alone); the worker's once
//!   it has set `DONE` and found `WAKER` set (it takes it). Nobody reads
//!   or writes it while `WAKER` is set and `DONE` is not.
//!
//! The worker lets go of the cell before it wakes the requester, so that
//! the requester's thread, which allocated the cell, is usually the one
//! that frees it (into its own allocator cache, for its next job).
//!
//! Whatever is left (a closure never run, a value never taken, a waker) is
//! dropped with the cell, by whichever side lets go of it last.
//!
//! This module's `unsafe` is those three `UnsafeCell`s; each block states
//! which rule above makes it sound.
#![allow(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]

use std::cell::UnsafeCell;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};

use super::DispatchError;

/// The value is written; set once, by the worker.
const DONE: usize = 1;
/// A waker is stored; set and cleared by the requester.
const WAKER: usize = 2;
/// The requester's future was dropped; set once, by the requester.
const GONE: usize = 4;

/// A job on its way to a worker: runs once, then lets go of the cell.
pub(super) type Job = Arc<dyn Run>;

/// What a job's value or failure is delivered as.
type Outcome<T> = Result<T, DispatchError>;

/// The worker's side of a job cell, type-erased.
pub(super) trait Run: Send + Sync {
    /// Runs the closure unless the requester has gone, stores its value,
    /// lets go of the cell and gives the requester's waker to be woken
    /// (`None` when there is nobody to wake); counts what happened in
    /// `counters`.
    ///
    /// Never unwinds from the closure (a panic becomes the value); a panic
    /// from dropping what a gone requester left behind can unwind from here.
    fn run(self: Arc<Self>, counters: &Counters) -> Option<Waker>;
}

/// One worker's counters. Each is written by that worker alone (a load
/// and a store, no read-modify-write) and read by
/// [`Dispatcher::stats`](super::Dispatcher::stats); aligned so that two
/// workers' counters never share a cache line.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(super) struct Counters {
    /// Jobs whose closure was called.
    pub(super) started: AtomicU64,
    /// Jobs whose closure returned or panicked; written after `started`.
    pub(super) completed: AtomicU64,
    /// Of the completed jobs, those that panicked.
    pub(super) panicked: AtomicU64,
    /// Jobs not started because their requester had gone.
    pub(super) abandoned: AtomicU64,
}

/// Adds one to a counter that only the calling thread writes. `Release`:
/// a reader that sees `completed` with `Acquire` also sees the `started`
/// written before it.
fn bump(counter: &AtomicU64) {
    counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Release);
}

/// The shared allocation.
struct Cell<F, T> {
    /// `DONE`, `WAKER`, `GONE`.
    state: AtomicUsize,
    /// The closure, until the worker takes it.
    job: UnsafeCell<Option<F>>,
    /// The closure's value, from the worker's write until the requester
    /// takes it.
    value: UnsafeCell<Option<Outcome<T>>>,
    /// The requester's waker, valid while `WAKER` is set; see the module
    /// for whose it is when.
    waker: UnsafeCell<Option<Waker>>,
}

// SAFETY: the cell is shared by exactly two threads' handles, which reach
// its fields only as the module's rules say: the closure is used by one
// thread at a time (it is created on the submitter's and moved, with the
// `Arc`, to one worker: `F: Send`), the value is written by the worker and
// read by the requester after the `DONE` flag orders the two (`T: Send`),
// and the waker (`Send`) belongs to one side at a time, handed over by the
// `WAKER` and `DONE` flags.
unsafe impl<F: Send, T: Send> Send for Cell<F, T> {}
// SAFETY: as for `Send`: no field is reached by two threads without the
// state flags ordering the accesses.
unsafe impl<F: Send, T: Send> Sync for Cell<F, T> {}

/// The requester's side: resolves to the job's value.
pub(super) struct Reply<F, T> {
    cell: Arc<Cell<F, T>>,
    /// The value was taken: dropping needs no flag.
    taken: bool,
}

/// A job cell for `job`: the requester's future and the worker's handle.
pub(super) fn job<F, T>(job: F) -> (Reply<F, T>, Job)
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let cell = Arc::new(Cell {
        state: AtomicUsize::new(0),
        job: UnsafeCell::new(Some(job)),
        value: UnsafeCell::new(None),
        waker: UnsafeCell::new(None),
    });
    let run: Job = cell.clone();
    (Reply { cell, taken: false }, run)
}

impl<F, T> Run for Cell<F, T>
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    fn run(self: Arc<Self>, counters: &Counters) -> Option<Waker> {
        // `Acquire`: pairs with the requester's `Release` of `GONE`, so that
        // a requester gone before now is seen (and it is never wrong to run
        // a job whose requester leaves after this load: its value is dropped).
        if self.state.load(Ordering::Acquire) & GONE != 0 {
            bump(&counters.abandoned);
            return None;
        }
        // SAFETY: only the worker holding this cell's `Job` reaches `job`,
        // and `run` consumes that `Job`: nobody else reads or writes it now.
        let job = unsafe { (*self.job.get()).take() }?;
        bump(&counters.started);
        let outcome = catch_unwind(AssertUnwindSafe(job));
        bump(&counters.completed);
        let value = outcome.map_err(|payload| {
            bump(&counters.panicked);
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic payload".to_owned());
            DispatchError::new_panicked(message)
        });
        // SAFETY: `DONE` is not set yet, and the requester reads the value
        // only once it has seen `DONE`; this worker is its only writer.
        unsafe { *self.value.get() = Some(value) };
        // `Release`: the value is visible to whoever sees `DONE`; `Acquire`:
        // the waker the requester wrote before setting `WAKER` is visible.
        let before = self.state.fetch_or(DONE, Ordering::AcqRel);
        let waker = if before & (WAKER | GONE) == WAKER {
            // SAFETY: `WAKER` was set when `DONE` was: the waker is this
            // worker's now (the requester touches it again only after
            // clearing `WAKER`, which then shows it `DONE`, and it then
            // leaves the waker alone).
            unsafe { (*self.waker.get()).take() }
        } else {
            None
        };
        drop(self);
        waker
    }
}

impl<F, T> Reply<F, T> {
    /// Takes the value; the caller has seen `DONE` with `Acquire`.
    fn take(&mut self) -> Outcome<T> {
        self.taken = true;
        // SAFETY: `DONE` is set and was seen with `Acquire`: the worker's
        // write of the value happened before, and it never touches the
        // value again; this future is the only reader (`&mut self`).
        let value = unsafe { (*self.cell.value.get()).take() };
        // `None` only if polled again after `Ready`.
        value.unwrap_or_else(|| Err(DispatchError::new_stopped()))
    }
}

impl<F, T> Future for Reply<F, T> {
    type Output = Outcome<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Outcome<T>> {
        let this = &mut *self;
        let state = this.cell.state.load(Ordering::Acquire);
        if state & DONE != 0 {
            return Poll::Ready(this.take());
        }
        if state & WAKER != 0 {
            // Polled again before the value (a wake-up from elsewhere):
            // take the waker back to store the current one.
            let before = this.cell.state.fetch_and(!WAKER, Ordering::AcqRel);
            if before & DONE != 0 {
                // The worker has taken the waker (or is taking it).
                return Poll::Ready(this.take());
            }
        }
        // SAFETY: `WAKER` is clear and only this future sets it: the worker
        // does not touch the waker (it takes it only when it finds `WAKER`
        // set as it sets `DONE`).
        unsafe { *this.cell.waker.get() = Some(cx.waker().clone()) };
        // `Release`: the worker that sees `WAKER` sees this waker.
        let before = this.cell.state.fetch_or(WAKER, Ordering::AcqRel);
        if before & DONE != 0 {
            return Poll::Ready(this.take());
        }
        Poll::Pending
    }
}

impl<F, T> Drop for Reply<F, T> {
    fn drop(&mut self) {
        if !self.taken {
            // `Release`: pairs with the worker's check before it starts.
            self.cell.state.fetch_or(GONE, Ordering::Release);
        }
    }
}
