//! Fuzz target: a request body, Content-Length or chunked. The outcome is
//! the same whole and in pieces, no more comes out than went in, and the
//! limits hold.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| celer_server::fuzzing::request_body(data));
