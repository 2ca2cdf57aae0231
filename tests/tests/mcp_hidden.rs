//! A tool kept from MCP (`[tools.NAME] mcp = false`): `serve` neither lists it nor
//! runs it, on stdio and on HTTP, and answers a call of it as of an unknown tool;
//! the library still calls it.

use std::sync::Arc;

use justonce::__private::{HttpOptions, ServerConfig};
use justonce::{CallRequest, Host};
use serde_json::{Value, json};

use crate::support::mcp::{VERSION, serve_in_process};
use crate::support::mcp_http::HttpFixture;
use crate::support::{receipt_args, test_host};

/// A host whose `send_receipt` is kept from MCP.
fn host() -> Arc<Host> {
    Arc::new(test_host(|b| b.hide_from_mcp("send_receipt")).host)
}

fn names(list: &Value) -> Vec<String> {
    list["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {list}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

fn receipt() -> Value {
    serde_json::from_str(&receipt_args(1, "ada@example.com")).unwrap()
}

/// The error of a call of the hidden tool is the unknown tool's, naming only the
/// tools MCP offers.
fn assert_unknown(error: &Value, offered: &[String]) {
    assert_eq!(error["code"], -32602, "{error}");
    assert_eq!(error["data"]["error"]["kind"], "unknown_tool", "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("unknown tool `send_receipt`"), "{message}");
    let listed = message.rsplit("loaded tools: ").next().unwrap();
    assert!(!listed.contains("send_receipt"), "{message}");
    assert!(listed.contains(&offered[0]), "{message}");
}

#[test]
fn a_tool_kept_from_mcp_is_not_listed_nor_run_over_stdio_and_the_library_still_calls_it() {
    let host = host();
    let (mut client, _server) = serve_in_process(host.clone(), ServerConfig::default());
    client.initialize(VERSION);
    let listed = names(&client.request("tools/list", json!({}))["result"]);
    assert!(!listed.is_empty(), "the other tools are offered");
    assert!(!listed.contains(&"send_receipt".to_owned()), "{listed:?}");

    let refused = client.call("send_receipt", receipt(), json!({}));
    assert_unknown(&refused["error"], &listed);
    assert!(host.journal(None, 10).unwrap().is_empty(), "nothing ran");

    let called = host
        .call(&CallRequest::new(
            "send_receipt",
            receipt_args(1, "ada@example.com"),
        ))
        .unwrap();
    assert!(called.outcome.is_success(), "{:?}", called.outcome);
}

#[test]
fn a_tool_kept_from_mcp_is_not_listed_nor_run_over_http_in_either_era() {
    let host = host();
    let http = HttpFixture::start(host.clone(), HttpOptions::default(), &["alice"]);
    let mut session = http.client("alice");
    session.initialize(VERSION);
    let listed = names(&session.request("tools/list", json!({})).message()["result"]);
    assert!(!listed.is_empty());
    assert!(!listed.contains(&"send_receipt".to_owned()), "{listed:?}");
    let refused = session
        .request(
            "tools/call",
            json!({ "name": "send_receipt", "arguments": receipt() }),
        )
        .message();
    assert_unknown(&refused["error"], &listed);

    let mut stateless = http.client("alice");
    let modern = names(&stateless.stateless("tools/list", json!({})).message()["result"]);
    assert_eq!(modern, listed);
    let refused = stateless.call("send_receipt", receipt(), json!({}));
    assert_eq!(refused.status, 400, "an unknown tool's status");
    assert_unknown(&refused.message()["error"], &listed);
    assert!(host.journal(None, 10).unwrap().is_empty(), "nothing ran");
}
