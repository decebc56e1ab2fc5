//! The cached `Date` header line (RFC 9110 §6.6.1).
//!
//! A process-wide ticker thread stores the current second in an atomic; each
//! thread keeps the formatted `date: …\r\n` line and reformats it only when
//! that second changes. Writing the header costs an atomic load and a copy,
//! with no clock read per response.

use std::cell::RefCell;
use std::sync::Once;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::HeaderValue;

/// Length of an IMF-fixdate such as `Sun, 06 Nov 1994 08:49:37 GMT`.
pub(crate) const DATE_LEN: usize = 29;

/// `date: ` + the date + CRLF.
pub(crate) const LINE_LEN: usize = 6 + DATE_LEN + 2;

/// The current Unix second, kept fresh by the ticker.
static SECOND: AtomicU64 = AtomicU64::new(0);
static TICKER: Once = Once::new();

struct Cached {
    second: u64,
    line: [u8; LINE_LEN],
    /// The date alone as a header value (HTTP/2 sends fields, not lines).
    value: HeaderValue,
}

thread_local! {
    static CACHE: RefCell<Cached> = const {
        RefCell::new(Cached {
            second: u64::MAX,
            line: [0; LINE_LEN],
            value: HeaderValue::from_static(""),
        })
    };
}

fn unix_second() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The current second, starting the ticker on first use.
fn current_second() -> u64 {
    TICKER.call_once(|| {
        SECOND.store(unix_second(), Ordering::Relaxed);
        let spawned = std::thread::Builder::new()
            .name("celer-date".into())
            .spawn(|| {
                loop {
                    let now = SystemTime::now()
                        .duration_since(UNIX_EPOCH)
                        .unwrap_or_default();
                    SECOND.store(now.as_secs(), Ordering::Relaxed);
                    // Wake just after the next second starts.
                    let to_next =
                        Duration::from_nanos(1_000_000_000 - u64::from(now.subsec_nanos()));
                    std::thread::sleep(to_next + Duration::from_millis(1));
                }
            });
        if spawned.is_err() {
            // No ticker: fall back to reading the clock (see below).
            SECOND.store(0, Ordering::Relaxed);
        }
    });
    match SECOND.load(Ordering::Relaxed) {
        0 => unix_second(),
        s => s,
    }
}

/// Calls `f` with the cache brought up to the current second.
fn with_cached<R>(f: impl FnOnce(&Cached) -> R) -> R {
    let second = current_second();
    CACHE.with(|cell| {
        let mut cached = cell.borrow_mut();
        if cached.second != second {
            let text = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(second));
            if text.len() == DATE_LEN {
                cached.line[..6].copy_from_slice(b"date: ");
                cached.line[6..6 + DATE_LEN].copy_from_slice(text.as_bytes());
                cached.line[6 + DATE_LEN..].copy_from_slice(b"\r\n");
                if let Ok(mut value) = HeaderValue::from_str(&text) {
                    // Over HTTP/2 this makes `h2` send the date as a literal
                    // that is never indexed, instead of adding a new entry
                    // to every connection's HPACK table each second: each
                    // answer's lookup walked the connection's stale dates
                    // (the table chains values of one name oldest first),
                    // and they pushed the fields that do repeat out of the
                    // table (decision 169).
                    value.set_sensitive(true);
                    cached.value = value;
                }
            }
            cached.second = second;
        }
        f(&cached)
    })
}

/// Calls `f` with the whole `date: …\r\n` line for the current second.
pub(crate) fn with_date_line<R>(f: impl FnOnce(&[u8; LINE_LEN]) -> R) -> R {
    with_cached(|cached| f(&cached.line))
}

/// The current second's date as a header value (a reference-counted copy),
/// marked sensitive so HPACK never indexes it.
pub(crate) fn date_value() -> HeaderValue {
    with_cached(|cached| cached.value.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_holds_an_http_date_for_now() {
        let line = with_date_line(|d| String::from_utf8(d.to_vec()).unwrap());
        let date = line
            .strip_prefix("date: ")
            .unwrap()
            .strip_suffix("\r\n")
            .unwrap();
        let parsed = httpdate::parse_http_date(date).unwrap();
        let skew = SystemTime::now().duration_since(parsed).unwrap_or_default();
        assert!(skew < Duration::from_secs(3), "{line:?}");
    }
}
