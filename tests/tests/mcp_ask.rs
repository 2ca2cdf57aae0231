//! A tool that asks, over the stateless wire (2026-07-28 multi round-trip requests,
//! `mcp::mrtr`), end to end over `serve --http` with a client written as plain HTTP
//! requests. The `asks_refund` guest asks the person behind the agent to confirm a
//! refund before it performs it on the in-process payments API, which loses the
//! answers to each key's first run of attempts (the refund lands, the agent's call
//! ends with its outcome unknown).
//!
//! Round 1 answers `input_required` and performs nothing; round 2, the same call
//! with the answer and the request state, sends the refund; a plain retry of round 2
//! finishes it under the same key (the answer replayed from the journal, nobody asked
//! again), and any later call replays the outcome: one refund. A forged request state,
//! or one of another call, is `-32602` and performs nothing; a client that did not
//! declare elicitation is refused with `-32021` and nothing is journaled. Another
//! order is asked on its own and refunded on its own. Over stdio the same rounds
//! go the same way.

use std::sync::Arc;
use std::time::Duration;

use justonce::__private::{HttpOptions, ServerConfig};
use serde_json::{Value, json};

use crate::support::mcp::serve_in_process;
use crate::support::mcp_http::{HttpClient, HttpFixture, MODERN, Reply};
use crate::support::{FakePayments, Fault, journal_snapshot, test_host};

const TOOL: &str = "asks_refund";

/// How many times the host tries an effect within one run (its default retry
/// policy): the payments API loses as many answers per key, so a run's refund ends
/// with its outcome unknown and the call's retry finishes it.
const ATTEMPTS: u32 = 3;

/// A stateless `tools/call` of `asks_refund` for `order` (25 EUR) in one
/// conversation, its client declaring elicitation or not, with `extra` parameters
/// (the answers and the request state).
fn call(client: &mut HttpClient, order: u64, extra: Value, elicitation: bool) -> Reply {
    let capabilities = if elicitation {
        json!({ "elicitation": {} })
    } else {
        json!({})
    };
    let mut params = json!({
        "name": TOOL,
        "arguments": { "order_id": order, "amount_eur": 25 },
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": capabilities,
            "dev.justonce/conversation": "conv-ask",
        },
    });
    if let Value::Object(extra) = extra {
        params.as_object_mut().unwrap().extend(extra);
    }
    let message = client.message("tools/call", params);
    let headers = [
        ("MCP-Protocol-Version", MODERN),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", TOOL),
    ];
    client.post(&message, &headers)
}

/// The parameters that answer the question (`confirm`), with `state`.
fn answered(state: &str, confirm: bool) -> Value {
    json!({
        "inputResponses": { "answer": { "action": "accept", "content": { "confirm": confirm } } },
        "requestState": state,
    })
}

/// The request state of an `input_required` result, checking its question.
fn asked(result: &Value) -> String {
    assert_eq!(result["resultType"], "input_required", "{result}");
    let requests = result["inputRequests"].as_object().expect("inputRequests");
    assert_eq!(requests.len(), 1, "one question: {result}");
    let question = &requests["answer"];
    assert_eq!(question["method"], "elicitation/create");
    assert_eq!(
        question["params"]["message"],
        "Refund 25 EUR to card …4242?"
    );
    assert_eq!(
        question["params"]["requestedSchema"]["properties"]["confirm"]["type"],
        "boolean"
    );
    result["requestState"]
        .as_str()
        .expect("a requestState")
        .to_owned()
}

/// The JSON-RPC error of a refused request, checking its HTTP status and code.
fn refused(reply: &Reply, code: i64) -> Value {
    assert_eq!(reply.status, 400, "{reply:?}");
    let error = reply.message()["error"].clone();
    assert_eq!(error["code"], code, "{error}");
    error
}

/// `state` with its MAC's last digit changed: the form of one this host makes, not
/// one it made.
fn forged(state: &str) -> String {
    let mut forged = state.to_owned();
    let last = forged.pop().unwrap();
    forged.push(if last == '0' { '1' } else { '0' });
    forged
}

#[test]
fn a_refund_confirmed_over_two_requests_is_performed_once_and_its_retry_replayed() {
    let payments = Arc::new(FakePayments::new(Fault::LoseFirst(ATTEMPTS)));
    let test = test_host(|b| {
        b.component(justonce_tests::guests::ASKS_REFUND_COMPONENT)
            .provider("payments", payments.clone())
    });
    let http = HttpFixture::start(
        Arc::new(test.host),
        HttpOptions::default(),
        &["alice", "bob"],
    );
    let mut alice = http.client("alice");

    // A client that cannot be asked is told which capability the tool needs.
    let error = refused(&call(&mut alice, 4417, json!({}), false), -32021);
    assert_eq!(
        error["data"]["requiredCapabilities"],
        json!({ "elicitation": {} })
    );
    assert!(
        error["message"].as_str().unwrap().contains("elicitation"),
        "{error}"
    );

    // Round 1: the question, and nothing performed.
    let first = call(&mut alice, 4417, json!({}), true).tool_result();
    let state = asked(&first);
    let key = first["_meta"]["dev.justonce/key"].as_str().unwrap();
    assert!(state.starts_with(&format!("{key}.")), "{state}");
    assert!(payments.attempts().is_empty(), "asking performs nothing");
    // Asked again without an answer: the same question, the same state.
    let again = call(&mut alice, 4417, json!({}), true).tool_result();
    assert_eq!(asked(&again), state);
    // So is an answer that does not fit the question's schema (a string for the
    // boolean it asked): asked again, nothing saved, nothing performed.
    let misfit = json!({
        "inputResponses": { "answer": { "action": "accept", "content": { "confirm": "yes" } } },
        "requestState": state,
    });
    let again = call(&mut alice, 4417, misfit, true).tool_result();
    assert_eq!(asked(&again), state);
    let why = &again["_meta"]["dev.justonce/refused_answers"][0];
    assert!(
        why.as_str().is_some_and(|why| why.contains("does not fit")),
        "the result says why: {again}"
    );

    // A forged state, or one naming another call: refused, nothing performed.
    refused(
        &call(&mut alice, 4417, answered(&forged(&state), true), true),
        -32602,
    );
    let elsewhere = state.replacen(key, "another-call", 1);
    let error = refused(
        &call(&mut alice, 4417, answered(&elsewhere, true), true),
        -32602,
    );
    assert!(
        error["message"].as_str().unwrap().contains("another call"),
        "{error}"
    );
    // Bob making alice's very call with her state: his call is another (keys are
    // per principal), so her state is refused, and nothing runs.
    let mut bob = http.client("bob");
    let error = refused(&call(&mut bob, 4417, answered(&state, true), true), -32602);
    assert!(
        error["message"].as_str().unwrap().contains("another call"),
        "{error}"
    );
    // A state of this call for a question the journal does not hold (made up, or
    // of a record forgotten since): refused before the tool runs, not once it asks.
    let mac = state.rsplit('.').next().unwrap();
    let unasked = format!("{key}.5.{mac}");
    let error = refused(
        &call(&mut alice, 4417, answered(&unasked, true), true),
        -32602,
    );
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("not waiting on"),
        "{error}"
    );
    assert!(
        payments.attempts().is_empty(),
        "a refused answer performs nothing"
    );

    // Round 2: answered. The refund lands and its answer is lost: the agent is told
    // the outcome is unknown and a retry is safe.
    let second = call(&mut alice, 4417, answered(&state, true), true).tool_result();
    assert_eq!(second["isError"], true, "{second}");
    assert_eq!(
        second["structuredContent"]["error"]["kind"],
        "outcome_unknown"
    );
    assert_eq!(second["structuredContent"]["error"]["retry_safe"], true);
    assert_eq!(payments.applied().len(), 1);

    // The plain retry of round 2 resumes the call: the answer is replayed from the
    // journal and the refund finished under the same key.
    let retried = call(&mut alice, 4417, answered(&state, true), true).tool_result();
    assert_eq!(retried["isError"], false, "{retried}");
    assert_eq!(retried["structuredContent"]["refunded"], true);
    assert_eq!(
        retried["structuredContent"]["refund"]["refund_id"],
        "re_0001"
    );
    let attempts = payments.attempts();
    assert_eq!(
        attempts.len(),
        ATTEMPTS as usize + 1,
        "the retry went downstream: {attempts:?}"
    );
    assert!(
        attempts.iter().all(|k| *k == attempts[0]),
        "under the same key: {attempts:?}"
    );
    assert_eq!(payments.applied().len(), 1, "one refund");

    // Made again, with or without the answers: the saved outcome, replayed; nothing
    // asked, nothing sent.
    for extra in [answered(&state, true), json!({})] {
        let replayed = call(&mut alice, 4417, extra, true).tool_result();
        assert_eq!(
            replayed["_meta"]["dev.justonce/replayed"], true,
            "{replayed}"
        );
        assert_eq!(replayed["structuredContent"], retried["structuredContent"]);
    }
    assert_eq!(payments.attempts().len(), ATTEMPTS as usize + 1);
    // An altered state is refused even now that its question is answered (the
    // answered question replays without asking, so the transport checks its MAC).
    let error = refused(
        &call(&mut alice, 4417, answered(&forged(&state), true), true),
        -32602,
    );
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("not the one this server gave"),
        "{error}"
    );

    // Another order is another call: asked on its own, its answer its own.
    let other = call(&mut alice, 4418, json!({}), true).tool_result();
    let other_state = asked(&other);
    assert_ne!(other_state, state);
    refused(
        &call(&mut alice, 4418, answered(&state, true), true),
        -32602,
    );
    assert_eq!(
        payments.attempts().len(),
        ATTEMPTS as usize + 1,
        "the first order's answer sent nothing"
    );
    let lost = call(&mut alice, 4418, answered(&other_state, true), true).tool_result();
    assert_eq!(
        lost["structuredContent"]["error"]["kind"],
        "outcome_unknown"
    );
    let done = call(&mut alice, 4418, json!({}), true).tool_result();
    assert_eq!(done["structuredContent"]["refunded"], true, "{done}");
    let applied = payments.applied();
    assert_eq!(applied.len(), 2, "one refund per order: {applied:?}");
    assert_ne!(applied[0].0, applied[1].0, "each under its own key");
    assert_eq!(applied[1].1["order_id"], 4418);
}

#[test]
fn a_declined_refund_is_not_performed_and_its_answer_is_saved() {
    let payments = Arc::new(FakePayments::new(Fault::None));
    let test = test_host(|b| {
        b.component(justonce_tests::guests::ASKS_REFUND_COMPONENT)
            .provider("payments", payments.clone())
    });
    let http = HttpFixture::start(Arc::new(test.host), HttpOptions::default(), &["alice"]);
    let mut alice = http.client("alice");

    let state = asked(&call(&mut alice, 4417, json!({}), true).tool_result());
    let declined = json!({
        "inputResponses": { "answer": { "action": "decline" } },
        "requestState": state,
    });
    let told = call(&mut alice, 4417, declined, true).tool_result();
    assert_eq!(told["isError"], false, "{told}");
    assert_eq!(told["structuredContent"]["refunded"], false);
    assert_eq!(told["structuredContent"]["user"], "decline");
    // An accept sent afterwards does not change the saved answer: the call replays.
    let after = call(&mut alice, 4417, answered(&state, true), true).tool_result();
    assert_eq!(after["_meta"]["dev.justonce/replayed"], true);
    assert_eq!(after["structuredContent"]["refunded"], false);
    assert!(payments.attempts().is_empty(), "nothing refunded");
}

/// A request state kept past its call's retention: the record is still stored (no
/// `gc` yet) but the call is a new one now, which the old state cannot answer. It is
/// refused before anything runs, not once the new call has journaled its question;
/// the call made again without it is asked anew and performed once more.
#[test]
fn a_state_kept_past_the_calls_retention_is_refused_before_the_call_starts_over() {
    let retention = Duration::from_secs(3600);
    let payments = Arc::new(FakePayments::new(Fault::None));
    let test = test_host(|b| {
        b.component(justonce_tests::guests::ASKS_REFUND_COMPONENT)
            .provider("payments", payments.clone())
            .retention(retention)
    });
    let host = Arc::new(test.host);
    let http = HttpFixture::start(host.clone(), HttpOptions::default(), &["alice"]);
    let mut alice = http.client("alice");

    let state = asked(&call(&mut alice, 4417, json!({}), true).tool_result());
    let done = call(&mut alice, 4417, answered(&state, true), true).tool_result();
    assert_eq!(done["structuredContent"]["refunded"], true, "{done}");
    // Within the window the old state is harmless: the outcome replays.
    let replayed = call(&mut alice, 4417, answered(&state, true), true).tool_result();
    assert_eq!(
        replayed["_meta"]["dev.justonce/replayed"], true,
        "{replayed}"
    );

    test.clock.advance(retention + Duration::from_secs(1));
    let before = journal_snapshot(&host);
    let error = refused(
        &call(&mut alice, 4417, answered(&state, true), true),
        -32602,
    );
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("whose record expired"),
        "{error}"
    );
    assert_eq!(
        error["data"]["error"]["kind"], "input_state_invalid",
        "{error}"
    );
    assert_eq!(error["data"]["error"]["retry_safe"], false, "{error}");
    assert_eq!(
        journal_snapshot(&host),
        before,
        "nothing journaled: the new call did not start"
    );
    assert_eq!(payments.applied().len(), 1, "nothing refunded again");

    // Made again without the state: a new call, its own question, one more refund.
    let fresh = asked(&call(&mut alice, 4417, json!({}), true).tool_result());
    assert_ne!(fresh, state, "a question of the new call");
    let again = call(&mut alice, 4417, answered(&fresh, true), true).tool_result();
    assert_eq!(again["structuredContent"]["refunded"], true, "{again}");
    assert_eq!(again["_meta"]["dev.justonce/replayed"], false, "{again}");
    assert_eq!(payments.applied().len(), 2, "the new call refunds once");
}

/// The same rounds over stdio, where a stateless call waits for a worker: asked,
/// a state of another call refused before anything, answered, performed once.
#[test]
fn over_stdio_a_stateless_call_is_asked_and_answered_the_same_way() {
    let payments = Arc::new(FakePayments::new(Fault::None));
    let test = test_host(|b| {
        b.component(justonce_tests::guests::ASKS_REFUND_COMPONENT)
            .provider("payments", payments.clone())
    });
    let (mut client, _server) = serve_in_process(Arc::new(test.host), ServerConfig::default());
    let mut call = |order: u64, extra: Value| {
        let mut params = json!({
            "name": TOOL,
            "arguments": { "order_id": order, "amount_eur": 25 },
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": { "elicitation": {} },
                "dev.justonce/conversation": "conv-stdio",
            },
        });
        if let Value::Object(extra) = extra {
            params.as_object_mut().unwrap().extend(extra);
        }
        client.request("tools/call", params)
    };

    let state = asked(&call(4417, json!({}))["result"]);
    let other_state = asked(&call(4418, json!({}))["result"]);
    let crossed = call(4417, answered(&other_state, true));
    assert_eq!(crossed["error"]["code"], -32602, "{crossed}");
    let altered = call(4417, answered(&forged(&state), true));
    assert_eq!(altered["error"]["code"], -32602, "{altered}");
    assert!(payments.attempts().is_empty(), "nothing performed");

    let done = call(4417, answered(&state, true));
    assert_eq!(
        done["result"]["structuredContent"]["refunded"], true,
        "{done}"
    );
    let again = call(4417, answered(&state, true));
    assert_eq!(
        again["result"]["_meta"]["dev.justonce/replayed"], true,
        "{again}"
    );
    // The replay comes from memory; an altered state with it still is refused.
    let altered = call(4417, answered(&forged(&state), true));
    assert_eq!(altered["error"]["code"], -32602, "{altered}");
    assert_eq!(payments.applied().len(), 1, "one refund");
}
