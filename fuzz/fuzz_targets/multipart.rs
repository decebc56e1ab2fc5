//! Fuzz target: the `multipart/form-data` parser (celer's `multipart`
//! module). The parts, their bodies and the outcome are the same whole,
//! byte by byte and cut anywhere; limits hold and the parser always ends.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| celer::multipart::fuzzing::multipart(data));
