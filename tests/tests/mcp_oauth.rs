//! `serve --http` as an OAuth 2.1 resource server, driven by clients no one here
//! wrote: the official MCP Python SDK's OAuth client (tests/oauth/client.py, in the
//! SDK's environment of tests/mcp_python.rs) against an authorization server the test
//! starts (tests/oauth/authorization_server.py, on authlib, pinned in
//! tests/oauth/requirements.txt). The SDK discovers everything from the server's 401:
//! the Protected Resource Metadata, the authorization server's metadata, dynamic
//! registration, the authorization-code grant with PKCE, the token; then it calls.
//!
//! The authorization server's interpreter is `$JUSTONCE_OAUTH_PYTHON` (set by
//! `.ci/run`); without it the test builds a virtual environment under `target/tmp`
//! once, and fails with what to do if it cannot.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::LazyLock;

use serde_json::{Value, json};

use crate::mcp_python::PYTHON;
use crate::support::cli::justonce_command;
use crate::support::db::mailbox_count;
use crate::support::install;
use crate::support::mcp_http::{HttpClient, HttpProcess, add_token};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/oauth");

static AS_PYTHON: LazyLock<Result<PathBuf, String>> = LazyLock::new(|| {
    if let Some(python) = install::from_env("JUSTONCE_OAUTH_PYTHON") {
        return python;
    }
    let help = "install python3 with venv and pip (Debian: python3-venv), or set \
        JUSTONCE_OAUTH_PYTHON to a Python that has the packages of tests/oauth/requirements.txt (see .ci/run)";
    let requirements = Path::new(DIR).join("requirements.txt");
    install::venv("oauth-venv", &requirements, help).map(|venv| install::venv_bin(&venv, "python"))
});

/// Starts `command` and reads the first line it prints (empty if it ends first).
fn first_line(command: &mut Command, stderr: Stdio) -> (Child, String) {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("start the process");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .expect("read its first line");
    (child, line)
}

/// The authorization server, killed when dropped.
struct AuthorizationServer {
    child: Child,
    issuer: String,
}

impl AuthorizationServer {
    fn start() -> Self {
        let python = AS_PYTHON
            .as_ref()
            .unwrap_or_else(|e| panic!("no Python with authlib: {e}"));
        let (child, issuer) = first_line(
            Command::new(python).arg(Path::new(DIR).join("authorization_server.py")),
            Stdio::null(),
        );
        let issuer = issuer.trim().to_owned();
        assert!(
            issuer.starts_with("http://127.0.0.1:"),
            "not an issuer: {issuer:?}"
        );
        Self { child, issuer }
    }
}

impl Drop for AuthorizationServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn journal(db: &Path, principal: &str) -> Value {
    let out = justonce_command(Some(db))
        .args(["journal", "--principal", principal, "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_python_sdks_oauth_client_discovers_authorizes_and_calls_and_other_tokens_are_refused() {
    let authorization = AuthorizationServer::start();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let ci_bot = add_token(&db, "ci-bot");
    // A static token named as the issuer's user is: not the same principal.
    let static_ada = add_token(&db, "ada");
    let server = HttpProcess::spawn(
        &db,
        &[
            "--oauth-issuer",
            &authorization.issuer,
            "--oauth-scope",
            "mcp:tools",
        ],
    );
    let url = format!("http://{}/mcp", server.addr);
    let python = PYTHON
        .as_ref()
        .unwrap_or_else(|e| panic!("no Python with the MCP SDK: {e}"));
    let out = Command::new(python)
        .arg(Path::new(DIR).join("client.py"))
        .arg(&url)
        .arg(&authorization.issuer)
        .output()
        .expect("run the OAuth client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the OAuth client failed:\n{stdout}\n{stderr}"
    );
    let report: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("the client's report is not JSON ({e}): {stdout}\n{stderr}"));

    // No token: 401, naming where the metadata is; the metadata names the issuer.
    let metadata_url = format!(
        "http://{}/.well-known/oauth-protected-resource/mcp",
        server.addr
    );
    assert_eq!(report["anonymous"]["status"], 401, "{report}");
    assert_eq!(
        report["anonymous"]["www_authenticate"],
        format!("Bearer resource_metadata=\"{metadata_url}\", scope=\"mcp:tools\"")
    );
    assert_eq!(
        report["metadata"],
        json!({
            "resource": url,
            "authorization_servers": [authorization.issuer],
            "bearer_methods_supported": ["header"],
            "scopes_supported": ["mcp:tools"],
        })
    );
    // A good signature from the right issuer, for another resource: refused.
    let elsewhere = &report["other_audience"];
    assert_eq!(elsewhere["status"], 401, "{report}");
    let challenge = elsewhere["www_authenticate"].as_str().unwrap();
    assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
    let why = elsewhere["body"]["error"]["message"].as_str().unwrap();
    assert!(
        why.contains("https://other.example/mcp") && why.contains("not this resource"),
        "{why}"
    );

    // This resource's token without the required scope: 403, naming the scope.
    let narrow = &report["without_the_scope"];
    assert_eq!(narrow["status"], 403, "{report}");
    let challenge = narrow["www_authenticate"].as_str().unwrap();
    assert!(
        challenge.contains("error=\"insufficient_scope\"")
            && challenge.ends_with("scope=\"mcp:tools\""),
        "{challenge}"
    );

    // The SDK's own flow: one authorization, for this resource, then the calls.
    let oauth = &report["oauth"];
    assert_eq!(oauth["authorization_requests"], 1, "{report}");
    assert_eq!(oauth["resource_asked"], url);
    assert_eq!(oauth["scope_asked"], "mcp:tools");
    assert_eq!(oauth["registered"], true);
    assert!(
        oauth["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("send_receipt"))
    );
    let calls = oauth["calls"].as_array().unwrap();
    assert!(calls.iter().all(|c| c["is_error"] == false), "{calls:?}");
    assert_eq!(calls[0]["meta"]["dev.justonce/replayed"], false);
    assert_eq!(calls[1]["meta"]["dev.justonce/replayed"], true);
    assert_eq!(mailbox_count(&db), 1, "one email for the repeated call");

    // The principal is the token's subject after the default prefix, and keys are
    // scoped by it: the same call by another user of the same issuer is that user's
    // own.
    let ada = journal(&db, "oauth:ada");
    assert_eq!(ada.as_array().unwrap().len(), 1, "{ada}");
    assert_eq!(ada[0]["key"], calls[0]["meta"]["dev.justonce/key"]);
    assert_eq!(ada[0]["conversation"], "conv-oauth");
    assert_eq!(ada[0]["principal"], "oauth:ada");
    let bob_token = report["bob_token"].as_str().unwrap().to_owned();
    let order =
        json!({"orders": [{"order_id": 5150, "email": "ada@example.com", "amount_cents": 700}]});
    let bobs = HttpClient::new(server.addr, Some(bob_token))
        .call(
            "send_receipt",
            order.clone(),
            json!({"_meta": {"dev.justonce/conversation": "conv-oauth"}}),
        )
        .tool_result();
    assert_eq!(bobs["_meta"]["dev.justonce/replayed"], false);
    assert_ne!(
        bobs["_meta"]["dev.justonce/key"],
        calls[0]["meta"]["dev.justonce/key"]
    );
    assert_eq!(mailbox_count(&db), 2);
    assert_eq!(journal(&db, "oauth:bob").as_array().unwrap().len(), 1);
    let static_adas = HttpClient::new(server.addr, Some(static_ada))
        .call(
            "send_receipt",
            order,
            json!({"_meta": {"dev.justonce/conversation": "conv-oauth"}}),
        )
        .tool_result();
    assert_eq!(
        static_adas["_meta"]["dev.justonce/replayed"], false,
        "the static token ada got the OAuth user ada's answer"
    );
    assert_eq!(mailbox_count(&db), 3);

    // A token of the tokens file still works beside OAuth.
    let listed = HttpClient::new(server.addr, Some(ci_bot)).stateless("tools/list", json!({}));
    assert_eq!(listed.status, 200, "{listed:?}");
    assert!(listed.message()["result"]["tools"].is_array(), "{listed:?}");
}

#[test]
fn an_oauth_principal_prefix_a_token_name_could_start_with_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    // `""` (a subject `alice` is the static token alice) and a prefix of token-name
    // characters (`corp.alice` can be a token's name too).
    for prefix in ["", "corp."] {
        std::fs::write(
            dir.path().join("justonce.toml"),
            format!(
                "[oauth]\nissuer = \"http://127.0.0.1:9/oauth\"\nprincipal_prefix = {prefix:?}\n"
            ),
        )
        .unwrap();
        let (mut child, line) = first_line(
            justonce_command(Some(&db)).args(["serve", "--http", "127.0.0.1:0"]),
            Stdio::piped(),
        );
        if !line.is_empty() {
            let _ = child.kill();
            let _ = child.wait();
            panic!("served with the principal prefix {prefix:?}: {line}");
        }
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{prefix:?}: {stderr}");
        assert!(
            stderr.contains("principal prefix") && stderr.contains("justonce.toml"),
            "{prefix:?}: {stderr}"
        );
    }
}
