//! Logging to stderr, with warnings a client can trigger at will
//! rate-limited per kind.
//!
//! Some lines are one client's doing: `h2` warns once per connection that
//! resets streams faster than they are accepted (rapid reset), rustls once
//! per ClientHello that names an IP address as SNI. Unlimited, an attacker
//! sets the log's volume (4,325 lines in 15 s were measured). [`RateLimited`]
//! lets the first [`BURST`] lines of each kind (one source location) through
//! in every [`PERIOD`] and drops the rest; the next line of that kind that
//! is let through says how many were dropped:
//!
//! ```text
//! WARN h2::proto::streams::recv: recv_reset; ... reached limit (20) (37 similar lines suppressed in 10 s)
//! ```
//!
//! Only WARN and ERROR lines are limited: INFO and below are the operator's
//! choice (`--log-level`), and the server logs nothing per request at INFO.

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tracing::{Event, Level, Subscriber};
use tracing_log::NormalizeEvent;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// Lines of one kind let through in each [`PERIOD`].
pub(crate) const BURST: u32 = 5;

/// The window over which [`BURST`] lines of a kind are let through.
pub(crate) const PERIOD: Duration = Duration::from_secs(10);

/// Most kinds tracked at once; past it the table is cleared (each kind
/// then starts a new window), so it cannot grow without bound.
const MAX_KINDS: usize = 1024;

/// Where a kind's window stands.
#[derive(Debug, Clone, Copy)]
struct Window {
    started: Instant,
    shown: u32,
    suppressed: u64,
}

/// A `FormatEvent` that formats WARN and ERROR lines with `inner` at most
/// [`BURST`] times per [`PERIOD`] per source location, and writes nothing
/// for the rest (the fmt layer then writes nothing).
pub(crate) struct RateLimited<F> {
    inner: F,
    kinds: Mutex<HashMap<(String, u32), Window>>,
    now: fn() -> Instant,
}

impl<F> RateLimited<F> {
    /// Limits the lines `inner` formats.
    pub(crate) fn new(inner: F) -> RateLimited<F> {
        RateLimited::with_clock(inner, Instant::now)
    }

    fn with_clock(inner: F, now: fn() -> Instant) -> RateLimited<F> {
        RateLimited {
            inner,
            kinds: Mutex::new(HashMap::new()),
            now,
        }
    }

    /// `None` to drop the line; else how many of its kind were dropped in
    /// the window before this line's.
    fn admit(&self, kind: (String, u32)) -> Option<u64> {
        let now = (self.now)();
        let mut kinds = self.kinds.lock().unwrap_or_else(|e| e.into_inner());
        if kinds.len() >= MAX_KINDS && !kinds.contains_key(&kind) {
            kinds.clear();
        }
        let window = kinds.entry(kind).or_insert(Window {
            started: now,
            shown: 0,
            suppressed: 0,
        });
        let mut dropped = 0;
        if now.duration_since(window.started) >= PERIOD {
            dropped = window.suppressed;
            *window = Window {
                started: now,
                shown: 0,
                suppressed: 0,
            };
        }
        if window.shown < BURST {
            window.shown += 1;
            // A line that fills the burst reports nothing yet; the count
            // rides on the first line of a later window.
            Some(dropped)
        } else {
            window.suppressed += 1;
            None
        }
    }
}

impl<S, N, F> FormatEvent<S, N> for RateLimited<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        // Lines bridged from the `log` crate (rustls) carry their real
        // target and location in fields.
        let normalized = event.normalized_metadata();
        let meta = normalized.as_ref().unwrap_or_else(|| event.metadata());
        if *meta.level() > Level::WARN {
            return self.inner.format_event(ctx, writer, event);
        }
        let kind = (
            format!("{}:{}", meta.target(), meta.file().unwrap_or_default()),
            meta.line().unwrap_or_default(),
        );
        match self.admit(kind) {
            None => Ok(()),
            Some(0) => self.inner.format_event(ctx, writer, event),
            Some(dropped) => {
                let mut line = String::new();
                self.inner
                    .format_event(ctx, Writer::new(&mut line), event)?;
                let line = line.strip_suffix('\n').unwrap_or(&line);
                let secs = PERIOD.as_secs();
                writeln!(
                    writer,
                    "{line} ({dropped} similar lines suppressed in {secs} s)"
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::fmt::MakeWriter;

    use super::*;

    /// A writer the test reads back.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Captured {
        type Writer = Captured;

        fn make_writer(&'a self) -> Captured {
            self.clone()
        }
    }

    impl Captured {
        fn lines(&self) -> Vec<String> {
            let bytes = self.0.lock().unwrap().clone();
            String::from_utf8(bytes)
                .unwrap()
                .lines()
                .map(str::to_owned)
                .collect()
        }
    }

    /// Seconds added to a fixed start: the test's clock.
    static ELAPSED: AtomicU64 = AtomicU64::new(0);

    fn clock() -> Instant {
        static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        *START.get_or_init(Instant::now) + Duration::from_secs(ELAPSED.load(Ordering::SeqCst))
    }

    fn warn_from_a_client() {
        tracing::warn!(target: "h2::proto", "remotely-reset streams reached limit");
    }

    #[test]
    fn warnings_of_one_kind_are_limited_and_counted() {
        let out = Captured::default();
        let format =
            RateLimited::with_clock(tracing_subscriber::fmt::format().without_time(), clock);
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .event_format(format)
            .with_writer(out.clone())
            .finish();
        let _ = tracing_log::LogTracer::init();
        tracing::subscriber::with_default(subscriber, || {
            for _ in 0..100 {
                warn_from_a_client();
            }
            // Another kind, and INFO lines, are not held back.
            tracing::warn!(target: "celer", "another kind");
            for _ in 0..10 {
                tracing::info!(target: "celer", "info line");
            }
            // Lines bridged from the `log` crate (as rustls logs) are
            // limited per their own source location.
            for _ in 0..20 {
                tracing_log::log::warn!(target: "rustls::msgs", "Illegal SNI hostname");
            }
            ELAPSED.store(PERIOD.as_secs(), Ordering::SeqCst);
            warn_from_a_client();
            warn_from_a_client();
        });
        let lines = out.lines();
        let count = |needle: &str| lines.iter().filter(|l| l.contains(needle)).count();
        assert_eq!(count("reached limit"), BURST as usize + 2, "{lines:#?}");
        assert_eq!(count("another kind"), 1);
        assert_eq!(count("info line"), 10);
        assert_eq!(count("Illegal SNI"), BURST as usize, "{lines:#?}");
        let noted: Vec<_> = lines.iter().filter(|l| l.contains("suppressed")).collect();
        assert_eq!(noted.len(), 1, "{lines:#?}");
        assert!(
            noted[0].ends_with("reached limit (95 similar lines suppressed in 10 s)"),
            "{noted:?}"
        );
        assert!(noted[0].starts_with(" WARN h2::proto:"), "{noted:?}");
    }
}
