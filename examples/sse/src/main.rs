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

use celer::serve::{Listen, Server};
use clap::Parser;
use example_sse::{Live, app, start_clock};

#[derive(Parser, Debug)]
#[command(about = "Server-sent events on the Celer framework")]
struct Args {
    /// Where to listen (repeatable): tcp://HOST:PORT, unix:PATH, fd:N, systemd.
    #[arg(long, default_value = "tcp://127.0.0.1:8080")]
    listen: Vec<Listen>,
    /// The clock's period, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    tick_ms: u64,
}

fn main() {
    let args = Args::parse();
    let mut builder = Server::builder();
    for l in args.listen {
        builder = builder.listen(l);
    }
    let bound = match builder.bind() {
        Ok(b) => b,
        Err(err) => {
            eprintln!("example-sse: {err}");
            std::process::exit(2);
        }
    };
    eprintln!(
        "example-sse listening on {}",
        bound.local_specs().join(", ")
    );
    let live = Live::new();
    let app = app(&live);
    start_clock(
        live.hub.clone(),
        app.shutdown_notice(),
        Duration::from_millis(args.tick_ms),
    );
    if let Err(err) = app.run(bound, shutdown_signal()) {
        eprintln!("example-sse: {err}");
        std::process::exit(1);
    }
    eprintln!("example-sse: stopped");
}

/// Resolves at SIGTERM (what service managers send) or Ctrl-C.
async fn shutdown_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(err) => {
            eprintln!("example-sse: cannot watch SIGTERM: {err}");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
