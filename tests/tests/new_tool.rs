//! `justonce new`: the project it writes builds for wasm32-wasip2 as it is, its own
//! test passes on the host, and the component runs under `justonce run`. Bad input
//! (a bad name, a language without a template, an existing directory) is refused
//! with exit code 2.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::cli::{json_of, justonce_command};

/// The target directory the guests are built in (see `host/build_guests.rs`): the
/// SDK's dependencies are compiled there already.
fn guest_target_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_justonce"))
        .ancestors()
        .nth(2)
        .expect("the binary is in <target>/<profile>/")
        .join("justonce-guests")
}

/// `cargo ARGS…` for the project at `manifest`, without the outer build's settings.
fn cargo(manifest: &Path, args: &[&str]) -> Output {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command
        .args(args)
        .arg("--offline")
        .arg("--manifest-path")
        .arg(manifest)
        .arg("--target-dir")
        .arg(guest_target_dir());
    for variable in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
    ] {
        command.env_remove(variable);
    }
    command.output().expect("run cargo")
}

fn new_in(dir: &Path, args: &[&str]) -> Output {
    justonce_command(None)
        .current_dir(dir)
        .arg("new")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn a_new_tool_builds_passes_its_own_test_and_runs() {
    let dir = tempfile::tempdir().unwrap();
    let created = new_in(dir.path(), &["remind_unpaid"]);
    let told = String::from_utf8_lossy(&created.stdout);
    assert_eq!(
        created.status.code(),
        Some(0),
        "{told}{}",
        String::from_utf8_lossy(&created.stderr)
    );
    let wasm_in_project = "target/wasm32-wasip2/release/remind_unpaid.wasm";
    assert!(
        told.contains("cargo build --release --target wasm32-wasip2")
            && told.contains(&format!("justonce run {wasm_in_project}"))
            && told.contains("cargo test"),
        "prints the commands: {told}"
    );
    let manifest = dir.path().join("remind_unpaid/Cargo.toml");

    let build = cargo(
        &manifest,
        &["build", "--release", "--target", "wasm32-wasip2"],
    );
    assert!(
        build.status.success(),
        "the new tool builds as it is:\n{}",
        String::from_utf8_lossy(&build.stderr)
    );
    let test = cargo(&manifest, &["test"]);
    assert!(
        test.status.success(),
        "its own test passes on the host:\n{}{}",
        String::from_utf8_lossy(&test.stdout),
        String::from_utf8_lossy(&test.stderr)
    );
    assert!(
        String::from_utf8_lossy(&test.stdout).contains("1 passed"),
        "{}",
        String::from_utf8_lossy(&test.stdout)
    );

    let wasm = guest_target_dir().join("wasm32-wasip2/release/remind_unpaid.wasm");
    let run = justonce_command(Some(&dir.path().join("state.db")))
        .arg("run")
        .arg(&wasm)
        .args(["--args", r#"{"order_id":4417,"email":"ada@example.com"}"#])
        .output()
        .unwrap();
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let answer = json_of(&run);
    assert_eq!(answer["ok"], true, "{answer}");
    assert!(answer["result"]["message_id"].is_string(), "{answer}");
}

#[test]
fn bad_names_other_languages_and_existing_directories_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (args, needle) in [
        (&["Remind"][..], "not a valid tool name"),
        (
            &["remind", "--lang", "python"],
            "only `--lang rust` is available yet",
        ),
        (
            &["remind", "--lang", "js"],
            "only `--lang rust` is available yet",
        ),
        (&["remind", "--sdk", "/no/such/sdk"], "--sdk DIR"),
    ] {
        let out = new_in(dir.path(), args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
    assert!(
        !dir.path().join("remind").exists(),
        "nothing was written for refused input"
    );
    let first = new_in(dir.path(), &["remind"]);
    assert_eq!(first.status.code(), Some(0));
    let again = new_in(dir.path(), &["remind"]);
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists"));
}
