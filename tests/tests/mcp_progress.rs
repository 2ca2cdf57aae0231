//! Progress: a call that carries `_meta.progressToken` hears the tool's progress
//! reports as `notifications/progress` before its answer, over stdio and over HTTP
//! (as events of the answer's stream); a report that does not increase is dropped;
//! a call without a token, or replayed (its tool does not run), hears none.

use std::sync::Arc;

use justonce::__private::{HttpOptions, ServerConfig};
use serde_json::{Value, json};

use crate::support::mcp::{VERSION, replayed, result, serve_in_process};
use crate::support::mcp_http::HttpFixture;
use crate::support::test_host;

/// The tool of the "conformance_progress" test guest.
const TOOL: &str = "test_tool_with_progress";

fn host() -> Arc<justonce::Host> {
    Arc::new(test_host(|b| b).host)
}

/// The notifications `test_tool_with_progress` sends to `token`: 0, 50 and 100 of
/// 100 (its second report of 50 dropped).
fn reports(token: Value) -> Vec<Value> {
    let note = |params: Value| json!({ "jsonrpc": "2.0", "method": "notifications/progress", "params": params });
    vec![
        note(json!({ "progressToken": token, "progress": 0.0, "total": 100.0 })),
        note(
            json!({ "progressToken": token, "progress": 50.0, "total": 100.0, "message": "halfway" }),
        ),
        note(json!({ "progressToken": token, "progress": 100.0, "total": 100.0 })),
    ]
}

#[test]
fn over_stdio_progress_reports_reach_the_token_before_the_answer() {
    let (mut client, _server) = serve_in_process(host(), ServerConfig::default());
    client.initialize(VERSION);
    // No token: no report (a first call, so the tool runs).
    let quiet = client.call(
        TOOL,
        json!({}),
        json!({ "dev.justonce/conversation": "c-1" }),
    );
    assert!(!replayed(&quiet));

    let meta = json!({ "progressToken": 7, "dev.justonce/conversation": "c-2" });
    let heard = client.call(TOOL, json!({}), meta.clone());
    assert_eq!(result(&heard)["content"][0]["text"], "Reported progress.");
    // Written before the answer: the client held them.
    let held: Vec<Value> = (0..3).map(|_| client.next_message()).collect();
    assert_eq!(held, reports(json!(7)));

    // A replay runs nothing, so reports nothing.
    let again = client.call(TOOL, json!({}), meta);
    assert!(replayed(&again));
    let rest = client.close();
    assert!(
        rest.iter().all(|m| m.get("method").is_none()),
        "no other notification: {rest:?}"
    );
}

#[test]
fn over_http_progress_reports_are_events_of_the_answers_stream() {
    let http = HttpFixture::start(host(), HttpOptions::default(), &["alice"]);
    let mut alice = http.client("alice");
    assert_eq!(alice.initialize("2025-11-25").status, 200);
    let reply = alice.request(
        "tools/call",
        json!({ "name": TOOL, "arguments": {}, "_meta": { "progressToken": "p-1" } }),
    );
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-type"), Some("text/event-stream"));
    let events: Vec<Value> = reply
        .body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(events.len(), 4, "{events:?}");
    assert_eq!(events[..3], reports(json!("p-1"))[..]);
    assert_eq!(
        events[3]["result"]["content"][0]["text"],
        "Reported progress."
    );

    let bad = alice.request(
        "tools/call",
        json!({ "name": TOOL, "arguments": {}, "_meta": { "progressToken": [1] } }),
    );
    assert_eq!(bad.message()["error"]["code"], -32602, "{bad:?}");
}
