//! The task API end to end, in one process: the server (the framework on
//! one runtime thread, the task runner and store threads) and a client on
//! its own runtime thread, talking HTTP/1.1 keep-alive over loopback.
//!
//! Run with `bench/tasks/run`. Scenarios, repeated, medians on stderr, a CSV
//! row per run on stdout:
//!
//! - `e2e`: N no-op tasks (`echo` of `null`, no delay) submitted by 32
//!   connections; the time from the first submit until every task is
//!   `succeeded` (result stored), as tasks per second; and `e2e-cpu`, the
//!   server threads' CPU per task over that run. Every state change
//!   is a committed transaction (WAL, `synchronous = NORMAL`).
//! - `submit-empty` and `submit-10k`: 10,000 submits of tasks due far in the
//!   future (nothing runs) into an empty store and into one holding 10,000
//!   queued tasks; the server's CPU per submit (its threads' time on a CPU
//!   from /proc/self/task/*/schedstat, the client's thread excluded), also
//!   per server thread on stderr. `submit-10k-finished`: the same into a
//!   store holding 10,000 tasks that have run (an empty queue in a table
//!   as large as `submit-10k`'s: the queue's length alone differs).
//!   `--submit-cost PREFILL` (`--submit-cost-finished PREFILL`) runs one
//!   of these alone, for profiles (see `perf_control`).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use celer::App;
use celer::serve::Shutdown;
use celer_tasks::{Kinds, Tasks, TasksConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const CONNS: usize = 32;
/// Submits measured per submit-cost run (CPU time is read in 10 ms ticks).
const SUBMITS: usize = 10_000;

/// A keep-alive client connection.
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    async fn open(addr: SocketAddr) -> Conn {
        let stream = TcpStream::connect(addr).await.expect("connect");
        stream.set_nodelay(true).unwrap();
        Conn {
            stream,
            buf: Vec::with_capacity(8192),
        }
    }

    /// One request; the status and body.
    async fn call(&mut self, method: &str, path: &str, body: &str) -> (u16, Vec<u8>) {
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: b\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        self.stream.write_all(req.as_bytes()).await.unwrap();
        loop {
            if let Some(end) = find(&self.buf, b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&self.buf[..end]).to_ascii_lowercase();
                let len: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map_or(0, |v| v.trim().parse().unwrap());
                if self.buf.len() >= end + 4 + len {
                    let status = head[9..12].parse().unwrap();
                    let body = self.buf[end + 4..end + 4 + len].to_vec();
                    self.buf.drain(..end + 4 + len);
                    return (status, body);
                }
            }
            let mut chunk = [0u8; 8192];
            let n = self.stream.read(&mut chunk).await.unwrap();
            assert!(n > 0, "server closed");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// CPU seconds of this process's threads whose names start with one of
/// `prefixes`.
fn cpu_of(prefixes: &[&str]) -> f64 {
    cpu_by_thread(prefixes).values().sum()
}

/// CPU seconds of this process's threads whose names start with one of
/// `prefixes`, summed by thread name: the scheduler's own count of each
/// thread's time on a CPU (`/proc/self/task/*/schedstat`, nanoseconds),
/// not the 10 ms ticks of `stat`'s utime+stime, which were ±1 µs per
/// submit in a figure of 10,000 submits.
fn cpu_by_thread(prefixes: &[&str]) -> std::collections::BTreeMap<String, f64> {
    let mut by_name = std::collections::BTreeMap::new();
    for entry in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let name = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        let name = name.trim_end();
        if !prefixes.iter().any(|p| name.starts_with(p)) {
            continue;
        }
        let schedstat = std::fs::read_to_string(entry.path().join("schedstat")).unwrap_or_default();
        let ns: f64 = schedstat
            .split(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        *by_name.entry(name.to_owned()).or_insert(0.0) += ns / 1e9;
    }
    by_name
}

/// For profiles of the measured part alone: with `TASKS_BENCH_PERF_CTL`
/// and `TASKS_BENCH_PERF_ACK` naming `perf record --control
/// fifo:CTL,ACK -D -1`'s two FIFOs, sends it `command` (`enable`,
/// `disable`) and waits for its answer.
fn perf_control(command: &str) {
    let (Ok(ctl), Ok(ack)) = (
        std::env::var("TASKS_BENCH_PERF_CTL"),
        std::env::var("TASKS_BENCH_PERF_ACK"),
    ) else {
        return;
    };
    std::fs::write(&ctl, format!("{command}\n")).expect("write perf's control FIFO");
    // perf keeps the FIFO open: one read, not one until its end.
    let mut answer = [0u8; 16];
    let n = std::io::Read::read(
        &mut std::fs::File::open(&ack).expect("open perf's ack FIFO"),
        &mut answer,
    )
    .expect("read perf's ack FIFO");
    assert!(
        answer[..n].starts_with(b"ack"),
        "perf answered {:?}",
        &answer[..n]
    );
}

const SERVER_THREADS: [&str; 3] = ["srv", "celer-tasks", "celer-dispatch"];

struct Server {
    addr: SocketAddr,
    tasks: Tasks,
    shutdown: Shutdown,
    thread: std::thread::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

fn start_server() -> Server {
    let dir = tempfile::tempdir().unwrap();
    let mut config = TasksConfig::new(dir.path());
    config.concurrency = 256;
    let tasks = Tasks::open(config, Kinds::new()).unwrap();
    let mut app = App::new();
    app.mount("/tasks", tasks.app());
    let bound = celer::serve::bind("tcp://127.0.0.1:0").unwrap();
    let addr = bound.tcp_addr().unwrap();
    let shutdown = Shutdown::new();
    let stop = shutdown.clone();
    let thread = std::thread::Builder::new()
        .name("srv".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(app.serve(bound, stop)).unwrap();
        })
        .unwrap();
    Server {
        addr,
        tasks,
        shutdown,
        thread,
        _dir: dir,
    }
}

impl Server {
    fn stop(self) {
        self.shutdown.trigger();
        self.thread.join().unwrap();
        self.tasks.shutdown();
    }
}

async fn submit_all(addr: SocketAddr, n: usize, body: &'static str) {
    let mut workers = Vec::new();
    for w in 0..CONNS {
        let share = n / CONNS + usize::from(w < n % CONNS);
        workers.push(tokio::spawn(async move {
            let mut conn = Conn::open(addr).await;
            for _ in 0..share {
                let (status, body) = conn.call("POST", "/tasks", body).await;
                assert_eq!(status, 201, "{}", String::from_utf8_lossy(&body));
            }
        }));
    }
    for w in workers {
        w.await.unwrap();
    }
}

async fn succeeded(addr: SocketAddr) -> u64 {
    let mut conn = Conn::open(addr).await;
    let (_, body) = conn.call("GET", "/tasks/stats", "").await;
    let text = String::from_utf8(body).unwrap();
    let at = text.find("\"succeeded\":").unwrap() + "\"succeeded\":".len();
    text[at..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// The end-to-end rate (tasks/s) and the server's CPU per task (µs, its
/// threads' utime+stime from /proc: a figure the machine's other load
/// barely moves, unlike the rate).
fn e2e(client: &tokio::runtime::Runtime, n: usize) -> (f64, f64) {
    let server = start_server();
    let addr = server.addr;
    let before = cpu_of(&SERVER_THREADS);
    let rate = client.block_on(async move {
        let start = Instant::now();
        submit_all(addr, n, r#"{"kind":"echo","input":{"value":null}}"#).await;
        while succeeded(addr).await < n as u64 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        n as f64 / start.elapsed().as_secs_f64()
    });
    let cpu = (cpu_of(&SERVER_THREADS) - before) / n as f64 * 1e6;
    server.stop();
    (rate, cpu)
}

const FUTURE: &str = r#"{"kind":"echo","input":{"value":null},"run_at":"2999-01-01T00:00:00Z"}"#;
const NOW: &str = r#"{"kind":"echo","input":{"value":null}}"#;

/// What the store holds before the measured submits.
#[derive(Clone, Copy, Debug)]
enum Prefill {
    /// This many tasks queued (due far in the future).
    Queued(usize),
    /// This many tasks run and finished (`succeeded`), none queued: an
    /// empty queue in a table as large as `Queued`'s.
    Finished(usize),
}

impl std::fmt::Display for Prefill {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Prefill::Queued(n) => write!(f, "{n} queued"),
            Prefill::Finished(n) => write!(f, "{n} finished, none queued"),
        }
    }
}

fn submit_cost(client: &tokio::runtime::Runtime, prefill: Prefill, n: usize) -> f64 {
    let server = start_server();
    let addr = server.addr;
    match prefill {
        Prefill::Queued(tasks) => client.block_on(submit_all(addr, tasks, FUTURE)),
        Prefill::Finished(tasks) => client.block_on(async move {
            submit_all(addr, tasks, NOW).await;
            while succeeded(addr).await < tasks as u64 {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }),
    }
    perf_control("enable");
    let before = cpu_by_thread(&SERVER_THREADS);
    client.block_on(submit_all(addr, n, FUTURE));
    let after = cpu_by_thread(&SERVER_THREADS);
    perf_control("disable");
    server.stop();
    // Per server thread, on stderr: which of them a deeper queue costs.
    let per_thread: Vec<String> = after
        .iter()
        .map(|(name, cpu)| {
            let spent = cpu - before.get(name).copied().unwrap_or(0.0);
            format!("{name} {:.2}", spent / n as f64 * 1e6)
        })
        .collect();
    eprintln!(
        "submit CPU after {prefill}, µs per submit by thread: {}",
        per_thread.join(", ")
    );
    let total: f64 = after.values().sum::<f64>() - before.values().sum::<f64>();
    total / n as f64 * 1e6
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut repeats = 3;
    let mut n = 20_000;
    let mut e2e_only = false;
    let mut submit_cost_only = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--repeats" => repeats = args.next().unwrap().parse().unwrap(),
            "--tasks" => n = args.next().unwrap().parse().unwrap(),
            // For instruction counts (callgrind): the end-to-end run alone.
            "--e2e-only" => e2e_only = true,
            // For profiles: one submit-cost run alone, into a store holding
            // PREFILL queued tasks (what grows with the queue shows as the
            // difference between two profiles).
            "--submit-cost" => {
                submit_cost_only = Some(Prefill::Queued(args.next().unwrap().parse().unwrap()))
            }
            // The same after PREFILL tasks have run (an empty queue in a
            // table of that size).
            "--submit-cost-finished" => {
                submit_cost_only = Some(Prefill::Finished(args.next().unwrap().parse().unwrap()))
            }
            other => panic!(
                "unknown argument {other}; usage: tasks-bench [--repeats N] [--tasks N] [--e2e-only] [--submit-cost PREFILL] [--submit-cost-finished PREFILL]"
            ),
        }
    }
    let client = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .thread_name("client")
        .build()
        .unwrap();
    println!("repeat,scenario,value,unit");
    if let Some(prefill) = submit_cost_only {
        let cost = submit_cost(&client, prefill, SUBMITS);
        let name = match prefill {
            Prefill::Queued(n) => format!("submit-after-{n}"),
            Prefill::Finished(n) => format!("submit-after-{n}-finished"),
        };
        println!("0,{name},{cost:.2},server CPU µs per submit");
        return;
    }
    let (mut rates, mut cpus, mut empty, mut full, mut finished) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for repeat in 0..repeats {
        let (rate, cpu) = e2e(&client, n);
        println!("{repeat},e2e,{rate:.0},tasks/s");
        println!("{repeat},e2e-cpu,{cpu:.1},server CPU µs per task");
        rates.push(rate);
        cpus.push(cpu);
        if e2e_only {
            continue;
        }
        let cost_empty = submit_cost(&client, Prefill::Queued(0), SUBMITS);
        println!("{repeat},submit-empty,{cost_empty:.2},server CPU µs per submit");
        let cost_full = submit_cost(&client, Prefill::Queued(10_000), SUBMITS);
        println!("{repeat},submit-10k,{cost_full:.2},server CPU µs per submit");
        let cost_finished = submit_cost(&client, Prefill::Finished(10_000), SUBMITS);
        println!("{repeat},submit-10k-finished,{cost_finished:.2},server CPU µs per submit");
        empty.push(cost_empty);
        full.push(cost_full);
        finished.push(cost_finished);
    }
    eprintln!(
        "e2e no-op tasks ({n}, {CONNS} connections): {:.0} tasks/s, server CPU {:.1} µs per task (medians of {repeats})",
        median(rates),
        median(cpus)
    );
    if e2e_only {
        return;
    }
    let (e, f, d) = (median(empty), median(full), median(finished));
    eprintln!(
        "submit, server CPU: empty store {e:.2} µs, 10,000 queued {f:.2} µs: ratio {:.2}; \
         empty queue with 10,000 finished {d:.2} µs: ratio {:.2}",
        f / e,
        f / d
    );
}
