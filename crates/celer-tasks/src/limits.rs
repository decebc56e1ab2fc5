//! Every bound of the task API: what a client can make the server hold,
//! and the clocks of the runner. Each constant states its unit.

use std::time::Duration;

/// Largest `POST /tasks` body, in bytes: 1 MiB. Over it: `413`.
pub const MAX_SUBMIT_BYTES: usize = 1024 * 1024;

/// Largest result a kind may store, in bytes of JSON: 16 MiB. A larger one
/// fails the task (`failed`, not retried).
pub const MAX_RESULT_BYTES: usize = 16 * 1024 * 1024;

/// Most tasks in the `queued` state at once: 100,000. A submit over it is
/// answered `503` with `Retry-After`.
pub const MAX_QUEUED: u64 = 100_000;

/// Longest kind name, in bytes: 64.
pub const MAX_KIND_BYTES: usize = 64;

/// Longest `Idempotency-Key`, in bytes: 255. Longer: `400`.
pub const MAX_IDEMPOTENCY_KEY_BYTES: usize = 255;

/// How long an `Idempotency-Key` is remembered after its first use: 24 hours.
pub const IDEMPOTENCY_TTL: Duration = Duration::from_secs(24 * 3600);

/// How long finished tasks and their results are kept by default: 7 days.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// How long a claim on a running task lasts without renewal: 30 seconds.
/// A process that dies holding it loses the task after this time.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// A task's run time limit when the submit names none: 5 minutes.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// Largest `timeout_ms` a submit may ask for: 24 hours.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// Attempts when the submit names none: 3.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;

/// Largest `max_attempts` a submit may ask for: 100.
pub const MAX_ATTEMPTS: u32 = 100;

/// First retry delay; doubled per attempt, with jitter: 1 second.
pub const BACKOFF_BASE: Duration = Duration::from_secs(1);

/// Longest retry delay: 1 hour.
pub const BACKOFF_MAX: Duration = Duration::from_secs(3600);

/// How long a running task asked to stop may take before its worker is
/// freed anyway: 5 seconds.
pub const CANCEL_GRACE: Duration = Duration::from_secs(5);

/// Tasks running at once in one process by default: 64.
pub const DEFAULT_CONCURRENCY: usize = 64;

/// Largest page of `GET /tasks`: 1000 tasks; the default is 100.
pub const MAX_PAGE: usize = 1000;

/// Page size of `GET /tasks` without `limit`: 100.
pub const DEFAULT_PAGE: usize = 100;

/// Store operations waiting for the store's thread at once: 4096. Over it
/// requests are answered `503` with `Retry-After`.
pub const STORE_QUEUE: usize = 4096;

/// How often the runner looks for due tasks when nothing wakes it: 100 ms.
pub const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Finished tasks the wait and run time percentiles of `GET /tasks/stats`
/// are computed over (the most recent): 10,000.
pub const STATS_WINDOW: usize = 10_000;

/// Largest `delay_ms` of the `echo` kind: 1 hour.
pub const MAX_ECHO_DELAY: Duration = Duration::from_secs(3600);

/// `GET /tasks/{id}/events` streams open at once: 1000. Over it: `503`
/// with `Retry-After`.
pub const MAX_EVENT_STREAMS: usize = 1000;

/// How often a running task's lease is renewed: a third of the lease.
pub const RENEW_FRACTION: u32 = 3;

/// Bytes of a result read from the store and sent at a time: 64 KiB.
pub const RESULT_CHUNK_BYTES: usize = 64 * 1024;

/// Slices of a result read ahead of a client that reads slowly: 4. A
/// result being sent holds at most this many
/// [`RESULT_CHUNK_BYTES`] slices (and one being written), whatever its size.
pub const RESULT_CHUNKS_BUFFERED: usize = 4;

/// Task changes a store-wide event stream (`GET /tasks/events`) may fall
/// behind before it is told to reload (an `event: resync`): 1024. Streams
/// of one task and of the store share
/// [`MAX_EVENT_STREAMS`].
pub const EVENT_BACKLOG: usize = 1024;
