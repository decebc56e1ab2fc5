//! `GET /page`: one HTML file, read at start, compressed with gzip on the
//! fly by Celer's compression middleware for every request that accepts it.
//! `bench/run gzip` runs it against nginx's `gzip on`.
//!
//! Run with `cargo run --release -p example-compress -- --page page.html`.
//!
//! ```text
//! example-compress --page FILE [--level 1] [--listen SPEC]... [--workers N] (--help for all)
//! ```

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use std::path::PathBuf;
use std::process::ExitCode;

use bytes::Bytes;
use celer::middleware::compression::{Coding, Compression};
use celer::serve::Options;
use celer::{App, Body, Request};
use clap::Parser;

#[derive(Parser, Debug)]
#[command(about = "One HTML page, gzip on the fly", after_help = Options::help())]
struct Args {
    /// The HTML file to serve as /page.
    #[arg(long)]
    page: PathBuf,
    /// gzip level, 0 to 9.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=9))]
    level: u32,
}

fn main() -> ExitCode {
    let (server, rest) = Options::from_env_with_rest();
    let args = Args::parse_from(rest);
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
    match server.serve(app) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("example-compress: {err}");
            ExitCode::FAILURE
        }
    }
}
