//! A call that finds no record runs first and journals its invocation with its first
//! effect, or complete with its outcome if it performs none. These tests hold such a
//! run before it journals anything while another host (another process, as far as
//! the journal can tell) runs the same call to the end: the held run must give way,
//! perform nothing, and tell its caller the other run's saved outcome.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use justonce::{
    CallRequest, EffectRequest, Host, Provider, ProviderClass, ProviderError, ReadRequest,
};
use serde_json::{Value, json};

use crate::support::RUNTIME;

/// How long the test waits for the held run to reach the read.
const REACH_BOUND: Duration = Duration::from_secs(60);

/// An `http` downstream: `GET` is an unjournaled read, and the first read waits until
/// the test releases it; `POST` is a keyed effect that deduplicates by key.
struct HeldRead {
    reached: Mutex<Option<Sender<()>>>,
    release: Mutex<Option<Receiver<()>>>,
    /// The key of every effect attempt, in order.
    attempts: Mutex<Vec<String>>,
    /// The keys whose effect was applied (once each).
    applied: Mutex<Vec<String>>,
}

impl HeldRead {
    fn new() -> (Arc<Self>, Receiver<()>, Sender<()>) {
        let (reached, reached_rx) = channel();
        let (release_tx, release) = channel();
        let provider = Arc::new(Self {
            reached: Mutex::new(Some(reached)),
            release: Mutex::new(Some(release)),
            attempts: Mutex::default(),
            applied: Mutex::default(),
        });
        (provider, reached_rx, release_tx)
    }
}

impl Provider for HeldRead {
    fn class(&self) -> ProviderClass {
        ProviderClass::Keyed
    }

    fn unjournaled_read(&self, _operation: &str, payload: &Value) -> bool {
        payload["method"] == "GET"
    }

    fn read(&self, _request: &ReadRequest<'_>) -> Result<Value, ProviderError> {
        // Only the first read is held; taking the channels lets every later one pass.
        let reached = self.reached.lock().unwrap().take();
        let release = self.release.lock().unwrap().take();
        if let (Some(reached), Some(release)) = (reached, release) {
            reached.send(()).unwrap();
            release.recv_timeout(REACH_BOUND).unwrap();
        }
        Ok(json!({ "status": 200, "headers": {}, "body": "balance: 12" }))
    }

    fn perform(&self, request: &EffectRequest<'_>) -> Result<Value, ProviderError> {
        let key = request.key.as_str().to_string();
        self.attempts.lock().unwrap().push(key.clone());
        let mut applied = self.applied.lock().unwrap();
        if !applied.contains(&key) {
            applied.push(key.clone());
        }
        Ok(json!({ "status": 201, "headers": {}, "body": format!("payment {key}") }))
    }
}

fn host(db: &std::path::Path, http: &Arc<HeldRead>) -> Arc<Host> {
    Arc::new(
        Host::builder()
            .runtime(RUNTIME.clone())
            .database(db)
            .provider("http", Arc::clone(http) as Arc<dyn Provider>)
            .build()
            .unwrap(),
    )
}

fn fetch(requests: Value) -> CallRequest {
    CallRequest::new("http_fetch", json!({ "requests": requests }).to_string()).conversation("c")
}

/// What [`overtaken`] saw.
struct Overtaken {
    /// The held run's answer.
    a: justonce::CallResponse,
    /// The answer of the run that overtook it.
    b: justonce::CallResponse,
    http: Arc<HeldRead>,
    a_host: Arc<Host>,
    b_host: Arc<Host>,
    _dir: tempfile::TempDir,
}

/// Runs `request` on host A until it is held in its first read (nothing journaled
/// yet), runs it on host B to the end, then lets A go on.
fn overtaken(request: &CallRequest) -> Overtaken {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let (http, reached, release) = HeldRead::new();
    let a = host(&db, &http);
    let b = host(&db, &http);
    let held = {
        let (a, request) = (Arc::clone(&a), request.clone());
        std::thread::spawn(move || a.call(&request))
    };
    reached
        .recv_timeout(REACH_BOUND)
        .expect("A reached its first read");
    assert_eq!(
        a.journal(None, 10).unwrap().len(),
        0,
        "A has journaled nothing before its first effect"
    );
    let second = b.call(request).unwrap();
    release.send(()).unwrap();
    let first = held.join().unwrap().unwrap();
    Overtaken {
        a: first,
        b: second,
        http,
        a_host: a,
        b_host: b,
        _dir: dir,
    }
}

#[test]
fn a_run_overtaken_before_its_first_effect_performs_nothing_and_replays_the_other_runs_outcome() {
    let request = fetch(json!([
        { "method": "GET", "url": "https://bank.example/balance" },
        { "method": "POST", "url": "https://bank.example/payments", "body": "pay 12" }
    ]));
    let Overtaken {
        a,
        b,
        http,
        b_host,
        _dir,
        ..
    } = overtaken(&request);

    // B ran the call: one payment, under one key.
    assert!(!b.replayed);
    let attempts = http.attempts.lock().unwrap().clone();
    assert_eq!(
        attempts.len(),
        1,
        "A's effect was never attempted: {attempts:?}"
    );
    assert_eq!(http.applied.lock().unwrap().len(), 1, "one payment");
    // A was told B's outcome, marked replayed, under the same invocation key.
    assert!(a.replayed, "A gave way to B's run");
    assert_eq!(a.key, b.key);
    assert_eq!(a.outcome, b.outcome);
    assert!(a.outcome.is_success(), "{:?}", a.outcome);
    let journal = b_host.journal(None, 10).unwrap();
    assert_eq!(journal.len(), 1);
    assert_eq!((journal[0].runs, journal[0].effects.len()), (1, 1));
}

#[test]
fn a_run_without_effects_overtaken_before_its_outcome_lands_answers_the_first_outcome() {
    // One key, one answer: B's outcome committed first, so A, whose own run returned
    // an outcome too, answers B's (replayed), never its own.
    let request = fetch(json!([{ "method": "GET", "url": "https://bank.example/balance" }]));
    let Overtaken {
        a,
        b,
        http,
        a_host,
        b_host,
        _dir,
    } = overtaken(&request);

    assert!(!b.replayed, "B's outcome landed first");
    assert!(a.replayed, "A answers B's outcome, not its own");
    assert_eq!(a.key, b.key);
    assert_eq!(a.outcome, b.outcome);
    assert!(
        http.attempts.lock().unwrap().is_empty(),
        "no effects at all"
    );
    let journal = b_host.journal(None, 10).unwrap();
    assert_eq!(journal.len(), 1, "one record");
    assert_eq!(
        (journal[0].state.as_str(), journal[0].runs),
        ("completed", 1)
    );
    let retry = a_host.call(&request).unwrap();
    assert!(retry.replayed, "A's retry replays the journal's record");
    assert_eq!(retry.outcome, b.outcome);
}

#[test]
fn two_different_calls_that_find_no_record_both_run_and_both_are_saved() {
    let dir = tempfile::tempdir().unwrap();
    let (http, _reached, _release) = HeldRead::new();
    // Nothing is held: take the gate's channels away first.
    http.reached.lock().unwrap().take();
    http.release.lock().unwrap().take();
    let a = host(&dir.path().join("state.db"), &http);
    let pay = |n: u32| {
        fetch(json!([
            { "method": "POST", "url": "https://bank.example/payments", "body": format!("pay {n}") }
        ]))
    };
    let (one, two) = (a.call(&pay(1)).unwrap(), a.call(&pay(2)).unwrap());
    assert!(!one.replayed && !two.replayed);
    assert_ne!(one.key, two.key);
    assert_eq!(http.applied.lock().unwrap().len(), 2, "two payments");
    assert_eq!(a.journal(None, 10).unwrap().len(), 2);
}
