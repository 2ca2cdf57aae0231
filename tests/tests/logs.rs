//! The CLI's log: JSON lines that carry the call's key with
//! `JUSTONCE_LOG_FORMAT=json`, and no colour codes when stderr is not a terminal.

use std::process::Output;

use justonce_tests::guests::CHATTY_COMPONENT;
use serde_json::Value;

use crate::support::cli::{json_of, justonce_command};

fn run_chatty(format: Option<&str>) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let mut command = justonce_command(Some(&dir.path().join("state.db")));
    command
        .args(["run", CHATTY_COMPONENT, "--args", r#"{"lines":2}"#])
        .env("JUSTONCE_LOG", "info");
    match format {
        Some(format) => command.env("JUSTONCE_LOG_FORMAT", format),
        None => command.env_remove("JUSTONCE_LOG_FORMAT"),
    };
    command.output().unwrap()
}

#[test]
fn json_lines_carry_the_invocation_key_of_the_call() {
    let out = run_chatty(Some("json"));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let key = json_of(&out)["key"].as_str().unwrap().to_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<Value> = stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let guest: Vec<&Value> = lines
        .iter()
        .filter(|l| l["target"] == "justonce::guest")
        .collect();
    assert!(!guest.is_empty(), "the tool's output is logged: {stderr}");
    for line in guest {
        assert_eq!(line["spans"][0]["name"], "call", "{line}");
        assert_eq!(line["spans"][0]["invocation"], key.as_str(), "{line}");
        assert_eq!(line["spans"][0]["tool"], "chatty", "{line}");
    }
}

#[test]
fn text_lines_have_no_colour_codes_off_a_terminal() {
    let out = run_chatty(None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("chatty: the quick brown fox"),
        "logged: {stderr}"
    );
    assert!(!stderr.contains('\u{1b}'), "no ANSI escapes: {stderr:?}");
}

#[test]
fn an_unknown_log_format_is_bad_input() {
    let out = run_chatty(Some("xml"));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`xml`"));
}
