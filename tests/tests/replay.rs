//! `justonce replay` on recorded assistant messages in both providers' forms
//! (fixtures in tests/fixtures/replay/), end to end through the binary.

use crate::support::cli::justonce_command;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::db::{journal, mailbox_count};

const FORMATS: [&str; 2] = ["openai", "anthropic"];

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/replay")
        .join(name)
}

/// What `justonce replay` printed and its exit code.
struct Replayed {
    output: Value,
    code: Option<i32>,
}

fn replay(db: &Path, file: &Path, args: &[&str]) -> Replayed {
    let out = justonce_command(Some(db))
        .arg("replay")
        .arg(file)
        .args(args)
        .output()
        .expect("run justonce replay");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let output = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    Replayed {
        output,
        code: out.status.code(),
    }
}

/// One tool result read back from either form: the call id, the `justonce run`
/// JSON it carries, and the provider's error flag (Anthropic only).
#[derive(Debug)]
struct ToolResult {
    id: String,
    content: Value,
    is_error: Option<bool>,
}

impl Replayed {
    /// The tool results, checking the envelope of `format` on the way.
    fn results(&self, format: &str) -> Vec<ToolResult> {
        let parse = |text: &Value| {
            serde_json::from_str(text.as_str().expect("content is a string")).unwrap()
        };
        match format {
            "openai" => self
                .output
                .as_array()
                .expect("OpenAI results are an array of messages")
                .iter()
                .map(|m| {
                    assert_eq!(m["role"], "tool", "{m}");
                    ToolResult {
                        id: m["tool_call_id"].as_str().unwrap().into(),
                        content: parse(&m["content"]),
                        is_error: None,
                    }
                })
                .collect(),
            "anthropic" => {
                assert_eq!(self.output["role"], "user", "{}", self.output);
                self.output["content"]
                    .as_array()
                    .expect("one user message of blocks")
                    .iter()
                    .map(|b| {
                        assert_eq!(b["type"], "tool_result", "{b}");
                        ToolResult {
                            id: b["tool_use_id"].as_str().unwrap().into(),
                            content: parse(&b["content"]),
                            is_error: Some(b["is_error"].as_bool().expect("is_error is a bool")),
                        }
                    })
                    .collect()
            }
            other => panic!("unknown format {other}"),
        }
    }
}

/// The tool-call ids of a fixture, in order, read independently of justonce.
fn call_ids(format: &str, file: &Path) -> Vec<String> {
    let message: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let ids = match format {
        "openai" => {
            let message = message
                .get("choices")
                .map_or(&message, |c| &c[0]["message"]);
            message["tool_calls"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["id"].clone())
                .collect::<Vec<_>>()
        }
        _ => message["content"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["type"] == "tool_use")
            .map(|b| b["id"].clone())
            .collect(),
    };
    ids.iter()
        .map(|id| id.as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn two_identical_parallel_calls_in_one_message_send_one_email() {
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("state.db");
        let file = fixture(&format!("{format}_duplicate_calls.json"));
        let run = replay(&db, &file, &[]);
        assert_eq!(run.code, Some(0), "{format}: {}", run.output);
        let results = run.results(format);

        let ids: Vec<String> = results.iter().map(|r| r.id.clone()).collect();
        assert_eq!(
            ids,
            call_ids(format, &file),
            "{format}: answers in the order of the calls"
        );
        assert!(
            results
                .iter()
                .all(|r| r.content["ok"] == true && r.is_error != Some(true)),
            "{format}: {results:?}"
        );
        assert_eq!(
            results[0].content["key"], results[1].content["key"],
            "{format}: one key"
        );
        assert_eq!(
            results[0].content["result"], results[1].content["result"],
            "{format}: the same answer"
        );
        assert_eq!(
            results
                .iter()
                .filter(|r| r.content["replayed"] == true)
                .count(),
            1,
            "{format}: one ran"
        );
        assert_eq!(mailbox_count(&db), 1, "{format}: one email");
        let journal = journal(&db);
        assert_eq!(journal.len(), 1, "{format}");
        let mut aliases: Vec<String> = journal[0]["tool_call_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().into())
            .collect();
        aliases.sort();
        let mut expected = ids;
        expected.sort();
        assert_eq!(
            aliases, expected,
            "{format}: both tool-call ids map to the one invocation"
        );
    }
}

#[test]
fn two_different_calls_in_one_message_both_happen() {
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("state.db");
        let run = replay(
            &db,
            &fixture(&format!("{format}_different_calls.json")),
            &[],
        );
        assert_eq!(run.code, Some(0), "{format}: {}", run.output);
        let results = run.results(format);
        assert_eq!(results.len(), 2);
        assert!(
            results
                .iter()
                .all(|r| r.content["ok"] == true && r.content["replayed"] == false),
            "{format}: {results:?}"
        );
        assert_ne!(
            results[0].content["key"], results[1].content["key"],
            "{format}"
        );
        assert_eq!(mailbox_count(&db), 2, "{format}: two emails");
    }
}

#[test]
fn malformed_arguments_are_a_tool_error_for_that_call_and_the_others_run() {
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("state.db");
        let run = replay(
            &db,
            &fixture(&format!("{format}_malformed_arguments.json")),
            &[],
        );
        assert_eq!(
            run.code,
            Some(2),
            "{format}: the exit code of bad input: {}",
            run.output
        );
        let results = run.results(format);
        let bad = &results[0];
        assert_eq!(bad.content["ok"], false, "{format}: {bad:?}");
        assert_eq!(bad.content["error"]["kind"], "invalid_arguments");
        let message = bad.content["error"]["message"].as_str().unwrap();
        let why = if format == "openai" {
            "not valid JSON"
        } else {
            "input must be an object"
        };
        assert!(message.contains(why), "{format}: {message}");
        if format == "anthropic" {
            assert_eq!(bad.is_error, Some(true));
            assert_eq!(results[1].is_error, Some(false));
        }
        assert_eq!(
            results[1].content["ok"], true,
            "{format}: the other call ran"
        );
        assert_eq!(
            mailbox_count(&db),
            1,
            "{format}: only the good call sent an email"
        );
        assert_eq!(
            journal(&db).len(),
            1,
            "{format}: nothing stored for the malformed call"
        );
    }
}

#[test]
fn replaying_the_same_message_again_replays_every_outcome() {
    for format in FORMATS {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("state.db");
        let file = fixture(&format!("{format}_different_calls.json"));
        let first = replay(&db, &file, &["--conversation", "conv-r"]).results(format);
        let again = replay(&db, &file, &["--conversation", "conv-r"]).results(format);
        for (a, b) in first.iter().zip(&again) {
            assert_eq!(
                b.content["replayed"], true,
                "{format}: the retry happened and was replayed: {b:?}"
            );
            assert_eq!(a.content["key"], b.content["key"], "{format}: the same key");
            assert_eq!(
                a.content["result"], b.content["result"],
                "{format}: the agent is told the same"
            );
        }
        assert_eq!(mailbox_count(&db), 2, "{format}: no email sent twice");

        let elsewhere = replay(&db, &file, &["--conversation", "conv-s"]).results(format);
        assert!(
            elsewhere.iter().all(|r| r.content["replayed"] == false),
            "{format}: another conversation runs anew"
        );
        assert_eq!(mailbox_count(&db), 4);
    }
}

#[test]
fn a_message_that_cannot_be_read_is_refused_with_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let refuse = |file: &Path, args: &[&str]| {
        let out = justonce_command(Some(&db))
            .arg("replay")
            .arg(file)
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        assert!(out.stdout.is_empty());
        String::from_utf8(out.stderr).unwrap()
    };
    let stderr = refuse(
        &fixture("openai_different_calls.json"),
        &["--format", "anthropic"],
    );
    assert!(
        stderr.contains("Anthropic message: content must be an array"),
        "{stderr}"
    );
    let plain = dir.path().join("plain.json");
    std::fs::write(&plain, r#"{"role":"assistant","content":"Done."}"#).unwrap();
    let stderr = refuse(&plain, &[]);
    assert!(stderr.contains("neither an OpenAI"), "{stderr}");
    let stderr = refuse(&dir.path().join("missing.json"), &[]);
    assert!(stderr.contains("cannot read"), "{stderr}");
}
