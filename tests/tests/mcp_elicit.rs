//! A session's client is asked on the connection while the call runs (issue 43):
//! `elicitation/create` on stdio, answered by id. The question is journaled only
//! with its answer: a question not answered in time, or whose client hung up, ends
//! the call without it (`input_unavailable`, nothing after the question happened),
//! and the same call asks again from a client that answers, performing once; the
//! retry of a call answered is replayed without a question. A call the client
//! cancels while it is asked waits no more.

use std::sync::Arc;
use std::time::Duration;

use justonce::__private::ServerConfig;
use serde_json::{Value, json};

use crate::support::mcp::{McpClient, result, serve_in_process};
use crate::support::{FakePayments, Fault, test_host};

const META: &str = "conv-elicit";

/// A stdio client of `server` whose `initialize` declared `elicitation`.
fn eliciting_client(host: &Arc<justonce::Host>, config: ServerConfig) -> McpClient {
    let (mut client, _server) = serve_in_process(Arc::clone(host), config);
    let init = client.request(
        "initialize",
        json!({
            "protocolVersion": "2025-11-25",
            "capabilities": { "elicitation": {} },
            "clientInfo": { "name": "justonce-tests", "version": "0" },
        }),
    );
    assert!(init.get("result").is_some(), "{init}");
    client.notify("notifications/initialized", json!({}));
    client
}

/// Sends `asks_refund` for order 4417 as request `id`.
fn send_refund(client: &mut McpClient, id: i64) {
    client.send_request(
        json!(id),
        "tools/call",
        json!({
            "name": "asks_refund",
            "arguments": { "order_id": 4417, "amount_eur": 25 },
            "_meta": { "dev.justonce/conversation": META },
        }),
    );
}

/// The next message, which must be the server's question.
fn question(client: &mut McpClient) -> Value {
    let asked = client.next_message();
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    assert_eq!(
        asked["params"]["message"], "Refund 25 EUR to card …4242?",
        "{asked}"
    );
    asked
}

fn host_with_payments() -> (Arc<justonce::Host>, Arc<FakePayments>) {
    let payments = Arc::new(FakePayments::new(Fault::None));
    let t = test_host(|b| b.provider("payments", payments.clone()));
    (Arc::new(t.host), payments)
}

/// Answers the question and reads the call's result: refunded, not replayed.
fn answered(client: &mut McpClient, id: i64) -> Value {
    let asked = question(client);
    client.send_line(
        &json!({
            "jsonrpc": "2.0",
            "id": asked["id"],
            "result": { "action": "accept", "content": { "confirm": true } },
        })
        .to_string(),
    );
    let response = client.response(&json!(id));
    let done = result(&response).clone();
    assert_eq!(done["structuredContent"]["refunded"], true, "{done}");
    assert_eq!(done["_meta"]["dev.justonce/replayed"], false, "{done}");
    done
}

#[test]
fn a_question_not_answered_in_time_ends_the_call_and_the_same_call_asks_again() {
    let (host, payments) = host_with_payments();
    let impatient = ServerConfig {
        ask_timeout: Duration::ZERO,
        ..ServerConfig::default()
    };
    let mut client = eliciting_client(&host, impatient);
    send_refund(&mut client, 1);
    let asked = question(&mut client);
    let response = client.response(&json!(1));
    let told = result(&response);
    assert_eq!(told["isError"], true, "{told}");
    let text = told["content"].to_string();
    assert!(
        text.contains("input_unavailable")
            && text.contains("did not answer elicitation/create within 0 ms"),
        "{text}"
    );
    assert!(payments.applied().is_empty(), "nothing after the question");
    // Its late answer finds no one waiting; the connection goes on.
    client.send_line(
        &json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept"}}).to_string(),
    );
    assert_eq!(client.request("ping", json!({}))["result"], json!({}));

    // The same call, from a client that answers: asked again, refunded once.
    let mut patient = eliciting_client(&host, ServerConfig::default());
    send_refund(&mut patient, 2);
    let first = answered(&mut patient, 2);
    assert_eq!(payments.applied().len(), 1);

    // Its retry: replayed, no question.
    send_refund(&mut patient, 3);
    let retry = patient.next_message();
    assert_eq!(retry["id"], 3, "the answer comes, no question: {retry}");
    let retry = result(&retry);
    assert_eq!(retry["_meta"]["dev.justonce/replayed"], true);
    assert_eq!(
        retry["_meta"]["dev.justonce/key"],
        first["_meta"]["dev.justonce/key"]
    );
    assert_eq!(payments.applied().len(), 1, "one refund");
}

#[test]
fn a_client_that_hangs_up_while_asked_ends_the_call_and_the_same_call_asks_again() {
    let (host, payments) = host_with_payments();
    let mut client = eliciting_client(&host, ServerConfig::default());
    send_refund(&mut client, 1);
    question(&mut client);
    // Hangs up: the call waiting for the answer ends at once, without it.
    let rest = client.close();
    let response = rest
        .iter()
        .find(|m| m["id"] == 1)
        .unwrap_or_else(|| panic!("the call's answer was written: {rest:?}"));
    let text = result(response)["content"].to_string();
    assert!(
        text.contains("the client disconnected before it answered"),
        "{text}"
    );
    assert!(payments.applied().is_empty(), "nothing after the question");

    let mut again = eliciting_client(&host, ServerConfig::default());
    send_refund(&mut again, 2);
    answered(&mut again, 2);
    assert_eq!(payments.applied().len(), 1, "one refund");
}

#[test]
fn a_call_cancelled_while_asked_ends_unanswered_and_its_retry_asks_again() {
    let (host, payments) = host_with_payments();
    let mut client = eliciting_client(&host, ServerConfig::default());
    send_refund(&mut client, 1);
    question(&mut client);
    // Cancelled: its response is withheld, and it waits for no answer: it ends
    // without one, so the retry runs the call again (rather than wait for it) and
    // is asked again.
    client.notify(
        "notifications/cancelled",
        json!({ "requestId": 1, "reason": "the user went away" }),
    );
    send_refund(&mut client, 2);
    answered(&mut client, 2);
    assert_eq!(payments.applied().len(), 1, "one refund");
    assert!(
        client.close().iter().all(|m| m["id"] != 1),
        "the cancelled call's response is withheld"
    );
}

#[test]
fn a_client_that_declared_no_elicitation_is_not_asked_and_told_why() {
    let (host, payments) = host_with_payments();
    let (mut client, _server) = serve_in_process(Arc::clone(&host), ServerConfig::default());
    client.initialize("2025-11-25");
    send_refund(&mut client, 1);
    let response = client.next_message();
    assert_eq!(response["id"], 1, "no question first: {response}");
    let told = result(&response);
    assert_eq!(told["isError"], true, "{told}");
    assert!(
        told["content"]
            .to_string()
            .contains("declared no elicitation capability"),
        "{told}"
    );
    assert!(payments.applied().is_empty());
}
