//! Every answer kept, and bounded (issue 53): an upstream that answers after the
//! host gave its request up (`timeout_ms`), over stdio and over Streamable HTTP, its
//! answer journaled as it comes so that a retry after a restart is answered with it;
//! and one that floods progress. The hostile server is the tests' own
//! (`tests/mcp/upstreams/late_server.py`); its tools answer once a gate file exists,
//! so "late" is the test's doing, not a clock's.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::mcp_gateway::{HttpUpstream, effects_in, needed, python};
use crate::support::mcp::{McpProcess, VERSION, replayed};
use crate::support::mcp_http::{HttpClient, HttpProcess, add_token, read_reply};

const LATE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/mcp/upstreams/late_server.py"
);

/// A bound on a hang, not a timing assertion.
const WAIT: Duration = Duration::from_secs(60);

/// A host whose `justonce.toml` names the late server as `late`, its requests
/// given up after `timeout_ms` (past the server's start, which `initialize` waits
/// for under the same timeout).
struct Late {
    dir: tempfile::TempDir,
    /// The server, when it is reached over HTTP (else the host starts it).
    _http: Option<HttpUpstream>,
}

/// How the host reaches the late server.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Transport {
    Stdio,
    Http,
}

/// The timeout of the late tests: long enough for the Python server to start on a
/// busy machine; its tools answer only when the test opens the gate anyway.
const TIMEOUT_MS: u64 = 5000;

impl Late {
    fn new(python: &Path, timeout_ms: u64) -> Self {
        Self::over(Transport::Stdio, python, timeout_ms)
    }

    /// The late server reached over `transport` (over HTTP, started by the test).
    fn over(transport: Transport, python: &Path, timeout_ms: u64) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ledger = dir.path().join("ledger");
        let (reached, http) = match transport {
            Transport::Stdio => (
                format!(
                    "command = [{python:?}, {LATE:?}, {ledger:?}]",
                    python = python.display().to_string(),
                    ledger = ledger.display().to_string(),
                ),
                None,
            ),
            Transport::Http => {
                let http = HttpUpstream::start(
                    python,
                    &[LATE.as_ref(), ledger.as_os_str(), "http".as_ref()],
                );
                (format!("url = {:?}", http.url), Some(http))
            }
        };
        std::fs::write(
            dir.path().join("justonce.toml"),
            format!("[upstreams.late]\n{reached}\ntimeout_ms = {timeout_ms}\n"),
        )
        .unwrap();
        Self { dir, _http: http }
    }

    fn db(&self) -> PathBuf {
        self.dir.path().join("state.db")
    }

    fn serve(&self) -> McpProcess {
        let mut server = McpProcess::spawn(&self.db(), &["--conversation", "conv-late"], "warn");
        server.client.initialize(VERSION);
        server.client.wait_for_upstreams();
        server
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default()
    }

    /// The ledger's lines.
    fn ledger(&self) -> Vec<String> {
        self.read("ledger").lines().map(str::to_owned).collect()
    }

    /// The runs the server started (`{tool, key, line}`), each once it was sent.
    fn calls(&self) -> Vec<Value> {
        self.read("ledger.calls")
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Lets the tools answer.
    fn open_gate(&self) {
        std::fs::write(self.dir.path().join("ledger.gate"), "").unwrap();
    }

    /// Waits (polling, bounded) until the ledger holds `lines`.
    fn wait_for_ledger(&self, lines: usize) {
        let deadline = Instant::now() + WAIT;
        while self.ledger().len() < lines {
            assert!(Instant::now() < deadline, "the ledger: {:?}", self.ledger());
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The effect of `tool` happened once (the ledger holds `line` alone), sent
    /// once, under the key the journal holds.
    fn happened_once(&self, tool: &str, line: &str) {
        assert_eq!(self.ledger(), [line], "the effect happened once");
        let calls = self.calls();
        assert_eq!(
            calls.len(),
            1,
            "one run upstream, not one per attempt: {calls:?}"
        );
        let effects = self.journaled(tool);
        assert_eq!(effects.len(), 1, "{effects:?}");
        assert_eq!(
            effects[0]["key"], calls[0]["key"],
            "under the journaled key"
        );
    }

    /// The opposite case: another call of `tool` (the second of `lines`) runs too,
    /// another effect under another key.
    fn another_call_happens(&self, server: &mut McpProcess, tool: &str, lines: [&str; 2]) {
        let other = server
            .client
            .call(tool, json!({ "line": lines[1] }), json!({}));
        assert_eq!(text(&other), format!("done '{}'", lines[1]), "{other}");
        assert_eq!(self.ledger(), lines);
        let calls = self.calls();
        assert_eq!(calls.len(), 2, "{calls:?}");
        assert_ne!(calls[0]["key"], calls[1]["key"], "two effects, two keys");
    }

    /// The effects the journal holds of `tool` (`justonce journal --json`).
    fn journaled(&self, tool: &str) -> Vec<Value> {
        effects_in(&self.db(), tool)
    }
}

fn error(response: &Value) -> &Value {
    &response["result"]["structuredContent"]["error"]
}

fn text(response: &Value) -> &str {
    response["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text: {response}"))
}

/// The agent's retries of `tool` with `arguments` until one is answered (each one
/// before the late answer reached the host is `outcome_unknown`, and sends
/// nothing): that answer.
fn retry_until_answered(server: &mut McpProcess, tool: &str, arguments: Value) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let retry = server.client.call(tool, arguments.clone(), json!({}));
        if retry["result"]["isError"] == false {
            return retry;
        }
        assert_eq!(error(&retry)["kind"], "outcome_unknown", "{retry}");
        assert!(Instant::now() < deadline, "never answered: {retry}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A tool not safe to resend (`pay`) answers after the host gave it up: the agent
/// is told `outcome_unknown` (it may still run), a retry meanwhile sends nothing,
/// and once the answer came the retry is answered with it, saved as the effect's
/// answer (replayed from then on). The effect happened once, under one key. The
/// opposite: another call is another effect, both happen.
#[test]
fn an_unkeyed_call_answered_after_its_timeout_answers_the_retry_with_that_answer() {
    unkeyed_answered_late(Transport::Stdio);
}

/// The same over Streamable HTTP: the request's answer stream is read on past the
/// timeout (before, it was dropped: the retry stayed unknown for good).
#[test]
fn an_unkeyed_call_to_an_http_upstream_answered_after_its_timeout_answers_the_retry() {
    unkeyed_answered_late(Transport::Http);
}

fn unkeyed_answered_late(transport: Transport) {
    let Some(python) = needed("Python with the MCP SDK", &python()) else {
        return;
    };
    let late = Late::over(transport, &python, TIMEOUT_MS);
    let mut server = late.serve();
    let paid = json!({ "line": "paid 1" });

    let first = server.client.call("pay", paid.clone(), json!({}));
    assert_eq!(error(&first)["kind"], "outcome_unknown", "{first}");
    let told = error(&first)["message"].as_str().unwrap();
    assert!(
        told.contains(&format!("did not answer tools/call within {TIMEOUT_MS} ms"))
            && told.contains("its answer, if it comes, answers the retry"),
        "{told}"
    );
    // Still running: the retry is unknown, says so, and sends nothing.
    let meanwhile = server.client.call("pay", paid.clone(), json!({}));
    assert_eq!(error(&meanwhile)["kind"], "outcome_unknown", "{meanwhile}");
    let told = error(&meanwhile)["message"].as_str().unwrap();
    assert!(told.contains("still running on mcp:late"), "{told}");
    assert_eq!(
        late.calls().len(),
        1,
        "never sent again: {:?}",
        late.calls()
    );

    late.open_gate();
    late.wait_for_ledger(1);
    let answered = retry_until_answered(&mut server, "pay", paid.clone());
    assert_eq!(text(&answered), "done 'paid 1'", "{answered}");
    let again = server.client.call("pay", paid.clone(), json!({}));
    assert!(replayed(&again), "saved as the call's outcome: {again}");
    assert_eq!(text(&again), "done 'paid 1'");

    assert_eq!(late.ledger(), ["paid 1"], "the effect happened once");
    let calls = late.calls();
    assert_eq!(calls.len(), 1, "sent once: {calls:?}");
    let effects = late.journaled("pay");
    assert_eq!(effects.len(), 1, "{effects:?}");
    assert_eq!(
        effects[0]["key"], calls[0]["key"],
        "the journaled key went down"
    );
    assert_eq!(
        (&effects[0]["class"], &effects[0]["attempts"]),
        (&json!("unkeyed"), &json!(1)),
        "{effects:?}"
    );

    // The opposite: another call, with the gate open, is answered in time.
    let other = server
        .client
        .call("pay", json!({ "line": "paid 2" }), json!({}));
    assert_eq!(text(&other), "done 'paid 2'", "{other}");
    assert_eq!(late.ledger(), ["paid 1", "paid 2"]);
    let calls = late.calls();
    assert_eq!(calls.len(), 2);
    assert_ne!(calls[0]["key"], calls[1]["key"], "two effects, two keys");
}

/// A slow tool safe to resend (`put`, `idempotentHint`) past its timeout is not sent
/// again while it runs: the host's attempts under its key wait for the one request
/// (before the fix, three overlapping runs per agent call). The agent is told
/// `outcome_unknown`, retry-safe; once the answer came late, the agent's retry is
/// answered with it. One run upstream, one effect, one key. The opposite: another
/// call is another run.
#[test]
fn a_slow_idempotent_tool_is_never_sent_again_while_it_runs_and_its_late_answer_answers_the_retry()
{
    keyed_answered_late(Transport::Stdio);
}

/// The same over Streamable HTTP (before: a `POST` per attempt, three runs
/// upstream, and the late answer dropped).
#[test]
fn a_slow_idempotent_tool_of_an_http_upstream_is_sent_once_and_its_late_answer_answers_the_retry() {
    keyed_answered_late(Transport::Http);
}

fn keyed_answered_late(transport: Transport) {
    let Some(python) = needed("Python with the MCP SDK", &python()) else {
        return;
    };
    let late = Late::over(transport, &python, TIMEOUT_MS);
    let mut server = late.serve();
    let put = json!({ "line": "put 1" });

    let first = server.client.call("put", put.clone(), json!({}));
    assert_eq!(error(&first)["kind"], "outcome_unknown", "{first}");
    assert_eq!(error(&first)["retry_safe"], true, "{first}");
    let told = error(&first)["message"].as_str().unwrap();
    assert!(told.contains("after 3 attempts under one key"), "{told}");
    let effects = late.journaled("put");
    assert_eq!(
        (&effects[0]["class"], &effects[0]["attempts"]),
        (&json!("keyed"), &json!(3)),
        "three attempts: {effects:?}"
    );

    late.open_gate();
    late.wait_for_ledger(1);
    let answered = retry_until_answered(&mut server, "put", put.clone());
    assert_eq!(text(&answered), "done 'put 1'", "{answered}");

    late.happened_once("put", "put 1");
    // The opposite: another call runs too.
    late.another_call_happens(&mut server, "put", ["put 1", "put 2"]);
}

/// An answer that comes after the host gave its request up, while no run holds the
/// call, is journaled as the effect's answer as it comes: the host is killed, and
/// the agent's retry on the host started again is answered with it, nothing sent
/// again (before: it was kept in memory only, and the retry stayed
/// `outcome_unknown` for good). One run upstream, one effect under one key. The
/// opposite: another call is another effect.
#[test]
fn a_late_answer_is_journaled_as_it_comes_and_answers_the_retry_after_the_host_restarts() {
    let Some(python) = needed("Python with the MCP SDK", &python()) else {
        return;
    };
    // Over HTTP: the upstream outlives the host, as a remote server does.
    let late = Late::over(Transport::Http, &python, TIMEOUT_MS);
    let mut server = late.serve();
    let paid = json!({ "line": "paid 1" });
    let first = server.client.call("pay", paid.clone(), json!({}));
    assert_eq!(error(&first)["kind"], "outcome_unknown", "{first}");

    late.open_gate();
    late.wait_for_ledger(1);
    // Journaled by the host as it came, with no call of the agent's.
    let deadline = Instant::now() + WAIT;
    while late.journaled("pay").first().map(|e| e["state"].clone()) != Some(json!("done")) {
        assert!(Instant::now() < deadline, "{:?}", late.journaled("pay"));
        std::thread::sleep(Duration::from_millis(20));
    }
    let (_, log) = server.signal_and_wait("KILL");
    drop(log);

    let mut restarted = late.serve();
    let answered = restarted.client.call("pay", paid.clone(), json!({}));
    assert_eq!(answered["result"]["isError"], false, "{answered}");
    assert_eq!(text(&answered), "done 'paid 1'", "{answered}");
    assert!(!replayed(&answered), "the call's first outcome: {answered}");
    let again = restarted.client.call("pay", paid, json!({}));
    assert!(replayed(&again), "saved as the call's outcome: {again}");

    late.happened_once("pay", "paid 1");
    // The opposite: another call is another effect, sent.
    late.another_call_happens(&mut restarted, "pay", ["paid 1", "paid 2"]);
}

/// An upstream floods 50 000 progress reports at a client of `serve --http` that
/// reads nothing until the upstream is done: what reaches it is coalesced (a burst,
/// then a few a second, the last one kept), and the answer still arrives.
#[test]
fn a_flood_of_progress_reaches_a_client_that_does_not_read_bounded_and_the_answer_arrives() {
    let Some(python) = needed("Python with the MCP SDK", &python()) else {
        return;
    };
    // Its tool answers once its flood is sent, however long that takes.
    let late = Late::new(&python, 600_000);
    let db = late.db();
    let token = add_token(&db, "agent");
    let process = HttpProcess::spawn(&db, &[]);
    let mut client = HttpClient::new(process.addr, Some(token));
    let opened = client.initialize("2025-11-25");
    assert_eq!(opened.status, 200, "{}", opened.body);
    let deadline = Instant::now() + WAIT;
    loop {
        let listed = client.request("tools/list", json!({})).message();
        if listed["result"]["_meta"]["dev.justonce/upstreams"]["late"]["state"] == "ready" {
            break;
        }
        assert!(Instant::now() < deadline, "never ready: {listed}");
        std::thread::sleep(Duration::from_millis(20));
    }

    const REPORTS: u64 = 50_000;
    let call = client.message(
        "tools/call",
        json!({ "name": "flood", "arguments": { "n": REPORTS }, "_meta": { "progressToken": "p" } }),
    );
    let body = call.to_string();
    let mut stream = client.send_raw(&client.post_bytes(&body, &[]));
    // Nothing read until the upstream sent every report.
    let flooded = late.dir.path().join("ledger.flooded");
    let deadline = Instant::now() + WAIT * 2;
    while !flooded.exists() {
        assert!(Instant::now() < deadline, "the flood never ended");
        std::thread::sleep(Duration::from_millis(20));
    }
    let reply = read_reply(&mut stream);
    let messages: Vec<Value> = reply
        .body
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str(data).ok())
        .collect();
    let progress: Vec<&Value> = messages
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert!(
        !progress.is_empty() && progress.len() < 1000,
        "{} of {REPORTS} reports reached the client",
        progress.len()
    );
    assert_eq!(
        progress.last().unwrap()["params"]["progress"],
        json!(REPORTS as f64),
        "the last report is kept"
    );
    let answer = messages.last().unwrap();
    assert_eq!(answer["id"], call["id"], "{answer}");
    assert_eq!(
        answer["result"]["content"][0]["text"],
        format!("flooded {REPORTS}")
    );
}
