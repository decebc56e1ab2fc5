//! HTTP-semantics middleware: content negotiation, compression and a
//! micro-cache, each usable at app, scope or route level.
//!
//! Each middleware is a value that implements [`Handler`](crate::Handler)
//! with the `(req, next)` shape, so it is registered like any middleware
//! function:
//!
//! ```
//! use std::time::Duration;
//! use celer::middleware::{cache::MicroCache, compression::Compression, negotiate::Negotiate};
//! use celer::Request;
//!
//! let mut app = celer::App::new();
//! app.middleware(Compression::new());
//! app.get("/feed", |_req: Request| async { celer::response::html("<p>feed</p>") })
//!     .middleware(Negotiate::new().media_types(["text/html"]))
//!     .middleware(MicroCache::new(Duration::from_secs(1)));
//! ```
//!
//! - [`negotiate`]: RFC 9110 §12 proactive negotiation over `Accept`,
//!   `Accept-Charset`, `Accept-Language` and `Accept-Encoding`; the choice is
//!   a request extension, an unacceptable request falls through to the next
//!   route or, when final, gets `406` listing what is available.
//! - [`compression`]: gzip, brotli and zstd chosen by `Accept-Encoding`,
//!   streaming frame by frame and flushing whenever the inner body waits.
//! - [`cache`]: a per-route micro-cache with request coalescing,
//!   stale-while-revalidate and an LRU bound in bytes.
//!
//! **Architecture Invariant:** nothing here names `celer_server`; the one
//! engine detail compression needs (dropping the zero-copy marker when the
//! body is replaced) goes through `crate::serve`.

pub mod cache;
pub mod compression;
pub mod negotiate;

use http::header::{HeaderMap, HeaderValue, VARY};

/// Adds `name` to the response's `Vary` unless it is listed already or
/// `Vary: *` is present (RFC 9110 §12.5.5).
pub(crate) fn append_vary(headers: &mut HeaderMap, name: &'static str) {
    for value in headers.get_all(VARY) {
        let Ok(text) = value.to_str() else { continue };
        for item in text.split(',') {
            let item = item.trim();
            if item == "*" || item.eq_ignore_ascii_case(name) {
                return;
            }
        }
    }
    headers.append(VARY, HeaderValue::from_static(name));
}
