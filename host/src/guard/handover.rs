//! Hand-over: a host that stops before its runs end (a drain past its timeout) gives
//! their calls to whichever host gets a retry first, at once, instead of leaving
//! them under leases that a retry must wait out.
//!
//! Every run registers here while it runs ([`Runs::enter`]). [`Runs::hand_over`]
//! fences them all in this process first (a run then writes nothing more to the
//! journal: each of its writes asks [`Runs::handed_over`] and gives way as after a
//! lost lease), then the guard ends each one's lease in the journal under an owner
//! marked handed over (`Journal::hand_over`), which fences the run in the journal
//! as well: its owner is no longer the lease's.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::keys::InvocationKey;

/// The runs of this host in flight, by registration, and whether the host handed
/// them over.
#[derive(Debug, Default)]
pub(crate) struct Runs {
    handed_over: AtomicBool,
    next: AtomicU64,
    running: Mutex<HashMap<u64, (InvocationKey, String)>>,
}

/// A run's registration; dropped when the run ends.
#[derive(Debug)]
pub(crate) struct Running<'a> {
    runs: &'a Runs,
    id: u64,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.runs.lock().remove(&self.id);
    }
}

impl Runs {
    fn lock(&self) -> MutexGuard<'_, HashMap<u64, (InvocationKey, String)>> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers the run `owner` of `key` until the returned value drops.
    pub(crate) fn enter(&self, key: &InvocationKey, owner: &str) -> Running<'_> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(id, (key.clone(), owner.to_owned()));
        Running { runs: self, id }
    }

    /// Whether the host handed its runs over: a run then writes nothing more.
    pub(crate) fn handed_over(&self) -> bool {
        self.handed_over.load(Ordering::SeqCst)
    }

    /// Fences every run in this process (see [`Runs::handed_over`]) and returns
    /// those in flight, each as its call's key and the run's lease owner.
    pub(crate) fn hand_over(&self) -> Vec<(InvocationKey, String)> {
        // Under the lock, so a run registering now is fenced before it is listed.
        let running = self.lock();
        self.handed_over.store(true, Ordering::SeqCst);
        running.values().cloned().collect()
    }
}

/// What [`Guard::hand_over`](super::Guard::hand_over) did with the runs in flight.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct HandOver {
    /// The calls whose lease now ends, handed over to the next host that gets a
    /// retry of them.
    pub handed_over: Vec<InvocationKey>,
    /// The calls it could not hand over, with why (the journal failed): their lease
    /// ends when it expires.
    pub failed: Vec<(InvocationKey, String)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hand_over_lists_the_runs_in_flight_and_fences_them() {
        let runs = Runs::default();
        let (a, b) = (
            InvocationKey::from_stored("a".into()),
            InvocationKey::from_stored("b".into()),
        );
        let first = runs.enter(&a, "h@1-x/0");
        drop(runs.enter(&b, "h@1-x/1"));
        assert!(!runs.handed_over());
        assert_eq!(runs.hand_over(), vec![(a, "h@1-x/0".to_owned())]);
        assert!(runs.handed_over());
        drop(first);
        assert!(runs.hand_over().is_empty());
    }
}
