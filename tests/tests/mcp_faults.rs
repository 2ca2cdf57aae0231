//! `serve --fault`: the seed's harness for an agent builder's own loop, through the
//! CLI on stdio. The effect lands and its response is lost (the first call ends
//! `outcome_unknown`, the agent's retry is answered, one email); the effect lands and
//! its answer is late (a duplicate is told `in_progress` by `--answer-within-ms`,
//! then the retry is replayed). Each with the seed's four assertions.

use serde_json::{Value, json};

use crate::support::db::mailbox_count;
use crate::support::mcp::{McpProcess, VERSION, key, note, replayed, result};

fn receipt(order: u64) -> Value {
    json!({ "orders": [{ "order_id": order, "email": "ada@example.com", "amount_cents": 1299 }] })
}

fn conversation() -> Value {
    json!({ "dev.justonce/conversation": "conv-faults" })
}

#[test]
fn a_lost_response_ends_the_first_call_unknown_and_the_agents_retry_sends_nothing_again() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let mut server = McpProcess::spawn(&db, &["--fault", "lose-response:mail"], "warn");
    server.client.initialize(VERSION);

    let first = server
        .client
        .call("send_receipt", receipt(4417), conversation());
    let told = result(&first);
    assert_eq!(
        told["structuredContent"]["error"]["kind"], "outcome_unknown",
        "{first}"
    );
    assert!(note(told).is_some_and(|n| n.contains("safe")));
    assert_eq!(mailbox_count(&db), 1, "the effect landed");

    // The agent retries the very same call, as the note says.
    let retry = server
        .client
        .call("send_receipt", receipt(4417), conversation());
    let told = result(&retry);
    assert_eq!(told["isError"], false, "the agent is told success: {retry}");
    assert_eq!(told["structuredContent"]["sent"][0]["order_id"], 4417);
    assert_eq!(
        first["result"]["_meta"]["dev.justonce/key"], retry["result"]["_meta"]["dev.justonce/key"],
        "both attempts carried the same key"
    );
    assert_eq!(
        mailbox_count(&db),
        1,
        "one email: the retry sent nothing again"
    );

    // The opposite case: a different order is another email.
    let other = server
        .client
        .call("send_receipt", receipt(4418), conversation());
    assert_eq!(
        result(&other)["structuredContent"]["error"]["kind"],
        "outcome_unknown"
    );
    assert_eq!(mailbox_count(&db), 2);
    let (_, code, log) = server.close();
    assert_eq!(code, Some(0));
    assert!(
        log.contains("FAULT INJECTION") && log.contains("lost"),
        "said loudly: {log}"
    );
}

/// The fault is counted in the journal, per key: a client that starts a server per
/// call (LlamaIndex on stdio) retries in a second process, and its retry is answered
/// as one server's would be, instead of losing its response again.
#[test]
fn a_lost_response_is_counted_in_the_journal_so_a_retry_in_a_new_process_is_answered() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let spawn = || {
        let mut server = McpProcess::spawn(&db, &["--fault", "lose-response:mail"], "warn");
        server.client.initialize(VERSION);
        server
    };
    let mut server = spawn();
    let first = server
        .client
        .call("send_receipt", receipt(5517), conversation());
    assert_eq!(
        result(&first)["structuredContent"]["error"]["kind"],
        "outcome_unknown",
        "{first}"
    );
    assert_eq!(mailbox_count(&db), 1, "the effect landed");
    let (_, code, _) = server.close();
    assert_eq!(code, Some(0));

    let mut server = spawn();
    let retry = server
        .client
        .call("send_receipt", receipt(5517), conversation());
    let told = result(&retry);
    assert_eq!(
        told["isError"], false,
        "the retry in a new process is answered: {retry}"
    );
    assert_eq!(told["structuredContent"]["sent"][0]["order_id"], 5517);
    assert_eq!(
        first["result"]["_meta"]["dev.justonce/key"], retry["result"]["_meta"]["dev.justonce/key"],
        "both attempts carried the same key"
    );
    assert_eq!(
        mailbox_count(&db),
        1,
        "one email for the call and its retry"
    );

    // The opposite case: another order's first attempt in this process loses its
    // response, as the first process's did.
    let other = server
        .client
        .call("send_receipt", receipt(5518), conversation());
    assert_eq!(
        result(&other)["structuredContent"]["error"]["kind"],
        "outcome_unknown"
    );
    assert_eq!(mailbox_count(&db), 2);
    server.close();
}

#[test]
fn a_late_answer_is_in_progress_for_a_duplicate_within_the_answer_by_time_then_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let mut server = McpProcess::spawn(
        &db,
        &[
            "--fault",
            "hang:send_receipt:3000",
            "--answer-within-ms",
            "200",
        ],
        "warn",
    );
    server.client.initialize(VERSION);
    let params =
        json!({ "name": "send_receipt", "arguments": receipt(7), "_meta": conversation() });
    server
        .client
        .send_request(json!(1), "tools/call", params.clone());
    // The client gave up on call 1 and retries: whichever of the two the server
    // reached second is answered before the first's late answer, and told to wait.
    server
        .client
        .send_request(json!(2), "tools/call", params.clone());
    let mut answers = [
        server.client.response(&json!(1)),
        server.client.response(&json!(2)),
    ];
    answers.sort_by_key(|a| result(a)["isError"] != true);
    let [waiting, first] = answers;
    let told = result(&waiting);
    assert_eq!(
        told["structuredContent"]["error"]["kind"], "in_progress",
        "{waiting}"
    );
    assert!(note(told).is_some_and(|n| n.contains("still running")));
    assert!(!replayed(&first), "{first}");
    assert_eq!(result(&first)["isError"], false, "{first}");
    let retry = server.client.request("tools/call", params);
    assert!(replayed(&retry), "{retry}");
    assert_eq!(key(&retry), key(&first));
    assert_eq!(result(&retry)["isError"], false);
    assert_eq!(mailbox_count(&db), 1);
    let (_, _, log) = server.close();
    assert!(log.contains("FAULT INJECTION"), "{log}");
}
