//! Tool calls over MCP that overlap: parallel duplicates coalesce, different calls
//! run side by side, and a cancelled call keeps its outcome for the retry. An
//! in-process server on real pipes, with a downstream the test holds open.

use std::sync::Arc;

use justonce::__private::ServerConfig;
use justonce::Host;
use serde_json::{Value, json};

use crate::support::gate::Gate;
use crate::support::mcp::{McpClient, VERSION, key, replayed, result, serve_in_process};
use crate::support::test_host;

fn refund(order: u64) -> Value {
    json!({ "order_id": order, "amount_cents": 500 })
}

fn conversation() -> Value {
    json!({ "dev.justonce/conversation": "conv-mcp" })
}

/// A host whose `payments` downstream is `gate`, served in process.
fn serve(gate: &Arc<Gate>, max_concurrent_calls: usize) -> (Arc<Host>, McpClient) {
    let host = Arc::new(test_host(|b| b.provider("payments", gate.clone())).host);
    let config = ServerConfig {
        max_concurrent_calls,
        ..ServerConfig::default()
    };
    let (mut client, _server) = serve_in_process(host.clone(), config);
    client.initialize(VERSION);
    (host, client)
}

/// Sends a ping and waits for its answer: every message sent before it was read.
fn barrier(client: &mut McpClient) {
    assert_eq!(client.request("ping", json!({}))["result"], json!({}));
}

fn call(client: &mut McpClient, id: i64, order: u64) {
    client.send_request(
        json!(id),
        "tools/call",
        json!({ "name": "payments_refund", "arguments": refund(order), "_meta": conversation() }),
    );
}

#[test]
fn two_identical_calls_in_flight_run_once_and_one_is_replayed() {
    let gate = Arc::new(Gate::default());
    let (_host, mut client) = serve(&gate, 16);
    call(&mut client, 1, 4417);
    gate.wait_entered(1);
    call(&mut client, 2, 4417);
    barrier(&mut client);
    gate.open();
    let responses = [client.response(&json!(1)), client.response(&json!(2))];

    assert_eq!(gate.applied(), 1, "one refund");
    assert_eq!(
        gate.attempts().len(),
        1,
        "the duplicate never reached the downstream"
    );
    assert_eq!(
        key(&responses[0]),
        key(&responses[1]),
        "both carried the same key"
    );
    assert_eq!(
        responses.iter().filter(|r| replayed(r)).count(),
        1,
        "one ran, one was replayed"
    );
    for response in &responses {
        let told = result(response);
        assert_eq!(told["isError"], false, "{response}");
        assert_eq!(told["structuredContent"]["refund_id"], "re_0001");
    }
    assert!(client.close().is_empty());
}

#[test]
fn two_different_calls_in_flight_both_run_side_by_side() {
    let gate = Arc::new(Gate::default());
    let (_host, mut client) = serve(&gate, 16);
    call(&mut client, 1, 1);
    call(&mut client, 2, 2);
    // Both are inside the downstream at once: the server runs calls concurrently.
    gate.wait_entered(2);
    gate.open();
    let responses = [client.response(&json!(1)), client.response(&json!(2))];

    assert_eq!(gate.applied(), 2, "two refunds");
    assert_ne!(key(&responses[0]), key(&responses[1]));
    assert!(responses.iter().all(|r| !replayed(r)));
    assert_ne!(
        result(&responses[0])["structuredContent"]["refund_id"],
        result(&responses[1])["structuredContent"]["refund_id"]
    );
    client.close();
}

#[test]
fn a_cancelled_call_runs_to_its_outcome_without_a_response_and_a_retry_gets_that_outcome() {
    let gate = Arc::new(Gate::default());
    let (host, mut client) = serve(&gate, 16);
    call(&mut client, 10, 4417);
    gate.wait_entered(1);
    client.notify(
        "notifications/cancelled",
        json!({ "requestId": 10, "reason": "timed out" }),
    );
    barrier(&mut client);
    gate.open();

    call(&mut client, 11, 4417);
    let retry = client.response(&json!(11));
    let rest = client.close();

    assert!(
        rest.iter().all(|m| m["id"] != 10),
        "the cancelled call got no response: {rest:?}"
    );
    assert!(
        replayed(&retry),
        "the retry got the cancelled call's outcome: {retry}"
    );
    assert_eq!(result(&retry)["isError"], false);
    assert_eq!(result(&retry)["structuredContent"]["refund_id"], "re_0001");
    assert_eq!(gate.applied(), 1, "one refund");
    assert_eq!(gate.attempts().len(), 1);
    let journal = host.journal(None, 10).unwrap();
    assert_eq!(journal.len(), 1, "{journal:?}");
    assert_eq!(
        journal[0].state, "completed",
        "the cancelled call kept its record"
    );
    assert_eq!(
        journal[0].key,
        key(&retry),
        "the retry carried the first call's key"
    );
}

#[test]
fn a_call_cancelled_before_it_started_is_not_run_and_its_retry_runs() {
    let gate = Arc::new(Gate::default());
    // One worker: the second call waits in the queue behind the first.
    let (host, mut client) = serve(&gate, 1);
    call(&mut client, 20, 1);
    gate.wait_entered(1);
    call(&mut client, 21, 2);
    client.notify("notifications/cancelled", json!({ "requestId": 21 }));
    barrier(&mut client);
    gate.open();
    let first = client.response(&json!(20));
    assert!(!replayed(&first));

    call(&mut client, 22, 2);
    let retry = client.response(&json!(22));
    let rest = client.close();

    assert!(rest.iter().all(|m| m["id"] != 21), "{rest:?}");
    assert!(
        !replayed(&retry),
        "nothing was saved for the cancelled call, so the retry runs it"
    );
    assert_eq!(gate.applied(), 2, "each order refunded once");
    assert_eq!(
        gate.attempts().len(),
        2,
        "the cancelled call never reached the downstream"
    );
    assert_eq!(host.journal(None, 10).unwrap().len(), 2);
}

#[test]
fn a_full_queue_answers_busy_and_runs_nothing_more() {
    // One worker, held inside the downstream; the queue fills; one more is refused.
    let gate = Arc::new(Gate::default());
    let (_host, mut client) = serve(&gate, 1);
    call(&mut client, 1, 1);
    gate.wait_entered(1);
    let queued = justonce::__private::MAX_QUEUED_CALLS as i64;
    for n in 0..queued {
        call(&mut client, 2 + n, 1);
    }
    let over = 2 + queued;
    call(&mut client, over, 2);
    let busy = client.response(&json!(over));
    let error = &busy["error"];
    assert_eq!(error["data"]["kind"], "busy", "{busy}");
    assert_eq!(error["data"]["retry_safe"], true, "{busy}");
    gate.open();
    // Every queued call is answered (a duplicate of the first: replayed), and the
    // refused one never reached the downstream.
    for n in 0..queued {
        assert_eq!(result(&client.response(&json!(2 + n)))["isError"], false);
    }
    assert_eq!(result(&client.response(&json!(1)))["isError"], false);
    assert_eq!(gate.attempts().len(), 1, "only order 1 reached it");
}
