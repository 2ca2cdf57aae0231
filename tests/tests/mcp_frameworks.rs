//! The recipes of docs/agent-builders.md for agent frameworks, run: pydantic-ai, the OpenAI Agents SDK
//! and langchain-mcp-adapters (pinned in tests/frameworks/requirements.txt), each
//! driving `justonce serve` on stdio and on Streamable HTTP from an agent on a scripted
//! model, through tests/frameworks/recipes.py (see its docstring for the scenarios).
//! Every server refuses unscoped calls, so each recipe's line of glue is tested by
//! every call getting through. The pydantic-ai and Agents SDK recipes are the one-line
//! helpers of clients/python (`justonce_client`), imported from the checkout (the
//! package is pure Python: on `PYTHONPATH` it is what `pip install ./clients/python`
//! installs).
//!
//! The interpreter is `$JUSTONCE_FRAMEWORKS_PYTHON` (set by `.ci/run`), else a virtual
//! environment made under `target/tmp`. Without either the tests are skipped with a
//! message, and fail under `CI=true`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::support::install;

const RECIPES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/frameworks/recipes.py"
);
const REQUIREMENTS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/frameworks/requirements.txt"
);

/// The Python package of the client helpers, in the checkout.
const CLIENTS_PYTHON: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../clients/python");

/// What the appended note of a replay says first.
const REPLAY_NOTE: &str = "justonce: this call was already made earlier";

/// A Python with the three frameworks, or why there is none.
fn python() -> Result<PathBuf, String> {
    if let Some(python) = install::from_env("JUSTONCE_FRAMEWORKS_PYTHON") {
        return python;
    }
    let help = "install python3 with venv and pip (Debian: python3-venv), or set \
        JUSTONCE_FRAMEWORKS_PYTHON to a Python that has the packages of \
        tests/frameworks/requirements.txt (see .ci/run)";
    install::venv("frameworks-venv", Path::new(REQUIREMENTS), help)
        .map(|venv| install::venv_bin(&venv, "python"))
}

/// What a framework passes on to its model, as the pinned versions do.
struct Framework {
    /// recipes.py's name for it.
    name: &'static str,
    /// Whether a replay's appended note reaches the model. It does in all three:
    /// pydantic-ai 2.68 hands the model a result's `structuredContent` alone whenever
    /// all its content items are text, which is why the note is an embedded text
    /// resource, not a text item (as a text item it was dropped there, and a replay
    /// read as a first call).
    sees_the_replay_note: bool,
    /// Whether a tool result's error flag reaches the model (the Agents SDK passes
    /// the content on as output, error or not).
    sees_the_error_flag: bool,
    /// What the model is told when the server refuses an unscoped call: the glue
    /// line of its framework on that transport (stdio, HTTP); `None` where the
    /// framework replaces every JSON-RPC error with a fixed text of its own.
    refusal: Option<(&'static str, &'static str)>,
    /// Whether its recipe goes through a helper of clients/python, which raises the
    /// host's refusals to the developer as `justonce_client.Refused`.
    has_a_helper: bool,
}

const PYDANTIC_AI: Framework = Framework {
    name: "pydantic-ai",
    sees_the_replay_note: true,
    sees_the_error_flag: true,
    refusal: Some((
        "pydantic-ai: MCPToolset(transport, process_tool_call=lambda ctx, call_tool, name, args: call_tool(name, args, metadata=",
        "pydantic-ai: MCPToolset(url, headers=lambda ctx: {",
    )),
    has_a_helper: true,
};

const OPENAI_AGENTS: Framework = Framework {
    name: "openai-agents",
    sees_the_replay_note: true,
    sees_the_error_flag: false,
    refusal: None,
    has_a_helper: true,
};

const LANGCHAIN: Framework = Framework {
    name: "langchain",
    sees_the_replay_note: true,
    sees_the_error_flag: true,
    refusal: Some((
        "langchain-mcp-adapters: one server per conversation, args=[",
        "langchain-mcp-adapters: MultiServerMCPClient({",
    )),
    has_a_helper: false,
};

/// The Agents SDK's text for a tool that raised (its default failure_error_function).
const AGENTS_SDK_FAILURE: &str = "An error occurred while running the tool. Please try again.";

/// Runs recipes.py for `framework` on `transport`: its report, or `None` when the
/// test is skipped.
fn run(framework: &Framework, transport: &str) -> Option<Value> {
    let python = match python() {
        Ok(python) => python,
        Err(why) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("CI=true and no Python with the agent frameworks: {why}")
        }
        Err(why) => {
            eprintln!("skipped (no Python with the agent frameworks): {why}");
            return None;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(python)
        .arg(RECIPES)
        .args([framework.name, transport, env!("CARGO_BIN_EXE_justonce")])
        .arg(dir.path())
        .env_remove("JUSTONCE_TOOLS")
        .env_remove("JUSTONCE_DB")
        .env("PYTHONPATH", CLIENTS_PYTHON)
        .output()
        .expect("run recipes.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "recipes.py failed:\n{stdout}\n{stderr}"
    );
    Some(
        serde_json::from_str(stdout.trim())
            .unwrap_or_else(|e| panic!("the report is not JSON ({e}): {stdout}\n{stderr}")),
    )
}

/// One tool result the model was told: (tool-call id, text, error flag).
fn told(report: &Value, scenario: &str) -> Vec<Vec<(String, String, Value)>> {
    report[scenario]["told"]
        .as_array()
        .unwrap_or_else(|| panic!("no {scenario} in {report}"))
        .iter()
        .map(|turn| {
            turn.as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    (
                        r["id"].as_str().unwrap().to_owned(),
                        r["text"].as_str().unwrap().to_owned(),
                        r["error"].clone(),
                    )
                })
                .collect()
        })
        .collect()
}

/// What the payments API saw for a scenario's orders: (requests, distinct keys,
/// refund ids made).
fn payments(report: &Value, scenario: &str) -> (u64, u64, Vec<String>) {
    let seen = &report[scenario]["payments"];
    (
        seen["requests"].as_u64().unwrap(),
        seen["keys"].as_u64().unwrap(),
        seen["refunds"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap().to_owned())
            .collect(),
    )
}

/// The error flag the model saw, where the framework passes one on.
fn assert_error_flag(framework: &Framework, flag: &Value, error: bool, context: &str) {
    if framework.sees_the_error_flag {
        assert_eq!(*flag, Value::Bool(error), "{context}");
    } else {
        assert_eq!(*flag, Value::Null, "{context}");
    }
}

/// A success-shaped result for `refund_id` that is not a replay.
fn assert_first_success(
    framework: &Framework,
    result: &(String, String, Value),
    id: &str,
    refund_id: &str,
) {
    let (call, text, flag) = result;
    assert_eq!(call, id);
    assert_error_flag(framework, flag, false, text);
    assert!(
        text.contains(&format!("\"refund_id\":\"{refund_id}\"")) && text.contains("succeeded"),
        "{text}"
    );
    assert!(
        !text.contains("error") && !text.contains(REPLAY_NOTE),
        "{text}"
    );
}

/// The scenarios of recipes.py, asserted on its report.
fn assert_recipes(framework: &Framework, transport: &str) {
    let Some(report) = run(framework, transport) else {
        return;
    };

    // The seed's four assertions, the response lost by `serve --fault`: the refund
    // landed and the agent was told outcome_unknown, retry-safe; its retry (a new
    // tool-call id) reached the API under the same key; one refund; the model was
    // told success.
    let (requests, keys, refunds) = payments(&report, "lost");
    assert_eq!(
        (requests, keys, refunds.len()),
        (4, 1, 1),
        "three lost attempts and the retry, one key, one refund: {report}"
    );
    let lost = told(&report, "lost");
    assert_eq!(lost.len(), 2, "{lost:?}");
    assert_eq!(lost[0].len(), 1);
    let (call, text, flag) = &lost[0][0];
    assert_eq!(call, "call_1");
    assert_error_flag(framework, flag, true, text);
    assert!(
        text.contains("outcome_unknown")
            && text.contains("retry_safe")
            && text.contains("retrying the same call is safe"),
        "the model is told the retry is safe: {text}"
    );
    assert_eq!(lost[1].len(), 1);
    assert_first_success(framework, &lost[1][0], "call_2", &refunds[0]);

    // The opposite case: two different refunds are two.
    let (requests, keys, refunds) = payments(&report, "opposite");
    assert_eq!((requests, keys, refunds.len()), (2, 2, 2), "{report}");
    let opposite = told(&report, "opposite");
    assert_eq!(opposite.len(), 2, "{opposite:?}");
    assert_first_success(framework, &opposite[0][0], "call_1", &refunds[0]);
    assert_first_success(framework, &opposite[1][0], "call_2", &refunds[1]);

    // A parallel duplicate in one model response: one refund, both told it.
    let (requests, keys, refunds) = payments(&report, "parallel");
    assert_eq!((requests, keys, refunds.len()), (1, 1, 1), "{report}");
    let parallel = told(&report, "parallel");
    assert_eq!(parallel.len(), 1, "{parallel:?}");
    let mut ids: Vec<&str> = parallel[0].iter().map(|(id, _, _)| id.as_str()).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["call_1", "call_2"]);
    for (_, text, flag) in &parallel[0] {
        assert_error_flag(framework, flag, false, text);
        assert!(
            text.contains(&format!("\"refund_id\":\"{}\"", refunds[0])),
            "{text}"
        );
    }
    let notes = parallel[0]
        .iter()
        .filter(|(_, text, _)| text.contains(REPLAY_NOTE))
        .count();
    assert_eq!(
        notes,
        usize::from(framework.sees_the_replay_note),
        "the one that waited for the other is told it was a replay: {parallel:?}"
    );

    // The re-plan: the same refund under a new tool-call id is replayed, and the model
    // can tell.
    let (requests, keys, refunds) = payments(&report, "replan");
    assert_eq!((requests, keys, refunds.len()), (1, 1, 1), "{report}");
    let replan = told(&report, "replan");
    assert_eq!(replan.len(), 2, "{replan:?}");
    assert_first_success(framework, &replan[0][0], "call_1", &refunds[0]);
    let (call, text, flag) = &replan[1][0];
    assert_eq!(call, "call_2");
    assert_error_flag(framework, flag, false, text);
    assert!(
        text.contains(&format!("\"refund_id\":\"{}\"", refunds[0])),
        "{text}"
    );
    assert_eq!(
        text.contains(REPLAY_NOTE),
        framework.sees_the_replay_note,
        "what the model read of the replay: {text}"
    );

    // Without the glue: refused, nothing sent; the model is told the fix.
    let (requests, keys, refunds) = payments(&report, "unglued");
    assert_eq!((requests, keys, refunds.len()), (0, 0, 0), "{report}");
    let unglued = told(&report, "unglued");
    assert_eq!(unglued.len(), 1, "{unglued:?}");
    let (call, text, flag) = &unglued[0][0];
    assert_eq!(call, "call_1");
    assert_error_flag(framework, flag, true, text);
    match framework.refusal {
        Some((stdio, http)) => {
            let glue = if transport == "stdio" { stdio } else { http };
            assert!(
                text.contains("refuses calls that name no conversation") && text.contains(glue),
                "the refusal names {glue:?}: {text}"
            );
        }
        None => assert_eq!(text, AGENTS_SDK_FAILURE),
    }

    // Through a helper, a refusal of the host (here two conversations that disagree)
    // is raised to the developer with the host's message, and nothing ran.
    if framework.has_a_helper && transport == "http" {
        let refusal = &report["helper_refusal"];
        let message = refusal["raised"]["message"]
            .as_str()
            .unwrap_or_else(|| panic!("the helper raised no justonce_client.Refused: {refusal}"));
        assert!(
            message.contains("different conversations") && message.contains("nothing ran"),
            "{message}"
        );
        assert_eq!(refusal["payments"]["requests"], 0, "{refusal}");
    }
}

#[test]
fn pydantic_ai_on_stdio_retries_a_lost_response_once_downstream_and_replays_duplicates() {
    assert_recipes(&PYDANTIC_AI, "stdio");
}

#[test]
fn pydantic_ai_on_http_retries_a_lost_response_once_downstream_and_replays_duplicates() {
    assert_recipes(&PYDANTIC_AI, "http");
}

#[test]
fn the_openai_agents_sdk_on_stdio_retries_a_lost_response_once_downstream_and_replays_duplicates() {
    assert_recipes(&OPENAI_AGENTS, "stdio");
}

#[test]
fn the_openai_agents_sdk_on_http_retries_a_lost_response_once_downstream_and_replays_duplicates() {
    assert_recipes(&OPENAI_AGENTS, "http");
}

#[test]
fn langchain_mcp_adapters_on_stdio_retry_a_lost_response_once_downstream_and_replay_duplicates() {
    assert_recipes(&LANGCHAIN, "stdio");
}

#[test]
fn langchain_mcp_adapters_on_http_retry_a_lost_response_once_downstream_and_replay_duplicates() {
    assert_recipes(&LANGCHAIN, "http");
}

/// The helpers are versioned with the host: pyproject.toml's version and the
/// package's `__version__` are the workspace's.
#[test]
fn the_client_helpers_carry_the_hosts_version() {
    let pyproject = std::fs::read_to_string(format!("{CLIENTS_PYTHON}/pyproject.toml")).unwrap();
    let init =
        std::fs::read_to_string(format!("{CLIENTS_PYTHON}/justonce_client/__init__.py")).unwrap();
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        pyproject.contains(&format!("\nversion = \"{version}\"\n")),
        "pyproject.toml is not at {version}"
    );
    assert!(
        init.contains(&format!("__version__ = \"{version}\"")),
        "justonce_client.__version__ is not {version}"
    );
}
