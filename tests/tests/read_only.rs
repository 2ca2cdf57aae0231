//! Tools that only read: marked read-only through the SDK, nothing of their calls is
//! saved, every call runs, and one that asks for an effect is stopped with a trap.

use justonce::{CallRequest, Outcome};
use justonce_tests::guests::READ_ONLY_COMPONENT;
use serde_json::json;

use crate::support::cli::{json_of, justonce_command};
use crate::support::mcp::{McpProcess, VERSION, result};
use crate::support::test_host;

#[test]
fn two_identical_calls_of_a_read_only_tool_both_run_and_nothing_is_saved() {
    let t = test_host(|b| b);
    let request = CallRequest::new("read_only", r#"{"account":"a1"}"#).conversation("c1");

    let first = t.host.call(&request).unwrap();
    let second = t.host.call(&request).unwrap();

    assert!(!first.replayed && !second.replayed, "no replay");
    let nonce = |outcome: &Outcome| match outcome {
        Outcome::Success { result, .. } => result["nonce"].clone(),
        other => panic!("expected a success, got {other:?}"),
    };
    assert_ne!(
        nonce(&first.outcome),
        nonce(&second.outcome),
        "the second call ran too"
    );
    assert!(
        t.host.journal(None, 10).unwrap().is_empty(),
        "nothing saved"
    );
}

#[test]
fn a_read_only_tool_that_asks_for_an_effect_is_stopped_with_a_trap() {
    let t = test_host(|b| b);
    let request = CallRequest::new("read_only", r#"{"account":"a1","write":true}"#);

    let answer = t.host.call(&request).unwrap();

    match &answer.outcome {
        Outcome::Trap { reason, message } => {
            assert_eq!(reason, "read_only_effect");
            assert!(
                message.contains("`read_only` is marked read-only") && message.contains("kv.put"),
                "{message}"
            );
        }
        other => panic!("expected a trap, got {other:?}"),
    }
    assert!(
        t.host.journal(None, 10).unwrap().is_empty(),
        "nothing saved"
    );
    let written = t
        .host
        .inspect_sqlite(|c| c.query_row("SELECT COUNT(*) FROM kv", [], |r| r.get::<_, i64>(0)))
        .unwrap();
    assert_eq!(written, 0, "the effect was not performed");
}

#[test]
fn tools_list_marks_a_read_only_tool_read_only_and_hides_the_mark_from_its_schema() {
    let dir = tempfile::tempdir().unwrap();
    let listed = json_of(
        &justonce_command(Some(&dir.path().join("state.db")))
            .args(["tools", "--json", READ_ONLY_COMPONENT])
            .output()
            .unwrap(),
    );
    assert_eq!(listed[0]["readOnly"], true, "{listed}");
    assert_eq!(listed[0]["retention"], json!(null));
    assert!(
        listed[0]["inputSchema"]
            .get("x-justonce-read-only")
            .is_none()
    );

    let tools = dir.path().join("tools");
    std::fs::create_dir(&tools).unwrap();
    std::fs::copy(READ_ONLY_COMPONENT, tools.join("read_only.wasm")).unwrap();
    std::fs::write(dir.path().join("justonce.toml"), "tools_dir = \"tools\"\n").unwrap();
    let mut server = McpProcess::spawn(&dir.path().join("state.db"), &[], "warn");
    server.client.initialize(VERSION);
    let list = server.client.request("tools/list", json!({}));
    let tool = &result(&list)["tools"][0];
    assert_eq!(tool["name"], "read_only");
    assert_eq!(
        tool["annotations"],
        json!({ "readOnlyHint": true }),
        "{tool}"
    );
    assert!(tool["inputSchema"].get("x-justonce-read-only").is_none());
}
