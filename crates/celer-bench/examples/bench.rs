//! Run with `cargo run --release -p celer-bench --example bench -- URL [options]`.
//!
//! The same front end as `celer bench`, for testing the library on its own.

use std::process::ExitCode;

use clap::Parser;

/// Load generator for HTTP/1.1 servers.
#[derive(Debug, Parser)]
#[command(name = "celer-bench")]
struct Cli {
    #[command(flatten)]
    bench: celer_bench::BenchArgs,
}

fn main() -> ExitCode {
    match celer_bench::run(Cli::parse().bench) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(if e.is_usage() { 2 } else { 1 })
        }
    }
}
