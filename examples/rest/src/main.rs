//! The `example-rest` server: the API of the library half, served by
//! `App::run`.
//!
//! Run with `cargo run -p example-rest -- --listen tcp://127.0.0.1:8080`.
//!
//! ```text
//! example-rest --listen tcp://127.0.0.1:8080 [--workers N]
//! ```

use celer::serve::{Listen, Server};
use clap::Parser;

#[derive(Parser, Debug)]
#[command(about = "A small CRUD API on the Celer framework")]
struct Args {
    /// Where to listen (repeatable): tcp://HOST:PORT, unix:PATH, fd:N, systemd.
    #[arg(long, default_value = "tcp://127.0.0.1:8080")]
    listen: Vec<Listen>,
    /// Worker threads (default: one per CPU).
    #[arg(long)]
    workers: Option<usize>,
}

fn main() {
    let args = Args::parse();
    let mut builder = Server::builder();
    if let Some(n) = args.workers {
        builder = builder.workers(n);
    }
    for l in args.listen {
        builder = builder.listen(l);
    }
    let bound = match builder.bind() {
        Ok(b) => b,
        Err(err) => {
            eprintln!("example-rest: {err}");
            std::process::exit(2);
        }
    };
    eprintln!(
        "example-rest listening on {}",
        bound.local_specs().join(", ")
    );
    let signal = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    if let Err(err) = example_rest::app().run(bound, signal) {
        eprintln!("example-rest: {err}");
        std::process::exit(1);
    }
}
