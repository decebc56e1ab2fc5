//! Celer's bundled apps, each a `tower::Service` generic over the request
//! body (they never read it):
//!
//! - [`StaticSite`]: a directory served over GET and HEAD, with no way out
//!   of its root;
//! - [`Welcome`]: the embedded site `celer serve` shows without `--root`.
//!
//! Both answer with [`Body`], whose size is always exact, so the engine can
//! send `Content-Length`. They are plain services for now and move onto the
//! `celer` framework once its middleware (conditional requests, ranges)
//! lands.
//!
//! # Layout
//!
//! - `static_site`, `welcome`: the two services
//! - `body`: the response body (memory or a file streamed in chunks)
//! - `future`: the services' response future
//! - `common`: path checks (`path`), content types (`mime`) and the shapes
//!   of responses both sites send (`respond`)

pub mod body;
mod common;
pub mod future;
pub mod static_site;
pub mod welcome;

pub use body::Body;
pub use static_site::StaticSite;
pub use welcome::Welcome;
