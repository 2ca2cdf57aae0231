//! The `outbox` provider and delivery: a webhook is queued in the journal's
//! transaction, exactly once per effect, and delivered with its effect key as the
//! `Idempotency-Key` to a receiver on 127.0.0.1 that deduplicates by it. Each test
//! runs on both journals (`on_both!`): the in-memory SQLite one, and a database of
//! the PostgreSQL test cluster (skipped by name where there is none). Several hosts
//! delivering one PostgreSQL outbox at once are at the end.

use std::sync::Arc;
use std::time::{Duration, Instant};

use justonce::__private::{Behaviour, LocalApi};
use justonce::__private::{Deliverer, DeliveryOutcome, DeliveryPolicy};
use justonce::__private::{OutboxMessage, OutboxProvider};
use justonce::HttpConfig;
use justonce::{CallRequest, Host, ManualClock, Outcome};
use serde_json::Value;

use justonce::__private::postgres_testing::cluster;

use crate::support::{RefusingOutbox, TestHost, test_host};

/// The journal a test runs on, and the test's name (to say it was skipped).
#[derive(Clone, Copy)]
struct On {
    postgres: bool,
    test: &'static str,
}

/// Runs each test on the SQLite journal and on a PostgreSQL one.
macro_rules! on_both {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(#[test]
            fn $name() {
                super::$name(super::On { postgres: false, test: stringify!($name) });
            })*
        }
        mod postgres {
            $(#[test]
            fn $name() {
                super::$name(super::On { postgres: true, test: stringify!($name) });
            })*
        }
    };
}

on_both!(
    a_retried_notify_queues_one_message_under_its_effect_key,
    a_message_whose_effect_is_refused_is_rolled_back_with_it,
    a_webhook_not_on_the_tools_allowlist_is_not_queued_and_not_saved,
    a_webhook_whose_first_delivery_response_is_lost_is_delivered_again_with_the_same_key_once,
    a_receiver_that_refuses_marks_the_message_failed_and_it_is_not_retried,
    a_503_waits_its_retry_after_and_the_attempts_run_out_into_failed,
    the_delivery_loop_delivers_in_the_background_until_stopped,
    the_same_notify_past_retention_queues_a_new_message_under_a_new_key,
    a_message_whose_stored_headers_are_unreadable_is_failed_not_sent_without_them,
    a_queued_row_is_checked_again_against_the_allowlist_and_reserved_headers_when_delivered,
);

/// A host of the test's journal: `None` (the test is skipped, by name) on
/// PostgreSQL where there is none.
struct OutboxHost {
    t: TestHost,
    /// The PostgreSQL database, if the host's journal is there.
    url: Option<String>,
}

impl std::ops::Deref for OutboxHost {
    type Target = TestHost;
    fn deref(&self) -> &TestHost {
        &self.t
    }
}

impl On {
    fn host(
        self,
        configure: impl FnOnce(justonce::HostBuilder) -> justonce::HostBuilder,
    ) -> Option<OutboxHost> {
        if !self.postgres {
            return Some(OutboxHost {
                t: test_host(configure),
                url: None,
            });
        }
        let url = cluster(self.test)?.database();
        // The database's clock decides expiry there: the test's clock stands for it.
        let t = test_host(|b| configure(b).database(&url).database_clock_is_host_clock());
        Some(OutboxHost { t, url: Some(url) })
    }
}

impl OutboxHost {
    /// Runs `statement` on the host's journal database, as an operator would.
    fn execute(&self, statement: &str) {
        match &self.url {
            None => {
                self.host
                    .inspect_sqlite(|conn| conn.execute(statement, []))
                    .unwrap();
            }
            Some(url) => {
                ::postgres::Client::connect(url, ::postgres::NoTls)
                    .unwrap()
                    .execute(statement, &[])
                    .unwrap();
            }
        }
    }
}

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
    host.outbox_messages().unwrap()
}

/// `justonce_outbox_messages` by state (pending, retrying, failed), as `/metrics`
/// shows it.
fn queue_depth(host: &Host) -> [f64; 3] {
    let text = host.metrics_text();
    ["pending", "retrying", "failed"].map(|state| {
        let series = format!("justonce_outbox_messages{{state=\"{state}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&series)?.parse().ok())
            .unwrap_or_else(|| panic!("no {series} in\n{text}"))
    })
}

fn result_of(outcome: &Outcome) -> &Value {
    match outcome {
        Outcome::Success { result, .. } => result,
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

fn a_retried_notify_queues_one_message_under_its_effect_key(on: On) {
    let receiver = LocalApi::start().unwrap();
    let Some(t) = on.host(|b| b.http(webhooks(&receiver))) else {
        return;
    };

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

fn a_message_whose_effect_is_refused_is_rolled_back_with_it(on: On) {
    let receiver = LocalApi::start().unwrap();
    let config = Arc::new(webhooks(&receiver));
    let clock = Arc::new(ManualClock::default());
    let outbox = OutboxProvider::new(Arc::clone(&config), clock);
    let Some(t) = on.host(|b| {
        b.http((*config).clone())
            .provider("outbox", Arc::new(RefusingOutbox(outbox)))
    }) else {
        return;
    };

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

fn a_webhook_not_on_the_tools_allowlist_is_not_queued_and_not_saved(on: On) {
    let receiver = LocalApi::start().unwrap();
    let config = HttpConfig::default()
        .service("webhooks", receiver.url())
        .allow("refund", receiver.url());
    let Some(t) = on.host(|b| b.http(config)) else {
        return;
    };

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
    let Some(fixed) = on.host(|b| b.http(webhooks(&receiver))) else {
        return;
    };
    assert!(
        fixed
            .host
            .call(&notify("refund.issued"))
            .unwrap()
            .outcome
            .is_success()
    );
}

fn a_webhook_whose_first_delivery_response_is_lost_is_delivered_again_with_the_same_key_once(
    on: On,
) {
    let receiver = LocalApi::start().unwrap();
    receiver.script([Behaviour::ApplyThenDrop]);
    let Some(t) = on.host(|b| b.http(webhooks(&receiver))) else {
        return;
    };
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

fn a_receiver_that_refuses_marks_the_message_failed_and_it_is_not_retried(on: On) {
    let receiver = LocalApi::start().unwrap();
    receiver.script([Behaviour::Status {
        status: 410,
        retry_after: None,
    }]);
    let Some(t) = on.host(|b| b.http(webhooks(&receiver))) else {
        return;
    };
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

fn a_503_waits_its_retry_after_and_the_attempts_run_out_into_failed(on: On) {
    let receiver = LocalApi::start().unwrap();
    receiver.script(
        [Behaviour::Status {
            status: 503,
            retry_after: Some(120),
        }; 2],
    );
    let Some(t) = on.host(|b| b.http(webhooks(&receiver))) else {
        return;
    };
    t.host.call(&notify("refund.issued")).unwrap();
    let deliverer = Deliverer::new(&t.host).unwrap().policy(DeliveryPolicy {
        max_attempts: 2,
        ..policy()
    });
    assert_eq!(
        queue_depth(&t.host),
        [1.0, 0.0, 0.0],
        "pending, retrying, failed"
    );

    assert_eq!(
        deliverer
            .run_once()
            .unwrap()
            .count(DeliveryOutcome::Retrying),
        1
    );
    assert_eq!(queue_depth(&t.host), [0.0, 1.0, 0.0]);
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
    assert_eq!(queue_depth(&t.host), [0.0, 0.0, 1.0]);
    // The notify's own effect was answered (the webhook is the outbox's business).
    let text = t.host.metrics_text();
    assert!(text.contains("\njustonce_effects_pending 0\n"), "{text}");
}

fn the_delivery_loop_delivers_in_the_background_until_stopped(on: On) {
    let receiver = LocalApi::start().unwrap();
    let Some(t) = on.host(|b| b.http(webhooks(&receiver))) else {
        return;
    };
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

fn the_same_notify_past_retention_queues_a_new_message_under_a_new_key(on: On) {
    let receiver = LocalApi::start().unwrap();
    let Some(t) = on.host(|b| {
        b.http(webhooks(&receiver))
            .retention(Duration::from_secs(3600))
    }) else {
        return;
    };
    let first = t.host.call(&notify("refund.issued")).unwrap();
    assert!(first.outcome.is_success(), "{:?}", first.outcome);
    // Mark it delivered, as a deliverer would, so re-queuing is visible.
    t.execute("UPDATE outbox SET state = 'delivered'");

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

fn a_message_whose_stored_headers_are_unreadable_is_failed_not_sent_without_them(on: On) {
    let receiver = LocalApi::start().unwrap();
    let Some(t) = on.host(|b| b.http(webhooks(&receiver))) else {
        return;
    };
    t.host.call(&notify("refund.issued")).unwrap();
    t.execute("UPDATE outbox SET headers = '{not json'");
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

/// A row changed after it was queued (by other hands, or queued before the
/// configuration changed) is checked again when it is read for delivery: an origin
/// off the tool's allowlist is not sent to, nor is a reserved header.
fn a_queued_row_is_checked_again_against_the_allowlist_and_reserved_headers_when_delivered(on: On) {
    let receiver = LocalApi::start().unwrap();
    let elsewhere = LocalApi::start().unwrap();
    let Some(t) = on.host(|b| b.http(webhooks(&receiver))) else {
        return;
    };
    t.host.call(&notify("refund.issued")).unwrap();
    t.execute(&format!(
        "UPDATE outbox SET url = '{}/steal'",
        elsewhere.url()
    ));
    let deliverer = Deliverer::new(&t.host).unwrap().policy(policy());

    let report = deliverer.run_once().unwrap();

    assert_eq!(report.count(DeliveryOutcome::Retrying), 1, "{report:?}");
    let error = report.attempts[0].error.as_deref().unwrap();
    assert!(error.contains("not on the tool's allowlist"), "{error}");
    assert_eq!(
        elsewhere.connections(),
        0,
        "nothing reached the other origin"
    );

    t.host.call(&notify("refund.failed")).unwrap();
    t.execute(&format!(
        "UPDATE outbox SET headers = '[[\"Metadata-Flavor\",\"Google\"]]' WHERE url LIKE '{}%'",
        receiver.url()
    ));
    let report = deliverer.run_once().unwrap();
    let failed: Vec<_> = report
        .attempts
        .iter()
        .filter(|a| a.outcome == DeliveryOutcome::Failed)
        .collect();
    assert_eq!(failed.len(), 1, "{report:?}");
    let error = failed[0].error.as_deref().unwrap();
    assert!(error.contains("cloud metadata"), "{error}");
    assert_eq!(receiver.connections(), 0, "nothing was sent");
}

// --- several hosts, one PostgreSQL outbox ---------------------------------------------

/// Two hosts on one PostgreSQL database, each with its own clock.
fn two_hosts(test: &str, receiver: &LocalApi) -> Option<(TestHost, TestHost)> {
    let url = cluster(test)?.database();
    // Each host pins the database's clock to its own clock when it asks: the
    // deliverers decide what is due and what is held on the database's clock.
    let host = || {
        test_host(|b| {
            b.http(webhooks(receiver))
                .database(&url)
                .database_clock_is_host_clock()
        })
    };
    Some((host(), host()))
}

#[test]
fn two_hosts_deliver_one_outbox_at_once_and_each_message_is_sent_once_under_its_key() {
    let receiver = LocalApi::start().unwrap();
    let Some((a, b)) = two_hosts(
        "two_hosts_deliver_one_outbox_at_once_and_each_message_is_sent_once_under_its_key",
        &receiver,
    ) else {
        return;
    };
    const N: usize = 40;
    for i in 0..N {
        let enqueuer = if i % 2 == 0 { &a } else { &b };
        let told = enqueuer.host.call(&notify(&format!("order.{i}"))).unwrap();
        assert!(told.outcome.is_success(), "{:?}", told.outcome);
    }
    let deliverers = [
        Deliverer::new(&a.host).unwrap().policy(policy()),
        Deliverer::new(&b.host).unwrap().policy(policy()),
    ];

    // Both deliver at once, without a lock file.
    let start = std::sync::Barrier::new(2);
    let reports: Vec<_> = std::thread::scope(|s| {
        let passes: Vec<_> = deliverers
            .iter()
            .map(|d| {
                let start = &start;
                s.spawn(move || {
                    start.wait();
                    d.run_once().unwrap()
                })
            })
            .collect();
        passes.into_iter().map(|p| p.join().unwrap()).collect()
    });

    let queued = messages(&a.host);
    assert_eq!(queued.len(), N, "one message per call");
    assert!(
        queued
            .iter()
            .all(|m| m.state == "delivered" && m.attempts == 1),
        "{queued:?}"
    );
    // Each message was sent once, by one host, carrying its effect key.
    let requests = receiver.requests();
    assert_eq!(requests.len(), N, "no message was sent twice");
    let mut sent: Vec<String> = requests.iter().map(|r| r.key.clone().unwrap()).collect();
    sent.sort();
    let mut keys: Vec<String> = queued.iter().map(|m| m.effect_key.clone()).collect();
    keys.sort();
    assert_eq!(sent, keys, "each under its own key");
    assert_eq!(receiver.applied().len(), N);
    let counts: Vec<usize> = reports
        .iter()
        .map(|r| r.count(DeliveryOutcome::Delivered))
        .collect();
    assert_eq!(counts.iter().sum::<usize>(), N, "{counts:?}");
    assert!(
        counts.iter().all(|&n| n > 0),
        "both hosts delivered: {counts:?}"
    );
    // Delivered: neither host sends anything again.
    a.clock.advance(Duration::from_secs(3600));
    b.clock.advance(Duration::from_secs(3600));
    for d in &deliverers {
        assert!(d.run_once().unwrap().attempts.is_empty());
    }
    assert_eq!(receiver.requests().len(), N);
}

#[test]
fn a_message_one_host_could_not_deliver_is_sent_again_by_another_under_the_same_key() {
    let receiver = LocalApi::start().unwrap();
    receiver.script([Behaviour::ApplyThenDrop]);
    let Some((a, b)) = two_hosts(
        "a_message_one_host_could_not_deliver_is_sent_again_by_another_under_the_same_key",
        &receiver,
    ) else {
        return;
    };
    a.host.call(&notify("refund.issued")).unwrap();
    let on_a = Deliverer::new(&a.host).unwrap().policy(policy());
    let on_b = Deliverer::new(&b.host).unwrap().policy(policy());

    let first = on_a.run_once().unwrap();
    // Not due on the other host either until the backoff has passed.
    assert!(on_b.run_once().unwrap().attempts.is_empty());
    b.clock.advance(Duration::from_secs(10));
    let second = on_b.run_once().unwrap();

    // The retry happened, on the other host.
    assert_eq!(first.count(DeliveryOutcome::Retrying), 1, "{first:?}");
    assert_eq!(second.count(DeliveryOutcome::Delivered), 1, "{second:?}");
    // Both attempts carried the message's key, and the receiver applied it once.
    let message = &messages(&b.host)[0];
    let keys: Vec<Option<String>> = receiver.requests().into_iter().map(|r| r.key).collect();
    assert_eq!(keys, vec![Some(message.effect_key.clone()); 2]);
    assert_eq!(receiver.applied().len(), 1);
    assert_eq!((message.state.as_str(), message.attempts), ("delivered", 2));
}
