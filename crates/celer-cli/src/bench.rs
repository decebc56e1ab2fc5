//! `celer bench`: a thin front end over the celer-bench library.
//!
//! `BenchArgs` is the subcommand's arguments (clap turns its doc comments
//! into `celer bench --help`, the WebSocket flags under their own heading);
//! `run` hands them to `celer_bench::run` and maps a bad command line to
//! `Usage`, which exits 2.

use std::process::ExitCode;

pub(crate) use celer_bench::BenchArgs;

use crate::Usage;

/// Runs `celer bench`; every error is one line (bad arguments, unreachable
/// target, unwritable report).
pub(crate) fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    celer_bench::run(args).map_err(|err| {
        if err.is_usage() {
            Usage(err.to_string()).into()
        } else {
            anyhow::Error::new(err)
        }
    })
}
