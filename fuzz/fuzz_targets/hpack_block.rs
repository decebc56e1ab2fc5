//! Fuzz target: the HPACK decoder on a sequence of header blocks, and the
//! encoder on what it decoded. Decoded fields are ones HTTP/2 allows, the
//! list limit holds, and re-encoded fields decode to themselves with both
//! tables in step.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| celer_server::fuzzing::hpack_block(data));
