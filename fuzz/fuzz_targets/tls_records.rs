//! Fuzz target: the TLS record layer against rustls's client, both ways,
//! across suites, lengths and key updates: every byte arrives unchanged.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| celer_server::fuzzing::tls_records(data));
