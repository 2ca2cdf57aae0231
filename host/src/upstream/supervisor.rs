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

/// The supervisor's loop: start, serve until the connection ends, wait out the
/// backoff, start again; until the upstream is dropped.
fn supervise(weak: &Weak<Upstream>, shared: &Shared) {
    loop {
        let Some(upstream) = weak.upgrade() else {
            return;
        };
        let number = {
            let mut status = shared.lock();
            if status.gone {
                return;
            }
            let last_error = match &status.state {
                UpstreamState::Failing { error, .. } => Some(error.clone()),
                _ => None,
            };
            status.state = UpstreamState::Starting {
                restart: status.failures,
                last_error,
            };
            status.next_connection += 1;
            status.next_connection
        };
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
                    status.state = UpstreamState::Ready;
                    status.connection = Some((number, connection));
                    status.settled = true;
                }
                shared.notify();
                tracing::info!(target: "justonce::upstream", upstream = %upstream.name(), "ready: its tools are offered");
                upstream.tell_listeners();
                upstream.surface_moved();
                drop(upstream);
                // Until the connection ends (or the upstream is dropped).
                let mut status = shared.lock();
                while !status.ended && !status.gone {
                    status = shared.wait(status);
                }
                status.ended = false;
                let gone = status.gone;
                drop(status);
                if gone {
                    return;
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
                    status.failures += 1;
                    status.state = UpstreamState::Failing {
                        error,
                        retry_at: Instant::now() + backoff(status.failures),
                    };
                    status.settled = true;
                }
                shared.notify();
                // Its state changed for whoever shows it (its tools were not offered).
                upstream.tell_listeners();
                drop(upstream);
            }
        }
        // The backoff, unless the upstream is dropped meanwhile.
        let mut status = shared.lock();
        let retry_at = match &status.state {
            UpstreamState::Failing { retry_at, .. } => *retry_at,
            _ => Instant::now(),
        };
        loop {
            if status.gone {
                return;
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
