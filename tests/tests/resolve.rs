//! Unkeyed effects whose outcome is unknown: the guard fails closed, `journal
//! --unresolved` lists them, and a person's `resolve` lets the retry finish.

use std::path::Path;
use std::sync::Arc;

use justonce::Resolution;
use justonce::{CallRequest, Clock, Error, Host, ProviderClass, RetryPolicy};
use serde_json::{Value, json};

use crate::support::process::{json_of, justonce};
use crate::support::{FakePayments, Fault, RUNTIME, success, test_host};

fn unkeyed_timeouts() -> Arc<FakePayments> {
    Arc::new(FakePayments::with_class(
        ProviderClass::Unkeyed,
        Fault::AlwaysTimeout,
    ))
}

fn refund() -> CallRequest {
    CallRequest::new("payments_refund", r#"{"order_id":5,"amount_cents":500}"#).conversation("c")
}

#[test]
fn not_performed_lets_the_retry_attempt_once_more_under_the_same_key() {
    let payments = unkeyed_timeouts();
    let t = test_host(|b| b.provider("payments", payments.clone()));
    let err = t.host.call(&refund()).unwrap_err();
    assert!(matches!(err, Error::OutcomeUnknown { .. }), "{err:?}");
    assert!(
        err.to_string().contains("justonce resolve"),
        "tells the person how: {err}"
    );

    let unresolved = t.host.unresolved(t.clock.now_ms()).unwrap();
    assert_eq!(unresolved.len(), 1, "{unresolved:?}");
    let effect = &unresolved[0];
    assert_eq!(
        (effect.tool.as_str(), effect.provider.as_str(), effect.seq),
        ("payments_refund", "payments", 0)
    );
    assert_eq!(effect.key, payments.attempts()[0]);
    assert_eq!(effect.attempts, 1);
    // The agent is told the call's key, never the effect key (operators read it in
    // the journal): it keys nothing an agent may make.
    assert!(
        err.to_string()
            .contains(&format!("justonce journal {}", err.key().unwrap())),
        "{err}"
    );
    assert!(!err.to_string().contains(&effect.key), "{err}");

    // Until a person decides, the retry fails closed and calls nothing.
    let again = t.host.call(&refund()).unwrap_err();
    assert!(matches!(again, Error::OutcomeUnknown { .. }), "{again:?}");
    assert!(again.to_string().contains("justonce resolve"), "{again}");
    assert!(!again.to_string().contains(&effect.key), "{again}");
    assert_eq!(payments.attempts().len(), 1);

    // The person checked downstream: it did not happen.
    t.host
        .resolve(&effect.key, Resolution::NotPerformed, &Value::Null, "ada")
        .unwrap();
    assert!(t.host.unresolved(t.clock.now_ms()).unwrap().is_empty());
    payments.set_fault(Fault::None);
    let done = t.host.call(&refund()).unwrap();
    assert!(!done.replayed);
    assert_eq!(success(&done.outcome)["status"], "succeeded");
    let attempts = payments.attempts();
    assert_eq!(attempts.len(), 2, "one more attempt");
    assert_eq!(attempts[0], attempts[1], "under the same key");
    assert_eq!(payments.applied().len(), 1);
}

#[test]
fn a_not_performed_resolution_is_used_once() {
    let payments = unkeyed_timeouts();
    let t = test_host(|b| b.provider("payments", payments.clone()));
    assert!(t.host.call(&refund()).is_err());
    let key = payments.attempts()[0].clone();
    t.host
        .resolve(&key, Resolution::NotPerformed, &Value::Null, "ada")
        .unwrap();
    // The second attempt is as unknown as the first: a person must look again.
    assert!(matches!(
        t.host.call(&refund()),
        Err(Error::OutcomeUnknown { .. })
    ));
    assert_eq!(payments.attempts().len(), 2);
    assert!(matches!(
        t.host.call(&refund()),
        Err(Error::OutcomeUnknown { .. })
    ));
    assert_eq!(payments.attempts().len(), 2, "fails closed again");
    assert_eq!(t.host.unresolved(t.clock.now_ms()).unwrap().len(), 1);
}

#[test]
fn performed_finishes_the_effect_with_the_persons_answer_and_the_provider_is_not_called() {
    let payments = unkeyed_timeouts();
    let t = test_host(|b| b.provider("payments", payments.clone()));
    assert!(t.host.call(&refund()).is_err());
    let key = payments.attempts()[0].clone();
    let answer = json!({"refund_id": "re_by_hand", "status": "succeeded"});
    t.host
        .resolve(&key, Resolution::Performed, &answer, "ada")
        .unwrap();
    payments.set_fault(Fault::None);
    let done = t.host.call(&refund()).unwrap();
    assert_eq!(success(&done.outcome)["refund_id"], "re_by_hand");
    assert_eq!(
        payments.attempts().len(),
        1,
        "the provider was not called again"
    );
    assert!(payments.applied().is_empty());
    let effect = &t.host.journal(None, 10).unwrap()[0].effects[0];
    assert_eq!(effect.resolution.as_deref(), Some("performed"));
    assert_eq!(effect.state, "done");
}

#[test]
fn resolving_anything_but_a_stopped_pending_unkeyed_effect_is_refused_with_the_reason() {
    let keyed = Arc::new(FakePayments::new(Fault::AlwaysTimeout));
    let t = test_host(|b| b.provider("payments", keyed.clone()));
    let refuse = |key: &str| {
        let err = t
            .host
            .resolve(key, Resolution::Performed, &json!({}), "ada")
            .unwrap_err();
        assert_eq!(err.kind(), "cannot_resolve");
        assert!(err.to_string().contains(key), "names the effect: {err}");
        err.to_string()
    };
    assert!(refuse("0123456789abcdef0123456789abcdef").contains("no effect"));

    assert!(t.host.call(&refund()).is_err());
    let pending_keyed = keyed.attempts()[0].clone();
    assert!(refuse(&pending_keyed).contains("keyed"));

    let sent = t
        .host
        .call(&CallRequest::new(
            "send_receipt",
            crate::support::receipt_args(1, "a@example.com"),
        ))
        .unwrap();
    let done = t.host.journal(None, 10).unwrap();
    let done_key = done
        .iter()
        .find(|e| e.key == sent.key.as_str())
        .unwrap()
        .effects[0]
        .key
        .clone();
    assert!(refuse(&done_key).contains("definitive answer"));
}

#[test]
fn the_cli_lists_unresolved_effects_and_a_person_resolves_one() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let payments = unkeyed_timeouts();
    let host = |db: &Path| {
        Host::builder()
            .database(db)
            .runtime(RUNTIME.clone())
            .retry_policy(RetryPolicy::immediate(3))
            .provider("payments", payments.clone())
            .build()
            .unwrap()
    };
    let h = host(&db);
    assert!(h.call(&refund()).is_err());
    let key = payments.attempts()[0].clone();

    let listed = justonce(&db, &["journal", "--unresolved", "--json"], None);
    assert_eq!(listed.status.code(), Some(0));
    let listed = json_of(&listed);
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["key"], key.as_str());
    assert_eq!(listed[0]["provider"], "payments");
    let text = justonce(&db, &["journal", "--unresolved"], None);
    assert!(String::from_utf8_lossy(&text.stdout).contains(&key));

    // Bad input is refused, naming the problem.
    let out = justonce(
        &db,
        &["resolve", "nope", "--performed", "--by", "ada"],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot resolve effect nope"));
    let out = justonce(&db, &["resolve", &key, "--by", "ada"], None);
    assert_eq!(
        out.status.code(),
        Some(2),
        "one of --performed or --not-performed"
    );
    let out = justonce(
        &db,
        &[
            "resolve",
            &key,
            "--performed",
            "--response",
            "{oops",
            "--by",
            "ada",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--response is not valid JSON"));

    let out = justonce(
        &db,
        &["resolve", &key, "--not-performed", "--by", "grace"],
        None,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("(by grace)"));
    // The call's story names the operation, who and what they said.
    let invocation = listed[0]["invocation"].as_str().unwrap();
    let story = json_of(&justonce(&db, &["journal", invocation, "--json"], None));
    let operations = story["operations"].as_array().unwrap();
    assert_eq!(operations.len(), 1, "{story}");
    assert_eq!(operations[0]["action"], "resolve");
    assert_eq!(operations[0]["by"], "grace");
    assert_eq!(operations[0]["detail"]["effect"]["key"], key.as_str());
    assert_eq!(operations[0]["detail"]["resolution"], "not_performed");
    let text = justonce(&db, &["journal", invocation], None);
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("resolve  by=grace"),
        "{}",
        String::from_utf8_lossy(&text.stdout)
    );
    assert_eq!(
        json_of(&justonce(&db, &["journal", "--unresolved", "--json"], None)),
        json!([])
    );

    payments.set_fault(Fault::None);
    let done = h.call(&refund()).unwrap();
    assert!(done.outcome.is_success());
    let attempts = payments.attempts();
    assert_eq!(attempts, [key.clone(), key], "one more attempt, same key");
}
