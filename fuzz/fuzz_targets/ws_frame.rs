//! Fuzz target: the WebSocket frame decoder. The outcome is the same whole,
//! byte by byte and at every split; text is UTF-8, limits hold, control
//! payloads stay within 125 bytes, and messages re-frame to themselves.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| celer_server::fuzzing::ws_frame(data));
