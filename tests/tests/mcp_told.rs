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
