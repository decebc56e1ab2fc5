//! Router benches.
fn main() {}
