//! Leases outlive the work: while a provider call is in flight, one background thread
//! per host renews the lease of every run that is waiting on a provider, so a
//! downstream slower than the lease does not let another host take the call over and
//! perform the effect a second time. A host that is paused (or dies) stops renewing,
//! and its lease runs out as it should; the journal then fences its late writes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::Duration;

use super::Shared;
use crate::journal::Lease;
use crate::keys::InvocationKey;

/// The runs waiting on a provider, and the thread that renews their leases.
pub(crate) struct Heartbeats {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    lease_ms: i64,
    /// How often (real time) the leases are renewed.
    every: Duration,
    next: AtomicU64,
    state: Mutex<State>,
    wake: Condvar,
}

#[derive(Default)]
struct State {
    beating: HashMap<u64, (InvocationKey, String)>,
    started: bool,
}

/// A run's registration; its lease is no longer renewed once this is dropped.
pub(crate) struct Beat<'a> {
    inner: &'a Inner,
    id: u64,
}

impl Drop for Beat<'_> {
    fn drop(&mut self) {
        self.inner.lock().beating.remove(&self.id);
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Heartbeats {
    /// Renews leases of `lease_ms` every `every` (real time); `None` never renews
    /// (a host that stands for a paused one, in tests).
    pub(crate) fn new(shared: Arc<Shared>, lease_ms: i64, every: Option<Duration>) -> Self {
        Self {
            inner: Arc::new(Inner {
                shared,
                lease_ms,
                every: every.unwrap_or(Duration::MAX),
                next: AtomicU64::new(0),
                state: Mutex::default(),
                wake: Condvar::new(),
            }),
        }
    }

    /// How often a lease of `lease_ms` is renewed: three times per lease, at least
    /// every second, at most every 10 ms.
    pub(crate) fn interval_for(lease_ms: i64) -> Duration {
        Duration::from_millis(u64::try_from(lease_ms / 3).unwrap_or(0))
            .clamp(Duration::from_millis(10), Duration::from_secs(1))
    }

    /// Keeps renewing `owner`'s lease of `invocation` until the returned beat drops.
    pub(crate) fn beat(&self, invocation: &InvocationKey, owner: &str) -> Beat<'_> {
        let id = self.inner.next.fetch_add(1, Ordering::Relaxed);
        let mut state = self.inner.lock();
        state
            .beating
            .insert(id, (invocation.clone(), owner.to_string()));
        if !state.started && self.inner.every != Duration::MAX {
            state.started = true;
            let weak = Arc::downgrade(&self.inner);
            let spawned = std::thread::Builder::new()
                .name("justonce-lease".into())
                .spawn(move || renew_loop(&weak));
            if let Err(e) = spawned {
                // Without renewals a slow provider may lose its lease; the journal
                // still fences it, so nothing is performed twice.
                tracing::warn!("cannot start the lease renewal thread: {e}");
                state.started = false;
            }
        }
        Beat {
            inner: &self.inner,
            id,
        }
    }
}

impl Drop for Heartbeats {
    fn drop(&mut self) {
        self.inner.wake.notify_all();
    }
}

fn renew_loop(weak: &Weak<Inner>) {
    loop {
        let Some(inner) = weak.upgrade() else { return };
        let due: Vec<(InvocationKey, String)> = {
            let state = inner.lock();
            let (state, _) = inner
                .wake
                .wait_timeout(state, inner.every)
                .unwrap_or_else(|p| p.into_inner());
            state.beating.values().cloned().collect()
        };
        // A host that handed its runs over renews none of them.
        let due = if inner.shared.runs.handed_over() {
            Vec::new()
        } else {
            due
        };
        for (invocation, owner) in due {
            let lease = Lease {
                owner: &owner,
                until: inner.shared.clock.now_ms().saturating_add(inner.lease_ms),
                ms: inner.lease_ms,
            };
            match inner.shared.journal.renew(&invocation, &lease) {
                Ok(true) => {}
                // Taken over: its writes are fenced; nothing to renew.
                Ok(false) => {}
                Err(e) => tracing::warn!(%invocation, "cannot renew the lease: {e}"),
            }
        }
        if Arc::strong_count(&inner) == 1 {
            return;
        }
    }
}
