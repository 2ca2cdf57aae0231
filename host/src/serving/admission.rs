//! The per-principal cap on tool calls in flight: one caller cannot take every
//! worker, and a caller over its cap is told to come back (429) instead of queueing.
//!
//! Every run of a principal's call on the server counts, however it started: a
//! `tools/call`, a task resumed by the `tasks/update` that completed its answers
//! (`mcp::tasks`), an operator's "Resume now" in the console. A clone shares the
//! counts, so each of those paths holds a clone of the one [`Admission`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

type Counts = Arc<Mutex<HashMap<String, usize>>>;

/// Calls in flight, per principal. A clone counts the same calls.
#[derive(Debug, Clone)]
pub struct Admission {
    counts: Counts,
    cap: usize,
}

/// One admitted call; dropping it makes room. It may outlive the request that took
/// it (a call whose answer goes out on a stream, a resumed task).
#[derive(Debug)]
pub struct Permit {
    counts: Counts,
    principal: String,
}

fn lock(counts: &Counts) -> MutexGuard<'_, HashMap<String, usize>> {
    counts.lock().unwrap_or_else(|p| p.into_inner())
}

impl Admission {
    /// At most `cap` calls in flight per principal.
    pub fn new(cap: usize) -> Self {
        Self {
            counts: Arc::default(),
            cap: cap.max(1),
        }
    }

    /// Admits a call of `principal`, or `None` when it has `cap` in flight.
    pub fn enter(&self, principal: &str) -> Option<Permit> {
        self.admit(principal, true)
    }

    /// Admits a run of `principal` resumed without a `tools/call` of its own (a
    /// task resumed by the `tasks/update` that completed its answers, a console
    /// "Resume now"): the same cap as [`Admission::enter`], counted with the
    /// calls; `None` when `principal` has `cap` in flight.
    pub fn resume(&self, principal: &str) -> Option<Permit> {
        self.admit(
            principal,
            !crate::mutants::on(crate::mutants::Mutant::ResumeSkipsAdmission),
        )
    }

    fn admit(&self, principal: &str, capped: bool) -> Option<Permit> {
        let mut counts = lock(&self.counts);
        let count = counts.entry(principal.to_owned()).or_insert(0);
        if capped && *count >= self.cap {
            return None;
        }
        *count += 1;
        Some(Permit {
            counts: Arc::clone(&self.counts),
            principal: principal.to_owned(),
        })
    }

    /// What a principal refused by [`Admission::enter`] is told (with a 429 and
    /// `Retry-After: 1`).
    pub fn full(&self, principal: &str) -> String {
        format!(
            "{principal} has {} calls in flight, the most allowed; retry after a second",
            self.cap
        )
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut counts = lock(&self.counts);
        if let Some(count) = counts.get_mut(&self.principal) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&self.principal);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_principal_is_refused_while_another_is_admitted_and_a_finished_call_makes_room() {
        let admission = Admission::new(1);
        let first = admission.enter("alice").expect("room");
        assert!(admission.enter("alice").is_none(), "alice is full");
        let bob = admission.enter("bob").expect("bob has his own room");
        drop(first);
        assert!(admission.enter("alice").is_some());
        drop(bob);
    }

    #[test]
    fn a_resumed_run_counts_against_the_same_cap_as_a_call() {
        let admission = Admission::new(2);
        let call = admission.enter("alice").expect("room");
        let resumed = admission.resume("alice").expect("room for one more");
        assert!(admission.resume("alice").is_none(), "a resume past the cap");
        assert!(admission.enter("alice").is_none(), "a call past the cap");
        drop(resumed);
        assert!(
            admission.enter("alice").is_some(),
            "the resumed run made room"
        );
        drop(call);
    }

    #[test]
    fn a_clone_counts_the_same_calls() {
        let admission = Admission::new(1);
        let resuming = admission.clone();
        let held = resuming.enter("alice").expect("room");
        assert!(
            admission.enter("alice").is_none(),
            "one call of alice's in all"
        );
        drop(held);
        assert!(admission.enter("alice").is_some());
    }
}
