//! Integration tests of the framework, through `tower::ServiceExt::oneshot`
//! and over real sockets (`wire`).

mod auth;
mod body_limit;
mod cache;
mod compile_fail;
mod compression;
mod cookies;
mod cors;
mod csrf;
mod dispatch;
mod extract;
mod files;
mod gateway;
mod logs;
mod middleware;
mod multipart;
mod negotiate;
mod offload;
mod panics;
mod ratelimit;
mod router_table;
mod routing;
mod scopes;
mod security;
mod serving;
mod sessions;
mod silent;
mod sse;
mod status_order;
mod support;
mod templates;
mod url_for;
mod wire;
mod ws;
mod ws_h2;
mod ws_tls;
