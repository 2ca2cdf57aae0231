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

    /// Lets the reader through: a FIFO opened for reading and writing never blocks
    /// (Linux), and closing it is the reader's end of input.
    fn open(&self) {
        drop(
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&self.path)
                .expect("open the gate"),
        );
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.open();
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
