//! The recipes of docs/agent-builders.md for agent frameworks, run: pydantic-ai, the OpenAI Agents SDK
//! and langchain-mcp-adapters (pinned in tests/frameworks/requirements.txt) and LlamaIndex's
//! `llama-index-tools-mcp` (tests/frameworks/llamaindex/requirements.txt, a venv of its
//! own: it needs mcp 2, langchain-mcp-adapters mcp 1), each driving `justonce serve` on
//! stdio and on Streamable HTTP from an agent on a scripted model, through
//! tests/frameworks/recipes.py and recipes_llama_index.py (see harness.py for the
//! scenarios). Every server refuses unscoped calls, so each recipe's line of glue is
//! tested by every call getting through. Every recipe is the one-line helper of
//! clients/python (`justonce_client`), imported from the checkout (the package is pure
//! Python: on `PYTHONPATH` it is what `pip install ./clients/python` installs, which
//! `a_pip_installed_client_runs_a_recipe` checks).
//!
//! The interpreters are `$JUSTONCE_FRAMEWORKS_PYTHON` and `$JUSTONCE_LLAMAINDEX_PYTHON`
//! (set by `.ci/run`), else virtual environments made under `target/tmp`. Without them
//! the tests are skipped with a message, and fail under `CI=true`.

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
const LLAMA_INDEX_RECIPES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/frameworks/recipes_llama_index.py"
);
const LLAMA_INDEX_REQUIREMENTS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/frameworks/llamaindex/requirements.txt"
);

/// The Python package of the client helpers, in the checkout.
const CLIENTS_PYTHON: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../clients/python");

/// What the appended note of a replay says first.
const REPLAY_NOTE: &str = "justonce: this call was already made earlier";

/// Which venv a framework's recipe runs in.
#[derive(Clone, Copy)]
enum Venv {
    /// tests/frameworks/requirements.txt: pydantic-ai, the Agents SDK, langchain.
    Frameworks,
    /// tests/frameworks/llamaindex/requirements.txt.
    LlamaIndex,
}

/// A Python with the frameworks of `venv`, or why there is none.
fn python(venv: Venv) -> Result<PathBuf, String> {
    let (variable, name, requirements) = match venv {
        Venv::Frameworks => (
            "JUSTONCE_FRAMEWORKS_PYTHON",
            "frameworks-venv",
            REQUIREMENTS,
        ),
        Venv::LlamaIndex => (
            "JUSTONCE_LLAMAINDEX_PYTHON",
            "llamaindex-venv",
            LLAMA_INDEX_REQUIREMENTS,
        ),
    };
    if let Some(python) = install::from_env(variable) {
        return python;
    }
    let help = format!(
        "install python3 with venv and pip (Debian: python3-venv), or set {variable} to a \
         Python that has the packages of {requirements} (see .ci/run)"
    );
    install::venv(name, Path::new(requirements), &help)
        .map(|venv| install::venv_bin(&venv, "python"))
}

/// Where a refusal of the host (`-32602`) lands without the helper.
enum Refusal {
    /// With the model, the host's message with the glue of the framework's line on
    /// that transport (stdio, HTTP) in it.
    Told(&'static str, &'static str),
    /// With the model, as a fixed text of the framework's own: the fix reaches no one.
    Hidden(&'static str),
}

/// What a framework passes on to its model, as the pinned versions do.
struct Framework {
    /// recipes.py's name for it.
    name: &'static str,
    /// The script of its recipe, and the venv it runs in.
    recipes: &'static str,
    venv: Venv,
    /// Whether a replay's appended note reaches the model. It does in all three:
    /// pydantic-ai 2.68 hands the model a result's `structuredContent` alone whenever
    /// all its content items are text, which is why the note is an embedded text
    /// resource, not a text item (as a text item it was dropped there, and a replay
    /// read as a first call).
    sees_the_replay_note: bool,
    /// Whether a tool result's error flag reaches the model (the Agents SDK passes
    /// the content on as output, error or not).
    sees_the_error_flag: bool,
    /// Where the server's refusal of an unscoped call lands without the helper. With
    /// the helper every refusal is raised to the developer as `justonce_client.Refused`.
    refusal: Refusal,
}

const PYDANTIC_AI: Framework = Framework {
    name: "pydantic-ai",
    recipes: RECIPES,
    venv: Venv::Frameworks,
    sees_the_replay_note: true,
    sees_the_error_flag: true,
    refusal: Refusal::Told(
        "pydantic-ai: MCPToolset(transport, process_tool_call=lambda ctx, call_tool, name, args: call_tool(name, args, metadata=",
        "pydantic-ai: MCPToolset(url, headers=lambda ctx: {",
    ),
};

const OPENAI_AGENTS: Framework = Framework {
    name: "openai-agents",
    recipes: RECIPES,
    venv: Venv::Frameworks,
    sees_the_replay_note: true,
    sees_the_error_flag: false,
    // The SDK's default failure_error_function.
    refusal: Refusal::Hidden("An error occurred while running the tool. Please try again."),
};

const LANGCHAIN: Framework = Framework {
    name: "langchain",
    recipes: RECIPES,
    venv: Venv::Frameworks,
    sees_the_replay_note: true,
    sees_the_error_flag: true,
    refusal: Refusal::Told(
        "langchain-mcp-adapters: one server per conversation, args=[",
        "langchain-mcp-adapters: MultiServerMCPClient({",
    ),
};

const LLAMA_INDEX: Framework = Framework {
    name: "llama-index",
    recipes: LLAMA_INDEX_RECIPES,
    venv: Venv::LlamaIndex,
    sees_the_replay_note: true,
    // Kept in its ToolOutput, not in the message the model reads.
    sees_the_error_flag: false,
    // The MCP client's task group wraps the JSON-RPC error, and the agent hands the
    // model the group's text.
    refusal: Refusal::Hidden("unhandled errors in a TaskGroup (1 sub-exception)"),
};

/// A Python with the frameworks of `venv`, or `None` when the test is skipped.
fn python_or_skip(venv: Venv) -> Option<PathBuf> {
    match python(venv) {
        Ok(python) => Some(python),
        Err(why) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("CI=true and no Python with the agent frameworks: {why}")
        }
        Err(why) => {
            eprintln!("skipped (no Python with the agent frameworks): {why}");
            None
        }
    }
}

/// Runs the recipes of `framework` on `transport`, the helpers from the checkout: its
/// report, or `None` when the test is skipped.
fn run(framework: &Framework, transport: &str) -> Option<Value> {
    let python = python_or_skip(framework.venv)?;
    Some(run_with(
        &python,
        framework,
        transport,
        Some(CLIENTS_PYTHON),
    ))
}

/// Runs the recipes of `framework` on `transport` with `python`, `justonce_client`
/// from `pythonpath` (else as installed in that Python): its report.
fn run_with(
    python: &Path,
    framework: &Framework,
    transport: &str,
    pythonpath: Option<&str>,
) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let mut command = Command::new(python);
    command
        .arg(framework.recipes)
        .args([framework.name, transport, env!("CARGO_BIN_EXE_justonce")])
        .arg(dir.path())
        .env_remove("JUSTONCE_TOOLS")
        .env_remove("JUSTONCE_DB")
        .env_remove("PYTHONPATH");
    // The tests' ledger upstream (pydantic-ai's `unknown` scenario) runs on the MCP SDK's venv.
    if let Ok(mcp) = crate::mcp_gateway::python() {
        command.env("JUSTONCE_MCP_PYTHON", mcp);
    }
    if let Some(pythonpath) = pythonpath {
        command.env("PYTHONPATH", pythonpath);
    }
    let out = command.output().expect("run the recipes");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the recipes failed:\n{stdout}\n{stderr}"
    );
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("the report is not JSON ({e}): {stdout}\n{stderr}"))
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
    assert_report(framework, transport, &report);
}

/// The scenarios of the recipes, asserted on their `report`.
fn assert_report(framework: &Framework, transport: &str, report: &Value) {
    let report = report.clone();

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
        Refusal::Told(stdio, http) => {
            let glue = if transport == "stdio" { stdio } else { http };
            assert!(
                text.contains("refuses calls that name no conversation") && text.contains(glue),
                "the refusal names {glue:?}: {text}"
            );
        }
        Refusal::Hidden(fixed) => assert_eq!(text, fixed),
    }

    // Through the helper, a refusal of the host (here two conversations that
    // disagree) is raised out of the run to the developer, as justonce_client.Refused
    // itself (no framework caught it or handed it to the model), with the host's
    // message; nothing ran.
    if transport == "http" {
        let refusal = &report["helper_refusal"];
        let message = refusal["raised"]["message"]
            .as_str()
            .unwrap_or_else(|| panic!("the helper raised no justonce_client.Refused: {refusal}"));
        assert!(
            message.contains("different conversations") && message.contains("nothing ran"),
            "{message}"
        );
        assert_eq!(refusal["raised"]["raised_as"], "Refused", "{refusal}");
        assert_eq!(refusal["payments"]["requests"], 0, "{refusal}");
    }
}

/// Issue 56, through pydantic-ai: an unannotated (unkeyed) upstream write tool whose
/// answer is lost after the line landed, which no probe can decide. The model reads
/// that it must stop and tell the user, and a model that retries anyway reads it again,
/// while nothing is sent downstream a second time: one call, one line.
fn assert_the_model_stops_for_an_unknown(report: &Value) {
    let unknown = &report["unknown"];
    let told = unknown["told"]
        .as_array()
        .unwrap_or_else(|| panic!("{report}"));
    assert_eq!(told.len(), 2, "{unknown}");
    for (turn, id) in told.iter().zip(["call_1", "call_2"]) {
        let result = &turn[0];
        assert_eq!(result["id"], id, "{unknown}");
        assert_eq!(result["error"], true, "{unknown}");
        let text = result["text"].as_str().unwrap();
        assert!(
            text.contains("Stop retrying this call")
                && text.contains("Tell the user that this action may or may not have taken effect"),
            "the model is told to stop and tell the user: {text}"
        );
        assert!(!text.contains("wait about"), "no wait-and-retry: {text}");
    }
    assert_eq!(unknown["upstream"]["calls"], 1, "sent once: {unknown}");
    assert_eq!(
        unknown["upstream"]["lines"],
        serde_json::json!(["paid invoice 4417"]),
        "{unknown}"
    );
}

/// pydantic-ai's recipes, with the unknown of issue 56 (which needs the MCP SDK's
/// Python for the tests' ledger upstream).
fn assert_pydantic_ai_recipes(transport: &str) {
    if crate::mcp_gateway::needed("Python with the MCP SDK", &crate::mcp_gateway::python())
        .is_none()
    {
        return;
    }
    let Some(report) = run(&PYDANTIC_AI, transport) else {
        return;
    };
    assert_report(&PYDANTIC_AI, transport, &report);
    assert_the_model_stops_for_an_unknown(&report);
}

#[test]
fn pydantic_ai_on_stdio_retries_a_lost_response_once_downstream_and_replays_duplicates() {
    assert_pydantic_ai_recipes("stdio");
}

#[test]
fn pydantic_ai_on_http_retries_a_lost_response_once_downstream_and_replays_duplicates() {
    assert_pydantic_ai_recipes("http");
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

#[test]
fn llama_index_on_stdio_retries_a_lost_response_once_downstream_and_replays_duplicates() {
    assert_recipes(&LLAMA_INDEX, "stdio");
}

#[test]
fn llama_index_on_http_retries_a_lost_response_once_downstream_and_replays_duplicates() {
    assert_recipes(&LLAMA_INDEX, "http");
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

/// `pip install` of clients/python (a copy of it, so the checkout gets no build
/// files) into a throwaway venv under target/ that sees the frameworks' venv: the
/// installed package carries the host's version and is the one a recipe then runs
/// with, no `PYTHONPATH`. pip builds the package with setuptools from the registry
/// (build isolation: the venvs have no `wheel`).
#[test]
fn a_pip_installed_client_runs_a_recipe() {
    let Some(frameworks) = python_or_skip(Venv::Frameworks) else {
        return;
    };
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let venv = dir.path().join("venv");
    let ok = |command: &mut Command| {
        let out = command.output().unwrap();
        assert!(out.status.success(), "{command:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    ok(Command::new(&frameworks).args(["-m", "venv"]).arg(&venv));
    let python = install::venv_bin(&venv, "python");
    let site = |python: &Path| {
        ok(Command::new(python).args([
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        ]))
        .trim()
        .to_owned()
    };
    // The frameworks, seen through a .pth file (a venv made from a venv with
    // --system-site-packages would see the base Python's packages, not these).
    std::fs::write(
        Path::new(&site(&python)).join("frameworks.pth"),
        site(&frameworks) + "\n",
    )
    .unwrap();
    let source = dir.path().join("clients-python");
    ok(Command::new("cp")
        .arg("-r")
        .arg(CLIENTS_PYTHON)
        .arg(&source));
    ok(Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
        ])
        .arg(&source)
        .env_remove("PYTHONPATH"));

    let installed = ok(Command::new(&python)
        .args([
            "-c",
            "import importlib.metadata, justonce_client; \
             print(importlib.metadata.version('justonce-client'), justonce_client.__version__, justonce_client.__file__)",
        ])
        .current_dir(dir.path())
        .env_remove("PYTHONPATH"));
    let version = env!("CARGO_PKG_VERSION");
    let fields: Vec<&str> = installed.split_whitespace().collect();
    assert_eq!(fields[..2], [version, version], "{installed}");
    assert!(
        Path::new(fields[2]).starts_with(site(&python)),
        "justonce_client is imported from the venv: {installed}"
    );

    let report = run_with(&python, &PYDANTIC_AI, "stdio", None);
    assert_report(&PYDANTIC_AI, "stdio", &report);
}

/// The official TypeScript SDK (`@modelcontextprotocol/sdk`, pinned in
/// tests/mcp/upstreams/) needs no helper: `_meta` on `callTool` is the one line that
/// names the conversation, a refusal rejects the call with the host's `-32602` and its
/// fix (the developer's exception, not the model's text), its default request timeout
/// (60 s) is above the host's waits, and the result's content carries the note. Run by
/// tests/mcp/typescript/client.mjs on stdio and on HTTP, against a server that refuses
/// unscoped calls: the same call again in the conversation is replayed and told so, the
/// same call in another conversation is a second one.
#[test]
fn the_typescript_sdk_names_the_conversation_in_one_line_and_rejects_with_the_refusal() {
    let Some(memory) = crate::mcp_gateway::needed(
        "the npm upstreams",
        &crate::mcp_gateway::installed("server-memory"),
    ) else {
        return;
    };
    // node_modules/@modelcontextprotocol/server-memory/dist/index.js → …/sdk
    let sdk = memory.ancestors().nth(3).unwrap().join("sdk");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("http.json");
    std::fs::write(
        &config,
        r#"{"services": {"webhooks": "http://127.0.0.1:9"}, "allow": {"notify": ["http://127.0.0.1:9"]}}"#,
    )
    .unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/mcp/typescript/client.mjs"
    );
    let config = config.to_str().unwrap();
    let report = |args: &[&str]| -> Value {
        let out = Command::new("node")
            .arg(script)
            .arg(&sdk)
            .args(args)
            .output()
            .expect("run node");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
    };

    let stdio_db = dir.path().join("stdio.db");
    let stdio = report(&[
        "stdio",
        env!("CARGO_BIN_EXE_justonce"),
        stdio_db.to_str().unwrap(),
        config,
    ]);
    let http_db = dir.path().join("http.db");
    let token = crate::support::mcp_http::add_token(&http_db, "agent");
    let server = crate::support::mcp_http::HttpProcess::spawn(
        &http_db,
        &["--http-config", config, "--unscoped", "refuse"],
    );
    let url = format!("http://{}/mcp", server.addr);
    let http = report(&["http", &url, &token]);

    for report in [stdio, http] {
        let text = |name: &str| {
            report[name]["text"]
                .as_str()
                .unwrap_or_else(|| panic!("{report}"))
                .to_owned()
        };
        assert_eq!(report["first"]["isError"], false, "{report}");
        assert!(
            text("first").contains(r#""message_id":1"#) && !text("first").contains(REPLAY_NOTE),
            "{report}"
        );
        assert!(
            text("again").contains(r#""message_id":1"#) && text("again").contains(REPLAY_NOTE),
            "the same call in the conversation is replayed, and the text says so: {report}"
        );
        assert!(
            text("other").contains(r#""message_id":2"#) && !text("other").contains(REPLAY_NOTE),
            "another conversation is another call: {report}"
        );
        let rejected = &report["unnamed"]["rejected"];
        assert_eq!(rejected["code"], -32602, "{report}");
        assert!(
            rejected["message"]
                .as_str()
                .unwrap()
                .contains("refuses calls that name no conversation"),
            "{report}"
        );
    }
}
