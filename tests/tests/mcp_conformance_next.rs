//! The official MCP conformance suite's 0.2 line (npm `@modelcontextprotocol/
//! conformance@0.2.0-alpha.12`, pinned in tests/mcp/conformance-0.2/, beside the 0.1.16
//! of mcp_conformance.rs), which knows the stateless revision 2026-07-28, against
//! `justonce serve --http` with the conformance guests of tests/guests/.
//!
//! Two runs, each against a server and journal of its own (the suite calls the same
//! tools with the same arguments in both, and a second call would be a replay, which
//! runs nothing and so reports no progress): `--requirements 2026-07-28` (exactly the
//! scenarios that revision requires, plus the extensions' and pending ones, which it
//! reports as not scored) and `--spec-version 2025-11-25` (the session era). Every
//! check of every scenario that ran must pass, save the scenarios and checks listed
//! below as not applicable, each with its reason; and each one listed must have run,
//! so the lists stay what the suite runs.
//!
//! The Tasks extension's scenarios (`tasks-*`, SEP-2663) run against the tools of
//! tests/guests/conformance_{greet,slow_compute,failing_job,protocol_error_job,
//! confirm_delete,multi_input,tool_with_task}, with a bound of 600 ms before a call
//! becomes a task and `failing_job` and `test_tool_with_task` required to run as one
//! (`[mcp] task_after_ms`, `task_required`). `confirm_delete` and `multi_input` ask
//! after the bound, so their questions are their tasks' (`input_required`, answered
//! by `tasks/update`); `test_tool_with_task` asks at once, before its call is a
//! task, so its question is the call's (`tasks-mrtr-composition`).
//!
//! The input-required scenarios (`input-required-result-*`, SEP-2322: a tool asks
//! and the client answers with the same call again) run against the
//! `conformance_ask_*` guests, which ask with the Rust SDK's `ask_all`, each scenario
//! in a conversation of its own (`conversation.mjs` beside the pins): several make
//! the very same call, which to justonce would be one call, its outcome replayed.
//!
//! The suite is `$JUSTONCE_MCP_CONFORMANCE_NEXT` (its `dist/index.js`, installed by
//! `.ci/run`); without it the test installs it under `target/tmp` with `npm ci`, and if
//! it cannot, it skips with a message, or fails under `CI=true`. It runs with the
//! preloads of tests/mcp/conformance/ (mcp_conformance.rs says what they do).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::mcp_conformance::{GUESTS, PRELOADS};
use crate::support::install;
use crate::support::mcp_http::{HttpProcess, add_token};

const PINS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/mcp/conformance-0.2");

/// Why resources, prompts and completions do not apply: justonce serves tools only
/// (no resources, prompts or completions capability, so those methods are -32601).
const TOOLS_ONLY: &str = "justonce serves tools only: no resources, prompts or completions";
/// Why the input-required scenarios that ask the client's model do not apply: a tool
/// asks the person behind the agent (elicitation), never the client's model
/// (`sampling/createMessage`) nor its roots (`roots/list`).
const ASKS_THE_USER_ONLY: &str = "a tool asks the person behind the agent (elicitation); it cannot ask the client's model (sampling) or its roots (roots/list)";

/// The conformance guests of the Tasks extension's scenarios (`greet`,
/// `slow_compute`, `failing_job`, `protocol_error_job`, `confirm_delete`,
/// `multi_input`, `test_tool_with_task`) and `server-stateless`'s
/// `test_logging_tool`.
const TASK_GUESTS: &[&str] = &[
    justonce_tests::guests::CONFORMANCE_GREET_COMPONENT,
    justonce_tests::guests::CONFORMANCE_SLOW_COMPUTE_COMPONENT,
    justonce_tests::guests::CONFORMANCE_FAILING_JOB_COMPONENT,
    justonce_tests::guests::CONFORMANCE_PROTOCOL_ERROR_JOB_COMPONENT,
    justonce_tests::guests::CONFORMANCE_CONFIRM_DELETE_COMPONENT,
    justonce_tests::guests::CONFORMANCE_MULTI_INPUT_COMPONENT,
    justonce_tests::guests::CONFORMANCE_TOOL_WITH_TASK_COMPONENT,
    justonce_tests::guests::CONFORMANCE_LOGGING_TOOL_COMPONENT,
];

/// The tools of the input-required scenarios (SEP-2322, tools that ask over the
/// stateless wire): `test_input_required_result_{elicitation,request_state,
/// multi_round,tampered_state,capabilities}`, and `server-stateless`'s
/// `test_streaming_elicitation`, each a guest that asks with the Rust SDK's `ask_all`.
const ASK_GUESTS: &[&str] = &[
    justonce_tests::guests::CONFORMANCE_ASK_ELICITATION_COMPONENT,
    justonce_tests::guests::CONFORMANCE_ASK_REQUEST_STATE_COMPONENT,
    justonce_tests::guests::CONFORMANCE_ASK_MULTI_ROUND_COMPONENT,
    justonce_tests::guests::CONFORMANCE_ASK_TAMPERED_STATE_COMPONENT,
    justonce_tests::guests::CONFORMANCE_ASK_CAPABILITIES_COMPONENT,
    justonce_tests::guests::CONFORMANCE_STREAMING_ELICITATION_COMPONENT,
];

/// The scenarios that run as a conversation of their own (by name prefix, the
/// preload `conversation.mjs`): five input-required scenarios make the very same
/// call (`test_input_required_result_elicitation`, no arguments), which to justonce
/// would be one call, its outcome replayed, as five agents' runs would not be.
const OWN_CONVERSATION: &str = "input-required-result-";

/// The server's configuration: `slow_compute` with `seconds: 1` must become a task,
/// so the bound is below a second (and `confirm_delete` and `multi_input` ask after
/// it, a second in), yet long enough on a loaded machine for `test_tool_with_task`'s
/// question and `seconds: 0` to come back on the call itself; and `failing_job` and `test_tool_with_task` are the suite's tools that only
/// run as tasks.
const CONFIG: &str =
    "[mcp]\ntask_after_ms = 600\ntask_required = [\"failing_job\", \"test_tool_with_task\"]\n";

/// One run of the suite.
struct Run {
    /// What the run is called in the report.
    name: &'static str,
    /// The suite's arguments that select its scenarios.
    select: &'static [&'static str],
    /// Scenarios that do not apply, by name prefix, and why.
    not_applicable: &'static [(&'static str, &'static str)],
    /// Checks of applicable scenarios that do not apply: scenario, check id, why.
    checks_not_applicable: &'static [(&'static str, &'static str, &'static str)],
}

const RUNS: &[Run] = &[
    Run {
        name: "--requirements 2026-07-28",
        select: &["--requirements", "2026-07-28"],
        not_applicable: &[
            ("resources-", TOOLS_ONLY),
            ("prompts-", TOOLS_ONLY),
            ("completion-complete", TOOLS_ONLY),
            ("input-required-result-basic-sampling", ASKS_THE_USER_ONLY),
            ("input-required-result-basic-list-roots", ASKS_THE_USER_ONLY),
            (
                "input-required-result-multiple-input-requests",
                "its tool asks elicitation, sampling and roots/list at once: a tool asks the person behind the agent only (elicitation)",
            ),
            (
                "input-required-result-non-tool-request",
                "it asks from prompts/get: justonce serves tools only, no prompts",
            ),
            (
                "http-custom-header-server-validation",
                "no tool declares an x-mcp-header parameter (pending in the suite)",
            ),
        ],
        checks_not_applicable: &[
            ("caching", "sep-2549-prompts-list-caching-hints", TOOLS_ONLY),
            (
                "caching",
                "sep-2549-resources-list-caching-hints",
                TOOLS_ONLY,
            ),
            (
                "caching",
                "sep-2549-resources-templates-list-caching-hints",
                TOOLS_ONLY,
            ),
            (
                "server-stateless",
                "sep-2575-server-rejects-undeclared-capability",
                "needs the diagnostic tool test_missing_capability, which asks the client for sampling: a tool cannot",
            ),
            (
                "server-stateless",
                "sep-2575-missing-capability-http-400",
                "needs the diagnostic tool test_missing_capability (above)",
            ),
            (
                "input-required-result-capability-check",
                "sep-2322-respect-client-capabilities",
                "its tool must ask elicitation or sampling, whichever the client declared (it declares sampling only); a tool asks the person behind the agent only, so with elicitation undeclared the call is refused with -32021 naming it (SEP-2575), which the check scores as a failure",
            ),
        ],
    },
    Run {
        name: "--spec-version 2025-11-25",
        select: &["--spec-version", "2025-11-25"],
        not_applicable: &[
            ("resources-", TOOLS_ONLY),
            ("prompts-", TOOLS_ONLY),
            ("completion-complete", TOOLS_ONLY),
            ("tools-call-sampling", ASKS_THE_USER_ONLY),
        ],
        checks_not_applicable: &[],
    },
];

/// The suite's entry point, or why there is none.
fn suite() -> Result<PathBuf, String> {
    if let Some(path) = install::from_env("JUSTONCE_MCP_CONFORMANCE_NEXT") {
        return path;
    }
    let help = "install Node.js 20 or newer with npm, or set JUSTONCE_MCP_CONFORMANCE_NEXT to the \
        dist/index.js of the @modelcontextprotocol/conformance in tests/mcp/conformance-0.2/package-lock.json";
    let dir = install::npm_ci("mcp-conformance-0.2", Path::new(PINS), help)?;
    Ok(dir.join("node_modules/@modelcontextprotocol/conformance/dist/index.js"))
}

/// What one scenario's checks came to.
#[derive(Debug, Default)]
struct Outcome {
    passed: usize,
    /// The failed checks: id and message.
    failed: Vec<(String, String)>,
}

/// Runs the suite once against a fresh server and reads each scenario's
/// `checks.json` from its output directory.
fn run_suite(suite: &Path, run: &Run, dir: &Path) -> BTreeMap<String, Outcome> {
    let db = dir.join("state.db");
    std::fs::write(dir.join("justonce.toml"), CONFIG).unwrap();
    let token = add_token(&db, "conformance");
    let tools = dir.join("tools");
    std::fs::create_dir(&tools).unwrap();
    for guest in GUESTS.iter().chain(TASK_GUESTS).chain(ASK_GUESTS) {
        let guest = Path::new(guest);
        std::fs::copy(guest, tools.join(guest.file_name().unwrap())).unwrap();
    }
    let server = HttpProcess::spawn(&db, &["--tools", tools.to_str().unwrap()]);
    let results = dir.join("results");
    let out = Command::new("node")
        .arg("--import")
        .arg(Path::new(PRELOADS).join("globsync.mjs"))
        .arg("--import")
        .arg(Path::new(PRELOADS).join("bearer.mjs"))
        .arg("--import")
        .arg(Path::new(PINS).join("conversation.mjs"))
        .arg(suite)
        .args(["server", "--url", &format!("http://{}/mcp", server.addr)])
        .args(run.select)
        .arg("--output-dir")
        .arg(&results)
        .env("JUSTONCE_CONFORMANCE_TOKEN", &token)
        .env("JUSTONCE_CONFORMANCE_OWN_CONVERSATION", OWN_CONVERSATION)
        .env("NO_COLOR", "1")
        .output()
        .expect("run node");
    let mut outcomes = BTreeMap::new();
    let entries = std::fs::read_dir(&results).unwrap_or_else(|e| {
        panic!(
            "{}: no results ({e}):\n{}\n{}",
            run.name,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    for entry in entries {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        // `server-<scenario>-<timestamp>`, the timestamp 24 characters
        // (2026-12-03T14-40-31-569Z).
        let scenario = name
            .strip_prefix("server-")
            .and_then(|rest| rest.get(..rest.len().checked_sub(25)?))
            .unwrap_or_else(|| panic!("not a scenario's results: {name}"))
            .to_owned();
        let checks: Vec<Value> = serde_json::from_slice(
            &std::fs::read(entry.path().join("checks.json")).expect("checks.json"),
        )
        .expect("checks.json is JSON");
        let outcome: &mut Outcome = outcomes.entry(scenario).or_default();
        for check in &checks {
            match check["status"].as_str() {
                Some("SUCCESS") => outcome.passed += 1,
                Some("FAILURE") => outcome.failed.push((
                    check["id"].as_str().unwrap_or("?").to_owned(),
                    check["errorMessage"].as_str().unwrap_or("").to_owned(),
                )),
                _ => {}
            }
        }
    }
    outcomes
}

#[test]
fn every_applicable_scenario_of_the_suites_0_2_line_passes_in_both_eras() {
    let suite = match suite() {
        Ok(suite) => suite,
        Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("no MCP conformance suite (0.2) under CI: {e}")
        }
        Err(e) => {
            eprintln!("skipping the MCP conformance suite (0.2): {e}");
            return;
        }
    };
    let mut problems = Vec::new();
    for (i, run) in RUNS.iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().join(i.to_string());
        std::fs::create_dir(&dir).unwrap();
        let outcomes = run_suite(&suite, run, &dir);
        let reason = |scenario: &str| {
            run.not_applicable
                .iter()
                .find(|(prefix, _)| scenario.starts_with(prefix))
                .map(|(_, why)| *why)
        };
        let (mut applicable, mut scored_passed, mut scored_failed) = (0, 0, 0);
        for (scenario, outcome) in &outcomes {
            if let Some(why) = reason(scenario) {
                eprintln!(
                    "{}: {scenario} not applicable ({} passed, {} failed): {why}",
                    run.name,
                    outcome.passed,
                    outcome.failed.len()
                );
                continue;
            }
            applicable += 1;
            for (id, message) in &outcome.failed {
                match run
                    .checks_not_applicable
                    .iter()
                    .find(|(s, c, _)| s == scenario && c == id)
                {
                    Some((_, _, why)) => {
                        eprintln!("{}: {scenario}: check {id} not applicable: {why}", run.name)
                    }
                    None => {
                        scored_failed += 1;
                        problems.push(format!("{}: {scenario}: {id}: {message}", run.name));
                    }
                }
            }
            scored_passed += outcome.passed;
        }
        eprintln!(
            "{}: {} scenarios ran, {applicable} applicable: {scored_passed} checks passed, {scored_failed} failed",
            run.name,
            outcomes.len()
        );
        assert!(applicable > 0, "{}: no applicable scenario ran", run.name);
        // The lists name what the suite runs (a renamed scenario or check would
        // otherwise be excused silently).
        for (prefix, _) in run.not_applicable {
            if !outcomes.keys().any(|s| s.starts_with(prefix)) {
                problems.push(format!("{}: no scenario {prefix}* ran", run.name));
            }
        }
        for (scenario, check, _) in run.checks_not_applicable {
            if !outcomes
                .get(*scenario)
                .is_some_and(|o| o.failed.iter().any(|(id, _)| id == check))
            {
                problems.push(format!(
                    "{}: {scenario}: check {check} is listed as not applicable but did not fail: take it off the list",
                    run.name
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
