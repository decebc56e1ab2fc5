//! Compression.
