//! gc on a schedule, one host at a time: the journal remembers when its last
//! scheduled gc ran and which host ran it (`journal_meta`, row `gc`), and a host runs
//! the next one only once that is `every` old on the journal's clock (PostgreSQL: the
//! database's). The row is locked for the run, so a second host that checks meanwhile
//! skips it rather than collecting beside the first.

use serde::Serialize;

use super::GcReport;

/// The name of the row that records the last scheduled gc.
pub(crate) const GC_ROW: &str = "gc";

/// What [`Journal::gc_if_due`](super::Journal::gc_if_due) did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "gc", rename_all = "snake_case")]
pub enum ScheduledGc {
    /// It ran, and removed this.
    Ran(GcReport),
    /// Not yet: the last scheduled gc ran at `last` (ms since the epoch, on the
    /// journal's clock), by `by`.
    NotDue {
        /// When it ran.
        last: i64,
        /// The host that ran it (its name).
        by: String,
    },
    /// Another host is collecting right now (PostgreSQL: it holds the row).
    Busy,
}

/// The name of the row that records the last sweep of unknown outcomes.
pub(crate) const SWEEP_ROW: &str = "sweep";

/// What [`Journal::take_turn`](super::Journal::take_turn) decided.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "turn", rename_all = "snake_case")]
pub enum Turn {
    /// This host's: it does the chore now (the journal recorded it, at `at`).
    Taken {
        /// When (ms since the epoch, on the journal's clock).
        at: i64,
    },
    /// Not yet: the last turn was taken at `last` by `by`.
    NotDue {
        /// When.
        last: i64,
        /// The host that took it (its name).
        by: String,
    },
}

/// Whether a gc that last ran at `last` (none: never) is due at `now`, every
/// `every_ms`.
pub(crate) fn due(last: Option<i64>, now: i64, every_ms: i64) -> bool {
    last.is_none_or(|last| now.saturating_sub(last) >= every_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gc_is_due_first_and_then_once_its_interval_passed() {
        assert!(due(None, 0, 3_600_000), "never ran");
        assert!(!due(Some(1_000), 3_600_999, 3_600_000));
        assert!(due(Some(1_000), 3_601_000, 3_600_000));
        assert!(
            !due(Some(5_000), 1_000, 3_600_000),
            "a clock stepped back runs nothing"
        );
    }
}
