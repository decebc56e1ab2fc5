//! Fuzz target: the FastCGI record decoder and responder session (properties in `celer_server::gateway::fuzz`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| celer_server::fuzzing::fastcgi_session(data));
