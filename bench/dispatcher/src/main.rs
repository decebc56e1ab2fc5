//! Hand-off latency (submit → start) and throughput of celer's dispatcher
//! against `tokio::task::spawn_blocking` and a rayon pool, each with the
//! same number of worker threads, unloaded and at 2× overload.
//!
//! Run with `bench/dispatcher/run` (pins, pauses other load, records).
//! Direct use: `dispatcher-bench [--threads N] [--repeats N] [--first N] [--quick]`;
//! CSV rows on stdout, the summary on stderr.
//! `--paired-only` runs the `paired` and `idle` scenarios alone.
//! `dispatcher-bench --count POOL N` (POOL `celer-dispatch` or
//! `spawn_blocking`) only makes 200 warm-up then N unloaded hand-offs on
//! that pool and prints nothing: for `valgrind --tool=callgrind`, two runs
//! with two N, the difference of their instruction totals divided by the
//! difference of N is the cost of one job (`bench/dispatcher/instructions`).
//!
//! Scenarios, each run per pool, pools interleaved and rotated per repeat:
//!
//! - `latency`: one job in flight at a time, a no-op: the hand-off alone.
//! - `throughput`: no-op jobs, 64 in flight from 64 submitting tasks: jobs
//!   per second through the hand-off.
//! - `overload`: jobs spinning 50 µs each, offered open-loop at twice what
//!   the threads can run, for a fixed window: jobs completed per second in
//!   the window, hand-off latency of the jobs that ran, jobs refused, and the
//!   peak backlog (accepted, not yet started), which is the queue's memory.
//!   The dispatcher refuses at its bound (1024); the peers have no bound.
//! - `paired`: the `latency` scenario for the dispatcher and
//!   `spawn_blocking`, both alive in one process, in rounds: each round
//!   runs a batch of 50 jobs on each, one after the other, the order
//!   swapped every round (each pool follows the other as often as itself:
//!   what ran just before changes the next batch's figures). Rayon is left
//!   out: its idle worker yields its core for a while before it sleeps,
//!   which would weigh on whichever pool came after it. The unloaded
//!   hand-off is bimodal (docs/decisions/121-dispatcher-hand-off-paired.md):
//!   a pool measured alone tends to stay in one mode for its whole run, so
//!   the ratio of two such runs is mostly which mode each landed in; here
//!   each pool's batches land in either mode over hundreds of rounds, under
//!   the same conditions as the other pools'. Rows: each pool's p50 and
//!   p99 over all its jobs; with `--rounds PATH`, each batch's p50
//!   (for the per-mode figures of `bench/dispatcher/run`).
//! - `idle`: `paired` with the runtime idle between jobs: before each
//!   submit the submitting task sleeps [`IDLE_GAP`] (the runtime parks in
//!   `epoll_wait`, as a server's does between requests), so every job
//!   finds its pool's worker asleep, as a job arriving at an unloaded
//!   server does. In `latency` and `paired` the next job is submitted the
//!   moment the last one's value arrives, which catches `spawn_blocking`'s
//!   worker before it has gone to sleep (it wakes the runtime first and is
//!   preempted by it): those measure one job always in flight, this one
//!   a job arriving at an idle pool. Batches of [`IDLE_BATCH`] jobs, the
//!   pools' order swapped every round; rows as `paired`'s.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use celer::dispatch::Dispatcher;

/// Submitting tasks in the throughput scenario.
const IN_FLIGHT: usize = 64;
/// Work per job in the overload scenario.
const OVERLOAD_WORK: Duration = Duration::from_micros(50);
/// The dispatcher's queue bound in these runs.
const QUEUE: usize = 1024;
/// Jobs per pool per round of the `paired` scenario: a batch lasts some
/// 100 µs, short beside the modes of the hand-off.
const PAIRED_BATCH: usize = 50;
/// The submitter's idle time before each job of the `idle` scenario: the
/// runtime's timer granularity, long beside a worker's way to sleep.
const IDLE_GAP: Duration = Duration::from_millis(1);
/// Jobs per pool per round of the `idle` scenario.
const IDLE_BATCH: usize = 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Celer,
    SpawnBlocking,
    Rayon,
}

const KINDS: [Kind; 3] = [Kind::Celer, Kind::SpawnBlocking, Kind::Rayon];

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Celer => "celer-dispatch",
            Kind::SpawnBlocking => "spawn_blocking",
            Kind::Rayon => "rayon",
        }
    }
}

/// One pool under test.
#[derive(Clone)]
enum Pool {
    Celer(Dispatcher),
    SpawnBlocking,
    Rayon(Arc<rayon::ThreadPool>),
}

type Reply = Pin<Box<dyn Future<Output = Option<u64>> + Send>>;

impl Pool {
    fn new(kind: Kind, threads: usize) -> Pool {
        match kind {
            Kind::Celer => Pool::Celer(Dispatcher::builder().threads(threads).queue(QUEUE).build()),
            Kind::SpawnBlocking => Pool::SpawnBlocking,
            Kind::Rayon => Pool::Rayon(Arc::new(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .expect("rayon pool"),
            )),
        }
    }

    /// Submits a job that records its hand-off and spins `work`; resolves to
    /// the hand-off in nanoseconds, or `None` when the pool refused it.
    ///
    /// Every pool is called from inside the boxed future, the clock read
    /// just before the call: the box and the clone of the handle are the
    /// harness's, not the pool's, and are left out for all three alike.
    fn submit(&self, work: Duration, started: Arc<AtomicU64>) -> Reply {
        let job = move |submitted: Instant| {
            move || {
                let handoff = submitted.elapsed().as_nanos() as u64;
                started.fetch_add(1, Ordering::Relaxed);
                spin(work);
                handoff
            }
        };
        match self {
            Pool::Celer(pool) => {
                let pool = pool.clone();
                Box::pin(async move { pool.dispatch(job(Instant::now())).await.ok() })
            }
            Pool::SpawnBlocking => {
                Box::pin(async move { tokio::task::spawn_blocking(job(Instant::now())).await.ok() })
            }
            Pool::Rayon(pool) => {
                let pool = pool.clone();
                Box::pin(async move {
                    let job = job(Instant::now());
                    let (tx, rx) = tokio::sync::oneshot::channel();
                    pool.spawn(move || {
                        let _ = tx.send(job());
                    });
                    rx.await.ok()
                })
            }
        }
    }
}

fn spin(work: Duration) {
    if work.is_zero() {
        return;
    }
    let start = Instant::now();
    while start.elapsed() < work {
        std::hint::spin_loop();
    }
}

/// One scenario's outcome for one pool.
#[derive(Debug, Default, Clone)]
struct Outcome {
    jobs_per_sec: f64,
    p50_ns: u64,
    p99_ns: u64,
    rejected: u64,
    peak_backlog: u64,
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx]
}

fn outcome(mut handoffs: Vec<u64>, jobs_per_sec: f64, rejected: u64, peak: u64) -> Outcome {
    handoffs.sort_unstable();
    Outcome {
        jobs_per_sec,
        p50_ns: percentile(&handoffs, 0.50),
        p99_ns: percentile(&handoffs, 0.99),
        rejected,
        peak_backlog: peak,
    }
}

async fn latency(pool: &Pool, jobs: usize) -> Outcome {
    let started = Arc::new(AtomicU64::new(0));
    let mut handoffs = Vec::with_capacity(jobs);
    let begin = Instant::now();
    for _ in 0..jobs {
        if let Some(ns) = pool.submit(Duration::ZERO, started.clone()).await {
            handoffs.push(ns);
        }
    }
    let rate = jobs as f64 / begin.elapsed().as_secs_f64();
    outcome(handoffs, rate, 0, 0)
}

async fn throughput(pool: &Pool, jobs: usize) -> Outcome {
    let started = Arc::new(AtomicU64::new(0));
    let begin = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..IN_FLIGHT {
        let pool = pool.clone();
        let started = started.clone();
        tasks.push(tokio::spawn(async move {
            let mut handoffs = Vec::with_capacity(jobs / IN_FLIGHT);
            let mut rejected = 0;
            for _ in 0..jobs / IN_FLIGHT {
                match pool.submit(Duration::ZERO, started.clone()).await {
                    Some(ns) => handoffs.push(ns),
                    None => rejected += 1,
                }
            }
            (handoffs, rejected)
        }));
    }
    let mut handoffs = Vec::with_capacity(jobs);
    let mut rejected = 0;
    for task in tasks {
        let (h, r) = task.await.expect("submitter");
        handoffs.extend(h);
        rejected += r;
    }
    let rate = handoffs.len() as f64 / begin.elapsed().as_secs_f64();
    outcome(handoffs, rate, rejected, 0)
}

async fn overload(pool: &Pool, threads: usize, window: Duration) -> Outcome {
    let started = Arc::new(AtomicU64::new(0));
    let offered_per_sec = 2.0 * threads as f64 / OVERLOAD_WORK.as_secs_f64();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Option<u64>>();
    let begin = Instant::now();
    let mut sent: u64 = 0;
    let mut peak: u64 = 0;
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    while begin.elapsed() < window {
        tick.tick().await;
        let due = (begin.elapsed().as_secs_f64() * offered_per_sec) as u64;
        while sent < due {
            let reply = pool.submit(OVERLOAD_WORK, started.clone());
            let tx = tx.clone();
            tokio::spawn(async move {
                let _ = tx.send(reply.await);
            });
            sent += 1;
        }
        // Accepted and not yet started: refused jobs start never, so they
        // are counted out once their replies are in (below, at the end).
        let backlog = sent.saturating_sub(started.load(Ordering::Relaxed));
        peak = peak.max(backlog);
    }
    let started_in_window = started.load(Ordering::Relaxed);
    let elapsed = begin.elapsed().as_secs_f64();
    drop(tx);
    let mut handoffs = Vec::new();
    let mut rejected = 0;
    while let Some(reply) = rx.recv().await {
        match reply {
            Some(ns) => handoffs.push(ns),
            None => rejected += 1,
        }
    }
    // A refused job never enters the backlog; the peak above counted
    // refusals too, so bound it by what the pool can hold at most.
    let peak = match pool {
        Pool::Celer(_) => peak.min(QUEUE as u64),
        _ => peak,
    };
    outcome(handoffs, started_in_window as f64 / elapsed, rejected, peak)
}

/// One pool's batch of one round of [`paired`].
struct Batch {
    round: usize,
    kind: Kind,
    /// The batch's hand-offs, in nanoseconds, sorted.
    handoffs: Vec<u64>,
    /// From its first submit to its last reply.
    elapsed: Duration,
}

/// The `paired` scenario: `rounds` rounds of [`PAIRED_BATCH`] unloaded
/// jobs on each pool, the pools one after the other, their order rotated
/// per round (with two pools: swapped); every batch.
/// With `gap`, the `idle` scenario: batches of [`IDLE_BATCH`], each job
/// submitted after the submitting task has slept `gap`.
async fn paired(pools: &[(Kind, Pool)], rounds: usize, gap: Option<Duration>) -> Vec<Batch> {
    let batch = if gap.is_some() {
        IDLE_BATCH
    } else {
        PAIRED_BATCH
    };
    let mut batches = Vec::with_capacity(rounds * pools.len());
    for round in 0..rounds {
        for i in 0..pools.len() {
            let (kind, pool) = &pools[(round + i) % pools.len()];
            let started = Arc::new(AtomicU64::new(0));
            let mut handoffs = Vec::with_capacity(batch);
            // Without a gap the batch's span; with one, the jobs' own time
            // (submit to value) summed, the sleeps left out.
            let mut elapsed = Duration::ZERO;
            let mut begin = Instant::now();
            for _ in 0..batch {
                if let Some(gap) = gap {
                    tokio::time::sleep(gap).await;
                    begin = Instant::now();
                }
                let reply = pool.submit(Duration::ZERO, started.clone()).await;
                if gap.is_some() {
                    elapsed += begin.elapsed();
                }
                if let Some(ns) = reply {
                    handoffs.push(ns);
                }
            }
            if gap.is_none() {
                elapsed = begin.elapsed();
            }
            handoffs.sort_unstable();
            batches.push(Batch {
                round,
                kind: *kind,
                handoffs,
                elapsed,
            });
        }
    }
    batches
}

struct Args {
    threads: usize,
    repeats: usize,
    /// The number of the first repeat (rows and the pools' rotation), for
    /// runs made one repeat at a time, interleaved with another build.
    first: usize,
    quick: bool,
    /// Where `paired`'s per-round p50s go (appended), if anywhere.
    rounds: Option<String>,
    /// `--count POOL N`: only N unloaded jobs on that pool.
    count: Option<(Kind, usize)>,
    /// `--paired-only`: only the `paired` and `idle` scenarios.
    paired_only: bool,
}

fn args() -> Args {
    let mut args = Args {
        threads: 1,
        repeats: 5,
        first: 0,
        quick: false,
        rounds: None,
        count: None,
        paired_only: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--threads" => {
                args.threads = it.next().and_then(|v| v.parse().ok()).expect("--threads N")
            }
            "--repeats" => {
                args.repeats = it.next().and_then(|v| v.parse().ok()).expect("--repeats N")
            }
            "--first" => args.first = it.next().and_then(|v| v.parse().ok()).expect("--first N"),
            "--quick" => args.quick = true,
            "--paired-only" => args.paired_only = true,
            "--rounds" => args.rounds = Some(it.next().expect("--rounds PATH")),
            "--count" => {
                let pool = it.next().expect("--count POOL N");
                let kind = KINDS
                    .into_iter()
                    .find(|k| k.name() == pool)
                    .expect("--count POOL N: POOL is celer-dispatch, spawn_blocking or rayon");
                let n = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--count POOL N");
                args.count = Some((kind, n));
            }
            other => {
                eprintln!(
                    "unknown argument {other}; usage: dispatcher-bench [--threads N] [--repeats N] [--first N] [--quick] [--rounds PATH] [--paired-only] | --count POOL N"
                );
                std::process::exit(2);
            }
        }
    }
    args
}

fn main() {
    let args = args();
    let (latency_jobs, throughput_jobs, window, idle_jobs) = if args.quick {
        (2_000, 20_000, Duration::from_millis(300), 200)
    } else {
        (20_000, 200_000, Duration::from_secs(2), 2_000)
    };
    // One runtime thread submits; the blocking pool is spawn_blocking's.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(args.threads)
        .build()
        .expect("runtime");
    if let Some((kind, n)) = args.count {
        let pool = Pool::new(kind, args.threads);
        rt.block_on(async {
            latency(&pool, 200).await;
            latency(&pool, n).await;
        });
        if let Pool::Celer(pool) = pool {
            pool.shutdown();
        }
        return;
    }
    println!("repeat,pool,scenario,jobs_per_sec,p50_ns,p99_ns,rejected,peak_backlog");
    let mut rows: Vec<(Kind, &'static str, Outcome)> = Vec::new();
    for repeat in args.first..args.first + args.repeats {
        let mut order = KINDS.to_vec();
        order.rotate_left(repeat % KINDS.len());
        for kind in order {
            if args.paired_only {
                break;
            }
            let pool = Pool::new(kind, args.threads);
            rt.block_on(async {
                // Warm-up: start the threads.
                latency(&pool, 200).await;
                let scenarios = [
                    ("latency", latency(&pool, latency_jobs).await),
                    ("throughput", throughput(&pool, throughput_jobs).await),
                    ("overload", overload(&pool, args.threads, window).await),
                ];
                for (scenario, out) in scenarios {
                    println!(
                        "{repeat},{},{scenario},{:.0},{},{},{},{}",
                        kind.name(),
                        out.jobs_per_sec,
                        out.p50_ns,
                        out.p99_ns,
                        out.rejected,
                        out.peak_backlog
                    );
                    rows.push((kind, scenario, out));
                }
            });
            if let Pool::Celer(pool) = pool {
                pool.shutdown();
            }
        }
        // The dispatcher and its peer at once, batches interleaved: jobs
        // back to back (`paired`), then each after an idle gap (`idle`).
        let pools: Vec<(Kind, Pool)> = [Kind::Celer, Kind::SpawnBlocking]
            .iter()
            .map(|&kind| (kind, Pool::new(kind, args.threads)))
            .collect();
        let (batches, idle) = rt.block_on(async {
            for (_, pool) in &pools {
                latency(pool, 200).await;
            }
            let batches = paired(&pools, latency_jobs / PAIRED_BATCH, None).await;
            let idle = paired(&pools, idle_jobs / IDLE_BATCH, Some(IDLE_GAP)).await;
            (batches, idle)
        });
        for (scenario, batches) in [("paired", &batches), ("idle", &idle)] {
            for (kind, _) in &pools {
                let mine: Vec<&Batch> = batches.iter().filter(|b| b.kind == *kind).collect();
                let handoffs: Vec<u64> = mine
                    .iter()
                    .flat_map(|b| b.handoffs.iter().copied())
                    .collect();
                let elapsed: Duration = mine.iter().map(|b| b.elapsed).sum();
                let out = outcome(
                    handoffs.clone(),
                    handoffs.len() as f64 / elapsed.as_secs_f64(),
                    0,
                    0,
                );
                println!(
                    "{repeat},{},{scenario},{:.0},{},{},0,0",
                    kind.name(),
                    out.jobs_per_sec,
                    out.p50_ns,
                    out.p99_ns
                );
                rows.push((*kind, scenario, out));
            }
        }
        for (_, pool) in pools {
            if let Pool::Celer(pool) = pool {
                pool.shutdown();
            }
        }
        if let Some(path) = &args.rounds {
            use std::io::Write;
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .expect("open the --rounds file");
            for b in &batches {
                writeln!(
                    file,
                    "{repeat},{},{},{}",
                    b.round,
                    b.kind.name(),
                    percentile(&b.handoffs, 0.5)
                )
                .expect("write the --rounds file");
            }
        }
    }
    summarize(&rows);
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap());
    values[values.len() / 2]
}

fn summarize(rows: &[(Kind, &'static str, Outcome)]) {
    eprintln!(
        "{:<11} {:<15} {:>12} {:>9} {:>9} {:>9} {:>9}   medians; ratio celer/peer per column",
        "scenario", "pool", "jobs/s", "p50 µs", "p99 µs", "rejected", "backlog"
    );
    for scenario in ["latency", "throughput", "overload", "paired", "idle"] {
        if !rows.iter().any(|(_, s, _)| *s == scenario) {
            continue;
        }
        let med = |kind: Kind, f: &dyn Fn(&Outcome) -> f64| {
            median(
                rows.iter()
                    .filter(|(k, s, _)| *k == kind && *s == scenario)
                    .map(|(_, _, o)| f(o))
                    .collect(),
            )
        };
        let cols: [&dyn Fn(&Outcome) -> f64; 5] = [
            &|o| o.jobs_per_sec,
            &|o| o.p50_ns as f64 / 1000.0,
            &|o| o.p99_ns as f64 / 1000.0,
            &|o| o.rejected as f64,
            &|o| o.peak_backlog as f64,
        ];
        let celer: Vec<f64> = cols.iter().map(|f| med(Kind::Celer, *f)).collect();
        for kind in KINDS {
            // `paired` leaves rayon out.
            if !rows.iter().any(|(k, s, _)| *k == kind && *s == scenario) {
                continue;
            }
            let values: Vec<f64> = cols.iter().map(|f| med(kind, *f)).collect();
            let ratio = if kind == Kind::Celer {
                String::new()
            } else {
                format!(
                    "   x{:.2} x{:.2} x{:.2}",
                    celer[0] / values[0],
                    celer[1] / values[1],
                    celer[2] / values[2]
                )
            };
            eprintln!(
                "{:<11} {:<15} {:>12.0} {:>9.1} {:>9.1} {:>9.0} {:>9.0}{ratio}",
                scenario,
                kind.name(),
                values[0],
                values[1],
                values[2],
                values[3],
                values[4]
            );
        }
    }
}
