//! The `celer` binary.

fn main() {}
