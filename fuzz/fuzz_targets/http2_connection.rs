//! Fuzz target: a whole HTTP/2 connection on an in-memory stream, after the
//! client preface, with time paused: it ends, and writes back only frames
//! a server may send, on the streams it may send them on.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| celer_server::fuzzing::http2_connection(data));
