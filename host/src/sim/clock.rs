//! The one clock every host of a history shares, with every value it ever had, so the
//! checker can tell whether a record could have expired between two answers.

use std::sync::Mutex;
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
}
