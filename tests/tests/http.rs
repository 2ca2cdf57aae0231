//! The `http` provider against a payments API on 127.0.0.1 that deduplicates by
//! `Idempotency-Key`. Every retry test asserts the seed's four things: the retry
//! happened, the refund happened once, every attempt carried the same key (the
//! journaled effect key), and what the agent was told.

use std::time::Duration;

use justonce::__private::{Behaviour, LocalApi};
use justonce::HttpConfig;
use justonce::{CallRequest, Clock, Error, Host, Outcome, RetryPolicy};
use serde_json::{Value, json};

use crate::support::test_host;

/// A config that lets `refund` (only) reach `api` as the `payments` service.
fn payments(api: &LocalApi) -> HttpConfig {
    HttpConfig::default()
        .service("payments", api.url())
        .allow("refund", api.url())
}

fn refund(order: u64, cents: u64) -> CallRequest {
    CallRequest::new(
        "refund",
        format!(r#"{{"order_id":{order},"amount_cents":{cents}}}"#),
    )
    .conversation("conv-http")
}

/// The journaled key of each effect of the newest invocation of `tool`.
fn effect_keys(host: &Host, tool: &str) -> Vec<String> {
    let journal = host.journal(None, 100).unwrap();
    let entry = journal
        .iter()
        .find(|e| e.tool == tool)
        .expect("an invocation");
    entry.effects.iter().map(|e| e.key.clone()).collect()
}

fn keys_seen(api: &LocalApi) -> Vec<Option<String>> {
    api.requests().into_iter().map(|r| r.key).collect()
}

fn result_of(outcome: &Outcome) -> &Value {
    match outcome {
        Outcome::Success { result, .. } => result,
        other => panic!("expected a success-shaped result, got {other:?}"),
    }
}

#[test]
fn a_lost_refund_response_is_retried_with_the_same_idempotency_key_and_refunds_once() {
    let api = LocalApi::start().unwrap();
    api.script([Behaviour::ApplyThenDrop]);
    let t = test_host(|b| b.http(payments(&api)));

    let first = t.host.call(&refund(4417, 1299)).unwrap();

    // The retry happened.
    assert_eq!(api.requests().len(), 2, "{:?}", api.requests());
    // Both attempts carried the same key: the effect key from the journal.
    let keys = effect_keys(&t.host, "refund");
    assert_eq!(keys.len(), 1);
    assert_eq!(keys_seen(&api), vec![Some(keys[0].clone()); 2]);
    // The refund happened once.
    let applied = api.applied();
    assert_eq!(applied.len(), 1);
    assert_eq!(applied[0].body["amount_cents"], 1299);
    assert_eq!(applied[0].key.as_deref(), Some(keys[0].as_str()));
    // The agent was told a success-shaped result with the one refund.
    assert!(!first.replayed);
    assert_eq!(
        result_of(&first.outcome)["refund_id"],
        applied[0].id.as_str()
    );
    assert_eq!(result_of(&first.outcome)["status"], "succeeded");

    // The agent's own retry of the call is replayed: nothing is sent.
    let again = t.host.call(&refund(4417, 1299)).unwrap();
    assert!(again.replayed);
    assert_eq!(again.outcome, first.outcome);
    assert_eq!(api.requests().len(), 2);

    // The opposite: a different refund is a second refund, under another key.
    let other = t.host.call(&refund(4418, 500)).unwrap();
    assert_eq!(api.applied().len(), 2);
    assert_ne!(api.applied()[1].key, api.applied()[0].key);
    assert_eq!(
        result_of(&other.outcome)["refund_id"],
        api.applied()[1].id.as_str()
    );
}

#[test]
fn a_503_or_429_is_retried_with_the_same_key_after_its_retry_after_on_the_hosts_clock() {
    for status in [503, 429] {
        let api = LocalApi::start().unwrap();
        api.script([Behaviour::Status {
            status,
            retry_after: Some(7),
        }]);
        let t = test_host(|b| {
            b.http(payments(&api)).retry_policy(
                RetryPolicy::immediate(3).honouring_retry_after(Duration::from_secs(30)),
            )
        });
        let before = t.clock.now_ms();

        let response = t.host.call(&refund(1, 100)).unwrap();

        // The retry happened, and waited what the API asked (on the manual clock).
        assert_eq!(api.requests().len(), 2, "{status}");
        assert_eq!(t.clock.now_ms() - before, 7_000, "{status}");
        // Same key on both attempts, the journaled one.
        let keys = effect_keys(&t.host, "refund");
        assert_eq!(keys_seen(&api), vec![Some(keys[0].clone()); 2], "{status}");
        // The 503 applied nothing; the retry applied the refund once.
        assert_eq!(api.applied().len(), 1, "{status}");
        // The agent was told the refund.
        assert_eq!(
            result_of(&response.outcome)["status"],
            "succeeded",
            "{status}"
        );
    }
}

#[test]
fn a_retry_after_longer_than_the_bound_is_cut_to_the_bound() {
    let api = LocalApi::start().unwrap();
    api.script([Behaviour::Status {
        status: 503,
        retry_after: Some(3_600),
    }]);
    let t = test_host(|b| {
        b.http(payments(&api))
            .retry_policy(RetryPolicy::immediate(2).honouring_retry_after(Duration::from_secs(5)))
    });
    let before = t.clock.now_ms();
    t.host.call(&refund(1, 100)).unwrap();
    assert_eq!(t.clock.now_ms() - before, 5_000);
    let keys = effect_keys(&t.host, "refund");
    assert_eq!(keys_seen(&api), vec![Some(keys[0].clone()); 2]);
    assert_eq!(api.applied().len(), 1);
}

#[test]
fn a_500_is_saved_and_replayed_not_sent_again() {
    let api = LocalApi::start().unwrap();
    api.script([Behaviour::Status {
        status: 500,
        retry_after: None,
    }]);
    let t = test_host(|b| b.http(payments(&api)));

    let first = t.host.call(&refund(7, 700)).unwrap();

    // One attempt, with the effect key: a 500 is an answer, not an unknown.
    let keys = effect_keys(&t.host, "refund");
    assert_eq!(keys_seen(&api), vec![Some(keys[0].clone())]);
    assert!(api.applied().is_empty());
    // The agent was told the refusal, with the status.
    let Outcome::ToolError { code, details, .. } = &first.outcome else {
        panic!("expected a tool error, got {:?}", first.outcome);
    };
    assert_eq!(code, "refund_rejected");
    assert_eq!(details.as_ref().unwrap()["status"], 500);
    // Saved in the journal as the effect's outcome: status, headers and body.
    let journal = t.host.journal(None, 10).unwrap();
    let effect = &journal[0].effects[0];
    assert_eq!(effect.state, "done");
    let saved = &effect.response.as_ref().unwrap()["ok"];
    assert_eq!(saved["status"], 500);
    assert_eq!(saved["headers"]["content-type"], "application/json");
    assert!(
        saved["body"]
            .as_str()
            .unwrap()
            .contains("scripted status 500"),
        "{saved}"
    );

    // The agent retries: the saved refusal is replayed and nothing is sent.
    let again = t.host.call(&refund(7, 700)).unwrap();
    assert!(again.replayed);
    assert_eq!(again.outcome, first.outcome);
    assert_eq!(api.requests().len(), 1);
}

#[test]
fn a_host_not_on_the_tools_allowlist_is_denied_without_any_connection() {
    let api = LocalApi::start().unwrap();
    // The payments service exists, but only `notify` may reach its origin.
    let config = HttpConfig::default()
        .service("payments", api.url())
        .allow("notify", api.url());
    let t = test_host(|b| b.http(config));

    let err = t.host.call(&refund(1, 100)).unwrap_err();

    assert_eq!(api.connections(), 0, "nothing reached the server");
    // The host's configuration refused it: not performed, nothing saved.
    assert_eq!(err.kind(), "not_performed", "{err}");
    let journal = t.host.journal(None, 10).unwrap();
    assert!(
        journal
            .iter()
            .all(|e| e.state != "completed" && e.outcome.is_none()),
        "no outcome saved: {journal:?}"
    );
    assert!(
        journal
            .iter()
            .flat_map(|e| &e.effects)
            .all(|f| f.state == "pending" && f.resolution.as_deref() == Some("not_performed")),
        "the effect is known not performed: {journal:?}"
    );
    let message = err.to_string();
    let origin = api.url().replace("http://", "");
    assert!(
        message.contains("tool `refund` may not reach") && message.contains(&origin),
        "{message}"
    );

    // The opposite: with `refund` on the list the same call reaches the API, keyed.
    let allowed = test_host(|b| b.http(payments(&api)));
    allowed.host.call(&refund(1, 100)).unwrap();
    assert_eq!(api.connections(), 1);
    let keys = effect_keys(&allowed.host, "refund");
    assert_eq!(keys_seen(&api), vec![Some(keys[0].clone())]);
}

#[test]
fn the_key_header_can_be_renamed_per_origin_and_still_dedupes() {
    let api = LocalApi::start_with_key_header("X-Request-Key").unwrap();
    api.script([Behaviour::ApplyThenDrop]);
    let config = payments(&api).idempotency_header_for(api.url(), "X-Request-Key");
    let t = test_host(|b| b.http(config));

    t.host.call(&refund(9, 900)).unwrap();

    let keys = effect_keys(&t.host, "refund");
    assert_eq!(keys_seen(&api), vec![Some(keys[0].clone()); 2]);
    assert_eq!(api.applied().len(), 1);
}

#[test]
fn a_timeout_is_retried_with_the_same_key() {
    let api = LocalApi::start().unwrap();
    // Applies the first request and never answers it; the client gives up.
    api.script([Behaviour::ApplyThenHang]);
    let config = payments(&api).timeout(Duration::from_millis(300));
    let t = test_host(|b| b.http(config));

    let response = t.host.call(&refund(3, 300)).unwrap();

    assert_eq!(api.requests().len(), 2);
    let keys = effect_keys(&t.host, "refund");
    assert_eq!(keys_seen(&api), vec![Some(keys[0].clone()); 2]);
    assert_eq!(api.applied().len(), 1);
    assert_eq!(
        result_of(&response.outcome)["refund_id"],
        api.applied()[0].id.as_str()
    );
}

#[test]
fn reads_are_not_journaled_unless_recorded_and_a_resumed_call_reads_again() {
    let api = LocalApi::start().unwrap();
    let config = HttpConfig::default().allow("http_fetch", api.url());
    let t = test_host(|b| b.http(config));
    let url = api.url();
    let args = json!({ "requests": [
        { "method": "GET", "url": format!("{url}/plain") },
        { "method": "GET", "url": format!("{url}/recorded"), "record": true },
        { "method": "POST", "url": format!("{url}/hooks"), "body": "{\"n\":1}" },
    ]});
    let request = CallRequest::new("http_fetch", args.to_string()).conversation("reads");
    // Two answers for the reads, then every POST attempt loses its response.
    api.script([Behaviour::Answer, Behaviour::Answer]);
    api.script([Behaviour::ApplyThenDrop; 3]);

    let err = t.host.call(&request).unwrap_err();
    assert!(
        matches!(err, Error::OutcomeUnknown { seq: 1, .. }),
        "{err:?}"
    );

    // The plain read has no journal record; the recorded read and the POST do.
    let journal = t.host.journal(None, 10).unwrap();
    let effects: Vec<(u32, &str)> = journal[0]
        .effects
        .iter()
        .map(|e| (e.seq, e.state.as_str()))
        .collect();
    assert_eq!(effects, [(0, "done"), (1, "pending")]);
    let post_key = journal[0].effects[1].key.clone();

    // The resumed call reads the plain URL again, replays the recorded read, and
    // retries the POST under its stored key; the API applies it once.
    let resumed = t.host.call(&request).unwrap();
    let seen: Vec<(String, Option<String>)> = api
        .requests()
        .into_iter()
        .map(|r| (r.path, r.key))
        .collect();
    let post = (String::from("/hooks"), Some(post_key));
    assert_eq!(
        seen,
        [
            ("/plain".into(), None),
            ("/recorded".into(), None),
            post.clone(),
            post.clone(),
            post.clone(),
            ("/plain".into(), None),
            post,
        ]
    );
    assert_eq!(api.applied().len(), 1);
    let answers = result_of(&resumed.outcome);
    assert_eq!(answers[2]["status"], 200);
    assert_eq!(
        answers[2]["body"],
        json!({ "id": api.applied()[0].id, "received": true }).to_string()
    );
}

#[test]
fn a_response_longer_than_the_cap_is_cut_and_marked_truncated() {
    let api = LocalApi::start().unwrap();
    let config = HttpConfig {
        max_response_bytes: 5,
        ..HttpConfig::default().allow("http_fetch", api.url())
    };
    let t = test_host(|b| b.http(config));
    let args = json!({ "requests": [{ "method": "GET", "url": format!("{}/x", api.url()), "record": true }] });

    t.host
        .call(&CallRequest::new("http_fetch", args.to_string()))
        .unwrap();

    let journal = t.host.journal(None, 10).unwrap();
    let saved = &journal[0].effects[0].response.as_ref().unwrap()["ok"];
    assert_eq!(saved["body"], r#"{"app"#);
    assert_eq!(saved["truncated"], true);
}

/// The refund through an API that applies the first request and drops its response,
/// then answers the retry `status` while it is still processing: the retries happen
/// under one key, the refund happens once, and the agent is told it succeeded.
fn assert_refunded_once_through(status: u16, config: impl FnOnce(&LocalApi) -> HttpConfig) {
    let api = LocalApi::start().unwrap();
    api.script([
        Behaviour::ApplyThenDrop,
        Behaviour::Status {
            status,
            retry_after: None,
        },
    ]);
    let t = test_host(|b| b.http(config(&api)));

    let answer = t.host.call(&refund(4417, 1299)).unwrap();

    assert_eq!(api.requests().len(), 3, "{status}: the retries happened");
    let keys = effect_keys(&t.host, "refund");
    assert_eq!(keys_seen(&api), vec![Some(keys[0].clone()); 3], "one key");
    assert_eq!(api.applied().len(), 1, "{status}: refunded once");
    assert_eq!(result_of(&answer.outcome)["status"], "succeeded");
}

/// A refund the API answers `status` at once: that is the answer, saved and
/// replayed, and nothing more is sent.
fn assert_answer_is_saved(status: u16, config: impl FnOnce(&LocalApi) -> HttpConfig) {
    let api = LocalApi::start().unwrap();
    api.script([Behaviour::Status {
        status,
        retry_after: None,
    }]);
    let t = test_host(|b| b.http(config(&api)));
    let first = t.host.call(&refund(1, 5)).unwrap();
    assert!(!first.outcome.is_success(), "{status}: {:?}", first.outcome);
    assert_eq!(api.requests().len(), 1, "{status}: not retried");
    let again = t.host.call(&refund(1, 5)).unwrap();
    assert!(again.replayed);
    assert_eq!(again.outcome, first.outcome);
    assert_eq!(api.requests().len(), 1);
}

#[test]
fn a_409_while_the_first_request_is_in_flight_is_not_an_answer_and_the_refund_happens_once() {
    // The payments API applied the first request, lost its response, and answers the
    // retry 409 Conflict while it is still processing (IETF Idempotency-Key draft,
    // Stripe); the third attempt gets the refund. Saving the 409 would tell the agent
    // the refund failed when it happened.
    assert_refunded_once_through(409, payments);
    // The opposite: a definitive refusal (422) is the answer, saved and replayed.
    assert_answer_is_saved(422, payments);
}

#[test]
fn every_come_back_status_is_retried_under_the_same_key() {
    for status in [408, 425, 429, 502, 503, 504] {
        let api = LocalApi::start().unwrap();
        api.script([Behaviour::Status {
            status,
            retry_after: Some(1),
        }]);
        let t = test_host(|b| b.http(payments(&api)));
        let answer = t.host.call(&refund(7, 100)).unwrap();
        assert_eq!(api.requests().len(), 2, "{status} was retried");
        let seen = keys_seen(&api);
        assert_eq!(seen[0], seen[1], "{status}: the same key");
        assert_eq!(api.applied().len(), 1);
        assert!(
            answer.outcome.is_success(),
            "{status}: {:?}",
            answer.outcome
        );
    }
}

/// `payments(api)` with its own list of statuses that mean "come back later".
fn payments_retrying_on(api: &LocalApi, statuses: &[u16]) -> HttpConfig {
    let mut config = payments(api);
    config.services.get_mut("payments").unwrap().retry_statuses = Some(statuses.to_vec());
    config
}

#[test]
fn a_service_names_its_own_come_back_statuses() {
    // This payments API answers 520 while a key is in flight; its service says so.
    assert_refunded_once_through(520, |api| payments_retrying_on(api, &[409, 520]));
    // The opposite: a service whose list leaves 409 out takes a 409 as its answer.
    assert_answer_is_saved(409, |api| payments_retrying_on(api, &[503]));
}

#[test]
fn a_refused_connection_is_known_not_performed_and_says_so() {
    // A port nothing listens on: the connection is refused before anything is sent.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let config = HttpConfig::default()
        .service("payments", &url)
        .allow("refund", &url);
    let t = test_host(|b| b.http(config));

    let err = t.host.call(&refund(9, 100)).unwrap_err();

    assert_eq!(err.kind(), "not_performed", "{err}");
    assert!(err.retry_safe());
    assert!(err.to_string().contains("nothing was sent"), "{err}");
    let journal = t.host.journal(None, 10).unwrap();
    assert!(journal.iter().all(|e| e.outcome.is_none()), "nothing saved");
}

/// `refund`'s arguments written out as the agent chose: `{"order_id":4417,"amount_cents":1299}` plus `extra`.
fn refund_with(extra: &str) -> CallRequest {
    CallRequest::new(
        "refund",
        format!(r#"{{"order_id":4417,"amount_cents":1299{extra}}}"#),
    )
    .conversation("conv-http")
}

#[test]
fn the_default_currency_written_out_or_a_null_reason_is_the_same_refund() {
    let api = LocalApi::start().unwrap();
    let t = test_host(|b| b.http(payments(&api)));

    let first = t.host.call(&refund_with("")).unwrap();
    for extra in [
        r#","currency":"EUR""#,
        r#","reason":null"#,
        r#","currency":"EUR","reason":null"#,
    ] {
        let again = t.host.call(&refund_with(extra)).unwrap();
        assert!(again.replayed, "{extra}");
        assert_eq!(again.outcome, first.outcome, "{extra}");
    }
    assert_eq!(api.applied().len(), 1, "{:?}", api.applied());

    // The opposite case: another currency is another refund.
    let usd = t.host.call(&refund_with(r#","currency":"USD""#)).unwrap();
    assert!(!usd.replayed);
    assert_eq!(api.applied().len(), 2);
    assert_eq!(api.applied()[1].body["currency"], "USD");
}

#[test]
fn an_undeclared_argument_is_refused_by_name_and_nothing_is_sent() {
    let api = LocalApi::start().unwrap();
    let t = test_host(|b| b.http(payments(&api)));

    let err = t.host.call(&refund_with(r#","note":"late""#)).unwrap_err();
    match err {
        Error::InvalidArguments { reason, .. } => assert!(
            reason.contains("undeclared property /note; the tool's schema declares: amount_cents, currency, order_id, reason"),
            "{reason}"
        ),
        other => panic!("expected invalid arguments, got {other:?}"),
    }
    assert!(api.requests().is_empty());
}

/// `payments` as a service that takes no idempotency key (`unkeyed`), whose status
/// request asks `GET /v1/refunds/by-order/{body.order_id}`: 200 performed, 404 not.
fn unkeyed_payments(api: &LocalApi) -> HttpConfig {
    let mut config = payments(api);
    let service = config.services.get_mut("payments").unwrap();
    service.unkeyed = true;
    service.status = Some(justonce::StatusRequest {
        method: "GET".into(),
        path: "/v1/refunds/by-order/{body.order_id}".into(),
        performed: vec![200],
        not_performed: vec![404],
    });
    config
}

/// The invocation key of the newest `refund` call.
fn effect_invocation(host: &Host) -> String {
    host.journal(None, 100)
        .unwrap()
        .into_iter()
        .find(|e| e.tool == "refund")
        .expect("an invocation")
        .key
}

/// The key each POST to the payments API carried, in order.
fn refunds_sent(api: &LocalApi) -> Vec<Option<String>> {
    api.requests()
        .into_iter()
        .filter(|r| r.method == "POST")
        .map(|r| r.key)
        .collect()
}

/// An unkeyed service (issue 56): the lost answer is not sent again and carries no
/// key; at the agent's retry its status request finds the refund, so the call ends
/// performed by the probe, one refund, the retry answered with what was recorded.
#[test]
fn an_unkeyed_services_lost_answer_ends_performed_by_its_status_request() {
    let api = LocalApi::start().unwrap();
    api.script([Behaviour::ApplyThenDrop]);
    let t = test_host(|b| b.http(unkeyed_payments(&api)));

    let Err(Error::OutcomeUnknown { ends_by, .. }) = t.host.call(&refund(4417, 1299)) else {
        panic!("the refund's outcome should be unknown")
    };
    assert_eq!(ends_by.as_str(), "probe");
    assert_eq!(refunds_sent(&api).len(), 1, "not sent again by the host");
    assert_eq!(
        refunds_sent(&api)[0],
        None,
        "an unkeyed service gets no key"
    );

    let retry = t.host.call(&refund(4417, 1299)).unwrap();
    assert!(!retry.replayed);
    let result = result_of(&retry.outcome);
    assert_eq!(
        refunds_sent(&api).len(),
        1,
        "the retry asked, it did not resend"
    );
    assert_eq!(api.applied().len(), 1, "one refund");
    let asked: Vec<_> = api
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET")
        .collect();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0].path, "/v1/refunds/by-order/4417");
    assert_eq!(
        result["refund_id"],
        api.applied()[0].id.as_str(),
        "{result}"
    );
    assert_eq!(result["status"], "succeeded", "the status answer stands in");
    let story = t
        .host
        .story(&justonce::InvocationKey::parse(&effect_invocation(&t.host)).unwrap())
        .unwrap();
    let resolved: Vec<_> = story
        .operations
        .iter()
        .filter(|o| o.action == justonce::Action::Resolve)
        .collect();
    assert_eq!(resolved.len(), 1, "{resolved:?}");
    assert_eq!(resolved[0].by, "probe http payments status");
    assert_eq!(resolved[0].detail["decided_by"], "probe");
    let saved = serde_json::to_string(&story.entry.as_ref().unwrap().effects[0].response).unwrap();
    assert!(
        saved.contains(r#""x-justonce-decided-by":"probe http payments status""#),
        "the saved answer says who found it: {saved}"
    );
    assert!(t.host.unresolved(t.clock.now_ms()).unwrap().is_empty());
    assert!(t.host.call(&refund(4417, 1299)).unwrap().replayed);

    // The opposite case: another refund is sent, under no key either.
    t.host.call(&refund(4418, 500)).unwrap();
    assert_eq!(api.applied().len(), 2);
}

/// The request was lost on its way (`Drop`: the connection closed, nothing applied):
/// the status request finds no refund, and the refund is sent once more. One refund.
#[test]
fn an_unkeyed_services_status_request_that_finds_nothing_sends_the_refund_once_more() {
    let api = LocalApi::start().unwrap();
    api.script([Behaviour::Drop]);
    let t = test_host(|b| b.http(unkeyed_payments(&api)));
    let Err(Error::OutcomeUnknown { .. }) = t.host.call(&refund(4419, 700)) else {
        panic!("the refund's outcome should be unknown")
    };
    assert!(api.applied().is_empty(), "nothing landed");

    let retry = t.host.call(&refund(4419, 700)).unwrap();
    assert_eq!(result_of(&retry.outcome)["status"], "succeeded");
    assert_eq!(refunds_sent(&api).len(), 2, "sent once more");
    assert_eq!(api.applied().len(), 1, "one refund");
    assert!(t.host.unresolved(t.clock.now_ms()).unwrap().is_empty());
}

/// A status request that fails (its answer lost too) decides nothing: the effect
/// stays unknown, told so (`ends_by: probe`), nothing resent; the next retry asks
/// again and ends it.
#[test]
fn an_unkeyed_services_status_request_that_fails_leaves_the_effect_unknown() {
    let api = LocalApi::start().unwrap();
    api.script([Behaviour::ApplyThenDrop, Behaviour::ApplyThenDrop]);
    let t = test_host(|b| b.http(unkeyed_payments(&api)));
    assert!(t.host.call(&refund(4420, 800)).is_err());
    let Err(Error::OutcomeUnknown {
        ends_by, reason, ..
    }) = t.host.call(&refund(4420, 800))
    else {
        panic!("a failed status request decides nothing")
    };
    assert_eq!(ends_by.as_str(), "probe", "{reason}");
    assert!(reason.contains("status request"), "{reason}");
    assert_eq!(refunds_sent(&api).len(), 1, "not sent again");
    assert_eq!(t.host.unresolved(t.clock.now_ms()).unwrap().len(), 1);

    assert!(
        t.host
            .call(&refund(4420, 800))
            .unwrap()
            .outcome
            .is_success()
    );
    assert_eq!(refunds_sent(&api).len(), 1, "still not sent again");
    assert_eq!(api.applied().len(), 1);
}
