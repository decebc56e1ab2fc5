//! Load threads: each runs a current-thread tokio runtime that owns its
//! connections and its `Stats`; the calling thread shows progress and merges.

use std::cell::{Cell, RefCell};
use std::io::{IsTerminal, Write};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::Error;
use crate::conn;
use crate::plan::Plan;
use crate::stats::{ErrorKind, Stats, nanos};

/// How often the progress line is redrawn.
const PROGRESS_INTERVAL: Duration = Duration::from_secs(1);

/// One load thread's view of the run, shared by its connection tasks.
#[derive(Debug)]
pub(crate) struct Worker {
    /// The run description.
    pub(crate) plan: Arc<Plan>,
    /// When the run (and its warm-up) started.
    pub(crate) start: Instant,
    /// When measuring starts (after warm-up).
    record_from: Instant,
    /// When no new request may start.
    deadline: Option<Instant>,
    /// Requests this thread may still start; `u64::MAX` without `-n`.
    budget: Cell<u64>,
    /// Measurements; borrowed briefly per event, never across an await.
    stats: RefCell<Stats>,
    /// When the last measured response completed.
    last_response: Cell<Option<Instant>>,
    /// Counters the progress line reads.
    progress: Arc<Progress>,
    idx: usize,
}

impl Worker {
    /// Takes up to `want` requests that may start at `at`; 0 ends the run.
    ///
    /// Requests during warm-up do not count against `-n`.
    #[inline]
    pub(crate) fn claim(&self, want: u32, at: Instant) -> u32 {
        if self.deadline.is_some_and(|d| at >= d) {
            return 0;
        }
        if at < self.record_from {
            return want;
        }
        let budget = self.budget.get();
        let granted = budget.min(u64::from(want));
        self.budget.set(budget - granted);
        granted as u32
    }

    fn second(&self, now: Instant) -> usize {
        now.saturating_duration_since(self.record_from).as_secs() as usize
    }

    /// Records a complete response to a request sent at `sent` and due at `base`.
    #[inline]
    pub(crate) fn response(&self, status: u16, bytes: usize, base: Instant, sent: Instant) {
        if base < self.record_from {
            return;
        }
        let now = Instant::now();
        let second = self.second(now);
        let mut stats = self.stats.borrow_mut();
        stats.response(status, now - base, second);
        stats.bytes(bytes, second);
        if self.plan.is_open_loop() {
            stats.service.saturating_record(nanos(now - sent));
        }
        self.progress.responses[self.idx].store(stats.responses, Ordering::Relaxed);
        self.last_response.set(Some(now));
    }

    /// Records a WebSocket echo of `bytes` bytes to a message sent at `sent`.
    #[inline]
    pub(crate) fn message(&self, bytes: usize, sent: Instant) {
        if sent < self.record_from {
            return;
        }
        let now = Instant::now();
        let second = self.second(now);
        let mut stats = self.stats.borrow_mut();
        stats.message(now - sent, second);
        stats.bytes(bytes, second);
        self.progress.responses[self.idx].store(stats.responses, Ordering::Relaxed);
        self.last_response.set(Some(now));
    }

    /// Records a WebSocket upgrade time.
    pub(crate) fn upgraded(&self, took: Duration) {
        if Instant::now() >= self.record_from {
            self.stats
                .borrow_mut()
                .upgrade
                .saturating_record(nanos(took));
        }
    }

    /// Records `count` requests lost to `kind`.
    pub(crate) fn failed(&self, kind: ErrorKind, count: u64) {
        let now = Instant::now();
        if count == 0 || now < self.record_from {
            return;
        }
        let mut stats = self.stats.borrow_mut();
        stats.error(kind, count, self.second(now));
        self.progress.errors[self.idx].store(stats.error_total(), Ordering::Relaxed);
    }

    /// Records a connection set up (connected and, over TLS, handshaken),
    /// during warm-up too.
    pub(crate) fn set_up(&self) {
        self.stats.borrow_mut().setup_ok += 1;
    }

    /// Records a failed connection set-up, during warm-up too: a server
    /// that cannot take N connections must show it even when every
    /// connection was opened before measuring.
    pub(crate) fn setup_failed(&self, kind: ErrorKind) {
        self.stats.borrow_mut().setup_failed[kind as usize] += 1;
    }

    /// Records a TCP connect time.
    pub(crate) fn connected(&self, took: Duration) {
        if Instant::now() >= self.record_from {
            self.stats
                .borrow_mut()
                .connect
                .saturating_record(nanos(took));
        }
    }

    /// Records a TLS handshake time.
    pub(crate) fn handshaken(&self, took: Duration) {
        if Instant::now() >= self.record_from {
            self.stats
                .borrow_mut()
                .handshake
                .saturating_record(nanos(took));
        }
    }
}

/// Live counters, one cache line per thread so writers never share a line.
#[derive(Debug)]
struct Progress {
    responses: Vec<Padded>,
    errors: Vec<Padded>,
}

#[derive(Debug, Default)]
#[repr(align(128))]
struct Padded(AtomicU64);

impl std::ops::Deref for Padded {
    type Target = AtomicU64;
    fn deref(&self) -> &AtomicU64 {
        &self.0
    }
}

impl Progress {
    fn new(threads: usize) -> Progress {
        Progress {
            responses: (0..threads).map(|_| Padded::default()).collect(),
            errors: (0..threads).map(|_| Padded::default()).collect(),
        }
    }

    fn totals(&self) -> (u64, u64) {
        let sum = |v: &[Padded]| v.iter().map(|c| c.load(Ordering::Relaxed)).sum();
        (sum(&self.responses), sum(&self.errors))
    }
}

/// The merged result of one run.
#[derive(Debug)]
pub(crate) struct RunResult {
    /// All threads' measurements.
    pub(crate) stats: Stats,
    /// Measured time: from the end of warm-up to the last response.
    pub(crate) elapsed: Duration,
}

/// Splits `total` into `parts` nearly equal shares.
fn share(total: u64, parts: usize, idx: usize) -> u64 {
    let parts = parts as u64;
    total / parts + u64::from((idx as u64) < total % parts)
}

/// Runs the plan on its threads and merges their measurements.
pub(crate) fn run_load(plan: &Arc<Plan>, show_progress: bool) -> Result<RunResult, Error> {
    let start = Instant::now();
    let record_from = start + plan.warmup;
    let deadline = plan.duration.map(|d| record_from + d);
    let progress = Arc::new(Progress::new(plan.threads));
    let seconds = plan.duration.map_or(1, |d| d.as_secs() as usize + 1);
    let mut handles = Vec::with_capacity(plan.threads);
    let mut first_conn = 0;
    for idx in 0..plan.threads {
        let conns = share(plan.connections as u64, plan.threads, idx) as usize;
        let budget = plan
            .total_requests
            .map_or(u64::MAX, |n| share(n, plan.threads, idx));
        let plan = Arc::clone(plan);
        let progress = Arc::clone(&progress);
        let conn_range = first_conn..first_conn + conns;
        first_conn += conns;
        let handle = std::thread::Builder::new()
            .name(format!("celer-bench-{idx}"))
            .spawn(move || {
                let worker = Rc::new(Worker {
                    plan,
                    start,
                    record_from,
                    deadline,
                    budget: Cell::new(budget),
                    stats: RefCell::new(Stats::new(seconds)),
                    last_response: Cell::new(None),
                    progress,
                    idx,
                });
                run_thread(&worker, conn_range)?;
                let last = worker.last_response.get();
                let stats = worker.stats.replace(Stats::new(0));
                Ok::<_, std::io::Error>((stats, last))
            })
            .map_err(|e| Error::io("cannot start a load thread", e))?;
        handles.push(handle);
    }
    show(
        &progress,
        &handles,
        show_progress,
        record_from,
        plan.ws.is_some(),
    );
    let mut merged = Stats::new(seconds);
    let mut last_response = None;
    for handle in handles {
        let (stats, last) = handle
            .join()
            .map_err(|_| Error::io("a load thread failed", "panic"))?
            .map_err(|e| Error::io("cannot start a load thread runtime", e))?;
        merged.merge(&stats);
        last_response = last_response.max(last);
    }
    let end = last_response.unwrap_or_else(Instant::now);
    Ok(RunResult {
        stats: merged,
        elapsed: end.saturating_duration_since(record_from),
    })
}

/// Runs one thread's connections to completion on a current-thread runtime.
fn run_thread(worker: &Rc<Worker>, conns: std::ops::Range<usize>) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async {
        let tasks: Vec<_> = conns
            .map(|global_idx| {
                let worker = Rc::clone(worker);
                tokio::task::spawn_local(async move {
                    match &worker.plan.ws {
                        Some(ws) => crate::ws::echo::run(Rc::clone(&worker), ws).await,
                        None => conn::run(worker, global_idx).await,
                    }
                })
            })
            .collect();
        for task in tasks {
            let _ = task.await;
        }
    });
    Ok(())
}

/// Waits for the threads, redrawing a progress line on a terminal.
fn show<T>(
    progress: &Progress,
    handles: &[std::thread::JoinHandle<T>],
    enabled: bool,
    record_from: Instant,
    websocket: bool,
) {
    let enabled = enabled && std::io::stderr().is_terminal();
    let mut last = (0, Instant::now());
    let mut next_draw = Instant::now() + PROGRESS_INTERVAL;
    while !handles.iter().all(|h| h.is_finished()) {
        std::thread::sleep(Duration::from_millis(20));
        let now = Instant::now();
        if !enabled || now < next_draw {
            continue;
        }
        next_draw += PROGRESS_INTERVAL;
        let (responses, errors) = progress.totals();
        let rate = (responses - last.0) as f64 / (now - last.1).as_secs_f64();
        last = (responses, now);
        let (unit, what) = if websocket {
            ("msg", "echoes")
        } else {
            ("req", "responses")
        };
        let phase = if now < record_from { " warm-up" } else { "" };
        let elapsed = now.saturating_duration_since(record_from).as_secs();
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r\x1b[2K  {elapsed:>4}s{phase}  {rate:>12.0} {unit}/s  {responses:>12} {what}  {errors} errors"
        );
        let _ = err.flush();
    }
    if enabled {
        let _ = write!(std::io::stderr(), "\r\x1b[2K");
    }
}
