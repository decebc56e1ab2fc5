//! Fuzz target: the SCGI request header parser (properties in `celer_server::gateway::fuzz`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| celer_server::fuzzing::scgi_header(data));
