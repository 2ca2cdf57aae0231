//! A tool author's mistakes through the CLI: a file that is not a valid tool, a path
//! that does not exist, a directory without tools are bad input (exit code 2) that
//! names the file and the reason, never a host failure (5). `key` and `tools` take a
//! component path as `run` does, and only a `.wasm` name or a path is a file.

use std::path::Path;
use std::process::Output;

use justonce_tests::guests::{ECHO_COMPONENT, OPEN_SOCKET_COMPONENT};

use crate::support::cli::{json_of, justonce_command};

/// `justonce --db DIR/state.db ARGS…` run in `dir`.
fn justonce_in(dir: &Path, args: &[&str]) -> Output {
    justonce_command(Some(&dir.join("state.db")))
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

const ECHO_ARGS: &str = r#"{"message":"hi"}"#;

#[test]
fn a_file_that_is_not_a_valid_tool_is_bad_input_naming_the_file_and_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("notes.wasm");
    std::fs::write(&junk, b"#!/bin/sh\necho hello\n").unwrap();
    let core = dir.path().join("core.wasm");
    std::fs::write(&core, wat::parse_str("(module)").unwrap()).unwrap();
    let cases = [
        (junk.to_str().unwrap(), "not a WebAssembly file"),
        (
            core.to_str().unwrap(),
            "core WebAssembly module, not a component",
        ),
        (OPEN_SOCKET_COMPONENT, "`wasi:sockets/"),
        ("build/missing.wasm", "no such file"),
    ];
    for (path, reason) in cases {
        for command in [
            &["run", path, "--args", "{}"][..],
            &["key", path, "--args", "{}"],
            &["tools", path],
        ] {
            let out = justonce_in(dir.path(), command);
            let stderr = stderr(&out);
            assert_eq!(out.status.code(), Some(2), "{command:?}: {stderr}");
            let file = Path::new(path).file_name().unwrap().to_str().unwrap();
            assert!(
                stderr.contains(file) && stderr.contains(reason),
                "{command:?} names the file and the reason: {stderr}"
            );
        }
    }
    assert!(
        !dir.path().join("state.db").exists(),
        "nothing was stored, not even a journal"
    );
}

#[test]
fn key_and_tools_take_a_component_path_as_run_does() {
    let dir = tempfile::tempdir().unwrap();
    let run = justonce_in(dir.path(), &["run", ECHO_COMPONENT, "--args", ECHO_ARGS]);
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    let key = justonce_in(dir.path(), &["key", ECHO_COMPONENT, "--args", ECHO_ARGS]);
    assert_eq!(key.status.code(), Some(0), "{}", stderr(&key));
    assert_eq!(
        String::from_utf8_lossy(&key.stdout).trim(),
        json_of(&run)["key"].as_str().unwrap()
    );
    let tools = justonce_in(dir.path(), &["tools", "--json", ECHO_COMPONENT]);
    let listed = json_of(&tools);
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(listed[0]["name"], "echo");
}

#[test]
fn a_tool_name_is_never_mistaken_for_a_file_of_that_name() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("send_receipt"), b"not a component").unwrap();
    let args = r#"{"orders":[{"order_id":1,"email":"ada@example.com","amount_cents":100}]}"#;
    let by_name = justonce_in(dir.path(), &["run", "send_receipt", "--args", args]);
    assert_eq!(by_name.status.code(), Some(0), "{}", stderr(&by_name));
    assert_eq!(json_of(&by_name)["ok"], true);
    let by_path = justonce_in(dir.path(), &["run", "./send_receipt", "--args", args]);
    assert_eq!(by_path.status.code(), Some(2));
    assert!(
        stderr(&by_path).contains("not a WebAssembly file"),
        "{}",
        stderr(&by_path)
    );
}

#[test]
fn tools_on_a_directory_without_tools_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("tools");
    std::fs::create_dir(&empty).unwrap();
    let out = justonce_in(dir.path(), &["--tools", empty.to_str().unwrap(), "tools"]);
    assert_eq!(out.status.code(), Some(2));
    let message = stderr(&out);
    assert!(
        message.contains("holds no .wasm component") && message.contains("tools"),
        "{message}"
    );

    std::fs::copy(ECHO_COMPONENT, empty.join("echo.wasm")).unwrap();
    let out = justonce_in(dir.path(), &["--tools", empty.to_str().unwrap(), "tools"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    let missing = justonce_in(dir.path(), &["--tools", "no/such/dir", "tools"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        stderr(&missing).contains("no/such/dir"),
        "{}",
        stderr(&missing)
    );
}

#[test]
fn a_panicking_tool_answers_with_its_panic_message_not_a_backtrace() {
    let dir = tempfile::tempdir().unwrap();
    let out = justonce_in(
        dir.path(),
        &[
            "run",
            justonce_tests::guests::PANICS_COMPONENT,
            "--args",
            "{}",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let error = &json_of(&out)["error"];
    assert_eq!(error["code"], "panic", "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.starts_with("panicked at ")
            && message.contains("src/lib.rs:")
            && message.ends_with(": panics: deliberate panic"),
        "{message}"
    );
    assert!(message.len() < 200, "short: {message}");
}
