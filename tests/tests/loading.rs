//! Load-time checks: a component is inspected before it is accepted, and a refusal
//! names the file and the reason (the offending import, where there is one).

use std::path::Path;

use justonce::Error;
use justonce::{Limits, Runtime};

/// Loads `bytes` as if from `name` and returns the refusal's message.
fn refusal(name: &str, bytes: &[u8]) -> String {
    let mut runtime = Runtime::new(Limits::default()).unwrap();
    let err = runtime.load(Path::new(name), bytes).unwrap_err();
    assert!(matches!(err, Error::Load { .. }), "{err:?}");
    assert_eq!(err.kind(), "invalid_component");
    assert_eq!(runtime.tools().count(), 0);
    let message = err.to_string();
    assert!(message.contains(name), "names the file: {message}");
    message
}

fn component(wat: &str) -> Vec<u8> {
    wat::parse_str(wat).unwrap()
}

#[test]
fn a_file_that_is_not_webassembly_is_refused() {
    let message = refusal("notes.wasm", b"#!/bin/sh\necho hello\n");
    assert!(message.contains("not a WebAssembly file"), "{message}");
}

#[test]
fn a_core_module_is_refused_as_not_a_component() {
    let message = refusal("core.wasm", &component("(module (func (export \"call\")))"));
    assert!(
        message.contains("core WebAssembly module, not a component"),
        "{message}"
    );
}

#[test]
fn a_truncated_component_is_refused() {
    let bytes = std::fs::read(justonce_tests::guests::ECHO_COMPONENT).unwrap();
    let message = refusal("half.wasm", &bytes[..bytes.len() / 2]);
    assert!(message.contains("not a valid component"), "{message}");
}

#[test]
fn a_component_without_the_tool_world_is_refused() {
    let message = refusal("empty.wasm", &component("(component)"));
    assert!(
        message.contains("does not export the justonce `tool` world"),
        "{message}"
    );
}

#[test]
fn a_component_that_imports_http_is_refused_with_the_import_named() {
    let wat = r#"(component
        (import "wasi:http/outgoing-handler@0.2.6" (instance))
        (import "wasi:io/streams@0.2.6" (instance)))"#;
    let message = refusal("fetch.wasm", &component(wat));
    assert!(
        message.contains("`wasi:http/outgoing-handler@0.2.6`"),
        "{message}"
    );
    assert!(
        !message.contains("wasi:io/streams"),
        "only the offending import: {message}"
    );
}

#[test]
fn a_component_that_imports_an_unknown_interface_is_refused_with_the_import_named() {
    let wat = r#"(component (import "acme:vault/secrets@1.0.0" (instance)))"#;
    let message = refusal("vault.wasm", &component(wat));
    assert!(message.contains("`acme:vault/secrets@1.0.0`"), "{message}");
    assert!(message.contains("does not provide"), "{message}");
}

#[test]
fn every_accepted_guest_and_example_tool_passes_the_import_check() {
    // The allowed set is wide enough for what Rust's std links: every guest but the
    // socket one loads.
    let runtime = &*crate::support::RUNTIME;
    for (name, path) in justonce_tests::guests::ALL {
        if crate::support::NOT_IN_RUNTIME.contains(name) {
            continue;
        }
        // By where it came from: a guest's tool may have another name than its crate
        // (the conformance guests' `test_*`).
        let loaded = runtime
            .tools()
            .any(|t| t.source == std::path::Path::new(path));
        assert_eq!(
            loaded,
            !crate::support::REFUSED_AT_LOAD.contains(name),
            "{name}"
        );
    }
}

#[test]
fn tools_lists_refused_components_with_the_reason_and_the_rest_still_load() {
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools");
    std::fs::create_dir(&tools).unwrap();
    std::fs::copy(
        justonce_tests::guests::ECHO_COMPONENT,
        tools.join("echo.wasm"),
    )
    .unwrap();
    std::fs::copy(
        justonce_tests::guests::OPEN_SOCKET_COMPONENT,
        tools.join("net.wasm"),
    )
    .unwrap();
    std::fs::write(tools.join("junk.wasm"), b"not wasm at all").unwrap();
    let out = crate::support::cli::justonce_command(Some(&dir.path().join("state.db")))
        .arg("--tools")
        .arg(&tools)
        .arg("tools")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.starts_with("echo\n"),
        "the good tool is listed: {stdout}"
    );
    let refused: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("refused "))
        .collect();
    assert_eq!(refused.len(), 2, "{stdout}");
    assert!(
        refused[0].ends_with("junk.wasm") && refused[1].ends_with("net.wasm"),
        "{stdout}"
    );
    assert!(stdout.contains("not a WebAssembly file"), "{stdout}");
    assert!(stdout.contains("`wasi:sockets/"), "{stdout}");
}
