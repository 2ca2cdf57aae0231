//! A keyed downstream whose first attempt blocks until the test releases it, while
//! later attempts pass: a host that hangs (or dies) in the middle of an effect while
//! its lease runs out, and another host that takes over.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::Duration;

use justonce::{EffectRequest, Provider, ProviderClass, ProviderError};
use serde_json::{Value, json};

/// How long a test waits for a host to reach the gate before it fails.
const REACH_BOUND: Duration = Duration::from_secs(60);

/// Deduplicates by key like [`super::FakePayments`] and answers both `refund` and
/// `send` shapes; the first attempt waits at the gate.
pub struct HoldFirst {
    attempts: Mutex<Vec<String>>,
    applied: Mutex<Vec<String>>,
    reached: Mutex<Option<Sender<()>>>,
    reached_rx: Mutex<Receiver<()>>,
    release: Mutex<Option<Receiver<()>>>,
    release_tx: Mutex<Sender<()>>,
    time_out_new_keys: AtomicBool,
}

impl HoldFirst {
    /// A gate that holds the first attempt.
    pub fn new() -> Self {
        let (reached, reached_rx) = channel();
        let (release_tx, release) = channel();
        Self {
            attempts: Mutex::new(Vec::new()),
            applied: Mutex::new(Vec::new()),
            reached: Mutex::new(Some(reached)),
            reached_rx: Mutex::new(reached_rx),
            release: Mutex::new(Some(release)),
            release_tx: Mutex::new(release_tx),
            time_out_new_keys: AtomicBool::new(false),
        }
    }

    /// Waits (bounded) until the first attempt is held at the gate.
    pub fn wait_until_reached(&self) {
        match self.reached_rx.lock().unwrap().recv_timeout(REACH_BOUND) {
            Ok(()) => {}
            Err(RecvTimeoutError::Timeout) => {
                panic!("no attempt reached the gate in {REACH_BOUND:?}")
            }
            Err(RecvTimeoutError::Disconnected) => panic!("the gate was passed already"),
        }
    }

    /// Lets the held attempt finish.
    pub fn release(&self) {
        let _ = self.release_tx.lock().unwrap().send(());
    }

    /// While on, the first attempt under a key times out without applying.
    pub fn time_out_new_keys(&self, on: bool) {
        self.time_out_new_keys.store(on, Ordering::SeqCst);
    }

    /// The key of every attempt, in order.
    pub fn attempts(&self) -> Vec<String> {
        self.attempts.lock().unwrap().clone()
    }

    /// The distinct keys applied downstream.
    pub fn applied(&self) -> Vec<String> {
        self.applied.lock().unwrap().clone()
    }
}

impl Provider for HoldFirst {
    fn class(&self) -> ProviderClass {
        ProviderClass::Keyed
    }

    fn perform(&self, request: &EffectRequest<'_>) -> Result<Value, ProviderError> {
        let key = request.key.to_string();
        let seen_before = {
            let mut attempts = self.attempts.lock().unwrap();
            let seen = attempts.contains(&key);
            attempts.push(key.clone());
            seen
        };
        if self.time_out_new_keys.load(Ordering::SeqCst) && !seen_before {
            return Err(ProviderError::Unknown("the downstream timed out".into()));
        }
        // Only the first attempt ever finds these; later ones pass straight through.
        let held = self.release.lock().unwrap().take();
        if let Some(release) = held {
            if let Some(reached) = self.reached.lock().unwrap().take() {
                let _ = reached.send(());
            }
            release
                .recv_timeout(REACH_BOUND)
                .expect("the test released the gate");
        }
        let mut applied = self.applied.lock().unwrap();
        let index = match applied.iter().position(|k| *k == key) {
            Some(i) => i,
            None => {
                applied.push(key);
                applied.len() - 1
            }
        };
        Ok(json!({
            "refund_id": format!("re_{:04}", index + 1),
            "status": "succeeded",
            "message_id": format!("msg-gate-{:04}", index + 1),
        }))
    }
}
