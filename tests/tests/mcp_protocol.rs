//! `justonce serve` as a process over real pipes: the MCP protocol as a client sees
//! it.

use serde_json::{Value, json};

use crate::support::db::{journal, mailbox_count};
use crate::support::mcp::{McpProcess, VERSION, key, note, replayed, result, tool_items};

fn receipt(order: u64) -> Value {
    json!({ "orders": [{ "order_id": order, "email": "ada@example.com", "amount_cents": 1299 }] })
}

fn conversation(id: &str) -> Value {
    json!({ "dev.justonce/conversation": id })
}

fn error_of(response: &Value) -> (i64, String) {
    let error = response
        .get("error")
        .unwrap_or_else(|| panic!("expected an error: {response}"));
    (
        error["code"].as_i64().unwrap(),
        error["message"].as_str().unwrap().to_owned(),
    )
}

#[test]
fn initialize_list_call_and_a_replayed_call() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let mut server = McpProcess::spawn(&db, &[], "warn");
    let client = &mut server.client;

    let init = client.initialize(VERSION);
    assert_eq!(init["protocolVersion"], VERSION);
    assert_eq!(init["serverInfo"]["name"], "justonce");
    assert!(init["capabilities"]["tools"].is_object(), "{init}");

    let tools = client.request("tools/list", json!({}));
    let tools = result(&tools)["tools"].as_array().unwrap().clone();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["notify", "refund", "send_receipt"]);
    for tool in &tools {
        assert_eq!(tool["annotations"]["idempotentHint"], true, "{tool}");
        assert_eq!(
            tool["_meta"]["dev.justonce/retention"],
            json!({ "conversation_seconds": 86400, "unscoped_seconds": 600 }),
            "{tool}"
        );
        assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
    }
    let listed = &tools[2]["inputSchema"];
    assert!(listed["properties"]["orders"].is_object());
    // SEP-1613: the dialect keywords are kept beside the inlined references.
    assert_eq!(
        listed["$schema"], "https://json-schema.org/draft/2020-12/schema",
        "{listed}"
    );
    assert!(listed["$defs"].is_object(), "{listed}");
    assert!(
        !listed["properties"].to_string().contains("$ref"),
        "{listed}"
    );
    assert!(
        tools[2]["description"]
            .as_str()
            .unwrap()
            .contains("receipt")
    );

    let first = client.call("send_receipt", receipt(4417), conversation("conv-1"));
    let told = result(&first);
    assert_eq!(told["isError"], false);
    assert!(!replayed(&first));
    assert_eq!(told["structuredContent"]["sent"][0]["order_id"], 4417);
    let text: Value = serde_json::from_str(told["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text, told["structuredContent"], "the text is the same JSON");
    assert_eq!(mailbox_count(&db), 1);

    let retry = client.call("send_receipt", receipt(4417), conversation("conv-1"));
    assert!(replayed(&retry), "the retry is replayed: {retry}");
    assert_eq!(
        key(&retry),
        key(&first),
        "both attempts carried the same key"
    );
    assert_eq!(
        tool_items(result(&retry)),
        told["content"],
        "the agent is told the same, byte for byte"
    );
    assert!(
        note(result(&retry)).is_some_and(|n| n.contains("Nothing was sent or done again")),
        "and, after it, that it was done earlier: {retry}"
    );
    assert_eq!(note(told), None, "a first call has no note");
    assert_eq!(
        result(&retry)["structuredContent"],
        told["structuredContent"]
    );
    assert_eq!(mailbox_count(&db), 1, "one email for the duplicate pair");

    let other = client.call("send_receipt", receipt(4418), conversation("conv-1"));
    assert!(!replayed(&other));
    assert_ne!(key(&other), key(&first));
    assert_eq!(mailbox_count(&db), 2, "a different call is a second email");

    let (rest, code, log) = server.close();
    assert_eq!(rest, Vec::<Value>::new(), "nothing unasked for");
    assert_eq!(code, Some(0), "{log}");
}

#[test]
fn initialize_answers_with_the_clients_version_when_known_else_the_latest() {
    let dir = tempfile::tempdir().unwrap();
    for (asked, answered) in [("2025-06-18", "2025-06-18"), ("2099-01-01", "2025-11-25")] {
        let mut server = McpProcess::spawn(&dir.path().join("state.db"), &[], "warn");
        let init = server.client.initialize(asked);
        assert_eq!(init["protocolVersion"], answered, "asked for {asked}");
        server.close();
    }
}

#[test]
fn malformed_requests_get_json_rpc_errors_and_the_server_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = McpProcess::spawn(&dir.path().join("state.db"), &[], "warn");
    let client = &mut server.client;
    client.initialize(VERSION);

    client.send_line("{this is not json");
    let parse = client.next_message();
    assert_eq!(parse["id"], Value::Null);
    assert_eq!(error_of(&parse).0, -32700);

    client.send_line(r#"{"id":5,"method":"ping"}"#);
    let (code, message) = error_of(&client.response(&json!(5)));
    assert_eq!(code, -32600);
    assert!(message.contains("jsonrpc"), "{message}");

    client.send_line(r#"[{"jsonrpc":"2.0","id":6,"method":"ping"}]"#);
    let (code, message) = error_of(&client.next_message());
    assert_eq!(code, -32600);
    assert!(message.contains("batch"), "{message}");

    let bad_args = client.request(
        "tools/call",
        json!({ "name": "send_receipt", "arguments": "{}" }),
    );
    let (code, message) = error_of(&bad_args);
    assert_eq!(code, -32602);
    assert!(
        message.contains("\"arguments\" must be an object"),
        "{message}"
    );

    let (code, message) = error_of(&client.request("resources/list", json!({})));
    assert_eq!(code, -32601);
    assert!(message.contains("resources/list"), "{message}");

    let ping = client.request("ping", json!({}));
    assert_eq!(ping["result"], json!({}), "still serving");
    server.close();
}

#[test]
fn an_unknown_tool_is_invalid_params_naming_the_loaded_tools_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let mut server = McpProcess::spawn(&db, &[], "warn");
    server.client.initialize(VERSION);
    let response = server.client.call("send_reciept", receipt(1), json!({}));
    let (code, message) = error_of(&response);
    assert_eq!(code, -32602);
    assert!(
        message.contains("send_reciept") && message.contains("send_receipt"),
        "{message}"
    );
    assert_eq!(response["error"]["data"]["error"]["kind"], "unknown_tool");
    server.close();
    assert_eq!(journal(&db), Vec::<Value>::new());
}

#[test]
fn notifications_get_no_response() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = McpProcess::spawn(&dir.path().join("state.db"), &[], "warn");
    let client = &mut server.client;
    client.initialize(VERSION);
    client.notify("notifications/initialized", json!({}));
    client.notify("notifications/roots/list_changed", json!({}));
    client.notify(
        "notifications/cancelled",
        json!({ "requestId": 99, "reason": "not in flight" }),
    );
    client.send_request(json!("after"), "ping", json!({}));
    let next = client.next_message();
    assert_eq!(
        next["id"], "after",
        "the first message after the notifications answers the ping: {next}"
    );
    let (rest, code, _) = server.close();
    assert_eq!(rest, Vec::<Value>::new());
    assert_eq!(code, Some(0));
}

#[test]
fn the_conversation_comes_from_meta_else_from_the_serve_flag() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let mut server = McpProcess::spawn(&db, &["--conversation", "conv-a"], "warn");
    let client = &mut server.client;
    client.initialize(VERSION);

    let flagged = client.call("send_receipt", receipt(7), json!({}));
    assert!(!replayed(&flagged));
    let cli_key = crate::support::cli::justonce_command(Some(&db))
        .args([
            "key",
            "send_receipt",
            "--args",
            &receipt(7).to_string(),
            "--conversation",
            "conv-a",
        ])
        .output()
        .unwrap();
    assert_eq!(
        key(&flagged),
        String::from_utf8(cli_key.stdout).unwrap().trim()
    );

    let named = client.call("send_receipt", receipt(7), conversation("conv-a"));
    assert!(replayed(&named), "the same conversation, named in _meta");
    assert_eq!(key(&named), key(&flagged));

    let elsewhere = client.call("send_receipt", receipt(7), conversation("conv-b"));
    assert!(
        !replayed(&elsewhere),
        "another conversation is another call"
    );
    assert_ne!(key(&elsewhere), key(&flagged));
    server.close();
    assert_eq!(mailbox_count(&db), 2);
}

#[test]
fn an_explicit_key_in_meta_is_used_and_reusing_it_with_other_arguments_is_a_mismatch() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let mut server = McpProcess::spawn(&db, &[], "warn");
    let client = &mut server.client;
    client.initialize(VERSION);
    let meta = json!({ "dev.justonce/idempotency-key": "receipt-4417" });

    let first = client.call("send_receipt", receipt(4417), meta.clone());
    assert_eq!(key(&first), "receipt-4417");
    assert!(!replayed(&first));

    let reused = client.call("send_receipt", receipt(4418), meta);
    let told = result(&reused);
    assert_eq!(
        told["isError"], true,
        "a tool-level error the agent reads: {reused}"
    );
    assert_eq!(told["structuredContent"]["error"]["kind"], "mismatch");
    assert_eq!(told["structuredContent"]["error"]["retry_safe"], false);
    assert_eq!(key(&reused), "receipt-4417");
    server.close();
    assert_eq!(mailbox_count(&db), 1, "the mismatched call ran nothing");
}

#[test]
fn stateless_requests_carry_their_version_and_get_stamped_results() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let mut server = McpProcess::spawn(&db, &[], "warn");
    let client = &mut server.client;
    let envelope = |version: &str, extra: Value| {
        let mut meta = json!({
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": {},
        });
        meta.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        meta
    };

    let found = client.request(
        "server/discover",
        json!({ "_meta": envelope("2026-07-28", json!({})) }),
    );
    assert_eq!(result(&found)["supportedVersions"], json!(["2026-07-28"]));
    assert_eq!(result(&found)["resultType"], "complete");

    let call = |client: &mut crate::support::mcp::McpClient| {
        client.call(
            "send_receipt",
            receipt(1),
            envelope("2026-07-28", conversation("conv-s")),
        )
    };
    let first = call(client);
    assert_eq!(result(&first)["resultType"], "complete");
    assert_eq!(
        result(&first)["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "justonce"
    );
    assert!(!replayed(&first));
    let retry = call(client);
    assert!(replayed(&retry));
    assert_eq!(key(&retry), key(&first));

    let future = client.request(
        "tools/list",
        json!({ "_meta": envelope("2099-01-01", json!({})) }),
    );
    let (code, _) = error_of(&future);
    assert_eq!(code, -32022);
    assert_eq!(future["error"]["data"]["supported"], json!(["2026-07-28"]));
    assert_eq!(future["error"]["data"]["requested"], "2099-01-01");
    server.close();
    assert_eq!(mailbox_count(&db), 1);
}

#[test]
fn stdout_carries_only_protocol_messages_even_with_debug_logs() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = McpProcess::spawn(&dir.path().join("state.db"), &[], "debug");
    server.client.initialize(VERSION);
    server.client.call("send_receipt", receipt(3), json!({}));
    server.client.send_line("not json");
    // Every line the client read parsed as JSON (it fails the test otherwise).
    let (rest, code, log) = server.close();
    assert!(rest.iter().all(|m| m["jsonrpc"] == "2.0"), "{rest:?}");
    assert_eq!(code, Some(0));
    assert!(log.contains("initialize"), "the log went to stderr: {log}");
}

#[test]
fn a_request_line_over_the_cap_is_refused_without_buffering_and_the_server_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = McpProcess::spawn(&dir.path().join("state.db"), &[], "warn");
    let client = &mut server.client;
    client.initialize(VERSION);

    // One byte over the documented cap (4 MiB), then an ordinary request.
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(4 << 20)
    );
    client.send_line(&huge);
    let (code, message) = error_of(&client.next_message());
    assert_eq!(code, -32600);
    assert!(message.contains("exceeds 4194304 bytes"), "{message}");

    // The opposite: a line within the cap is answered, and so is the next request.
    let padded = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(1 << 20)
    );
    client.send_line(&padded);
    assert!(client.response(&json!(2)).get("error").is_none());
    let ping = client.request("ping", json!({}));
    assert!(ping.get("error").is_none(), "{ping}");
}

#[test]
fn sigterm_and_sigint_stop_serving_with_exit_0_and_what_was_answered_is_saved() {
    for signal in ["TERM", "INT"] {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("state.db");
        let mut server = McpProcess::spawn(&db, &[], "info");
        let client = &mut server.client;
        client.initialize(VERSION);
        let answered = client.call("send_receipt", receipt(4417), conversation("conv-sig"));
        assert!(!replayed(&answered));

        // The client stays connected: only the signal can end the process.
        let (code, log) = server.signal_and_wait(signal);
        assert_eq!(code, Some(0), "SIG{signal}: {log}");
        assert!(log.contains("stopping"), "SIG{signal}: {log}");
        assert_eq!(mailbox_count(&db), 1);
        assert_eq!(journal(&db).len(), 1, "the answered call is saved");
    }
}
