//! A roll-out while serving: a new build of a tool is swapped into a running host
//! (`Host::swap_tool`). A call in flight on the old build finishes on it, a new call
//! gets the new build, no call is dropped, the journal names the build that ran each,
//! and a build that fails to load leaves the old one serving.

use std::path::Path;
use std::sync::Arc;

use justonce::{CallRequest, Host, Limits, Runtime};
use justonce_tests::guests::{DIVERGE_COMPONENT, DIVERGE_V2_COMPONENT, ECHO_COMPONENT};

use crate::support::HoldFirst;
use crate::support::builds::{component_of, digest_of_file};

#[test]
fn a_call_in_flight_finishes_on_the_old_build_while_new_calls_get_the_new_one() {
    let dir = tempfile::tempdir().unwrap();
    // A runtime of its own: the swap must not reach other tests' shared one.
    let mut runtime = Runtime::new(Limits::default()).unwrap();
    runtime.load_file(Path::new(DIVERGE_COMPONENT)).unwrap();
    let gate = Arc::new(HoldFirst::new());
    let host = Arc::new(
        Host::builder()
            .database(dir.path().join("state.db"))
            .runtime(Arc::new(runtime))
            .provider("mail", gate.clone())
            .build()
            .unwrap(),
    );
    let slow = CallRequest::new("diverge", r#"{"variant":"a"}"#).conversation("c");
    let fresh = CallRequest::new("diverge", r#"{"variant":"b"}"#).conversation("c");

    // v1 runs the slow call and is held inside its effect.
    let in_flight = {
        let host = Arc::clone(&host);
        let slow = slow.clone();
        std::thread::spawn(move || host.call(&slow))
    };
    gate.wait_until_reached();

    // A build that fails to load changes nothing and says why.
    let err = host
        .swap_tool(Path::new("broken.wasm"), b"not a component")
        .unwrap_err();
    assert!(err.to_string().contains("not a WebAssembly file"), "{err}");
    assert_eq!(
        host.runtime().current("diverge").unwrap().digest,
        digest_of_file(DIVERGE_COMPONENT)
    );

    // v2 is swapped in while the slow call is still running.
    let report = host
        .swap_tool(
            Path::new(DIVERGE_V2_COMPONENT),
            &std::fs::read(DIVERGE_V2_COMPONENT).unwrap(),
        )
        .unwrap();
    assert_eq!(report.replaced, Some(digest_of_file(DIVERGE_COMPONENT)));
    assert_eq!(report.tool.digest, digest_of_file(DIVERGE_V2_COMPONENT));
    let listed: Vec<String> = host
        .runtime()
        .current_tools()
        .iter()
        .map(|t| t.digest.clone())
        .collect();
    assert_eq!(listed, [digest_of_file(DIVERGE_V2_COMPONENT)]);

    // A new call runs on v2 and is answered while v1's call is held.
    let answered = host.call(&fresh).unwrap();
    assert!(answered.outcome.is_success(), "{:?}", answered.outcome);
    assert!(!in_flight.is_finished(), "the slow call is still in flight");

    // The slow call finishes, on v1.
    gate.release();
    let slow_answer = in_flight.join().unwrap().unwrap();
    assert!(
        slow_answer.outcome.is_success(),
        "{:?}",
        slow_answer.outcome
    );
    assert_eq!(gate.applied().len(), 2, "both calls' mail went, once each");

    let journal = host.journal(Some("c"), 10).unwrap();
    assert_eq!(
        component_of(&journal, &slow_answer.key),
        Some(digest_of_file(DIVERGE_COMPONENT))
    );
    assert_eq!(
        component_of(&journal, &answered.key),
        Some(digest_of_file(DIVERGE_V2_COMPONENT))
    );

    // The name is the identity: a retry of the slow call after the roll-out replays
    // v1's answer, under the same key, and sends nothing.
    let retried = host.call(&slow).unwrap();
    assert!(retried.replayed);
    assert_eq!(retried.key, slow_answer.key);
    assert_eq!(gate.applied().len(), 2);
}

#[test]
fn a_swap_can_add_a_tool_that_was_not_loaded() {
    let mut runtime = Runtime::new(Limits::default()).unwrap();
    runtime.load_file(Path::new(DIVERGE_COMPONENT)).unwrap();
    let host = Host::builder().runtime(Arc::new(runtime)).build().unwrap();
    let echo = CallRequest::new("echo", r#"{"message":"hi"}"#);
    assert!(host.call(&echo).is_err(), "not loaded yet");
    let report = host
        .swap_tool(
            Path::new(ECHO_COMPONENT),
            &std::fs::read(ECHO_COMPONENT).unwrap(),
        )
        .unwrap();
    assert_eq!(report.replaced, None);
    let answer = host.call(&echo).unwrap();
    assert!(answer.outcome.is_success(), "{:?}", answer.outcome);
}

#[test]
fn a_changed_tools_directory_swaps_in_what_changed_and_names_what_failed() {
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools");
    std::fs::create_dir(&tools).unwrap();
    std::fs::copy(DIVERGE_COMPONENT, tools.join("diverge.wasm")).unwrap();
    std::fs::copy(ECHO_COMPONENT, tools.join("echo.wasm")).unwrap();
    let host = Host::builder().tools_dir(&tools).build().unwrap();

    let nothing_new = host.swap_tools_dir(&tools).unwrap();
    assert!(nothing_new.swapped.is_empty() && nothing_new.refused.is_empty());
    assert_eq!(nothing_new.unchanged.len(), 2);

    std::fs::copy(DIVERGE_V2_COMPONENT, tools.join("diverge.wasm")).unwrap();
    std::fs::write(tools.join("half-written.wasm"), b"\0asm").unwrap();
    let report = host.swap_tools_dir(&tools).unwrap();
    assert_eq!(report.swapped.len(), 1);
    assert_eq!(report.swapped[0].tool.name, "diverge");
    assert_eq!(
        report.swapped[0].replaced,
        Some(digest_of_file(DIVERGE_COMPONENT))
    );
    assert_eq!(report.unchanged, [tools.join("echo.wasm")]);
    assert_eq!(report.refused.len(), 1);
    assert_eq!(report.refused[0].source, tools.join("half-written.wasm"));
    assert!(!report.refused[0].reason.is_empty());
    assert_eq!(
        host.runtime().current("diverge").unwrap().digest,
        digest_of_file(DIVERGE_V2_COMPONENT)
    );
}

#[test]
fn a_retired_tool_is_offered_to_no_new_call_while_its_call_in_flight_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let mut runtime = Runtime::new(Limits::default()).unwrap();
    runtime.load_file(Path::new(DIVERGE_COMPONENT)).unwrap();
    runtime.load_file(Path::new(ECHO_COMPONENT)).unwrap();
    let gate = Arc::new(HoldFirst::new());
    let host = Arc::new(
        Host::builder()
            .database(dir.path().join("state.db"))
            .runtime(Arc::new(runtime))
            .provider("mail", gate.clone())
            .build()
            .unwrap(),
    );
    let slow = CallRequest::new("diverge", r#"{"variant":"a"}"#).conversation("c");
    let in_flight = {
        let host = Arc::clone(&host);
        std::thread::spawn(move || host.call(&slow))
    };
    gate.wait_until_reached();

    assert_eq!(
        host.runtime().retire("diverge"),
        Some(digest_of_file(DIVERGE_COMPONENT))
    );
    assert_eq!(host.runtime().retire("diverge"), None, "already gone");
    let names: Vec<String> = host
        .runtime()
        .current_tools()
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert_eq!(names, ["echo"]);
    let fresh = CallRequest::new("diverge", r#"{"variant":"b"}"#).conversation("c");
    let refused = host.call(&fresh).unwrap_err();
    assert!(
        matches!(&refused, justonce::Error::UnknownTool { available, .. } if available == "echo"),
        "{refused}"
    );

    gate.release();
    let answer = in_flight.join().unwrap().unwrap();
    assert!(answer.outcome.is_success(), "{:?}", answer.outcome);
    assert_eq!(gate.applied().len(), 1, "only the call in flight sent mail");

    // A new build of that name brings it back.
    host.swap_tool(
        Path::new(DIVERGE_V2_COMPONENT),
        &std::fs::read(DIVERGE_V2_COMPONENT).unwrap(),
    )
    .unwrap();
    assert!(host.call(&fresh).unwrap().outcome.is_success());
}
