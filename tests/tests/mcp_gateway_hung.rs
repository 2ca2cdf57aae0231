//! An upstream that hangs does not hold up the host or another upstream's tools
//! (issue 53): `justonce serve` with two upstreams, the first in the file (`slow`)
//! held before it reads anything by a gate (a FIFO only the test opens), the second
//! the tests' own ledger server. While the gate is shut, `slow` provably answers
//! nothing, not even `initialize`; everything below is asserted then, by what is
//! answered, not by how long it took.

use std::path::Path;

use serde_json::{Value, json};

use crate::mcp_gateway::{needed, python};
use crate::support::mcp::{McpProcess, VERSION};

const LEDGER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/mcp/upstreams/ledger_server.py"
);

/// A FIFO the upstream `slow` reads before anything else; opened (and so its reader
/// let through) when dropped, whatever the test did.
struct Gate {
    path: std::path::PathBuf,
}

impl Gate {
    fn new(dir: &Path) -> Self {
        let path = dir.join("gate");
        let made = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .expect("run mkfifo");
        assert!(made.success(), "mkfifo {}", path.display());
        Self { path }
    }

    /// Lets the reader through: opening the FIFO for writing waits for its reader
    /// (the upstream got as far as the gate), and closing it is the reader's end of
    /// input.
    fn open(&self) {
        drop(
            std::fs::OpenOptions::new()
                .write(true)
                .open(&self.path)
                .expect("open the gate"),
        );
    }
}

impl Drop for Gate {
    /// Lets a reader that may be waiting through without waiting for one: a FIFO
    /// opened for reading and writing never blocks (Linux).
    fn drop(&mut self) {
        let _ = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&self.path);
    }
}

/// The states `tools/list` tells (`_meta["dev.justonce/upstreams"]`), and the names.
fn states_and_names(listed: &Value) -> (Value, Vec<String>) {
    let names = listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    (
        listed["result"]["_meta"]["dev.justonce/upstreams"].clone(),
        names,
    )
}

#[test]
fn a_hung_upstream_holds_up_neither_initialize_nor_another_upstreams_tools() {
    let Some(python) = needed("Python with the MCP SDK", &python()) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let gate = Gate::new(dir.path());
    let received = dir.path().join("slow.received.jsonl");
    // Held at the gate before it reads its input; then what it is sent is copied to
    // `received` on its way to a ledger server. Its timeout is far past the test
    // client's bound on a hang: a host that waited for it would answer nothing.
    let slow = format!(
        "cat '{gate}' > /dev/null; tee -a '{received}' | exec '{python}' '{LEDGER}' '{ledger}'",
        gate = gate.path.display(),
        received = received.display(),
        python = python.display(),
        ledger = dir.path().join("slow.ledger").display(),
    );
    std::fs::write(
        dir.path().join("justonce.toml"),
        format!(
            "[upstreams.slow]\ncommand = [\"sh\", \"-c\", {slow:?}]\nprefix = \"slow_\"\ntimeout_ms = 600000\n\n\
             [upstreams.ledger]\ncommand = [{python:?}, {LEDGER:?}, {ledger:?}]\n",
            python = python.display().to_string(),
            ledger = dir.path().join("ledger").display().to_string(),
        ),
    )
    .unwrap();
    let mut server = McpProcess::spawn(
        &dir.path().join("state.db"),
        &["--conversation", "conv-hung"],
        "warn",
    );

    // Answered with the gate shut.
    let initialized = server.client.initialize(VERSION);
    assert!(
        initialized["capabilities"]["tools"].is_object(),
        "{initialized}"
    );
    // The ledger's tools come once it is ready (told by list_changed); `slow`'s
    // are left out, and it is told as starting.
    let listed = loop {
        let listed = server.client.request("tools/list", json!({}));
        if states_and_names(&listed).0["ledger"]["state"] == "ready" {
            break listed;
        }
        server.client.wait_for_list_changed();
    };
    let (states, names) = states_and_names(&listed);
    assert_eq!(states["slow"], json!({ "state": "starting" }), "{listed}");
    assert!(names.contains(&"append".to_owned()), "{listed}");
    assert!(!names.iter().any(|n| n.starts_with("slow_")), "{listed}");

    // A call of the healthy upstream's tool goes through.
    let paid = server
        .client
        .call("append", json!({ "line": "paid 7" }), json!({}));
    assert_eq!(paid["result"]["isError"], false, "{paid}");
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap_or_default();
    assert_eq!(read("ledger"), "paid 7\n");

    // A call of the hung upstream's tool is refused at once, retry-safe, naming it.
    let refused = server
        .client
        .call("slow_append", json!({ "line": "refused 1" }), json!({}));
    let error = &refused["result"]["structuredContent"]["error"];
    assert_eq!(error["kind"], "not_performed", "{refused}");
    assert_eq!(error["retry_safe"], true, "{refused}");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("the upstream `slow` is starting"),
        "{message}"
    );
    // A name no upstream offers or may offer is still unknown.
    let unknown = server.client.call("nope", json!({}), json!({}));
    assert!(
        unknown["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("unknown tool `nope`")),
        "{unknown}"
    );

    // The gate opens: `slow` answers, its tools come with list_changed, and the
    // refused call was never sent to it (nothing but the handshake and the list).
    gate.open();
    let listed = server.client.wait_for_upstreams();
    let (_, names) = states_and_names(&listed);
    assert!(names.contains(&"slow_append".to_owned()), "{listed}");
    let sent: Vec<Value> = std::fs::read_to_string(&received)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert!(
        sent.iter().all(|m| m["method"] != "tools/call"),
        "nothing was sent: {sent:?}"
    );
    let later = server
        .client
        .call("slow_append", json!({ "line": "later 2" }), json!({}));
    assert_eq!(later["result"]["isError"], false, "{later}");
    assert_eq!(
        read("slow.ledger"),
        "later 2\n",
        "the refused call never ran"
    );
}

/// The ledger crashes (it exits after appending, before it answers) and its restart
/// is held at the gate: while it is down, a retry of a call it answered before is
/// replayed from the journal, and a new call of its tool is refused at once,
/// `not_performed`, naming it and what ended it, and never sent; once the gate
/// opens, its tools come back (told by list_changed) and the same call goes through.
#[test]
fn a_crashed_upstream_held_down_refuses_new_calls_at_once_and_replays_answered_ones() {
    let Some(python) = needed("Python with the MCP SDK", &python()) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let gate = Gate::new(dir.path());
    let ledger = dir.path().join("ledger");
    // Its first start runs at once; every later one waits at the gate.
    let script = format!(
        "if [ -e '{started}' ]; then cat '{gate}' > /dev/null; fi; touch '{started}'; exec '{python}' '{LEDGER}' '{ledger}'",
        started = dir.path().join("started").display(),
        gate = gate.path.display(),
        python = python.display(),
        ledger = ledger.display(),
    );
    std::fs::write(
        dir.path().join("justonce.toml"),
        format!(
            "[upstreams.ledger]\ncommand = [\"sh\", \"-c\", {script:?}]\ntimeout_ms = 600000\n"
        ),
    )
    .unwrap();
    let mut server = McpProcess::spawn(
        &dir.path().join("state.db"),
        &["--conversation", "conv-held"],
        "warn",
    );
    server.client.initialize(VERSION);
    server.client.wait_for_upstreams();
    let first = server
        .client
        .call("append", json!({ "line": "a" }), json!({}));
    assert_eq!(first["result"]["isError"], false, "{first}");
    let crashed = server.client.call(
        "append",
        json!({ "line": "b", "lose_first": true }),
        json!({}),
    );
    assert_eq!(
        crashed["result"]["structuredContent"]["error"]["kind"], "outcome_unknown",
        "{crashed}"
    );

    // Down, its restart held at the gate.
    let again = server
        .client
        .call("append", json!({ "line": "a" }), json!({}));
    assert_eq!(
        again["result"]["_meta"]["dev.justonce/replayed"], true,
        "answered from the journal: {again}"
    );
    let refused = server
        .client
        .call("append", json!({ "line": "c" }), json!({}));
    let error = &refused["result"]["structuredContent"]["error"];
    assert_eq!(error["kind"], "not_performed", "{refused}");
    assert_eq!(error["retry_safe"], true, "{refused}");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("the upstream `ledger` is") && message.contains("its output closed"),
        "{message}"
    );
    let listed = server.client.request("tools/list", json!({}));
    assert_eq!(
        listed["result"]["_meta"]["dev.justonce/upstreams"]["ledger"]["state"], "failing",
        "{listed}"
    );
    let calls = |ledger: &Path| std::fs::read_to_string(ledger.with_extension("calls")).unwrap();
    assert!(!calls(&ledger).contains("\"c\""), "never sent");

    gate.open();
    server.client.wait_for_upstreams();
    let through = server
        .client
        .call("append", json!({ "line": "c" }), json!({}));
    assert_eq!(through["result"]["isError"], false, "{through}");
    assert_eq!(std::fs::read_to_string(&ledger).unwrap(), "a\nb\nc\n");
    assert_eq!(calls(&ledger).matches("\"c\"").count(), 1, "sent once");
}
