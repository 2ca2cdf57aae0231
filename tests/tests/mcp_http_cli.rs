//! `justonce serve --http` as a process: tokens issued and revoked with `justonce
//! token`, calls keyed by principal, and `journal --principal`.

use serde_json::{Value, json};

use crate::support::cli::{json_of, justonce_command};
use crate::support::mcp_http::{HttpClient, HttpProcess, add_token};

fn receipt(order: u64) -> Value {
    json!({ "orders": [{ "order_id": order, "email": "ada@example.com", "amount_cents": 100 }] })
}

#[test]
fn tokens_from_the_cli_name_principals_whose_calls_the_journal_tells_apart() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let alice = add_token(&db, "alice");
    let bob = add_token(&db, "bob");
    let stored = std::fs::read_to_string(dir.path().join("tokens.json")).unwrap();
    assert!(
        !stored.contains(&alice) && !stored.contains(&bob),
        "only hashes are stored"
    );
    let listed = json_of(
        &justonce_command(Some(&db))
            .args(["token", "list", "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(listed.as_array().unwrap().len(), 2);

    let server = HttpProcess::spawn(&db, &[]);
    let key = json!({ "idempotencyKey": "order-1", "_meta": { "dev.justonce/conversation": "c" } });
    let a = HttpClient::new(server.addr, Some(alice.clone()))
        .call("send_receipt", receipt(1), key.clone())
        .tool_result();
    let b = HttpClient::new(server.addr, Some(bob))
        .call("send_receipt", receipt(1), key.clone())
        .tool_result();
    assert_ne!(
        a["_meta"]["dev.justonce/key"],
        b["_meta"]["dev.justonce/key"]
    );
    assert_eq!(crate::support::db::mailbox_count(&db), 2, "one email each");

    let journal = |args: &[&str]| {
        json_of(
            &justonce_command(Some(&db))
                .arg("journal")
                .args(args)
                .arg("--json")
                .output()
                .unwrap(),
        )
    };
    let alices = journal(&["--principal", "alice"]);
    assert_eq!(alices.as_array().unwrap().len(), 1, "{alices}");
    assert_eq!(alices[0]["key"], a["_meta"]["dev.justonce/key"]);
    assert_eq!(alices[0]["conversation"], "c", "{alices}");
    assert_eq!(alices[0]["principal"], "alice");
    let everyones = journal(&["--conversation", "c"]);
    assert_eq!(
        everyones.as_array().unwrap().len(),
        2,
        "every principal's calls in the conversation: {everyones}"
    );
    let text = justonce_command(Some(&db))
        .args(["journal", "--conversation", "c"])
        .output()
        .unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.contains("conversation=c  principal=alice"),
        "the text names the conversation and the principal: {text}"
    );
    let in_conversation = journal(&["--principal", "bob", "--conversation", "c"]);
    assert_eq!(in_conversation[0]["key"], b["_meta"]["dev.justonce/key"]);
    assert!(
        journal(&["--principal", "carol"])
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert_eq!(journal(&[]).as_array().unwrap().len(), 2);

    // Revoked while the server runs: refused from the next request on.
    let out = justonce_command(Some(&db))
        .args(["token", "revoke", "alice"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let refused = HttpClient::new(server.addr, Some(alice)).call("send_receipt", receipt(2), key);
    assert_eq!(refused.status, 401);
    assert_eq!(crate::support::db::mailbox_count(&db), 2);
}

#[test]
fn a_host_failure_tells_a_remote_principal_what_happened_and_an_error_id_the_log_carries_not_internals()
 {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let alice = add_token(&db, "alice");
    // The journal's first fsync fails (EIO): the journal refuses writes from then on.
    let server =
        HttpProcess::spawn_logged(&db, &[], &[(justonce::__private::FAULT_ENV, "fsync_fails")]);
    let reply =
        HttpClient::new(server.addr, Some(alice)).call("send_receipt", receipt(1), json!({}));
    let log = server.stop_for_log();

    let message = reply.message();
    let error = &message["error"];
    assert_eq!(error["code"], -32603, "{message}");
    let text = message.to_string();
    let db_text = db.display().to_string();
    for internal in [db_text.as_str(), "fsync", "os error", "state.db"] {
        assert!(
            !text.contains(internal),
            "{internal:?} leaked to the client: {text}"
        );
    }
    let id = error["data"]["error_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no error id: {message}"))
        .to_owned();
    assert!(
        error["message"].as_str().unwrap().contains(&id),
        "{message}"
    );
    assert!(
        error["message"].as_str().unwrap().contains("journal"),
        "says what happened: {message}"
    );
    // The log has the detail under the same id.
    let logged = log
        .lines()
        .find(|l| l.contains(&id))
        .unwrap_or_else(|| panic!("the log does not carry {id}: {log}"));
    assert!(logged.contains("fsync"), "{logged}");
}
