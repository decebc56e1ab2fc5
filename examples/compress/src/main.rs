//! `GET /page`: one HTML file, read at start, compressed with gzip on the
//! fly by Celer's compression middleware for every request that accepts it.
//! `bench/run gzip` runs it against nginx's `gzip on`.
//!
//! Run with `cargo run --release -p example-compress -- --page page.html`.
//!
//! ```text
//! example-compress --page FILE [--listen tcp://127.0.0.1:8080] [--level 1] [--workers N]
//! ```

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use std::path::PathBuf;
use std::process::ExitCode;

use bytes::Bytes;
use celer::middleware::compression::{Coding, Compression};
use celer::serve::{Listen, Server};
use celer::{App, Body, Request};
use clap::Parser;

#[derive(Parser, Debug)]
#[command(about = "One HTML page, gzip on the fly")]
struct Args {
    /// The HTML file to serve as /page.
    #[arg(long)]
    page: PathBuf,
    /// Where to listen (repeatable): tcp://HOST:PORT, unix:PATH, fd:N, systemd.
    #[arg(long, default_value = "tcp://127.0.0.1:8080")]
    listen: Vec<Listen>,
    /// gzip level, 0 to 9.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=9))]
    level: u32,
    /// Worker threads (default: one per CPU).
    #[arg(long)]
    workers: Option<usize>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let page = match std::fs::read(&args.page) {
        Ok(page) => Bytes::from(page),
        Err(err) => {
            eprintln!(
                "example-compress: cannot read {}: {err}",
                args.page.display()
            );
            return ExitCode::from(2);
        }
    };
    let mut app = App::new();
    app.middleware(
        Compression::new()
            .codings([Coding::Gzip])
            .gzip_level(args.level),
    );
    app.get("/page", move |_req: Request| {
        let page = page.clone();
        async move { celer::response::html(Body::from(page)) }
    });
    let mut builder = Server::builder();
    if let Some(n) = args.workers {
        builder = builder.workers(n);
    }
    for listen in args.listen {
        builder = builder.listen(listen);
    }
    let bound = match builder.bind() {
        Ok(bound) => bound,
        Err(err) => {
            eprintln!("example-compress: {err}");
            return ExitCode::from(2);
        }
    };
    eprintln!(
        "example-compress listening on {}",
        bound.local_specs().join(", ")
    );
    let signal = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    match app.run(bound, signal) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("example-compress: {err}");
            ExitCode::FAILURE
        }
    }
}
