//! What the model reads says what happened: a replay keeps the tool's own content
//! byte for byte and adds one text item saying it was done earlier; an error that
//! retrying the same call resolves (`in_progress`, `outcome_unknown`) says so in
//! words, with a wait, since frameworks pass the model a result's text and drop its
//! `_meta` and structured data. Raw MCP on real pipes, in process.

use std::sync::Arc;
use std::time::Duration;

use justonce::__private::ServerConfig;
use serde_json::{Value, json};

use crate::support::gate::Gate;
use crate::support::mcp::{VERSION, key, note, replayed, result, serve_in_process, tool_items};
use crate::support::{FakePayments, Fault, test_host};

fn refund(order: u64) -> Value {
    json!({ "order_id": order, "amount_cents": 500 })
}

fn conversation() -> Value {
    json!({ "dev.justonce/conversation": "conv-told" })
}

#[test]
fn a_replay_is_the_tools_content_and_one_note_that_says_it_was_done_earlier() {
    let payments = Arc::new(FakePayments::new(Fault::None));
    let host = Arc::new(test_host(|b| b.provider("payments", payments.clone())).host);
    let (mut client, _server) = serve_in_process(host, ServerConfig::default());
    client.initialize(VERSION);

    let first = client.call("payments_refund", refund(1), conversation());
    let retry = client.call("payments_refund", refund(1), conversation());
    assert!(!replayed(&first) && replayed(&retry));
    assert_eq!(key(&first), key(&retry));
    assert_eq!(payments.applied().len(), 1);
    assert_eq!(note(result(&first)), None, "a call that ran has no note");
    assert_eq!(
        tool_items(result(&retry)).to_string(),
        result(&first)["content"].to_string(),
        "the tool's items, byte for byte"
    );
    assert_eq!(
        result(&retry)["structuredContent"].to_string(),
        result(&first)["structuredContent"].to_string()
    );
    let told = note(result(&retry)).expect("a note");
    assert!(
        told.contains("already made") && told.contains("Nothing was sent or done again"),
        "{told}"
    );
    let item = result(&retry)["content"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(item["annotations"]["audience"], json!(["assistant"]));
}

#[test]
fn an_unknown_outcome_tells_the_model_in_words_that_the_same_call_is_safe_and_how_long_to_wait() {
    let payments = Arc::new(FakePayments::new(Fault::AlwaysTimeout));
    let host = Arc::new(test_host(|b| b.provider("payments", payments.clone())).host);
    let (mut client, _server) = serve_in_process(host, ServerConfig::default());
    client.initialize(VERSION);

    let unknown = client.call("payments_refund", refund(2), conversation());
    let told = result(&unknown);
    assert_eq!(told["isError"], true);
    assert_eq!(
        told["structuredContent"]["error"]["kind"],
        "outcome_unknown"
    );
    assert_eq!(told["structuredContent"]["error"]["retry_after_s"], 30);
    let text: Value = serde_json::from_str(told["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        text, told["structuredContent"],
        "the first item is still the JSON"
    );
    let words = note(told).expect("a note");
    assert!(
        words.contains("outcome is unknown")
            && words.contains("very same call")
            && words.contains("safe")
            && words.contains("wait about 30 s"),
        "{words}"
    );

    // The opposite case: an error that a retry does not resolve gets no such note.
    let bad = client.call(
        "payments_refund",
        json!({ "order_id": "x" }),
        conversation(),
    );
    assert_eq!(result(&bad)["isError"], true, "{bad}");
    assert_eq!(note(result(&bad)), None, "{bad}");
}

#[test]
fn a_duplicate_past_its_answer_by_time_is_told_the_first_call_is_still_running() {
    let gate = Arc::new(Gate::default());
    let host = Arc::new(
        test_host(|b| {
            b.provider("payments", gate.clone())
                .wait_bound(Duration::from_millis(50))
        })
        .host,
    );
    let (mut client, _server) = serve_in_process(host, ServerConfig::default());
    client.initialize(VERSION);
    let params =
        json!({ "name": "payments_refund", "arguments": refund(3), "_meta": conversation() });
    client.send_request(json!(1), "tools/call", params.clone());
    gate.wait_entered(1);
    let waiting = client.request("tools/call", params.clone());
    let told = result(&waiting);
    assert_eq!(
        told["structuredContent"]["error"]["kind"], "in_progress",
        "{waiting}"
    );
    assert_eq!(told["structuredContent"]["error"]["retry_safe"], true);
    let words = note(told).expect("a note");
    assert!(
        words.contains("still running") && words.contains("nothing new was started"),
        "{words}"
    );
    gate.open();
    let first = client.response(&json!(1));
    assert!(!replayed(&first));
    // The retry the note asks for gets the first call's outcome.
    let retry = client.request("tools/call", params);
    assert!(replayed(&retry), "{retry}");
    assert_eq!(key(&retry), key(&first));
    assert_eq!(gate.applied(), 1);
}

/// What the model reads of an unkeyed effect whose answer was lost and that no probe
/// can check: stop retrying, what is pending, what to tell the user; no
/// `retry_after_s` (a retry changes nothing), on the first answer and on a retry,
/// which sends nothing. The opposite case (a keyed effect, a retry resends it under
/// its key) is `an_unknown_outcome_tells_the_model_in_words_…` above.
#[test]
fn an_unknown_outcome_only_a_person_can_end_tells_the_model_to_stop_and_tell_the_user() {
    let payments = Arc::new(FakePayments::with_class(
        justonce::ProviderClass::Unkeyed,
        Fault::AlwaysTimeout,
    ));
    let host = Arc::new(test_host(|b| b.provider("payments", payments.clone())).host);
    let (mut client, _server) = serve_in_process(host, ServerConfig::default());
    client.initialize(VERSION);

    for attempt in 1..=2 {
        let unknown = client.call("payments_refund", refund(4), conversation());
        let told = result(&unknown);
        let error = &told["structuredContent"]["error"];
        assert_eq!(error["kind"], "outcome_unknown", "{unknown}");
        assert_eq!(error["ends_by"], "person", "{unknown}");
        assert!(
            error.get("retry_after_s").is_none(),
            "attempt {attempt}: no wait where a retry changes nothing: {unknown}"
        );
        assert_eq!(
            note(told).expect("a note"),
            "justonce: the outcome is unknown: the downstream did not answer whether the \
             effect happened, and it cannot be sent again safely or checked automatically. \
             Stop retrying this call: it is pending until a person (an operator of this \
             host) checks whether it happened, and retrying before then changes nothing. \
             Do not make it again with other arguments either, which could do it twice. \
             Tell the user that this action may or may not have taken effect and that it \
             is waiting for an operator to confirm it."
        );
        assert_eq!(payments.attempts().len(), 1, "attempt {attempt}: sent once");
    }
}

/// A replayed failure says it failed earlier and that the same call fails the same
/// way: never "It is done". The opposite case (a replayed success) keeps its note.
#[test]
fn a_replayed_error_says_it_failed_earlier_and_will_fail_the_same_way() {
    let payments = Arc::new(FakePayments::new(Fault::Reject(
        json!({ "error": "quota exceeded" }),
    )));
    let host = Arc::new(test_host(|b| b.provider("payments", payments.clone())).host);
    let (mut client, _server) = serve_in_process(host, ServerConfig::default());
    client.initialize(VERSION);

    let first = client.call("payments_refund", refund(5), conversation());
    assert_eq!(result(&first)["isError"], true, "{first}");
    let retry = client.call("payments_refund", refund(5), conversation());
    assert!(replayed(&retry), "{retry}");
    assert_eq!(payments.attempts().len(), 1, "sent once");
    let told = note(result(&retry)).expect("a note");
    assert_eq!(
        told,
        "justonce: this call was already made earlier in this conversation with these \
         arguments, and it failed then; the error is the one it got, replayed. Nothing \
         was sent or done again. The very same call (same arguments, same conversation) \
         fails the same way until its record expires: do not repeat it. Fix what the \
         error names and make a different call, or tell the user it failed."
    );
    assert!(!told.contains("It is done"), "{told}");
}
