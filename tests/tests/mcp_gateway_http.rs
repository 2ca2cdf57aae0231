//! Upstreams over Streamable HTTP as they come and go (issue 53): one down when
//! `serve` starts is picked up when it comes up, its tools told to the client with
//! `list_changed`; a session the server forgot (it restarted) is started again and
//! the call goes through, sent once; and what the server says between requests
//! (`notifications/tools/list_changed`) is heard on its `GET` stream. The server is
//! the tests' own ledger on the official Python SDK, its calls logged by itself.

use std::path::Path;

use serde_json::{Value, json};

use crate::mcp_gateway::{HttpUpstream, free_port, needed, python};
use crate::support::mcp::{McpProcess, VERSION};

const LEDGER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/mcp/upstreams/ledger_server.py"
);

/// `serve` in `dir` with the one upstream `ledger` at `url`.
fn serve(dir: &Path, url: &str) -> McpProcess {
    std::fs::write(
        dir.join("justonce.toml"),
        format!("[upstreams.ledger]\nurl = {url:?}\n"),
    )
    .unwrap();
    let mut server = McpProcess::spawn(
        &dir.join("state.db"),
        &["--conversation", "conv-http"],
        "warn",
    );
    server.client.initialize(VERSION);
    server
}

/// The names `tools/list` offers.
fn names(listed: &Value) -> Vec<String> {
    listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// `tools/list` once it offers `name`, waiting for `list_changed` between.
fn listed_with(server: &mut McpProcess, name: &str) -> Value {
    loop {
        let listed = server.client.request("tools/list", json!({}));
        if names(&listed).iter().any(|n| n == name) {
            return listed;
        }
        server.client.wait_for_list_changed();
    }
}

/// The lines of the ledger at `ledger`, and the `append`s its server logged.
fn ledger_state(ledger: &Path) -> (Vec<String>, Vec<Value>) {
    let read = |suffix: &str| {
        std::fs::read_to_string(format!("{}{suffix}", ledger.display())).unwrap_or_default()
    };
    let lines = read("").lines().map(str::to_owned).collect();
    let calls = read(".calls")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (lines, calls)
}

#[test]
fn an_http_upstream_down_when_serve_starts_is_picked_up_when_it_comes_up() {
    let Some(python) = needed("Python with the MCP SDK", &python()) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut server = serve(dir.path(), &format!("http://127.0.0.1:{port}/mcp"));
    let listed = server.client.request("tools/list", json!({}));
    let state = &listed["result"]["_meta"]["dev.justonce/upstreams"]["ledger"]["state"];
    assert_ne!(state, "ready", "nothing listens yet: {listed}");
    assert!(!names(&listed).contains(&"append".to_owned()), "{listed}");

    let ledger = dir.path().join("ledger");
    let _http = HttpUpstream::start_on(
        &python,
        &[LEDGER.as_ref(), ledger.as_os_str(), "http".as_ref()],
        port,
    );
    // Told by list_changed, not found by asking again and again.
    let listed = listed_with(&mut server, "append");
    assert_eq!(
        listed["result"]["_meta"]["dev.justonce/upstreams"]["ledger"],
        json!({ "state": "ready" }),
        "{listed}"
    );
    let paid = server
        .client
        .call("append", json!({ "line": "late 1" }), json!({}));
    assert_eq!(paid["result"]["isError"], false, "{paid}");
    assert_eq!(ledger_state(&ledger).0, ["late 1"]);
}

#[test]
fn a_session_the_server_forgot_is_started_again_and_the_call_is_sent_once() {
    let Some(python) = needed("Python with the MCP SDK", &python()) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger");
    // Without a GET stream: the lost session is found by the call itself.
    let mut http = HttpUpstream::start(
        &python,
        &[
            LEDGER.as_ref(),
            ledger.as_os_str(),
            "http-without-stream".as_ref(),
        ],
    );
    let mut server = serve(dir.path(), &http.url);
    server.client.wait_for_upstreams();
    let first = server
        .client
        .call("append", json!({ "line": "before" }), json!({}));
    assert_eq!(first["result"]["isError"], false, "{first}");

    // The server restarts: the session the host holds answers 404.
    http.restart();
    // `append` is not safe to send twice (no idempotentHint, no key dedup): it goes
    // through only because the 404 said the first send was not processed.
    let after = server
        .client
        .call("append", json!({ "line": "after" }), json!({}));
    assert_eq!(after["result"]["isError"], false, "{after}");
    assert_ne!(
        after["result"]["_meta"]["dev.justonce/replayed"], true,
        "{after}"
    );
    let (lines, calls) = ledger_state(&ledger);
    assert_eq!(lines, ["before", "after"]);
    let afters = calls.iter().filter(|c| c["line"] == "after").count();
    assert_eq!(afters, 1, "performed once: {calls:?}");
    // The opposite: another call on the new session goes straight through.
    let again = server
        .client
        .call("append", json!({ "line": "again" }), json!({}));
    assert_eq!(again["result"]["isError"], false, "{again}");
    assert_eq!(ledger_state(&ledger).0, ["before", "after", "again"]);
}

#[test]
fn an_http_upstreams_list_changed_is_heard_on_its_get_stream() {
    let Some(python) = needed("Python with the MCP SDK", &python()) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger");
    let http = HttpUpstream::start(
        &python,
        &[LEDGER.as_ref(), ledger.as_os_str(), "http".as_ref()],
    );
    let mut server = serve(dir.path(), &http.url);
    let listed = server.client.wait_for_upstreams();
    assert!(!names(&listed).contains(&"grown".to_owned()), "{listed}");
    // `grow` adds the tool and says so on the server's own stream, not in the
    // call's answer.
    let grown = server
        .client
        .call("grow", json!({ "name": "grown" }), json!({}));
    assert_eq!(grown["result"]["isError"], false, "{grown}");
    listed_with(&mut server, "grown");
    let called = server.client.call("grown", json!({}), json!({}));
    assert_eq!(called["result"]["isError"], false, "{called}");
    assert_eq!(called["result"]["content"][0]["text"], "grown", "{called}");
}
