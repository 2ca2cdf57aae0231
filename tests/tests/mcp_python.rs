//! A real MCP client that no one here wrote: the official Python SDK (PyPI `mcp`,
//! pinned in tests/mcp/requirements.txt) drives `justonce serve` over stdio and over
//! Streamable HTTP (its `streamable_http_client`, with a bearer token), each once
//! through its default negotiation (`server/discover`, the stateless 2026-07-28
//! revision) and once through the `initialize` handshake.
//!
//! The interpreter is `$JUSTONCE_MCP_PYTHON` (set by `.ci/run`); without it the test
//! builds a virtual environment under `target/tmp` with `python3 -m venv` and `pip`,
//! once, and fails with what to do if it cannot.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::LazyLock;

use serde_json::Value;

use crate::support::db::mailbox_count;
use crate::support::install;
use crate::support::mcp_http::{HttpProcess, add_token};

const CLIENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/mcp/client.py");
const REQUIREMENTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/mcp/requirements.txt");

pub(crate) static PYTHON: LazyLock<Result<PathBuf, String>> = LazyLock::new(python_with_the_sdk);

fn python_with_the_sdk() -> Result<PathBuf, String> {
    if let Some(python) = install::from_env("JUSTONCE_MCP_PYTHON") {
        return python;
    }
    let help = "install python3 with venv and pip (Debian: python3-venv), or set \
        JUSTONCE_MCP_PYTHON to a Python that has the packages of tests/mcp/requirements.txt (see .ci/run)";
    install::venv("mcp-venv", Path::new(REQUIREMENTS), help).map(|venv| interpreter(&venv))
}

fn interpreter(venv: &Path) -> PathBuf {
    install::venv_bin(venv, "python")
}

/// How the Python client reaches the server.
#[derive(Clone, Copy)]
enum Transport {
    /// It starts `justonce serve` itself.
    Stdio,
    /// `justonce serve --http` runs with these extra arguments; the client connects
    /// with a token.
    Http(&'static [&'static str]),
}

/// Runs tests/mcp/client.py in `mode` against a fresh database; its report and the
/// database.
fn drive(mode: &str, transport: Transport) -> (Value, tempfile::TempDir, PathBuf) {
    let python = PYTHON
        .as_ref()
        .unwrap_or_else(|e| panic!("no Python with the MCP SDK: {e}"));
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let mut command = Command::new(python);
    command.arg(CLIENT).arg(mode);
    let _server = match transport {
        Transport::Stdio => {
            command
                .arg("stdio")
                .arg(env!("CARGO_BIN_EXE_justonce"))
                .arg(&db);
            None
        }
        Transport::Http(args) => {
            let token = add_token(&db, "python");
            let server = HttpProcess::spawn(&db, args);
            command
                .arg("http")
                .arg(format!("http://{}/mcp", server.addr))
                .arg(token);
            Some(server)
        }
    };
    let report = client_report(command.arg("conv-python").env_remove("JUSTONCE_TOOLS"));
    (report, dir, db)
}

/// Runs a Python client script and reads the one JSON object it prints, failing
/// the test with what it said when it fails.
pub(crate) fn client_report(command: &mut Command) -> Value {
    let out = command.output().expect("run the Python client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the Python client failed:\n{stdout}\n{stderr}"
    );
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("the client's report is not JSON ({e}): {stdout}\n{stderr}"))
}

fn emails_for_order(db: &Path, order: u64) -> i64 {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row(
        "SELECT COUNT(*) FROM mailbox WHERE subject = ?1",
        [format!("Receipt for order {order}")],
        |r| r.get(0),
    )
    .unwrap()
}

/// What every run must show: the tools, one email for the duplicate pair, two in all,
/// and the second call told it was replayed, under the first call's key.
fn assert_one_email_for_the_duplicate(report: &Value, db: &Path) {
    let tools = report["tools"].as_array().unwrap();
    let receipt = tools
        .iter()
        .find(|t| t["name"] == "send_receipt")
        .expect("send_receipt is listed");
    assert_eq!(receipt["idempotent_hint"], true);

    let calls = report["calls"].as_array().unwrap();
    let meta = |i: usize, key: &str| calls[i]["meta"][format!("dev.justonce/{key}")].clone();
    assert!(calls.iter().all(|c| c["is_error"] == false), "{calls:?}");
    assert_eq!(meta(0, "replayed"), false);
    assert_eq!(meta(1, "replayed"), true, "the second result says replayed");
    assert_eq!(
        meta(1, "key"),
        meta(0, "key"),
        "both attempts carried the same key"
    );
    let told = calls[1]["text"].as_array().unwrap();
    assert_eq!(
        told[..told.len() - 1],
        calls[0]["text"].as_array().unwrap()[..],
        "the agent is told the same, byte for byte"
    );
    assert!(
        told.last()
            .unwrap()
            .as_str()
            .unwrap()
            .contains("already made"),
        "and that it was done earlier: {told:?}"
    );
    assert_eq!(calls[1]["structured"], calls[0]["structured"]);
    assert_eq!(calls[0]["structured"]["sent"][0]["order_id"], 4417);
    assert_eq!(meta(2, "replayed"), false);
    assert_ne!(meta(2, "key"), meta(0, "key"));

    assert_eq!(
        emails_for_order(db, 4417),
        1,
        "one email for the duplicate pair"
    );
    assert_eq!(mailbox_count(db), 2, "two in all");
}

#[test]
fn the_python_sdk_negotiates_the_stateless_revision_and_a_repeated_call_sends_one_email() {
    let (report, _dir, db) = drive("auto", Transport::Stdio);
    assert_eq!(report["protocol_version"], "2026-07-28", "{report}");
    assert_eq!(report["server_name"], "justonce");
    assert_one_email_for_the_duplicate(&report, &db);
}

#[test]
fn the_python_sdk_over_the_initialize_handshake_sends_one_email_for_a_repeated_call() {
    let (report, _dir, db) = drive("legacy", Transport::Stdio);
    assert_eq!(report["protocol_version"], "2025-11-25", "{report}");
    assert_one_email_for_the_duplicate(&report, &db);
}

#[test]
fn the_python_sdk_over_streamable_http_negotiates_the_stateless_revision_and_sends_one_email() {
    let (report, _dir, db) = drive("auto", Transport::Http(&[]));
    assert_eq!(report["protocol_version"], "2026-07-28", "{report}");
    assert_eq!(report["server_name"], "justonce");
    assert_one_email_for_the_duplicate(&report, &db);
    assert_all_calls_were_the_principals(&db, "python");
}

#[test]
fn the_python_sdk_over_streamable_http_with_a_session_and_sse_sends_one_email() {
    let (report, _dir, db) = drive("legacy", Transport::Http(&["--sse"]));
    assert_eq!(report["protocol_version"], "2025-11-25", "{report}");
    assert_one_email_for_the_duplicate(&report, &db);
    assert_all_calls_were_the_principals(&db, "python");
}

/// Every invocation in the journal at `db` was made by `principal`.
fn assert_all_calls_were_the_principals(db: &Path, principal: &str) {
    let conn = rusqlite::Connection::open(db).unwrap();
    let scopes: Vec<String> = conn
        .prepare("SELECT scope FROM invocations")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(scopes.len(), 2, "{scopes:?}");
    let expected = justonce::principal_scope(principal, "conv-python");
    assert!(scopes.iter().all(|s| *s == expected), "{scopes:?}");
}
