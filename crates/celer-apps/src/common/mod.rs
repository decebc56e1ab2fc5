//! What the sites share: path checks, content types, response shapes.

pub(crate) mod mime;
pub(crate) mod path;
pub(crate) mod respond;
