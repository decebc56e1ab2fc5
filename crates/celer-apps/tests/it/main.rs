//! Integration tests of the bundled apps, against real peers.

mod feed_sources;
