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
use celer::serve::Options;
use celer_tasks::{Tasks, TasksConfig};
use clap::Parser;

#[derive(Parser, Debug)]
#[command(about = "The task API on the Celer framework", after_help = Options::help())]
struct Args {
    /// Where the task store lives.
    #[arg(long, default_value = "example-tasks-data")]
    data_dir: std::path::PathBuf,
}

fn main() {
    let (server, rest) = Options::from_env_with_rest();
    let args = Args::parse_from(rest);
    let tasks = match Tasks::open(TasksConfig::new(&args.data_dir), example_tasks::kinds()) {
        Ok(tasks) => tasks,
        Err(err) => {
            eprintln!("example-tasks: {err}");
            std::process::exit(1);
        }
    };
    let app = example_tasks::app(&tasks, Dispatcher::new());
    let served = server.serve(app);
    // Running tasks go back to the store for the next start.
    tasks.shutdown();
    if let Err(err) = served {
        eprintln!("example-tasks: {err}");
        std::process::exit(1);
    }
}
