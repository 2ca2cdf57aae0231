//! The sandbox holds for a language runtime that imports more of WASI than a Rust
//! tool: CPython imports all of `wasi:sockets`, and loads; its sockets, like its file
//! system and its environment, give the tool nothing.

use justonce::__private::LocalApi;
use justonce::CallRequest;
use serde_json::{Value, json};

use super::{JAVASCRIPT, Lang, PYTHON};
use crate::support::success;

/// What the probe of `lang` reports for `op`.
fn probe(lang: &Lang, op: &str) -> Value {
    let api = LocalApi::start().unwrap();
    let t = lang.host(&api, 0);
    let response = t
        .host
        .call(&CallRequest::new(
            lang.probe_tool,
            json!({ "op": op }).to_string(),
        ))
        .unwrap();
    success(&response.outcome).clone()
}

/// Each call is a fresh instance with a fresh memory: what one call left in the guest
/// (module state, a heap that grew by more than a pooled slot keeps resident) is gone
/// at the next call of the same tool on the same host.
#[test]
fn a_call_sees_nothing_an_earlier_call_of_the_same_tool_left_in_memory() {
    for lang in [&*PYTHON, &*JAVASCRIPT] {
        let api = LocalApi::start().unwrap();
        let t = lang.host(&api, 0);
        for i in 0..3 {
            let message = format!("call {i}");
            let response = t
                .host
                .call(&CallRequest::new(
                    lang.probe_tool,
                    json!({ "op": "count", "message": message }).to_string(),
                ))
                .unwrap();
            assert!(!response.replayed, "{}: call {i} ran", lang.name);
            assert_eq!(
                success(&response.outcome)["seen"],
                json!([message]),
                "{}: call {i} saw only itself",
                lang.name
            );
        }
    }
}

#[test]
fn a_python_tool_that_opens_a_file_finds_no_file_system() {
    let out = probe(&PYTHON, "file");
    assert_eq!(out["opened"], false, "{out}");
    let error = out["error"].as_str().unwrap();
    assert!(error.starts_with("FileNotFoundError"), "{error}");
}

#[test]
fn a_python_tool_that_opens_a_socket_is_refused() {
    let out = probe(&PYTHON, "socket");
    assert_eq!(out["opened"], false, "{out}");
    let error = out["error"].as_str().unwrap();
    assert!(
        error.starts_with("PermissionError") || error.contains("denied"),
        "a refusal, not a network error: {error}"
    );
}

#[test]
fn a_python_tool_that_reads_the_environment_finds_it_empty() {
    let out = probe(&PYTHON, "env");
    assert_eq!(out["opened"], false, "{out}");
    assert_eq!(out["environ"], json!({}));
    assert!(
        std::env::vars().next().is_some(),
        "the host has one to leak"
    );
}

#[test]
fn a_javascript_tool_that_reads_the_environment_finds_it_empty() {
    let out = probe(&JAVASCRIPT, "env");
    assert_eq!(out["opened"], false, "{out}");
}

#[test]
fn the_language_runtimes_load_and_a_rust_guest_that_imports_sockets_is_still_refused() {
    // Both runtimes loaded (the statics panic otherwise) with their WASI imports,
    // CPython's `wasi:sockets` among them.
    for lang in [&*PYTHON, &*JAVASCRIPT] {
        assert!(
            lang.runtime.tool(lang.ticket_tool).is_some(),
            "{}",
            lang.name
        );
        assert!(
            lang.runtime.tool(lang.probe_tool).is_some(),
            "{}",
            lang.name
        );
    }
    let mut runtime = justonce::Runtime::new(super::limits()).unwrap();
    let err = runtime
        .load_file(std::path::Path::new(
            justonce_tests::guests::OPEN_SOCKET_COMPONENT,
        ))
        .unwrap_err()
        .to_string();
    assert!(err.contains("`wasi:sockets/"), "{err}");
}

/// The outcome of `op` of `lang`'s probe under a 1 s deadline, and how long the call
/// took; a panic if it is still running a second past the deadline.
fn sleep_probe(
    lang: &'static std::sync::LazyLock<Lang>,
    op: &str,
) -> (justonce::Outcome, std::time::Duration) {
    use std::time::{Duration, Instant};
    let deadline = Duration::from_secs(1);
    // The runtime's first load (building and compiling the runtime) is not the call's,
    // nor is the first load of the Rust test guests, which `test_host` starts from.
    std::sync::LazyLock::force(lang);
    std::sync::LazyLock::force(&crate::support::RUNTIME);
    let (tx, rx) = std::sync::mpsc::channel();
    let args = serde_json::json!({ "op": op }).to_string();
    std::thread::spawn(move || {
        let t = crate::support::test_host(|b| {
            b.runtime(lang.runtime.clone())
                .limits(super::limits())
                .tool_limits(
                    lang.probe_tool,
                    justonce::Limits {
                        deadline,
                        ..super::limits()
                    },
                )
        });
        let started = Instant::now();
        let response = t
            .host
            .call(&CallRequest::new(lang.probe_tool, args))
            .unwrap();
        let _ = tx.send((response.outcome, started.elapsed()));
    });
    rx.recv_timeout(deadline + Duration::from_secs(1))
        .unwrap_or_else(|_| panic!("{} `{op}` still ran a second past its deadline", lang.name))
}

#[test]
fn a_python_tool_in_time_sleep_is_stopped_at_its_deadline() {
    let (outcome, took) = sleep_probe(&PYTHON, "sleep");
    match outcome {
        justonce::Outcome::Trap { reason, .. } => assert_eq!(reason, "deadline_exceeded"),
        other => panic!("expected deadline_exceeded, got {other:?}"),
    }
    eprintln!("python: the sleeping call ended after {took:?}");
}

#[test]
fn a_javascript_tool_in_a_busy_wait_or_with_a_pending_timer_ends_within_its_deadline() {
    let (outcome, took) = sleep_probe(&JAVASCRIPT, "sleep");
    match outcome {
        justonce::Outcome::Trap { reason, .. } => assert_eq!(reason, "deadline_exceeded"),
        other => panic!("expected deadline_exceeded, got {other:?}"),
    }
    eprintln!("javascript: the busy wait ended after {took:?}");
    // A timer an hour away: the call ends within the deadline, whether the runtime
    // waits for the timer (and is stopped) or returns at once.
    let (outcome, took) = sleep_probe(&JAVASCRIPT, "timer");
    eprintln!("javascript: the call with a pending timer ended after {took:?}: {outcome:?}");
}
