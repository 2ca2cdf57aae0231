//! The seed's retry scenarios. Every retry test asserts four things: the retry
//! happened, the effect happened once, both attempts carried the same key, and what
//! the agent was told. The opposite cases (different calls both happen) sit beside.

use std::sync::{Arc, Barrier};

use justonce::{CallRequest, Error, Outcome};
use serde_json::Value;

use crate::support::{self, FakePayments, Fault, receipt_args, test_host, test_host_with_mail};

fn result_of(outcome: &Outcome) -> &Value {
    match outcome {
        Outcome::Success { result, .. } => result,
        other => panic!("expected a success-shaped result, got {other:?}"),
    }
}

#[test]
fn lost_mail_response_is_retried_with_the_same_key_and_sends_one_email() {
    let t = test_host_with_mail(1, |b| b);
    let request = CallRequest::new("send_receipt", receipt_args(4417, "ada@example.com"))
        .conversation("conv-1");

    let first = t.host.call(&request).unwrap();

    // The retry happened: the transport was called twice.
    let attempts = t.mail.attempts();
    assert_eq!(attempts.len(), 2, "transport calls: {attempts:?}");
    // Both attempts carried the same key.
    assert_eq!(attempts[0], attempts[1]);
    // The effect happened once.
    let sent = t.mail.sent().unwrap();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].key, attempts[0]);
    // The agent was told a success-shaped result with the one message id.
    assert!(!first.replayed);
    let result = result_of(&first.outcome);
    assert_eq!(result["sent"][0]["order_id"], 4417);
    assert_eq!(result["sent"][0]["message_id"], sent[0].message_id.as_str());

    // The agent's own retry of the whole call: replayed, nothing ran.
    let retry = t.host.call(&request).unwrap();
    assert!(retry.replayed);
    assert_eq!(retry.key, first.key);
    assert_eq!(retry.outcome, first.outcome);
    assert_eq!(t.mail.attempts().len(), 2);
    assert_eq!(t.mail.sent().unwrap().len(), 1);
}

#[test]
fn lost_refund_response_is_retried_with_the_same_key_and_refunds_once() {
    let payments = Arc::new(FakePayments::new(Fault::LoseFirst(1)));
    let t = test_host(|b| b.provider("payments", payments.clone()));
    let request = CallRequest::new(
        "payments_refund",
        r#"{"order_id":4417,"amount_cents":1299}"#,
    )
    .conversation("conv-1");

    let first = t.host.call(&request).unwrap();
    let attempts = payments.attempts();
    assert_eq!(attempts.len(), 2, "transport calls: {attempts:?}");
    assert_eq!(attempts[0], attempts[1]);
    assert_eq!(payments.applied().len(), 1);
    assert_eq!(payments.applied()[0].1["amount_cents"], 1299);
    let result = result_of(&first.outcome);
    assert_eq!(result["refund_id"], "re_0001");
    assert_eq!(result["status"], "succeeded");

    let retry = t.host.call(&request).unwrap();
    assert!(retry.replayed);
    assert_eq!(retry.outcome, first.outcome);
    assert_eq!(payments.attempts().len(), 2);
    assert_eq!(payments.applied().len(), 1);
}

#[test]
fn two_different_sends_both_happen() {
    let t = test_host(|b| b);
    let a = t
        .host
        .call(&CallRequest::new("send_receipt", receipt_args(1, "a@example.com")).conversation("c"))
        .unwrap();
    let b = t
        .host
        .call(&CallRequest::new("send_receipt", receipt_args(2, "b@example.com")).conversation("c"))
        .unwrap();
    assert_ne!(a.key, b.key);
    assert!(!a.replayed && !b.replayed);
    let sent = t.mail.sent().unwrap();
    assert_eq!(sent.len(), 2);
    assert_ne!(sent[0].key, sent[1].key);
    assert_eq!(
        [sent[0].to.as_str(), sent[1].to.as_str()],
        ["a@example.com", "b@example.com"]
    );
}

#[test]
fn one_call_with_two_orders_sends_two_emails_under_two_keys() {
    let t = test_host(|b| b);
    let args = r#"{"orders":[
        {"order_id":1,"email":"a@example.com","amount_cents":100},
        {"order_id":2,"email":"b@example.com","amount_cents":200},
        {"order_id":1,"email":"a@example.com","amount_cents":100}]}"#;
    let response = t
        .host
        .call(&CallRequest::new("send_receipt", args))
        .unwrap();
    let sent = t.mail.sent().unwrap();
    assert_eq!(sent.len(), 2, "one email per distinct order: {sent:?}");
    assert_ne!(sent[0].key, sent[1].key);
    assert_eq!(
        result_of(&response.outcome)["sent"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn two_identical_calls_in_one_assistant_message_run_once() {
    // An OpenAI-style assistant message with the same call twice, dispatched at once.
    let message: Value = serde_json::from_str(
        r#"{"role":"assistant","tool_calls":[
            {"id":"call_a","type":"function","function":{"name":"send_receipt","arguments":"{\"orders\":[{\"order_id\":7,\"email\":\"x@example.com\",\"amount_cents\":5}]}"}},
            {"id":"call_b","type":"function","function":{"name":"send_receipt","arguments":"{\"orders\":[{\"email\":\"x@example.com\",\"order_id\":7,\"amount_cents\":5}]}"}}
        ]}"#,
    )
    .unwrap();
    let t = Arc::new(test_host(|b| b));
    let barrier = Arc::new(Barrier::new(2));
    let handles: Vec<_> = message["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|call| {
            let request = CallRequest::new(
                call["function"]["name"].as_str().unwrap(),
                call["function"]["arguments"].as_str().unwrap(),
            )
            .conversation("conv-parallel")
            .tool_call_id(call["id"].as_str().unwrap());
            let (t, barrier) = (t.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                t.host.call(&request).unwrap()
            })
        })
        .collect();
    let responses: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();

    assert_eq!(t.mail.sent().unwrap().len(), 1, "one effect");
    assert_eq!(t.mail.attempts().len(), 1);
    assert_eq!(responses[0].key, responses[1].key);
    assert_eq!(responses[0].outcome, responses[1].outcome);
    result_of(&responses[0].outcome);
    assert_eq!(
        responses.iter().filter(|r| r.replayed).count(),
        1,
        "exactly one of the two ran"
    );
}

#[test]
fn replanned_call_with_a_new_id_and_equivalent_arguments_is_deduplicated() {
    let t = test_host(|b| b);
    let first = t
        .host
        .call(
            &CallRequest::new(
                "send_receipt",
                r#"{"orders":[{"order_id":4417,"email":"ada@example.com","amount_cents":1299}]}"#,
            )
            .conversation("c")
            .tool_call_id("call_1"),
        )
        .unwrap();
    let replanned = t
        .host
        .call(
            &CallRequest::new("send_receipt", r#"{ "orders" : [ {"amount_cents":1299, "email":"ada@example.com", "order_id":4417.0} ] }"#)
                .conversation("c")
                .tool_call_id("call_2"),
        )
        .unwrap();
    assert!(replanned.replayed);
    assert_eq!(replanned.key, first.key);
    assert_eq!(replanned.outcome, first.outcome);
    assert_eq!(t.mail.attempts().len(), 1);
    assert_eq!(t.mail.sent().unwrap().len(), 1);
    let journal = t.host.journal(None, 10).unwrap();
    assert_eq!(journal[0].tool_call_ids, vec!["call_1", "call_2"]);
}

#[test]
fn same_tool_call_id_with_different_arguments_is_a_mismatch_and_runs_nothing() {
    let t = test_host(|b| b);
    t.host
        .call(
            &CallRequest::new("send_receipt", receipt_args(1, "a@example.com"))
                .conversation("c")
                .tool_call_id("call_1"),
        )
        .unwrap();
    let before = t.host.journal(None, 10).unwrap();
    let err = t
        .host
        .call(
            &CallRequest::new("send_receipt", receipt_args(2, "a@example.com"))
                .conversation("c")
                .tool_call_id("call_1"),
        )
        .unwrap_err();
    assert!(matches!(err, Error::Mismatch { .. }), "{err:?}");
    assert_eq!(t.mail.attempts().len(), 1, "nothing ran");
    let after = t.host.journal(None, 10).unwrap();
    assert_eq!(after.len(), before.len(), "nothing stored");
    assert_eq!(after[0].tool_call_ids, vec!["call_1"]);
}

#[test]
fn explicit_key_with_different_arguments_is_a_mismatch() {
    let t = test_host(|b| b);
    let first = t
        .host
        .call(
            &CallRequest::new("send_receipt", receipt_args(1, "a@example.com"))
                .key("order-1-receipt"),
        )
        .unwrap();
    assert_eq!(first.key.as_str(), "order-1-receipt");
    let again = t
        .host
        .call(
            &CallRequest::new("send_receipt", receipt_args(1, "a@example.com"))
                .key("order-1-receipt"),
        )
        .unwrap();
    assert!(again.replayed);
    let err = t
        .host
        .call(
            &CallRequest::new("send_receipt", receipt_args(9, "a@example.com"))
                .key("order-1-receipt"),
        )
        .unwrap_err();
    assert!(matches!(err, Error::Mismatch { .. }), "{err:?}");
    assert_eq!(t.mail.sent().unwrap().len(), 1);
}

#[test]
fn a_saved_refusal_is_replayed_without_calling_the_downstream_again() {
    let refusal = serde_json::json!({"status": 500, "error": "internal"});
    let payments = Arc::new(FakePayments::new(Fault::Reject(refusal.clone())));
    let t = test_host(|b| b.provider("payments", payments.clone()));
    let request = CallRequest::new("payments_refund", r#"{"order_id":1,"amount_cents":10}"#);
    let first = t.host.call(&request).unwrap();
    match &first.outcome {
        Outcome::ToolError { code, details, .. } => {
            assert_eq!(code, "refund_rejected");
            assert_eq!(details.as_ref(), Some(&refusal));
        }
        other => panic!("expected the tool's error, got {other:?}"),
    }
    payments.set_fault(Fault::None);
    let retry = t.host.call(&request).unwrap();
    assert!(retry.replayed);
    assert_eq!(
        retry.outcome, first.outcome,
        "the error is replayed as saved"
    );
    assert_eq!(
        payments.attempts().len(),
        1,
        "the downstream was not called again"
    );
    assert!(payments.applied().is_empty());
}

#[test]
fn a_tool_error_is_saved_and_replayed() {
    let t = test_host(|b| b);
    let request = CallRequest::new("fail", r#"{}"#);
    let first = t.host.call(&request).unwrap();
    assert!(matches!(&first.outcome, Outcome::ToolError { code, .. } if code == "always_fails"));
    let retry = t.host.call(&request).unwrap();
    assert!(retry.replayed);
    assert_eq!(retry.outcome, first.outcome);
    assert_eq!(t.host.journal(None, 10).unwrap()[0].runs, 1);
}

#[test]
fn a_trap_after_one_effect_is_saved_and_the_effect_stays_journaled_once() {
    let t = test_host(|b| b);
    let request = CallRequest::new("effect_then_trap", r#"{"to":"a@example.com"}"#);
    let first = t.host.call(&request).unwrap();
    assert!(
        matches!(&first.outcome, Outcome::Trap { .. }),
        "{:?}",
        first.outcome
    );
    let retry = t.host.call(&request).unwrap();
    assert!(retry.replayed);
    assert_eq!(retry.outcome, first.outcome);
    assert_eq!(t.mail.sent().unwrap().len(), 1);
    assert_eq!(t.mail.attempts().len(), 1);
    let journal = t.host.journal(None, 10).unwrap();
    assert_eq!(journal[0].effects.len(), 1);
    assert_eq!(journal[0].effects[0].state, "done");
}

#[test]
fn rejections_before_the_guest_starts_store_nothing_and_the_call_can_then_succeed() {
    let t = test_host(|b| b);
    let err = t
        .host
        .call(&CallRequest::new(
            "send_recipt",
            receipt_args(1, "a@example.com"),
        ))
        .unwrap_err();
    assert!(matches!(err, Error::UnknownTool { .. }), "{err:?}");
    assert!(
        err.to_string().contains("send_receipt"),
        "names the loaded tools: {err}"
    );
    let err = t
        .host
        .call(&CallRequest::new("send_receipt", r#"{"orders": [}"#))
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArguments { .. }), "{err:?}");
    let err = t
        .host
        .call(&CallRequest::new("send_receipt", "[1]"))
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArguments { .. }), "{err:?}");
    let err = t
        .host
        .call(&CallRequest::new(
            "send_receipt",
            r#"{"orders":[],"orders":[]}"#,
        ))
        .unwrap_err();
    assert!(err.to_string().contains("duplicate"), "{err}");
    assert_eq!(support::invocation_count(&t.host), 0);
    assert!(t.mail.attempts().is_empty());

    let ok = t
        .host
        .call(&CallRequest::new(
            "send_receipt",
            receipt_args(1, "a@example.com"),
        ))
        .unwrap();
    assert!(!ok.replayed);
    assert_eq!(t.mail.sent().unwrap().len(), 1);
}

#[test]
fn outcome_unknown_after_the_budget_then_a_retry_resumes_under_the_same_key() {
    let payments = Arc::new(FakePayments::new(Fault::AlwaysTimeout));
    let t = test_host(|b| b.provider("payments", payments.clone()));
    let request = CallRequest::new("payments_refund", r#"{"order_id":5,"amount_cents":500}"#)
        .conversation("c");

    let err = t.host.call(&request).unwrap_err();
    let Error::OutcomeUnknown {
        key, seq, provider, ..
    } = &err
    else {
        panic!("expected outcome_unknown, got {err:?}");
    };
    assert_eq!((*seq, provider.as_str()), (0, "payments"));
    assert!(err.retry_safe());
    assert!(err.to_string().contains("retrying the same call is safe"));
    let attempts = payments.attempts();
    assert_eq!(attempts.len(), 3, "the budget is three attempts");
    assert!(
        attempts.iter().all(|k| *k == attempts[0]),
        "one key: {attempts:?}"
    );
    let journal = t.host.journal(None, 10).unwrap();
    assert_eq!(journal[0].state, "incomplete");
    assert_eq!(journal[0].effects[0].state, "pending");

    payments.set_fault(Fault::None);
    let resumed = t.host.call(&request).unwrap();
    assert!(!resumed.replayed, "the resumed run produced the outcome");
    assert_eq!(&resumed.key, key);
    assert_eq!(result_of(&resumed.outcome)["status"], "succeeded");
    let attempts = payments.attempts();
    assert_eq!(attempts.len(), 4);
    assert!(
        attempts.iter().all(|k| *k == attempts[0]),
        "the stored key was reused"
    );
    assert_eq!(payments.applied().len(), 1, "refunded once");

    let replay = t.host.call(&request).unwrap();
    assert!(replay.replayed);
    assert_eq!(payments.attempts().len(), 4);
}

#[test]
fn an_unkeyed_effect_with_an_unknown_outcome_is_never_repeated() {
    let payments = Arc::new(FakePayments::with_class(
        justonce::ProviderClass::Unkeyed,
        Fault::AlwaysTimeout,
    ));
    let t = test_host(|b| b.provider("payments", payments.clone()));
    let request = CallRequest::new("payments_refund", r#"{"order_id":5,"amount_cents":500}"#);
    assert!(matches!(
        t.host.call(&request),
        Err(Error::OutcomeUnknown { .. })
    ));
    assert_eq!(payments.attempts().len(), 1, "at most once");
    payments.set_fault(Fault::None);
    assert!(matches!(
        t.host.call(&request),
        Err(Error::OutcomeUnknown { .. })
    ));
    assert_eq!(payments.attempts().len(), 1, "fails closed on resume");
}
