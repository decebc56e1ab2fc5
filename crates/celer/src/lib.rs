//! Celer's web framework.

mod body;
pub mod router;

pub use body::Body;
pub use router::MethodSet;

/// A boxed error, the error type of [`Body`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
