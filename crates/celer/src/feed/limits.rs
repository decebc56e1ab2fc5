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

/// How long an update waits at most for its SSE event to reach every
/// subscriber that was waiting for it before the version is compressed,
/// by default: 250 ms. Compressing takes the core from the fan-out when
/// they share one (tens of milliseconds for 50 KiB); the wait ends as
/// soon as the last subscriber took the event, and this bound keeps a
/// stalled subscriber from holding the version back from pollers and
/// WebSocket subscribers for longer (10,000 subscribers take about 100
/// ms on one core for a 1.4 KiB document, 200 ms for 50 KiB over TLS).
pub const SSE_FANOUT_WAIT: Duration = Duration::from_millis(250);

/// gzip level of the variant made once per version (flate2, 0-9).
pub const GZIP_LEVEL: u32 = 9;

/// Brotli quality of the variant made once per version (0-11).
pub const BROTLI_QUALITY: u32 = 9;

/// Brotli window of the variant, as a power of two (2^22 = 4 MiB, the
/// format's default: the compressor is dropped right after).
pub const BROTLI_LG_WINDOW: u32 = 22;

/// Zstandard level of the variant made once per version (1-22).
pub const ZSTD_LEVEL: i32 = 19;

/// Bytes of an SSE event beyond the document (the `id:` and `data:` field
/// names, the id, the blank line).
pub(crate) const EVENT_OVERHEAD_BYTES: usize = 128;
