//! Coalescing of parallel duplicates: a caller that finds its invocation running
//! waits here until some run in this process finishes, or a poll interval passes
//! (the run may be in another process, which cannot wake it).

use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// Wakes waiting duplicates when any invocation finishes.
#[derive(Debug, Default)]
pub(crate) struct InvocationGuard {
    generation: Mutex<u64>,
    finished: Condvar,
}

impl InvocationGuard {
    /// Tells every waiter that some invocation finished, so they look again.
    pub(crate) fn finished(&self) {
        let mut generation = self.generation.lock().unwrap_or_else(|p| p.into_inner());
        *generation = generation.wrapping_add(1);
        self.finished.notify_all();
    }

    /// Waits for the next finish in this process, at most `poll`.
    pub(crate) fn wait(&self, poll: Duration) {
        let generation = self.generation.lock().unwrap_or_else(|p| p.into_inner());
        let seen = *generation;
        let _ = self
            .finished
            .wait_timeout_while(generation, poll, |g| *g == seen)
            .unwrap_or_else(|p| p.into_inner());
    }
}
