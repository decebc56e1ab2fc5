//! celer-bench: the load generator behind `celer bench`.
//!
//! # Overview
//!
//! `BenchArgs` is the command line; `run` validates it into a `Plan`, checks
//! the target answers a connect, then runs one of three modes and prints a
//! report:
//!
//! - **load** (default): closed loop like wrk (`-c`, `-t`, `-d` or `-n`,
//!   `--warmup`, `--pipeline`), or open loop like wrk2 with `--rate`, where
//!   latency counts from the intended send time so a stalled server cannot
//!   hide behind the client's backlog (coordinated omission);
//! - **sweep** (`--sweep 10,25,...`): one load run per concurrency level;
//! - **hang** (`--hang N`): N idle keep-alive connections, with the server's
//!   RSS sampled around them when `--pid` is given;
//! - **sse** (`--sse N --sse-file PATH`): N server-sent-event subscribers;
//!   the bench rewrites the stream's source file `--rounds` times with its
//!   clock reading in it and times each subscriber's receipt of each new
//!   version from that reading (p50, p99, max; the server's RSS per
//!   subscriber and CPU per delivery with `--pid`). With
//!   `-H 'Accept-Encoding: gzip'` a gzip-coded stream is read too, each
//!   distinct deflate segment inflated once per thread (`sse::gzip`).
//!
//! `--ramp TIME` opens the connections evenly over TIME; connections that
//! fail to connect or handshake are counted in every mode, warm-up
//! included (`setup_errors`).
//!
//! With a ws:// or wss:// URL the same flags drive WebSockets (RFC 6455,
//! every frame masked, permessage-deflate offered with `--deflate`):
//!
//! - **echo** (default): `-c` connections each keep `--pipeline` messages of
//!   `--message-size` bytes in flight; every echo is matched to its message
//!   by the sequence number it carries and compared byte for byte; messages
//!   per second, latency percentiles and, with `--pid`, messages per server
//!   CPU-second;
//! - **idle** (`--hang N`): N WebSockets held idle (pings answered), then
//!   each must answer a ping; the server's RSS per socket with `--pid`;
//! - **fan-out** (`--fanout N`): N receivers, `--rounds` messages sent by a
//!   WebSocket publisher (`--publish`, default the URL) or an HTTP POST
//!   (`--post`); per round the time from the send to the arrival at the
//!   first, median, 99th percentile and last receiver, and the medians over
//!   the rounds.
//!
//! # Code map
//!
//! - `plan`: validated arguments; `target` (URLs and weights), `encode`
//!   (requests are serialised once), `tls` (rustls client).
//! - `worker`: one thread per `-t`, each a current-thread tokio runtime that
//!   owns its connections and a thread-local `Stats`; merged at the end.
//! - `conn`: the hot loop: write pre-encoded bytes, read into a reusable
//!   buffer, parse in place with `parse`, record. No allocation per request.
//! - `parse`: strict, sans-IO HTTP/1.1 response head and body framing
//!   (Content-Length, chunked, close-delimited). It is deliberately separate
//!   from celer-server's request codec: the bench must not depend on the
//!   server it measures, and a response parser shares little with a request
//!   parser beyond httparse, which both use.
//! - `stats`: HDR histograms (ns), status and error counts, per-second timeline.
//! - `procfs`: server CPU time and RSS from /proc for `--pid`.
//! - `hang`: the hanging-connection mode.
//! - `sse`: the SSE fan-out latency mode: subscribers, their event-stream
//!   reader, and the coordinator that rewrites the source file; `sse::gzip`
//!   reads gzip-coded streams through a per-thread cache of inflated
//!   segments.
//! - `ws`: the WebSocket modes and their own client codec (`frame`,
//!   `handshake`, `deflate`, `socket`).
//! - `report`: one data model rendered as a terminal table, Markdown, JSON
//!   and a self-contained HTML page with hand-drawn SVG charts.
//!
//! # Example
//!
//! ```no_run
//! use clap::Parser;
//!
//! #[derive(Parser)]
//! struct Cli {
//!     #[command(flatten)]
//!     bench: celer_bench::BenchArgs,
//! }
//!
//! let cli = Cli::parse_from(["bench", "-c", "50", "-d", "5s", "http://127.0.0.1:8080/"]);
//! let code = celer_bench::run(cli.bench)?;
//! # Ok::<_, celer_bench::Error>(())
//! ```

mod args;
mod conn;
mod encode;
mod error;
mod hang;
mod parse;
mod plan;
mod procfs;
mod report;
mod sse;
mod stats;
mod target;
mod tls;
mod worker;
mod ws;

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

pub use crate::args::BenchArgs;
pub use crate::error::Error;

use crate::plan::Plan;
use crate::procfs::Processes;
use crate::report::{Output, RunReport, ServerCpu, Settings, SweepLevel};

/// Pause between sweep levels so the server can drop the previous connections.
const SWEEP_PAUSE: std::time::Duration = std::time::Duration::from_millis(500);

/// Runs `celer bench` with these arguments and prints the report.
///
/// Returns the process exit code to use. Bad arguments and an unreachable
/// target are errors whose `Display` is one line.
#[expect(
    clippy::needless_pass_by_value,
    reason = "a front end hands its parsed arguments over; taking them by value keeps that call plain"
)]
pub fn run(args: BenchArgs) -> Result<ExitCode, Error> {
    let report = measure(&args)?;
    emit(&args, &report)?;
    Ok(ExitCode::SUCCESS)
}

/// The result of a bench run, in every output format.
#[derive(Debug)]
pub struct Report {
    output: Output,
}

impl Report {
    /// The report as pretty-printed JSON.
    ///
    /// The top level has `mode` (`load`, `sweep`, `hang` or `sse`; for ws://
    /// URLs `ws-echo`, `ws-sweep`, `ws-idle` or `ws-fanout`), `settings`, and
    /// one of `run`, `sweep`, `hang`, `sse` or `fanout`. Latencies are in microseconds.
    /// In `ws-echo` a `run`'s `responses` are checked echoes, `bytes` the
    /// frame bytes read from the server (compressed, with permessage-deflate)
    /// and `requests_per_sec` messages per second.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(&self.output).unwrap_or_default()
    }

    /// The report as a terminal table.
    pub fn to_terminal(&self) -> String {
        report::terminal(&self.output)
    }

    /// The report as Markdown tables.
    pub fn to_markdown(&self) -> String {
        report::markdown(&self.output)
    }

    /// The report as a self-contained HTML page with inline SVG charts.
    pub fn to_html(&self) -> String {
        report::html(&self.output)
    }
}

/// Runs the measurement these arguments describe without printing a report
/// (the progress line still shows on a terminal unless `quiet` is set).
pub fn measure(args: &BenchArgs) -> Result<Report, Error> {
    let plan = Arc::new(Plan::from_args(args)?);
    let processes = Processes::new(&args.pids, args.pid_tree)?;
    preflight(&plan)?;
    let show_progress = !args.quiet;
    let websocket = plan.ws.is_some();
    let mut output = Output {
        mode: if websocket { "ws-echo" } else { "load" },
        settings: Settings::new(&plan),
        run: None,
        sweep: None,
        hang: None,
        fanout: None,
        sse: None,
    };
    let fanout = plan
        .ws
        .as_ref()
        .and_then(|ws| Some((ws, ws.fanout.as_ref()?)));
    if let Some(n) = args.hang {
        output.mode = if websocket { "ws-idle" } else { "hang" };
        output.settings.connections = n;
        let idle = plan.duration.unwrap_or(std::time::Duration::from_secs(10));
        output.hang = Some(match &plan.ws {
            Some(ws) => ws::idle::run(ws, n, idle, &processes)?,
            None => hang::run_hang(&plan, n, idle, &processes)?,
        });
    } else if let Some(sse) = &plan.sse {
        output.mode = "sse";
        output.settings.connections = sse.subscribers;
        let threads = plan::default_threads(args.threads, sse.subscribers);
        output.settings.threads = threads;
        output.sse = Some(sse::run(&plan, sse, threads, &processes)?);
    } else if let Some((ws, fanout)) = fanout {
        output.mode = "ws-fanout";
        output.settings.connections = fanout.receivers;
        let threads = plan::default_threads(args.threads, fanout.receivers);
        output.settings.threads = threads;
        output.fanout = Some(ws::fanout::run(ws, fanout, threads, &processes)?);
    } else if !args.sweep.is_empty() {
        output.mode = if websocket { "ws-sweep" } else { "sweep" };
        output.settings.sweep_levels = args.sweep.len();
        let mut levels = Vec::with_capacity(args.sweep.len());
        for (idx, &connections) in args.sweep.iter().enumerate() {
            if idx > 0 {
                std::thread::sleep(SWEEP_PAUSE);
            }
            let level_plan = Arc::new(plan.with_connections(connections, args.threads));
            let run = load(&level_plan, &processes, show_progress)?;
            levels.push(SweepLevel::new(connections, &run));
        }
        output.sweep = Some(levels);
    } else {
        output.run = Some(load(&plan, &processes, show_progress)?);
    }
    Ok(Report { output })
}

/// One load run with server CPU accounting.
fn load(plan: &Arc<Plan>, processes: &Processes, show_progress: bool) -> Result<RunReport, Error> {
    // Server CPU is sampled from the end of the warm-up to the end of the run.
    let sampler = (!processes.is_empty()).then(|| {
        let processes = processes.clone();
        let warmup = plan.warmup;
        std::thread::spawn(move || {
            std::thread::sleep(warmup);
            processes.start_cpu()
        })
    });
    let result = worker::run_load(plan, show_progress)?;
    let server = sampler.and_then(|handle| handle.join().ok()).map(|start| {
        let cpu = processes.cpu_since(&start);
        ServerCpu::new(processes.roots(), cpu, result.stats.responses)
    });
    Ok(report::run_report(&result, server))
}

/// Connects once (and handshakes) so that an unreachable target is one clear error.
fn preflight(plan: &Plan) -> Result<(), Error> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::io("cannot start the runtime", e))?;
    let target = format!("{}:{}", plan.origin.host, plan.origin.port);
    runtime.block_on(async {
        let connect = tokio::net::TcpStream::connect(plan.addr);
        let stream = match tokio::time::timeout(plan.timeout, connect).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(e)) => return Err(Error::connect(format!("cannot connect to {target}"), e)),
            Err(_) => {
                return Err(Error::connect(
                    format!("cannot connect to {target}"),
                    "timed out",
                ));
            }
        };
        if let Some(tls) = &plan.tls {
            let handshake = tls.connector.connect(tls.server_name.clone(), stream);
            match tokio::time::timeout(plan.timeout, handshake).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => {
                    return Err(Error::connect(
                        format!("TLS handshake with {target} failed"),
                        e,
                    ));
                }
                Err(_) => {
                    return Err(Error::connect(
                        format!("TLS handshake with {target} failed"),
                        "timed out",
                    ));
                }
            }
        }
        Ok(())
    })
}

/// Prints the report in the chosen format and writes the HTML file.
fn emit(args: &BenchArgs, report: &Report) -> Result<(), Error> {
    let text = if args.json {
        report.to_json() + "\n"
    } else if args.markdown {
        report.to_markdown()
    } else {
        report.to_terminal()
    };
    if let Some(path) = &args.html {
        std::fs::write(path, report.to_html())
            .map_err(|e| Error::io(format!("cannot write {}", path.display()), e))?;
    }
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        // A closed pipe (`| head`) is not a failure of the run.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(Error::io("cannot write the report", e))
        }
        _ => Ok(()),
    }
}
