//! The contract table (DESIGN.md, "The contract"), row by row, without wasm: scripted
//! guests on an in-memory journal, fake providers of each class and the manual clock.
//! Every retry test asserts the seed's four things: the retry happened, the effect
//! happened once, both attempts carried the same key, and what the agent was told.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use serde_json::{Value, json};

use super::scripted::{Effects, ScriptedRunner, panicked, returned, tool_error};
use super::{Guard, Policy, Shared};
use crate::call::CallRequest;
use crate::clock::{Clock, ManualClock};
use crate::error::Error;
use crate::journal::{self, Journal, Resolution};
use crate::outcome::Outcome;
use crate::provider::{EffectRequest, Provider, ProviderClass, ProviderError};
use crate::providers::KvProvider;
use crate::retention::Retention;
use crate::retry::RetryPolicy;
use crate::runtime::EffectFailure;

/// A downstream of the given class that records every attempt's key and applies
/// each key's effect once (a keyed downstream deduplicates; an unkeyed one cannot).
/// `faults` is consumed one per attempt: what goes wrong with that attempt.
struct Downstream {
    class: ProviderClass,
    attempts: Mutex<Vec<String>>,
    applied: Mutex<Vec<String>>,
    faults: Mutex<Vec<Fault>>,
}

/// Where a held attempt says it arrived, and waits to be let go.
type Gate = Arc<Mutex<Option<(mpsc::Sender<()>, mpsc::Receiver<()>)>>>;

#[derive(Clone)]
enum Fault {
    /// The effect lands, then the response is lost.
    LoseResponse,
    /// Refused before anything happened.
    FailBefore,
    /// Asked to come back later (HTTP 429 with Retry-After).
    Throttle(Duration),
    /// The connection is refused: nothing was sent.
    Refused,
    /// Blocks until told to go on (a slow downstream).
    Hold(Gate),
}

impl Downstream {
    fn new(class: ProviderClass, faults: Vec<Fault>) -> Arc<Self> {
        Arc::new(Self {
            class,
            attempts: Mutex::default(),
            applied: Mutex::default(),
            faults: Mutex::new(faults),
        })
    }
    fn attempts(&self) -> Vec<String> {
        self.attempts.lock().unwrap().clone()
    }
    fn applied(&self) -> Vec<String> {
        self.applied.lock().unwrap().clone()
    }
}

impl Provider for Downstream {
    fn class(&self) -> ProviderClass {
        self.class
    }

    fn perform(&self, request: &EffectRequest<'_>) -> Result<Value, ProviderError> {
        let key = request.key.to_string();
        self.attempts.lock().unwrap().push(key.clone());
        let fault = {
            let mut faults = self.faults.lock().unwrap();
            (!faults.is_empty()).then(|| faults.remove(0))
        };
        let apply = || {
            let mut applied = self.applied.lock().unwrap();
            if self.class == ProviderClass::Unkeyed || !applied.contains(&key) {
                applied.push(key.clone());
            }
        };
        match fault {
            Some(Fault::FailBefore) => Err(ProviderError::Unknown("connection reset".into())),
            Some(Fault::Refused) => Err(ProviderError::NotPerformed {
                reason: "connection refused".into(),
                retry: true,
            }),
            Some(Fault::Throttle(after)) => Err(ProviderError::Throttled {
                reason: "429 Too Many Requests".into(),
                retry_after: Some(after),
            }),
            Some(Fault::LoseResponse) => {
                apply();
                Err(ProviderError::Unknown(
                    "timed out reading the response".into(),
                ))
            }
            Some(Fault::Hold(gate)) => {
                let (reached, release) = gate.lock().unwrap().take().expect("held once");
                reached.send(()).unwrap();
                release.recv().unwrap();
                apply();
                Ok(json!({ "id": key, "payload": request.payload }))
            }
            None => {
                apply();
                Ok(json!({ "id": key, "payload": request.payload }))
            }
        }
    }
}

/// One host: a guard over a journal, with scripted tools and the manual clock.
struct Host {
    guard: Guard,
    journal: Arc<dyn Journal>,
    clock: Arc<ManualClock>,
}

const LEASE: Duration = Duration::from_secs(60);
const RETENTION: Duration = Duration::from_secs(24 * 3600);

fn host_on(
    journal: Arc<dyn Journal>,
    clock: Arc<ManualClock>,
    runner: Arc<ScriptedRunner>,
    providers: &[(&str, Arc<dyn Provider>)],
) -> Host {
    host_renewing(
        journal,
        clock,
        runner,
        providers,
        Some(Duration::from_millis(10)),
    )
}

/// [`host`] with these windows instead of the defaults.
fn host_keeping(
    runner: ScriptedRunner,
    providers: &[(&str, Arc<dyn Provider>)],
    retention: Retention,
) -> Host {
    let mut h = host(runner, providers);
    h.guard.policy.retention = Arc::new(retention);
    h
}

/// A host that renews leases every `renew_every` (real time), or never: a paused
/// host renews nothing.
fn host_renewing(
    journal: Arc<dyn Journal>,
    clock: Arc<ManualClock>,
    runner: Arc<ScriptedRunner>,
    providers: &[(&str, Arc<dyn Provider>)],
    renew_every: Option<Duration>,
) -> Host {
    let mut map: BTreeMap<String, Arc<dyn Provider>> = BTreeMap::new();
    map.insert("kv".into(), Arc::new(KvProvider));
    for (name, provider) in providers {
        map.insert((*name).to_string(), Arc::clone(provider));
    }
    for provider in map.values() {
        journal.prepare_provider(provider.as_ref()).unwrap();
    }
    let shared = Arc::new(Shared {
        journal: Arc::clone(&journal),
        providers: map,
        clock: clock.clone(),
        retry: RetryPolicy {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(1),
            max_retry_after: Duration::from_secs(5),
        },
        metrics: Default::default(),
        tasks: Default::default(),
        runs: Default::default(),
        ask_person: Default::default(),
    });
    let policy = Policy {
        retention: Arc::new(Retention::new(RETENTION)),
        lease_ms: LEASE.as_millis() as i64,
        wait_bound: Duration::from_millis(200),
        poll: Duration::from_millis(5),
        renew_every,
    };
    Host {
        guard: Guard::new(shared, runner, policy),
        journal,
        clock,
    }
}

fn host(runner: ScriptedRunner, providers: &[(&str, Arc<dyn Provider>)]) -> Host {
    let clock = Arc::new(ManualClock::default());
    host_on(fresh_journal(&clock), clock, Arc::new(runner), providers)
}

/// A tool that performs one `pay` effect on `provider` with its arguments, and
/// returns the downstream's answer.
fn pay_tool(
    runner: &mut ScriptedRunner,
    provider: &'static str,
) -> Arc<std::sync::atomic::AtomicU32> {
    runner.tool(
        "pay",
        ScriptedRunner::open_schema(),
        move |args, fx: &mut Effects<'_>| match fx.perform(provider, "pay", args.clone()) {
            Ok(answer) => returned(answer),
            Err(EffectFailure::Rejected(r)) => tool_error("rejected", &r),
            Err(other) => tool_error("effect_failed", &format!("{other:?}")),
        },
    )
}

/// The value of one series the host's guard counts (`name{labels}`, as written).
fn counted(host: &Host, series: &str) -> f64 {
    let text = host.guard.shared.metrics.rendered();
    crate::metrics::sample(&text, series).unwrap_or_else(|| panic!("no {series} in\n{text}"))
}

fn pay(amount: u64) -> CallRequest {
    CallRequest::new("pay", json!({ "amount": amount }).to_string()).conversation("c1")
}

fn effect_keys(host: &Host) -> Vec<String> {
    host.journal
        .entries(None, 100)
        .unwrap()
        .iter()
        .flat_map(|e| e.effects.iter().map(|f| f.key.clone()))
        .collect()
}

// --- first call ---------------------------------------------------------------

#[test]
fn a_first_call_runs_journals_its_effect_and_saves_its_outcome() {
    let mut runner = ScriptedRunner::default();
    let runs = pay_tool(&mut runner, "payments");
    let payments = Downstream::new(ProviderClass::Keyed, vec![]);
    let h = host(runner, &[("payments", payments.clone())]);

    let answer = h.guard.call(&pay(10)).unwrap();

    assert!(!answer.replayed);
    assert!(answer.outcome.is_success(), "{:?}", answer.outcome);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(payments.applied().len(), 1);
    let entries = h.journal.entries(None, 10).unwrap();
    assert_eq!(entries[0].state, "completed");
    assert_eq!(entries[0].effects[0].key, payments.attempts()[0]);
}

/// The seed's assertions for a keyed effect whose first response was lost: the
/// retry happened (two attempts), both carried the same key, the effect happened
/// once, and the agent was told a success-shaped result. Returns the attempts' keys.
fn assert_retried_once_under_one_key(
    payments: &Downstream,
    told: &crate::call::CallResponse,
) -> Vec<String> {
    let attempts = payments.attempts();
    assert_eq!(attempts.len(), 2, "the retry happened");
    assert_eq!(
        attempts[0], attempts[1],
        "both attempts carried the same key"
    );
    assert_eq!(payments.applied().len(), 1, "the effect happened once");
    assert!(
        told.outcome.is_success(),
        "the agent was told: {:?}",
        told.outcome
    );
    attempts
}

// --- same key, completed --------------------------------------------------------

#[test]
fn a_lost_response_is_retried_under_the_same_key_and_the_effect_happens_once() {
    let mut runner = ScriptedRunner::default();
    pay_tool(&mut runner, "payments");
    let payments = Downstream::new(ProviderClass::Keyed, vec![Fault::LoseResponse]);
    let h = host(runner, &[("payments", payments.clone())]);

    let answer = h.guard.call(&pay(10)).unwrap();

    let attempts = assert_retried_once_under_one_key(&payments, &answer);
    assert_eq!(effect_keys(&h), vec![attempts[0].clone()]);
}

#[test]
fn a_completed_key_replays_its_outcome_byte_for_byte_and_runs_nothing() {
    let mut runner = ScriptedRunner::default();
    let runs = pay_tool(&mut runner, "payments");
    let payments = Downstream::new(ProviderClass::Keyed, vec![]);
    let h = host(runner, &[("payments", payments.clone())]);

    let first = h.guard.call(&pay(10)).unwrap();
    let retry = h.guard.call(&pay(10)).unwrap();
    // Re-planned: a new tool-call id and the arguments written differently.
    let replanned = CallRequest::new("pay", r#"{ "amount" : 10.0 }"#)
        .conversation("c1")
        .tool_call_id("call-2");
    let third = h.guard.call(&replanned).unwrap();

    assert!(retry.replayed && third.replayed);
    assert_eq!(retry.outcome, first.outcome);
    assert_eq!(third.outcome, first.outcome);
    assert_eq!(runs.load(Ordering::SeqCst), 1, "nothing ran again");
    assert_eq!(payments.attempts().len(), 1);
}

#[test]
fn each_call_is_counted_once_under_its_outcome_and_a_replay_as_replayed() {
    let mut runner = ScriptedRunner::default();
    pay_tool(&mut runner, "payments");
    let payments = Downstream::new(ProviderClass::Keyed, vec![Fault::LoseResponse]);
    let h = host(runner, &[("payments", payments.clone())]);
    let calls = |outcome: &str| {
        counted(
            &h,
            &format!(r#"justonce_calls_total{{tool="pay",outcome="{outcome}"}}"#),
        )
    };
    let attempts = |result: &str| {
        counted(
            &h,
            &format!(r#"justonce_effect_attempts_total{{provider="payments",result="{result}"}}"#),
        )
    };

    h.guard.call(&pay(10)).unwrap();
    assert_eq!((calls("success"), calls("replayed")), (1.0, 0.0));
    assert_eq!(
        (attempts("unknown"), attempts("ok")),
        (1.0, 1.0),
        "the lost response and its retry"
    );
    assert_eq!(
        counted(
            &h,
            r#"justonce_effect_retries_total{provider="payments",after="unknown"}"#
        ),
        1.0
    );
    assert_eq!(
        counted(
            &h,
            r#"justonce_effects_total{provider="payments",result="ok"}"#
        ),
        1.0
    );

    let retry = h.guard.call(&pay(10)).unwrap();
    assert!(retry.replayed);
    assert_eq!(
        (calls("success"), calls("replayed")),
        (1.0, 1.0),
        "the replay is not a second success"
    );
    assert_eq!(attempts("ok"), 1.0, "a replay attempts nothing");

    h.guard.call(&pay(11)).unwrap();
    assert_eq!(
        (calls("success"), calls("replayed")),
        (2.0, 1.0),
        "another call is counted as run"
    );
    assert!(h.guard.call(&CallRequest::new("nope", "{}")).is_err());
    assert_eq!(
        counted(&h, r#"justonce_calls_refused_total{reason="unknown_tool"}"#),
        1.0
    );
    assert_eq!(counted(&h, "justonce_calls_in_flight"), 0.0);
}

#[test]
fn two_different_calls_both_happen() {
    let mut runner = ScriptedRunner::default();
    let runs = pay_tool(&mut runner, "payments");
    let payments = Downstream::new(ProviderClass::Keyed, vec![]);
    let h = host(runner, &[("payments", payments.clone())]);

    let a = h.guard.call(&pay(10)).unwrap();
    let b = h.guard.call(&pay(11)).unwrap();

    assert!(!a.replayed && !b.replayed);
    assert_ne!(a.key, b.key);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    let applied = payments.applied();
    assert_eq!(applied.len(), 2);
    assert_ne!(applied[0], applied[1], "two effects under two keys");
}

#[test]
fn tool_errors_and_traps_are_saved_and_replayed() {
    let mut runner = ScriptedRunner::default();
    let failing = runner.tool("fail", ScriptedRunner::open_schema(), |_, _| {
        tool_error("card_declined", "the card was declined")
    });
    let trapping = runner.tool("trap", ScriptedRunner::open_schema(), |_, _| {
        panicked("index out of bounds")
    });
    let h = host(runner, &[]);
    for (tool, runs) in [("fail", &failing), ("trap", &trapping)] {
        let request = CallRequest::new(tool, "{}").conversation("c1");
        let first = h.guard.call(&request).unwrap();
        let retry = h.guard.call(&request).unwrap();
        assert!(!first.outcome.is_success());
        assert!(retry.replayed, "{tool} replayed");
        assert_eq!(retry.outcome, first.outcome, "{tool}: the same error");
        assert_eq!(runs.load(Ordering::SeqCst), 1, "{tool} ran once");
    }
    let trap = h
        .guard
        .call(&CallRequest::new("trap", "{}").conversation("c1"));
    assert!(matches!(
        trap.unwrap().outcome,
        Outcome::Trap { ref reason, .. } if reason == "panic"
    ));
}

// --- same key, different arguments --------------------------------------------

#[test]
fn the_same_key_with_other_arguments_is_a_mismatch_and_nothing_runs_or_is_stored() {
    let mut runner = ScriptedRunner::default();
    let runs = pay_tool(&mut runner, "payments");
    let payments = Downstream::new(ProviderClass::Keyed, vec![]);
    let h = host(runner, &[("payments", payments.clone())]);
    let key = "order-4417-refund";

    h.guard.call(&pay(10).key(key)).unwrap();
    let err = h.guard.call(&pay(99).key(key)).unwrap_err();
    let alias = h.guard.call(&pay(10).tool_call_id("call-1")).unwrap();
    let alias_err = h.guard.call(&pay(12).tool_call_id("call-1")).unwrap_err();

    assert!(matches!(err, Error::Mismatch { .. }), "{err:?}");
    assert!(matches!(alias_err, Error::Mismatch { .. }), "{alias_err:?}");
    assert!(!alias.replayed, "the first call under the id ran");
    assert_eq!(runs.load(Ordering::SeqCst), 2, "no mismatch ran");
    assert_eq!(payments.applied().len(), 2);
    assert_eq!(
        h.journal.entries(None, 10).unwrap().len(),
        2,
        "nothing stored"
    );
}

// --- same key, still running ----------------------------------------------------

#[test]
fn a_parallel_duplicate_waits_for_the_first_and_gets_its_outcome() {
    let mut runner = ScriptedRunner::default();
    let runs = pay_tool(&mut runner, "payments");
    let (reached_tx, reached_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel();
    let gate = Arc::new(Mutex::new(Some((reached_tx, release_rx))));
    let payments = Downstream::new(ProviderClass::Keyed, vec![Fault::Hold(gate)]);
    let h = Arc::new(host(runner, &[("payments", payments.clone())]));

    let first = {
        let h = Arc::clone(&h);
        std::thread::spawn(move || h.guard.call(&pay(10)))
    };
    reached_rx.recv().unwrap();
    // The duplicate gives up after the wait bound with a retryable error...
    let busy = h.guard.call(&pay(10)).unwrap_err();
    assert!(matches!(busy, Error::InProgress { .. }), "{busy:?}");
    // ...and one that waits while the first finishes gets its outcome.
    let second = {
        let h = Arc::clone(&h);
        std::thread::spawn(move || h.guard.call(&pay(10)))
    };
    release_tx.send(()).unwrap();
    let first = first.join().unwrap().unwrap();
    let second = second.join().unwrap().unwrap();

    assert!(!first.replayed);
    assert_eq!(second.outcome, first.outcome);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(payments.applied().len(), 1);
}

/// A duplicate that finds its key running on another host backs off between its
/// looks at the journal: over a wait of 1.5 s (a fixed 5 ms poll would look about
/// 300 times) it makes a handful of statements, and still gets the first call's
/// outcome once that call finishes (issue 38, 4).
#[test]
fn a_duplicate_waiting_on_another_host_costs_the_journal_a_handful_of_statements() {
    let mut runner = ScriptedRunner::default();
    let runs = pay_tool(&mut runner, "payments");
    let runner = Arc::new(runner);
    let (reached_tx, reached_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel();
    let gate = Arc::new(Mutex::new(Some((reached_tx, release_rx))));
    let payments = Downstream::new(ProviderClass::Keyed, vec![Fault::Hold(gate)]);
    let providers: [(&str, Arc<dyn Provider>); 1] = [("payments", payments.clone())];
    let clock = Arc::new(ManualClock::default());
    let journal = fresh_journal(&clock);
    // A renews nothing while it waits on the downstream (the manual clock keeps its
    // lease live): what the journal does meanwhile is the duplicate's.
    let a = Arc::new(host_renewing(
        Arc::clone(&journal),
        clock.clone(),
        Arc::clone(&runner),
        &providers,
        None,
    ));
    let mut b = host_on(Arc::clone(&journal), clock.clone(), runner, &providers);
    b.guard.policy.wait_bound = Duration::from_millis(1500);

    let first = {
        let a = Arc::clone(&a);
        std::thread::spawn(move || a.guard.call(&pay(10)))
    };
    reached_rx.recv().unwrap();
    let work = || journal.stats().commits + journal.round_trips();
    let before = work();
    let busy = b.guard.call(&pay(10)).unwrap_err();
    let spent = work() - before;
    assert!(matches!(busy, Error::InProgress { .. }), "{busy:?}");
    assert!(
        spent <= 100,
        "{spent} journal commits and round trips for one waiting duplicate"
    );
    release_tx.send(()).unwrap();
    let first = first.join().unwrap().unwrap();
    let retry = b.guard.call(&pay(10)).unwrap();
    assert!(retry.replayed);
    assert_eq!(retry.outcome, first.outcome);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(payments.applied().len(), 1);
}

// --- same key, running but its lease expired ---------------------------------------

#[test]
fn a_host_whose_lease_expired_is_taken_over_fenced_and_the_effect_happens_once() {
    let mut runner = ScriptedRunner::default();
    pay_tool(&mut runner, "payments");
    let runner = Arc::new(runner);
    let (reached_tx, reached_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel();
    let gate = Arc::new(Mutex::new(Some((reached_tx, release_rx))));
    // Host A's attempt hangs past its lease (a paused host).
    let payments = Downstream::new(ProviderClass::Keyed, vec![Fault::Hold(gate)]);
    let clock = Arc::new(ManualClock::default());
    let journal = fresh_journal(&clock);
    let providers: [(&str, Arc<dyn Provider>); 1] = [("payments", payments.clone())];
    let a = Arc::new(host_renewing(
        Arc::clone(&journal),
        clock.clone(),
        Arc::clone(&runner),
        &providers,
        None,
    ));
    let b = host_on(journal, clock.clone(), runner, &providers);

    let a_call = {
        let a = Arc::clone(&a);
        std::thread::spawn(move || a.guard.call(&pay(10)))
    };
    reached_rx.recv().unwrap();
    clock.advance(LEASE + Duration::from_secs(1));
    // B takes over: the pending effect is retried under its stored key.
    let b_answer = b.guard.call(&pay(10)).unwrap();
    release_tx.send(()).unwrap();
    let a_answer = a_call.join().unwrap();

    let attempts = payments.attempts();
    assert_eq!(attempts.len(), 2, "B retried the effect");
    assert_eq!(attempts[0], attempts[1], "under the same key");
    assert_eq!(
        payments.applied().len(),
        1,
        "the downstream applied it once"
    );
    assert!(!b_answer.replayed && b_answer.outcome.is_success());
    // A is fenced: its answer is not saved and it answers nothing of its own.
    assert!(
        matches!(a_answer, Err(Error::LeaseLost { .. })),
        "{a_answer:?}"
    );
    let retry = b.guard.call(&pay(10)).unwrap();
    assert!(retry.replayed);
    assert_eq!(retry.outcome, b_answer.outcome);
    assert_eq!(
        counted(&b, r#"justonce_lease_takeovers_total{tool="pay"}"#),
        1.0
    );
    assert_eq!(
        counted(&a, r#"justonce_lease_takeovers_total{tool="pay"}"#),
        0.0
    );
    assert_eq!(
        counted(
            &a,
            r#"justonce_calls_total{tool="pay",outcome="lease_lost"}"#
        ),
        1.0
    );
    assert_eq!(
        counted(
            &b,
            r#"justonce_effect_retries_total{provider="payments",after="earlier_run"}"#
        ),
        1.0
    );
}

/// A run whose lease ran out after its claim was written and before it went on (the
/// claim waited for a commit shared with other callers, the write lock or an fsync)
/// does not call the provider: the host that took the call over meanwhile sent under
/// the key, and a second request beside it is what the lease exists to prevent
/// (the simulator's overlap on the group-commit branch, seed 1796169435).
#[test]
fn a_run_whose_lease_ran_out_before_its_provider_call_does_not_send_beside_the_run_that_took_over()
{
    let mut runner = ScriptedRunner::default();
    pay_tool(&mut runner, "payments");
    let runner = Arc::new(runner);
    let payments = Downstream::new(ProviderClass::Keyed, vec![]);
    let clock = Arc::new(ManualClock::default());
    let journal = fresh_journal(&clock);
    let providers: [(&str, Arc<dyn Provider>); 1] = [("payments", payments.clone())];
    let a = host_renewing(
        Arc::clone(&journal),
        clock.clone(),
        Arc::clone(&runner),
        &providers,
        None,
    );
    let b = Arc::new(host_on(journal, clock.clone(), runner, &providers));

    // Between A's claim and its provider call, A's lease runs out and B takes the
    // call over and completes it.
    let b_answer = Arc::new(Mutex::new(None));
    let between: crate::fault::Hook = {
        let (b, b_answer, clock) = (Arc::clone(&b), Arc::clone(&b_answer), clock.clone());
        std::rc::Rc::new(move |point| {
            let first = b_answer.lock().unwrap().is_none();
            if point == crate::fault::FaultPoint::BeforeEffect && first {
                *b_answer.lock().unwrap() = Some(Err(Error::Host(anyhow::anyhow!("B runs"))));
                clock.advance(LEASE + Duration::from_secs(1));
                *b_answer.lock().unwrap() = Some(b.guard.call(&pay(10)));
            }
        })
    };
    let a_answer = crate::fault::with_hook(between, || a.guard.call(&pay(10)));
    let b_answer = b_answer
        .lock()
        .unwrap()
        .take()
        .expect("B was called")
        .unwrap();

    assert!(
        !b_answer.replayed && b_answer.outcome.is_success(),
        "{b_answer:?}"
    );
    assert_eq!(
        payments.attempts().len(),
        1,
        "only B, which holds the lease, sent under the key"
    );
    assert!(
        matches!(a_answer, Err(Error::LeaseLost { .. })),
        "{a_answer:?}"
    );
    let retry = b.guard.call(&pay(10)).unwrap();
    assert!(retry.replayed);
    assert_eq!(retry.outcome, b_answer.outcome);
}

#[test]
fn a_provider_slower_than_the_lease_keeps_its_lease_and_no_other_host_takes_over() {
    let mut runner = ScriptedRunner::default();
    pay_tool(&mut runner, "payments");
    let runner = Arc::new(runner);
    let (reached_tx, reached_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel();
    let gate = Arc::new(Mutex::new(Some((reached_tx, release_rx))));
    let payments = Downstream::new(ProviderClass::Keyed, vec![Fault::Hold(gate)]);
    let clock = Arc::new(ManualClock::default());
    let journal = fresh_journal(&clock);
    let providers: [(&str, Arc<dyn Provider>); 1] = [("payments", payments.clone())];
    let a = Arc::new(host_on(
        Arc::clone(&journal),
        clock.clone(),
        Arc::clone(&runner),
        &providers,
    ));
    let b = host_on(Arc::clone(&journal), clock.clone(), runner, &providers);

    let a_call = {
        let a = Arc::clone(&a);
        std::thread::spawn(move || a.guard.call(&pay(10)))
    };
    reached_rx.recv().unwrap();
    // The downstream takes longer than the lease...
    clock.advance(LEASE * 2);
    // ...and A, still alive, renews it.
    wait_for_renewal(&journal, &clock);
    let b_err = b.guard.call(&pay(10)).unwrap_err();
    release_tx.send(()).unwrap();
    let a_answer = a_call.join().unwrap().unwrap();

    assert!(
        matches!(b_err, Error::InProgress { .. }),
        "B waited: {b_err:?}"
    );
    assert_eq!(payments.attempts().len(), 1, "B never took over");
    assert_eq!(payments.applied().len(), 1);
    assert!(a_answer.outcome.is_success());
    let retry = b.guard.call(&pay(10)).unwrap();
    assert!(retry.replayed, "B's retry gets A's outcome");
    assert_eq!(retry.outcome, a_answer.outcome);
    assert_eq!(
        counted(&b, r#"justonce_lease_takeovers_total{tool="pay"}"#),
        0.0
    );
    assert_eq!(
        counted(
            &b,
            r#"justonce_calls_total{tool="pay",outcome="in_progress"}"#
        ),
        1.0
    );
}

/// Returns once the one invocation's lease runs past the clock's now: a live run's
/// renewal thread renewed it (a bounded wait; the renewals run on real time).
fn wait_for_renewal(journal: &Arc<dyn Journal>, clock: &ManualClock) {
    let lease_until =
        || query_i64(journal, "SELECT lease_expires_at FROM invocations").unwrap_or(0);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while lease_until() <= clock.now_ms() {
        assert!(
            std::time::Instant::now() < deadline,
            "the lease was never renewed"
        );
        std::thread::yield_now();
    }
}

/// A run fenced off while its provider call was in flight still saves the definitive
/// answer that call brings back: pending→done only moves one way, so an unkeyed
/// effect's true outcome is kept instead of waiting for a person to guess it.
#[test]
fn a_fenced_run_saves_the_definitive_answer_it_holds() {
    let clock = Arc::new(ManualClock::default());
    let journal = fresh_journal(&clock);
    let (sms, HeldRace { b, a_call, release }) =
        held_race(ProviderClass::Unkeyed, &journal, &clock, clock.clone());
    clock.advance(LEASE + Duration::from_secs(1));
    // B takes over and finds the unkeyed effect pending: it fails closed.
    let b_err = b.guard.call(&pay(10)).unwrap_err();
    assert!(matches!(b_err, Error::OutcomeUnknown { .. }), "{b_err:?}");
    // A's provider answers after A lost its lease: A is fenced, its answer is saved.
    release.send(()).unwrap();
    let a_answer = a_call.join().unwrap();
    assert!(
        matches!(a_answer, Err(Error::LeaseLost { .. })),
        "{a_answer:?}"
    );
    assert!(
        h_unresolved(&journal, &clock).is_empty(),
        "nothing for a person to resolve"
    );
    let retry = b.guard.call(&pay(10)).unwrap();
    let Outcome::Success { result, .. } = retry.outcome else {
        panic!("{:?}", retry.outcome)
    };
    assert_eq!(result["payload"], json!({"amount": 10}), "A's answer");
    assert_eq!(sms.attempts().len(), 1, "sent once");
}

/// Every first run records the component that ran it, whichever write journals the
/// call first: the claim of its first effect (one statement on PostgreSQL, which
/// left it out: issue 38, 3) or the outcome of a call without effects.
#[test]
fn the_first_run_journals_the_component_that_ran_it() {
    let mut runner = ScriptedRunner::default();
    pay_tool(&mut runner, "payments");
    runner.tool("echo", ScriptedRunner::open_schema(), |args, _| {
        returned(args.clone())
    });
    runner.component("pay", "sha256:0a");
    runner.component("echo", "sha256:0b");
    let payments = Downstream::new(ProviderClass::Keyed, vec![]);
    let h = host(runner, &[("payments", payments.clone())]);

    h.guard.call(&pay(10)).unwrap();
    h.guard
        .call(&CallRequest::new("echo", "{}").conversation("c1"))
        .unwrap();

    let entries = h.journal.entries(None, 10).unwrap();
    let component = |tool: &str| {
        entries
            .iter()
            .find(|e| e.tool == tool)
            .and_then(|e| e.component.clone())
    };
    assert_eq!(payments.applied().len(), 1);
    assert_eq!(component("pay").as_deref(), Some("sha256:0a"));
    assert_eq!(component("echo").as_deref(), Some("sha256:0b"));
}

/// A caller without a principal (a local `run --key`, a stdio client) passing a
/// principal's invocation key, which anyone can compute from the principal's name,
/// conversation, tool and arguments, is told `mismatch`: it neither reads the
/// principal's saved answer nor runs anything. The other way round, an outcome a
/// local caller planted under a principal's key first is never replayed to that
/// principal. The opposite cases: the principal's own retry replays, and a local
/// caller's retry of its own key replays.
#[test]
fn a_principals_key_passed_by_a_local_caller_is_a_mismatch_both_ways() {
    let mut runner = ScriptedRunner::default();
    let runs = pay_tool(&mut runner, "payments");
    let payments = Downstream::new(ProviderClass::Keyed, vec![]);
    let h = host(runner, &[("payments", payments.clone())]);
    let bobs = || pay(10).principal("bob");

    let first = h.guard.call(&bobs()).unwrap();
    let stolen = h.guard.call(&pay(10).key(first.key.to_string()));
    assert!(matches!(stolen, Err(Error::Mismatch { .. })), "{stolen:?}");
    let retry = h.guard.call(&bobs()).unwrap();
    assert!(retry.replayed);
    assert_eq!(retry.outcome, first.outcome);
    assert_eq!(
        (runs.load(Ordering::SeqCst), payments.applied().len()),
        (1, 1)
    );

    // A local caller goes first under the key bob's next call will have.
    let alices = pay(20).principal("alice");
    let planted_key = super::prepare::prepare(h.guard.runner.as_ref(), &alices, None)
        .unwrap()
        .key;
    let planted = h.guard.call(&pay(20).key(planted_key.to_string())).unwrap();
    assert!(!planted.replayed);
    let again = h.guard.call(&pay(20).key(planted_key.to_string())).unwrap();
    assert!(again.replayed, "the local caller's own retry replays");
    let refused = h.guard.call(&alices);
    assert!(
        matches!(refused, Err(Error::Mismatch { .. })),
        "{refused:?}"
    );
    assert_eq!(
        (runs.load(Ordering::SeqCst), payments.applied().len()),
        (2, 2)
    );
}

/// A keyed downstream that answers a repeated key with the first answer's meaning
/// but not its bytes, as real APIs do (`Date`, Stripe's `Idempotent-Replayed`): the
/// reply's number under its key rides along.
#[derive(Default)]
struct ReplyingDownstream {
    replies: Mutex<BTreeMap<String, u32>>,
}

impl Provider for ReplyingDownstream {
    fn class(&self) -> ProviderClass {
        ProviderClass::Keyed
    }

    fn perform(&self, request: &EffectRequest<'_>) -> Result<Value, ProviderError> {
        let mut replies = self.replies.lock().unwrap();
        let reply = replies.entry(request.key.to_string()).or_default();
        *reply += 1;
        Ok(json!({ "id": request.key.to_string(), "reply": *reply }))
    }
}

/// A run that pauses between two effects past its lease (a GC pause, a suspended
/// VM: no heartbeat beats outside a provider call) saves nothing when it wakes: the
/// run that took the call over asked the downstream again under the same key, got
/// an answer of the same meaning in other bytes, and handed its tool that one. The
/// journal holds the answer the tool of the saved outcome saw, so a resumed run
/// replays what that outcome was built from (issue 38, 2).
#[test]
fn a_run_that_paused_past_its_lease_saves_no_answer_over_the_one_the_taker_handed_its_tool() {
    type Pause = (mpsc::Sender<()>, mpsc::Receiver<()>);
    let pauses: Arc<Mutex<Vec<Pause>>> = Arc::default();
    let (a_paused, a_paused_rx) = mpsc::channel();
    let (a_wake, a_wake_rx) = mpsc::channel();
    let (b_paused, b_paused_rx) = mpsc::channel();
    let (b_wake, b_wake_rx) = mpsc::channel();
    // The first run to reach the pause is A's, the second B's.
    pauses
        .lock()
        .unwrap()
        .extend([(b_paused, b_wake_rx), (a_paused, a_wake_rx)]);
    let mut runner = ScriptedRunner::default();
    let between = Arc::clone(&pauses);
    runner.tool(
        "pay",
        ScriptedRunner::open_schema(),
        move |args, fx: &mut Effects<'_>| {
            let first = fx.perform("payments", "pay", args.clone());
            let pause = between.lock().unwrap().pop();
            if let Some((paused, wake)) = pause {
                paused.send(()).unwrap();
                wake.recv().unwrap();
            }
            let second = fx.perform("payments", "pay", json!({ "amount": 1 }));
            match (first, second) {
                (Ok(a), Ok(b)) => returned(json!([a, b])),
                other => tool_error("effect_failed", &format!("{other:?}")),
            }
        },
    );
    let runner = Arc::new(runner);
    let payments = Arc::new(ReplyingDownstream::default());
    let providers: [(&str, Arc<dyn Provider>); 1] = [("payments", payments.clone())];
    let clock = Arc::new(ManualClock::default());
    let journal = fresh_journal(&clock);
    let a = host_renewing(
        Arc::clone(&journal),
        clock.clone(),
        Arc::clone(&runner),
        &providers,
        None,
    );
    let b = Arc::new(host_on(
        Arc::clone(&journal),
        clock.clone(),
        runner,
        &providers,
    ));

    // A performs effect #0 and pauses before #1, past its lease.
    let a_call = std::thread::spawn(move || a.guard.call(&pay(10)));
    a_paused_rx.recv().unwrap();
    clock.advance(LEASE + Duration::from_secs(1));
    // B takes over, asks #0 again under its key, and pauses before #1 too.
    let b_call = {
        let b = Arc::clone(&b);
        std::thread::spawn(move || b.guard.call(&pay(10)))
    };
    b_paused_rx.recv().unwrap();
    // A wakes first: its next commit is refused, and must save nothing.
    a_wake.send(()).unwrap();
    let a_answer = a_call.join().unwrap();
    b_wake.send(()).unwrap();
    let b_answer = b_call.join().unwrap().unwrap();

    assert!(
        matches!(a_answer, Err(Error::LeaseLost { .. })),
        "{a_answer:?}"
    );
    let Outcome::Success { result, .. } = &b_answer.outcome else {
        panic!("{:?}", b_answer.outcome)
    };
    assert_eq!(
        result[0]["reply"], 2,
        "B's tool saw the downstream's second reply"
    );
    let entries = journal.entries(None, 10).unwrap();
    let recorded = entries[0].effects[0].response.as_ref().expect("answered");
    assert_eq!(
        recorded["ok"], result[0],
        "the journal holds what the tool of the saved outcome saw"
    );
    // Both runs asked under one key; the retry replays B's outcome.
    let replies = payments.replies.lock().unwrap().clone();
    assert_eq!(replies.get(&entries[0].effects[0].key), Some(&2));
    assert_eq!(replies.get(&entries[0].effects[1].key), Some(&1));
    let retry = b.guard.call(&pay(10)).unwrap();
    assert!(retry.replayed);
    assert_eq!(retry.outcome, b_answer.outcome);
}

/// A tool that performs `pay` twice on `provider` (the amount, then the amount + 1)
/// and returns both answers.
fn pay_twice_tool(runner: &mut ScriptedRunner, provider: &'static str) {
    runner.tool(
        "pay",
        ScriptedRunner::open_schema(),
        move |args, fx: &mut Effects<'_>| {
            let second = json!({ "amount": args["amount"].as_u64().unwrap_or(0) + 1 });
            match (
                fx.perform(provider, "pay", args.clone()),
                fx.perform(provider, "pay", second),
            ) {
                (Ok(a), Ok(b)) => returned(json!([a, b])),
                other => tool_error("effect_failed", &format!("{other:?}")),
            }
        },
    );
}

/// A keyed effect's answer is not a commit of its own: it is saved with the run's
/// next commit (the next effect's claim, or the outcome). A host that dies after
/// its guest finished, before that commit, leaves the effects pending, and the
/// retry asks the downstream again under the same keys, which it deduplicates. An
/// unkeyed effect's answer is saved before its guest goes on: the retry of a host
/// that died there replays it and sends nothing again.
#[test]
fn a_keyed_answer_is_saved_with_the_next_commit_and_an_unkeyed_one_at_once() {
    for (class, commits, attempts_after_crash) in
        [(ProviderClass::Keyed, 3, 3), (ProviderClass::Unkeyed, 5, 2)]
    {
        let mut runner = ScriptedRunner::default();
        pay_twice_tool(&mut runner, "payments");
        let runner = Arc::new(runner);
        let payments = Downstream::new(class, vec![]);
        let providers: [(&str, Arc<dyn Provider>); 1] = [("payments", payments.clone())];
        let clock = Arc::new(ManualClock::default());
        let journal = fresh_journal(&clock);
        let a = host_on(
            Arc::clone(&journal),
            clock.clone(),
            Arc::clone(&runner),
            &providers,
        );

        // Both effects and the outcome: claim, claim with the first answer, outcome
        // with the second (keyed); each answer a commit of its own (unkeyed).
        let before = journal.stats().commits;
        let first = a.guard.call(&pay(10)).unwrap();
        assert!(first.outcome.is_success(), "{:?}", first.outcome);
        assert_eq!(journal.stats().commits - before, commits, "{class:?}");
        let entry = &journal.entries(None, 1).unwrap()[0];
        assert!(
            entry.effects.iter().all(|e| e.state == "done"),
            "{class:?}: every answer is saved by the end: {:?}",
            entry.effects
        );

        // Host A dies after its guest finished, before the outcome is saved.
        clock.advance(Duration::from_secs(1));
        let crashed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let crash: crate::fault::Hook = std::rc::Rc::new(|point| {
                if point == crate::fault::FaultPoint::AfterRecord {
                    panic!("host A dies");
                }
            });
            crate::fault::with_hook(crash, || a.guard.call(&pay(20)))
        }));
        assert!(crashed.is_err(), "{class:?}: A died");
        let entry = &journal.entries(None, 1).unwrap()[0];
        let states: Vec<&str> = entry.effects.iter().map(|e| e.state.as_str()).collect();
        // The first keyed answer was saved with the second effect's claim.
        let expected = if class == ProviderClass::Keyed {
            ["done", "pending"]
        } else {
            ["done", "done"]
        };
        assert_eq!(states, expected, "{class:?}");
        let sent = payments.attempts().len();

        // B retries once A's lease expired: a success-shaped answer, each effect
        // applied once, every attempt of an effect under its one key.
        clock.advance(LEASE + Duration::from_secs(1));
        let b = host_on(journal, clock.clone(), runner, &providers);
        let retry = b.guard.call(&pay(20)).unwrap();
        assert!(!retry.replayed && retry.outcome.is_success(), "{retry:?}");
        let attempts = payments.attempts()[sent - 2..].to_vec();
        assert_eq!(
            attempts.len(),
            attempts_after_crash,
            "{class:?}: {attempts:?}"
        );
        if class == ProviderClass::Keyed {
            assert_eq!(attempts[1], attempts[2], "the retry carried the second key");
        }
        assert_eq!(
            payments.applied().len(),
            4,
            "{class:?}: two calls, two effects each"
        );
        let entry = &b.journal.entries(None, 1).unwrap()[0];
        assert_eq!(entry.state, "completed");
        assert!(entry.effects.iter().all(|e| e.state == "done"));
    }
}

/// A run whose lease ran out while its provider call was in flight, and whose
/// pending effect a person resolved meanwhile, keeps its lease (nobody took over)
/// but not its own answer: the journal keeps the first answer, the person's, and the
/// tool is handed that one, so its outcome agrees with what every resumed run replays.
#[test]
fn a_run_whose_effect_a_person_answered_meanwhile_hands_the_tool_the_recorded_answer() {
    let clock = Arc::new(ManualClock::default());
    let journal = fresh_journal(&clock);
    let (sms, HeldRace { b, a_call, release }) =
        held_race(ProviderClass::Unkeyed, &journal, &clock, clock.clone());
    clock.advance(LEASE + Duration::from_secs(1));
    let unresolved = h_unresolved(&journal, &clock);
    assert_eq!(
        unresolved.len(),
        1,
        "the stalled run's effect is unresolved"
    );
    journal
        .resolve(
            &unresolved[0].key,
            Resolution::Performed,
            &json!({"sent": "by hand"}),
            &ada(&b, false),
        )
        .unwrap();
    // A's provider answers now, with its own response.
    release.send(()).unwrap();
    let a_answer = a_call.join().unwrap().unwrap();
    let Outcome::Success { result, .. } = a_answer.outcome.clone() else {
        panic!("{:?}", a_answer.outcome)
    };
    assert_eq!(result, json!({"sent": "by hand"}), "the recorded answer");
    // The retry replays that outcome and attempts nothing.
    let retry = b.guard.call(&pay(10)).unwrap();
    assert!(retry.replayed);
    assert_eq!(retry.outcome, a_answer.outcome);
    assert_eq!(sms.attempts().len(), 1, "sent once");
}

fn h_unresolved(
    journal: &Arc<dyn Journal>,
    clock: &Arc<ManualClock>,
) -> Vec<crate::journal::UnresolvedEffect> {
    journal.unresolved(clock.now_ms()).unwrap()
}

/// Host B, and host A's call of `pay(10)` held in its provider until `release`.
struct HeldRace {
    b: Host,
    a_call: std::thread::JoinHandle<crate::error::Result<crate::call::CallResponse>>,
    release: mpsc::Sender<()>,
}

/// Two hosts on `journal` whose `pay` tool performs one effect on a downstream of
/// `class`: A on `a_clock`, renewing nothing (a paused host), B on `b_clock`. Starts
/// A's call and returns once its attempt reached the downstream, which holds it.
fn held_race(
    class: ProviderClass,
    journal: &Arc<dyn Journal>,
    a_clock: &Arc<ManualClock>,
    b_clock: Arc<ManualClock>,
) -> (Arc<Downstream>, HeldRace) {
    let mut runner = ScriptedRunner::default();
    pay_tool(&mut runner, "payments");
    let runner = Arc::new(runner);
    let (reached_tx, reached_rx) = mpsc::channel();
    let (release, release_rx) = mpsc::channel();
    let gate = Arc::new(Mutex::new(Some((reached_tx, release_rx))));
    let downstream = Downstream::new(class, vec![Fault::Hold(gate)]);
    let providers: [(&str, Arc<dyn Provider>); 1] = [("payments", downstream.clone())];
    let a = host_renewing(
        Arc::clone(journal),
        a_clock.clone(),
        Arc::clone(&runner),
        &providers,
        None,
    );
    let b = host_on(Arc::clone(journal), b_clock, runner, &providers);
    let a_call = std::thread::spawn(move || a.guard.call(&pay(10)));
    reached_rx.recv().unwrap();
    let race = HeldRace { b, a_call, release };
    (downstream, race)
}

// --- hosts whose clocks differ (PostgreSQL) -------------------------------------------

/// Two hosts on one PostgreSQL journal whose clocks differ by twice the lease: the
/// database's clock decides whether a lease is live, so the host whose clock runs
/// ahead waits for the other's run instead of taking it over.
#[test]
fn a_host_whose_clock_runs_twice_the_lease_ahead_does_not_take_over_a_live_lease() {
    run_on_postgres(
        "a_host_whose_clock_runs_twice_the_lease_ahead_does_not_take_over_a_live_lease",
        clock_ahead_by_twice_the_lease,
    );
}

fn clock_ahead_by_twice_the_lease() {
    let database = Arc::new(ManualClock::default());
    let journal = fresh_journal(&database);
    // A's clock agrees with the database's; B's runs two leases ahead.
    let behind = Arc::new(ManualClock::new(database.now_ms()));
    let ahead = Arc::new(ManualClock::new(
        database.now_ms() + 2 * LEASE.as_millis() as i64,
    ));
    let (payments, HeldRace { b, a_call, release }) =
        held_race(ProviderClass::Keyed, &journal, &behind, ahead);
    let b_err = b.guard.call(&pay(10)).unwrap_err();
    release.send(()).unwrap();
    let a_answer = a_call.join().unwrap().unwrap();

    assert!(
        matches!(b_err, Error::InProgress { .. }),
        "B waited: {b_err:?}"
    );
    assert_eq!(payments.attempts().len(), 1, "B never took over");
    assert!(a_answer.outcome.is_success());
    let retry = b.guard.call(&pay(10)).unwrap();
    assert!(retry.replayed, "B's retry gets A's outcome");
}

/// A host whose clock runs a day ahead neither expires a record early when it looks
/// a call up nor when it collects garbage: retention is measured on the database's
/// clock.
#[test]
fn a_host_whose_clock_runs_ahead_expires_nothing_early() {
    run_on_postgres(
        "a_host_whose_clock_runs_ahead_expires_nothing_early",
        clock_ahead_by_a_day,
    );
}

fn clock_ahead_by_a_day() {
    let mut runner = ScriptedRunner::default();
    pay_tool(&mut runner, "payments");
    let runner = Arc::new(runner);
    let payments = Downstream::new(ProviderClass::Keyed, vec![]);
    let database = Arc::new(ManualClock::default());
    let journal = fresh_journal(&database);
    let providers: [(&str, Arc<dyn Provider>); 1] = [("payments", payments.clone())];
    let on_time = host_on(
        Arc::clone(&journal),
        Arc::new(ManualClock::new(database.now_ms())),
        Arc::clone(&runner),
        &providers,
    );
    let day_ahead = database.now_ms() + (RETENTION + Duration::from_secs(3600)).as_millis() as i64;
    let ahead = host_on(
        Arc::clone(&journal),
        Arc::new(ManualClock::new(day_ahead)),
        runner,
        &providers,
    );
    let first = on_time.guard.call(&pay(10)).unwrap();

    let retry = ahead.guard.call(&pay(10)).unwrap();
    assert!(retry.replayed, "within retention on the database's clock");
    let report = journal.gc(day_ahead, RETENTION.as_millis() as i64).unwrap();
    assert_eq!(report.invocations, 0, "gc expired nothing early");
    let retry = on_time.guard.call(&pay(10)).unwrap();
    assert!(retry.replayed);
    assert_eq!(retry.outcome, first.outcome);
    assert_eq!(payments.applied().len(), 1);

    // The opposite: once the database's clock passes retention, gc removes it.
    database.advance(RETENTION);
    let report = journal.gc(0, RETENTION.as_millis() as i64).unwrap();
    assert_eq!(report.invocations, 1);
}

// --- rejected before the guest started -------------------------------------------

#[test]
fn a_call_refused_before_the_guest_starts_stores_nothing_and_may_succeed_later() {
    let mut runner = ScriptedRunner::default();
    let runs = runner.tool(
        "strict",
        json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
        |args, _| returned(args.clone()),
    );
    let h = host(runner, &[]);
    for (request, kind) in [
        (CallRequest::new("nope", "{}"), "unknown_tool"),
        (CallRequest::new("strict", "{not json"), "invalid_arguments"),
        (
            CallRequest::new("strict", r#"{"n":"x"}"#),
            "invalid_arguments",
        ),
        (
            CallRequest::new("strict", r#"{"n":1}"#).key("bad key!"),
            "invalid_key",
        ),
    ] {
        let err = h.guard.call(&request).unwrap_err();
        assert_eq!(err.kind(), kind, "{err}");
    }
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert!(
        h.journal.entries(None, 10).unwrap().is_empty(),
        "nothing stored"
    );
    let ok = h
        .guard
        .call(&CallRequest::new("strict", r#"{"n":1}"#))
        .unwrap();
    assert!(ok.outcome.is_success());
}

// --- outcome unknown after the retry budget -----------------------------------------

#[test]
fn an_unknown_outcome_is_not_saved_and_the_retry_resumes_under_the_same_key() {
    let mut runner = ScriptedRunner::default();
    let runs = pay_tool(&mut runner, "payments");
    let payments = Downstream::new(
        ProviderClass::Keyed,
        vec![Fault::LoseResponse, Fault::FailBefore, Fault::FailBefore],
    );
    let h = host(runner, &[("payments", payments.clone())]);

    let err = h.guard.call(&pay(10)).unwrap_err();
    assert!(
        matches!(err, Error::OutcomeUnknown { seq: 0, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("retrying the same call is safe"));
    let retry = h.guard.call(&pay(10)).unwrap();

    let attempts = payments.attempts();
    assert_eq!(attempts.len(), 4, "three attempts, then the retry's one");
    assert!(
        attempts.iter().all(|k| *k == attempts[0]),
        "one key: {attempts:?}"
    );
    assert_eq!(payments.applied().len(), 1, "the effect happened once");
    assert!(!retry.replayed, "the retry finished the call");
    assert!(retry.outcome.is_success(), "{:?}", retry.outcome);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[test]
fn a_throttled_downstream_is_retried_after_its_retry_after_under_the_same_key() {
    let mut runner = ScriptedRunner::default();
    pay_tool(&mut runner, "payments");
    let payments = Downstream::new(
        ProviderClass::Keyed,
        vec![Fault::Throttle(Duration::from_secs(3))],
    );
    let h = host(runner, &[("payments", payments.clone())]);
    let before = h.clock.now_ms();

    let answer = h.guard.call(&pay(10)).unwrap();

    let attempts = payments.attempts();
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[0], attempts[1]);
    assert!(h.clock.now_ms() - before >= 3000, "waited for Retry-After");
    assert!(answer.outcome.is_success());
}

// --- provider classes ----------------------------------------------------------------

#[test]
fn an_unkeyed_effect_whose_outcome_is_unknown_is_never_repeated_until_a_person_resolves_it() {
    let mut runner = ScriptedRunner::default();
    pay_tool(&mut runner, "sms");
    let sms = Downstream::new(ProviderClass::Unkeyed, vec![Fault::LoseResponse]);
    let h = host(runner, &[("sms", sms.clone())]);

    let first = h.guard.call(&pay(10)).unwrap_err();
    let second = h.guard.call(&pay(10)).unwrap_err();
    assert!(matches!(first, Error::OutcomeUnknown { .. }));
    assert!(matches!(second, Error::OutcomeUnknown { .. }));
    assert_eq!(sms.attempts().len(), 1, "attempted at most once");

    let unresolved = h.journal.unresolved(h.clock.now_ms()).unwrap();
    assert_eq!(unresolved.len(), 1);
    h.journal
        .resolve(
            &unresolved[0].key,
            Resolution::Performed,
            &json!({"sent": true}),
            &ada(&h, false),
        )
        .unwrap();
    let done = h.guard.call(&pay(10)).unwrap();
    assert_eq!(
        sms.attempts().len(),
        1,
        "the person's answer, not a new attempt"
    );
    let Outcome::Success { result, .. } = done.outcome else {
        panic!("{:?}", done.outcome)
    };
    assert_eq!(result, json!({"sent": true}));
}

/// An unkeyed downstream whose provider learns, after an attempt was given up,
/// what became of it (an upstream MCP server that answers past its timeout): still
/// running, then its answer.
struct AnsweredLate {
    inner: Arc<Downstream>,
    /// What it learned of the attempt under each key.
    learned: Mutex<Vec<(String, crate::provider::EarlierAttempt)>>,
    /// Where the guard asked it to hand late answers as they come.
    sink: Mutex<Option<crate::provider::LateAnswerSink>>,
}

impl AnsweredLate {
    fn new(inner: &Arc<Downstream>) -> Arc<Self> {
        Arc::new(Self {
            inner: Arc::clone(inner),
            learned: Mutex::default(),
            sink: Mutex::default(),
        })
    }

    /// Hands the guard the answer to the attempt under `key`, as it comes late:
    /// whether it was journaled.
    fn hears(&self, key: &str, answer: Result<Value, ProviderError>) -> bool {
        let sink = self.sink.lock().unwrap().clone();
        let sink = sink.expect("the guard asked for its late answers");
        sink(
            &crate::keys::EffectKey::from_stored(key.to_owned()),
            &answer,
        )
    }
}

impl Provider for AnsweredLate {
    fn class(&self) -> ProviderClass {
        ProviderClass::Unkeyed
    }

    fn perform(&self, request: &EffectRequest<'_>) -> Result<Value, ProviderError> {
        self.inner.perform(request)
    }

    fn earlier_attempt(
        &self,
        key: &crate::keys::EffectKey,
    ) -> Option<crate::provider::EarlierAttempt> {
        let mut learned = self.learned.lock().unwrap();
        let at = learned.iter().position(|(k, _)| k == key.as_str())?;
        match &learned[at].1 {
            crate::provider::EarlierAttempt::Running => {
                Some(crate::provider::EarlierAttempt::Running)
            }
            crate::provider::EarlierAttempt::Asking => {
                Some(crate::provider::EarlierAttempt::Asking)
            }
            crate::provider::EarlierAttempt::Answered(_) => Some(learned.remove(at).1),
        }
    }

    fn hand_late_answers_to(&self, sink: crate::provider::LateAnswerSink) {
        *self.sink.lock().unwrap() = Some(sink);
    }
}

/// A host whose pay tool sends on an unkeyed sms API that learns late of its
/// attempts, and a first call whose one attempt met `fault` (its outcome unknown),
/// of which the API learned `earlier`; the API, its late knowledge and the
/// attempt's key.
fn unknown_sms(
    fault: Fault,
    earlier: crate::provider::EarlierAttempt,
) -> (Host, Arc<Downstream>, Arc<AnsweredLate>, String) {
    let mut runner = ScriptedRunner::default();
    pay_tool(&mut runner, "sms");
    let inner = Downstream::new(ProviderClass::Unkeyed, vec![fault]);
    let sms = AnsweredLate::new(&inner);
    let h = host(runner, &[("sms", sms.clone())]);
    let first = h.guard.call(&pay(10)).unwrap_err();
    assert!(matches!(first, Error::OutcomeUnknown { .. }), "{first}");
    let key = inner.attempts()[0].clone();
    sms.learned.lock().unwrap().push((key.clone(), earlier));
    (h, inner, sms, key)
}

/// An unkeyed effect whose answer came after its attempt was given up: the retry
/// while it still runs is unknown and sends nothing; the retry after its answer
/// came is answered with it, saved as the effect's answer (replayed from then on),
/// and the effect is never sent again. The opposite: another call is sent.
#[test]
fn an_unkeyed_effect_answered_late_is_answered_from_that_answer_and_never_sent_again() {
    let (h, inner, sms, key) = unknown_sms(
        Fault::LoseResponse,
        crate::provider::EarlierAttempt::Running,
    );
    let running = h.guard.call(&pay(10)).unwrap_err();
    let Error::OutcomeUnknown { reason, .. } = &running else {
        panic!("{running}")
    };
    assert!(reason.contains("still running on sms"), "{reason}");

    sms.learned.lock().unwrap()[0].1 =
        crate::provider::EarlierAttempt::Answered(Ok(json!({ "sent": "late" })));
    let answered = h.guard.call(&pay(10)).unwrap();
    let Outcome::Success { result, .. } = &answered.outcome else {
        panic!("{:?}", answered.outcome)
    };
    assert_eq!(result, &json!({ "sent": "late" }));
    let again = h.guard.call(&pay(10)).unwrap();
    assert!(again.replayed, "saved as the outcome");
    assert_eq!(again.outcome, answered.outcome);
    assert_eq!(inner.attempts(), [key], "sent once, under one key");
    assert_eq!(inner.applied().len(), 1, "the effect happened once");

    // The opposite: another call is another effect, sent.
    let other = h.guard.call(&pay(11)).unwrap();
    assert!(other.outcome.is_success() && !other.replayed);
    let attempts = inner.attempts();
    assert_eq!(attempts.len(), 2);
    assert_ne!(attempts[0], attempts[1]);
}

/// A sweep's run never takes up an unkeyed effect whose downstream waits, parked,
/// on the person's answer to what it asked (a stdio upstream's `elicitation/create`
/// answered later): it could perform it, with no answer to give. It stops there,
/// sending nothing; the agent's call made again takes it up, under the same key,
/// and the effect happens once.
#[test]
fn a_sweep_never_takes_up_an_effect_parked_on_the_persons_answer() {
    let (h, inner, _sms, key) =
        unknown_sms(Fault::FailBefore, crate::provider::EarlierAttempt::Asking);

    let _ = h.guard.probe_call(&pay(10));
    assert_eq!(
        inner.attempts(),
        std::slice::from_ref(&key),
        "the sweep took nothing up"
    );
    let story = h
        .journal
        .story(&h.guard.key_for(&pay(10)).unwrap())
        .unwrap();
    let effect = &story.entry.unwrap().effects[0];
    assert_eq!(
        (effect.state.as_str(), effect.resolution.as_deref()),
        ("pending", None),
        "still unknown"
    );

    let resumed = h.guard.call(&pay(10)).unwrap();
    assert!(resumed.outcome.is_success(), "{:?}", resumed.outcome);
    assert_eq!(
        inner.attempts(),
        [key.clone(), key],
        "taken up under its key"
    );
    assert_eq!(inner.applied().len(), 1, "the effect happened once");
}

/// A late answer that comes while no run holds its call (the run that sent it gave
/// up and left the call resumable) is journaled as the effect's answer as it comes:
/// the retry on a host that restarted since (its provider remembers nothing) is
/// answered from the journal and sends nothing. A second answer does not replace
/// it. The effect happened once, under one key; the agent is told the late answer.
/// The opposite: another call is another effect, sent.
#[test]
fn a_late_answer_that_comes_while_no_run_holds_its_call_is_journaled_and_answers_a_retry_after_a_restart()
 {
    let mut runner = ScriptedRunner::default();
    pay_tool(&mut runner, "sms");
    let runner = Arc::new(runner);
    let inner = Downstream::new(ProviderClass::Unkeyed, vec![Fault::LoseResponse]);
    let sms = AnsweredLate::new(&inner);
    let clock = Arc::new(ManualClock::default());
    let journal = fresh_journal(&clock);
    let h = host_on(
        Arc::clone(&journal),
        Arc::clone(&clock),
        Arc::clone(&runner),
        &[("sms", sms.clone())],
    );

    let first = h.guard.call(&pay(10)).unwrap_err();
    assert!(matches!(first, Error::OutcomeUnknown { .. }), "{first}");
    let key = inner.attempts()[0].clone();
    assert!(
        sms.hears(&key, Ok(json!({ "sent": "late" }))),
        "journaled as it came"
    );
    assert!(
        !sms.hears(&key, Ok(json!({ "sent": "again" }))),
        "the first answer stays"
    );
    drop(h);

    // The host restarted: its provider learned nothing, the journal holds it.
    let restarted = host_on(
        journal,
        clock,
        runner,
        &[("sms", AnsweredLate::new(&inner))],
    );
    let answered = restarted.guard.call(&pay(10)).unwrap();
    let Outcome::Success { result, .. } = &answered.outcome else {
        panic!("{:?}", answered.outcome)
    };
    assert_eq!(result, &json!({ "sent": "late" }), "what the agent is told");
    assert!(!answered.replayed, "the call's first outcome");
    let again = restarted.guard.call(&pay(10)).unwrap();
    assert!(again.replayed && again.outcome == answered.outcome);
    assert_eq!(inner.attempts(), [key], "sent once, under one key");
    assert_eq!(inner.applied().len(), 1, "the effect happened once");

    // The opposite: another call is another effect, sent.
    let other = restarted.guard.call(&pay(11)).unwrap();
    assert!(other.outcome.is_success() && !other.replayed);
    let attempts = inner.attempts();
    assert_eq!(attempts.len(), 2);
    assert_ne!(attempts[0], attempts[1]);
}

/// A late answer that comes while a run holds its call is not journaled (that run
/// may hand its tool an answer of its own, which the record must hold): the
/// provider keeps it, and the run takes it at its attempt and saves it as an
/// answer in time. Nothing is sent again.
#[test]
fn a_late_answer_that_comes_while_a_run_holds_its_call_is_left_to_that_run() {
    let inner = Downstream::new(ProviderClass::Unkeyed, vec![Fault::LoseResponse]);
    let sms = AnsweredLate::new(&inner);
    let heard: Arc<Mutex<Option<bool>>> = Arc::default();
    let mut runner = ScriptedRunner::default();
    let (during, hearing) = (Arc::clone(&heard), Arc::clone(&sms));
    runner.tool(
        "pay",
        ScriptedRunner::open_schema(),
        move |args, fx: &mut Effects<'_>| {
            // A retry's run, holding the call: the late answer comes now.
            if let Some(key) = hearing.inner.attempts().first() {
                let journaled = hearing.hears(key, Ok(json!({ "sent": "late" })));
                *during.lock().unwrap() = Some(journaled);
                hearing.learned.lock().unwrap().push((
                    key.clone(),
                    crate::provider::EarlierAttempt::Answered(Ok(json!({ "sent": "late" }))),
                ));
            }
            match fx.perform("sms", "pay", args.clone()) {
                Ok(answer) => returned(answer),
                Err(other) => tool_error("effect_failed", &format!("{other:?}")),
            }
        },
    );
    let h = host(runner, &[("sms", sms.clone())]);
    let first = h.guard.call(&pay(10)).unwrap_err();
    assert!(matches!(first, Error::OutcomeUnknown { .. }), "{first}");
    assert_eq!(
        *heard.lock().unwrap(),
        None,
        "nothing came during the first run"
    );

    let answered = h.guard.call(&pay(10)).unwrap();
    assert_eq!(
        *heard.lock().unwrap(),
        Some(false),
        "not journaled while the run held the call"
    );
    let Outcome::Success { result, .. } = &answered.outcome else {
        panic!("{:?}", answered.outcome)
    };
    assert_eq!(result, &json!({ "sent": "late" }));
    assert_eq!(inner.attempts().len(), 1, "sent once");
    let effects = &h.journal.entries(None, 10).unwrap()[0].effects;
    assert_eq!(effects[0].state, "done");
}

/// The same downstream as the catalog describes it after a change (an upstream
/// tool's annotations after `list_changed` or a restart, an edited configuration):
/// another class, or a read. What reaches the downstream is `inner`'s, unchanged: a
/// "read" is recorded as an attempt with no key, and it applies the effect again.
struct Recataloged {
    inner: Arc<Downstream>,
    says: ProviderClass,
    says_read: bool,
}

impl Provider for Recataloged {
    fn class(&self) -> ProviderClass {
        self.says
    }

    fn perform(&self, request: &EffectRequest<'_>) -> Result<Value, ProviderError> {
        self.inner.perform(request)
    }

    fn unjournaled_read(&self, _operation: &str, _payload: &Value) -> bool {
        self.says_read
    }

    fn read(&self, request: &crate::provider::ReadRequest<'_>) -> Result<Value, ProviderError> {
        self.inner
            .attempts
            .lock()
            .unwrap()
            .push("(read, no key)".into());
        self.inner
            .applied
            .lock()
            .unwrap()
            .push("(read, no key)".into());
        Ok(json!({ "read": request.payload }))
    }
}

/// A host on `h`'s journal and clock whose catalog now says `pay`'s effect on
/// `provider` is `says` (a read when `says_read`, and the tool read-only with it).
fn recataloged(
    h: &Host,
    provider: &'static str,
    inner: &Arc<Downstream>,
    says: ProviderClass,
    says_read: bool,
) -> Host {
    let mut runner = ScriptedRunner::default();
    pay_tool(&mut runner, provider);
    if says_read {
        runner.read_only("pay");
    }
    let now: Arc<dyn Provider> = Arc::new(Recataloged {
        inner: Arc::clone(inner),
        says,
        says_read,
    });
    host_on(
        Arc::clone(&h.journal),
        h.clock.clone(),
        Arc::new(runner),
        &[(provider, now)],
    )
}

/// The one effect class the journal holds for the call of `amount`.
fn class_on_record(h: &Host, amount: u64) -> String {
    let entries = h.journal.entries(None, 100).unwrap();
    let entry = entries
        .iter()
        .find(|e| {
            e.arguments
                .as_ref()
                .is_some_and(|a| a["amount"] == json!(amount))
        })
        .expect("a record");
    entry.effects[0].class.clone()
}

/// A host whose `pay` on `provider` (a downstream of `class` that loses its first
/// `lost` responses, the retry budget) ended `outcome_unknown` for `pay(10)`.
fn unknown_on(
    provider: &'static str,
    class: ProviderClass,
    lost: usize,
) -> (Host, Arc<Downstream>) {
    let mut runner = ScriptedRunner::default();
    pay_tool(&mut runner, provider);
    let downstream = Downstream::new(class, vec![Fault::LoseResponse; lost]);
    let h = host(runner, &[(provider, downstream.clone())]);
    let first = h.guard.call(&pay(10)).unwrap_err();
    assert!(matches!(first, Error::OutcomeUnknown { .. }), "{first:?}");
    (h, downstream)
}

#[test]
fn an_unkeyed_effect_whose_tool_now_says_idempotent_is_not_sent_again() {
    let (before, sms) = unknown_on("sms", ProviderClass::Unkeyed, 1);

    // The tool now says `idempotentHint`: the catalog calls its effect keyed.
    let after = recataloged(&before, "sms", &sms, ProviderClass::Keyed, false);
    let retry = after.guard.call(&pay(10)).unwrap_err();

    let Error::OutcomeUnknown { ends_by, .. } = &retry else {
        panic!("the record's class decides: still unknown, got {retry:?}")
    };
    assert_eq!(*ends_by, crate::error::EndsBy::Person, "{retry}");
    assert!(
        retry.to_string().contains("until a person resolves it"),
        "{retry}"
    );
    assert_eq!(sms.attempts().len(), 1, "not sent again");
    assert_eq!(sms.applied().len(), 1, "the effect happened once");
    assert_eq!(class_on_record(&after, 10), "unkeyed");
    assert_eq!(
        after
            .journal
            .unresolved(after.clock.now_ms())
            .unwrap()
            .len(),
        1,
        "a person can still resolve it"
    );

    // The opposite: a new call is journaled with the class the catalog says now.
    let other = after.guard.call(&pay(20)).unwrap();
    assert!(other.outcome.is_success(), "{:?}", other.outcome);
    assert_eq!(sms.applied().len(), 2, "the other call happened");
    assert_eq!(class_on_record(&after, 20), "keyed");
}

/// Issue 54: a catalog that now disagrees with a pending effect's record is shown
/// with the effect (`justonce journal`, the console read it from the journal), the
/// record wins, and the note goes once the catalog agrees again.
#[test]
fn a_class_the_catalog_now_disagrees_with_is_shown_beside_the_record_which_wins() {
    let (before, sms) = unknown_on("sms", ProviderClass::Unkeyed, 1);
    let shown = |h: &Host| {
        let key = h.guard.key_for(&pay(10)).unwrap();
        let entry = h.journal.story(&key).unwrap().entry.unwrap();
        entry.effects[0].catalog_disagreement()
    };
    assert_eq!(
        shown(&before),
        None,
        "nothing to show before the catalog changes"
    );

    for (says, read, words) in [
        (ProviderClass::Keyed, false, "keyed (idempotent)"),
        (ProviderClass::Unkeyed, true, "read-only"),
    ] {
        let after = recataloged(&before, "sms", &sms, says, read);
        let retry = after.guard.call(&pay(10)).unwrap_err();
        assert!(matches!(retry, Error::OutcomeUnknown { .. }), "{retry:?}");
        assert_eq!(
            shown(&after).as_deref(),
            Some(
                format!("journaled as unkeyed; the catalog now says {words}; the record wins")
                    .as_str()
            )
        );
    }
    assert_eq!(sms.attempts().len(), 1, "the record won: never sent again");

    let agrees = recataloged(&before, "sms", &sms, ProviderClass::Unkeyed, false);
    agrees.guard.call(&pay(10)).unwrap_err();
    assert_eq!(shown(&agrees), None, "the catalog agrees again");
}

#[test]
fn an_effect_journaled_before_its_tool_said_read_only_is_never_sent_again_as_a_read() {
    let (before, sms) = unknown_on("sms", ProviderClass::Unkeyed, 1);

    // The tool now says `readOnlyHint`: its calls would be reads, with no record.
    let after = recataloged(&before, "sms", &sms, ProviderClass::Unkeyed, true);
    let retry = after.guard.call(&pay(10)).unwrap_err();

    assert!(
        matches!(retry, Error::OutcomeUnknown { .. }),
        "the call journaled an effect: it goes on from its record, got {retry:?}"
    );
    assert_eq!(
        sms.attempts().len(),
        1,
        "no read went out: {:?}",
        sms.attempts()
    );
    assert_eq!(class_on_record(&after, 10), "unkeyed");

    // The opposite: a call with no record runs as a read, and nothing is saved.
    let read = after.guard.call(&pay(20)).unwrap();
    assert!(read.outcome.is_success(), "{:?}", read.outcome);
    assert_eq!(sms.attempts()[1], "(read, no key)");
    assert_eq!(
        after.journal.entries(None, 10).unwrap().len(),
        1,
        "the read saved nothing"
    );
}

#[test]
fn a_completed_call_whose_tool_now_says_read_only_is_replayed_once_and_not_read() {
    let mut runner = ScriptedRunner::default();
    pay_tool(&mut runner, "sms");
    let sms = Downstream::new(ProviderClass::Unkeyed, vec![]);
    let before = host(runner, &[("sms", sms.clone())]);
    let first = before.guard.call(&pay(10)).unwrap();
    assert!(first.outcome.is_success(), "{:?}", first.outcome);

    // The tool now says `readOnlyHint`: its calls would be reads, with no record.
    let after = recataloged(&before, "sms", &sms, ProviderClass::Unkeyed, true);
    let retry = after.guard.call(&pay(10)).unwrap();

    assert!(retry.replayed, "the record's outcome, not a read");
    assert_eq!(retry.outcome, first.outcome);
    assert_eq!(sms.attempts().len(), 1, "nothing went out again");
    let entries = after.journal.entries(None, 10).unwrap();
    assert_eq!(entries[0].replays, 1, "the replay counted once");

    // The opposite: another call, with no record, is read.
    let read = after.guard.call(&pay(20)).unwrap();
    assert!(!read.replayed && read.outcome.is_success(), "{read:?}");
    assert_eq!(sms.attempts()[1], "(read, no key)");
}

#[test]
fn a_keyed_effect_whose_tool_lost_its_idempotent_mark_is_resent_under_its_key() {
    let (before, payments) = unknown_on("payments", ProviderClass::Keyed, 3);
    assert_eq!(payments.attempts().len(), 3, "the retry budget");

    // The tool no longer says `idempotentHint`: the catalog calls it unkeyed.
    let after = recataloged(
        &before,
        "payments",
        &payments,
        ProviderClass::Unkeyed,
        false,
    );
    let retry = after.guard.call(&pay(10)).unwrap();

    assert!(retry.outcome.is_success(), "{:?}", retry.outcome);
    assert!(!retry.replayed, "the retry ran");
    let attempts = payments.attempts();
    assert_eq!(attempts.len(), 4, "resent under its key: {attempts:?}");
    assert!(
        attempts.iter().all(|k| *k == attempts[0]),
        "one key: {attempts:?}"
    );
    assert_eq!(
        payments.applied().len(),
        1,
        "the downstream applied it once"
    );
    assert_eq!(class_on_record(&after, 10), "keyed");
    assert!(
        after
            .journal
            .unresolved(after.clock.now_ms())
            .unwrap()
            .is_empty(),
        "nothing for a person"
    );
}

#[test]
fn a_transactional_effect_commits_with_its_record_exactly_once() {
    let mut runner = ScriptedRunner::default();
    let runs = runner.tool("put", ScriptedRunner::open_schema(), |args, fx| {
        match fx.perform("kv", "put", json!({"key": "k", "value": args["v"]})) {
            Ok(answer) => returned(answer),
            Err(e) => tool_error("failed", &format!("{e:?}")),
        }
    });
    let h = host(runner, &[]);
    let put = |v: u32| CallRequest::new("put", json!({ "v": v }).to_string());

    let first = h.guard.call(&put(1)).unwrap();
    let retry = h.guard.call(&put(1)).unwrap();
    let other = h.guard.call(&put(2)).unwrap();

    assert!(retry.replayed);
    assert_eq!(retry.outcome, first.outcome);
    let Outcome::Success { result, .. } = other.outcome else {
        panic!()
    };
    assert_eq!(
        result["previous"],
        json!(1),
        "the first write happened once"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    let value = kv_value(&h.journal, "k");
    assert_eq!(value, Some(json!(2)));
}

// --- retention ---------------------------------------------------------------------

#[test]
fn past_retention_the_same_call_is_a_new_effect_under_a_new_downstream_key() {
    let mut runner = ScriptedRunner::default();
    let runs = pay_tool(&mut runner, "payments");
    let payments = Downstream::new(ProviderClass::Keyed, vec![]);
    let h = host(runner, &[("payments", payments.clone())]);

    let first = h.guard.call(&pay(10)).unwrap();
    // One millisecond before the end of retention it is still a replay.
    h.clock.advance(RETENTION - Duration::from_millis(1));
    assert!(h.guard.call(&pay(10)).unwrap().replayed);
    h.clock.advance(Duration::from_millis(1));
    let again = h.guard.call(&pay(10)).unwrap();

    assert!(!again.replayed, "past retention the call is new, by design");
    assert_eq!(again.key, first.key, "the same invocation key");
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    let attempts = payments.attempts();
    assert_eq!(attempts.len(), 2);
    assert_ne!(
        attempts[0], attempts[1],
        "a new generation, a new downstream key"
    );
    assert_eq!(
        payments.applied().len(),
        2,
        "a downstream that remembers keys still pays twice"
    );
}

// --- the window of a call --------------------------------------------------------

/// The window of a call that names no conversation, by default.
const UNSCOPED: Duration = Duration::from_secs(10 * 60);

/// `pay(amount)` without a conversation, as an MCP client that sends no `_meta` makes it.
fn pay_unscoped(amount: u64) -> CallRequest {
    CallRequest::new("pay", json!({ "amount": amount }).to_string())
}

#[test]
fn an_unscoped_call_is_a_replay_within_its_window_and_a_new_effect_after_it() {
    let mut runner = ScriptedRunner::default();
    let runs = pay_tool(&mut runner, "payments");
    let payments = Downstream::new(ProviderClass::Keyed, vec![Fault::LoseResponse]);
    let h = host(runner, &[("payments", payments.clone())]);

    let first = h.guard.call(&pay_unscoped(10)).unwrap();
    // The record says when it expires: its outcome's time plus its own window.
    let entry = h.journal.story(&first.key).unwrap().entry.unwrap();
    let expires_at = entry.completed_at.unwrap() + UNSCOPED.as_millis() as i64;
    assert_eq!(entry.expires_at, Some(expires_at));
    assert!(!entry.expired(expires_at - 1) && entry.expired(expires_at));
    // The agent retries one millisecond before the end of the window.
    h.clock.advance(UNSCOPED - Duration::from_millis(1));
    let retry = h.guard.call(&pay_unscoped(10)).unwrap();

    assert!(
        retry.replayed,
        "the retry happened and was answered from the journal"
    );
    assert_retried_once_under_one_key(&payments, &retry);
    assert_eq!(retry.outcome, first.outcome);

    // The same call the next morning is a new refund, under a new downstream key.
    h.clock.advance(Duration::from_millis(1));
    let again = h.guard.call(&pay_unscoped(10)).unwrap();
    assert!(!again.replayed, "past its window the unscoped call is new");
    assert_eq!(again.key, first.key, "the same invocation key");
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    let attempts = payments.attempts();
    assert_eq!(attempts.len(), 3);
    assert_ne!(
        attempts[2], attempts[0],
        "a new generation, a new downstream key"
    );
    assert_eq!(payments.applied().len(), 2);
}

#[test]
fn a_call_in_a_conversation_is_still_a_replay_when_an_unscoped_one_expired() {
    let mut runner = ScriptedRunner::default();
    let runs = pay_tool(&mut runner, "payments");
    let payments = Downstream::new(ProviderClass::Keyed, vec![Fault::LoseResponse]);
    let h = host(runner, &[("payments", payments.clone())]);

    let first = h.guard.call(&pay(10)).unwrap();
    h.clock.advance(UNSCOPED * 6);
    let retry = h.guard.call(&pay(10)).unwrap();

    assert!(retry.replayed, "the retry was answered from the journal");
    assert_retried_once_under_one_key(&payments, &retry);
    assert_eq!(retry.outcome, first.outcome);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[test]
fn a_tools_own_retention_replaces_both_windows() {
    let mut runner = ScriptedRunner::default();
    let runs = pay_tool(&mut runner, "payments");
    let payments = Downstream::new(ProviderClass::Keyed, vec![]);
    let own = Duration::from_secs(2 * 3600);
    let mut retention = Retention::new(RETENTION);
    retention.tools.insert("pay".into(), own);
    let h = host_keeping(runner, &[("payments", payments.clone())], retention);

    h.guard.call(&pay_unscoped(10)).unwrap();
    h.guard.call(&pay(10)).unwrap();
    h.clock.advance(own - Duration::from_millis(1));
    assert!(
        h.guard.call(&pay_unscoped(10)).unwrap().replayed,
        "longer than 10 min"
    );
    assert!(h.guard.call(&pay(10)).unwrap().replayed);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    h.clock.advance(Duration::from_millis(1));
    assert!(
        !h.guard.call(&pay_unscoped(10)).unwrap().replayed,
        "the tool's window ended"
    );
    assert!(
        !h.guard.call(&pay(10)).unwrap().replayed,
        "shorter than 24 h"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 4);
    let attempts = payments.attempts();
    assert_eq!(attempts.len(), 4);
    assert!(!attempts[..2].contains(&attempts[2]) && !attempts[..2].contains(&attempts[3]));
}

#[test]
fn a_record_journaled_without_its_own_window_keeps_the_hosts_retention() {
    let mut runner = ScriptedRunner::default();
    let runs = pay_tool(&mut runner, "payments");
    let payments = Downstream::new(ProviderClass::Keyed, vec![]);
    let h = host(runner, &[("payments", payments.clone())]);

    h.guard.call(&pay_unscoped(10)).unwrap();
    // As a journal written before records carried their window holds it.
    execute(&h.journal, "UPDATE invocations SET retention_ms = NULL");
    let entry = h.journal.entries(None, 10).unwrap().remove(0);
    assert_eq!(entry.expires_at, None, "it does not say when it expires");
    let gc = |h: &Host| {
        h.journal
            .gc(h.clock.now_ms(), RETENTION.as_millis() as i64)
            .unwrap()
            .invocations
    };
    h.clock.advance(UNSCOPED);
    assert!(h.guard.call(&pay_unscoped(10)).unwrap().replayed);
    assert_eq!(gc(&h), 0);
    h.clock
        .advance(RETENTION - UNSCOPED - Duration::from_millis(1));
    assert!(h.guard.call(&pay_unscoped(10)).unwrap().replayed);
    assert_eq!(gc(&h), 0);
    h.clock.advance(Duration::from_millis(1));
    assert_eq!(gc(&h), 1);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[test]
fn gc_deletes_each_record_at_the_end_of_its_own_window_and_not_before() {
    let mut runner = ScriptedRunner::default();
    pay_tool(&mut runner, "payments");
    let payments = Downstream::new(ProviderClass::Keyed, vec![]);
    let h = host(runner, &[("payments", payments.clone())]);
    let gc = |h: &Host| {
        h.journal
            .gc(h.clock.now_ms(), RETENTION.as_millis() as i64)
            .unwrap()
            .invocations
    };

    h.guard.call(&pay_unscoped(10)).unwrap();
    h.guard.call(&pay(10)).unwrap();
    h.clock.advance(UNSCOPED - Duration::from_millis(1));
    assert_eq!(gc(&h), 0, "both are inside their windows");
    h.clock.advance(Duration::from_millis(1));
    assert_eq!(gc(&h), 1, "the unscoped record's window ended");
    assert!(
        h.guard.call(&pay(10)).unwrap().replayed,
        "gc kept the conversation's"
    );
    h.clock
        .advance(RETENTION - UNSCOPED - Duration::from_millis(1));
    assert_eq!(gc(&h), 0, "the conversation's record is inside its window");
    h.clock.advance(Duration::from_millis(1));
    assert_eq!(gc(&h), 1, "the conversation's record's window ended");
    assert!(!h.guard.call(&pay(10)).unwrap().replayed);
}

// --- tools that only read --------------------------------------------------------

#[test]
fn a_read_only_tool_runs_every_time_and_nothing_of_it_is_saved() {
    let mut runner = ScriptedRunner::default();
    let runs = runner.tool("balance", ScriptedRunner::open_schema(), |args, _| {
        returned(json!({ "balance": 42, "of": args }))
    });
    runner.read_only("balance");
    let h = host(runner, &[]);
    let request = CallRequest::new("balance", r#"{"account":"a1"}"#).conversation("c1");

    let first = h.guard.call(&request).unwrap();
    let second = h.guard.call(&request).unwrap();

    assert!(!first.replayed && !second.replayed, "no replay");
    assert_eq!(runs.load(Ordering::SeqCst), 2, "both calls ran");
    assert!(second.outcome.is_success(), "{:?}", second.outcome);
    assert_eq!(first.key, second.key, "the key is still derived (for logs)");
    assert!(
        h.journal.entries(None, 10).unwrap().is_empty(),
        "nothing saved"
    );
}

#[test]
fn a_read_only_tool_that_asks_for_an_effect_traps_and_nothing_is_performed() {
    let mut runner = ScriptedRunner::default();
    pay_tool(&mut runner, "payments");
    runner.read_only("pay");
    let payments = Downstream::new(ProviderClass::Keyed, vec![]);
    let h = host(runner, &[("payments", payments.clone())]);

    let answer = h.guard.call(&pay(10)).unwrap();

    match &answer.outcome {
        Outcome::Trap { reason, message } => {
            assert_eq!(reason, "read_only_effect");
            assert!(
                message.contains("`pay` is marked read-only") && message.contains("payments.pay"),
                "{message}"
            );
        }
        other => panic!("expected a trap, got {other:?}"),
    }
    assert!(
        payments.attempts().is_empty(),
        "nothing reached the downstream"
    );
    assert!(
        h.journal.entries(None, 10).unwrap().is_empty(),
        "nothing saved"
    );
}

/// A host whose keyed payment lands, its response lost, and whose retries within
/// the budget fail: the first call's outcome is unknown.
fn stuck_payment() -> (Host, Arc<Downstream>) {
    let mut runner = ScriptedRunner::default();
    pay_tool(&mut runner, "payments");
    let payments = Downstream::new(
        ProviderClass::Keyed,
        vec![Fault::LoseResponse, Fault::FailBefore, Fault::FailBefore],
    );
    (host(runner, &[("payments", payments.clone())]), payments)
}

#[test]
fn a_call_left_open_never_expires_and_gc_keeps_it() {
    let (h, payments) = stuck_payment();

    assert!(
        h.guard.call(&pay(10)).is_err(),
        "left open, outcome unknown"
    );
    h.clock.advance(RETENTION * 3);
    let removed = h
        .journal
        .gc(h.clock.now_ms(), RETENTION.as_millis() as i64)
        .unwrap();
    assert_eq!(removed.invocations, 0, "gc keeps an open call");
    let done = h.guard.call(&pay(10)).unwrap();

    let attempts = payments.attempts();
    assert!(
        attempts.iter().all(|k| *k == attempts[0]),
        "resumed under the same key"
    );
    assert_eq!(payments.applied().len(), 1);
    assert!(done.outcome.is_success());
    // Completed now, it expires a retention after completion, not after creation.
    h.clock.advance(RETENTION - Duration::from_millis(1));
    assert_eq!(
        h.journal
            .gc(h.clock.now_ms(), RETENTION.as_millis() as i64)
            .unwrap()
            .invocations,
        0
    );
    h.clock.advance(Duration::from_millis(1));
    assert_eq!(
        h.journal
            .gc(h.clock.now_ms(), RETENTION.as_millis() as i64)
            .unwrap()
            .invocations,
        1
    );
}

// --- divergence and determinism ---------------------------------------------------------

#[test]
fn a_resumed_guest_that_asks_for_another_effect_is_refused_as_a_divergence() {
    let mut runner = ScriptedRunner::default();
    let calls = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let seen = Arc::clone(&calls);
    runner.tool("drift", ScriptedRunner::open_schema(), move |_, fx| {
        // The second run asks for a different payload at the same position.
        let n = seen.fetch_add(1, Ordering::SeqCst);
        match fx.perform("payments", "pay", json!({ "run": n })) {
            Ok(v) => returned(v),
            Err(e) => tool_error("failed", &format!("{e:?}")),
        }
    });
    let payments = Downstream::new(
        ProviderClass::Keyed,
        vec![Fault::FailBefore, Fault::FailBefore, Fault::FailBefore],
    );
    let h = host(runner, &[("payments", payments.clone())]);
    let request = CallRequest::new("drift", "{}");

    assert!(matches!(
        h.guard.call(&request),
        Err(Error::OutcomeUnknown { .. })
    ));
    let err = h.guard.call(&request).unwrap_err();

    assert!(matches!(err, Error::Divergence { seq: 0, .. }), "{err:?}");
    assert_eq!(
        payments.attempts().len(),
        3,
        "nothing performed under the old key"
    );
}

#[test]
fn a_resumed_run_sees_the_clock_its_first_run_saw() {
    let mut runner = ScriptedRunner::default();
    let starts = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&starts);
    runner.tool("stamp", ScriptedRunner::open_schema(), move |_, fx| {
        seen.lock().unwrap().push(fx.started_ms());
        match fx.perform("payments", "pay", json!({ "at": fx.started_ms() })) {
            Ok(v) => returned(v),
            Err(e) => tool_error("failed", &format!("{e:?}")),
        }
    });
    let payments = Downstream::new(
        ProviderClass::Keyed,
        vec![Fault::FailBefore, Fault::FailBefore, Fault::FailBefore],
    );
    let h = host(runner, &[("payments", payments.clone())]);
    let request = CallRequest::new("stamp", "{}");

    assert!(h.guard.call(&request).is_err());
    h.clock.advance(Duration::from_secs(30));
    let done = h.guard.call(&request).unwrap();

    let starts = starts.lock().unwrap().clone();
    assert_eq!(starts.len(), 2);
    assert_eq!(starts[0], starts[1], "the journaled start");
    assert!(
        done.outcome.is_success(),
        "no divergence: {:?}",
        done.outcome
    );
}

// --- host faults --------------------------------------------------------------------

#[test]
fn an_effect_the_configuration_refuses_is_not_saved_and_succeeds_once_it_is_fixed() {
    let mut runner = ScriptedRunner::default();
    let runs = pay_tool(&mut runner, "payments");
    let runner = Arc::new(runner);
    let clock = Arc::new(ManualClock::default());
    let journal = fresh_journal(&clock);
    // A host without the provider configured.
    let misconfigured = host_on(
        Arc::clone(&journal),
        clock.clone(),
        Arc::clone(&runner),
        &[],
    );

    let err = misconfigured.guard.call(&pay(10)).unwrap_err();
    assert!(matches!(err, Error::NotPerformed { seq: 0, .. }), "{err:?}");
    assert!(err.retry_safe());
    assert!(
        err.to_string().contains("no provider named `payments`"),
        "{err}"
    );
    assert!(
        journal.entries(None, 10).unwrap().is_empty(),
        "nothing saved as the outcome"
    );

    // The configuration is fixed: the same call runs and succeeds.
    let payments = Downstream::new(ProviderClass::Keyed, vec![]);
    let fixed = host_on(journal, clock, runner, &[("payments", payments.clone())]);
    let done = fixed.guard.call(&pay(10)).unwrap();
    assert!(
        !done.replayed && done.outcome.is_success(),
        "{:?}",
        done.outcome
    );
    assert_eq!(payments.applied().len(), 1);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[test]
fn a_refused_connection_is_known_not_performed_and_the_retry_performs_it_once() {
    let mut runner = ScriptedRunner::default();
    pay_tool(&mut runner, "sms");
    // Unkeyed: a refused connection sent nothing, so a later attempt is safe.
    let sms = Downstream::new(ProviderClass::Unkeyed, vec![Fault::Refused]);
    let h = host(runner, &[("sms", sms.clone())]);

    let err = h.guard.call(&pay(10)).unwrap_err();
    assert!(matches!(err, Error::NotPerformed { .. }), "{err:?}");
    assert!(err.to_string().contains("nothing was sent"), "{err}");
    assert!(
        h.journal.unresolved(h.clock.now_ms()).unwrap().is_empty(),
        "no person needed"
    );
    let done = h.guard.call(&pay(10)).unwrap();

    assert!(done.outcome.is_success(), "{:?}", done.outcome);
    assert_eq!(sms.attempts().len(), 2, "the retry happened");
    assert_eq!(sms.applied().len(), 1, "performed once");
}

#[test]
fn a_component_asking_for_an_upstreams_provider_is_refused_and_only_the_gateway_reaches_it() {
    // An upstream's provider holds the operator's credentials for any of its tools:
    // a component tool naming it is refused as if it were not configured (nothing
    // reaches the upstream, nothing is saved); the gateway's own call goes through.
    let mut runner = ScriptedRunner::default();
    pay_tool(&mut runner, "mcp:ledger");
    runner.tool(
        "ledger_pay",
        ScriptedRunner::open_schema(),
        |args, fx: &mut Effects<'_>| match fx.perform_upstream("mcp:ledger", "pay", args.clone()) {
            Ok(answer) => returned(answer),
            Err(other) => tool_error("effect_failed", &format!("{other:?}")),
        },
    );
    let ledger = Downstream::new(ProviderClass::Keyed, vec![]);
    let h = host(runner, &[("mcp:ledger", ledger.clone())]);

    let err = h.guard.call(&pay(10)).unwrap_err();
    assert!(matches!(err, Error::NotPerformed { seq: 0, .. }), "{err:?}");
    assert!(
        err.to_string().contains("no provider named `mcp:ledger`"),
        "{err}"
    );
    assert!(
        !err.to_string().contains("this host has: mcp:"),
        "a guest is not told of the upstreams: {err}"
    );
    assert!(ledger.attempts().is_empty(), "nothing reached the upstream");
    assert!(
        h.journal.entries(None, 10).unwrap().is_empty(),
        "nothing saved as the outcome"
    );

    // The opposite case: the upstream tool's own call performs its effect.
    let mut gateway_call = pay(10);
    gateway_call.tool = "ledger_pay".into();
    let done = h.guard.call(&gateway_call).unwrap();
    assert!(done.outcome.is_success(), "{:?}", done.outcome);
    assert_eq!(ledger.applied().len(), 1, "the gateway's call reached it");
}

// --- operators: forget and abandon (issue 17) -----------------------------------------

use crate::journal::{Action, Operated, Operator};

fn ada(h: &Host, force: bool) -> Operator<'static> {
    Operator {
        by: "ada",
        force,
        now: h.clock.now_ms(),
    }
}

/// A downstream that refuses every request before doing anything (a definitive
/// refusal, saved as `{"denied": …}`).
struct Refusing;

impl Provider for Refusing {
    fn class(&self) -> ProviderClass {
        ProviderClass::Keyed
    }

    fn perform(&self, _: &EffectRequest<'_>) -> Result<Value, ProviderError> {
        Err(ProviderError::Invalid("amount over the limit".into()))
    }
}

#[test]
fn a_forgotten_call_runs_again_under_new_downstream_keys_and_the_journal_says_who() {
    let mut runner = ScriptedRunner::default();
    let runs = pay_tool(&mut runner, "payments");
    let payments = Downstream::new(ProviderClass::Keyed, vec![]);
    let h = host(runner, &[("payments", payments.clone())]);
    let first = h.guard.call(&pay(10)).unwrap();
    assert!(h.guard.call(&pay(10)).unwrap().replayed, "remembered first");

    let forgotten = h.journal.forget(&first.key, &ada(&h, false)).unwrap();
    let again = h.guard.call(&pay(10)).unwrap();

    let Operated::Done(op) = forgotten else {
        panic!("{forgotten:?}")
    };
    assert_eq!((op.action, op.by.as_str()), (Action::Forget, "ada"));
    assert_eq!(op.detail["state"], "completed");
    assert_eq!(op.detail["effects"][0]["performed"], "performed");
    assert!(!again.replayed, "forget lets the same call run again");
    assert_eq!(again.key, first.key, "under the same invocation key");
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    let attempts = payments.attempts();
    assert_eq!(attempts.len(), 2);
    assert_ne!(
        attempts[0], attempts[1],
        "a new generation: the effect goes downstream under a new key"
    );
    let story = h.journal.story(&first.key).unwrap();
    assert_eq!(story.entry.unwrap().effects[0].key, attempts[1]);
    assert_eq!(
        story.operations,
        vec![op],
        "the audit trail outlives the record"
    );
}

#[test]
fn forget_is_refused_for_an_effect_whose_outcome_is_unknown_and_allowed_with_force() {
    let (h, _) = stuck_payment();
    let Err(Error::OutcomeUnknown { key, .. }) = h.guard.call(&pay(10)) else {
        panic!("the outcome should be unknown")
    };

    let refused = h.journal.forget(&key, &ada(&h, false)).unwrap_err();
    let Error::CannotOperate { action, reason, .. } = &refused else {
        panic!("{refused:?}")
    };
    assert_eq!(*action, "forget");
    assert!(
        reason.contains("effect #0") && reason.contains("--force"),
        "{reason}"
    );
    let story = h.journal.story(&key).unwrap();
    assert!(story.entry.is_some(), "a refusal changes nothing");
    assert!(story.operations.is_empty(), "and records nothing");

    let forced = h.journal.forget(&key, &ada(&h, true)).unwrap();
    let Operated::Done(op) = forced else {
        panic!("{forced:?}")
    };
    assert_eq!(op.detail["forced"], true);
    assert_eq!(op.detail["effects"][0]["performed"], "unknown");
    assert!(h.journal.story(&key).unwrap().entry.is_none());
    // A second forget finds nothing left to do and says who did it.
    assert!(matches!(
        h.journal.forget(&key, &ada(&h, false)).unwrap(),
        Operated::AlreadyDone(ref earlier) if *earlier == op
    ));
}

#[test]
fn forget_and_abandon_are_refused_for_a_running_call_unless_forced_and_the_run_is_fenced() {
    let mut runner = ScriptedRunner::default();
    pay_tool(&mut runner, "payments");
    let (reached_tx, reached_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel();
    let gate = Arc::new(Mutex::new(Some((reached_tx, release_rx))));
    let payments = Downstream::new(ProviderClass::Keyed, vec![Fault::Hold(gate)]);
    let h = Arc::new(host(runner, &[("payments", payments.clone())]));
    let running = {
        let h = Arc::clone(&h);
        std::thread::spawn(move || h.guard.call(&pay(10)))
    };
    reached_rx.recv().unwrap();
    let key = h.journal.entries(None, 1).unwrap()[0].key.clone();
    let key = crate::keys::InvocationKey::parse(&key).unwrap();

    for refused in [
        h.journal.forget(&key, &ada(&h, false)).unwrap_err(),
        h.journal.abandon(&key, &ada(&h, false)).unwrap_err(),
    ] {
        assert!(
            refused.to_string().contains("running right now"),
            "{refused}"
        );
    }
    let abandoned = h.journal.abandon(&key, &ada(&h, true)).unwrap();
    release_tx.send(()).unwrap();
    let fenced = running.join().unwrap();

    assert!(matches!(abandoned, Operated::Done(_)));
    assert!(
        matches!(fenced, Err(Error::LeaseLost { .. })),
        "the run lost its lease and answered nothing: {fenced:?}"
    );
    let replay = h.guard.call(&pay(10)).unwrap();
    assert!(replay.replayed);
    assert!(
        matches!(&replay.outcome, Outcome::Trap { reason, message }
            if reason == "abandoned" && message.contains("outcome is unknown")),
        "{:?}",
        replay.outcome
    );
}

#[test]
fn an_abandoned_call_replays_an_abandoned_outcome_that_lists_its_effects() {
    let mut runner = ScriptedRunner::default();
    let runs = runner.tool("two", ScriptedRunner::open_schema(), |_, fx| {
        let paid = fx.perform("payments", "pay", json!({"n": 1}));
        let sent = fx.perform("sms", "send", json!({"n": 2}));
        match (paid, sent) {
            (Ok(_), Ok(v)) => returned(v),
            (_, Err(e)) | (Err(e), _) => tool_error("failed", &format!("{e:?}")),
        }
    });
    let payments = Downstream::new(ProviderClass::Keyed, vec![]);
    let sms = Downstream::new(ProviderClass::Unkeyed, vec![Fault::LoseResponse]);
    let h = host(
        runner,
        &[("payments", payments.clone()), ("sms", sms.clone())],
    );
    let request = CallRequest::new("two", "{}");
    let Err(Error::OutcomeUnknown { key, .. }) = h.guard.call(&request) else {
        panic!("the sms outcome should be unknown")
    };
    assert_eq!(h.journal.unresolved(h.clock.now_ms()).unwrap().len(), 1);
    let effect_keys = effect_keys(&h);

    let done = h.journal.abandon(&key, &ada(&h, false)).unwrap();
    let retry = h.guard.call(&request).unwrap();
    let again = h.journal.abandon(&key, &ada(&h, false)).unwrap();

    assert!(retry.replayed, "an abandoned outcome is an outcome");
    let Outcome::Trap { reason, message } = &retry.outcome else {
        panic!("{:?}", retry.outcome)
    };
    assert_eq!(reason, "abandoned");
    assert!(
        message.starts_with("abandoned by ada at 2026-01-01T"),
        "{message}"
    );
    assert!(
        message.contains(&format!(
            "effects performed: #0 payments.pay (key {})",
            effect_keys[0]
        )),
        "{message}"
    );
    assert!(
        message.contains(&format!(
            "unknown (they may have been performed): #1 sms.send (key {})",
            effect_keys[1]
        )),
        "{message}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1, "nothing ran again");
    assert_eq!((payments.attempts().len(), sms.attempts().len()), (1, 1));
    assert!(
        h.journal.unresolved(h.clock.now_ms()).unwrap().is_empty(),
        "no retry will resume it: nothing waits for a person"
    );
    let Operated::Done(op) = done else {
        panic!("{done:?}")
    };
    assert_eq!(op.detail["state"], "incomplete");
    assert!(matches!(again, Operated::AlreadyDone(ref earlier) if *earlier == op));
    let story = h.journal.story(&key).unwrap();
    assert_eq!(
        story.operations.len(),
        1,
        "a second abandon records nothing"
    );
    assert_eq!(
        story.entry.unwrap().summary.unwrap(),
        format!("trap abandoned: {message}")
    );
}

#[test]
fn a_resolve_is_in_its_calls_operations_with_who_and_what_and_an_abandoned_calls_effect_is_refused()
{
    let mut runner = ScriptedRunner::default();
    pay_tool(&mut runner, "sms");
    let sms = Downstream::new(
        ProviderClass::Unkeyed,
        vec![Fault::LoseResponse, Fault::LoseResponse],
    );
    let h = host(runner, &[("sms", sms.clone())]);
    // Two calls, each stopped on an effect whose outcome is unknown.
    let Err(Error::OutcomeUnknown { key: resolved, .. }) = h.guard.call(&pay(10)) else {
        panic!("the first sms outcome should be unknown")
    };
    let Err(Error::OutcomeUnknown { key: abandoned, .. }) = h.guard.call(&pay(11)) else {
        panic!("the second sms outcome should be unknown")
    };
    let unresolved = h.journal.unresolved(h.clock.now_ms()).unwrap();
    let effect_of = |call: &crate::keys::InvocationKey| {
        unresolved
            .iter()
            .find(|e| e.invocation == call.as_str())
            .expect("each call waits for a person")
            .key
            .clone()
    };
    let (first, second) = (effect_of(&resolved), effect_of(&abandoned));

    let done = h
        .journal
        .resolve(
            &first,
            Resolution::Performed,
            &json!({"sent": "by hand"}),
            &ada(&h, false),
        )
        .unwrap();
    let Operated::Done(op) = done else {
        panic!("{done:?}")
    };
    assert_eq!(
        (op.action, op.by.as_str(), op.key.as_str(), op.at),
        (Action::Resolve, "ada", resolved.as_str(), h.clock.now_ms())
    );
    assert_eq!(op.detail["effect"]["key"], first.as_str());
    assert_eq!(op.detail["effect"]["provider"], "sms");
    assert_eq!(op.detail["resolution"], "performed");
    assert_eq!(op.detail["response"], json!({"sent": "by hand"}));
    assert_eq!(
        h.journal.story(&resolved).unwrap().operations,
        std::slice::from_ref(&op)
    );

    // Why resolving `effect` is refused.
    let refused = |effect: &str| match h.journal.resolve(
        effect,
        Resolution::NotPerformed,
        &Value::Null,
        &ada(&h, false),
    ) {
        Err(Error::CannotResolve { reason, .. }) => reason,
        other => panic!("resolving {effect} should be refused: {other:?}"),
    };
    // Resolved already: refused, and nothing more is recorded.
    assert!(refused(&first).contains("definitive answer"));
    assert_eq!(h.journal.story(&resolved).unwrap().operations.len(), 1);

    // A call closed by `abandon` replays its outcome: its effect is no one's to resolve.
    h.journal.abandon(&abandoned, &ada(&h, false)).unwrap();
    assert!(refused(&second).contains("abandoned"));
    let actions: Vec<Action> = h
        .journal
        .story(&abandoned)
        .unwrap()
        .operations
        .iter()
        .map(|o| o.action)
        .collect();
    assert_eq!(actions, [Action::Abandon]);

    // The retry gets the person's answer; nothing is sent again.
    let retry = h.guard.call(&pay(10)).unwrap();
    assert_eq!(
        retry.outcome,
        Outcome::Success {
            result: json!({"sent": "by hand"}),
            content: None
        }
    );
    assert_eq!(sms.attempts().len(), 2, "one attempt per call");
}

#[test]
fn abandon_of_a_completed_or_unknown_call_and_forget_of_an_unknown_one_are_refused() {
    let mut runner = ScriptedRunner::default();
    pay_tool(&mut runner, "payments");
    let payments = Downstream::new(ProviderClass::Keyed, vec![]);
    let h = host(runner, &[("payments", payments.clone())]);
    let done = h.guard.call(&pay(10)).unwrap();
    let never = crate::keys::InvocationKey::parse(&"0".repeat(32)).unwrap();

    let completed = h.journal.abandon(&done.key, &ada(&h, true)).unwrap_err();
    assert!(
        completed.to_string().contains("outcome of its own"),
        "{completed}"
    );
    assert!(
        h.guard.call(&pay(10)).unwrap().outcome.is_success(),
        "unchanged"
    );
    for refused in [
        h.journal.abandon(&never, &ada(&h, true)).unwrap_err(),
        h.journal.forget(&never, &ada(&h, true)).unwrap_err(),
    ] {
        assert!(
            refused.to_string().contains("no call with this key"),
            "{refused}"
        );
    }
    assert!(h.journal.story(&never).unwrap().operations.is_empty());
}

#[test]
fn the_journal_counts_the_replays_it_answers_and_shows_a_refused_effect_as_refused() {
    let mut runner = ScriptedRunner::default();
    pay_tool(&mut runner, "payments");
    let h = host(runner, &[("payments", Arc::new(Refusing))]);
    let first = h.guard.call(&pay(10)).unwrap();

    // A retry with a tool-call id always reaches the journal; a plain retry reaches it
    // once on SQLite, then this process answers from its memory of recent outcomes
    // and counts those replays there until the counts are read.
    let with_id = pay(10).tool_call_id("call-1");
    for _ in 0..2 {
        assert!(h.guard.call(&with_id).unwrap().replayed);
    }
    for _ in 0..3 {
        assert!(h.guard.call(&pay(10)).unwrap().replayed);
    }

    let entry = h.journal.story(&first.key).unwrap().entry.unwrap();
    // Both journals count every replay, whether it was answered from memory.
    assert_eq!(entry.replays, 5, "two with the id, three plain");
    assert_eq!(entry.arguments, Some(json!({"amount": 10})));
    assert_eq!(entry.effects[0].state, "refused");
    assert_eq!(
        entry.effects[0].response,
        Some(json!({"denied": "payments refused the request: amount over the limit"}))
    );
    assert_eq!(
        entry.summary.as_deref(),
        Some(
            "tool_error effect_failed: Denied(\"payments refused the request: amount over the limit\")"
        )
    );
}

// --- replays from memory alone ---------------------------------------------------

/// What a replay from memory says of `request`: `None` when not remembered.
fn from_memory(h: &Host, request: &CallRequest) -> Option<crate::call::CallResponse> {
    h.guard
        .replay_from_memory(request)
        .map(|answer| answer.expect("a replay from memory of a readable outcome"))
}

#[test]
fn a_replay_from_memory_answers_exactly_as_the_call_does() {
    let mut runner = ScriptedRunner::default();
    let runs = pay_tool(&mut runner, "payments");
    let payments = Downstream::new(ProviderClass::Keyed, vec![]);
    let h = host(runner, &[("payments", payments.clone())]);
    let replays = || counted(&h, r#"justonce_calls_total{tool="pay",outcome="replayed"}"#);
    let first = h.guard.call(&pay(10)).unwrap();
    assert!(
        from_memory(&h, &pay(10)).is_none(),
        "a call that ran is not remembered until it replays"
    );
    let called = h.guard.call(&pay(10)).unwrap();
    assert!(called.replayed, "replayed through the journal");

    let log = SpanLog::default();
    let remembered = traced(&log, || from_memory(&h, &pay(10))).expect("remembered");
    let normal = SpanLog::default();
    let again = traced(&normal, || h.guard.call(&pay(10))).unwrap();

    for answer in [&remembered, &again] {
        assert_eq!((&answer.key, answer.replayed), (&called.key, true));
        assert_eq!(
            answer.outcome.to_stored(),
            first.outcome.to_stored(),
            "the same bytes"
        );
    }
    assert_eq!(
        replays(),
        3.0,
        "counted as a replay, as the call counts one"
    );
    assert_eq!(counted(&h, "justonce_calls_in_flight"), 0.0);
    let fields = |log: &SpanLog| -> Vec<(&'static str, BTreeMap<String, String>)> {
        let spans = log.0.lock().unwrap();
        spans.iter().map(|s| (s.name, s.fields.clone())).collect()
    };
    assert_eq!(fields(&log), fields(&normal), "the same trace");
    assert_eq!(fields(&log).len(), 1, "one call span");
    assert_eq!(runs.load(Ordering::SeqCst), 1, "nothing ran again");
    assert_eq!(payments.attempts().len(), 1);
    let entry = h.journal.story(&first.key).unwrap().entry.unwrap();
    assert_eq!(entry.replays, 3, "the journal counts it too");
}

#[test]
fn a_replay_from_memory_is_refused_whenever_the_journal_or_a_run_must_answer() {
    let mut runner = ScriptedRunner::default();
    let runs = pay_tool(&mut runner, "payments");
    let payments = Downstream::new(ProviderClass::Keyed, vec![]);
    let h = host(runner, &[("payments", payments.clone())]);
    let remembered = |request: &CallRequest| from_memory(&h, request).is_some();

    // A fresh call: nothing runs, nothing is stored.
    assert!(!remembered(&pay(10)));
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert!(h.journal.entries(None, 10).unwrap().is_empty());
    let first = h.guard.call(&pay(10)).unwrap();
    assert!(h.guard.call(&pay(10)).unwrap().replayed);
    assert!(remembered(&pay(10)), "remembered once it replayed");
    // A tool-call id's alias is checked in the journal.
    assert!(!remembered(&pay(10).tool_call_id("call-9")));
    // Another fingerprint under the same key is the journal's to judge.
    let now = h.clock.now_ms();
    let other = crate::keys::Fingerprint::from_stored("0".repeat(64));
    assert!(
        h.journal
            .replay_from_memory(&first.key, &other, now)
            .is_none()
    );

    // Due to look for other processes' operations (SQLite: once a second).
    h.clock.advance(Duration::from_secs(1));
    assert!(!remembered(&pay(10)), "operations due");
    assert!(h.guard.call(&pay(10)).unwrap().replayed);
    assert!(remembered(&pay(10)), "usable again once the journal looked");

    // After a forget.
    h.journal.forget(&first.key, &ada(&h, false)).unwrap();
    assert!(!remembered(&pay(10)), "forgotten");
    assert!(!h.guard.call(&pay(10)).unwrap().replayed, "it runs again");
    assert_eq!(runs.load(Ordering::SeqCst), 2);

    // Past the window (the journal looked a millisecond before its end).
    assert!(h.guard.call(&pay(10)).unwrap().replayed);
    h.clock.advance(RETENTION - Duration::from_millis(1));
    assert!(h.guard.call(&pay(10)).unwrap().replayed);
    assert!(remembered(&pay(10)), "within the window");
    h.clock.advance(Duration::from_millis(1));
    assert!(!remembered(&pay(10)), "past the window");
    assert!(
        !h.guard.call(&pay(10)).unwrap().replayed,
        "new past its window"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 3);

    // Other arguments under an explicit key: the journal refuses them.
    let key = "order-4417-refund";
    h.guard.call(&pay(20).key(key)).unwrap();
    assert!(h.guard.call(&pay(20).key(key)).unwrap().replayed);
    assert!(remembered(&pay(20).key(key)));
    assert!(!remembered(&pay(99).key(key)));
    let err = h.guard.call(&pay(99).key(key)).unwrap_err();
    assert!(matches!(err, Error::Mismatch { .. }), "{err:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 4, "no mismatch ran");
}

// --- traces -------------------------------------------------------------------

/// Records every span's name, parent and fields, in the order they were opened.
#[derive(Clone, Default)]
struct SpanLog(Arc<Mutex<Vec<LoggedSpan>>>);

#[derive(Debug, Clone)]
struct LoggedSpan {
    name: &'static str,
    parent: Option<usize>,
    fields: BTreeMap<String, String>,
}

/// A span's position in the [`SpanLog`].
struct Position(usize);

struct FieldText<'a>(&'a mut BTreeMap<String, String>);

impl tracing::field::Visit for FieldText<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().into(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
}

std::thread_local! {
    /// The log of the spans opened on this thread, while a test records them.
    static RECORDING: std::cell::RefCell<Option<SpanLog>> = const { std::cell::RefCell::new(None) };
}

/// The test binary's one subscriber: it writes spans to the thread's [`RECORDING`].
/// Global rather than a scoped `with_default`: tracing caches whether a span is
/// wanted once for all threads, and a scoped subscriber races other tests' threads
/// for that cache (the spans then go unseen now and then).
struct Recorder;

impl<S> tracing_subscriber::Layer<S> for Recorder
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let Some(log) = RECORDING.with(|r| r.borrow().clone()) else {
            return;
        };
        let span = ctx.span(id).expect("a new span");
        let parent = span
            .parent()
            .and_then(|p| p.extensions().get::<Position>().map(|p| p.0));
        let mut fields = BTreeMap::new();
        attrs.record(&mut FieldText(&mut fields));
        let mut log = log.0.lock().unwrap();
        span.extensions_mut().insert(Position(log.len()));
        log.push(LoggedSpan {
            name: attrs.metadata().name(),
            parent,
            fields,
        });
    }

    fn on_record(
        &self,
        id: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let Some(log) = RECORDING.with(|r| r.borrow().clone()) else {
            return;
        };
        let span = ctx.span(id).expect("a recorded span");
        let Some(at) = span.extensions().get::<Position>().map(|p| p.0) else {
            return;
        };
        values.record(&mut FieldText(&mut log.0.lock().unwrap()[at].fields));
    }
}

/// Runs `f` with the spans it opens on this thread written to `log`.
fn traced<T>(log: &SpanLog, f: impl FnOnce() -> T) -> T {
    use tracing_subscriber::layer::SubscriberExt as _;
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(Recorder))
            .expect("no other subscriber in the library's tests");
    });
    // A callsite another thread registered while the subscriber was being set may
    // have cached "not wanted": look again, now that it is set.
    tracing::callsite::rebuild_interest_cache();
    RECORDING.with(|r| *r.borrow_mut() = Some(log.clone()));
    let out = f();
    RECORDING.with(|r| *r.borrow_mut() = None);
    out
}

#[test]
fn a_call_traces_each_effect_and_each_attempt_under_its_keys() {
    let mut runner = ScriptedRunner::default();
    runner.tool("put_then_pay", ScriptedRunner::open_schema(), |args, fx| {
        let put = fx.perform("kv", "put", json!({"key": "k", "value": 1}));
        match (put, fx.perform("payments", "pay", args.clone())) {
            (Ok(_), Ok(answer)) => returned(answer),
            other => tool_error("failed", &format!("{other:?}")),
        }
    });
    let payments = Downstream::new(ProviderClass::Keyed, vec![Fault::LoseResponse]);
    let h = host(runner, &[("payments", payments.clone())]);
    let log = SpanLog::default();
    let call = CallRequest::new("put_then_pay", json!({"amount": 5}).to_string());

    let answer = traced(&log, || h.guard.call(&call)).unwrap();

    let spans = log.0.lock().unwrap().clone();
    let shape: Vec<(&str, Option<usize>)> = spans.iter().map(|s| (s.name, s.parent)).collect();
    assert_eq!(
        shape,
        [
            ("call", None),
            ("effect", Some(0)),
            ("attempt", Some(1)),
            ("effect", Some(0)),
            ("attempt", Some(3)),
            ("attempt", Some(3)),
        ],
        "{spans:#?}"
    );
    let field = |i: usize, name: &str| spans[i].fields.get(name).cloned().unwrap_or_default();
    for span in &spans {
        assert_eq!(
            span.fields.get("invocation"),
            Some(&answer.key.to_string()),
            "{span:?}"
        );
    }
    assert_eq!(
        (field(0, "tool"), field(0, "outcome"), field(0, "replayed")),
        ("put_then_pay".into(), "success".into(), "false".into())
    );
    // The transactional effect: one attempt under its key.
    assert_eq!(
        (field(1, "provider"), field(1, "seq")),
        ("kv".into(), "0".into())
    );
    assert_eq!(field(2, "effect"), field(1, "effect"));
    assert_eq!(
        (field(2, "attempt"), field(2, "result")),
        ("1".into(), "ok".into())
    );
    // The keyed one: the lost response and its retry, both under the key the
    // downstream saw.
    assert_eq!(
        (field(3, "provider"), field(3, "seq")),
        ("payments".into(), "1".into())
    );
    assert_eq!(
        payments.attempts(),
        [field(3, "effect"), field(3, "effect")]
    );
    assert_eq!(
        [4, 5].map(|i| (field(i, "effect"), field(i, "attempt"), field(i, "result"))),
        [
            (field(3, "effect"), "1".into(), "unknown".into()),
            (field(3, "effect"), "2".into(), "ok".into()),
        ]
    );

    // The same call again is replayed: one call span that says so.
    let again = SpanLog::default();
    traced(&again, || h.guard.call(&call)).unwrap();
    let spans = again.0.lock().unwrap().clone();
    assert_eq!(spans.len(), 1, "{spans:#?}");
    assert_eq!(
        spans[0].fields.get("replayed").map(String::as_str),
        Some("true")
    );
}

// --- a call cancelled by its client (MCP tasks/cancel) ------------------------------

/// A tool that emails, pays, then emails a receipt; answers with the payment, or
/// with a tool error naming the first effect that failed.
fn order_tool(runner: &mut ScriptedRunner) -> Arc<std::sync::atomic::AtomicU32> {
    runner.tool(
        "order",
        ScriptedRunner::open_schema(),
        |args, fx: &mut Effects<'_>| {
            let steps = [
                fx.perform("mail", "send", json!({"to": "cy", "what": "order"})),
                fx.perform("payments", "pay", args.clone()),
                fx.perform("mail", "send", json!({"to": "cy", "what": "receipt"})),
            ];
            match steps {
                [Ok(_), Ok(paid), Ok(_)] => returned(paid),
                [Err(e), ..] | [_, Err(e), _] | [.., Err(e)] => {
                    tool_error("effect_failed", &format!("{e:?}"))
                }
            }
        },
    )
}

fn order(amount: u64) -> CallRequest {
    CallRequest::new("order", json!({ "amount": amount }).to_string()).conversation("c1")
}

/// An order whose email is journaled done and whose payment's outcome is unknown.
fn stuck_order(
    amount: u64,
) -> (
    Host,
    Arc<std::sync::atomic::AtomicU32>,
    Arc<Downstream>,
    Arc<Downstream>,
    crate::keys::InvocationKey,
) {
    let ([h], runs, mail, payments, key) = stuck_order_on(&order(amount));
    (h, runs, mail, payments, key)
}

/// The stuck order's payment: tried three times by its first run, once more by the
/// retry, always under one key, and applied once.
fn assert_payment_finished_under_its_key(payments: &Downstream) {
    let attempts = payments.attempts();
    assert_eq!(attempts.len(), 4, "the retry sent the payment again");
    assert!(
        attempts.iter().all(|a| *a == attempts[0]),
        "every attempt carried the same key: {attempts:?}"
    );
    assert_eq!(payments.applied().len(), 1, "the payment happened once");
}

#[test]
fn a_cancelled_calls_retry_replays_its_journaled_effects_and_performs_no_new_one() {
    let (h, runs, mail, payments, key) = stuck_order(10);
    h.guard.cancel_task(&key).unwrap();

    let retry = h
        .guard
        .call(&order(10))
        .expect("no divergence: nothing diverged");

    assert_cancelled_retry_of_a_stuck_order(
        &h,
        &order(10),
        &retry,
        &key,
        (&runs, &mail, &payments),
    );
}

/// The seed's assertions for the retry `retry` (on `h`) of the stuck order
/// `request` (`key`) after a cancel of its generation there: it ran, under the same
/// key; the journaled email replayed, the pending payment was finished under its
/// key, the receipt (a new effect) was refused, the agent was told so, and that
/// outcome is saved.
fn assert_cancelled_retry_of_a_stuck_order(
    h: &Host,
    request: &CallRequest,
    retry: &crate::call::CallResponse,
    key: &crate::keys::InvocationKey,
    (runs, mail, payments): (&std::sync::atomic::AtomicU32, &Downstream, &Downstream),
) {
    assert_eq!(runs.load(Ordering::SeqCst), 2, "the retry happened");
    assert_eq!(&retry.key, key, "both attempts carried the same key");
    assert!(!retry.replayed);
    assert_eq!(
        mail.attempts().len(),
        1,
        "the journaled email replayed, not sent again"
    );
    // The payment journaled pending is finished under its key, as any resumed run does.
    assert_payment_finished_under_its_key(payments);
    assert_eq!(
        mail.applied().len(),
        1,
        "the receipt, a new effect, was refused"
    );
    assert!(
        told_cancelled(&retry.outcome),
        "the agent was told: {:?}",
        retry.outcome
    );
    let again = h.guard.call(request).unwrap();
    assert!(again.replayed, "that outcome is saved");
    assert_eq!(again.outcome, retry.outcome);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[test]
fn a_retry_of_a_call_not_cancelled_performs_its_remaining_effects() {
    let (h, runs, mail, payments, key) = stuck_order(11);

    let retry = h.guard.call(&order(11)).unwrap();

    assert_ran_and_succeeded(&retry, &key, &runs, 2);
    assert_payment_finished_under_its_key(&payments);
    let sent = mail.attempts();
    assert_eq!(sent.len(), 2, "the email once, the receipt once");
    assert_ne!(sent[0], sent[1], "two different effects");
    assert_eq!(mail.applied().len(), 2);
}

/// The seed's assertions for a call that ran (again): the tool has run `times` in
/// all, `answer` is under `key` (the same key every attempt carried), and the agent
/// was told a success.
fn assert_ran_and_succeeded(
    answer: &crate::call::CallResponse,
    key: &crate::keys::InvocationKey,
    runs: &std::sync::atomic::AtomicU32,
    times: u32,
) {
    assert_eq!(runs.load(Ordering::SeqCst), times, "the call ran (again)");
    assert_eq!(&answer.key, key, "under the same key");
    assert!(
        answer.outcome.is_success(),
        "the agent was told: {:?}",
        answer.outcome
    );
}

/// Whether `outcome` tells the agent its call was cancelled.
fn told_cancelled(outcome: &Outcome) -> bool {
    matches!(outcome, Outcome::ToolError { message, .. } if message.contains("cancelled by its client"))
}

/// `pay(10)` (or `request`) on `h`, cancelled before it starts: its payment is
/// refused and that answer saved. Returns its key.
fn cancelled_payment(
    h: &Host,
    request: &CallRequest,
    payments: &Downstream,
) -> crate::keys::InvocationKey {
    let key = h.guard.key_for(request).unwrap();
    h.guard.cancel_task(&key).unwrap();
    let refused = h.guard.call(request).unwrap();
    assert!(
        told_cancelled(&refused.outcome),
        "the agent was told: {:?}",
        refused.outcome
    );
    assert!(payments.attempts().is_empty(), "nothing was sent");
    assert!(
        h.guard.call(request).unwrap().replayed,
        "that answer is saved"
    );
    key
}

#[test]
fn a_cancelled_call_whose_record_is_forgotten_runs_again_and_performs_its_effect() {
    let mut runner = ScriptedRunner::default();
    let runs = pay_tool(&mut runner, "payments");
    let payments = Downstream::new(ProviderClass::Keyed, vec![]);
    let h = host(runner, &[("payments", payments.clone())]);
    let key = cancelled_payment(&h, &pay(10), &payments);

    assert_forgotten_payment_runs_once(&h, &key, &payments);
    assert_eq!(runs.load(Ordering::SeqCst), 2, "the call ran again");
}

/// Forgets the cancelled `pay(10)` of `key` through `h`'s journal and makes it
/// again on `h`: a new generation under the same key, not cancelled, whose payment
/// is sent once and happens once.
fn assert_forgotten_payment_runs_once(
    h: &Host,
    key: &crate::keys::InvocationKey,
    payments: &Downstream,
) {
    h.journal.forget(key, &ada(h, false)).unwrap();
    let again = h.guard.call(&pay(10)).unwrap();

    assert_eq!(again.key, *key, "under the same key, a new generation");
    assert!(
        again.outcome.is_success(),
        "the agent was told: {:?}",
        again.outcome
    );
    assert_eq!(payments.attempts().len(), 1);
    assert_eq!(payments.applied().len(), 1, "the payment happened, once");
}

#[test]
fn a_cancelled_call_whose_record_expired_runs_again_and_performs_its_effect() {
    let mut runner = ScriptedRunner::default();
    let runs = pay_tool(&mut runner, "payments");
    let payments = Downstream::new(ProviderClass::Keyed, vec![]);
    let h = host(runner, &[("payments", payments.clone())]);
    let key = cancelled_payment(&h, &pay_unscoped(10), &payments);

    h.clock.advance(UNSCOPED);
    let again = h.guard.call(&pay_unscoped(10)).unwrap();

    assert_eq!(runs.load(Ordering::SeqCst), 2, "the call ran again");
    assert!(!again.replayed, "a new generation");
    assert_eq!(again.key, key, "under the same key");
    assert!(
        again.outcome.is_success(),
        "the agent was told: {:?}",
        again.outcome
    );
    assert_eq!(payments.applied().len(), 1, "the payment happened, once");
}

#[test]
fn two_hosts_in_one_process_do_not_see_each_others_cancels() {
    let hosts = [(); 2].map(|()| {
        let mut runner = ScriptedRunner::default();
        let runs = pay_tool(&mut runner, "payments");
        let payments = Downstream::new(ProviderClass::Keyed, vec![]);
        (
            host(runner, &[("payments", payments.clone())]),
            runs,
            payments,
        )
    });
    let [(cancelling, _, refused), (other, runs, paid)] = &hosts;

    let key = cancelled_payment(cancelling, &pay(10), refused);
    let answer = other.guard.call(&pay(10)).unwrap();

    assert_eq!(answer.key, key, "the same call");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert!(
        answer.outcome.is_success(),
        "the agent was told: {:?}",
        answer.outcome
    );
    assert_eq!(paid.applied().len(), 1, "the other host's payment happened");
    assert!(
        refused.attempts().is_empty(),
        "the cancelling host sent nothing"
    );
}

/// Two hosts on one journal and one clock serving the pay tool on one payments
/// API; the runs of the tool, the API and the clock.
fn two_paying_hosts() -> (
    [Host; 2],
    Arc<std::sync::atomic::AtomicU32>,
    Arc<Downstream>,
    Arc<ManualClock>,
) {
    let mut runner = ScriptedRunner::default();
    let runs = pay_tool(&mut runner, "payments");
    let runner = Arc::new(runner);
    let payments = Downstream::new(ProviderClass::Keyed, vec![]);
    let clock = Arc::new(ManualClock::default());
    let journal = fresh_journal(&clock);
    let hosts = [(); 2].map(|()| {
        let providers: [(&str, Arc<dyn Provider>); 1] = [("payments", payments.clone())];
        host_on(
            Arc::clone(&journal),
            clock.clone(),
            Arc::clone(&runner),
            &providers,
        )
    });
    (hosts, runs, payments, clock)
}

/// Issue 54: a cancel taken before its call has a record (the host that took it
/// knows the task; nothing is journaled yet) is journaled too, and binds the
/// call's first record, whichever host makes it. Host B runs the same call: its
/// payment, a new effect, is refused before it is sent, its agent is told the call
/// was cancelled, that outcome is saved (A replays it) and the record says its
/// generation was cancelled. The cancel ends with that generation: once the record
/// is forgotten, the same call pays, once. Before, only A's memory held the cancel
/// and B paid.
#[test]
fn a_cancel_taken_before_the_call_has_a_record_is_honoured_by_the_host_that_runs_it() {
    let ([cancelling, running], runs, payments, _) = two_paying_hosts();
    let key = cancelling.guard.key_for(&pay(10)).unwrap();
    assert_eq!(
        cancelling.guard.cancel_task(&key).unwrap(),
        None,
        "no record, no generation yet"
    );

    let refused = running.guard.call(&pay(10)).unwrap();

    assert_eq!(runs.load(Ordering::SeqCst), 1, "B ran the call");
    assert!(
        told_cancelled(&refused.outcome),
        "B's agent was told: {:?}",
        refused.outcome
    );
    assert!(payments.attempts().is_empty(), "nothing was sent");
    let entry = running.journal.story(&key).unwrap().entry.unwrap();
    assert!(
        entry.cancelled,
        "the record says its generation was cancelled"
    );
    let replay = cancelling.guard.call(&pay(10)).unwrap();
    assert!(
        replay.replayed && told_cancelled(&replay.outcome),
        "A replays the saved refusal: {replay:?}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    assert_forgotten_payment_runs_once(&running, &key, &payments);
}

/// A cancel taken before its call had a record, whose call never comes, is removed
/// by `gc` once the retention has passed (the journal's clock), not before: a call
/// made within it is still refused, and one made after it runs (before, the row
/// was kept for ever, and bound the key's first record whenever it came).
#[test]
fn a_cancel_whose_call_never_made_a_record_is_collected_past_retention() {
    // The cancels are taken on A and the calls made on B, which knows of them
    // through the journal alone.
    let ([a, h], runs, payments, clock) = two_paying_hosts();
    let gc = |h: &Host| {
        h.journal
            .gc(h.clock.now_ms(), RETENTION.as_millis() as i64)
            .unwrap()
            .early_cancels
    };
    let kept = |h: &Host| query_i64(&h.journal, "SELECT count(*) FROM early_cancels");
    let [early, late] = [pay(10), pay(20)].map(|request| a.guard.key_for(&request).unwrap());
    assert_eq!(a.guard.cancel_task(&early).unwrap(), None, "no record yet");
    clock.advance(RETENTION - Duration::from_millis(1));
    assert_eq!(a.guard.cancel_task(&late).unwrap(), None, "no record yet");
    assert_eq!(gc(&h), 0, "both within the retention");
    assert_eq!(kept(&h), Some(2));

    clock.advance(Duration::from_millis(1));
    assert_eq!(gc(&h), 1, "the first one's retention passed");
    assert_eq!(kept(&h), Some(1));
    let refused = h.guard.call(&pay(20)).unwrap();
    assert!(
        told_cancelled(&refused.outcome),
        "the one kept still binds its call: {:?}",
        refused.outcome
    );
    let ran = h.guard.call(&pay(10)).unwrap();
    assert!(
        !told_cancelled(&ran.outcome) && payments.applied().len() == 1,
        "the one collected binds nothing: {:?}",
        ran.outcome
    );
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

/// `N` hosts on one journal and one clock, serving the order tool with one mailer
/// and one payments API (the world they all reach), and an order of `request`
/// made stuck on the last: its email journaled done, its payment's outcome
/// unknown. The hosts (the others have seen nothing of the order), the runs of the
/// tool on all of them, the mailer, the payments API and the order's key.
fn stuck_order_on<const N: usize>(
    request: &CallRequest,
) -> (
    [Host; N],
    Arc<std::sync::atomic::AtomicU32>,
    Arc<Downstream>,
    Arc<Downstream>,
    crate::keys::InvocationKey,
) {
    let mut runner = ScriptedRunner::default();
    let runs = order_tool(&mut runner);
    let runner = Arc::new(runner);
    let mail = Downstream::new(ProviderClass::Keyed, vec![]);
    let payments = Downstream::new(
        ProviderClass::Keyed,
        vec![Fault::LoseResponse, Fault::FailBefore, Fault::FailBefore],
    );
    let clock = Arc::new(ManualClock::default());
    let journal = fresh_journal(&clock);
    let hosts = [(); N].map(|()| {
        let providers: [(&str, Arc<dyn Provider>); 2] =
            [("mail", mail.clone()), ("payments", payments.clone())];
        host_on(
            Arc::clone(&journal),
            clock.clone(),
            Arc::clone(&runner),
            &providers,
        )
    });
    let Err(Error::OutcomeUnknown { key, seq: 1, .. }) = hosts[N - 1].guard.call(request) else {
        panic!("the payment's outcome should be unknown")
    };
    (hosts, runs, mail, payments, key)
}

fn order_unscoped(amount: u64) -> CallRequest {
    CallRequest::new("order", json!({ "amount": amount }).to_string())
}

/// Issue 54: host A takes a cancel of an order that host B made; B finishes the
/// order, honouring the cancel it read in the journal (its receipt, a new effect,
/// is refused), and its record goes (`gone`: forgotten by another process,
/// expired, or collected by `gc`). The same order made again on A is a new call, a
/// new generation of the same key: it is not refused by A's cancel, and each of
/// its effects happens once, under new keys.
fn a_cancel_ends_with_its_generation(request: &CallRequest, gone: impl FnOnce(&Host)) {
    let ([cancelling, finishing], runs, mail, payments, key) = stuck_order_on(request);
    cancelling.guard.cancel_task(&key).unwrap();
    let finished = finishing.guard.call(request).unwrap();
    assert!(
        told_cancelled(&finished.outcome),
        "B honours the cancel A journaled: {:?}",
        finished.outcome
    );
    assert_payment_finished_under_its_key(&payments);
    gone(&cancelling);

    let again = cancelling.guard.call(request).unwrap();

    assert_ran_and_succeeded(&again, &key, &runs, 3);
    assert!(!again.replayed, "a new generation");
    let paid = payments.attempts();
    assert_eq!(paid.len(), 5, "the new payment was sent once: {paid:?}");
    assert_ne!(paid[4], paid[0], "under a new key");
    assert_eq!(
        payments.applied().len(),
        2,
        "two payments, one per generation"
    );
    let mailed = mail.attempts();
    assert_eq!(
        mailed.len(),
        3,
        "the first generation's email (its receipt was refused), the second's two: {mailed:?}"
    );
    assert_eq!(mail.applied().len(), 3);
    let entry = cancelling.journal.story(&key).unwrap().entry.unwrap();
    assert!(
        !entry.cancelled,
        "the new generation's record is not cancelled"
    );
}

#[test]
fn a_cancel_on_one_host_ends_with_its_generation_when_another_finishes_and_forgets_it() {
    a_cancel_ends_with_its_generation(&order(20), |h| {
        // Forgotten by another process: not through the host that took the cancel.
        h.journal
            .forget(&h.guard.key_for(&order(20)).unwrap(), &ada(h, false))
            .unwrap();
    });
}

#[test]
fn a_cancel_on_one_host_ends_with_its_generation_when_another_finishes_and_it_expires() {
    a_cancel_ends_with_its_generation(&order_unscoped(21), |h| h.clock.advance(UNSCOPED));
}

#[test]
fn a_cancel_on_one_host_ends_with_its_generation_when_another_finishes_and_gc_collects_it() {
    a_cancel_ends_with_its_generation(&order_unscoped(23), |h| {
        h.clock.advance(UNSCOPED + Duration::from_millis(1));
        let collected = h.journal.gc(h.clock.now_ms(), 24 * 3_600_000).unwrap();
        assert_eq!(
            collected.invocations, 1,
            "gc collected the cancelled record"
        );
    });
}

/// Issue 54: a cancel taken by host A stops the run of host B at its next effect.
/// B runs a call that pays twice; between the two payments its client's cancel
/// reaches A (a `tasks/cancel` on another host of the journal). B's second
/// payment, a new effect, is refused before it is sent, the agent is told its call
/// was cancelled, that outcome is saved (A replays it), and every host's record
/// says the call's generation was cancelled.
#[test]
fn a_cancel_taken_on_one_host_stops_another_hosts_run_at_its_next_effect() {
    type Hook = Arc<std::sync::Mutex<Option<Box<dyn Fn() + Send>>>>;
    let between: Hook = Arc::default();
    let mut runner = ScriptedRunner::default();
    let hook = Arc::clone(&between);
    runner.tool(
        "pay_twice",
        ScriptedRunner::open_schema(),
        move |args, fx: &mut Effects<'_>| {
            let first = fx.perform("payments", "pay", json!({"part": 1, "of": args}));
            if let Some(cancel) = hook.lock().unwrap().as_ref() {
                cancel();
            }
            let second = fx.perform("payments", "pay", json!({"part": 2, "of": args}));
            match (first, second) {
                (Ok(paid), Ok(_)) => returned(paid),
                (Err(e), _) | (_, Err(e)) => tool_error("effect_failed", &format!("{e:?}")),
            }
        },
    );
    let runner = Arc::new(runner);
    let payments = Downstream::new(ProviderClass::Keyed, vec![]);
    let clock = Arc::new(ManualClock::default());
    let journal = fresh_journal(&clock);
    let providers: [(&str, Arc<dyn Provider>); 1] = [("payments", payments.clone())];
    let [cancelling, running] = [(); 2].map(|()| {
        Arc::new(host_on(
            Arc::clone(&journal),
            clock.clone(),
            Arc::clone(&runner),
            &providers,
        ))
    });
    let request =
        CallRequest::new("pay_twice", json!({ "amount": 5 }).to_string()).conversation("c1");
    let key = running.guard.key_for(&request).unwrap();
    let (a, k) = (Arc::clone(&cancelling), key.clone());
    *between.lock().unwrap() = Some(Box::new(move || {
        a.guard.cancel_task(&k).unwrap();
    }));

    let answer = running.guard.call(&request).unwrap();

    assert_eq!(answer.key, key);
    assert!(
        told_cancelled(&answer.outcome),
        "the agent was told: {:?}",
        answer.outcome
    );
    assert_eq!(
        payments.attempts().len(),
        1,
        "the second payment was never sent"
    );
    assert_eq!(payments.applied().len(), 1, "the first happened, once");
    *between.lock().unwrap() = None;
    let again = cancelling.guard.call(&request).unwrap();
    assert!(again.replayed, "that outcome is saved, for every host");
    assert_eq!(again.outcome, answer.outcome);
    for h in [&cancelling, &running] {
        let entry = h.journal.story(&key).unwrap().entry.unwrap();
        assert!(
            entry.cancelled,
            "the record says its generation was cancelled"
        );
    }
}

/// The opposite case: the generation cancelled on host A is still refused there,
/// whichever host ran it before. A resumes B's stuck order: its journaled email
/// replays, its pending payment is finished under its key, and the receipt, a new
/// effect, is refused; that outcome is saved.
#[test]
fn the_generation_cancelled_on_one_host_is_refused_there_when_it_resumes_another_hosts_run() {
    let ([cancelling, _], runs, mail, payments, key) = stuck_order_on(&order(22));
    cancelling.guard.cancel_task(&key).unwrap();

    let retry = cancelling.guard.call(&order(22)).unwrap();

    assert_cancelled_retry_of_a_stuck_order(
        &cancelling,
        &order(22),
        &retry,
        &key,
        (&runs, &mail, &payments),
    );
}

// --- every journal ------------------------------------------------------------------
//
// The tests above run on the in-memory SQLite journal; `on_postgres!` runs each of
// them again on a PostgreSQL journal of its own (a fresh schema of the test cluster).

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    Sqlite,
    Postgres,
}

thread_local! {
    static BACKEND: std::cell::Cell<Backend> = const { std::cell::Cell::new(Backend::Sqlite) };
    /// The connection settings of the PostgreSQL journal this test made last.
    static POSTGRES: std::cell::RefCell<Option<postgres::Config>> = const { std::cell::RefCell::new(None) };
}

/// A new, empty journal of the backend this test runs on. On PostgreSQL, `clock`
/// stands for the database server's clock too, which decides leases and expiry there.
fn fresh_journal(clock: &Arc<ManualClock>) -> Arc<dyn Journal> {
    match BACKEND.get() {
        Backend::Sqlite => journal::in_memory().unwrap(),
        Backend::Postgres => {
            let cluster = journal::postgres::testing::cluster("contract test")
                .expect("run_on_postgres checked for a cluster");
            let config = cluster.schema();
            POSTGRES.set(Some(config.clone()));
            let journal = journal::postgres::PostgresJournal::open(
                journal::postgres::PostgresTarget::from_config(config),
                journal::Durability::Full,
            )
            .unwrap();
            Arc::new(journal.with_database_clock(clock.clone()))
        }
    }
}

fn postgres_client() -> postgres::Client {
    POSTGRES
        .with_borrow(Clone::clone)
        .expect("a PostgreSQL journal was made")
        .connect(postgres::NoTls)
        .unwrap()
}

/// The first column of the first row of `sql` in the journal's database.
fn query_i64(journal: &Arc<dyn Journal>, sql: &str) -> Option<i64> {
    match journal.as_sqlite() {
        Some(sqlite) => sqlite.read(|c| c.query_row(sql, [], |r| r.get(0))).unwrap(),
        None => postgres_client().query_one(sql, &[]).unwrap().get(0),
    }
}

/// Runs `sql` on the journal's database.
fn execute(journal: &Arc<dyn Journal>, sql: &str) {
    match journal.as_sqlite() {
        Some(sqlite) => {
            sqlite.with(|c| c.execute_batch(sql)).unwrap();
        }
        None => {
            postgres_client().batch_execute(sql).unwrap();
        }
    }
}

/// The value the kv provider holds under `key`.
fn kv_value(journal: &Arc<dyn Journal>, key: &str) -> Option<Value> {
    let key = &KvProvider::stored_key("put", None, key);
    match journal.as_sqlite() {
        Some(sqlite) => sqlite.read(|c| KvProvider::get(c, key)).unwrap(),
        None => postgres_client()
            .query_opt("SELECT value FROM kv WHERE key = $1", &[&key])
            .unwrap()
            .map(|r| serde_json::from_str(r.get(0)).unwrap()),
    }
}

fn run_on_postgres(name: &str, test: fn()) {
    if journal::postgres::testing::cluster(name).is_none() {
        return;
    }
    BACKEND.set(Backend::Postgres);
    test();
}

macro_rules! on_postgres {
    ($($name:ident),* $(,)?) => {
        mod on_postgres {
            $(
                #[test]
                fn $name() {
                    super::run_on_postgres(stringify!($name), super::$name);
                }
            )*
            pub(super) const NAMES: &[&str] = &[$(stringify!($name)),*];
        }
    };
}

on_postgres!(
    a_class_the_catalog_now_disagrees_with_is_shown_beside_the_record_which_wins,
    a_cancel_taken_on_one_host_stops_another_hosts_run_at_its_next_effect,
    a_cancel_on_one_host_ends_with_its_generation_when_another_finishes_and_gc_collects_it,
    a_first_call_runs_journals_its_effect_and_saves_its_outcome,
    a_lost_response_is_retried_under_the_same_key_and_the_effect_happens_once,
    a_completed_key_replays_its_outcome_byte_for_byte_and_runs_nothing,
    each_call_is_counted_once_under_its_outcome_and_a_replay_as_replayed,
    two_different_calls_both_happen,
    tool_errors_and_traps_are_saved_and_replayed,
    the_same_key_with_other_arguments_is_a_mismatch_and_nothing_runs_or_is_stored,
    a_parallel_duplicate_waits_for_the_first_and_gets_its_outcome,
    a_duplicate_waiting_on_another_host_costs_the_journal_a_handful_of_statements,
    a_host_whose_lease_expired_is_taken_over_fenced_and_the_effect_happens_once,
    a_run_whose_lease_ran_out_before_its_provider_call_does_not_send_beside_the_run_that_took_over,
    a_provider_slower_than_the_lease_keeps_its_lease_and_no_other_host_takes_over,
    a_call_refused_before_the_guest_starts_stores_nothing_and_may_succeed_later,
    an_unknown_outcome_is_not_saved_and_the_retry_resumes_under_the_same_key,
    a_throttled_downstream_is_retried_after_its_retry_after_under_the_same_key,
    an_unkeyed_effect_whose_outcome_is_unknown_is_never_repeated_until_a_person_resolves_it,
    an_unkeyed_effect_answered_late_is_answered_from_that_answer_and_never_sent_again,
    a_sweep_never_takes_up_an_effect_parked_on_the_persons_answer,
    a_late_answer_that_comes_while_no_run_holds_its_call_is_journaled_and_answers_a_retry_after_a_restart,
    a_late_answer_that_comes_while_a_run_holds_its_call_is_left_to_that_run,
    an_unkeyed_effect_whose_tool_now_says_idempotent_is_not_sent_again,
    an_effect_journaled_before_its_tool_said_read_only_is_never_sent_again_as_a_read,
    a_completed_call_whose_tool_now_says_read_only_is_replayed_once_and_not_read,
    a_keyed_effect_whose_tool_lost_its_idempotent_mark_is_resent_under_its_key,
    a_cancelled_calls_retry_replays_its_journaled_effects_and_performs_no_new_one,
    a_retry_of_a_call_not_cancelled_performs_its_remaining_effects,
    a_cancelled_call_whose_record_is_forgotten_runs_again_and_performs_its_effect,
    a_cancelled_call_whose_record_expired_runs_again_and_performs_its_effect,
    two_hosts_in_one_process_do_not_see_each_others_cancels,
    a_cancel_taken_before_the_call_has_a_record_is_honoured_by_the_host_that_runs_it,
    a_cancel_whose_call_never_made_a_record_is_collected_past_retention,
    a_cancel_on_one_host_ends_with_its_generation_when_another_finishes_and_forgets_it,
    a_cancel_on_one_host_ends_with_its_generation_when_another_finishes_and_it_expires,
    the_generation_cancelled_on_one_host_is_refused_there_when_it_resumes_another_hosts_run,
    a_transactional_effect_commits_with_its_record_exactly_once,
    past_retention_the_same_call_is_a_new_effect_under_a_new_downstream_key,
    a_call_left_open_never_expires_and_gc_keeps_it,
    an_unscoped_call_is_a_replay_within_its_window_and_a_new_effect_after_it,
    a_call_in_a_conversation_is_still_a_replay_when_an_unscoped_one_expired,
    gc_deletes_each_record_at_the_end_of_its_own_window_and_not_before,
    a_tools_own_retention_replaces_both_windows,
    a_read_only_tool_runs_every_time_and_nothing_of_it_is_saved,
    a_read_only_tool_that_asks_for_an_effect_traps_and_nothing_is_performed,
    a_record_journaled_without_its_own_window_keeps_the_hosts_retention,
    a_resumed_guest_that_asks_for_another_effect_is_refused_as_a_divergence,
    a_resumed_run_sees_the_clock_its_first_run_saw,
    an_effect_the_configuration_refuses_is_not_saved_and_succeeds_once_it_is_fixed,
    a_refused_connection_is_known_not_performed_and_the_retry_performs_it_once,
    a_component_asking_for_an_upstreams_provider_is_refused_and_only_the_gateway_reaches_it,
    a_forgotten_call_runs_again_under_new_downstream_keys_and_the_journal_says_who,
    forget_is_refused_for_an_effect_whose_outcome_is_unknown_and_allowed_with_force,
    forget_and_abandon_are_refused_for_a_running_call_unless_forced_and_the_run_is_fenced,
    an_abandoned_call_replays_an_abandoned_outcome_that_lists_its_effects,
    abandon_of_a_completed_or_unknown_call_and_forget_of_an_unknown_one_are_refused,
    a_resolve_is_in_its_calls_operations_with_who_and_what_and_an_abandoned_calls_effect_is_refused,
    a_resume_is_recorded_with_who_where_and_what_it_was_and_refused_for_a_completed_call,
    the_journal_counts_the_replays_it_answers_and_shows_a_refused_effect_as_refused,
    a_call_traces_each_effect_and_each_attempt_under_its_keys,
    a_fenced_run_saves_the_definitive_answer_it_holds,
    the_first_run_journals_the_component_that_ran_it,
    a_principals_key_passed_by_a_local_caller_is_a_mismatch_both_ways,
    a_run_that_paused_past_its_lease_saves_no_answer_over_the_one_the_taker_handed_its_tool,
    a_keyed_answer_is_saved_with_the_next_commit_and_an_unkeyed_one_at_once,
    a_run_whose_effect_a_person_answered_meanwhile_hands_the_tool_the_recorded_answer,
);

/// One suite, two journals: a contract test added above without adding it to
/// `on_postgres!` fails here, by name.
#[test]
fn every_contract_test_runs_on_postgres_too() {
    // Tests of something only one journal has: hosts with clocks of their own share
    // only a PostgreSQL journal (on SQLite, one machine, one clock decides).
    // A PostgreSQL journal's memory is used only while its listener thread listens,
    // which these tests cannot wait for: `journal/postgres/listen.rs` tests it.
    const SQLITE_ONLY: &[&str] = &[
        "a_replay_from_memory_answers_exactly_as_the_call_does",
        "a_replay_from_memory_is_refused_whenever_the_journal_or_a_run_must_answer",
    ];
    const POSTGRES_ONLY: &[&str] = &[
        "a_host_whose_clock_runs_twice_the_lease_ahead_does_not_take_over_a_live_lease",
        "a_host_whose_clock_runs_ahead_expires_nothing_early",
    ];
    let source = include_str!("contract_tests.rs");
    let mut lines = source.lines();
    let mut missing = Vec::new();
    while let Some(line) = lines.next() {
        if line != "#[test]" {
            continue;
        }
        let Some(name) = lines
            .next()
            .and_then(|l| l.strip_prefix("fn "))
            .and_then(|l| l.split('(').next())
        else {
            continue;
        };
        if name != "every_contract_test_runs_on_postgres_too"
            && !on_postgres::NAMES.contains(&name)
            && !SQLITE_ONLY.contains(&name)
            && !POSTGRES_ONLY.contains(&name)
        {
            missing.push(name.to_string());
        }
    }
    assert!(missing.is_empty(), "not run on PostgreSQL: {missing:?}");
}

/// The log of the same scenarios (issue 40), with this file's hosts and downstreams.
#[path = "log_tests.rs"]
mod log_tests;

/// Tools that ask (issue 43), with this file's hosts and downstreams.
#[path = "ask_tests.rs"]
mod ask_tests;

#[test]
fn a_resume_is_recorded_with_who_where_and_what_it_was_and_refused_for_a_completed_call() {
    let mut runner = ScriptedRunner::default();
    pay_tool(&mut runner, "sms");
    let sms = Downstream::new(ProviderClass::Keyed, vec![Fault::LoseResponse; 3]);
    let h = host(runner, &[("sms", sms.clone())]);
    let Err(Error::OutcomeUnknown { key: stuck, .. }) = h.guard.call(&pay(30)) else {
        panic!("the sms outcome should be unknown")
    };
    let done = h
        .journal
        .resume(&stuck, &ada(&h, false), "web-b", "incomplete unknown")
        .unwrap();
    let Operated::Done(op) = done else {
        panic!("{done:?}")
    };
    assert_eq!(
        (op.action, op.by.as_str(), op.key.as_str()),
        (Action::Resume, "ada", stuck.as_str())
    );
    assert_eq!(op.detail["on_host"], "web-b");
    assert_eq!(op.detail["was"], "incomplete unknown");
    assert_eq!(op.detail["state"], "incomplete");
    assert_eq!(
        h.journal.story(&stuck).unwrap().operations,
        std::slice::from_ref(&op)
    );

    // The opposite: a completed call is refused, and nothing is recorded.
    h.guard.call(&pay(31)).expect("answered this time");
    let completed = h.guard.key_for(&pay(31)).unwrap();
    let refused = h
        .journal
        .resume(&completed, &ada(&h, false), "web-b", "completed");
    assert!(
        matches!(&refused, Err(Error::CannotOperate { reason, .. }) if reason.contains("completed")),
        "{refused:?}"
    );
    assert!(h.journal.story(&completed).unwrap().operations.is_empty());
}

/// Probes (issue 56), with this file's hosts and downstreams.
#[path = "probe_tests.rs"]
mod probe_tests;
