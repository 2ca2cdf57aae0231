//! The bad-input table: each row gets its own error kind, leaves the store intact, and
//! the next normal call on the same `Host` still works.

use std::path::Path;
use std::sync::Arc;

use justonce::Durability;
use justonce::{CallRequest, Error, Host, ManualClock, Outcome};
use serde_json::json;

use crate::support::{assert_still_serving, journal_snapshot, receipt_args, test_host};

/// Asserts that `request` fails with `kind` before anything is stored or run, and that
/// the host then serves a normal call. Returns the error's message.
fn refused_before_running(request: CallRequest, kind: &str) -> String {
    let t = test_host(|b| b);
    let before = journal_snapshot(&t.host);
    let err = t.host.call(&request).unwrap_err();
    assert_eq!(err.kind(), kind, "{err}");
    assert!(!err.retry_safe());
    assert_eq!(journal_snapshot(&t.host), before, "nothing stored");
    assert!(t.mail.attempts().is_empty(), "nothing ran");
    assert_still_serving(&t.host);
    err.to_string()
}

#[test]
fn invalid_json_arguments() {
    let message = refused_before_running(
        CallRequest::new("send_receipt", r#"{"orders": [}"#),
        "invalid_arguments",
    );
    assert!(message.contains("not valid JSON"), "{message}");
}

#[test]
fn arguments_that_violate_the_tools_schema_name_the_failing_path() {
    // An id may come as its digits ("4417"), but not as words around them.
    let args =
        r#"{"orders":[{"order_id":"order 4417","email":"ada@example.com","amount_cents":1299}]}"#;
    let message =
        refused_before_running(CallRequest::new("send_receipt", args), "invalid_arguments");
    assert!(message.contains("/orders/0/order_id"), "{message}");
    assert!(message.contains("input schema"), "{message}");
    let args = r#"{"orders":[{"order_id":true,"email":"ada@example.com","amount_cents":1299}]}"#;
    let message =
        refused_before_running(CallRequest::new("send_receipt", args), "invalid_arguments");
    assert!(message.contains("/orders/0/order_id"), "{message}");
    // A missing required field, at the top level.
    let message =
        refused_before_running(CallRequest::new("send_receipt", "{}"), "invalid_arguments");
    assert!(message.contains("orders"), "{message}");
}

#[test]
fn an_unknown_tool() {
    let message = refused_before_running(
        CallRequest::new("send_recipt", receipt_args(1, "a@example.com")),
        "unknown_tool",
    );
    assert!(
        message.contains("`send_recipt`") && message.contains("send_receipt"),
        "{message}"
    );
}

#[test]
fn an_oversized_argument() {
    let args = json!({ "message": "m".repeat(2 << 20) }).to_string();
    let message = refused_before_running(CallRequest::new("echo", args), "invalid_arguments");
    assert!(
        message.contains("exceeds the limit of 1048576 bytes"),
        "{message}"
    );
}

#[test]
fn a_tool_that_returns_invalid_json_saves_an_invalid_output_trap() {
    let t = test_host(|b| b);
    let request = CallRequest::new("raw_output", r#"{"output":"{\"unterminated\": "}"#);
    let first = t.host.call(&request).unwrap();
    let Outcome::Trap { reason, message } = &first.outcome else {
        panic!("expected a trap, got {:?}", first.outcome);
    };
    assert_eq!(reason, "invalid_output");
    assert!(message.contains("not JSON"), "{message}");
    let retry = t.host.call(&request).unwrap();
    assert!(retry.replayed);
    assert_eq!(retry.outcome, first.outcome);
    assert_still_serving(&t.host);
}

#[test]
fn a_result_nested_too_deep_to_read_back_is_saved_as_an_invalid_output_trap() {
    // 127 levels parse on their own, but not once wrapped in the saved outcome.
    let output = format!("{}{}", "[".repeat(127), "]".repeat(127));
    let t = test_host(|b| b);
    let request = CallRequest::new(
        "raw_output",
        serde_json::json!({ "output": output }).to_string(),
    );
    let first = t.host.call(&request).unwrap();
    let Outcome::Trap { reason, message } = &first.outcome else {
        panic!("expected a trap, got {:?}", first.outcome);
    };
    assert_eq!(reason, "invalid_output");
    assert!(message.contains("read back"), "{message}");
    let retry = t.host.call(&request).unwrap();
    assert!(retry.replayed);
    assert_eq!(retry.outcome, first.outcome);
    assert_still_serving(&t.host);
}

#[test]
fn a_tool_that_panics_saves_a_panic_trap() {
    let t = test_host(|b| b);
    let request = CallRequest::new("panics", "{}");
    let first = t.host.call(&request).unwrap();
    let Outcome::Trap { reason, message } = &first.outcome else {
        panic!("expected a trap, got {:?}", first.outcome);
    };
    assert_eq!(reason, "panic");
    // The panic's own message and location, not a wasm backtrace (that is logged).
    assert!(
        message.starts_with("panicked at ")
            && message.contains("src/lib.rs:")
            && message.ends_with(": panics: deliberate panic"),
        "{message}"
    );
    assert!(!message.contains("wasm backtrace"), "{message}");
    let retry = t.host.call(&request).unwrap();
    assert!(retry.replayed, "the panic is the saved outcome, not re-run");
    assert_eq!(retry.outcome, first.outcome);
    assert_eq!(t.host.journal(None, 10).unwrap()[0].runs, 1);
    assert_still_serving(&t.host);
}

#[test]
fn a_corrupt_database_through_the_cli_is_a_host_failure_that_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    std::fs::write(&db, vec![0x42u8; 4096]).unwrap();
    let out = crate::support::cli::justonce_command(Some(&db))
        .args([
            "run",
            "send_receipt",
            "--args",
            &receipt_args(1, "a@example.com"),
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert!(
        stderr.contains("state.db") && stderr.contains("corrupt"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read(&db).unwrap(),
        vec![0x42u8; 4096],
        "the file was not touched"
    );
}

/// A journal file with one completed call in it, and its bytes.
fn journal_file(dir: &Path) -> (std::path::PathBuf, Vec<u8>) {
    let path = dir.join("state.db");
    let host = Host::builder()
        .runtime(crate::support::RUNTIME.clone())
        .database(&path)
        .clock(Arc::new(ManualClock::default()))
        .build()
        .unwrap();
    host.call(&CallRequest::new("echo", r#"{"message":"hi"}"#))
        .unwrap();
    drop(host);
    // Fold the WAL back into the file so the file alone is the journal.
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    conn.pragma_update(None, "journal_mode", "DELETE").unwrap();
    drop(conn);
    let bytes = std::fs::read(&path).unwrap();
    (path, bytes)
}

fn open(path: &Path) -> Error {
    Host::builder()
        .runtime(crate::support::RUNTIME.clone())
        .database(path)
        .build()
        .unwrap_err()
}

#[test]
fn a_database_file_that_is_not_a_database_is_store_corrupt_and_left_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let garbage: Vec<u8> = (0..8192u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&path, &garbage).unwrap();
    let err = open(&path);
    assert_eq!(err.kind(), "store_corrupt", "{err}");
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "names the file: {err}"
    );
    assert!(err.to_string().contains("corrupt"), "{err}");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        garbage,
        "the file was not touched"
    );
}

#[test]
fn a_truncated_database_is_store_corrupt_and_left_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let (path, bytes) = journal_file(dir.path());
    let half = &bytes[..bytes.len() / 2];
    std::fs::write(&path, half).unwrap();
    let err = open(&path);
    assert_eq!(err.kind(), "store_corrupt", "{err}");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        half,
        "the file was not touched"
    );
}

#[test]
fn a_database_from_a_newer_schema_version_is_refused_and_left_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = journal_file(dir.path());
    let newer = justonce::__private::CURRENT_VERSION + 7;
    rusqlite::Connection::open(&path)
        .unwrap()
        .pragma_update(None, "user_version", newer)
        .unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let err = open(&path);
    let Error::NewerSchema {
        found, supported, ..
    } = &err
    else {
        panic!("expected newer_schema, got {err:?}");
    };
    assert_eq!(
        (*found, *supported),
        (newer, justonce::__private::CURRENT_VERSION)
    );
    assert_eq!(err.kind(), "newer_schema");
    assert!(err.to_string().contains("upgrade justonce"), "{err}");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bytes,
        "the file was not touched"
    );
}

/// Runs a call with the host's own journal connection in a failing state set by
/// `fail` (an injected I/O failure), then undoes it with `heal` and checks the call
/// goes through.
fn journal_failure(fail: &str, heal: &str, kind: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let host = Host::builder()
        .runtime(crate::support::RUNTIME.clone())
        .database(&path)
        .durability(Durability::Full)
        .clock(Arc::new(ManualClock::default()))
        .build()
        .unwrap();
    assert_still_serving(&host);
    let before = journal_snapshot(&host);
    host.inspect_sqlite(|c| c.execute_batch(fail)).unwrap();
    // A long conversation id makes the call's first write need fresh pages. The call
    // sends an email: its first write (the effect's record) is made before the
    // provider and before the answer, so the caller is told.
    let request = CallRequest::new("send_receipt", receipt_args(7, "ada@example.com"))
        .conversation("c".repeat(16 << 10));
    let err = host.call(&request).unwrap_err();
    assert_eq!(err.kind(), kind, "{err}");
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "names the file: {err}"
    );
    host.inspect_sqlite(|c| c.execute_batch(heal)).unwrap();
    assert_eq!(journal_snapshot(&host), before, "nothing half-written");
    let after = host.call(&request).unwrap();
    assert!(
        !after.replayed,
        "the failed call left nothing behind to replay"
    );
    assert!(after.outcome.is_success());
    assert_still_serving(&host);
    // The file itself is a sound journal.
    drop(host);
    let reopened = justonce::Host::builder()
        .database(&path)
        .durability(Durability::Normal)
        .build()
        .unwrap();
    assert_eq!(reopened.journal(None, 10).unwrap().len(), 3);
}

#[test]
fn a_full_disk_is_store_full_and_the_next_call_works_once_there_is_room() {
    // SQLite's page cap makes the very next page allocation fail as a full disk does.
    journal_failure(
        "PRAGMA max_page_count = 1;",
        "PRAGMA max_page_count = 1073741823;",
        "store_full",
    );
}

#[test]
fn a_read_only_database_is_store_read_only_and_the_next_call_works_once_writable() {
    journal_failure(
        "PRAGMA query_only = ON;",
        "PRAGMA query_only = OFF;",
        "store_read_only",
    );
}

#[test]
fn with_normal_durability_an_outcome_the_journal_refuses_is_never_answered() {
    // Every answer is committed before it is returned, in `normal` too: a call whose
    // outcome cannot be saved (a full disk) fails with the reason instead of
    // answering something a retry could not get again.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let host = Host::builder()
        .runtime(crate::support::RUNTIME.clone())
        .database(&path)
        .durability(Durability::Normal)
        .clock(Arc::new(ManualClock::default()))
        .build()
        .unwrap();
    assert_still_serving(&host);
    let before = journal_snapshot(&host);
    host.inspect_sqlite(|c| c.execute_batch("PRAGMA max_page_count = 1;"))
        .unwrap();
    let request = CallRequest::new("echo", r#"{"message":"during the failure"}"#)
        .conversation("c".repeat(16 << 10));
    let err = host.call(&request).unwrap_err();
    assert_eq!(err.kind(), "store_full", "{err}");
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "names the file: {err}"
    );
    host.inspect_sqlite(|c| c.execute_batch("PRAGMA max_page_count = 1073741823;"))
        .unwrap();
    assert_eq!(journal_snapshot(&host), before, "nothing half-written");
    // Nothing was answered, so nothing was lost: the retry runs and is saved.
    let retried = host.call(&request).unwrap();
    assert!(!retried.replayed);
    assert!(retried.outcome.is_success());
    assert!(host.call(&request).unwrap().replayed, "saved this time");
}
