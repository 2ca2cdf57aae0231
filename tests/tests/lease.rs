//! Leases at their boundary, on a manual clock. Two hosts share one journal file, as
//! two processes would: host A hangs in the middle of an effect (a downstream that
//! does not answer), and host B gets a duplicate of the call.

use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use justonce::{CallRequest, CallResponse, Error, Host, ManualClock, Outcome, RetryPolicy};

use crate::support::{HoldFirst, RUNTIME};

const LEASE: Duration = Duration::from_secs(60);
const MS: Duration = Duration::from_millis(1);

/// A host on `db` whose keyed `mail` and `payments` are `gate`.
fn host(db: &Path, clock: &ManualClock, gate: &Arc<HoldFirst>, wait_bound: Duration) -> Host {
    Host::builder()
        .database(db)
        .runtime(RUNTIME.clone())
        .clock(Arc::new(clock.clone()))
        .lease(LEASE)
        .wait_bound(wait_bound)
        .retry_policy(RetryPolicy::immediate(1))
        .provider("mail", gate.clone())
        .provider("payments", gate.clone())
        .build()
        .unwrap()
}

/// Starts `request` on `host` in a thread that ends up held at the gate.
fn start_held(
    host: Arc<Host>,
    gate: &HoldFirst,
    request: &CallRequest,
) -> JoinHandle<Result<CallResponse, Error>> {
    let request = request.clone();
    let handle = std::thread::spawn(move || host.call(&request));
    gate.wait_until_reached();
    handle
}

/// A call that sends two emails, so a run can stop between them.
fn two_receipts() -> CallRequest {
    CallRequest::new(
        "send_receipt",
        r#"{"orders":[
            {"order_id":1,"email":"a@example.com","amount_cents":100},
            {"order_id":2,"email":"b@example.com","amount_cents":200}]}"#,
    )
    .conversation("c")
}

struct Setup {
    _dir: tempfile::TempDir,
    clock: ManualClock,
    gate: Arc<HoldFirst>,
    a: Arc<Host>,
    b_impatient: Host,
    b: Host,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let clock = ManualClock::default();
    let gate = Arc::new(HoldFirst::new());
    Setup {
        a: Arc::new(host(&db, &clock, &gate, Duration::from_secs(60))),
        // Waits a little (real time) and then reports `in_progress`.
        b_impatient: host(&db, &clock, &gate, Duration::from_millis(100)),
        b: host(&db, &clock, &gate, Duration::from_secs(60)),
        clock,
        gate,
        _dir: dir,
    }
}

#[test]
fn a_duplicate_while_the_lease_is_live_waits_and_gets_the_first_runs_outcome() {
    let s = setup();
    let request = CallRequest::new("payments_refund", r#"{"order_id":1,"amount_cents":10}"#)
        .conversation("c");
    let a = start_held(s.a.clone(), &s.gate, &request);

    s.clock.advance(LEASE - MS);
    let err = s.b_impatient.call(&request).unwrap_err();
    assert!(
        matches!(err, Error::InProgress { .. }),
        "1 ms before expiry B waits: {err:?}"
    );
    assert!(err.retry_safe());
    assert_eq!(s.gate.attempts().len(), 1, "B did not run the call");

    let b = {
        let (host, request) = (s.b, request.clone());
        std::thread::spawn(move || host.call(&request))
    };
    s.gate.release();
    let first = a.join().unwrap().unwrap();
    let duplicate = b.join().unwrap().unwrap();
    assert!(!first.replayed);
    assert!(duplicate.replayed, "B got A's saved outcome");
    assert_eq!(duplicate.outcome, first.outcome);
    assert_eq!(duplicate.key, first.key);
    assert_eq!(s.gate.attempts().len(), 1, "one attempt in all");
    assert_eq!(s.gate.applied().len(), 1, "one refund");
}

#[test]
fn a_duplicate_at_expiry_takes_over_and_the_old_run_performs_nothing_more() {
    let s = setup();
    // Two emails: A hangs at the first; B takes over and sends both.
    let request = two_receipts();
    let a = start_held(s.a.clone(), &s.gate, &request);
    let held_key = s.gate.attempts()[0].clone();

    s.clock.advance(LEASE - MS);
    let err = s.b_impatient.call(&request).unwrap_err();
    assert!(
        matches!(err, Error::InProgress { .. }),
        "just before expiry: {err:?}"
    );
    assert_eq!(s.gate.attempts().len(), 1);

    s.clock.advance(MS);
    let taken_over = s.b.call(&request).unwrap();
    assert!(!taken_over.replayed, "at expiry B resumes the call itself");
    let Outcome::Success { result, .. } = &taken_over.outcome else {
        panic!("expected success, got {:?}", taken_over.outcome);
    };
    assert_eq!(result["sent"].as_array().unwrap().len(), 2);
    let attempts = s.gate.attempts();
    assert_eq!(attempts.len(), 3, "{attempts:?}");
    assert_eq!(
        attempts[1], held_key,
        "B retried the held effect under its journaled key"
    );
    assert_ne!(attempts[2], held_key);
    assert_eq!(s.gate.applied().len(), 2, "two emails, the held one once");

    // A's downstream finally answers; A has lost the lease and may not go on.
    s.gate.release();
    let err = a.join().unwrap().unwrap_err();
    assert!(matches!(err, Error::LeaseLost { .. }), "{err:?}");
    assert!(err.retry_safe());
    assert_eq!(
        s.gate.attempts().len(),
        3,
        "A made no attempt after losing the lease"
    );
    assert_eq!(s.gate.applied().len(), 2);

    // Every later retry gets B's outcome.
    let again = s.a.call(&request).unwrap();
    assert!(again.replayed);
    assert_eq!(again.outcome, taken_over.outcome);
    let journal = s.a.journal(None, 10).unwrap();
    assert_eq!(journal[0].runs, 2);
    assert!(journal[0].effects.iter().all(|e| e.state == "done"));
}

#[test]
fn a_run_that_lost_its_lease_cannot_attempt_an_effect_the_new_owner_left_pending() {
    let s = setup();
    let request = two_receipts();
    let a = start_held(s.a.clone(), &s.gate, &request);

    // B takes over; the second email's outcome stays unknown, so B stops there and
    // leaves it pending.
    s.clock.advance(LEASE);
    s.gate.time_out_new_keys(true);
    let err = s.b.call(&request).unwrap_err();
    assert!(
        matches!(err, Error::OutcomeUnknown { seq: 1, .. }),
        "{err:?}"
    );
    let attempts = s.gate.attempts();
    assert_eq!(attempts.len(), 3, "{attempts:?}");
    let second_key = attempts[2].clone();

    // A wakes up: the journal holds the second effect as pending, but A no longer
    // holds the lease, so it may not attempt it.
    s.gate.release();
    let err = a.join().unwrap().unwrap_err();
    assert!(matches!(err, Error::LeaseLost { .. }), "{err:?}");
    assert_eq!(
        s.gate.attempts().len(),
        3,
        "A attempted nothing after losing the lease"
    );

    // The retry resumes under the same keys and finishes.
    s.gate.time_out_new_keys(false);
    let done = s.b.call(&request).unwrap();
    assert!(done.outcome.is_success(), "{:?}", done.outcome);
    let attempts = s.gate.attempts();
    assert_eq!(attempts.len(), 4);
    assert_eq!(
        attempts[3], second_key,
        "the pending effect is retried with its stored key"
    );
    assert_eq!(s.gate.applied().len(), 2, "two emails in all");
}
