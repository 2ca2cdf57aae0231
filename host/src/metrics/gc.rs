//! What this host's scheduled gc removed (`serve` runs it, one host of a journal at a
//! time): a counter of runs and one of records removed, by kind of record.

use std::sync::atomic::{AtomicU64, Ordering};

use super::text::Text;

/// The kinds of record gc removes (`justonce_gc_removed_total{record}`).
pub(crate) const GC_RECORDS: [&str; 6] = [
    "invocations",
    "effects",
    "aliases",
    "outbox",
    "mailbox",
    "early_cancels",
];

/// This host's scheduled gc runs and what they removed.
#[derive(Debug, Default)]
pub(crate) struct GcCounters {
    runs: AtomicU64,
    removed: [AtomicU64; GC_RECORDS.len()],
}

impl GcCounters {
    /// Counts one run that removed `removed` records of each kind of [`GC_RECORDS`].
    pub(crate) fn ran(&self, removed: [u64; GC_RECORDS.len()]) {
        self.runs.fetch_add(1, Ordering::Relaxed);
        for (count, n) in self.removed.iter().zip(removed) {
            count.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Writes both counters in the text format.
    pub(crate) fn render(&self, out: &mut Text) {
        out.family(
            "justonce_gc_runs_total",
            "counter",
            "Scheduled gc runs this host made (one host of a journal runs each; the others skip it).",
        );
        out.sample(
            "justonce_gc_runs_total",
            &[],
            self.runs.load(Ordering::Relaxed),
        );
        out.family(
            "justonce_gc_removed_total",
            "counter",
            "Records this host's scheduled gc removed, by kind of record.",
        );
        for (record, count) in GC_RECORDS.iter().zip(&self.removed) {
            out.sample(
                "justonce_gc_removed_total",
                &[("record", record)],
                count.load(Ordering::Relaxed),
            );
        }
    }
}
