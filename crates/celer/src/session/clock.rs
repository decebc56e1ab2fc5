//! The clocks sessions read: coarse ones where the system has them, as a
//! session's times are checked against timeouts of minutes and hours.
//!
//! Linux's `CLOCK_REALTIME_COARSE` and `CLOCK_MONOTONIC_COARSE` are read
//! from the vDSO without the fine clocks' counter arithmetic and are as
//! recent as the last timer tick (1–10 ms, `CONFIG_HZ`); a session may
//! thus live a few milliseconds longer or shorter than its timeout.
#![allow(unsafe_code)]

use std::sync::OnceLock;
use std::time::{Instant, SystemTime};

/// Milliseconds since the Unix epoch (coarse where possible).
pub(crate) fn now_ms() -> u64 {
    #[cfg(target_os = "linux")]
    if let Some(ms) = coarse_ms(libc::CLOCK_REALTIME_COARSE) {
        return ms;
    }
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Milliseconds on a monotonic clock (unaffected by changes of the wall
/// clock), for a [`MemoryStore`]'s expiry: Linux's
/// `CLOCK_MONOTONIC_COARSE` where there is one (read from the vDSO
/// without the fine clock's counter arithmetic; as recent as the last
/// timer tick, a few milliseconds, which cannot matter against a ttl of
/// minutes), else [`Instant`] from a start of the process.
pub(crate) fn monotonic_ms() -> u64 {
    #[cfg(target_os = "linux")]
    if let Some(ms) = coarse_ms(libc::CLOCK_MONOTONIC_COARSE) {
        return ms;
    }
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// `clock`'s time in milliseconds, `None` when the system cannot read it.
#[cfg(target_os = "linux")]
#[inline]
pub(crate) fn coarse_ms(clock: libc::clockid_t) -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable `timespec` for the call's
    // duration; `clock_gettime` writes only it.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return None;
    }
    let secs = u64::try_from(ts.tv_sec).ok()?;
    Some(secs * 1000 + ts.tv_nsec as u64 / 1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The coarse clocks agree with the fine ones to within a tick, and
    /// the monotonic one never goes back.
    #[test]
    fn coarse_clocks_follow_the_fine_ones() {
        let fine = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let coarse = now_ms();
        assert!(coarse.abs_diff(fine) < 1_000, "{coarse} {fine}");
        let mut last = monotonic_ms();
        for _ in 0..1000 {
            let now = monotonic_ms();
            assert!(now >= last);
            last = now;
        }
    }
}
