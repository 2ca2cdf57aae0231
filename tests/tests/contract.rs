//! The rest of the contract table: expiry on an injected clock, `gc`, and the
//! transactional `kv` provider.

use std::time::Duration;

use justonce::__private::KvProvider;
use justonce::CallRequest;

use crate::support::{receipt_args, test_host};

const DAY: Duration = Duration::from_secs(24 * 3600);
const MS: Duration = Duration::from_millis(1);

#[test]
fn a_retry_just_inside_retention_is_replayed_and_one_just_past_it_is_a_new_effect() {
    let t = test_host(|b| b.retention(DAY));
    let request =
        CallRequest::new("send_receipt", receipt_args(1, "a@example.com")).conversation("c");
    let first = t.host.call(&request).unwrap();

    t.clock.advance(DAY - MS);
    let inside = t.host.call(&request).unwrap();
    assert!(inside.replayed, "1 ms inside retention");
    assert_eq!(t.mail.attempts().len(), 1);

    t.clock.advance(MS);
    let past = t.host.call(&request).unwrap();
    assert!(!past.replayed, "at the boundary the record is absent");
    assert_eq!(past.key, first.key, "the key is derived the same way");
    assert_eq!(t.mail.attempts().len(), 2, "the tool ran again");
    assert_eq!(
        t.mail.sent().unwrap().len(),
        2,
        "a second effect, by design"
    );
}

#[test]
fn gc_removes_exactly_the_expired_records() {
    let t = test_host(|b| b.retention(DAY));
    let call = |order: u64| {
        t.host
            .call(
                &CallRequest::new("send_receipt", receipt_args(order, "a@example.com"))
                    .conversation("c"),
            )
            .unwrap()
    };
    call(1);
    call(2);
    t.clock.advance(Duration::from_secs(3600));
    let fresh = call(3);

    t.clock.advance(DAY - Duration::from_secs(3600));
    let report = t.host.gc().unwrap();
    assert_eq!(report.invocations, 2);
    assert_eq!(report.effects, 2);
    let left = t.host.journal(None, 10).unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].key, fresh.key.as_str());

    assert_eq!(
        t.host.gc().unwrap().invocations,
        0,
        "nothing more is expired"
    );
    t.clock.advance(Duration::from_secs(3600));
    assert_eq!(t.host.gc().unwrap().invocations, 1);
    assert!(t.host.journal(None, 10).unwrap().is_empty());
}

#[test]
fn kv_writes_commit_with_their_effect_record_once() {
    let t = test_host(|b| b);
    let request = CallRequest::new(
        "kv_put",
        r#"{"entries":[{"key":"greeting","value":"hello"},{"key":"count","value":1}]}"#,
    );
    let first = t.host.call(&request).unwrap();
    assert!(first.outcome.is_success(), "{:?}", first.outcome);
    let retry = t.host.call(&request).unwrap();
    assert!(retry.replayed);
    let journal = t.host.journal(None, 10).unwrap();
    assert_eq!(journal[0].effects.len(), 2);
    assert!(
        journal[0]
            .effects
            .iter()
            .all(|e| e.state == "done" && e.attempts == 1)
    );
    assert_eq!(journal[0].effects[0].class, "transactional");
    let value = t
        .host
        .inspect_sqlite(|conn| {
            KvProvider::get(conn, &KvProvider::stored_key("kv_put", None, "greeting"))
        })
        .unwrap();
    assert_eq!(value, Some(serde_json::json!("hello")));
}

#[test]
fn an_effect_to_an_unconfigured_provider_is_not_performed_and_nothing_is_saved() {
    let t = test_host(|b| b);
    // `payments_refund` needs `payments`, which this host does not have: the host's
    // configuration, not the tool's outcome.
    let request = CallRequest::new("payments_refund", r#"{"order_id":1,"amount_cents":10}"#);
    let err = t.host.call(&request).unwrap_err();
    assert_eq!(err.kind(), "not_performed", "{err}");
    assert!(err.retry_safe());
    assert!(
        err.to_string().contains("no provider named `payments`"),
        "{err}"
    );
    assert!(
        t.host.journal(None, 10).unwrap().is_empty(),
        "nothing saved"
    );
    // The same call again is refused the same way, not replayed.
    assert_eq!(t.host.call(&request).unwrap_err().kind(), "not_performed");
}
