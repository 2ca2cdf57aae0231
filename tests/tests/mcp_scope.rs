//! Where a call's conversation (and an explicit key) may come from over MCP: `_meta`,
//! the `Justonce-Conversation` and `Idempotency-Key` headers, the server's default;
//! two that disagree are refused; and a server that refuses calls naming none
//! (`[mcp] unscoped = "refuse"`) says how to name one. Each with the case that must
//! pass beside it.

use std::net::TcpListener;
use std::sync::Arc;

use justonce::__private::tokens::{self, Tokens};
use justonce::__private::{HttpOptions, Running, Server, ServerConfig, http_server};
use justonce::{Host, Unscoped};
use serde_json::{Value, json};

use crate::support::mcp::{McpProcess, VERSION, key, replayed, serve_in_process};
use crate::support::mcp_http::{HttpClient, MODERN, Reply};
use crate::support::{FakePayments, Fault, invocation_count, test_host};

fn refund(order: u64) -> Value {
    json!({ "order_id": order, "amount_cents": 500 })
}

/// A server for `host` with `config`, and a client calling as alice.
fn serve(host: Arc<Host>, config: ServerConfig) -> (Running, HttpClient, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens.json");
    let token = tokens::add(&file, "alice").unwrap();
    let running = http_server(
        Server::new(host, config),
        Tokens::open(&file).unwrap(),
        HttpOptions::default(),
    )
    .spawn(TcpListener::bind("127.0.0.1:0").unwrap())
    .unwrap();
    let client = HttpClient::new(running.addr(), Some(token));
    (running, client, dir)
}

/// A stateless `tools/call` with `extra` params and `headers` besides the routing ones.
fn call(client: &mut HttpClient, order: u64, extra: Value, headers: &[(&str, &str)]) -> Reply {
    let mut params = json!({ "name": "payments_refund", "arguments": refund(order) });
    params
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().cloned().unwrap_or_default());
    params["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!(MODERN);
    params["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({});
    let message = client.message("tools/call", params);
    let mut all = vec![
        ("MCP-Protocol-Version", MODERN),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "payments_refund"),
    ];
    all.extend_from_slice(headers);
    client.post(&message, &all)
}

fn meta(result: &Value, key: &str) -> Value {
    result["_meta"][format!("dev.justonce/{key}")].clone()
}

#[test]
fn the_conversation_header_scopes_a_call_as_the_meta_does_and_a_conflict_runs_nothing() {
    let payments = Arc::new(FakePayments::new(Fault::None));
    let host = Arc::new(test_host(|b| b.provider("payments", payments.clone())).host);
    let (_running, mut client, _dir) = serve(host.clone(), ServerConfig::default());

    let by_header = call(
        &mut client,
        1,
        json!({}),
        &[("Justonce-Conversation", "run-7")],
    )
    .tool_result();
    assert_eq!(meta(&by_header, "replayed"), false);
    let by_meta = call(
        &mut client,
        1,
        json!({ "_meta": { "dev.justonce/conversation": "run-7" } }),
        &[],
    )
    .tool_result();
    assert_eq!(
        meta(&by_meta, "replayed"),
        true,
        "the header and the _meta name one conversation"
    );
    assert_eq!(meta(&by_meta, "key"), meta(&by_header, "key"));
    assert_eq!(payments.applied().len(), 1);
    let journal = host.journal(None, 10).unwrap();
    assert_eq!(
        journal[0].conversation, r#"["alice","run-7"]"#,
        "the principal still scopes it"
    );

    // The opposite case: another conversation is another call.
    let other = call(
        &mut client,
        1,
        json!({}),
        &[("Justonce-Conversation", "run-8")],
    )
    .tool_result();
    assert_eq!(meta(&other, "replayed"), false);
    assert_eq!(payments.applied().len(), 2);

    // Two places naming two conversations: refused, nothing run or journaled.
    let before = invocation_count(&host);
    let conflict = call(
        &mut client,
        2,
        json!({ "_meta": { "dev.justonce/conversation": "run-9" } }),
        &[("Justonce-Conversation", "run-7")],
    );
    let error = &conflict.message()["error"];
    assert_eq!(error["code"], -32602, "{conflict:?}");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("different conversations") && message.contains("nothing ran"),
        "{message}"
    );
    assert_eq!(invocation_count(&host), before);
    assert_eq!(payments.applied().len(), 2);
}

#[test]
fn an_idempotency_key_header_is_the_key_param_and_a_different_one_is_refused() {
    let payments = Arc::new(FakePayments::new(Fault::None));
    let host = Arc::new(test_host(|b| b.provider("payments", payments.clone())).host);
    let (_running, mut client, _dir) = serve(host.clone(), ServerConfig::default());

    // The IETF draft's quoted form, then the bare one, then the parameter: one key.
    let quoted = call(
        &mut client,
        3,
        json!({}),
        &[("Idempotency-Key", "\"refund-3\"")],
    )
    .tool_result();
    let bare = call(
        &mut client,
        3,
        json!({}),
        &[("Idempotency-Key", "refund-3")],
    )
    .tool_result();
    let param = call(&mut client, 3, json!({ "idempotencyKey": "refund-3" }), &[]).tool_result();
    assert_eq!(meta(&quoted, "replayed"), false);
    assert_eq!(
        (meta(&bare, "replayed"), meta(&param, "replayed")),
        (json!(true), json!(true))
    );
    assert_eq!(meta(&bare, "key"), meta(&quoted, "key"));
    assert_eq!(meta(&param, "key"), meta(&quoted, "key"));
    assert_eq!(payments.applied().len(), 1);

    let conflict = call(
        &mut client,
        3,
        json!({ "idempotencyKey": "refund-3" }),
        &[("Idempotency-Key", "refund-4")],
    );
    assert_eq!(conflict.message()["error"]["code"], -32602);
    // The opposite case: a new key is a new call.
    let new = call(
        &mut client,
        3,
        json!({}),
        &[("Idempotency-Key", "refund-4")],
    )
    .tool_result();
    assert_eq!(meta(&new, "replayed"), false);
    assert_eq!(payments.applied().len(), 2);
}

#[test]
fn a_server_refusing_unscoped_calls_names_the_header_glue_and_runs_a_scoped_one() {
    let payments = Arc::new(FakePayments::new(Fault::None));
    let host = Arc::new(test_host(|b| b.provider("payments", payments.clone())).host);
    let config = ServerConfig {
        unscoped: Unscoped::Refuse,
        ..ServerConfig::default()
    };
    let (_running, mut client, _dir) = serve(host.clone(), config);

    let refused = call(&mut client, 5, json!({}), &[]);
    let error = &refused.message()["error"];
    assert_eq!(error["code"], -32602, "{refused:?}");
    assert_eq!(error["data"]["kind"], "unscoped");
    let message = error["message"].as_str().unwrap();
    for glue in [
        "Justonce-Conversation",
        "MCPToolset(url, headers=",
        "MCPServerStreamableHttp(params=",
        "MultiServerMCPClient(",
    ] {
        assert!(message.contains(glue), "lacks {glue}: {message}");
    }
    assert_eq!(invocation_count(&host), 0, "nothing was journaled");
    assert!(payments.attempts().is_empty(), "nothing ran");

    // The opposite cases: a conversation in the header, or an explicit key, runs.
    call(
        &mut client,
        5,
        json!({}),
        &[("Justonce-Conversation", "run-1")],
    )
    .tool_result();
    call(&mut client, 6, json!({ "idempotencyKey": "k-6" }), &[]).tool_result();
    assert_eq!(payments.applied().len(), 2);
}

#[test]
fn serve_refuses_unscoped_calls_on_stdio_as_its_configuration_says() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    std::fs::write(
        dir.path().join("justonce.toml"),
        "[mcp]\nunscoped = \"refuse\"\n",
    )
    .unwrap();
    let mut server = McpProcess::spawn(&db, &[], "warn");
    server.client.initialize(VERSION);
    let args =
        json!({ "orders": [{ "order_id": 1, "email": "a@example.com", "amount_cents": 100 }] });
    let refused = server.client.call("send_receipt", args.clone(), json!({}));
    let message = refused["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("{refused}"));
    for glue in ["process_tool_call", "tool_meta_resolver", "--conversation"] {
        assert!(message.contains(glue), "lacks {glue}: {message}");
    }
    // The opposite case: the same call in a conversation runs.
    let ran = server.client.call(
        "send_receipt",
        args,
        json!({ "dev.justonce/conversation": "run-1" }),
    );
    assert_eq!(ran["result"]["isError"], false, "{ran}");
    let (_, code, log) = server.close();
    assert_eq!(code, Some(0), "{log}");

    // `serve --unscoped window` overrides the file.
    let mut server = McpProcess::spawn(&db, &["--unscoped", "window"], "warn");
    server.client.initialize(VERSION);
    let args =
        json!({ "orders": [{ "order_id": 2, "email": "a@example.com", "amount_cents": 100 }] });
    let ran = server.client.call("send_receipt", args, json!({}));
    assert_eq!(ran["result"]["isError"], false, "{ran}");
    server.close();
}

/// `[mcp] unscoped = "session"` over Streamable HTTP: a call that names no
/// conversation runs in its `Mcp-Session-Id`'s, so the retry on the session is
/// replayed (the same key, one refund) and the same call on another session runs.
#[test]
fn a_server_scoping_unscoped_calls_by_session_replays_a_retry_on_the_session_and_runs_another_sessions_call()
 {
    let payments = Arc::new(FakePayments::new(Fault::None));
    let host = Arc::new(test_host(|b| b.provider("payments", payments.clone())).host);
    let config = ServerConfig {
        unscoped: Unscoped::Session,
        ..ServerConfig::default()
    };
    let (_running, mut first, _dir) = serve(host.clone(), config);
    assert_eq!(
        first.initialize(VERSION).message()["result"]["protocolVersion"],
        VERSION
    );
    let session = |client: &mut HttpClient| {
        let reply = client.request(
            "tools/call",
            json!({ "name": "payments_refund", "arguments": refund(3) }),
        );
        reply.message()["result"].clone()
    };
    let ran = session(&mut first);
    assert_eq!(meta(&ran, "replayed"), false, "{ran}");
    let retry = session(&mut first);
    assert_eq!(meta(&retry, "replayed"), true, "{retry}");
    assert_eq!(meta(&retry, "key"), meta(&ran, "key"));
    assert_eq!(payments.applied().len(), 1, "one refund for the retry");
    assert_eq!(
        payments.attempts().len(),
        1,
        "the retry reached nobody downstream"
    );
    let journal = host.journal(None, 10).unwrap();
    let scope = &journal[0].conversation;
    assert!(
        scope.contains("mcp-session:") && !scope.contains(first.session.as_deref().unwrap()),
        "scoped by a digest of the session, not the session id itself: {scope}"
    );

    // The opposite case: the same call on another session of the same principal is
    // another call.
    let mut other = first.clone();
    other.session = None;
    other.initialize(VERSION);
    assert!(other.session.is_some() && other.session != first.session);
    let again = session(&mut other);
    assert_eq!(meta(&again, "replayed"), false, "{again}");
    assert_ne!(meta(&again, "key"), meta(&ran, "key"));
    assert_eq!(payments.applied().len(), 2);
}

/// On stdio the connection is the session, from its `initialize`: a retry on it is
/// replayed, and after a second `initialize` (a client starting over) the same call
/// runs again.
#[test]
fn on_stdio_unscoped_calls_by_session_are_one_call_per_connection() {
    let payments = Arc::new(FakePayments::new(Fault::None));
    let host = Arc::new(test_host(|b| b.provider("payments", payments.clone())).host);
    let config = ServerConfig {
        unscoped: Unscoped::Session,
        ..ServerConfig::default()
    };
    let (mut client, _server) = serve_in_process(host, config);
    client.initialize(VERSION);
    let ran = client.call("payments_refund", refund(4), json!({}));
    let retry = client.call("payments_refund", refund(4), json!({}));
    assert!(!replayed(&ran) && replayed(&retry), "{ran} {retry}");
    assert_eq!(key(&retry), key(&ran));
    assert_eq!(payments.applied().len(), 1);

    client.initialize(VERSION);
    let anew = client.call("payments_refund", refund(4), json!({}));
    assert!(!replayed(&anew), "a new connection is a new scope: {anew}");
    assert_ne!(key(&anew), key(&ran));
    assert_eq!(payments.applied().len(), 2);
}

/// `[mcp] unscoped = "session"` and a client of the stateless revision (no
/// `Mcp-Session-Id`, no `initialize`: pydantic-ai and the Agents SDK with mcp 2.3):
/// the call naming no conversation is refused with the fix, never silently given the
/// short window; named, it runs; and `"session-or-window"`, the operator's explicit
/// fallback, runs it in the window.
#[test]
fn a_server_scoping_by_session_refuses_a_stateless_clients_unscoped_call_unless_told_to_fall_back()
{
    let payments = Arc::new(FakePayments::new(Fault::None));
    let host = Arc::new(test_host(|b| b.provider("payments", payments.clone())).host);
    let config = ServerConfig {
        unscoped: Unscoped::Session,
        ..ServerConfig::default()
    };
    let (_running, mut client, _dir) = serve(host.clone(), config);

    let refused = call(&mut client, 7, json!({}), &[]);
    let error = &refused.message()["error"];
    assert_eq!(error["code"], -32602, "{refused:?}");
    assert_eq!(error["data"]["kind"], "no_session");
    let message = error["message"].as_str().unwrap();
    for fix in [
        "stateless revision and has no session",
        "Justonce-Conversation",
        "unscoped = \"window\"",
        "session-or-window",
    ] {
        assert!(message.contains(fix), "lacks {fix}: {message}");
    }
    assert_eq!(invocation_count(&host), 0, "nothing was journaled");
    assert!(payments.attempts().is_empty(), "nothing ran");

    // The opposite case: named, the stateless call runs.
    call(
        &mut client,
        7,
        json!({}),
        &[("Justonce-Conversation", "run-7")],
    )
    .tool_result();
    assert_eq!(payments.applied().len(), 1);

    // The operator's fallback: the same unscoped call runs in the window, and its
    // retry in the window is replayed.
    let config = ServerConfig {
        unscoped: Unscoped::SessionOrWindow,
        ..ServerConfig::default()
    };
    let (_running, mut client, _dir) = serve(host.clone(), config);
    let ran = call(&mut client, 8, json!({}), &[]).tool_result();
    let retry = call(&mut client, 8, json!({}), &[]).tool_result();
    assert_eq!(meta(&ran, "replayed"), false, "{ran}");
    assert_eq!(meta(&retry, "replayed"), true, "{retry}");
    assert_eq!(meta(&retry, "key"), meta(&ran, "key"));
    assert_eq!(payments.applied().len(), 2);
}

/// A replay's note says "in this conversation" only when the call named one: a call
/// scoped by the unscoped window is told it was made earlier with these arguments.
#[test]
fn a_replays_note_speaks_of_a_conversation_only_when_one_was_named() {
    let payments = Arc::new(FakePayments::new(Fault::None));
    let host = Arc::new(test_host(|b| b.provider("payments", payments.clone())).host);
    let (_running, mut client, _dir) = serve(host, ServerConfig::default());
    let note = |result: &Value| {
        result["content"]
            .as_array()
            .unwrap()
            .iter()
            .find_map(|item| item["resource"]["text"].as_str().map(str::to_owned))
            .unwrap_or_else(|| panic!("no note: {result}"))
    };

    call(&mut client, 9, json!({}), &[]).tool_result();
    let unnamed = call(&mut client, 9, json!({}), &[]).tool_result();
    assert_eq!(meta(&unnamed, "replayed"), true, "{unnamed}");
    let told = note(&unnamed);
    assert!(
        told.contains("already made earlier with these arguments")
            && !told.contains("conversation"),
        "{told}"
    );

    // The opposite case: named, the note says so.
    let named = [("Justonce-Conversation", "run-9")];
    call(&mut client, 9, json!({}), &named).tool_result();
    let replayed = call(&mut client, 9, json!({}), &named).tool_result();
    assert_eq!(meta(&replayed, "replayed"), true, "{replayed}");
    assert!(
        note(&replayed).contains("earlier in this conversation"),
        "{replayed}"
    );
    assert_eq!(payments.applied().len(), 2, "one refund per scope");
}
