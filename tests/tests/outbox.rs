//! The `outbox` provider and delivery: a webhook is queued in the journal's
//! transaction, exactly once per effect, and delivered with its effect key as the
//! `Idempotency-Key` to a receiver on 127.0.0.1 that deduplicates by it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use justonce::__private::{Behaviour, LocalApi};
use justonce::__private::{Deliverer, DeliveryOutcome, DeliveryPolicy};
use justonce::__private::{OutboxMessage, OutboxProvider};
use justonce::HttpConfig;
use justonce::{CallRequest, Host, ManualClock, Outcome};
use serde_json::Value;

use crate::support::{RefusingOutbox, test_host};

/// Lets `notify` (only) reach `receiver` as the `webhooks` service.
fn webhooks(receiver: &LocalApi) -> HttpConfig {
    HttpConfig::default()
        .service("webhooks", receiver.url())
        .allow("notify", receiver.url())
}

fn notify(event: &str) -> CallRequest {
    CallRequest::new(
        "notify",
        format!(r#"{{"event":"{event}","data":{{"order_id":4417}}}}"#),
    )
    .conversation("conv-outbox")
}

fn messages(host: &Host) -> Vec<OutboxMessage> {
    host.inspect_sqlite(OutboxProvider::messages).unwrap()
}

fn result_of(outcome: &Outcome) -> &Value {
    match outcome {
        Outcome::Success { result } => result,
        other => panic!("expected a success-shaped result, got {other:?}"),
    }
}

/// Retries after 10 s, doubling.
fn policy() -> DeliveryPolicy {
    DeliveryPolicy {
        initial_backoff: Duration::from_secs(10),
        ..DeliveryPolicy::default()
    }
}

#[test]
fn a_retried_notify_queues_one_message_under_its_effect_key() {
    let receiver = LocalApi::start().unwrap();
    let t = test_host(|b| b.http(webhooks(&receiver)));

    let first = t.host.call(&notify("refund.issued")).unwrap();
    let retried = t
        .host
        .call(&notify("refund.issued").tool_call_id("call_2"))
        .unwrap();

    let queued = messages(&t.host);
    assert_eq!(queued.len(), 1, "{queued:?}");
    let journal = t.host.journal(None, 10).unwrap();
    assert_eq!(queued[0].effect_key, journal[0].effects[0].key);
    assert_eq!(
        (queued[0].state.as_str(), queued[0].tool.as_str()),
        ("pending", "notify")
    );
    assert_eq!(queued[0].url, format!("{}/events", receiver.url()));
    assert!(retried.replayed);
    assert_eq!(result_of(&first.outcome)["message_id"], queued[0].id);
    assert_eq!(retried.outcome, first.outcome);
    assert_eq!(receiver.connections(), 0, "queuing sends nothing");

    // The opposite: another event is another message.
    t.host.call(&notify("refund.failed")).unwrap();
    assert_eq!(messages(&t.host).len(), 2);
}

#[test]
fn a_message_whose_effect_is_refused_is_rolled_back_with_it() {
    let receiver = LocalApi::start().unwrap();
    let config = Arc::new(webhooks(&receiver));
    let clock = Arc::new(ManualClock::default());
    let outbox = OutboxProvider::new(Arc::clone(&config), clock);
    let t = test_host(|b| {
        b.http((*config).clone())
            .provider("outbox", Arc::new(RefusingOutbox(outbox)))
    });

    let response = t.host.call(&notify("refund.issued")).unwrap();

    // The provider wrote its message, then the effect was refused: the message went
    // with it, because both were in one transaction.
    assert!(messages(&t.host).is_empty(), "{:?}", messages(&t.host));
    let agent = response.outcome.to_agent_json();
    assert_eq!(agent["error"]["code"], "effect_rejected", "{agent}");
    assert!(
        agent["error"]["details"]["refused_after"]["message_id"].is_i64(),
        "{agent}"
    );
    let journal = t.host.journal(None, 10).unwrap();
    assert_eq!(
        journal[0].effects[0].state, "done",
        "the refusal is the effect's outcome"
    );
}

#[test]
fn a_webhook_not_on_the_tools_allowlist_is_not_queued_and_not_saved() {
    let receiver = LocalApi::start().unwrap();
    let config = HttpConfig::default()
        .service("webhooks", receiver.url())
        .allow("refund", receiver.url());
    let t = test_host(|b| b.http(config));

    let err = t.host.call(&notify("refund.issued")).unwrap_err();

    assert_eq!(err.kind(), "not_performed", "{err}");
    assert!(
        err.to_string().contains("tool `notify` may not reach"),
        "{err}"
    );
    assert!(messages(&t.host).is_empty());
    assert_eq!(receiver.connections(), 0);
    assert!(
        t.host.journal(None, 10).unwrap().is_empty(),
        "nothing saved"
    );

    // Once the configuration allows it, the same call queues the message.
    let fixed = test_host(|b| b.http(webhooks(&receiver)));
    assert!(
        fixed
            .host
            .call(&notify("refund.issued"))
            .unwrap()
            .outcome
            .is_success()
    );
}

#[test]
fn a_webhook_whose_first_delivery_response_is_lost_is_delivered_again_with_the_same_key_once() {
    let receiver = LocalApi::start().unwrap();
    receiver.script([Behaviour::ApplyThenDrop]);
    let t = test_host(|b| b.http(webhooks(&receiver)));
    let told = t.host.call(&notify("refund.issued")).unwrap();
    let deliverer = Deliverer::new(&t.host).unwrap().policy(policy());

    let first = deliverer.run_once().unwrap();
    assert_eq!(first.count(DeliveryOutcome::Retrying), 1, "{first:?}");
    // Not due again until the backoff has passed on the host's clock.
    assert!(deliverer.run_once().unwrap().attempts.is_empty());
    t.clock.advance(Duration::from_secs(10));
    let second = deliverer.run_once().unwrap();

    // The retry happened.
    assert_eq!(second.count(DeliveryOutcome::Delivered), 1, "{second:?}");
    assert_eq!(receiver.requests().len(), 2);
    // Both attempts carried the same key: the message's effect key.
    let message = &messages(&t.host)[0];
    let keys: Vec<Option<String>> = receiver.requests().into_iter().map(|r| r.key).collect();
    assert_eq!(keys, vec![Some(message.effect_key.clone()); 2]);
    assert_eq!(second.attempts[0].key, message.effect_key);
    // The receiver recorded it once, and the delivery is recorded.
    let applied = receiver.applied();
    assert_eq!(applied.len(), 1);
    assert_eq!(applied[0].body["event"], "refund.issued");
    assert_eq!(
        (
            message.state.as_str(),
            message.attempts,
            message.last_status
        ),
        ("delivered", 2, Some(200))
    );
    // The agent was told the message was queued.
    assert_eq!(result_of(&told.outcome)["state"], "pending");
    // Delivered messages are not sent again.
    t.clock.advance(Duration::from_secs(3600));
    assert!(deliverer.run_once().unwrap().attempts.is_empty());

    // The opposite: two different notifications are two webhooks under two keys.
    t.host.call(&notify("refund.failed")).unwrap();
    t.host.call(&notify("refund.reversed")).unwrap();
    let report = deliverer.run_once().unwrap();
    assert_eq!(report.count(DeliveryOutcome::Delivered), 2);
    let applied = receiver.applied();
    assert_eq!(applied.len(), 3);
    assert_ne!(applied[1].key, applied[2].key);
}

#[test]
fn a_receiver_that_refuses_marks_the_message_failed_and_it_is_not_retried() {
    let receiver = LocalApi::start().unwrap();
    receiver.script([Behaviour::Status {
        status: 410,
        retry_after: None,
    }]);
    let t = test_host(|b| b.http(webhooks(&receiver)));
    t.host.call(&notify("refund.issued")).unwrap();
    let deliverer = Deliverer::new(&t.host).unwrap().policy(policy());

    let report = deliverer.run_once().unwrap();

    assert_eq!(report.count(DeliveryOutcome::Failed), 1);
    let error = report.attempts[0].error.as_deref().unwrap();
    assert!(error.contains("status 410"), "{error}");
    t.clock.advance(Duration::from_secs(3600));
    assert!(deliverer.run_once().unwrap().attempts.is_empty());
    assert_eq!(messages(&t.host)[0].state, "failed");
}

#[test]
fn a_503_waits_its_retry_after_and_the_attempts_run_out_into_failed() {
    let receiver = LocalApi::start().unwrap();
    receiver.script(
        [Behaviour::Status {
            status: 503,
            retry_after: Some(120),
        }; 2],
    );
    let t = test_host(|b| b.http(webhooks(&receiver)));
    t.host.call(&notify("refund.issued")).unwrap();
    let deliverer = Deliverer::new(&t.host).unwrap().policy(DeliveryPolicy {
        max_attempts: 2,
        ..policy()
    });

    assert_eq!(
        deliverer
            .run_once()
            .unwrap()
            .count(DeliveryOutcome::Retrying),
        1
    );
    // The backoff is 10 s, but the receiver asked for 120 s.
    t.clock.advance(Duration::from_secs(119));
    assert!(deliverer.run_once().unwrap().attempts.is_empty());
    t.clock.advance(Duration::from_secs(1));
    let report = deliverer.run_once().unwrap();
    assert_eq!(report.count(DeliveryOutcome::Failed), 1);
    assert!(
        report.attempts[0]
            .error
            .as_deref()
            .unwrap()
            .contains("gave up after 2 attempts")
    );
    assert!(receiver.applied().is_empty());
}

#[test]
fn the_delivery_loop_delivers_in_the_background_until_stopped() {
    let receiver = LocalApi::start().unwrap();
    let t = test_host(|b| b.http(webhooks(&receiver)));
    t.host.call(&notify("refund.issued")).unwrap();
    let deliverer = Arc::new(Deliverer::new(&t.host).unwrap());

    let running = deliverer.spawn_loop(Duration::from_millis(10)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while messages(&t.host)[0].state != "delivered" {
        assert!(
            Instant::now() < deadline,
            "not delivered: {:?}",
            messages(&t.host)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    running.stop();

    assert_eq!(receiver.applied().len(), 1);
    // Stopped: a new message stays pending.
    t.host.call(&notify("refund.failed")).unwrap();
    assert_eq!(messages(&t.host)[1].state, "pending");
}

#[test]
fn the_same_notify_past_retention_queues_a_new_message_under_a_new_key() {
    let receiver = LocalApi::start().unwrap();
    let t = test_host(|b| {
        b.http(webhooks(&receiver))
            .retention(Duration::from_secs(3600))
    });
    let first = t.host.call(&notify("refund.issued")).unwrap();
    assert!(first.outcome.is_success(), "{:?}", first.outcome);
    // Mark it delivered, as a deliverer would, so re-queuing is visible.
    t.host
        .inspect_sqlite(|conn| conn.execute("UPDATE outbox SET state = 'delivered'", []))
        .unwrap();

    t.clock.advance(Duration::from_secs(3600));
    let again = t.host.call(&notify("refund.issued")).unwrap();
    assert!(!again.replayed, "past retention the call is new, by design");
    assert!(again.outcome.is_success(), "{:?}", again.outcome);
    let queued = messages(&t.host);
    // A new generation of the call is a new message under a new key; the delivered
    // one is never reset to pending.
    assert_eq!(queued.len(), 2, "one row per effect key: {queued:?}");
    assert_eq!(queued[0].state, "delivered", "the first stays delivered");
    assert_eq!(queued[1].state, "pending", "queued again for delivery");
    assert_ne!(
        queued[0].effect_key, queued[1].effect_key,
        "a new downstream key"
    );
}

#[test]
fn a_message_whose_stored_headers_are_unreadable_is_failed_not_sent_without_them() {
    let receiver = LocalApi::start().unwrap();
    let t = test_host(|b| b.http(webhooks(&receiver)));
    t.host.call(&notify("refund.issued")).unwrap();
    t.host
        .inspect_sqlite(|conn| conn.execute("UPDATE outbox SET headers = '{not json'", []))
        .unwrap();
    let deliverer = Deliverer::new(&t.host).unwrap().policy(policy());

    let report = deliverer.run_once().unwrap();

    assert_eq!(report.count(DeliveryOutcome::Failed), 1);
    let error = report.attempts[0].error.as_deref().unwrap();
    assert!(error.contains("headers are unreadable"), "{error}");
    assert_eq!(receiver.connections(), 0, "nothing was sent");
    assert_eq!(messages(&t.host)[0].state, "failed");
    // The opposite: an intact message is delivered.
    t.host.call(&notify("refund.failed")).unwrap();
    assert_eq!(
        deliverer
            .run_once()
            .unwrap()
            .count(DeliveryOutcome::Delivered),
        1
    );
}
