//! The `example-tasks` server: the task API with Rust task kinds.
//!
//! Run with `cargo run -p example-tasks -- --listen tcp://127.0.0.1:8080`,
//! then:
//!
//! ```text
//! curl -si localhost:8080/tasks -H 'content-type: application/json' \
//!      -d '{"kind": "primes", "input": {"below": 2000000}}'
//! curl -s localhost:8080/tasks/1            # state, attempts, progress
//! curl -sN localhost:8080/tasks/1/events    # live, until it is final
//! curl -s localhost:8080/tasks/1/result     # {"count":148933,"attempt":1}
//! curl -s localhost:8080/primes/1000        # inline, on the dispatcher
//! ```

use celer::dispatch::Dispatcher;
use celer::serve::{Listen, Server};
use celer_tasks::{Tasks, TasksConfig};
use clap::Parser;

#[derive(Parser, Debug)]
#[command(about = "The task API on the Celer framework")]
struct Args {
    /// Where to listen (repeatable): tcp://HOST:PORT, unix:PATH, fd:N, systemd.
    #[arg(long, default_value = "tcp://127.0.0.1:8080")]
    listen: Vec<Listen>,
    /// Where the task store lives.
    #[arg(long, default_value = "example-tasks-data")]
    data_dir: std::path::PathBuf,
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
            eprintln!("example-tasks: {err}");
            std::process::exit(2);
        }
    };
    let tasks = match Tasks::open(TasksConfig::new(&args.data_dir), example_tasks::kinds()) {
        Ok(tasks) => tasks,
        Err(err) => {
            eprintln!("example-tasks: {err}");
            std::process::exit(1);
        }
    };
    eprintln!(
        "example-tasks listening on {}",
        bound.local_specs().join(", ")
    );
    let app = example_tasks::app(&tasks, Dispatcher::new());
    let served = app.run(bound, shutdown_signal());
    // Running tasks go back to the store for the next start.
    tasks.shutdown();
    if let Err(err) = served {
        eprintln!("example-tasks: {err}");
        std::process::exit(1);
    }
}

/// Resolves at SIGTERM (what service managers send) or Ctrl-C.
async fn shutdown_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
