//! The `celer` binary: `celer serve`, `celer bench` and `celer tasks`.
//!
//! This file parses the command line, sets up logging and dispatches; each
//! subcommand lives in its own module. Errors print as one line, `celer:
//! error: ...`, and exit with 2 when the command line is at fault (as clap
//! does for its own errors) or 1 otherwise.

mod bench;
mod config;
mod http2;
mod logging;
mod serve;
mod tasks;
mod tls;
mod units;

use std::fmt;
use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{CommandFactory as _, FromArgMatches as _, Parser, Subcommand};

/// jemalloc: the fewest instructions per request and the least memory per
/// idle connection of the allocators measured (docs/decisions/003).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read once at start-up (before `main`): a background
/// thread purges freed pages one second after they were last used, so
/// memory a burst took goes back to the system while the server idles
/// (without it, an arena returns pages only when it is used again, and an
/// idle worker's arena never is). docs/decisions/050-memory-after-bursts.md
/// has the measurements. `_RJEM_MALLOC_CONF` in the environment overrides
/// these at run time.
#[allow(unsafe_code)]
// SAFETY: jemalloc reads this symbol (`malloc_conf`, with the prefix
// tikv-jemalloc-sys gives its symbols) as a `const char *` once while it
// initialises; the pointer is to a NUL-terminated string in static
// storage, never written.
#[unsafe(export_name = "_rjem_malloc_conf")]
static MALLOC_CONF: ConfStr = ConfStr(JEMALLOC_OPTIONS.as_ptr());

/// The options in [`MALLOC_CONF`].
const JEMALLOC_OPTIONS: &std::ffi::CStr =
    c"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0";

/// A C string pointer that may live in a `static`.
#[repr(transparent)]
struct ConfStr(*const std::ffi::c_char);

#[allow(unsafe_code)]
// SAFETY: the pointer is to immutable static data; sharing it between
// threads is sound.
unsafe impl Sync for ConfStr {}

/// Celer: a web server, a web framework and a load generator.
#[derive(Debug, Parser)]
#[command(name = "celer", version, propagate_version = true)]
struct Cli {
    /// Log filter: error, warn, info, debug, trace, or tracing directives
    /// such as `celer=debug`. Overrides RUST_LOG [default: RUST_LOG, else
    /// info].
    #[arg(long, global = true, value_name = "LEVEL")]
    log_level: Option<String>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve a directory, or the embedded welcome site, over HTTP/1.1 or
    /// HTTPS.
    Serve(serve::ServeArgs),
    /// Load a server and report throughput and latency percentiles: HTTP/1.1
    /// load, sweeps and idle connections; WebSocket echo, idle sockets and
    /// broadcast fan-out for ws:// and wss:// URLs.
    Bench(bench::BenchArgs),
    /// Administer the task store of `celer serve --tasks`: API keys.
    Tasks(tasks::TasksArgs),
}

/// An error the user fixes by changing the command line; exits 2.
#[derive(Debug)]
pub(crate) struct Usage(pub(crate) String);

impl fmt::Display for Usage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

fn main() -> ExitCode {
    let matches = match Cli::command().try_get_matches() {
        Ok(matches) => matches,
        Err(err) => return clap_exit(&err),
    };
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(err) => return clap_exit(&err),
    };
    let result = match cli.command {
        Command::Serve(args) => {
            // `serve`'s own matches say which flags the command line gave
            // (they win over the --config file).
            let none = clap::ArgMatches::default();
            let serve_matches = matches.subcommand_matches("serve").unwrap_or(&none);
            serve::configure(args, serve_matches).and_then(|(args, file_level)| {
                init_logging(cli.log_level.as_deref().or(file_level.as_deref()));
                serve::run(&args)
            })
        }
        Command::Bench(args) => {
            init_logging(cli.log_level.as_deref());
            bench::run(args)
        }
        Command::Tasks(args) => {
            init_logging(cli.log_level.as_deref());
            tasks::run(args)
        }
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("celer: error: {}", one_line(&format!("{err:#}")));
            if err.downcast_ref::<Usage>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// Prints help and version as clap does; shortens usage errors to one line.
fn clap_exit(err: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match err.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = err.print();
            ExitCode::from(err.exit_code() as u8)
        }
        _ => {
            let text = err.render().to_string();
            let mut lines = text.lines();
            let first = lines.next().unwrap_or("invalid arguments");
            let mut message = first.strip_prefix("error: ").unwrap_or(first).to_owned();
            // A message ending in ':' lists what it is about on the indented
            // lines below it (the missing arguments): they belong to the line.
            if message.ends_with(':') {
                let listed: Vec<&str> = lines
                    .take_while(|l| l.starts_with(' '))
                    .map(str::trim)
                    .collect();
                message.push(' ');
                message.push_str(&listed.join(", "));
            }
            eprintln!(
                "celer: error: {message} (see '{} --help')",
                command_of(&text)
            );
            ExitCode::from(2)
        }
    }
}

/// The command a clap error is about, from its `Usage:` line: `celer serve`.
fn command_of(rendered: &str) -> String {
    let usage = rendered
        .lines()
        .find_map(|l| l.trim().strip_prefix("Usage: "));
    let words: Vec<&str> = usage
        .unwrap_or("celer")
        .split_whitespace()
        .take_while(|w| !w.starts_with(['[', '<', '-']))
        .collect();
    if words.is_empty() {
        "celer".to_owned()
    } else {
        words.join(" ")
    }
}

/// Joins a multi-line message into one line.
fn one_line(msg: &str) -> String {
    msg.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// Logs to stderr; `--log-level` wins over RUST_LOG, and the default is
/// `info`. Warnings are rate-limited per kind (`logging`).
fn init_logging(level: Option<&str>) {
    use tracing_subscriber::EnvFilter;
    let filter = match level {
        Some(level) => EnvFilter::try_new(level),
        None => EnvFilter::try_from_default_env().or_else(|_| EnvFilter::try_new("info")),
    };
    let filter = filter.unwrap_or_else(|err| {
        eprintln!("celer: warning: ignoring log filter: {err}");
        EnvFilter::new("info")
    });
    let ansi = std::io::stderr().is_terminal();
    tracing_subscriber::fmt()
        .with_ansi(ansi)
        .event_format(logging::RateLimited::new(
            tracing_subscriber::fmt::format().with_ansi(ansi),
        ))
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}
