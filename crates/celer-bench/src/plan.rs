//! The validated, immutable description of a run, built from `BenchArgs`.

use std::net::SocketAddr;
use std::time::Duration;

use crate::encode::{Encoded, RequestParts};
use crate::sse;
use crate::target::{self, Origin, Target};
use crate::tls::{self, Tls};
use crate::ws::{self, Endpoint, WsPlan};
use crate::{BenchArgs, Error};

/// Default measuring time when neither `-d` nor `-n` is given.
const DEFAULT_DURATION: Duration = Duration::from_secs(10);

/// Smallest accepted read buffer, in bytes: a response head must fit in it.
const MIN_BUFFER: usize = 1024;

/// Everything a connection needs, shared read-only by all threads.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// Scheme, host and port.
    pub(crate) origin: Origin,
    /// The URLs, for reports.
    pub(crate) targets: Vec<Target>,
    /// Resolved server address.
    pub(crate) addr: SocketAddr,
    /// TLS client, for https.
    pub(crate) tls: Option<Tls>,
    /// One encoded request per target.
    pub(crate) requests: Vec<Encoded>,
    /// Cumulative target weights, for weighted picking.
    pub(crate) cumulative_weights: Vec<u64>,
    /// The first request repeated `pipeline` times (used with one target).
    pub(crate) batch: Vec<u8>,
    /// Open connections.
    pub(crate) connections: usize,
    /// Threads.
    pub(crate) threads: usize,
    /// Measuring time; `None` runs until `total_requests` are done.
    pub(crate) duration: Option<Duration>,
    /// Exact number of requests to send, when `-n` is given.
    pub(crate) total_requests: Option<u64>,
    /// Unmeasured load before measuring.
    pub(crate) warmup: Duration,
    /// Time over which the connections are first opened.
    pub(crate) ramp: Duration,
    /// Open-loop rate in requests per second.
    pub(crate) rate: Option<f64>,
    /// Reuse connections.
    pub(crate) keep_alive: bool,
    /// Requests written per batch.
    pub(crate) pipeline: u32,
    /// Per-request timeout.
    pub(crate) timeout: Duration,
    /// Read buffer per connection, in bytes.
    pub(crate) buffer: usize,
    /// The WebSocket modes' settings, for a ws:// or wss:// URL.
    pub(crate) ws: Option<WsPlan>,
    /// The SSE fan-out settings, with `--sse`.
    pub(crate) sse: Option<std::sync::Arc<sse::SsePlan>>,
}

impl Plan {
    /// Validates the arguments, reads input files, resolves and encodes.
    pub(crate) fn from_args(args: &BenchArgs) -> Result<Plan, Error> {
        let urls = match (&args.url, &args.urls) {
            (Some(_), Some(_)) => {
                return Err(Error::usage("give either a URL or --urls, not both"));
            }
            (Some(url), None) => vec![(url.clone(), 1)],
            (None, Some(path)) => target::read_url_file(path)?,
            (None, None) => return Err(Error::usage("no URL given")),
        };
        let (origin, targets) = target::resolve_targets(&urls)?;
        check_numbers(args)?;
        let body = match (&args.body, &args.body_file) {
            (Some(text), _) => text.clone().into_bytes(),
            (None, Some(path)) => std::fs::read(path)
                .map_err(|e| Error::io(format!("cannot read {}", path.display()), e))?,
            (None, None) => Vec::new(),
        };
        let keep_alive = !args.no_keepalive;
        let parts = RequestParts::new(&args.method, &args.headers, body, !keep_alive)?;
        let requests: Vec<Encoded> = targets.iter().map(|t| parts.encode(&origin, t)).collect();
        let cumulative_weights = targets
            .iter()
            .scan(0u64, |sum, t| {
                *sum += u64::from(t.weight);
                Some(*sum)
            })
            .collect();
        let batch = requests[0].bytes.repeat(args.pipeline as usize);
        let tls = if origin.https {
            Some(tls::client(&origin.host, args.insecure)?)
        } else {
            None
        };
        let addr = target::lookup(&origin)?;
        let endpoint = Endpoint {
            addr,
            tls: tls.clone(),
            timeout: args.timeout,
        };
        let ws = ws::plan(args, &origin, &targets[0], &endpoint, &parts)?;
        let sse = sse::plan(args, &origin, &targets[0])?.map(std::sync::Arc::new);
        let connections = args.connections;
        let duration = match (args.duration, args.requests) {
            (None, None) => Some(DEFAULT_DURATION),
            (duration, _) => duration,
        };
        Ok(Plan {
            origin,
            targets,
            addr,
            tls,
            requests,
            cumulative_weights,
            batch,
            connections,
            threads: default_threads(args.threads, connections),
            duration,
            total_requests: args.requests,
            warmup: args.warmup,
            ramp: args.ramp,
            rate: args.rate,
            keep_alive,
            pipeline: args.pipeline,
            timeout: args.timeout,
            buffer: args.buffer,
            ws,
            sse,
        })
    }

    /// The same plan with another number of connections (for sweeps).
    pub(crate) fn with_connections(&self, connections: usize, threads: Option<usize>) -> Plan {
        Plan {
            connections,
            threads: default_threads(threads, connections),
            ..self.clone()
        }
    }

    /// Whether this run is open loop.
    pub(crate) fn is_open_loop(&self) -> bool {
        self.rate.is_some()
    }
}

/// The thread count: `-t`, else the CPUs; at most one per connection.
pub(crate) fn default_threads(threads: Option<usize>, connections: usize) -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    threads.unwrap_or(cpus).clamp(1, connections.max(1))
}

fn check_numbers(args: &BenchArgs) -> Result<(), Error> {
    if args.connections == 0 {
        return Err(Error::usage("--connections must be at least 1"));
    }
    if args.threads == Some(0) {
        return Err(Error::usage("--threads must be at least 1"));
    }
    if args.pipeline == 0 {
        return Err(Error::usage("--pipeline must be at least 1"));
    }
    if args.requests == Some(0) {
        return Err(Error::usage("--requests must be at least 1"));
    }
    if args.duration == Some(Duration::ZERO) {
        return Err(Error::usage("--duration must be more than 0"));
    }
    if args.timeout.is_zero() {
        return Err(Error::usage("--timeout must be more than 0"));
    }
    if args.buffer < MIN_BUFFER {
        return Err(Error::usage(format!(
            "--buffer must be at least {MIN_BUFFER} bytes"
        )));
    }
    if let Some(rate) = args.rate {
        if !(rate.is_finite() && rate > 0.0) {
            return Err(Error::usage("--rate must be a positive number"));
        }
        if args.pipeline > 1 {
            return Err(Error::usage(
                "--rate sends one request at a time; drop --pipeline",
            ));
        }
    }
    if args.pipeline > 1 && args.no_keepalive {
        return Err(Error::usage(
            "--pipeline needs keep-alive; drop --no-keepalive",
        ));
    }
    if args.sweep.contains(&0) {
        return Err(Error::usage("--sweep levels must be at least 1"));
    }
    if args.hang == Some(0) {
        return Err(Error::usage("--hang must be at least 1"));
    }
    Ok(())
}
