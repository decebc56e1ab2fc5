//! Integration tests of the framework, through `tower::ServiceExt::oneshot`
//! and over real sockets (`wire`).

mod cache;
mod compression;
mod extract;
mod files;
mod gateway;
mod middleware;
mod negotiate;
mod offload;
mod router_table;
mod routing;
mod sse;
mod support;
mod url_for;
mod wire;
mod ws;
