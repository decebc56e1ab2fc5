//! `celer bench`: a thin front end over the celer-bench library.
//!
//! Wiring in `main.rs`: `mod bench;`, a subcommand variant
//! `Bench(bench::BenchArgs)` (clap turns the doc comment of `BenchArgs` and
//! its fields into `celer bench --help`), and `Command::Bench(args) =>
//! bench::run(args)`, whose exit code the binary returns.

use std::process::ExitCode;

pub(crate) use celer_bench::BenchArgs;

/// Runs `celer bench`; every error is one line (bad arguments, unreachable
/// target, unwritable report).
pub(crate) fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    Ok(celer_bench::run(args)?)
}
