//! Coalescing of parallel duplicates. In this process, one call of a key runs at a
//! time: a duplicate waits here until the running call of its key finishes. A run in
//! another process cannot wake it, so a duplicate that found the key running in the
//! journal polls instead.

use std::collections::HashSet;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crate::keys::InvocationKey;

#[derive(Debug, Default)]
struct State {
    /// Bumped whenever a call finishes.
    generation: u64,
    /// The keys a call of this process is working on now.
    running: HashSet<InvocationKey>,
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
        let mut state = self.guard.lock();
        state.running.remove(&self.key);
        drop(state);
        self.guard.finished();
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

    /// Tells every waiter that some invocation finished, so they look again.
    fn finished(&self) {
        let mut state = self.lock();
        state.generation = state.generation.wrapping_add(1);
        drop(state);
        self.finished.notify_all();
    }

    /// Waits for the next finish in this process, at most `poll`.
    pub(crate) fn wait(&self, poll: Duration) {
        let state = self.lock();
        let seen = state.generation;
        let _ = self
            .finished
            .wait_timeout_while(state, poll, |s| s.generation == seen)
            .unwrap_or_else(|p| p.into_inner());
    }
}
