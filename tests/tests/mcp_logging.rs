//! `logging/setLevel`: a tool's log lines reach the client as
//! `notifications/message` before the call's answer, at the level the client set
//! and more severe, over stdio and over HTTP (as events of the answer's stream);
//! none before the client sets a level, none below it, and none for a replay (the
//! tool does not run again).

use std::sync::Arc;

use justonce::__private::{HttpOptions, ServerConfig};
use serde_json::{Value, json};

use crate::support::mcp::{VERSION, replayed, result, serve_in_process};
use crate::support::mcp_http::HttpFixture;
use crate::support::{FakePayments, Fault, test_host};

fn host() -> Arc<justonce::Host> {
    Arc::new(test_host(|b| b.provider("payments", Arc::new(FakePayments::new(Fault::None)))).host)
}

fn note(message: &str) -> Value {
    json!({
        "jsonrpc": "2.0",
        "method": "notifications/message",
        "params": { "level": "info", "logger": "echo", "data": message },
    })
}

#[test]
fn over_stdio_a_tools_log_lines_come_before_its_answer_at_the_level_set() {
    let (mut client, _server) = serve_in_process(host(), ServerConfig::default());
    let init = client.initialize(VERSION);
    assert_eq!(init["capabilities"]["logging"], json!({}), "{init}");
    let echo = |client: &mut crate::support::mcp::McpClient, message: &str| {
        client.call("echo", json!({ "message": message }), json!({}))
    };

    // No level set: nothing but the answer.
    let quiet = echo(&mut client, "unset");
    assert_eq!(result(&quiet)["structuredContent"]["echo"], "unset");

    let set = client.request("logging/setLevel", json!({ "level": "info" }));
    assert_eq!(set["result"], json!({}), "{set}");
    let loud = echo(&mut client, "heard");
    assert_eq!(result(&loud)["structuredContent"]["echo"], "heard");
    // The line was written before the answer: the client held it.
    assert_eq!(client.next_message(), note("heard"));

    // A replay runs nothing, so logs nothing.
    let again = echo(&mut client, "heard");
    assert!(replayed(&again));

    // Above the tool's level: silence again.
    let set = client.request("logging/setLevel", json!({ "level": "warning" }));
    assert_eq!(set["result"], json!({}));
    echo(&mut client, "too quiet");
    let bad = client.request("logging/setLevel", json!({ "level": "loud" }));
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    let rest = client.close();
    assert!(
        rest.iter().all(|m| m.get("method").is_none()),
        "no other notification: {rest:?}"
    );
}

#[test]
fn over_http_a_sessions_level_sends_the_lines_as_events_before_the_answer() {
    let http = HttpFixture::start(host(), HttpOptions::default(), &["alice"]);
    let mut alice = http.client("alice");
    assert_eq!(alice.initialize("2025-11-25").status, 200);
    let call = |alice: &mut crate::support::mcp_http::HttpClient, message: &str| {
        alice.request(
            "tools/call",
            json!({ "name": "echo", "arguments": { "message": message } }),
        )
    };
    let plain = call(&mut alice, "unset");
    assert_eq!(plain.header("content-type"), Some("application/json"));

    let set = alice.request("logging/setLevel", json!({ "level": "debug" }));
    assert_eq!(set.message()["result"], json!({}), "{set:?}");
    let logged = call(&mut alice, "heard");
    assert_eq!(logged.status, 200);
    assert_eq!(logged.header("content-type"), Some("text/event-stream"));
    let events: Vec<Value> = logged
        .body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0], note("heard"));
    assert_eq!(events[1]["result"]["structuredContent"]["echo"], "heard");

    // Another session of the same principal has no level of its own set.
    let mut other = http.client("alice");
    assert_eq!(other.initialize("2025-11-25").status, 200);
    let unset = call(&mut other, "elsewhere");
    assert_eq!(unset.header("content-type"), Some("application/json"));
}
