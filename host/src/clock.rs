//! Time as the host sees it: the system clock in production, a manual clock in tests.
//!
//! Retention and leases are measured on this clock, so tests can step over an expiry
//! boundary exactly instead of sleeping.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A source of wall-clock time in milliseconds since the Unix epoch.
pub trait Clock: Send + Sync + 'static {
    /// The current time, in milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;

    /// Waits `duration` (between retries). A manual clock moves forward instead, so
    /// tests see the wait without taking it.
    fn sleep(&self, duration: Duration) {
        std::thread::sleep(duration);
    }
}

/// The operating system's clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0)
    }
}

/// A clock that only moves when told to; clones share the same time.
#[derive(Debug, Clone)]
pub struct ManualClock {
    now: Arc<AtomicI64>,
}

impl ManualClock {
    /// A clock that reads `start_ms` until it is moved.
    pub fn new(start_ms: i64) -> Self {
        Self {
            now: Arc::new(AtomicI64::new(start_ms)),
        }
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let ms = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.now.fetch_add(ms, Ordering::SeqCst);
    }

    /// Sets the clock to `ms` milliseconds since the Unix epoch.
    pub fn set(&self, ms: i64) {
        self.now.store(ms, Ordering::SeqCst);
    }
}

impl Default for ManualClock {
    /// A manual clock that starts at 2026-01-01T00:00:00Z.
    fn default() -> Self {
        Self::new(1_767_225_600_000)
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.now.load(Ordering::SeqCst)
    }

    fn sleep(&self, duration: Duration) {
        self.advance(duration);
    }
}

/// Converts a duration to whole milliseconds, saturating.
pub(crate) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Milliseconds since the epoch as RFC 3339 in UTC, to the millisecond
/// (`2026-01-01T00:00:00.000Z`): how the journal shows times to people.
pub fn rfc3339(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let in_day = ms.rem_euclid(86_400_000);
    // Howard Hinnant's civil_from_days: the proleptic Gregorian date of a day count.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000
    )
}

/// Serializes milliseconds since the epoch as [`rfc3339`] (serde `serialize_with`).
pub(crate) fn serialize_rfc3339<S: serde::Serializer>(ms: &i64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&rfc3339(*ms))
}

/// [`serialize_rfc3339`] for a time that may be absent.
pub(crate) fn serialize_rfc3339_opt<S: serde::Serializer>(
    ms: &Option<i64>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match ms {
        Some(ms) => s.serialize_str(&rfc3339(*ms)),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_is_utc_to_the_millisecond() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_767_225_600_000), "2026-01-01T00:00:00.000Z");
        // A leap day, and a time of day with every field set.
        assert_eq!(rfc3339(1_709_210_096_789), "2024-02-29T12:34:56.789Z");
        assert_eq!(rfc3339(-1), "1969-12-31T23:59:59.999Z");
    }

    #[test]
    fn manual_clock_moves_only_when_told_and_clones_share_time() {
        let clock = ManualClock::new(1_000);
        let other = clock.clone();
        assert_eq!(clock.now_ms(), 1_000);
        other.advance(Duration::from_millis(250));
        assert_eq!(clock.now_ms(), 1_250);
        clock.set(5);
        assert_eq!(other.now_ms(), 5);
    }

    #[test]
    fn system_clock_is_after_2020() {
        assert!(SystemClock.now_ms() > 1_577_836_800_000);
    }
}
