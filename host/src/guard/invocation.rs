//! Coalescing of parallel duplicates. In this process, one call of a key runs at a
//! time: a duplicate waits here until the running call of its key finishes. A run in
//! another process cannot wake it, so a duplicate that found the key running in the
//! journal polls instead, backing off ([`WaitBackoff`]): a slow call retried by many
//! agents must not load the journal most exactly when it is busiest.

use std::collections::{HashSet, VecDeque};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crate::keys::InvocationKey;

#[derive(Debug, Default)]
struct State {
    /// Bumped whenever a call finishes.
    generation: u64,
    /// The keys a call of this process is working on now.
    running: HashSet<InvocationKey>,
    /// The keys of the latest finishes, oldest first (at most [`RECENT_FINISHES`]):
    /// a duplicate waiting on the journal wakes for its own key, not for every call
    /// this process finishes.
    recent: VecDeque<InvocationKey>,
}

/// How many finishes [`State::recent`] remembers; a waiter that missed more than
/// these looks at the journal again (it cannot tell whether its key was among them).
const RECENT_FINISHES: usize = 64;

/// The longest a duplicate waiting on a run in another process sleeps between two
/// looks at the journal: a bound on how late it learns of the outcome, and on its
/// cost (about one statement a second once backed off).
pub(crate) const MAX_WAIT_POLL: Duration = Duration::from_secs(1);

/// The intervals between a waiting duplicate's looks at the journal: `first`, then
/// doubling up to [`MAX_WAIT_POLL`]. A wait of 30 s costs about 35 looks instead of
/// 1 500 at a fixed 20 ms.
#[derive(Debug, Clone)]
pub(crate) struct WaitBackoff {
    next: Duration,
}

impl WaitBackoff {
    /// Starts at `first` (the policy's poll).
    pub(crate) fn new(first: Duration) -> Self {
        Self { next: first }
    }

    /// The next interval.
    pub(crate) fn next(&mut self) -> Duration {
        let now = self.next;
        self.next = (self.next * 2).min(MAX_WAIT_POLL.max(now));
        now
    }
}

/// Which keys run in this process, and wakes waiting duplicates when one finishes.
#[derive(Debug, Default)]
pub(crate) struct InvocationGuard {
    state: Mutex<State>,
    finished: Condvar,
}

/// A key this process's call holds; released (and its waiters woken) on drop.
#[derive(Debug)]
pub(crate) struct Entered<'a> {
    guard: &'a InvocationGuard,
    key: InvocationKey,
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        self.guard.finished(&self.key);
    }
}

impl InvocationGuard {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes `key` for the calling thread; if another call of this process holds it,
    /// waits (at most `poll`) for some call to finish and returns `None`.
    pub(crate) fn enter_or_wait(&self, key: &InvocationKey, poll: Duration) -> Option<Entered<'_>> {
        let mut state = self.lock();
        if state.running.insert(key.clone()) {
            return Some(Entered {
                guard: self,
                key: key.clone(),
            });
        }
        let seen = state.generation;
        let _ = self
            .finished
            .wait_timeout_while(state, poll, |s| s.generation == seen)
            .unwrap_or_else(|p| p.into_inner());
        None
    }

    /// Releases `key` and tells every waiter it finished, so they look again: under
    /// one lock, the key moving from the running set to the recent finishes.
    fn finished(&self, key: &InvocationKey) {
        let mut state = self.lock();
        let key = state.running.take(key).unwrap_or_else(|| key.clone());
        state.generation = state.generation.wrapping_add(1);
        if state.recent.len() == RECENT_FINISHES {
            state.recent.pop_front();
        }
        state.recent.push_back(key);
        drop(state);
        self.finished.notify_all();
    }

    /// Waits, at most `poll`, for a call of `key` in this process to finish (one
    /// that entered after this caller looked at the journal): finishes of other keys
    /// do not wake it.
    pub(crate) fn wait(&self, key: &InvocationKey, poll: Duration) {
        let state = self.lock();
        let seen = state.generation;
        let _ = self
            .finished
            .wait_timeout_while(state, poll, |s| !s.key_finished_since(key, seen))
            .unwrap_or_else(|p| p.into_inner());
    }
}

impl State {
    /// Whether `key` finished after generation `seen`, or more finishes came than
    /// are remembered (it may have been among them).
    fn key_finished_since(&self, key: &InvocationKey, seen: u64) -> bool {
        let since = self.generation.wrapping_sub(seen);
        if since == 0 {
            return false;
        }
        if since > self.recent.len() as u64 {
            return true;
        }
        self.recent
            .iter()
            .rev()
            .take(since as usize)
            .any(|k| k == key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> InvocationKey {
        crate::keys::invocation_key(&format!("s{n}"), "t", &serde_json::json!({})).expect("a key")
    }

    /// A waiting duplicate looks at the journal less and less often, up to one look
    /// a second: 30 s of waiting cost a few dozen looks, not 1 500.
    #[test]
    fn a_waiting_duplicates_looks_back_off_to_one_a_second() {
        let mut backoff = WaitBackoff::new(Duration::from_millis(20));
        let steps: Vec<u128> = (0..8).map(|_| backoff.next().as_millis()).collect();
        assert_eq!(steps, [20, 40, 80, 160, 320, 640, 1000, 1000]);
        let mut backoff = WaitBackoff::new(Duration::from_millis(20));
        let (mut waited, mut looks) = (Duration::ZERO, 0);
        while waited < Duration::from_secs(30) {
            waited += backoff.next();
            looks += 1;
        }
        assert!(looks <= 40, "{looks} looks in 30 s");
    }

    /// A waiter wakes for a finish of its own key, not for other calls finishing in
    /// this process; past what is remembered, it looks again to be safe.
    #[test]
    fn a_waiter_wakes_for_its_own_key_only() {
        let guard = InvocationGuard::default();
        let (mine, other) = (key(1), key(2));
        let seen = guard.lock().generation;
        guard.finished(&other);
        assert!(!guard.lock().key_finished_since(&mine, seen));
        guard.finished(&mine);
        assert!(guard.lock().key_finished_since(&mine, seen));
        let seen = guard.lock().generation;
        for _ in 0..=RECENT_FINISHES {
            guard.finished(&other);
        }
        assert!(
            guard.lock().key_finished_since(&mine, seen),
            "more finishes than remembered: look again"
        );
    }
}
