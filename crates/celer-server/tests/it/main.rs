//! Wire tests for the engine: real loopback sockets, exact bytes.

mod clients;
mod errors;
mod files;
mod gateway;
mod http2;
mod limits;
mod proto;
mod server;
mod shutdown;
mod support;
mod tls;
mod wire;
mod ws;
