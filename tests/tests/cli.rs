//! The `justonce` binary end to end, as an agent's harness would run it.

use serde_json::Value;

use crate::support::cli::justonce_command;
use crate::support::db::mailbox_count;
use crate::support::process::{json_of, justonce};

const ARGS: &str =
    r#"{"orders":[{"order_id":4417,"email":"ada@example.com","amount_cents":1299}]}"#;

#[test]
fn two_run_processes_with_the_same_call_make_one_effect_and_the_second_is_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let run = |call_id: &str| {
        justonce(
            &db,
            &[
                "run",
                "send_receipt",
                "--args",
                ARGS,
                "--conversation",
                "conv-1",
                "--call-id",
                call_id,
            ],
            None,
        )
    };
    let first = run("call_1");
    assert_eq!(
        first.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let first = json_of(&first);
    assert_eq!(first["ok"], true);
    assert_eq!(first["replayed"], false);

    let second = run("call_2");
    assert_eq!(second.status.code(), Some(0));
    let second = json_of(&second);
    assert_eq!(second["replayed"], true);
    assert_eq!(second["key"], first["key"]);
    assert_eq!(second["result"], first["result"]);
    assert_eq!(mailbox_count(&db), 1, "one email");

    let other = justonce(
        &db,
        &[
            "run",
            "send_receipt",
            "--args",
            &ARGS.replace("4417", "4418"),
            "--conversation",
            "conv-1",
        ],
        None,
    );
    let other = json_of(&other);
    assert_eq!(other["replayed"], false);
    assert_ne!(other["key"], first["key"]);
    assert_eq!(mailbox_count(&db), 2, "a different call is a second email");
}

#[test]
fn two_concurrent_run_processes_make_one_effect() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    // Create the database first so both processes open an existing file.
    justonce(&db, &["gc"], None);
    let spawn = || {
        justonce_command(Some(&db))
            .args([
                "run",
                "send_receipt",
                "--args",
                ARGS,
                "--conversation",
                "conv-2",
            ])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let outputs = [a.wait_with_output().unwrap(), b.wait_with_output().unwrap()];
    let results: Vec<Value> = outputs.iter().map(json_of).collect();
    assert!(results.iter().all(|r| r["ok"] == true), "{results:?}");
    assert_eq!(results[0]["key"], results[1]["key"]);
    assert_eq!(results.iter().filter(|r| r["replayed"] == true).count(), 1);
    assert_eq!(mailbox_count(&db), 1);
}

#[test]
fn two_run_processes_with_one_explicit_key_and_other_arguments_give_one_success_and_one_mismatch() {
    // One key, one answer, across processes: whichever commits first wins, and the
    // other process, whose arguments differ, is told `mismatch`, never its own success.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    justonce(&db, &["gc"], None);
    let other = ARGS.replace("4417", "4418");
    let spawn = |args: &str, key: &str| {
        justonce_command(Some(&db))
            .args(["run", "send_receipt", "--args", args, "--key", key])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(ARGS, "order-batch-7"), spawn(&other, "order-batch-7"));
    let outputs = [a.wait_with_output().unwrap(), b.wait_with_output().unwrap()];
    let results: Vec<Value> = outputs.iter().map(json_of).collect();
    let successes = results.iter().filter(|r| r["ok"] == true).count();
    let mismatches = results
        .iter()
        .filter(|r| r["error"]["kind"] == "mismatch")
        .count();
    assert_eq!((successes, mismatches), (1, 1), "{results:?}");
    assert!(results.iter().all(|r| r["replayed"] != true), "{results:?}");
    assert_eq!(mailbox_count(&db), 1, "one effect");

    // The opposite: another key with the same arguments in both processes gives one
    // more effect and one answer, told to both.
    let (a, b) = (spawn(ARGS, "order-batch-8"), spawn(ARGS, "order-batch-8"));
    let outputs = [a.wait_with_output().unwrap(), b.wait_with_output().unwrap()];
    let results: Vec<Value> = outputs.iter().map(json_of).collect();
    assert!(results.iter().all(|r| r["ok"] == true), "{results:?}");
    assert_eq!(results[0]["result"], results[1]["result"]);
    assert_eq!(results.iter().filter(|r| r["replayed"] == true).count(), 1);
    assert_eq!(mailbox_count(&db), 2, "one more effect");
}

#[test]
fn run_reports_bad_input_with_its_exit_code_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let out = justonce(&db, &["run", "send_receipt", "--args", "{not json"], None);
    assert_eq!(out.status.code(), Some(2));
    let v = json_of(&out);
    assert_eq!(v["error"]["kind"], "invalid_arguments");
    let out = justonce(&db, &["run", "no_such_tool", "--args", "{}"], None);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(json_of(&out)["error"]["kind"], "unknown_tool");
    let journal = justonce(&db, &["journal", "--json"], None);
    assert_eq!(json_of(&journal), serde_json::json!([]));
}

/// `justonce journal | head`: a reader that goes away ends the command quietly, by
/// SIGPIPE as Unix tools do, not with a panic and its backtrace.
#[test]
fn a_command_whose_reader_went_away_ends_quietly() {
    use std::os::unix::process::ExitStatusExt;

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let ran = justonce(&db, &["run", "send_receipt", "--args", ARGS], None);
    assert_eq!(ran.status.code(), Some(0));
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = justonce_command(Some(&db))
        .arg("journal")
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(
        out.status.signal(),
        Some(13),
        "ended by SIGPIPE: {:?}",
        out.status
    );
}

#[test]
fn key_prints_the_invocation_key_that_run_uses() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let key = justonce(
        &db,
        &["key", "send_receipt", "--args", ARGS, "--conversation", "c"],
        None,
    );
    assert!(key.status.success());
    let key = String::from_utf8(key.stdout).unwrap();
    let run = json_of(&justonce(
        &db,
        &["run", "send_receipt", "--args", ARGS, "--conversation", "c"],
        None,
    ));
    assert_eq!(run["key"], key.trim());
    assert_eq!(key.trim().len(), 32);
    assert_eq!(mailbox_count(&db), 1);
}

#[test]
fn tools_json_lists_the_example_tools_with_their_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let out = justonce(&dir.path().join("state.db"), &["tools", "--json"], None);
    assert!(out.status.success());
    let tools = json_of(&out);
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["notify", "refund", "send_receipt"]);
    let schema = &tools[2]["inputSchema"];
    assert!(schema["properties"]["orders"].is_object(), "{schema}");
    // Fully portable, for pasting into a model API: unlike `tools/list`, no dialect
    // keywords (send_receipt declares `$defs`).
    for dropped in ["$schema", "$defs", "$ref"] {
        assert!(!schema.to_string().contains(dropped), "{dropped}: {schema}");
    }
}

#[test]
fn demo_shows_the_retry_and_one_email() {
    let dir = tempfile::tempdir().unwrap();
    // A directory that does not exist yet, as `.justonce/` on a fresh checkout.
    let db = dir.path().join(".justonce").join("state.db");
    let out = justonce(&db, &["demo"], None);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("attempt 2"), "{stdout}");
    assert!(
        stdout.contains("2 email(s) sent for 2 orders, 1 refund(s)"),
        "{stdout}"
    );
    // The refund went over HTTP to a local payments API that lost its first response,
    // and the webhook's lost delivery response was followed by one more delivery.
    assert!(stdout.contains("attempt 2  Idempotency-Key:"), "{stdout}");
    assert!(
        stdout.contains("1 webhook(s) received for 1 notification"),
        "{stdout}"
    );
    assert_eq!(mailbox_count(&db), 2);
    // Its last line runs as printed, and shows the demo's calls.
    let hint = stdout
        .lines()
        .find_map(|line| line.strip_prefix("See it all with: "))
        .expect("the hint");
    let mut words = hint.split_whitespace();
    let journal = std::process::Command::new(words.next().unwrap())
        .args(words)
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&journal.stdout);
    assert!(journal.status.success(), "{hint}: {listed}");
    assert!(
        listed.contains("send_receipt") && listed.trim_end().ends_with("4 call(s)"),
        "{hint}: {listed}"
    );
}

#[test]
fn run_calls_a_component_file_by_path_even_when_it_shares_a_built_in_name() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    // A freshly built `send_receipt`, as an author would try it.
    let wasm = dir.path().join("send_receipt.wasm");
    std::fs::write(&wasm, justonce::__private::SEND_RECEIPT).unwrap();
    let out = justonce(&db, &["run", wasm.to_str().unwrap(), "--args", ARGS], None);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json_of(&out);
    assert_eq!(v["ok"], true);
    assert_eq!(mailbox_count(&db), 1);
}

#[test]
fn run_fresh_runs_the_tool_again_where_a_repeated_run_is_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let run = |extra: &[&str]| {
        let mut args = vec!["run", "send_receipt", "--args", ARGS];
        args.extend_from_slice(extra);
        json_of(&justonce(&db, &args, None))
    };
    let first = run(&["--conversation", "c"]);
    let again = run(&["--conversation", "c"]);
    assert_eq!(again["replayed"], true, "{again}");
    assert_eq!(again["key"], first["key"]);
    assert_eq!(mailbox_count(&db), 1);
    // While writing a tool: each --fresh run is a new call, with a new key.
    let a = run(&["--fresh"]);
    let b = run(&["--fresh"]);
    assert_eq!(a["replayed"], false, "{a}");
    assert_eq!(b["replayed"], false, "{b}");
    assert_ne!(a["key"], b["key"]);
    assert_eq!(mailbox_count(&db), 3);
}
