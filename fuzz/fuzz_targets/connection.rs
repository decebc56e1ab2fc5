//! Fuzz target: a whole HTTP/1.1 connection on an in-memory stream, with
//! time paused: it ends, and writes back only HTTP/1.1 responses.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| celer_server::fuzzing::connection(data));
