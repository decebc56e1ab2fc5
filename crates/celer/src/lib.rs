//! Celer's web framework.

pub mod app;
mod body;
mod error;
pub mod extract;
pub mod handler;
mod request;
pub mod response;
pub mod router;

pub use app::App;
pub use body::Body;
pub use error::Error;
pub use handler::{Handler, Next};
pub use request::{LocalAddr, RemoteAddr, Request, RequestBuilder};
pub use response::{IntoResponse, Response};
pub use router::MethodSet;

/// A boxed error, the error type of [`Body`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
