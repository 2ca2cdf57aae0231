//! A latency histogram of atomics, with fixed buckets from 50 µs to 5 s.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::text::Text;

/// The upper bounds of the buckets, in seconds: a local fsync takes from tens of
/// microseconds (NVMe) to tens of milliseconds (a cloud disk); a commit to a remote
/// PostgreSQL, milliseconds.
const BOUNDS: [f64; 16] = [
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 5.0,
];

/// Observations counted per bucket (not cumulative; the last one is `+Inf`), and
/// their sum.
#[derive(Debug, Default)]
pub(crate) struct Histogram {
    buckets: [AtomicU64; BOUNDS.len() + 1],
    sum_nanos: AtomicU64,
}

impl Histogram {
    /// Counts one observation.
    pub(crate) fn observe(&self, took: Duration) {
        let seconds = took.as_secs_f64();
        let bucket = BOUNDS
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(BOUNDS.len());
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// How many observations it counted.
    #[cfg(test)]
    pub(crate) fn count(&self) -> u64 {
        self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).sum()
    }

    /// Writes `name_bucket` (cumulative), `name_sum` and `name_count`.
    pub(crate) fn render(&self, name: &str, out: &mut Text) {
        let bucket = format!("{name}_bucket");
        let mut cumulative = 0;
        for (i, count) in self.buckets.iter().enumerate() {
            cumulative += count.load(Ordering::Relaxed);
            let le = BOUNDS.get(i).map_or("+Inf".to_owned(), f64::to_string);
            out.sample(&bucket, &[("le", &le)], cumulative);
        }
        let sum = self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        out.sample(&format!("{name}_sum"), &[], sum);
        out.sample(&format!("{name}_count"), &[], cumulative);
    }
}
