//! What an upstream asks of the client (issue 58), side by side: the official Python
//! SDK (tests/mcp/upstream_asks_client.py) as the client of `server-everything`
//! directly, and of `justonce serve` in front of it, in the session era over stdio.
//! Its `trigger-elicitation-request`, `trigger-sampling-request` and `get-roots-list`
//! are listed through the gateway and answer as they do directly; the question is
//! the call's, journaled, and a retry never asks it again; a client that did not
//! declare a capability is refused with `-32021` naming it.
//!
//! What the upstream was sent (its calls, and the gateway's replies to its requests)
//! is read from its own input: it runs behind `tee`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::LazyLock;

use serde_json::{Value, json};

use crate::mcp_gateway::{effects_in, everything_over_http, needed, python};

const CLIENT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/mcp/upstream_asks_client.py"
);

static EVERYTHING: LazyLock<Result<PathBuf, String>> = LazyLock::new(|| {
    let dir = std::env::var_os("JUSTONCE_MCP_UPSTREAMS")
        .map(PathBuf::from)
        .ok_or("set JUSTONCE_MCP_UPSTREAMS (see .ci/run)")?;
    let index = dir.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    index
        .is_file()
        .then_some(index.clone())
        .ok_or_else(|| format!("{} is not there", index.display()))
});

static PYTHON: LazyLock<Result<PathBuf, String>> = LazyLock::new(python);

/// server-everything behind `justonce serve`, its input copied to `received.jsonl`.
struct Gateway {
    dir: tempfile::TempDir,
}

impl Gateway {
    /// `[upstreams.everything]` over stdio, with `extra` added to the section.
    fn new(index: &Path, extra: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let script = format!(
            "tee -a '{}' | exec node '{}' stdio",
            dir.path().join("received.jsonl").display(),
            index.display()
        );
        Self::with(
            dir,
            &format!("command = [\"sh\", \"-c\", {script:?}]\n{extra}"),
        )
    }

    /// `[upstreams.everything]` at the server-everything over Streamable HTTP that
    /// listens on `port`.
    fn over_http(port: u16) -> Self {
        Self::with(
            tempfile::tempdir().unwrap(),
            &format!("url = \"http://127.0.0.1:{port}/mcp\""),
        )
    }

    /// `[upstreams.everything]` made of `section`, in `dir`.
    fn with(dir: tempfile::TempDir, section: &str) -> Self {
        let toml = format!("[upstreams.everything]\n{section}\nprefix = \"ev_\"\n");
        std::fs::write(dir.path().join("justonce.toml"), toml).unwrap();
        Self { dir }
    }

    fn db(&self) -> PathBuf {
        self.dir.path().join("state.db")
    }

    /// The client's report of `scenario` through the gateway, served with `args`.
    fn report(&self, python: &Path, scenario: &str, args: &[&str]) -> Value {
        let bin = crate::support::cli::justonce_command(None)
            .get_program()
            .to_owned();
        let mut command = Command::new(python);
        command
            .arg(CLIENT)
            .args([scenario, "ev_"])
            .arg(bin)
            .arg("--db")
            .arg(self.db())
            .arg("serve")
            .args(args);
        crate::mcp_python::client_report(&mut command)
    }

    /// Every message the upstream was sent.
    fn received(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.path().join("received.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    /// The `tools/call`s of `tool` the upstream was sent.
    fn calls_of(&self, tool: &str) -> Vec<Value> {
        self.received()
            .into_iter()
            .filter(|m| m["method"] == "tools/call" && m["params"]["name"] == tool)
            .collect()
    }

    /// The gateway's replies to the upstream's own requests (responses it was sent).
    fn replies(&self) -> Vec<Value> {
        self.received()
            .into_iter()
            .filter(|m| m.get("method").is_none() && m.get("id").is_some())
            .collect()
    }
}

/// The Python with the MCP SDK and server-everything's `index.js`, or `None` (skip).
fn needs() -> Option<(PathBuf, PathBuf)> {
    Some((
        needed("the MCP Python SDK", &PYTHON)?,
        needed("server-everything", &EVERYTHING)?,
    ))
}

/// The question on record for `tool`'s calls: its `user.elicit` effects.
fn questions_of(gateway: &Gateway, tool: &str) -> Vec<Value> {
    effects_in(&gateway.db(), tool)
        .into_iter()
        .filter(|e| e["provider"] == "user")
        .collect()
}

/// The client's report of `scenario` against server-everything directly.
fn direct(python: &Path, index: &Path, scenario: &str) -> Value {
    crate::mcp_python::client_report(
        Command::new(python)
            .arg(CLIENT)
            .args([scenario, ""])
            .arg("node")
            .arg(index)
            .arg("stdio"),
    )
}

fn texts(told: &Value) -> &Value {
    &told["text"]
}

/// `call` succeeded `through` the gateway and told the agent what it did `alone`.
fn same_both_ways(call: &str, through: &Value, alone: &Value) {
    assert_eq!(
        through["told"][call]["is_error"], false,
        "{call}: {through}"
    );
    assert_eq!(
        texts(&through["told"][call]),
        texts(&alone["told"][call]),
        "{call}: the same result both ways"
    );
}

/// The three tools are listed through the gateway, and each answers as it does
/// directly: the person asked once for the question, the model sampled once, the
/// roots read once, all by the client of the call. Before issue 58 the three were
/// not listed (the gateway declared no capability upstream), and their requests
/// were answered "justonce does not offer X to upstreams".
#[test]
fn elicitation_sampling_and_roots_answer_through_the_gateway_as_they_do_directly() {
    let Some((python, index)) = needs() else {
        return;
    };
    let alone = direct(&python, &index, "all");
    let gateway = Gateway::new(&index, "");
    let through = gateway.report(&python, "all", &[]);
    for tool in [
        "trigger-elicitation-request",
        "trigger-sampling-request",
        "get-roots-list",
    ] {
        let listed = |report: &Value, name: String| {
            report["listed"].as_array().unwrap().contains(&json!(name))
        };
        assert!(listed(&alone, tool.to_owned()), "{alone}");
        assert!(listed(&through, format!("ev_{tool}")), "listed: {through}");
    }
    for call in ["elicit", "sample", "roots"] {
        same_both_ways(call, &through, &alone);
    }
    assert_eq!(through["called"], alone["called"], "each callback as often");
    assert_eq!(
        through["called"]["elicitation"].as_array().unwrap().len(),
        1
    );
    assert_eq!(through["called"]["roots"], 1, "{through}");
    // The question is the call's, on record with the person's answer.
    let asked = questions_of(&gateway, "ev_trigger-elicitation-request");
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0]["seq"], 1, "after the upstream call: {asked:?}");
    // The sampled completion is the client's, not journaled.
    assert_eq!(
        questions_of(&gateway, "ev_trigger-sampling-request"),
        [] as [Value; 0]
    );
}

/// A client that declared none of them: the upstream is refused each request with
/// `-32021` naming the capability, and the agent reads the upstream's own error for
/// the question and the sampling (server-everything swallows a refused roots/list).
#[test]
fn a_client_that_did_not_declare_them_is_never_asked_and_the_upstream_is_refused_with_32021() {
    never_asked_and_refused_with_32021("none");
}

/// A client of `scenario` that declared none of them: the agent reads the upstream's
/// error (`-32021` naming the capability) for the question and the sampling, every
/// request of the upstream was refused `-32021` naming what it needs, no callback
/// was called, nothing of the question journaled.
fn never_asked_and_refused_with_32021(scenario: &str) {
    let Some((python, index)) = needs() else {
        return;
    };
    let gateway = Gateway::new(&index, "");
    let report = gateway.report(&python, scenario, &[]);
    for (call, capability) in [("elicit", "elicitation"), ("sample", "sampling")] {
        let told = &report["told"][call];
        assert_eq!(told["is_error"], true, "{call}: {report}");
        let text = told["text"].to_string();
        assert!(
            text.contains("-32021") && text.contains(capability),
            "{call}: {text}"
        );
    }
    let refused: Vec<Value> = gateway
        .replies()
        .into_iter()
        .filter(|r| r["error"]["code"] == -32021)
        .collect();
    let named = |what: &str| {
        refused
            .iter()
            .any(|r| r["error"]["message"].as_str().unwrap_or("").contains(what))
    };
    assert!(named("elicitation"), "{refused:?}");
    assert!(named("`sampling`"), "{refused:?}");
    assert!(named("`roots`"), "{refused:?}");
    assert_eq!(
        report["called"],
        json!({ "elicitation": [], "sampling": [], "roots": 0 }),
        "{report}"
    );
    // Nothing of the question was journaled: nobody was asked.
    assert_eq!(
        questions_of(&gateway, "ev_trigger-elicitation-request"),
        [] as [Value; 0]
    );
}

/// The upstream call's answer is lost after its question was answered (`--fault`):
/// where the call may be resent under its key (`idempotent`), the gateway resends it,
/// the upstream asks the same question again, and it is answered from the journal:
/// the person was asked once, the upstream got the same answer twice, under one key.
/// The agent's own retry is then replayed.
#[test]
fn an_upstream_question_answered_once_is_never_asked_again_when_its_call_is_resent() {
    let Some((python, index)) = needs() else {
        return;
    };
    let gateway = Gateway::new(&index, "idempotent = [\"trigger-elicitation-request\"]");
    let report = gateway.report(
        &python,
        "retry",
        &["--fault", "lose-response:ev_trigger-elicitation-request:1"],
    );
    let (first, retry) = (&report["told"]["first"], &report["told"]["retry"]);
    assert_eq!(first["is_error"], false, "{report}");
    assert!(
        first["text"].to_string().contains("Ada Lovelace"),
        "{report}"
    );
    assert_eq!(first["meta"]["dev.justonce/replayed"], false);
    assert_eq!(retry["meta"]["dev.justonce/replayed"], true, "{report}");
    assert_eq!(
        retry["meta"]["dev.justonce/key"],
        first["meta"]["dev.justonce/key"]
    );
    assert_eq!(texts(retry), texts(first));
    assert_eq!(
        report["called"]["elicitation"].as_array().unwrap().len(),
        1,
        "the person was asked once: {report}"
    );
    let sent = gateway.calls_of("trigger-elicitation-request");
    assert_eq!(sent.len(), 2, "resent once under its key: {sent:?}");
    let key = |call: &Value| call["params"]["_meta"]["dev.justonce/idempotency-key"].clone();
    assert_eq!(key(&sent[0]), key(&sent[1]), "{sent:?}");
    let answers: Vec<Value> = gateway
        .replies()
        .into_iter()
        .filter(|r| r["result"]["action"] == "accept")
        .map(|r| r["result"].clone())
        .collect();
    assert_eq!(answers.len(), 2, "asked twice, answered twice: {answers:?}");
    assert_eq!(answers[0], answers[1], "the same answer");
    let asked = questions_of(&gateway, "ev_trigger-elicitation-request");
    assert_eq!(asked.len(), 1, "one question on record: {asked:?}");
}

/// The opposite case: a call not safe to resend (unkeyed) whose answer is lost ends
/// `outcome_unknown`, is never resent, and its question is not asked again, on the
/// agent's retry either.
#[test]
fn a_lost_answer_of_an_unkeyed_call_that_asked_is_unknown_and_nobody_is_asked_again() {
    let Some((python, index)) = needs() else {
        return;
    };
    let gateway = Gateway::new(&index, "");
    let report = gateway.report(
        &python,
        "retry",
        &["--fault", "lose-response:ev_trigger-elicitation-request:1"],
    );
    for attempt in ["first", "retry"] {
        let told = &report["told"][attempt];
        assert_eq!(told["is_error"], true, "{attempt}: {report}");
        assert!(
            told["text"].to_string().contains("outcome_unknown"),
            "{attempt}: {report}"
        );
    }
    assert_eq!(
        report["called"]["elicitation"].as_array().unwrap().len(),
        1,
        "{report}"
    );
    assert_eq!(gateway.calls_of("trigger-elicitation-request").len(), 1);
}

/// Over Streamable HTTP the upstream's question and its sampling request come on the
/// call's own response stream, and answer as they do directly; its `roots/list`
/// comes on its standalone stream (the `GET`), which names no call, and goes to the
/// one call of that upstream in flight, as over stdio. Before, that `roots/list` was
/// refused, and `get-roots-list` said no roots were configured.
#[test]
fn over_streamable_http_the_question_and_the_sampling_come_on_the_calls_stream_and_roots_to_the_call()
 {
    let Some((python, index)) = needs() else {
        return;
    };
    let (_server, port) = everything_over_http(&index);
    let gateway = Gateway::over_http(port);
    let through = gateway.report(&python, "all", &[]);
    let alone = direct(&python, &index, "all");
    for (call, kind) in [
        ("elicit", "elicitation"),
        ("sample", "sampling"),
        ("roots", "roots"),
    ] {
        same_both_ways(call, &through, &alone);
        assert_eq!(through["called"][kind], alone["called"][kind], "{through}");
    }
    let asked = questions_of(&gateway, "ev_trigger-elicitation-request");
    assert_eq!(asked.len(), 1, "{asked:?}");
}

/// The stateless revision (2026-07-28): the upstream's question reaches the client
/// in an `input_required` result while the upstream call waits for its answer, and
/// the call the SDK makes again with the answer takes that upstream call up: one
/// `tools/call` upstream (not sent anew, though the tool is unkeyed), one question
/// to the person, one answer to the upstream, the result as direct; the agent's
/// retry is replayed.
#[test]
fn in_the_stateless_era_the_question_is_input_required_and_the_upstream_call_waits_for_its_answer()
{
    let Some((python, index)) = needs() else {
        return;
    };
    let alone = direct(&python, &index, "retry");
    let gateway = Gateway::new(&index, "");
    let report = gateway.report(&python, "stateless", &[]);
    let (first, retry) = (&report["told"]["first"], &report["told"]["retry"]);
    assert_eq!(first["is_error"], false, "{report}");
    assert_eq!(texts(first), texts(&alone["told"]["first"]), "as direct");
    assert_eq!(
        report["called"]["elicitation"].as_array().unwrap().len(),
        1,
        "asked once: {report}"
    );
    assert_eq!(retry["meta"]["dev.justonce/replayed"], true, "{report}");
    assert_eq!(
        retry["meta"]["dev.justonce/key"],
        first["meta"]["dev.justonce/key"]
    );
    assert_eq!(gateway.calls_of("trigger-elicitation-request").len(), 1);
    let answers: Vec<Value> = gateway
        .replies()
        .into_iter()
        .filter(|r| r["result"]["action"] == "accept")
        .collect();
    assert_eq!(answers.len(), 1, "{answers:?}");
    let asked = questions_of(&gateway, "ev_trigger-elicitation-request");
    assert_eq!(asked.len(), 1, "{asked:?}");
}

/// The stateless revision (2026-07-28) with a client that declares sampling and
/// roots in its requests: the upstream's `sampling/createMessage` and `roots/list`
/// reach it in `input_required` results, as a question does, and its answers reach
/// the upstream: each tool answers as it does directly, each callback called as
/// often. The sampling tool (journaled, unkeyed) is sent upstream once, its request
/// kept waiting for the answer; the roots tool (a read) is sent again with it.
/// Nothing of the sampling or the roots is journaled. Before, both were refused
/// (`-32603`): the sampling tool answered an error, the roots tool no roots.
#[test]
fn in_the_stateless_era_sampling_and_roots_come_as_input_required_and_answer_as_directly() {
    let Some((python, index)) = needs() else {
        return;
    };
    let alone = direct(&python, &index, "all");
    let gateway = Gateway::new(&index, "");
    let through = gateway.report(&python, "stateless-all", &[]);
    for call in ["elicit", "sample", "roots"] {
        same_both_ways(call, &through, &alone);
    }
    assert_eq!(through["called"], alone["called"], "each callback as often");
    assert_eq!(
        through["called"]["sampling"].as_array().unwrap().len(),
        1,
        "{through}"
    );
    assert_eq!(through["called"]["roots"], 1, "{through}");
    assert_eq!(
        gateway.calls_of("trigger-sampling-request").len(),
        1,
        "taken up, not sent anew"
    );
    assert_eq!(
        gateway.calls_of("get-roots-list").len(),
        2,
        "a read, sent again with the roots"
    );
    let sampled: Vec<Value> = gateway
        .replies()
        .into_iter()
        .filter(|r| r["result"]["model"] == "test-model")
        .collect();
    assert_eq!(sampled.len(), 1, "the completion reached the upstream once");
    assert_eq!(
        questions_of(&gateway, "ev_trigger-sampling-request"),
        [] as [Value; 0]
    );
}

/// The opposite: a stateless client that declared none of them is never asked; the
/// upstream is refused each request with `-32021` naming the capability, as for a
/// session's client. Before, sampling and roots were refused `-32603` ("not
/// reachable").
#[test]
fn a_stateless_client_that_did_not_declare_them_is_never_asked_and_the_upstream_gets_32021() {
    never_asked_and_refused_with_32021("stateless-none");
}

/// The stateless revision through an HTTP upstream: its `roots/list` (on its
/// standalone stream) reaches the read `get-roots-list`, which is sent again with
/// the client's roots and answers as directly; its `sampling/createMessage` cannot
/// wait on the call's response stream, and is refused saying so (`-32603`), the
/// upstream's error what the agent reads.
#[test]
fn in_the_stateless_era_through_an_http_upstream_roots_answer_as_directly_and_sampling_is_refused()
{
    let Some((python, index)) = needs() else {
        return;
    };
    let (_server, port) = everything_over_http(&index);
    let gateway = Gateway::over_http(port);
    let through = gateway.report(&python, "stateless-all", &[]);
    let alone = direct(&python, &index, "all");
    same_both_ways("roots", &through, &alone);
    assert_eq!(through["called"]["roots"], 1, "{through}");
    let sampled = &through["told"]["sample"];
    assert_eq!(sampled["is_error"], true, "{through}");
    let text = sampled["text"].to_string();
    assert!(
        text.contains("-32603") && text.contains("cannot wait"),
        "{text}"
    );
    assert_eq!(through["called"]["sampling"], json!([]), "{through}");
}
