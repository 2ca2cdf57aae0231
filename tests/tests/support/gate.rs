//! A payments downstream that holds every attempt until the test opens a gate, so a
//! test can keep a call in flight while it sends duplicates or cancels it, and
//! counts how many attempts of one kind were inside at once.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use justonce::{EffectRequest, Provider, ProviderClass, ProviderError};
use serde_json::{Value, json};

/// How long [`Gate::wait_entered`] waits before failing the test (a bound on a hang).
const WAIT: Duration = Duration::from_secs(60);

#[derive(Default)]
struct State {
    open: bool,
    entered: usize,
    attempts: Vec<String>,
    applied: Vec<(String, Value)>,
    /// Attempts inside now, and the most inside at once, by [`group`].
    inside: HashMap<String, usize>,
    most: HashMap<String, usize>,
}

/// What an attempt counts under: the domain of its payload's `to` (an email's
/// recipient), or `""`.
fn group(payload: &Value) -> String {
    let to = payload["to"].as_str().unwrap_or("");
    to.split_once('@')
        .map_or("", |(_, domain)| domain)
        .to_owned()
}

/// A keyed payments API that deduplicates by key and answers only once the gate is
/// open.
#[derive(Default)]
pub struct Gate {
    state: Mutex<State>,
    changed: Condvar,
}

impl Gate {
    /// Lets every held and future attempt through.
    pub fn open(&self) {
        self.state.lock().unwrap().open = true;
        self.changed.notify_all();
    }

    /// Waits until `n` attempts have reached the downstream.
    pub fn wait_entered(&self, n: usize) {
        let state = self.state.lock().unwrap();
        let (state, timeout) = self
            .changed
            .wait_timeout_while(state, WAIT, |s| s.entered < n)
            .unwrap();
        assert!(
            !timeout.timed_out(),
            "{} of {n} attempts reached the downstream",
            state.entered
        );
    }

    /// The key of every attempt, in order.
    pub fn attempts(&self) -> Vec<String> {
        self.state.lock().unwrap().attempts.clone()
    }

    /// How many distinct refunds were applied.
    pub fn applied(&self) -> usize {
        self.state.lock().unwrap().applied.len()
    }

    /// The most attempts to recipients at `domain` that were inside at once.
    pub fn most_at_once(&self, domain: &str) -> usize {
        self.state
            .lock()
            .unwrap()
            .most
            .get(domain)
            .copied()
            .unwrap_or(0)
    }
}

impl Provider for Gate {
    fn class(&self) -> ProviderClass {
        ProviderClass::Keyed
    }

    fn perform(&self, request: &EffectRequest<'_>) -> Result<Value, ProviderError> {
        let key = request.key.to_string();
        let group = group(request.payload);
        let mut state = self.state.lock().unwrap();
        state.entered += 1;
        state.attempts.push(key.clone());
        let inside = state.inside.entry(group.clone()).or_default();
        *inside += 1;
        let now = *inside;
        let most = state.most.entry(group.clone()).or_default();
        *most = (*most).max(now);
        self.changed.notify_all();
        let mut state = self.changed.wait_while(state, |s| !s.open).unwrap();
        *state.inside.entry(group).or_default() -= 1;
        let index = match state.applied.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                state.applied.push((key, request.payload.clone()));
                state.applied.len() - 1
            }
        };
        // A mailer's answer too (`message_id`), for tools that email through it.
        Ok(json!({
            "refund_id": format!("re_{:04}", index + 1),
            "message_id": format!("msg_{:04}", index + 1),
            "status": "succeeded",
        }))
    }
}
