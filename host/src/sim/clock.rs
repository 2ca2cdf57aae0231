//! The one clock of a history, with every value it ever had, so the checker can tell
//! whether a record could have expired between two answers; and each host's own
//! clock, an offset from it.
//!
//! On SQLite the shared clock is the one machine's, which every host reads (and the
//! journal decides with it). On PostgreSQL it is the database server's, which
//! decides leases, expiry and gc; each host reads its own clock, which may run ahead
//! or behind and jump, and only labels what the host writes.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::clock::{Clock, millis};

/// A manual clock that logs its values: an index into the log marks a moment.
#[derive(Debug)]
pub(crate) struct SimClock {
    log: Mutex<Vec<i64>>,
}

impl SimClock {
    /// A clock that reads `start_ms` until it is moved.
    pub(crate) fn new(start_ms: i64) -> Self {
        Self {
            log: Mutex::new(vec![start_ms]),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<i64>> {
        self.log.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Moves the clock by `ms` (back when negative).
    pub(crate) fn shift(&self, ms: i64) {
        let mut log = self.lock();
        let now = *log.last().expect("the log starts with a value");
        log.push(now.saturating_add(ms));
    }

    /// The current moment: its index in the log.
    pub(crate) fn mark(&self) -> usize {
        self.lock().len() - 1
    }

    /// The clock's value at moment `index`.
    pub(crate) fn at(&self, index: usize) -> i64 {
        let log = self.lock();
        log[index.min(log.len() - 1)]
    }

    /// How far apart the clock's values were from moment `from` to moment `to`: the
    /// largest minus the smallest. A record saved in between can only have expired
    /// if this reaches the retention.
    pub(crate) fn spread(&self, from: usize, to: usize) -> i64 {
        let log = self.lock();
        let (lo, hi) = (from.min(to), from.max(to).min(log.len() - 1));
        let values = &log[lo..=hi];
        values.iter().max().unwrap_or(&0) - values.iter().min().unwrap_or(&0)
    }
}

impl Clock for SimClock {
    fn now_ms(&self) -> i64 {
        *self.lock().last().expect("the log starts with a value")
    }

    fn sleep(&self, duration: Duration) {
        self.shift(millis(duration));
    }
}

/// A host's clock: the shared clock plus an offset of its own, which may change (a
/// clock stepped by NTP, a VM resumed). Sleeping moves the shared clock (the time
/// that passes is the same everywhere).
#[derive(Debug)]
pub(crate) struct HostClock {
    shared: Arc<SimClock>,
    offset: AtomicI64,
}

impl HostClock {
    /// A clock `offset_ms` ahead of `shared` (behind when negative).
    pub(crate) fn new(shared: Arc<SimClock>, offset_ms: i64) -> Self {
        Self {
            shared,
            offset: AtomicI64::new(offset_ms),
        }
    }

    /// Steps this clock alone by `ms`.
    pub(crate) fn step(&self, ms: i64) {
        self.offset.fetch_add(ms, Ordering::SeqCst);
    }

    /// How far ahead of the shared clock it is.
    pub(crate) fn offset(&self) -> i64 {
        self.offset.load(Ordering::SeqCst)
    }
}

impl Clock for HostClock {
    fn now_ms(&self) -> i64 {
        self.shared.now_ms().saturating_add(self.offset())
    }

    fn sleep(&self, duration: Duration) {
        self.shared.sleep(duration);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spread_covers_every_value_between_two_moments() {
        let clock = SimClock::new(1_000);
        let start = clock.mark();
        clock.shift(500);
        clock.shift(-2_000);
        let middle = clock.mark();
        clock.shift(100);
        assert_eq!(clock.now_ms(), -400);
        assert_eq!(clock.spread(start, middle), 2_000);
        assert_eq!(clock.spread(middle, clock.mark()), 100);
        assert_eq!(clock.spread(start, start), 0);
    }

    #[test]
    fn a_host_clock_is_the_shared_one_plus_its_offset_and_sleeps_on_the_shared_one() {
        let shared = Arc::new(SimClock::new(1_000));
        let host = HostClock::new(Arc::clone(&shared), -300);
        assert_eq!(host.now_ms(), 700);
        host.step(500);
        assert_eq!(host.now_ms(), 1_200);
        host.sleep(Duration::from_millis(50));
        assert_eq!(shared.now_ms(), 1_050);
        assert_eq!(host.now_ms(), 1_250);
    }
}
