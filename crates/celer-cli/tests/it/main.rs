//! End-to-end tests of the `celer` binary, driven by real clients (curl and
//! Python's `http.client`) over loopback and UNIX sockets, plain and TLS.
//!
//! Every wait is bounded by a deadline; no test asserts on a duration.

mod bench_ws;
mod cli;
mod config;
mod feed;
mod files_nginx;
mod files_wire;
mod gateway_cgi;
mod hardening;
mod http2;
mod inherited;
mod openapi;
mod serve_static;
mod shutdown;
mod sse_memory;
mod support;
mod tasks;
mod tasks_keys;
mod tasks_results;
mod tidy;
mod tls;
mod welcome;
