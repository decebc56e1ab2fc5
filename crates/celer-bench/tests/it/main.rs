//! Integration tests: `celer bench` against real servers started in the test
//! (HTTP servers in `support`, a Python WebSocket peer in `ws_peer.py`).

mod errors;
mod load;
mod modes;
mod sse;
mod sse_gzip;
mod support;
mod ws;
