//! Cache.
