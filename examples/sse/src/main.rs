//! The `example-sse` server: a live clock and a shared counter, pushed to
//! every open page with server-sent events.
//!
//! Run with `cargo run -p example-sse -- --listen tcp://127.0.0.1:8080`.
//!
//! ```text
//! example-sse --listen tcp://127.0.0.1:8080 [--tick-ms N]
//! ```
//!
//! SIGTERM or Ctrl-C shuts it down gracefully: the event streams end after
//! their last event, and the process exits with status 0.

use std::time::Duration;

use celer::serve::Options;
use clap::Parser;
use example_sse::{Live, app, start_clock};

#[derive(Parser, Debug)]
#[command(about = "Server-sent events on the Celer framework", after_help = Options::help())]
struct Args {
    /// The clock's period, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    tick_ms: u64,
}

fn main() {
    let (server, rest) = Options::from_env_with_rest();
    let args = Args::parse_from(rest);
    let live = Live::new();
    let app = app(&live);
    start_clock(
        live.hub.clone(),
        app.shutdown_notice(),
        Duration::from_millis(args.tick_ms),
    );
    if let Err(err) = server.serve(app) {
        eprintln!("example-sse: {err}");
        std::process::exit(1);
    }
    eprintln!("example-sse: stopped");
}
