//! Command-line arguments of `celer bench` and the parsers for their values.

use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `celer bench URL [options]`.
///
/// An http:// or https:// URL runs the HTTP/1.1 modes. A ws:// or wss://
/// URL runs the WebSocket modes (RFC 6455, every frame masked):
/// echo by default (`-c` connections, each with `--pipeline` messages of
/// `--message-size` bytes in flight, waiting for each echo and checking it
/// byte for byte); `--hang N` holds N idle WebSockets and measures the
/// server's RSS per socket with `--pid`; `--fanout N` connects N receivers
/// and measures how long one message takes to reach them, `--rounds` times.
///
/// Flatten it into a clap command (`#[command(flatten)]` or as a subcommand
/// variant) and hand it to `celer_bench::run`.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// URL to load: http:// or https://, or ws:// or wss:// for the
    /// WebSocket modes (omit when --urls names a file).
    #[arg(value_name = "URL")]
    pub url: Option<String>,

    /// Connections kept open, spread over the threads.
    #[arg(short = 'c', long, default_value_t = 10, value_name = "N")]
    pub connections: usize,

    /// Threads, each with its own event loop; default: CPUs, at most one per connection.
    #[arg(short = 't', long, value_name = "N")]
    pub threads: Option<usize>,

    /// How long to measure (e.g. 10s, 500ms, 2m); default 10s unless -n is given.
    #[arg(short = 'd', long, value_parser = parse_duration, value_name = "TIME")]
    pub duration: Option<Duration>,

    /// Stop after exactly this many requests (over all connections); with
    /// ws://, this many echoed messages.
    #[arg(short = 'n', long, value_name = "N")]
    pub requests: Option<u64>,

    /// Load the server for this long before measuring.
    #[arg(long, value_parser = parse_duration, default_value = "0s", value_name = "TIME")]
    pub warmup: Duration,

    /// Open the connections evenly over this long instead of all at once
    /// (connection i waits i/N of it before its first connect), so that
    /// thousands of TCP connects and TLS handshakes do not overflow the
    /// server's listen backlog; a connection sends its first request when
    /// the ramp ends, so the load of the first ones cannot crowd out the
    /// handshakes of the last. With --sse, the subscribers. Keep it within
    /// --warmup so that the measurement sees every connection.
    #[arg(long, value_parser = parse_duration, default_value = "0s", value_name = "TIME")]
    pub ramp: Duration,

    /// Open loop: send this many requests per second in total, on schedule,
    /// and measure latency from the intended send time (corrects coordinated omission).
    #[arg(short = 'R', long, value_name = "REQ/S")]
    pub rate: Option<f64>,

    /// Close the connection after every response (sends `Connection: close`).
    #[arg(long)]
    pub no_keepalive: bool,

    /// Requests written back to back on a connection before reading
    /// responses; with ws:// the messages kept in flight per connection.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub pipeline: u32,

    /// Request method.
    #[arg(short = 'm', long, default_value = "GET")]
    pub method: String,

    /// Request header field, `Name: value` (repeatable); with ws:// it goes
    /// on the upgrade request (and on the --post request); with --sse on the
    /// subscription request (`-H 'Accept-Encoding: gzip'` asks for a
    /// gzip-coded event stream).
    #[arg(short = 'H', long = "header", value_name = "NAME: VALUE")]
    pub headers: Vec<String>,

    /// Request body; with --fanout --post, the POST body, where `{message}`
    /// stands for the message [default: the message itself].
    #[arg(long, conflicts_with = "body_file", value_name = "TEXT")]
    pub body: Option<String>,

    /// Request body read from a file.
    #[arg(long, value_name = "FILE")]
    pub body_file: Option<PathBuf>,

    /// File of URLs, one per line as `[WEIGHT] URL`; `#` starts a comment.
    /// All URLs must share one scheme, host and port.
    #[arg(long, value_name = "FILE")]
    pub urls: Option<PathBuf>,

    /// Accept any TLS certificate (self-signed servers).
    #[arg(short = 'k', long)]
    pub insecure: bool,

    /// Give up on a request (and its connection) after this long.
    #[arg(long, value_parser = parse_duration, default_value = "10s", value_name = "TIME")]
    pub timeout: Duration,

    /// Read buffer per connection; bodies stream through it, so large
    /// responses never need more memory (throughput mode).
    #[arg(long, value_parser = parse_size, default_value = "64KiB", value_name = "SIZE")]
    pub buffer: usize,

    /// Server process to account CPU time (and RSS with --hang) for (repeatable).
    #[arg(short = 'p', long = "pid", value_name = "PID")]
    pub pids: Vec<u32>,

    /// Include the descendants of every --pid.
    #[arg(long)]
    pub pid_tree: bool,

    /// Run once per concurrency level and print a table, e.g. 10,25,50,100.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "LEVELS",
        conflicts_with = "hang"
    )]
    pub sweep: Vec<usize>,

    /// Open this many keep-alive connections, send one request on each, hold
    /// them idle for the duration and check they still answer; with ws://,
    /// open this many WebSockets, hold them idle (answering pings) and check
    /// each answers a ping at the end.
    #[arg(long, value_name = "N", conflicts_with = "fanout")]
    pub hang: Option<usize>,

    /// WebSocket message size in bytes (echo and fan-out); each message
    /// carries its sequence number so every echo is matched to its message.
    #[arg(long, value_parser = parse_size, default_value = "64", value_name = "SIZE", help_heading = "WebSocket (ws:// and wss:// URLs)")]
    pub message_size: usize,

    /// Echo the messages of this file instead of generated ones: each
    /// non-empty line is one message (JSON Lines, say), sent in turn, and
    /// every echo is compared with the line it answers; --message-size is
    /// ignored. With --hang, each socket first has one line echoed (the
    /// sockets take the lines in turn), then idles: what a used connection
    /// costs the server (with permessage-deflate, its compression state).
    #[arg(
        long,
        value_name = "PATH",
        conflicts_with = "fanout",
        help_heading = "WebSocket (ws:// and wss:// URLs)"
    )]
    pub message_file: Option<PathBuf>,

    /// Send binary messages instead of text.
    #[arg(long, help_heading = "WebSocket (ws:// and wss:// URLs)")]
    pub binary: bool,

    /// Offer permessage-deflate (RFC 7692); messages are compressed when
    /// the server accepts it.
    #[arg(long, help_heading = "WebSocket (ws:// and wss:// URLs)")]
    pub deflate: bool,

    /// Ask for this subprotocol (Sec-WebSocket-Protocol).
    #[arg(
        long,
        value_name = "NAME",
        help_heading = "WebSocket (ws:// and wss:// URLs)"
    )]
    pub subprotocol: Option<String>,

    /// Broadcast fan-out: connect N receivers to the URL, send one message
    /// per round through --publish or --post, and time its arrival at each
    /// receiver (last, p50, p99; medians over the rounds).
    #[arg(
        long,
        value_name = "N",
        conflicts_with = "sweep",
        help_heading = "WebSocket (ws:// and wss:// URLs)"
    )]
    pub fanout: Option<usize>,

    /// Fan-out rounds, one message each; with --sse, updates published.
    #[arg(
        long,
        default_value_t = 10,
        value_name = "K",
        help_heading = "WebSocket (ws:// and wss:// URLs)"
    )]
    pub rounds: u32,

    /// Fan-out trigger: send each message on a WebSocket to this ws:// or
    /// wss:// URL, which broadcasts it [default: the URL itself].
    #[arg(
        long,
        value_name = "URL",
        conflicts_with = "post",
        help_heading = "WebSocket (ws:// and wss:// URLs)"
    )]
    pub publish: Option<String>,

    /// Fan-out trigger: POST each message to this http:// or https:// URL
    /// (body from --body, headers from -H); a 2xx answer is expected.
    #[arg(
        long,
        value_name = "URL",
        help_heading = "WebSocket (ws:// and wss:// URLs)"
    )]
    pub post: Option<String>,

    /// SSE fan-out latency: open N subscribers to the URL (an event
    /// stream over http:// or https://), wait until each has the current
    /// version, then rewrite --sse-file --rounds times and time, per
    /// subscriber and update, the arrival of the new version from the
    /// moment the file changed (p50, p99, max over subscribers × updates).
    /// With `-H 'Accept-Encoding: gzip'` the server may send the stream
    /// gzip-coded (Content-Encoding: gzip); it is inflated, each distinct
    /// deflate segment once per thread for all its subscribers, so that
    /// the bench's own cost stays small. Another Content-Encoding is an
    /// error (`content_encoding`), a corrupt gzip stream too (`gzip`).
    #[arg(
        long,
        value_name = "N",
        conflicts_with_all = ["hang", "fanout", "sweep"],
        requires = "sse_file",
        help_heading = "Server-sent events (http:// and https:// URLs)"
    )]
    pub sse: Option<usize>,

    /// With --sse: the file the server publishes (a JSON object). Each
    /// update replaces it atomically with a field added at its start,
    /// `"celer_bench":"RUN:SEQ:NS"` (NS: the writer's CLOCK_REALTIME just
    /// before the write), by which subscribers time the update; the file is
    /// put back as it was at the end.
    #[arg(
        long,
        value_name = "PATH",
        help_heading = "Server-sent events (http:// and https:// URLs)"
    )]
    pub sse_file: Option<PathBuf>,

    /// Print the report as JSON.
    #[arg(long, conflicts_with = "markdown")]
    pub json: bool,

    /// Print the report as Markdown.
    #[arg(long)]
    pub markdown: bool,

    /// Also write a self-contained HTML report with charts to this file.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,

    /// No live progress line, even on a terminal.
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

/// Parses `1.5s`, `250ms`, `2m`, `1h`, `800us` or a bare number of seconds.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("invalid duration '{text}': expected e.g. 10s, 500ms, 2m"))?;
    let seconds = match unit {
        "" | "s" => value,
        "ms" => value / 1e3,
        "us" | "µs" => value / 1e6,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        _ => {
            return Err(format!(
                "invalid duration unit '{unit}': use us, ms, s, m or h"
            ));
        }
    };
    Duration::try_from_secs_f64(seconds).map_err(|_| format!("invalid duration '{text}'"))
}

/// Parses a byte size: `65536`, `64k`, `64KiB`, `1MiB`, `1m`.
pub(crate) fn parse_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: usize = number
        .parse()
        .map_err(|_| format!("invalid size '{text}': expected e.g. 65536, 64KiB, 1MiB"))?;
    let scale = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        _ => return Err(format!("invalid size unit '{unit}': use KiB or MiB")),
    };
    value
        .checked_mul(scale)
        .ok_or_else(|| format!("size '{text}' is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_parsed() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("10x").is_err());
        assert!(parse_duration("s").is_err());
    }

    #[test]
    fn sizes_are_parsed() {
        assert_eq!(parse_size("64KiB"), Ok(65536));
        assert_eq!(parse_size("1m"), Ok(1 << 20));
        assert_eq!(parse_size("100"), Ok(100));
        assert!(parse_size("1g").is_err());
    }
}
