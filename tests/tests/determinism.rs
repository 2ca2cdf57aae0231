//! Deterministic replay: a resumed guest reads the same clock and random values as
//! the run it resumes, so it asks for the same effects; one that asks for another
//! effect at the same position is refused as a divergence and performs nothing.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use justonce::{CallRequest, Clock, Error, Host, ManualClock, RetryPolicy};
use justonce::{Limits, Runtime};

use crate::support::{
    FakePayments, Fault, RUNTIME, success, test_host_with_mail, time_and_random_body,
};

#[test]
fn a_resumed_guest_sees_the_clock_and_random_values_of_its_first_run() {
    // Every response of the first three attempts per key is lost: the first call
    // ends with the outcome unknown, after the mailbox accepted the email.
    let t = test_host_with_mail(3, |b| b);
    let request = CallRequest::new("time_and_random", "{}").conversation("c");
    let started_ms = t.clock.now_ms();
    let err = t.host.call(&request).unwrap_err();
    assert!(matches!(err, Error::OutcomeUnknown { .. }), "{err:?}");
    let sent = t.mail.sent().unwrap();
    assert_eq!(sent.len(), 1);
    let (now_nanos, random) = time_and_random_body(&sent[0].body);
    // The guest's wall clock is the host's (injected) clock at the invocation's start.
    assert_eq!(now_nanos, u64::try_from(started_ms).unwrap() * 1_000_000);

    // Later, with the clock moved on, the retry resumes the same invocation.
    t.clock.advance(Duration::from_secs(5));
    let resumed = t.host.call(&request).unwrap();
    assert!(!resumed.replayed, "the retry ran the guest again");
    let r = success(&resumed.outcome);
    assert_eq!(r["now_nanos"], now_nanos, "same time as the first run");
    assert_eq!(r["random"], random, "same random number as the first run");
    assert_eq!(r["message_id"], sent[0].message_id.as_str());
    // So it asked for the same email, under the same key: still one email.
    let attempts = t.mail.attempts();
    assert_eq!(attempts.len(), 4);
    assert!(attempts.iter().all(|k| *k == attempts[0]), "{attempts:?}");
    assert_eq!(t.mail.sent().unwrap().len(), 1);

    // A different call is a different invocation: its own time and its own seed
    // (its response is lost too, but the mailbox shows what it sent).
    let other = t
        .host
        .call(&CallRequest::new("time_and_random", "{}").conversation("other"));
    assert!(other.is_err());
    let sent = t.mail.sent().unwrap();
    assert_eq!(sent.len(), 2);
    let (other_nanos, other_random) = time_and_random_body(&sent[1].body);
    assert_eq!(
        other_nanos,
        u64::try_from(t.clock.now_ms()).unwrap() * 1_000_000
    );
    assert_ne!(other_random, random);
}

/// A host on `db` with `runtime`, whose `mail` is `mail`.
fn host_on(
    db: &Path,
    runtime: Arc<Runtime>,
    clock: &ManualClock,
    mail: &Arc<FakePayments>,
) -> Host {
    Host::builder()
        .database(db)
        .runtime(runtime)
        .clock(Arc::new(clock.clone()))
        .retry_policy(RetryPolicy::immediate(2))
        .provider("mail", mail.clone())
        .build()
        .unwrap()
}

/// Version 2 of the `diverge` tool, as a deployment that upgraded it would load it.
fn diverge_v2() -> Arc<Runtime> {
    let mut runtime = Runtime::new(Limits::default()).unwrap();
    runtime
        .load_file(Path::new(justonce_tests::guests::DIVERGE_V2_COMPONENT))
        .unwrap();
    Arc::new(runtime)
}

#[test]
fn a_resumed_guest_that_asks_for_another_effect_gets_divergence_and_nothing_is_performed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let clock = ManualClock::default();
    let mail = Arc::new(FakePayments::new(Fault::AlwaysTimeout));
    let request = CallRequest::new("diverge", r#"{"variant":"a"}"#).conversation("c");

    // Version 1 of the tool journals its email; the outcome stays unknown.
    let v1 = host_on(&db, RUNTIME.clone(), &clock, &mail);
    assert!(matches!(
        v1.call(&request),
        Err(Error::OutcomeUnknown { .. })
    ));
    let journaled = v1.journal(None, 10).unwrap()[0].effects.clone();
    assert_eq!(mail.attempts().len(), 2);

    // Version 2, deployed before the retry, sends a different email at position 0.
    let v2 = host_on(&db, diverge_v2(), &clock, &mail);
    mail.set_fault(Fault::None);
    for _ in 0..2 {
        let err = v2.call(&request).unwrap_err();
        let Error::Divergence { seq, detail, .. } = &err else {
            panic!("expected divergence, got {err:?}");
        };
        assert_eq!(*seq, 0);
        assert!(detail.contains("mail.send"), "{detail}");
        assert!(!err.retry_safe());
        assert_eq!(mail.attempts().len(), 2, "the provider was not called");
        assert!(mail.applied().is_empty(), "nothing was performed");
        let entry = &v2.journal(None, 10).unwrap()[0];
        assert_eq!(entry.state, "incomplete");
        assert_eq!(entry.effects.len(), 1);
        assert_eq!(entry.effects[0].key, journaled[0].key);
        assert_eq!(
            entry.effects[0].attempts, journaled[0].attempts,
            "no attempt was made"
        );
    }

    // Version 1 can still finish it, under the journaled key.
    let done = v1.call(&request).unwrap();
    assert!(done.outcome.is_success(), "{:?}", done.outcome);
    assert_eq!(mail.applied().len(), 1);
    assert_eq!(mail.applied()[0].0, journaled[0].key);
}

#[test]
fn a_resumed_guest_that_finishes_without_its_journaled_effects_is_a_divergence() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let clock = ManualClock::default();
    let mail = Arc::new(FakePayments::new(Fault::AlwaysTimeout));
    let request = CallRequest::new("diverge", r#"{"variant":"none"}"#).conversation("c");
    let v1 = host_on(&db, RUNTIME.clone(), &clock, &mail);
    assert!(matches!(
        v1.call(&request),
        Err(Error::OutcomeUnknown { .. })
    ));

    // Version 2 returns without the email version 1 may have sent: saving its
    // outcome would hide that effect, so the call stays open instead.
    let v2 = host_on(&db, diverge_v2(), &clock, &mail);
    let err = v2.call(&request).unwrap_err();
    let Error::Divergence { seq, detail, .. } = &err else {
        panic!("expected divergence, got {err:?}");
    };
    assert_eq!(*seq, 0);
    assert!(detail.contains("1 effect(s)"), "{detail}");
    let entry = &v2.journal(None, 10).unwrap()[0];
    assert_eq!(entry.state, "incomplete");
    assert_eq!(entry.outcome, None, "no outcome was saved");

    // The opposite: a call that no earlier run journaled an effect for finishes.
    let fresh = v2
        .call(&CallRequest::new("diverge", r#"{"variant":"none"}"#).conversation("other"))
        .unwrap();
    assert_eq!(success(&fresh.outcome), &serde_json::Value::Null);
}
