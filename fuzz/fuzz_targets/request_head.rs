//! Fuzz target: one HTTP/1.1 request head. The outcome is the same whole and
//! at every split, the limits hold, and every field value is valid.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| celer_server::fuzzing::request_head(data));
