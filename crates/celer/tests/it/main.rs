//! Integration tests of the framework, through `tower::ServiceExt::oneshot`
//! and over real sockets (`wire`).

mod cache;
mod compression;
mod dispatch;
mod extract;
mod files;
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
