//! justonce in front of MCP servers no one here wrote (`[upstreams.NAME]`): the
//! official `@modelcontextprotocol/server-memory` and `server-everything` (npm, pinned
//! in tests/mcp/upstreams/) and a server of the tests' own on the official Python SDK's
//! MCPServer (tests/mcp/upstreams/ledger_server.py) whose side effect can lose its
//! first answer. Each is driven through `justonce serve` over stdio; what the upstream
//! received is read from its own input (server-memory runs behind `tee`) or its own
//! log of calls (the ledger), so "sent once" and "the same key downstream" are the
//! upstream's word, not ours.
//!
//! A host killed with a call out is shown on PostgreSQL, another host finishing it.
//!
//! server-memory is installed under `target/` by `.ci/run` (`$JUSTONCE_MCP_UPSTREAMS`)
//! or here with `npm ci` on first use; the ledger needs the Python of
//! `$JUSTONCE_MCP_PYTHON`. Without them the tests skip with a message, and fail under
//! `CI=true`.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use serde_json::{Value, json};

use crate::support::install;
use crate::support::mcp::{McpProcess, VERSION};

const UPSTREAMS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/mcp/upstreams");
const LEDGER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/mcp/upstreams/ledger_server.py"
);

static MEMORY: LazyLock<Result<PathBuf, String>> = LazyLock::new(|| installed("server-memory"));

static EVERYTHING: LazyLock<Result<PathBuf, String>> =
    LazyLock::new(|| installed("server-everything"));

/// The `dist/index.js` of the npm package `@modelcontextprotocol/NAME`, installed
/// from tests/mcp/upstreams/.
pub(crate) fn installed(name: &str) -> Result<PathBuf, String> {
    let dir = match std::env::var_os("JUSTONCE_MCP_UPSTREAMS") {
        Some(dir) => PathBuf::from(dir),
        None => install::npm_ci(
            "mcp-upstreams",
            Path::new(UPSTREAMS),
            "install node and npm, or set JUSTONCE_MCP_UPSTREAMS to a directory where \
             tests/mcp/upstreams/package.json was installed with npm ci (see .ci/run)",
        )?,
    };
    let index = dir.join(format!(
        "node_modules/@modelcontextprotocol/{name}/dist/index.js"
    ));
    if index.is_file() {
        Ok(index)
    } else {
        Err(format!("{} is not there", index.display()))
    }
}

/// The external thing a test needs, or `None` (skip) with a message; under
/// `CI=true` a missing one fails the test.
pub(crate) fn needed(what: &str, found: &Result<PathBuf, String>) -> Option<PathBuf> {
    match found {
        Ok(path) => Some(path.clone()),
        Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("no {what} under CI: {e}")
        }
        Err(e) => {
            eprintln!("skipping: no {what}: {e}");
            None
        }
    }
}

pub(crate) fn python() -> Result<PathBuf, String> {
    install::from_env("JUSTONCE_MCP_PYTHON").unwrap_or_else(|| {
        let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/mcp-venv/bin/python");
        if venv.is_file() {
            Ok(venv)
        } else {
            Err("set JUSTONCE_MCP_PYTHON to a Python with tests/mcp/requirements.txt".into())
        }
    })
}

/// A host whose database sits in a temporary directory beside a `justonce.toml`
/// naming one upstream.
pub(crate) struct Gateway {
    pub(crate) dir: tempfile::TempDir,
}

impl Gateway {
    /// `[upstreams.memory]`: server-memory behind `tee`, which copies every message
    /// it is sent to `received.jsonl`; `extra` is added to the section.
    fn memory(index: &Path, extra: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let received = dir.path().join("received.jsonl");
        let graph = dir.path().join("memory.jsonl");
        let script = format!(
            "tee -a '{}' | exec node '{}'",
            received.display(),
            index.display()
        );
        let toml = format!(
            "[upstreams.memory]\ncommand = [\"sh\", \"-c\", {script:?}]\nenv = {{ MEMORY_FILE_PATH = {graph:?} }}\nprefix = \"mem_\"\n{extra}\n",
            graph = graph.display().to_string(),
        );
        std::fs::write(dir.path().join("justonce.toml"), toml).unwrap();
        Self { dir }
    }

    /// `[upstreams.ledger]`: the tests' own server, its ledger in the directory.
    pub(crate) fn ledger(python: &Path, extra: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let toml = format!(
            "[upstreams.ledger]\ncommand = [{python:?}, {LEDGER:?}, {ledger:?}]\n{extra}\n",
            python = python.display().to_string(),
            ledger = dir.path().join("ledger").display().to_string(),
        );
        std::fs::write(dir.path().join("justonce.toml"), toml).unwrap();
        Self { dir }
    }

    pub(crate) fn serve(&self, args: &[&str]) -> McpProcess {
        let mut all = vec!["--conversation", "conv-gateway"];
        all.extend_from_slice(args);
        let mut server = McpProcess::spawn(&self.dir.path().join("state.db"), &all, "warn");
        server.client.initialize(VERSION);
        // `initialize` waits for no upstream: each one's tools come once it is ready.
        server.client.wait_for_upstreams();
        server
    }

    /// Every `tools/call` of `tool` the upstream was sent (server-memory's input).
    fn received_calls(&self, tool: &str) -> Vec<Value> {
        let text =
            std::fs::read_to_string(self.dir.path().join("received.jsonl")).unwrap_or_default();
        text.lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|m| m["method"] == "tools/call" && m["params"]["name"] == tool)
            .collect()
    }

    /// The ledger's lines, and the calls its server logged (`{line, key}`).
    pub(crate) fn ledger_state(&self) -> (Vec<String>, Vec<Value>) {
        let read =
            |name: &str| std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default();
        let lines = read("ledger").lines().map(str::to_owned).collect();
        let calls = read("ledger.calls")
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (lines, calls)
    }
}

/// The effect records the journal holds of the upstream calls of `tool`
/// (`justonce journal --json`): their keys, class and attempts.
fn journaled_effects(gateway: &Gateway, tool: &str) -> Vec<Value> {
    effects_in(&gateway.dir.path().join("state.db"), tool)
}

/// The effect records the journal `db` holds of the calls of `tool`.
pub(crate) fn effects_in(db: &Path, tool: &str) -> Vec<Value> {
    let out = crate::support::cli::justonce_command(Some(db))
        .args(["journal", "--json"])
        .output()
        .unwrap();
    let entries = crate::support::cli::json_of(&out);
    entries
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["tool"] == tool)
        .flat_map(|e| e["effects"].as_array().unwrap().clone())
        .collect()
}

fn key_sent(call: &Value) -> &str {
    call["params"]["_meta"]["dev.justonce/idempotency-key"]
        .as_str()
        .unwrap_or_else(|| panic!("no key in _meta: {call}"))
}

fn entity(name: &str) -> Value {
    json!({ "entities": [{ "name": name, "entityType": "person", "observations": ["likes tea"] }] })
}

fn entity_names(server: &mut McpProcess) -> Vec<String> {
    let graph = server.client.call("mem_read_graph", json!({}), json!({}));
    let graph = &graph["result"]["structuredContent"];
    graph["entities"]
        .as_array()
        .unwrap_or_else(|| panic!("read_graph: {graph}"))
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_owned())
        .collect()
}

pub(crate) fn replayed(response: &Value) -> bool {
    response["result"]["_meta"]["dev.justonce/replayed"] == true
}

/// The tool's own items of a result (the host's notes left out).
pub(crate) fn own_content(response: &Value) -> Vec<Value> {
    response["result"]["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["_meta"]["dev.justonce/note"] != true)
        .cloned()
        .collect()
}

/// The seed's scenario against server-memory: `create_entities` answered, its answer
/// lost on the way to the agent, retried in the same conversation: the upstream got
/// one call, the graph holds one entity, the retry is told the first answer, replayed.
/// The opposite: another entity is created too.
#[test]
fn a_retried_create_entities_creates_one_entity_and_is_answered_replayed() {
    let Some(index) = needed("server-memory", &MEMORY) else {
        return;
    };
    let gateway = Gateway::memory(&index, "");
    let mut server = gateway.serve(&[]);
    let listed = server.client.request("tools/list", json!({}));
    let create = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "mem_create_entities")
        .unwrap_or_else(|| panic!("mem_create_entities is not listed: {listed}"))
        .clone();
    assert_eq!(create["annotations"]["idempotentHint"], false, "{create}");
    assert!(create["inputSchema"]["properties"]["entities"].is_object());

    // The first answer is lost on the way to the agent: it never reads it.
    let first = server
        .client
        .call("mem_create_entities", entity("alice"), json!({}));
    let retry = server
        .client
        .call("mem_create_entities", entity("alice"), json!({}));
    assert!(!replayed(&first) && replayed(&retry), "{first}\n{retry}");
    assert_eq!(retry["result"]["isError"], false, "{retry}");
    assert_eq!(own_content(&retry), own_content(&first), "byte for byte");
    assert!(
        own_content(&retry)[0]["text"]
            .as_str()
            .unwrap()
            .contains("alice"),
        "the agent is told the entity was created: {retry}"
    );
    assert_eq!(
        retry["result"]["_meta"]["dev.justonce/key"], first["result"]["_meta"]["dev.justonce/key"],
        "both attempts ran under one key"
    );
    let sent = gateway.received_calls("create_entities");
    assert_eq!(sent.len(), 1, "the upstream got one call: {sent:?}");
    assert_eq!(
        key_sent(&sent[0]).len(),
        32,
        "an effect key went downstream"
    );
    assert_eq!(entity_names(&mut server), ["alice"]);

    // The opposite: another entity is another call, and it happens.
    let bob = server
        .client
        .call("mem_create_entities", entity("bob"), json!({}));
    assert!(!replayed(&bob), "{bob}");
    let sent = gateway.received_calls("create_entities");
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_ne!(key_sent(&sent[0]), key_sent(&sent[1]));
    assert_eq!(entity_names(&mut server), ["alice", "bob"]);
}

/// A tool the configuration says is safe to send again (`idempotent`): the upstream's
/// answer is lost once after the effect landed (`serve --fault`), the host sends it
/// again under the same key, and the agent is told success; the graph holds one
/// entity.
#[test]
fn a_lost_upstream_answer_of_an_idempotent_tool_is_resent_under_the_same_key() {
    let Some(index) = needed("server-memory", &MEMORY) else {
        return;
    };
    let gateway = Gateway::memory(&index, "idempotent = [\"create_entities\"]");
    let mut server = gateway.serve(&["--fault", "lose-response:mem_create_entities:1"]);
    let answer = server
        .client
        .call("mem_create_entities", entity("carol"), json!({}));
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    assert!(!replayed(&answer), "{answer}");
    let sent = gateway.received_calls("create_entities");
    assert_eq!(sent.len(), 2, "the host retried: {sent:?}");
    assert_eq!(key_sent(&sent[0]), key_sent(&sent[1]), "under the same key");
    assert_eq!(entity_names(&mut server), ["carol"]);
    let effects = journaled_effects(&gateway, "mem_create_entities");
    assert_eq!(effects.len(), 1, "{effects:?}");
    assert_eq!(
        effects[0]["key"],
        key_sent(&sent[0]),
        "the journaled key went down"
    );
    assert_eq!(
        (
            &effects[0]["class"],
            &effects[0]["attempts"],
            &effects[0]["provider"]
        ),
        (&json!("keyed"), &json!(2), &json!("mcp:memory"))
    );
}

/// A tool not known safe to send again (no `idempotentHint`, not in `idempotent`):
/// its answer lost after the effect landed, the call ends `outcome_unknown` and is
/// never sent again, not by the host and not on the agent's retry, until a person
/// resolves it.
#[test]
fn an_unknown_outcome_of_a_tool_not_safe_to_resend_fails_closed() {
    let Some(index) = needed("server-memory", &MEMORY) else {
        return;
    };
    let gateway = Gateway::memory(&index, "");
    let mut server = gateway.serve(&["--fault", "lose-response:mem_create_entities:1"]);
    for attempt in 0..2 {
        let answer = server
            .client
            .call("mem_create_entities", entity("dave"), json!({}));
        assert_eq!(answer["result"]["isError"], true, "{answer}");
        assert_eq!(
            answer["result"]["structuredContent"]["error"]["kind"], "outcome_unknown",
            "attempt {attempt}: {answer}"
        );
        let sent = gateway.received_calls("create_entities");
        assert_eq!(
            sent.len(),
            1,
            "attempt {attempt}: never sent again: {sent:?}"
        );
    }
    let effects = journaled_effects(&gateway, "mem_create_entities");
    assert_eq!(
        (&effects[0]["class"], &effects[0]["attempts"]),
        (&json!("unkeyed"), &json!(1)),
        "{effects:?}"
    );
    // It did land: a person resolving it would say so.
    assert_eq!(entity_names(&mut server), ["dave"]);
}

/// The same explicit key with other arguments is a mismatch: nothing is sent.
#[test]
fn the_same_key_with_other_arguments_is_a_mismatch_and_nothing_is_sent() {
    let Some(index) = needed("server-memory", &MEMORY) else {
        return;
    };
    let gateway = Gateway::memory(&index, "");
    let mut server = gateway.serve(&[]);
    let meta = json!({ "dev.justonce/idempotency-key": "create-1" });
    let first = server
        .client
        .call("mem_create_entities", entity("erin"), meta.clone());
    assert_eq!(first["result"]["isError"], false, "{first}");
    let other = server
        .client
        .call("mem_create_entities", entity("frank"), meta);
    assert_eq!(
        other["result"]["structuredContent"]["error"]["kind"], "mismatch",
        "{other}"
    );
    assert_eq!(gateway.received_calls("create_entities").len(), 1);
    assert_eq!(entity_names(&mut server), ["erin"]);
}

/// Two identical calls in one assistant message (sent before either is answered) and
/// a re-planned call whose arguments are spelled another way (keys in another order):
/// one upstream call, every one answered its result.
#[test]
fn a_parallel_duplicate_and_a_respelled_call_are_one_upstream_call() {
    let Some(index) = needed("server-memory", &MEMORY) else {
        return;
    };
    let gateway = Gateway::memory(&index, "");
    let mut server = gateway.serve(&[]);
    let params = json!({ "name": "mem_create_entities", "arguments": entity("grace") });
    server
        .client
        .send_request(json!("a"), "tools/call", params.clone());
    server.client.send_request(json!("b"), "tools/call", params);
    let a = server.client.response(&json!("a"));
    let b = server.client.response(&json!("b"));
    assert_eq!(own_content(&a), own_content(&b), "{a}\n{b}");
    assert_eq!(a["result"]["isError"], false, "{a}");
    let respelled = json!({ "entities": [{ "observations": ["likes tea"], "entityType": "person", "name": "grace" }] });
    let c = server
        .client
        .call("mem_create_entities", respelled, json!({}));
    assert!(replayed(&c), "{c}");
    assert_eq!(own_content(&c), own_content(&a));
    let sent = gateway.received_calls("create_entities");
    assert_eq!(sent.len(), 1, "one upstream call: {sent:?}");
    assert_eq!(entity_names(&mut server), ["grace"]);
}

/// The tests' own server loses its first answer the hard way: it appends the line,
/// then exits before it answers. With `dedupes_by_key` (the server deduplicates by
/// the key it is given) the host starts it again and sends the call again under the
/// same key: the server answers its first answer, the ledger holds one line, the
/// agent is told success. The opposite: another line is appended too.
#[test]
fn an_upstream_that_crashes_mid_call_is_restarted_and_the_call_resent_under_its_key() {
    let Some(python) = needed("Python with the MCP SDK", &python()) else {
        return;
    };
    let gateway = Gateway::ledger(&python, "dedupes_by_key = true");
    let mut server = gateway.serve(&[]);
    let args = json!({ "line": "paid invoice 7", "lose_first": true, "by_key": true });
    let answer = server.client.call("append", args, json!({}));
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    assert!(
        own_content(&answer)[0]["text"]
            .as_str()
            .unwrap()
            .contains("paid invoice 7"),
        "{answer}"
    );
    let (lines, calls) = gateway.ledger_state();
    assert_eq!(lines, ["paid invoice 7"], "one effect");
    assert_eq!(
        calls.len(),
        2,
        "the call was sent again after the restart: {calls:?}"
    );
    assert_eq!(calls[0]["key"], calls[1]["key"], "under the same key");
    assert!(calls[0]["key"].is_string());

    let other = server
        .client
        .call("append", json!({ "line": "paid invoice 8" }), json!({}));
    assert_eq!(other["result"]["isError"], false, "{other}");
    assert_eq!(
        gateway.ledger_state().0,
        ["paid invoice 7", "paid invoice 8"]
    );
}

/// The same crash on a server not said to deduplicate: the call ends
/// `outcome_unknown` and is not sent again; the server is started again for the next
/// call, which runs.
#[test]
fn a_crash_mid_call_of_an_unkeyed_tool_is_outcome_unknown_and_the_server_restarts() {
    let Some(python) = needed("Python with the MCP SDK", &python()) else {
        return;
    };
    let gateway = Gateway::ledger(&python, "");
    let mut server = gateway.serve(&[]);
    let answer = server.client.call(
        "append",
        json!({ "line": "shipped order 1", "lose_first": true }),
        json!({}),
    );
    assert_eq!(
        answer["result"]["structuredContent"]["error"]["kind"], "outcome_unknown",
        "{answer}"
    );
    assert_eq!(gateway.ledger_state().1.len(), 1, "not sent again");
    let next = call_when_ready(&mut server, "append", json!({ "line": "shipped order 2" }));
    assert_eq!(
        next["result"]["isError"], false,
        "the server was restarted: {next}"
    );
    assert_eq!(
        gateway.ledger_state().0,
        ["shipped order 1", "shipped order 2"]
    );
}

/// `tools/call` of `tool`, sent again each time it is refused `not_performed` (its
/// upstream is starting again after a crash: nothing was sent) once the server said
/// its tools changed, as an agent does.
fn call_when_ready(server: &mut McpProcess, tool: &str, arguments: Value) -> Value {
    loop {
        let answer = server.client.call(tool, arguments.clone(), json!({}));
        if answer["result"]["structuredContent"]["error"]["kind"] != "not_performed" {
            return answer;
        }
        server.client.wait_for_list_changed();
    }
}

/// An upstream's own error result (`isError`) is the call's outcome: answered as the
/// upstream sent it, saved, and replayed to a retry without sending the call again.
#[test]
fn an_upstream_error_result_is_answered_as_sent_and_replayed() {
    let Some(python) = needed("Python with the MCP SDK", &python()) else {
        return;
    };
    let gateway = Gateway::ledger(&python, "");
    let mut server = gateway.serve(&[]);
    let first = server
        .client
        .call("refuse", json!({ "reason": "card declined" }), json!({}));
    assert_eq!(first["result"]["isError"], true, "{first}");
    let text = own_content(&first)[0]["text"].as_str().unwrap().to_owned();
    assert!(text.contains("refused: card declined"), "{first}");
    let retry = server
        .client
        .call("refuse", json!({ "reason": "card declined" }), json!({}));
    assert!(replayed(&retry), "{retry}");
    assert_eq!(retry["result"]["isError"], true, "{retry}");
    assert_eq!(own_content(&retry), own_content(&first), "byte for byte");
    assert_eq!(gateway.ledger_state().1.len(), 1, "sent once");
    // The opposite: another reason is another call.
    let other = server
        .client
        .call("refuse", json!({ "reason": "expired" }), json!({}));
    assert!(!replayed(&other), "{other}");
    assert_eq!(gateway.ledger_state().1.len(), 2);
}

/// A tool the upstream annotates `idempotentHint: true` (server-memory's
/// `delete_entities`) is keyed without any configuration: its lost answer is sent
/// again under the same key.
#[test]
fn a_tool_annotated_idempotent_is_resent_under_the_same_key() {
    let Some(index) = needed("server-memory", &MEMORY) else {
        return;
    };
    let gateway = Gateway::memory(&index, "");
    let mut server = gateway.serve(&["--fault", "lose-response:mem_delete_entities:1"]);
    server
        .client
        .call("mem_create_entities", entity("heidi"), json!({}));
    let answer = server.client.call(
        "mem_delete_entities",
        json!({ "entityNames": ["heidi"] }),
        json!({}),
    );
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    let sent = gateway.received_calls("delete_entities");
    assert_eq!(sent.len(), 2, "resent: {sent:?}");
    assert_eq!(key_sent(&sent[0]), key_sent(&sent[1]));
    assert!(entity_names(&mut server).is_empty());
}

/// A `readOnlyHint` tool runs every time, unsaved, and is sent without a key; with
/// `trust_read_only_hint = false` it is guarded like any other: a repeat is replayed.
#[test]
fn a_read_only_tool_runs_every_time_unless_its_hint_is_not_trusted() {
    let Some(index) = needed("server-memory", &MEMORY) else {
        return;
    };
    let trusted = Gateway::memory(&index, "");
    let mut server = trusted.serve(&[]);
    for _ in 0..2 {
        let graph = server.client.call("mem_read_graph", json!({}), json!({}));
        assert!(!replayed(&graph), "{graph}");
    }
    let sent = trusted.received_calls("read_graph");
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert!(sent[0]["params"].get("_meta").is_none(), "no key: {sent:?}");

    let untrusted = Gateway::memory(&index, "trust_read_only_hint = false");
    let mut server = untrusted.serve(&[]);
    let first = server.client.call("mem_read_graph", json!({}), json!({}));
    let again = server.client.call("mem_read_graph", json!({}), json!({}));
    assert!(!replayed(&first) && replayed(&again), "{first}\n{again}");
    assert_eq!(untrusted.received_calls("read_graph").len(), 1);
}

/// A server of the tests' own over Streamable HTTP, stopped when dropped.
pub(crate) struct HttpUpstream {
    child: std::process::Child,
    /// Its endpoint, `http://127.0.0.1:PORT/mcp`.
    pub(crate) url: String,
    /// How it was started, to start it again.
    command: (PathBuf, Vec<std::ffi::OsString>, u16),
}

/// A port nothing listens on now.
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl HttpUpstream {
    /// `python ARGS… PORT`, waited for until it listens on the port.
    pub(crate) fn start(python: &Path, args: &[&std::ffi::OsStr]) -> Self {
        Self::start_on(python, args, free_port())
    }

    /// `python ARGS… PORT` on `port`, waited for until it listens there.
    pub(crate) fn start_on(python: &Path, args: &[&std::ffi::OsStr], port: u16) -> Self {
        let child = std::process::Command::new(python)
            .args(args)
            .arg(port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start the upstream");
        // A bound on a hang, not a timing assertion.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "the upstream did not listen"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Self {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
            command: (
                python.to_owned(),
                args.iter().map(|a| a.to_os_string()).collect(),
                port,
            ),
        }
    }

    /// Stops it and starts it again on the same port: a server that forgot every
    /// session.
    pub(crate) fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let (python, args, port) = self.command.clone();
        let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
        *self = Self::start_on(&python, &args, port);
    }

    /// The ledger server, its ledger at `ledger`.
    fn ledger(python: &Path, ledger: &Path) -> Self {
        Self::start(
            python,
            &[LEDGER.as_ref(), ledger.as_os_str(), "http".as_ref()],
        )
    }
}

impl Drop for HttpUpstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An upstream over Streamable HTTP: the effect key goes down in `_meta` and as the
/// `Idempotency-Key` header, the same on both; a retry is replayed without a second
/// request, another line is appended too; and an answer lost after the effect landed
/// (`serve --fault`) is sent again under the same key to a server that deduplicates
/// by it.
#[test]
fn an_upstream_over_streamable_http_gets_the_key_in_meta_and_as_idempotency_key() {
    let Some(python) = needed("Python with the MCP SDK", &python()) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger");
    let http = HttpUpstream::ledger(&python, &ledger);
    std::fs::write(
        dir.path().join("justonce.toml"),
        format!(
            "[upstreams.ledger]\nurl = {:?}\ndedupes_by_key = true\n",
            http.url
        ),
    )
    .unwrap();
    let gateway = Gateway { dir };
    let mut server = gateway.serve(&["--fault", "lose-response:append:1"]);
    let args = json!({ "line": "refund 12", "by_key": true });
    let first = server.client.call("append", args.clone(), json!({}));
    assert_eq!(first["result"]["isError"], false, "{first}");
    let retry = server.client.call("append", args, json!({}));
    assert!(replayed(&retry), "{retry}");
    assert_eq!(own_content(&retry), own_content(&first));
    let (lines, calls) = gateway.ledger_state();
    assert_eq!(lines, ["refund 12"], "one effect");
    assert_eq!(calls.len(), 2, "the lost answer was asked again: {calls:?}");
    assert_eq!(calls[0]["key"], calls[1]["key"], "under the same key");
    assert_eq!(
        calls[0]["key"], calls[0]["header"],
        "in _meta and the header"
    );
    assert!(calls[0]["header"].is_string(), "{calls:?}");

    let other = server.client.call(
        "append",
        json!({ "line": "refund 13", "by_key": true }),
        json!({}),
    );
    assert!(!replayed(&other), "{other}");
    assert_eq!(gateway.ledger_state().0, ["refund 12", "refund 13"]);
}

/// `justonce --db URL --config DIR/justonce.toml --lease-ms 300 run append …` with
/// the ledger upstream (`extra` added to its section), on a PostgreSQL journal.
#[cfg(any(debug_assertions, feature = "fault-injection"))]
fn host_on_postgres(
    dir: &Path,
    python: &Path,
    url: &str,
    extra: &str,
    line: &str,
) -> std::process::Command {
    let config = dir.join("justonce.toml");
    std::fs::write(
        &config,
        format!(
            "[upstreams.ledger]\ncommand = [{python:?}, {LEDGER:?}, {ledger:?}]\n{extra}\n",
            python = python.display().to_string(),
            ledger = dir.join("ledger").display().to_string(),
        ),
    )
    .unwrap();
    let mut command = crate::support::cli::justonce_command(Some(Path::new(url)));
    command
        .arg("--config")
        .arg(&config)
        .args([
            "--lease-ms",
            "300",
            "run",
            "append",
            "--conversation",
            "killed",
        ])
        .arg("--args")
        .arg(json!({ "line": line, "by_key": true }).to_string())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    command
}

/// A host killed (as by `kill -9`) after the upstream `tools/call` went out and
/// before its answer was recorded, on a PostgreSQL journal: another host's retry of
/// the same call takes it over once the lease ends. For an upstream that deduplicates
/// by the key, it sends the call again under the key the first host journaled, and
/// the ledger holds one line; for one that does not, it is never sent blind: the call
/// is `outcome_unknown`, waiting for a person.
#[cfg(any(debug_assertions, feature = "fault-injection"))]
#[test]
fn a_host_killed_with_an_upstream_call_out_is_finished_by_another_or_waits_for_a_person() {
    use justonce::__private::postgres_testing::cluster;
    let Some(python) = needed("Python with the MCP SDK", &python()) else {
        return;
    };
    let Some(cluster) = cluster(
        "a_host_killed_with_an_upstream_call_out_is_finished_by_another_or_waits_for_a_person",
    ) else {
        return;
    };
    for (extra, keyed) in [("dedupes_by_key = true", true), ("", false)] {
        let url = cluster.database();
        let gateway = Gateway {
            dir: tempfile::tempdir().unwrap(),
        };
        let killed = host_on_postgres(gateway.dir.path(), &python, &url, extra, "wire 9")
            .env(justonce::__private::FAULT_ENV, "after_provider")
            .output()
            .unwrap();
        assert_eq!(killed.status.code(), None, "killed by a signal");
        assert!(killed.stdout.is_empty(), "the first host answered nothing");
        let (lines, calls) = gateway.ledger_state();
        assert_eq!(lines, ["wire 9"], "the effect landed");
        assert_eq!(calls.len(), 1);

        let out = host_on_postgres(gateway.dir.path(), &python, &url, extra, "wire 9")
            .output()
            .unwrap();
        let answer = crate::support::cli::json_of(&out);
        let (lines, calls) = gateway.ledger_state();
        assert_eq!(lines, ["wire 9"], "keyed {keyed}: the effect happened once");
        if keyed {
            assert_eq!(answer["ok"], true, "{answer}");
            assert_eq!(calls.len(), 2, "sent again: {calls:?}");
            assert_eq!(calls[0]["key"], calls[1]["key"], "under the same key");
        } else {
            assert_eq!(answer["error"]["kind"], "outcome_unknown", "{answer}");
            assert_eq!(calls.len(), 1, "never sent blind: {calls:?}");
        }
    }
}

/// server-everything's `gzip-file-as-resource` (annotated `idempotentHint`, with
/// defaults for two of its three arguments), through `serve` over stdio and with the
/// server reached over Streamable HTTP: a re-planned call that writes the defaults out
/// is the same call, replayed (its resource link byte for byte), sent upstream once;
/// another file name is another call.
#[test]
fn server_everything_over_stdio_and_http_a_call_with_its_defaults_written_out_is_one_call() {
    let Some(index) = needed("server-everything", &EVERYTHING) else {
        return;
    };
    let data = "data:text/plain;base64,aGVsbG8=";
    let gzip = "ev_gzip-file-as-resource";
    for transport in ["stdio", "http"] {
        let dir = tempfile::tempdir().unwrap();
        let received = dir.path().join("received.jsonl");
        let mut http_server = None;
        let section = if transport == "stdio" {
            let script = format!(
                "tee -a '{}' | exec node '{}' stdio",
                received.display(),
                index.display()
            );
            format!("command = [\"sh\", \"-c\", {script:?}]")
        } else {
            let (server, port) = everything_over_http(&index);
            http_server = Some(server);
            format!("url = \"http://127.0.0.1:{port}/mcp\"")
        };
        std::fs::write(
            dir.path().join("justonce.toml"),
            format!("[upstreams.everything]\n{section}\nprefix = \"ev_\"\n"),
        )
        .unwrap();
        let gateway = Gateway { dir };
        let mut server = gateway.serve(&[]);
        let first = server.client.call(gzip, json!({ "data": data }), json!({}));
        assert_eq!(first["result"]["isError"], false, "{transport}: {first}");
        assert_eq!(own_content(&first)[0]["type"], "resource_link", "{first}");
        let written_out =
            json!({ "outputType": "resourceLink", "name": "README.md.gz", "data": data });
        let again = server.client.call(gzip, written_out, json!({}));
        assert!(replayed(&again), "{transport}: {again}");
        assert_eq!(own_content(&again), own_content(&first), "byte for byte");
        let other =
            server
                .client
                .call(gzip, json!({ "data": data, "name": "other.gz" }), json!({}));
        assert!(!replayed(&other), "{transport}: {other}");
        if transport == "stdio" {
            let sent = gateway.received_calls("gzip-file-as-resource");
            assert_eq!(sent.len(), 2, "one call each: {sent:?}");
            assert_eq!(
                sent[0]["params"]["arguments"]["name"], "README.md.gz",
                "defaults filled in"
            );
            assert_ne!(key_sent(&sent[0]), key_sent(&sent[1]));
        }
        drop(server);
        drop(http_server);
    }
}

/// server-everything serving Streamable HTTP on a free port, waited for until it
/// listens: the process (killed when dropped) and its port.
pub(crate) fn everything_over_http(index: &Path) -> (KillOnDrop, u16) {
    let port = free_port();
    let child = std::process::Command::new("node")
        .arg(index)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start server-everything");
    let server = KillOnDrop(child);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(std::time::Instant::now() < deadline, "it did not listen");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    (server, port)
}

/// A child process killed when dropped.
pub(crate) struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Two upstreams offering one name: the first in `justonce.toml` is offered and
/// called, not the first by name (`zeta` is written before `alpha`).
#[test]
fn a_name_two_upstreams_offer_is_the_first_ones_in_the_file() {
    let Some(python) = needed("Python with the MCP SDK", &python()) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let section = |name: &str| {
        format!(
            "[upstreams.{name}]\ncommand = [{python:?}, {LEDGER:?}, {ledger:?}]\n",
            python = python.display().to_string(),
            ledger = dir.path().join(name).display().to_string(),
        )
    };
    std::fs::write(
        dir.path().join("justonce.toml"),
        format!("{}\n{}", section("zeta"), section("alpha")),
    )
    .unwrap();
    let gateway = Gateway { dir };
    let mut server = gateway.serve(&[]);
    let answer = server
        .client
        .call("append", json!({ "line": "paid 7" }), json!({}));
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    let read = |name: &str| std::fs::read_to_string(gateway.dir.path().join(name)).ok();
    assert_eq!(
        read("zeta").as_deref(),
        Some("paid 7\n"),
        "the first in the file"
    );
    assert_eq!(read("alpha"), None, "not the first by name");
    let (_, _, log) = server.close();
    let warned = "its tool `append` is left out: the upstream `zeta` offers `append`";
    assert_eq!(log.matches(warned).count(), 1, "warned once: {log}");
}

/// A name in `tools`, `exclude` or `idempotent` that the upstream does not list (a
/// misspelling) is warned about, naming the key, once its tools are listed; the names
/// it lists are not.
#[test]
fn a_name_the_upstream_does_not_list_is_warned_about_once_its_tools_are_listed() {
    let Some(python) = needed("Python with the MCP SDK", &python()) else {
        return;
    };
    let gateway = Gateway::ledger(&python, "exclude = [\"apend\"]\nidempotent = [\"append\"]");
    let mut server = gateway.serve(&[]);
    let list = server.client.request("tools/list", json!({}));
    let names = list["result"]["tools"].to_string();
    assert!(
        names.contains("\"append\""),
        "the exclude excluded nothing: {list}"
    );
    let (_, _, log) = server.close();
    assert!(
        log.contains("`upstreams.ledger.exclude` names `apend`, a tool the upstream does not list"),
        "{log}"
    );
    assert!(!log.contains("names `append`"), "{log}");
}

/// An upstream that adds a tool and says so (`notifications/tools/list_changed`):
/// the host lists its tools again and tells its own clients, whose next `tools/list`
/// offers the new tool, which can be called.
#[test]
fn an_upstreams_list_changed_is_passed_on_to_the_clients() {
    let Some(python) = needed("Python with the MCP SDK", &python()) else {
        return;
    };
    let gateway = Gateway::ledger(&python, "prefix = \"l_\"");
    let mut server = gateway.serve(&[]);
    let names = |server: &mut McpProcess| -> Vec<String> {
        let listed = server.client.request("tools/list", json!({}));
        listed["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(!names(&mut server).contains(&"l_sprout".to_owned()));
    let grown = server
        .client
        .call("l_grow", json!({ "name": "sprout" }), json!({}));
    assert_eq!(grown["result"]["isError"], false, "{grown}");
    // The host's own notification to this client (a bound on a hang, not a timing).
    loop {
        let message = server.client.next_message();
        if message["method"] == "notifications/tools/list_changed" {
            break;
        }
    }
    assert!(names(&mut server).contains(&"l_sprout".to_owned()));
    let called = server.client.call("l_sprout", json!({}), json!({}));
    assert_eq!(called["result"]["isError"], false, "{called}");
}

/// An upstream's progress reports reach the agent that asked for progress
/// (`_meta.progressToken`), under its token, before the answer, from a server over
/// stdio and over Streamable HTTP (events of the answer's stream); a replay runs
/// nothing and reports none.
#[test]
fn an_upstreams_progress_reaches_the_agent_before_the_answer() {
    let Some(python) = needed("Python with the MCP SDK", &python()) else {
        return;
    };
    let progress_of = |server: &mut McpProcess, id: &str| -> (Vec<Value>, Value) {
        server.client.send_request(
            json!(id),
            "tools/call",
            json!({ "name": "count", "arguments": { "to": 3 }, "_meta": { "progressToken": id } }),
        );
        let mut reports = Vec::new();
        loop {
            let message = server.client.next_message();
            if message["id"] == id {
                return (reports, message);
            }
            if message["method"] == "notifications/progress" {
                reports.push(message["params"].clone());
            }
        }
    };
    for transport in ["stdio", "http"] {
        let (gateway, _http) = if transport == "stdio" {
            (Gateway::ledger(&python, ""), None)
        } else {
            let dir = tempfile::tempdir().unwrap();
            let http = HttpUpstream::ledger(&python, &dir.path().join("ledger"));
            std::fs::write(
                dir.path().join("justonce.toml"),
                format!("[upstreams.ledger]\nurl = {:?}\n", http.url),
            )
            .unwrap();
            (Gateway { dir }, Some(http))
        };
        let mut server = gateway.serve(&[]);
        let (reports, answer) = progress_of(&mut server, "first");
        assert_eq!(answer["result"]["isError"], false, "{transport}: {answer}");
        let steps: Vec<(Value, Value)> = reports
            .iter()
            .map(|r| (r["progressToken"].clone(), r["progress"].clone()))
            .collect();
        assert_eq!(
            steps,
            [
                (json!("first"), json!(1.0)),
                (json!("first"), json!(2.0)),
                (json!("first"), json!(3.0))
            ],
            "{transport}: {reports:?}"
        );
        assert_eq!(reports[0]["message"], "step 1");
        let (reports, again) = progress_of(&mut server, "again");
        assert!(replayed(&again), "{again}");
        assert!(reports.is_empty(), "{reports:?}");
    }
}

/// A read-only tool's result is passed through under its upstream's own cap
/// (`max_read_bytes`, 16 MiB by default), not the 1 MiB of a saved answer: the
/// ledger's `lines` reads back 2 MB. With `max_read_bytes` set below it, the call
/// is `result_too_large` naming the cap. And a configuration of upstreams serves
/// those only: no example tool beside them.
#[test]
fn a_read_only_result_over_a_mib_passes_through_under_its_upstreams_cap() {
    let Some(python) = needed("Python with the MCP SDK", &python()) else {
        return;
    };
    let written: Vec<String> = (0..2000)
        .map(|i| format!("{i:04}{}", "x".repeat(996)))
        .collect();
    for (extra, whole) in [("", true), ("max_read_bytes = 100000", false)] {
        let gateway = Gateway::ledger(&python, extra);
        std::fs::write(gateway.dir.path().join("ledger"), written.join("\n") + "\n").unwrap();
        let mut server = gateway.serve(&[]);
        let read = server.client.call("lines", json!({}), json!({}));
        if whole {
            assert_eq!(
                read["result"]["isError"],
                false,
                "{}",
                &read.to_string()[..300]
            );
            let lines = &read["result"]["structuredContent"]["result"];
            assert_eq!(
                lines.as_array().map(Vec::len),
                Some(2000),
                "{}",
                &read.to_string()[..300]
            );
            let listed = server.client.request("tools/list", json!({}));
            let names: Vec<&str> = listed["result"]["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap())
                .collect();
            for example in ["refund", "send_receipt", "notify"] {
                assert!(!names.contains(&example), "{example} offered: {names:?}");
            }
        } else {
            assert_eq!(read["result"]["isError"], true, "{read}");
            let told = read.to_string();
            assert!(
                told.contains("result_too_large") && told.contains("the limit of 100000 bytes"),
                "{told}"
            );
        }
    }
}
