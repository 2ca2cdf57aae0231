//! The official MCP conformance suite (npm `@modelcontextprotocol/conformance`,
//! pinned in tests/mcp/conformance/package-lock.json) against `justonce serve
//! --http`: every server scenario that applies to a server of guarded tools.
//!
//! The suite is `$JUSTONCE_MCP_CONFORMANCE` (its `dist/index.js`, installed by
//! `.ci/run`); without it the test installs it under `target/tmp` with `npm ci`, and
//! if it cannot, it skips with a message, or fails under `CI=true`. It runs with two
//! preloads of tests/mcp/conformance/, the suite itself unmodified: `globsync.mjs`
//! gives Node 20 the `fs.globSync` of Node 22 that the suite imports, and
//! `bearer.mjs` adds the bearer token the server requires to the suite's requests.
//!
//! The server serves the conformance guests of tests/guests/ (`conformance_*`), which
//! implement the suite's tools (`test_*`, `json_schema_2020_12_tool`) with the Rust
//! SDK, like any tool: the `tools-call-*` scenarios exercise the SDK's rich results,
//! logging and progress, not a special path.
//!
//! `server-sse-polling` runs against a second server, started with `--sse
//! --sse-hold-ms 0`: it answers the suite's `test_reconnection` (the
//! `conformance_reconnection` guest) on a stream that it ends after the priming
//! event, and the suite must fetch the answer with `Last-Event-ID`; for it, a warning
//! fails too (the suite reports a resumption that did not work as one).
//!
//! `json-schema-2020-12` (SEP-1613) lists `json_schema_2020_12_tool` (the
//! `conformance_json_schema` guest) and checks that its input schema keeps `$schema`,
//! `$defs` and `additionalProperties: false`: `tools/list` shows each schema in the
//! portable form of `runtime/portable_schema.rs` (`$ref`s inlined, formats a model's
//! strict mode accepts) with the tool's own `$schema`, and its `$defs` by name (each
//! definition made portable too), kept beside it.
//!
//! `tools-call-elicitation`, `elicitation-sep1034-defaults` and
//! `elicitation-sep1330-enums` call tools that ask the user (the
//! `conformance_elicitation*` guests, with the SDK's `ask`): the server sends the
//! suite's client `elicitation/create` on the call's stream, in the session the
//! client opened, and the call goes on with the answer it POSTs back.
//!
//! The suite drives servers over HTTP only (`server --url`), so stdio is covered by
//! the Python SDK's tests instead. Scenarios that do not apply:
//! - `resources-*`, `prompts-*`, `completion-complete`: justonce serves tools only (no
//!   resources, prompts or completions capability).
//! - `tools-call-sampling`: a tool asks the person behind the agent (elicitation),
//!   never the client's model.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::install;
use crate::support::mcp_http::{HttpProcess, add_token};

/// The scenarios that apply, all of which must pass.
const SCENARIOS: &[&str] = &[
    "server-initialize",
    "ping",
    "tools-list",
    "logging-set-level",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
    "tools-call-simple-text",
    "tools-call-error",
    "tools-call-with-logging",
    "tools-call-with-progress",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "json-schema-2020-12",
    "tools-call-elicitation",
    "elicitation-sep1034-defaults",
    "elicitation-sep1330-enums",
];

/// The scenarios run against the server that ends call streams after priming (SSE
/// polling); they must pass without warnings.
const POLLING_SCENARIOS: &[&str] = &["server-sse-polling"];

/// The conformance guests, which implement the suite's tools (`test_*` and
/// `json_schema_2020_12_tool`).
pub(crate) const GUESTS: &[&str] = &[
    justonce_tests::guests::CONFORMANCE_SIMPLE_TEXT_COMPONENT,
    justonce_tests::guests::CONFORMANCE_ERROR_COMPONENT,
    justonce_tests::guests::CONFORMANCE_LOGGING_COMPONENT,
    justonce_tests::guests::CONFORMANCE_PROGRESS_COMPONENT,
    justonce_tests::guests::CONFORMANCE_IMAGE_COMPONENT,
    justonce_tests::guests::CONFORMANCE_AUDIO_COMPONENT,
    justonce_tests::guests::CONFORMANCE_EMBEDDED_RESOURCE_COMPONENT,
    justonce_tests::guests::CONFORMANCE_MIXED_CONTENT_COMPONENT,
    justonce_tests::guests::CONFORMANCE_RECONNECTION_COMPONENT,
    justonce_tests::guests::CONFORMANCE_JSON_SCHEMA_COMPONENT,
    justonce_tests::guests::CONFORMANCE_ELICITATION_COMPONENT,
    justonce_tests::guests::CONFORMANCE_ELICITATION_DEFAULTS_COMPONENT,
    justonce_tests::guests::CONFORMANCE_ELICITATION_ENUMS_COMPONENT,
];

/// The preloads of tests/mcp/conformance/ (see the module docs).
pub(crate) const PRELOADS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/mcp/conformance");

/// The suite's entry point, or why there is none.
fn suite() -> Result<PathBuf, String> {
    if let Some(path) = install::from_env("JUSTONCE_MCP_CONFORMANCE") {
        return path;
    }
    let help = "install Node.js 20 or newer with npm, or set JUSTONCE_MCP_CONFORMANCE to the \
        dist/index.js of the @modelcontextprotocol/conformance in tests/mcp/conformance/package-lock.json";
    let dir = install::npm_ci("mcp-conformance", Path::new(PRELOADS), help)?;
    Ok(dir.join("node_modules/@modelcontextprotocol/conformance/dist/index.js"))
}

#[test]
fn every_applicable_server_scenario_of_the_official_suite_passes_against_serve_http() {
    let suite = match suite() {
        Ok(suite) => suite,
        Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("no MCP conformance suite under CI: {e}")
        }
        Err(e) => {
            eprintln!("skipping the MCP conformance suite: {e}");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let token = add_token(&db, "conformance");
    let tools = dir.path().join("tools");
    std::fs::create_dir(&tools).unwrap();
    for guest in GUESTS {
        let guest = Path::new(guest);
        std::fs::copy(guest, tools.join(guest.file_name().unwrap())).unwrap();
    }
    let server = HttpProcess::spawn(&db, &["--tools", tools.to_str().unwrap()]);
    // A database of its own, started once the other is up (its own token).
    std::fs::create_dir(dir.path().join("polling")).unwrap();
    let polling_db = dir.path().join("polling/state.db");
    let polling_token = add_token(&polling_db, "conformance");
    let polling = HttpProcess::spawn(
        &polling_db,
        &[
            "--tools",
            tools.to_str().unwrap(),
            "--sse",
            "--sse-hold-ms",
            "0",
        ],
    );
    let runs = SCENARIOS.iter().map(|s| (s, &server, &token, false)).chain(
        POLLING_SCENARIOS
            .iter()
            .map(|s| (s, &polling, &polling_token, true)),
    );
    let mut failed = Vec::new();
    for (scenario, server, token, no_warnings) in runs {
        let url = format!("http://{}/mcp", server.addr);
        let out = Command::new("node")
            .arg("--import")
            .arg(Path::new(PRELOADS).join("globsync.mjs"))
            .arg("--import")
            .arg(Path::new(PRELOADS).join("bearer.mjs"))
            .arg(&suite)
            .args(["server", "--url", &url, "--scenario", scenario])
            // Every check's details, to tell why a resumption did not work.
            .args(no_warnings.then_some("--verbose"))
            .env("JUSTONCE_CONFORMANCE_TOKEN", token)
            .env("NO_COLOR", "1")
            .output()
            .expect("run node");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let summary = stdout
            .lines()
            .find_map(|l| l.strip_prefix("Passed: "))
            .unwrap_or("")
            .to_owned();
        // "Passed: N/N, 0 failed, …" with N > 0: something was checked, all of it passed.
        let all_passed = summary
            .split_once(',')
            .and_then(|(counts, rest)| {
                let (passed, total) = counts.split_once('/')?;
                let rest = rest.trim();
                let warned = no_warnings && !rest.ends_with(" 0 warnings");
                Some(passed == total && passed != "0" && rest.starts_with("0 failed") && !warned)
            })
            .unwrap_or(false);
        if !out.status.success() || !all_passed {
            failed.push(format!(
                "{scenario}: {}\n{stdout}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} scenarios failed:\n{}",
        failed.len(),
        SCENARIOS.len() + POLLING_SCENARIOS.len(),
        failed.join("\n")
    );
}
