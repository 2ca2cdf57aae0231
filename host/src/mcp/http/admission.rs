//! The per-principal cap on tool calls in flight: one caller cannot take every
//! worker, and a caller over its cap is told to come back (429) instead of queueing.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

/// Calls in flight, per principal.
pub(crate) struct Admission {
    counts: Mutex<HashMap<String, usize>>,
    cap: usize,
}

/// One admitted call; dropping it makes room.
pub(crate) struct Permit<'a> {
    admission: &'a Admission,
    principal: String,
}

impl Admission {
    /// At most `cap` calls in flight per principal.
    pub fn new(cap: usize) -> Self {
        Self {
            counts: Mutex::new(HashMap::new()),
            cap: cap.max(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, usize>> {
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Admits a call of `principal`, or `None` when it has `cap` in flight.
    pub fn enter(&self, principal: &str) -> Option<Permit<'_>> {
        let mut counts = self.lock();
        let count = counts.entry(principal.to_owned()).or_insert(0);
        if *count >= self.cap {
            return None;
        }
        *count += 1;
        Some(Permit {
            admission: self,
            principal: principal.to_owned(),
        })
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        let mut counts = self.admission.lock();
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
}
