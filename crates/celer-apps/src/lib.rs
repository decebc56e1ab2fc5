//! Celer's bundled apps, each a `tower::Service` generic over the request
//! body (they never read it):
//!
//! - [`StaticSite`]: a directory served over GET and HEAD, with no way out
//!   of its root;
//! - [`Welcome`]: the embedded site `celer serve` shows without `--root`.
//!
//! Both are thin users of `celer::files::Files` (a directory and an
//! embedded bundle) and answer with `celer::Body`, whose size is exact for
//! files, so the engine sends `Content-Length` and, for file regions on
//! plain TCP, uses `sendfile(2)`.
//!
//! # Layout
//!
//! - `static_site`, `welcome`: the two services
//! - `future`: the services' response future

pub mod future;
pub mod static_site;
pub mod welcome;

pub use celer::Body;
pub use static_site::StaticSite;
pub use welcome::Welcome;
