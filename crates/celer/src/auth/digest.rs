//! Digest (placeholder while building)
