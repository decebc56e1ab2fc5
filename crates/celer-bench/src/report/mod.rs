//! Reports: the data model every output format shares, and the formats.
//!
//! `Output` is built once from the measurements; `text` renders the terminal
//! table and Markdown, `html` the self-contained page with `svg` charts, and
//! JSON is `Output` serialised as is.

mod html;
mod svg;
mod text;

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::plan::Plan;
use crate::stats::{ErrorKind, Stats};
use crate::worker::RunResult;

pub(crate) use html::render as html;
pub(crate) use text::{markdown, terminal};

/// Percentiles sampled for the latency distribution chart.
const SPECTRUM: [f64; 16] = [
    0.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99, 99.995, 99.999,
    99.9999, 100.0,
];

/// Everything one invocation reports; JSON is this, serialised.
#[derive(Debug, Serialize)]
pub(crate) struct Output {
    /// `load`, `sweep`, `hang` or `sse`; `ws-echo`, `ws-sweep`, `ws-idle` or `ws-fanout`.
    pub(crate) mode: &'static str,
    /// How the run was configured.
    pub(crate) settings: Settings,
    /// A single load run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) run: Option<RunReport>,
    /// One row per concurrency level.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) sweep: Option<Vec<SweepLevel>>,
    /// Hanging-connection (or idle WebSocket) results.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) hang: Option<HangReport>,
    /// Broadcast fan-out results.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) fanout: Option<FanoutReport>,
    /// SSE fan-out latency results.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) sse: Option<SseReport>,
}

/// The run's configuration, echoed in every report.
#[derive(Debug, Serialize)]
pub(crate) struct Settings {
    pub(crate) urls: Vec<String>,
    pub(crate) connections: usize,
    pub(crate) threads: usize,
    pub(crate) duration_s: Option<f64>,
    pub(crate) requests: Option<u64>,
    pub(crate) warmup_s: f64,
    pub(crate) rate: Option<f64>,
    pub(crate) keep_alive: bool,
    pub(crate) pipeline: u32,
    pub(crate) timeout_s: f64,
    pub(crate) tls: bool,
    /// WebSocket settings, for ws:// and wss:// URLs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) websocket: Option<WsSettings>,
    /// Number of sweep levels; 0 outside sweeps.
    #[serde(skip)]
    pub(crate) sweep_levels: usize,
}

impl Settings {
    pub(crate) fn new(plan: &Plan) -> Settings {
        Settings {
            urls: plan.targets.iter().map(|t| t.url.clone()).collect(),
            connections: plan.connections,
            threads: plan.threads,
            duration_s: plan.duration.map(|d| d.as_secs_f64()),
            requests: plan.total_requests,
            warmup_s: plan.warmup.as_secs_f64(),
            rate: plan.rate,
            keep_alive: plan.keep_alive,
            pipeline: plan.pipeline,
            timeout_s: plan.timeout.as_secs_f64(),
            tls: plan.tls.is_some(),
            websocket: plan.ws.as_ref().map(|ws| WsSettings {
                message_size: ws.message_size,
                message_file: ws.messages.as_ref().map(|m| m.path.clone()),
                binary: ws.binary,
                deflate_offered: ws.offer.deflate,
                subprotocol: ws.offer.subprotocol.clone(),
                in_flight: plan.pipeline,
            }),
            sweep_levels: 0,
        }
    }
}

/// The WebSocket part of the settings.
#[derive(Debug, Serialize)]
pub(crate) struct WsSettings {
    /// Bytes per message (the mean, with a message file).
    pub(crate) message_size: usize,
    /// The `--message-file` whose lines are the messages, if any.
    pub(crate) message_file: Option<String>,
    /// Binary messages (else text).
    pub(crate) binary: bool,
    /// permessage-deflate was offered.
    pub(crate) deflate_offered: bool,
    /// The subprotocol asked for.
    pub(crate) subprotocol: Option<String>,
    /// Echo: messages in flight per connection.
    pub(crate) in_flight: u32,
}

/// One load run.
#[derive(Debug, Serialize)]
pub(crate) struct RunReport {
    /// Measured seconds, from the end of warm-up to the last response.
    pub(crate) elapsed_s: f64,
    /// Complete responses (any status).
    pub(crate) responses: u64,
    pub(crate) requests_per_sec: f64,
    /// Bytes read from the server, heads included.
    pub(crate) bytes: u64,
    pub(crate) bytes_per_sec: f64,
    pub(crate) gbit_per_sec: f64,
    /// Response latency; in open loop from the intended send time.
    pub(crate) latency_us: Latency,
    /// Open loop only: latency from the actual send time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) uncorrected_latency_us: Option<Latency>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) connect_us: Option<Latency>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tls_handshake_us: Option<Latency>,
    /// WebSocket upgrade time (request to 101), ws:// only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) upgrade_us: Option<Latency>,
    /// Connections opened while measuring.
    pub(crate) connections_opened: u64,
    /// Connections set up over the whole run, warm-up included (TCP
    /// connect and, over TLS, the handshake).
    pub(crate) connections_set_up: u64,
    /// Failed connection set-ups by kind over the whole run, warm-up
    /// included (only kinds that occurred): a connect refused or a TLS
    /// handshake that failed or timed out.
    pub(crate) setup_errors: BTreeMap<&'static str, u64>,
    /// Failed requests by kind (only kinds that occurred).
    pub(crate) errors: BTreeMap<&'static str, u64>,
    /// All failed requests.
    pub(crate) error_total: u64,
    /// Responses by status code.
    pub(crate) status: BTreeMap<u16, u64>,
    /// Responses with a 4xx or 5xx status.
    pub(crate) status_errors: u64,
    /// Per-second counts.
    pub(crate) timeline: Vec<TimelinePoint>,
    /// Server CPU accounting, with `--pid`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) server: Option<ServerCpu>,
}

/// Latency summary in microseconds.
#[derive(Debug, Serialize)]
pub(crate) struct Latency {
    pub(crate) count: u64,
    pub(crate) min: f64,
    pub(crate) mean: f64,
    pub(crate) stdev: f64,
    pub(crate) p50: f64,
    pub(crate) p75: f64,
    pub(crate) p90: f64,
    pub(crate) p99: f64,
    pub(crate) p999: f64,
    pub(crate) max: f64,
    /// `[percentile, latency]` pairs for the distribution chart.
    pub(crate) spectrum: Vec<[f64; 2]>,
}

impl Latency {
    /// Summarises a histogram of nanoseconds; `None` when it is empty.
    pub(crate) fn from_ns(hist: &Histogram<u64>) -> Option<Latency> {
        if hist.is_empty() {
            return None;
        }
        let us = |ns: u64| ns as f64 / 1e3;
        let at = |q: f64| us(hist.value_at_quantile(q));
        Some(Latency {
            count: hist.len(),
            min: us(hist.min()),
            mean: hist.mean() / 1e3,
            stdev: hist.stdev() / 1e3,
            p50: at(0.5),
            p75: at(0.75),
            p90: at(0.9),
            p99: at(0.99),
            p999: at(0.999),
            max: us(hist.max()),
            spectrum: SPECTRUM.iter().map(|&p| [p, at(p / 100.0)]).collect(),
        })
    }
}

/// Counts for one second.
#[derive(Debug, Serialize)]
pub(crate) struct TimelinePoint {
    pub(crate) second: usize,
    pub(crate) responses: u64,
    pub(crate) errors: u64,
    pub(crate) bytes: u64,
}

/// The server's CPU time over the measured run.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ServerCpu {
    pub(crate) pids: Vec<u32>,
    pub(crate) cpu_seconds: f64,
    pub(crate) wall_seconds: f64,
    /// CPU seconds per wall-clock second.
    pub(crate) cores: f64,
    /// CPU microseconds per complete response (per echo with ws://).
    pub(crate) cpu_us_per_request: Option<f64>,
    /// Responses (echoes with ws://) per server CPU-second.
    pub(crate) per_cpu_second: Option<f64>,
}

impl ServerCpu {
    pub(crate) fn new(pids: &[u32], (cpu, wall): (f64, f64), responses: u64) -> ServerCpu {
        ServerCpu {
            pids: pids.to_vec(),
            cpu_seconds: cpu,
            wall_seconds: wall,
            cores: if wall > 0.0 { cpu / wall } else { 0.0 },
            cpu_us_per_request: (responses > 0).then(|| cpu * 1e6 / responses as f64),
            per_cpu_second: (cpu > 0.0).then(|| responses as f64 / cpu),
        }
    }
}

/// One concurrency level of a sweep.
#[derive(Debug, Serialize)]
pub(crate) struct SweepLevel {
    pub(crate) connections: usize,
    pub(crate) responses: u64,
    pub(crate) errors: u64,
    /// Failed requests and 4xx/5xx responses over all requests.
    pub(crate) error_rate: f64,
    pub(crate) p50_us: f64,
    pub(crate) p99_us: f64,
    pub(crate) requests_per_sec: f64,
    pub(crate) cpu_us_per_request: Option<f64>,
}

impl SweepLevel {
    pub(crate) fn new(connections: usize, run: &RunReport) -> SweepLevel {
        let failed = run.error_total + run.status_errors;
        let attempts = run.responses + run.error_total;
        SweepLevel {
            connections,
            responses: run.responses,
            errors: run.error_total,
            error_rate: if attempts > 0 {
                failed as f64 / attempts as f64
            } else {
                0.0
            },
            p50_us: run.latency_us.p50,
            p99_us: run.latency_us.p99,
            requests_per_sec: run.requests_per_sec,
            cpu_us_per_request: run.server.as_ref().and_then(|s| s.cpu_us_per_request),
        }
    }
}

/// Hanging-connection results.
#[derive(Debug, Serialize)]
pub(crate) struct HangReport {
    /// Connections asked for.
    pub(crate) connections: usize,
    /// Connections that opened and answered the first request.
    pub(crate) established: u64,
    /// Connections that still answered after the idle time.
    pub(crate) alive_at_end: u64,
    /// Seconds the connections were held idle.
    pub(crate) idle_s: f64,
    /// Failures by kind, during opening or the final check.
    pub(crate) errors: BTreeMap<&'static str, u64>,
    /// Server RSS before opening, while idle and after closing, with `--pid`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) rss_before: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) rss_during: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) rss_after: Option<u64>,
    /// (RSS during − RSS before) / established connections.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) bytes_per_idle_connection: Option<f64>,
}

/// Broadcast fan-out results.
#[derive(Debug, Serialize)]
pub(crate) struct FanoutReport {
    /// Receivers asked for.
    pub(crate) receivers: usize,
    /// Receivers that connected.
    pub(crate) connected: usize,
    /// `publish` or `post`.
    pub(crate) trigger: &'static str,
    /// Where messages were sent.
    pub(crate) trigger_url: String,
    /// Rounds asked for.
    pub(crate) rounds_planned: u32,
    /// Rounds in which every live receiver got the message.
    pub(crate) complete_rounds: usize,
    /// Messages that did not reach a live receiver, over all rounds.
    pub(crate) missing: u64,
    /// Receiver failures by kind (connecting, or lost during the run).
    pub(crate) errors: BTreeMap<&'static str, u64>,
    /// Trigger failures by kind (a failed send, a non-2xx POST, a timeout).
    pub(crate) trigger_errors: BTreeMap<&'static str, u64>,
    /// Median over rounds of the time until the last receiver had the message.
    pub(crate) median_last_us: Option<f64>,
    /// Median over rounds of the per-round median arrival.
    pub(crate) median_p50_us: Option<f64>,
    /// Median over rounds of the per-round 99th percentile arrival.
    pub(crate) median_p99_us: Option<f64>,
    /// Every arrival of every round.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) arrival_us: Option<Latency>,
    /// One entry per round sent.
    pub(crate) rounds: Vec<RoundReport>,
    /// Server CPU over the rounds, with `--pid`; "per request" is per delivery.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) server: Option<ServerCpu>,
}

impl FanoutReport {
    pub(crate) fn new(
        server: Option<ServerCpu>,
        fanout: &crate::ws::FanoutPlan,
        connected: usize,
        errors: BTreeMap<&'static str, u64>,
        trigger_errors: BTreeMap<&'static str, u64>,
        rounds: Vec<RoundReport>,
        arrival_us: Option<Latency>,
    ) -> FanoutReport {
        let median_of = |pick: fn(&RoundReport) -> Option<f64>| {
            let mut values: Vec<f64> = rounds.iter().filter_map(pick).collect();
            median(&mut values)
        };
        FanoutReport {
            receivers: fanout.receivers,
            connected,
            trigger: fanout.trigger.kind(),
            trigger_url: fanout.trigger.url().to_string(),
            rounds_planned: fanout.rounds,
            complete_rounds: rounds
                .iter()
                .filter(|r| r.missing == 0 && r.received > 0)
                .count(),
            missing: rounds.iter().map(|r| r.missing as u64).sum(),
            errors,
            trigger_errors,
            median_last_us: median_of(|r| r.last_us),
            median_p50_us: median_of(|r| r.p50_us),
            median_p99_us: median_of(|r| r.p99_us),
            arrival_us,
            rounds,
            server,
        }
    }
}

/// SSE fan-out latency results (`--sse`).
#[derive(Debug, Serialize)]
pub(crate) struct SseReport {
    /// Subscribers asked for.
    pub(crate) subscribers: usize,
    /// Subscribers that had the current version before the first update.
    pub(crate) ready: usize,
    /// Seconds from the start until every subscriber was ready (or failed).
    pub(crate) subscribe_s: f64,
    /// The file rewritten for each update.
    pub(crate) file: String,
    /// Bytes of each published document (the marker field included).
    pub(crate) document_bytes: usize,
    /// Updates asked for.
    pub(crate) updates_planned: u32,
    /// Updates that reached every live subscriber.
    pub(crate) complete_updates: usize,
    /// Updates that did not reach a live subscriber within the timeout.
    pub(crate) missing: u64,
    /// Subscribers that could not connect, handshake or subscribe, by kind.
    pub(crate) errors: BTreeMap<&'static str, u64>,
    /// Ready subscribers whose stream ended, by kind.
    pub(crate) lost: BTreeMap<&'static str, u64>,
    /// From each update's publication to its receipt, over every
    /// subscriber and update.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) latency_us: Option<Latency>,
    /// Median over updates of the time until the last subscriber had it.
    pub(crate) median_last_us: Option<f64>,
    /// One entry per update published.
    pub(crate) updates: Vec<RoundReport>,
    /// Server RSS before the subscribers connected, with `--pid`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) rss_before: Option<u64>,
    /// Server RSS once every subscriber had the current version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) rss_subscribed: Option<u64>,
    /// (RSS subscribed − RSS before) / ready subscribers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) bytes_per_subscriber: Option<f64>,
    /// Server CPU over the updates, with `--pid`; "per request" is per delivery.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) server: Option<ServerCpu>,
    /// What the subscribers did with gzip-coded streams, when any was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) gzip: Option<crate::sse::GzipCounts>,
}

impl SseReport {
    #[expect(
        clippy::too_many_arguments,
        reason = "one call site, which has every figure at hand"
    )]
    pub(crate) fn new(
        sse: &crate::sse::SsePlan,
        ready: usize,
        subscribe_s: f64,
        document_bytes: usize,
        errors: BTreeMap<&'static str, u64>,
        lost: BTreeMap<&'static str, u64>,
        updates: Vec<RoundReport>,
        latency_us: Option<Latency>,
        (rss_before, rss_subscribed): (Option<u64>, Option<u64>),
        server: Option<ServerCpu>,
    ) -> SseReport {
        let mut lasts: Vec<f64> = updates.iter().filter_map(|u| u.last_us).collect();
        SseReport {
            subscribers: sse.subscribers,
            ready,
            subscribe_s,
            file: sse.file.display().to_string(),
            document_bytes,
            updates_planned: sse.updates,
            complete_updates: updates
                .iter()
                .filter(|u| u.missing == 0 && u.received > 0)
                .count(),
            missing: updates.iter().map(|u| u.missing as u64).sum(),
            errors,
            lost,
            latency_us,
            median_last_us: median(&mut lasts),
            updates,
            rss_before,
            rss_subscribed,
            bytes_per_subscriber: match (rss_before, rss_subscribed) {
                (Some(before), Some(after)) if ready > 0 => {
                    Some((after as f64 - before as f64) / ready as f64)
                }
                _ => None,
            },
            server,
            gzip: None,
        }
    }
}

/// One fan-out round.
#[derive(Debug, Serialize)]
pub(crate) struct RoundReport {
    pub(crate) round: u32,
    /// Receivers that got the message.
    pub(crate) received: usize,
    /// Live receivers that did not get it within the timeout.
    pub(crate) missing: usize,
    /// Arrival times from the send, in µs.
    pub(crate) first_us: Option<f64>,
    pub(crate) p50_us: Option<f64>,
    pub(crate) p99_us: Option<f64>,
    pub(crate) last_us: Option<f64>,
}

impl RoundReport {
    pub(crate) fn new(
        round: u32,
        arrivals: &mut [std::time::Duration],
        alive: usize,
    ) -> RoundReport {
        arrivals.sort_unstable();
        let at = |q: f64| {
            let n = arrivals.len();
            (n > 0).then(|| {
                let idx = ((q * n as f64).ceil() as usize).clamp(1, n) - 1;
                arrivals[idx].as_secs_f64() * 1e6
            })
        };
        RoundReport {
            round,
            received: arrivals.len(),
            missing: alive.saturating_sub(arrivals.len()),
            first_us: at(0.0),
            p50_us: at(0.5),
            p99_us: at(0.99),
            last_us: at(1.0),
        }
    }
}

/// The median of `values` (the mean of the middle two for an even count).
fn median(values: &mut [f64]) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

/// Builds the report of one load run.
pub(crate) fn run_report(result: &RunResult, server: Option<ServerCpu>) -> RunReport {
    let stats = &result.stats;
    let elapsed = result.elapsed.as_secs_f64();
    let per_sec = |n: u64| {
        if elapsed > 0.0 {
            n as f64 / elapsed
        } else {
            0.0
        }
    };
    let open_loop_latency = Latency::from_ns(&stats.service);
    RunReport {
        elapsed_s: elapsed,
        responses: stats.responses,
        requests_per_sec: per_sec(stats.responses),
        bytes: stats.bytes,
        bytes_per_sec: per_sec(stats.bytes),
        gbit_per_sec: per_sec(stats.bytes) * 8.0 / 1e9,
        latency_us: Latency::from_ns(&stats.latency).unwrap_or_else(empty_latency),
        uncorrected_latency_us: open_loop_latency,
        connect_us: Latency::from_ns(&stats.connect),
        tls_handshake_us: Latency::from_ns(&stats.handshake),
        upgrade_us: Latency::from_ns(&stats.upgrade),
        connections_opened: stats.connect.len(),
        connections_set_up: stats.setup_ok,
        setup_errors: ErrorKind::ALL
            .iter()
            .filter(|&&kind| stats.setup_failed[kind as usize] > 0)
            .map(|&kind| (kind.name(), stats.setup_failed[kind as usize]))
            .collect(),
        errors: error_map(stats),
        error_total: stats.error_total(),
        status: status_map(stats),
        status_errors: stats.status_errors(),
        timeline: timeline(stats, result.elapsed.as_secs_f64()),
        server,
    }
}

fn empty_latency() -> Latency {
    Latency {
        count: 0,
        min: 0.0,
        mean: 0.0,
        stdev: 0.0,
        p50: 0.0,
        p75: 0.0,
        p90: 0.0,
        p99: 0.0,
        p999: 0.0,
        max: 0.0,
        spectrum: Vec::new(),
    }
}

/// Non-zero error counts by kind name.
pub(crate) fn error_map(stats: &Stats) -> BTreeMap<&'static str, u64> {
    ErrorKind::ALL
        .iter()
        .filter(|&&kind| stats.errors[kind as usize] > 0)
        .map(|&kind| (kind.name(), stats.errors[kind as usize]))
        .collect()
}

fn status_map(stats: &Stats) -> BTreeMap<u16, u64> {
    stats
        .status
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(code, n)| (code as u16, *n))
        .collect()
}

/// The per-second timeline over the measured seconds; the few responses
/// that complete just after the last whole second (requests in flight at the
/// deadline) are counted in that last second.
fn timeline(stats: &Stats, elapsed: f64) -> Vec<TimelinePoint> {
    let seconds = (elapsed.round() as usize).max(1);
    let mut points: Vec<TimelinePoint> = Vec::with_capacity(seconds);
    for (second, s) in stats.timeline.iter().enumerate() {
        if second < seconds {
            points.push(TimelinePoint {
                second,
                responses: s.responses,
                errors: s.errors,
                bytes: s.bytes,
            });
        } else if let Some(last) = points.last_mut() {
            last.responses += s.responses;
            last.errors += s.errors;
            last.bytes += s.bytes;
        }
    }
    points
}
