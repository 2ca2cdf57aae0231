//! What `serve` does for the journal besides calls, in one background loop: gc on a
//! schedule, the sweep of unknown outcomes a probe can decide ([`Host::sweep_if_due`],
//! one host of a journal per interval too), and this host's memory of how far the
//! journal reached (`marks`).
//!
//! Each host checks every few seconds whether gc is due ([`Host::gc_if_due`]); the
//! journal decides, on its own clock, and lets one host of the journal run it at a
//! time, so a fleet of hosts collects once per interval, not once per host.

pub mod marks;

use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::host::Host;
use crate::journal::ScheduledGc;

pub use marks::JournalMarks;

/// How often `serve` runs gc unless told (`gc_every_minutes`).
pub const DEFAULT_GC_EVERY: Duration = Duration::from_secs(3600);

/// The longest pause between two checks: what a host remembers of the journal's
/// mark is at most this old.
const MAX_CHECK_EVERY: Duration = Duration::from_secs(10);

/// The chores of `host`: gc every `gc_every` (none: never), and the journal's mark
/// kept in `marks`.
#[derive(Debug)]
pub struct Maintenance {
    host: Arc<Host>,
    gc_every: Option<Duration>,
    marks: Option<JournalMarks>,
    /// The sweep of unknown outcomes: how often, and at most how many probes each.
    sweep: Option<(Duration, u32)>,
}

/// How often `serve` sweeps unknown outcomes unless told (`[sweep] every_seconds`).
pub const DEFAULT_SWEEP_EVERY: Duration = Duration::from_secs(60);

/// At most this many probes a sweep unless told (`[sweep] max_probes`).
pub const DEFAULT_SWEEP_MAX: u32 = 20;

impl Maintenance {
    /// gc of `host`'s journal every `gc_every` (none: never), and its mark kept in
    /// `marks` (none: not kept).
    pub fn new(host: Arc<Host>, gc_every: Option<Duration>, marks: Option<JournalMarks>) -> Self {
        Self {
            host,
            gc_every: gc_every.filter(|every| !every.is_zero()),
            marks,
            sweep: None,
        }
    }

    /// Also sweeps unknown outcomes every `every` (zero: never), asking at most
    /// `max` probes a sweep.
    pub fn sweep(mut self, every: Duration, max: u32) -> Self {
        self.sweep = (!every.is_zero() && max > 0).then_some((every, max));
        self
    }

    /// How often the loop checks: a tenth of the gc interval, between a second and
    /// [`MAX_CHECK_EVERY`]. Asking is cheap, and the journal's clock decides, so a
    /// host that started late or was down does not push the fleet's gc back.
    pub fn check_every(&self) -> Duration {
        let sweep = self.sweep.map(|(every, _)| check_interval(Some(every)));
        check_interval(self.gc_every).min(sweep.unwrap_or(MAX_CHECK_EVERY))
    }

    /// Checks once: remembers the journal's mark, and runs gc when it is due and no
    /// other host is at it. A failure is logged (the next check tries again), never
    /// fatal to the host.
    pub fn tick(&self) -> Option<ScheduledGc> {
        if let Some(marks) = &self.marks {
            marks.record();
        }
        if let Some((every, max)) = self.sweep
            && let Err(e) = self.host.sweep_if_due(every, max)
        {
            tracing::warn!(
                "the sweep of unknown outcomes failed (the next check tries again): {e:#}"
            );
        }
        let every = self.gc_every?;
        match self.host.gc_if_due(every) {
            Ok(outcome) => Some(outcome),
            Err(e) => {
                tracing::warn!("scheduled gc failed (the next check tries again): {e:#}");
                None
            }
        }
    }

    /// Checks in the background every [`Maintenance::check_every`] until the handle
    /// returned is dropped.
    pub fn spawn(self) -> Result<MaintenanceLoop> {
        let (stop, stopped) = mpsc::channel::<()>();
        let check = self.check_every();
        match self.gc_every {
            Some(every) => tracing::info!(
                every_s = every.as_secs(),
                "gc runs on a schedule: one host of the journal at a time"
            ),
            None => tracing::info!("gc does not run on a schedule (justonce gc runs it)"),
        }
        if let Some((every, max)) = self.sweep {
            tracing::info!(
                every_s = every.as_secs(),
                max_probes = max,
                "unknown outcomes a probe can decide are swept on a schedule: one host of the journal at a time"
            );
        }
        let thread = std::thread::Builder::new()
            .name("justonce-maintenance".into())
            .spawn(move || {
                loop {
                    self.tick();
                    match stopped.recv_timeout(check) {
                        Err(RecvTimeoutError::Timeout) => {}
                        Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
                    }
                }
            })
            .map_err(|e| Error::Host(anyhow::anyhow!("cannot start the maintenance loop: {e}")))?;
        Ok(MaintenanceLoop {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

/// A tenth of `gc_every`, between a second and [`MAX_CHECK_EVERY`].
fn check_interval(gc_every: Option<Duration>) -> Duration {
    gc_every.map_or(MAX_CHECK_EVERY, |every| {
        (every / 10).clamp(Duration::from_secs(1), MAX_CHECK_EVERY)
    })
}

/// The handle of the background loop; dropping it ends the loop after the check
/// under way.
#[derive(Debug)]
pub struct MaintenanceLoop {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for MaintenanceLoop {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loop_checks_a_tenth_of_the_interval_between_a_second_and_ten() {
        let check = |s| check_interval(Some(Duration::from_secs(s)));
        assert_eq!(check(3600), Duration::from_secs(10));
        assert_eq!(check(50), Duration::from_secs(5));
        assert_eq!(check(2), Duration::from_secs(1));
        assert_eq!(check_interval(None), Duration::from_secs(10));
    }
}
