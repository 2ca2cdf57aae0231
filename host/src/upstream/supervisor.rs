//! Each upstream's supervisor: a thread of its own that starts it (`initialize`,
//! `tools/list`), keeps its [`UpstreamState`], notices when its connection ends and
//! starts it again after a backoff that doubles with each failure in a row. Nothing
//! on a request's path waits on it: a lookup reads the state, a call takes the
//! connection it finds or is refused at once.
//!
//! The thread holds the upstream only weakly, and the parts it shares with it
//! ([`Shared`]) strongly: when the host drops the upstream, its connection is
//! dropped with it (the process stopped) and the thread ends.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use super::Upstream;
use super::client::ClientError;
use super::connection::Connection;
use super::log_field::field;
use super::state::UpstreamState;

/// How long a failed upstream is left before it is started again, first; each
/// failure in a row doubles it, up to [`MAX_RESTART_BACKOFF`].
const FIRST_RESTART_BACKOFF: Duration = Duration::from_millis(100);
/// The longest wait before an upstream that keeps failing is started again.
const MAX_RESTART_BACKOFF: Duration = Duration::from_secs(5);

/// The wait before a start that follows `failures` failures in a row.
pub(super) fn backoff(failures: u32) -> Duration {
    match failures {
        0 => Duration::ZERO,
        n => FIRST_RESTART_BACKOFF
            .saturating_mul(1 << (n - 1).min(16))
            .min(MAX_RESTART_BACKOFF),
    }
}

/// What the supervisor, the calls and the connection's reader share.
#[derive(Debug)]
pub(super) struct Shared {
    status: Mutex<Status>,
    changed: Condvar,
}

/// An upstream's state and its live connection.
pub(super) struct Status {
    /// Where it stands.
    pub(super) state: UpstreamState,
    /// The connection while it is ready, and its number.
    pub(super) connection: Option<(u64, Arc<Connection>)>,
    /// Numbers every connection made; the next one's.
    pub(super) next_connection: u64,
    /// Failures in a row (starts that did not answer, connections that ended).
    pub(super) failures: u32,
    /// Set once its first start ended, ready or not.
    pub(super) settled: bool,
    /// Starts begun since the host started (the first one included).
    pub(super) starts: u64,
    /// How long its last start that answered took, from its spawn or connection to
    /// its tools listed.
    pub(super) ready_in: Option<Duration>,
    /// Set when an operator asked for a start now: the supervisor lets the
    /// connection go (if any) and skips the backoff.
    restart_now: bool,
    /// Set when a ready connection ended: the supervisor tells the listeners.
    ended: bool,
    /// Set when the upstream was dropped: the supervisor ends.
    gone: bool,
}

impl std::fmt::Debug for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Status")
            .field("state", &self.state)
            .field("failures", &self.failures)
            .finish()
    }
}

impl Default for Shared {
    fn default() -> Self {
        Self {
            status: Mutex::new(Status {
                state: UpstreamState::Starting {
                    restart: 0,
                    last_error: None,
                },
                connection: None,
                next_connection: 0,
                failures: 0,
                settled: false,
                starts: 0,
                ready_in: None,
                restart_now: false,
                ended: false,
                gone: false,
            }),
            changed: Condvar::new(),
        }
    }
}

impl Shared {
    /// The status, locked.
    pub(super) fn lock(&self) -> MutexGuard<'_, Status> {
        self.status.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wakes everyone waiting on a change.
    pub(super) fn notify(&self) {
        self.changed.notify_all();
    }

    /// Waits for a change.
    pub(super) fn wait<'a>(&self, status: MutexGuard<'a, Status>) -> MutexGuard<'a, Status> {
        self.changed.wait(status).unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for a change, at most until `deadline`; whether it is not yet passed.
    pub(super) fn wait_until<'a>(
        &self,
        status: MutexGuard<'a, Status>,
        deadline: Instant,
    ) -> (MutexGuard<'a, Status>, bool) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return (status, false);
        }
        let (status, _) = self
            .changed
            .wait_timeout(status, left)
            .unwrap_or_else(|p| p.into_inner());
        (status, Instant::now() < deadline)
    }

    /// The connection numbered `number` ended (its process exited, its session
    /// ended) for `why`: it is let go, the upstream is failing until its supervisor
    /// starts it again. Nothing if another connection has taken its place.
    pub(super) fn ended(&self, number: u64, why: &str) {
        let dropped = {
            let mut status = self.lock();
            if status.connection.as_ref().map(|(n, _)| *n) != Some(number) {
                return;
            }
            status.failures += 1;
            status.state = UpstreamState::Failing {
                error: why.to_owned(),
                retry_at: Instant::now() + backoff(status.failures),
            };
            status.ended = true;
            status.connection.take()
        };
        self.notify();
        // Stopping a process waits for it: not under the lock.
        drop(dropped);
    }

    /// An operator asked for it to be started again now: its connection (if any) is
    /// let go and its supervisor starts it without waiting out a backoff. Whether it
    /// was asked: a disabled upstream is not started (it is enabled instead).
    pub(super) fn restart(&self) -> bool {
        let dropped = {
            let mut status = self.lock();
            if matches!(status.state, UpstreamState::Disabled { .. }) {
                return false;
            }
            let last_error = status.state.last_error().map(str::to_owned);
            status.state = UpstreamState::Starting {
                restart: status.failures,
                last_error,
            };
            status.restart_now = true;
            status.connection.take()
        };
        self.notify();
        drop(dropped);
        true
    }

    /// An operator disabled it (`by`, at `at`): its connection is let go (the
    /// process stopped) and it is not started until [`Shared::enable`]; one never
    /// started is settled (nothing waits for its first start). Whether it changed
    /// (it was not disabled so already).
    pub(super) fn disable(&self, by: &str, at: i64) -> bool {
        let state = UpstreamState::Disabled {
            by: by.to_owned(),
            at,
        };
        let dropped = {
            let mut status = self.lock();
            if status.state == state {
                return false;
            }
            status.state = state;
            status.restart_now = false;
            status.settled = true;
            status.connection.take()
        };
        self.notify();
        drop(dropped);
        true
    }

    /// An operator enabled it again: it is started now, its failures forgotten.
    /// Whether it was disabled.
    pub(super) fn enable(&self) -> bool {
        {
            let mut status = self.lock();
            if !matches!(status.state, UpstreamState::Disabled { .. }) {
                return false;
            }
            status.state = UpstreamState::Starting {
                restart: 0,
                last_error: None,
            };
            status.failures = 0;
            status.restart_now = true;
        }
        self.notify();
        true
    }

    /// The upstream was dropped: its connection goes, its supervisor ends.
    pub(super) fn gone(&self) {
        let dropped = {
            let mut status = self.lock();
            status.gone = true;
            status.connection.take()
        };
        self.notify();
        drop(dropped);
    }
}

/// Starts `upstream`'s supervisor.
pub(super) fn spawn(upstream: &Arc<Upstream>) {
    let weak = Arc::downgrade(upstream);
    let shared = Arc::clone(&upstream.shared);
    let name = upstream.name().to_owned();
    let spawned = std::thread::Builder::new()
        .name(format!("upstream-{name}"))
        .spawn(move || supervise(&weak, &shared));
    if let Err(e) = spawned {
        tracing::error!(target: "justonce::upstream", upstream = %name, "cannot start its supervisor: {e}");
    }
}

/// Whether it is disabled.
fn disabled(status: &Status) -> bool {
    matches!(status.state, UpstreamState::Disabled { .. })
}

/// The supervisor's loop: start, serve until the connection ends, wait out the
/// backoff, start again; until the upstream is dropped. While an operator has it
/// disabled it waits, holding nothing; an operator's restart cuts the serving or
/// the backoff short.
fn supervise(weak: &Weak<Upstream>, shared: &Shared) {
    loop {
        {
            let mut status = shared.lock();
            while disabled(&status) && !status.gone {
                status = shared.wait(status);
            }
            if status.gone {
                return;
            }
        }
        let Some(upstream) = weak.upgrade() else {
            return;
        };
        let number = {
            let mut status = shared.lock();
            if status.gone {
                return;
            }
            if disabled(&status) {
                continue;
            }
            let last_error = status.state.last_error().map(str::to_owned);
            status.state = UpstreamState::Starting {
                restart: status.failures,
                last_error,
            };
            status.restart_now = false;
            status.starts += 1;
            status.next_connection += 1;
            status.next_connection
        };
        let began = Instant::now();
        shared.notify();
        if number > 1 {
            tracing::warn!(target: "justonce::upstream", upstream = %upstream.name(), failures = shared.lock().failures, "starting the upstream again");
        }
        match upstream.start(number, weak) {
            Ok(connection) => {
                {
                    let mut status = shared.lock();
                    if status.gone {
                        return;
                    }
                    status.settled = true;
                    if disabled(&status) {
                        // Disabled while it started: let go, not offered.
                        drop(status);
                        drop(connection);
                        continue;
                    }
                    status.state = UpstreamState::Ready;
                    status.connection = Some((number, connection));
                    status.ready_in = Some(began.elapsed());
                    status.restart_now = false;
                }
                shared.notify();
                tracing::info!(target: "justonce::upstream", upstream = %upstream.name(), "ready: its tools are offered");
                upstream.tell_listeners();
                upstream.surface_moved();
                drop(upstream);
                // Until the connection ends (or the upstream is dropped).
                let mut status = shared.lock();
                while !status.ended && !status.gone && !status.restart_now && !disabled(&status) {
                    status = shared.wait(status);
                }
                let ended = std::mem::take(&mut status.ended);
                let gone = status.gone;
                let operated = status.restart_now || disabled(&status);
                drop(status);
                if gone {
                    return;
                }
                if operated && !ended {
                    // An operator's restart or disable: told by the operator's action.
                    continue;
                }
                if let Some(upstream) = weak.upgrade() {
                    tracing::warn!(target: "justonce::upstream", upstream = %upstream.name(), "its connection ended; its tools are left out until it is started again");
                    upstream.tell_listeners();
                    upstream.surface_moved();
                }
            }
            Err(e) => {
                let error = match e {
                    ClientError::NotSent(reason)
                    | ClientError::Down(reason)
                    | ClientError::Misconfigured(reason) => reason,
                    other => other.to_string(),
                };
                tracing::warn!(target: "justonce::upstream", upstream = %upstream.name(), "did not start: {}", field(&error));
                {
                    let mut status = shared.lock();
                    status.settled = true;
                    if !disabled(&status) {
                        status.failures += 1;
                        status.state = UpstreamState::Failing {
                            error,
                            retry_at: Instant::now() + backoff(status.failures),
                        };
                    }
                }
                shared.notify();
                // Its state changed for whoever shows it (its tools were not offered).
                upstream.tell_listeners();
                drop(upstream);
            }
        }
        // The backoff, unless the upstream is dropped, disabled or restarted by an
        // operator meanwhile.
        let mut status = shared.lock();
        let retry_at = match &status.state {
            UpstreamState::Failing { retry_at, .. } => *retry_at,
            _ => Instant::now(),
        };
        loop {
            if status.gone {
                return;
            }
            if status.restart_now || disabled(&status) {
                break;
            }
            let (next, waiting) = shared.wait_until(status, retry_at);
            status = next;
            if !waiting {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_from_the_first_up_to_the_cap() {
        assert_eq!(backoff(0), Duration::ZERO);
        assert_eq!(backoff(1), FIRST_RESTART_BACKOFF);
        assert_eq!(backoff(2), FIRST_RESTART_BACKOFF * 2);
        assert_eq!(backoff(40), MAX_RESTART_BACKOFF);
    }
}
