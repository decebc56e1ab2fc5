//! The feed's limits and defaults, each a named constant with its unit.

use std::time::Duration;

/// How often a polled source is read, by default: 1 s. It is also the
/// `max-age` of `Cache-Control` on the document, so a cache never serves a
/// copy older than one interval.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);

/// Largest document a feed accepts, by default: 1 MiB. Larger updates are
/// refused and the last good version stays.
pub const DEFAULT_MAX_DOCUMENT_BYTES: usize = 1024 * 1024;

/// Push subscribers (SSE streams plus WebSocket connections, each counted
/// against its own limit) a feed serves at once, by default. More are
/// answered `503 Service Unavailable` with `Retry-After`.
pub const DEFAULT_MAX_SUBSCRIBERS: usize = 50_000;

/// Versions an SSE subscriber may fall behind the newest before it is
/// dropped, by default. A subscriber that does not read is never buffered
/// for: it is a position in the hub's one shared ring.
pub const DEFAULT_SUBSCRIBER_LAG: usize = 4;

/// Bytes queued for one WebSocket subscriber at most, by default: 2
/// documents of the default size. Past it the connection is closed with
/// 1008 (policy) and its queue dropped.
pub const DEFAULT_WS_QUEUED_BYTES: usize = 2 * DEFAULT_MAX_DOCUMENT_BYTES;

/// Documents up to this size get the highest levels below (`GZIP_LEVEL`,
/// `BROTLI_QUALITY`, `ZSTD_LEVEL`): 64 KiB. Larger ones get faster
/// levels, so that a version's variants are made in a small part of the
/// refresh interval at any size a feed accepts (decision 162).
pub const SMALL_DOCUMENT_BYTES: usize = 64 * 1024;

/// gzip level of the variant made once per version of a document up to
/// [`DEFAULT_MAX_DOCUMENT_BYTES`] (flate2, 0-9).
pub const GZIP_LEVEL: u32 = 9;

/// Brotli quality of the variant made once per version of a document up
/// to [`DEFAULT_MAX_DOCUMENT_BYTES`] (0-11).
pub const BROTLI_QUALITY: u32 = 9;

/// Brotli window of the variant, as a power of two (2^22 = 4 MiB, the
/// format's default: the compressor is dropped right after).
pub const BROTLI_LG_WINDOW: u32 = 22;

/// Zstandard level of the variant made once per version of a document up
/// to [`SMALL_DOCUMENT_BYTES`] (1-22): ~40 ms for 60 KiB of JSON.
pub const ZSTD_LEVEL: i32 = 19;

/// Zstandard level for a document over [`SMALL_DOCUMENT_BYTES`] and up to
/// [`DEFAULT_MAX_DOCUMENT_BYTES`]: ~60 ms for 1 MiB of JSON, where level
/// 19 takes ~900 ms (as long as the default refresh interval) for 13%
/// fewer bytes.
pub const ZSTD_LEVEL_MEDIUM: i32 = 15;

/// gzip level for a document over [`DEFAULT_MAX_DOCUMENT_BYTES`] (a feed
/// whose limit was raised).
pub const GZIP_LEVEL_LARGE: u32 = 6;

/// Brotli quality for a document over [`DEFAULT_MAX_DOCUMENT_BYTES`].
pub const BROTLI_QUALITY_LARGE: u32 = 5;

/// Zstandard level for a document over [`DEFAULT_MAX_DOCUMENT_BYTES`]:
/// ~15 ms a MiB of JSON.
pub const ZSTD_LEVEL_LARGE: i32 = 9;

/// The levels (gzip, Brotli, Zstandard) of the variants of a document of
/// `len` bytes.
pub(crate) fn levels(len: usize) -> (u32, u32, i32) {
    if len <= SMALL_DOCUMENT_BYTES {
        (GZIP_LEVEL, BROTLI_QUALITY, ZSTD_LEVEL)
    } else if len <= DEFAULT_MAX_DOCUMENT_BYTES {
        (GZIP_LEVEL, BROTLI_QUALITY, ZSTD_LEVEL_MEDIUM)
    } else {
        (GZIP_LEVEL_LARGE, BROTLI_QUALITY_LARGE, ZSTD_LEVEL_LARGE)
    }
}

/// Bytes of an SSE event beyond the document (the `id:` and `data:` field
/// names, the id, the blank line).
pub(crate) const EVENT_OVERHEAD_BYTES: usize = 128;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_step_down_past_each_size() {
        let small = (GZIP_LEVEL, BROTLI_QUALITY, ZSTD_LEVEL);
        assert_eq!(levels(0), small);
        assert_eq!(levels(SMALL_DOCUMENT_BYTES), small);
        let medium = (GZIP_LEVEL, BROTLI_QUALITY, ZSTD_LEVEL_MEDIUM);
        assert_eq!(levels(SMALL_DOCUMENT_BYTES + 1), medium);
        assert_eq!(levels(DEFAULT_MAX_DOCUMENT_BYTES), medium);
        let large = (GZIP_LEVEL_LARGE, BROTLI_QUALITY_LARGE, ZSTD_LEVEL_LARGE);
        assert_eq!(levels(DEFAULT_MAX_DOCUMENT_BYTES + 1), large);
        assert_eq!(levels(usize::MAX), large);
    }
}
