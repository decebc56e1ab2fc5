//! Per-thread measurements, merged once at the end of a run.

use std::time::Duration;

use hdrhistogram::Histogram;

/// Largest latency a histogram tracks, in nanoseconds (one hour).
const MAX_TRACKED_NS: u64 = 3_600_000_000_000;

/// Significant decimal digits kept by every histogram.
const SIGNIFICANT_DIGITS: u8 = 3;

/// What went wrong with a request or a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorKind {
    /// The server refused the TCP connection.
    ConnectRefused,
    /// Any other connect failure (unreachable, timeout while connecting).
    Connect,
    /// The TLS handshake failed.
    Tls,
    /// The connection was reset (ECONNRESET, EPIPE, ECONNABORTED).
    Reset,
    /// No complete response within the request timeout.
    Timeout,
    /// A read failed for another reason.
    Read,
    /// A write failed for another reason.
    Write,
    /// The server closed the connection before the response was complete.
    Closed,
    /// The response broke HTTP/1.1.
    Malformed,
    /// The server refused the WebSocket upgrade (not a valid 101, RFC 6455 section 4.1).
    Handshake,
    /// A WebSocket frame or message broke RFC 6455 or RFC 7692.
    Protocol,
    /// A WebSocket message larger than the limit (`ws::MAX_MESSAGE_BYTES`).
    TooBig,
    /// An echo that differs from the message it answers.
    Mismatch,
    /// A fan-out POST answered with a status other than 2xx.
    Status,
    /// A Content-Encoding the bench does not decode (it decodes gzip,
    /// RFC 9110 §8.4.1.3, in the SSE mode).
    Encoding,
    /// A gzip-coded body that breaks RFC 1952 or RFC 1951.
    Gzip,
}

impl ErrorKind {
    /// Number of kinds, for counter arrays.
    pub(crate) const COUNT: usize = 16;

    /// Every kind, in report order.
    pub(crate) const ALL: [ErrorKind; ErrorKind::COUNT] = [
        ErrorKind::ConnectRefused,
        ErrorKind::Connect,
        ErrorKind::Tls,
        ErrorKind::Reset,
        ErrorKind::Timeout,
        ErrorKind::Read,
        ErrorKind::Write,
        ErrorKind::Closed,
        ErrorKind::Malformed,
        ErrorKind::Handshake,
        ErrorKind::Protocol,
        ErrorKind::TooBig,
        ErrorKind::Mismatch,
        ErrorKind::Status,
        ErrorKind::Encoding,
        ErrorKind::Gzip,
    ];

    /// Stable name used in every report.
    pub(crate) fn name(self) -> &'static str {
        match self {
            ErrorKind::ConnectRefused => "connect_refused",
            ErrorKind::Connect => "connect",
            ErrorKind::Tls => "tls",
            ErrorKind::Reset => "reset",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Read => "read",
            ErrorKind::Write => "write",
            ErrorKind::Closed => "closed",
            ErrorKind::Malformed => "malformed",
            ErrorKind::Handshake => "handshake",
            ErrorKind::Protocol => "protocol",
            ErrorKind::TooBig => "too_big",
            ErrorKind::Mismatch => "mismatch",
            ErrorKind::Status => "status",
            ErrorKind::Encoding => "content_encoding",
            ErrorKind::Gzip => "gzip",
        }
    }

    /// Classifies an IO error; `fallback` is the kind for anything unrecognised.
    pub(crate) fn from_io(error: &std::io::Error, fallback: ErrorKind) -> ErrorKind {
        use std::io::ErrorKind as Io;
        match error.kind() {
            Io::ConnectionRefused => ErrorKind::ConnectRefused,
            Io::ConnectionReset | Io::ConnectionAborted | Io::BrokenPipe => ErrorKind::Reset,
            Io::TimedOut => ErrorKind::Timeout,
            Io::UnexpectedEof => ErrorKind::Closed,
            Io::InvalidData if fallback == ErrorKind::Read => ErrorKind::Tls,
            _ => fallback,
        }
    }
}

/// Counts for one second of the measured run.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Second {
    /// Responses completed in this second.
    pub(crate) responses: u64,
    /// Errors in this second.
    pub(crate) errors: u64,
    /// Bytes read in this second.
    pub(crate) bytes: u64,
}

/// Everything measured by one thread (or, after merging, by all).
#[derive(Debug, Clone)]
pub(crate) struct Stats {
    /// Response latency in ns; in open loop from the intended send time.
    pub(crate) latency: Histogram<u64>,
    /// Open loop only: latency from the actual send time (uncorrected).
    pub(crate) service: Histogram<u64>,
    /// TCP connect time in ns.
    pub(crate) connect: Histogram<u64>,
    /// TLS handshake time in ns.
    pub(crate) handshake: Histogram<u64>,
    /// WebSocket upgrade time in ns (request to 101).
    pub(crate) upgrade: Histogram<u64>,
    /// Complete responses.
    pub(crate) responses: u64,
    /// Bytes read from the server while measuring.
    pub(crate) bytes: u64,
    /// Errors by `ErrorKind` index.
    pub(crate) errors: [u64; ErrorKind::COUNT],
    /// Connections set up (TCP connect and, over TLS, the handshake),
    /// warm-up included.
    pub(crate) setup_ok: u64,
    /// Failed set-ups by `ErrorKind` index, warm-up included.
    pub(crate) setup_failed: [u64; ErrorKind::COUNT],
    /// Responses by status code (index = code).
    pub(crate) status: Vec<u64>,
    /// Per-second counts from the start of measurement.
    pub(crate) timeline: Vec<Second>,
}

impl Stats {
    /// Empty stats with a timeline sized for `seconds`.
    pub(crate) fn new(seconds: usize) -> Stats {
        let histogram = || {
            Histogram::new_with_bounds(1, MAX_TRACKED_NS, SIGNIFICANT_DIGITS)
                .expect("constant histogram bounds are valid")
        };
        Stats {
            latency: histogram(),
            service: histogram(),
            connect: histogram(),
            handshake: histogram(),
            upgrade: histogram(),
            responses: 0,
            bytes: 0,
            errors: [0; ErrorKind::COUNT],
            setup_ok: 0,
            setup_failed: [0; ErrorKind::COUNT],
            status: vec![0; 600],
            timeline: vec![Second::default(); seconds + 2],
        }
    }

    fn second(&mut self, second: usize) -> &mut Second {
        if second >= self.timeline.len() {
            self.timeline.resize(second + 1, Second::default());
        }
        &mut self.timeline[second]
    }

    /// Records one complete response.
    #[inline]
    pub(crate) fn response(&mut self, status: u16, latency: Duration, second: usize) {
        self.latency.saturating_record(nanos(latency));
        self.responses += 1;
        self.status[usize::from(status)] += 1;
        self.second(second).responses += 1;
    }

    /// Records one complete WebSocket echo.
    #[inline]
    pub(crate) fn message(&mut self, latency: Duration, second: usize) {
        self.latency.saturating_record(nanos(latency));
        self.responses += 1;
        self.second(second).responses += 1;
    }

    /// Records bytes read.
    #[inline]
    pub(crate) fn bytes(&mut self, n: usize, second: usize) {
        self.bytes += n as u64;
        self.second(second).bytes += n as u64;
    }

    /// Records `count` failed requests (or one failed connection).
    pub(crate) fn error(&mut self, kind: ErrorKind, count: u64, second: usize) {
        self.errors[kind as usize] += count;
        self.second(second).errors += count;
    }

    /// All errors.
    pub(crate) fn error_total(&self) -> u64 {
        self.errors.iter().sum()
    }

    /// Responses with a 4xx or 5xx status.
    pub(crate) fn status_errors(&self) -> u64 {
        self.status[400..].iter().sum()
    }

    /// Adds another thread's measurements.
    pub(crate) fn merge(&mut self, other: &Stats) {
        let _ = self.latency.add(&other.latency);
        let _ = self.service.add(&other.service);
        let _ = self.connect.add(&other.connect);
        let _ = self.handshake.add(&other.handshake);
        let _ = self.upgrade.add(&other.upgrade);
        self.responses += other.responses;
        self.bytes += other.bytes;
        for (mine, theirs) in self.errors.iter_mut().zip(other.errors) {
            *mine += theirs;
        }
        self.setup_ok += other.setup_ok;
        for (mine, theirs) in self.setup_failed.iter_mut().zip(other.setup_failed) {
            *mine += theirs;
        }
        for (mine, theirs) in self.status.iter_mut().zip(&other.status) {
            *mine += theirs;
        }
        if other.timeline.len() > self.timeline.len() {
            self.timeline
                .resize(other.timeline.len(), Second::default());
        }
        for (mine, theirs) in self.timeline.iter_mut().zip(&other.timeline) {
            mine.responses += theirs.responses;
            mine.errors += theirs.errors;
            mine.bytes += theirs.bytes;
        }
    }
}

/// A duration in ns, at least 1 (the histogram's lowest value).
pub(crate) fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos())
        .unwrap_or(u64::MAX)
        .max(1)
}
