//! The cached `Date` header value (RFC 9110 §6.6.1), rebuilt at most once a
//! second per thread.

use std::cell::RefCell;
use std::time::{SystemTime, UNIX_EPOCH};

/// Length of an IMF-fixdate such as `Sun, 06 Nov 1994 08:49:37 GMT`.
pub(crate) const DATE_LEN: usize = 29;

struct Cached {
    second: u64,
    bytes: [u8; DATE_LEN],
}

thread_local! {
    static CACHE: RefCell<Cached> = const { RefCell::new(Cached { second: u64::MAX, bytes: [0; DATE_LEN] }) };
}

/// Calls `f` with the current date, formatted.
pub(crate) fn with_date<R>(f: impl FnOnce(&[u8; DATE_LEN]) -> R) -> R {
    let now = SystemTime::now();
    let second = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    CACHE.with(|cell| {
        let mut cached = cell.borrow_mut();
        if cached.second != second {
            let text = httpdate::fmt_http_date(now);
            if text.len() == DATE_LEN {
                cached.bytes.copy_from_slice(text.as_bytes());
            }
            cached.second = second;
        }
        f(&cached.bytes)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_parses_back_as_an_http_date() {
        let text = with_date(|d| String::from_utf8(d.to_vec()).unwrap());
        assert!(httpdate::parse_http_date(&text).is_ok(), "{text}");
        assert!(text.ends_with(" GMT"), "{text}");
    }
}
