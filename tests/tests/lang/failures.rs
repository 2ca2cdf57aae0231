//! A tool's failure says what failed, in every language (issue 59): an exception
//! other than `ToolError` ends the call as a `panic` trap whose message is the
//! exception's type and text (and where it was raised), as a Rust panic's is, with
//! the whole stack in the host's log at `error`, seen at the default level; a
//! `ToolError` stays a tool error with its own code.

use std::sync::{Arc, Mutex};

use justonce::__private::{GuestNote, LocalApi, LogLevel, with_log_listener};
use justonce::{CallRequest, Outcome};
use serde_json::json;

use super::{JAVASCRIPT, Lang, PYTHON};

/// The outcome of `op` of `lang`'s probe, and the lines the guest logged at `error`.
fn fail(lang: &Lang, op: &str) -> (Outcome, Vec<String>) {
    let api = LocalApi::start().unwrap();
    let t = lang.host(&api, 0);
    let errors = Arc::new(Mutex::new(Vec::new()));
    let heard = errors.clone();
    let listener = Box::new(move |_: &str, note: GuestNote<'_>| {
        if let GuestNote::Log(LogLevel::Error, line) = note {
            heard.lock().unwrap().push(line.to_string());
        }
    });
    let response = with_log_listener(listener, || {
        t.host
            .call(&CallRequest::new(
                lang.probe_tool,
                json!({ "op": op, "message": "x" }).to_string(),
            ))
            .unwrap()
    });
    let errors = errors.lock().unwrap().clone();
    (response.outcome, errors)
}

/// The message of a `panic` trap, or a test failure naming what came instead.
fn panic_message(lang: &Lang, op: &str, outcome: Outcome) -> String {
    match outcome {
        Outcome::Trap { reason, message } if reason == "panic" => message,
        other => panic!("{} `{op}`: expected a panic trap, got {other:?}", lang.name),
    }
}

/// What `lang`'s probe tells the agent of an exception: `throw`'s message starts with
/// `head` (the type and the message) and holds each of `place` (where it was raised),
/// and a line of the log at `error` holds `head` and `logged` (the stack); the message
/// of `type_error` (a bug the runtime found) starts with `TypeError: ` and holds
/// `type_error`.
fn assert_reported(lang: &Lang, head: &str, place: &[&str], logged: &str, type_error: &str) {
    let (outcome, errors) = fail(lang, "throw");
    let message = panic_message(lang, "throw", outcome);
    assert!(
        message.starts_with(head),
        "the type and the message first: {message}"
    );
    for part in place {
        assert!(message.contains(part), "where it was raised: {message}");
    }
    assert!(
        errors
            .iter()
            .any(|line| line.contains(head) && line.contains(logged)),
        "the stack in the log at `error`: {errors:?}"
    );

    let (outcome, _) = fail(lang, "type_error");
    let message = panic_message(lang, "type_error", outcome);
    assert!(
        message.starts_with("TypeError: ") && message.contains(type_error),
        "{message}"
    );
}

#[test]
fn a_javascript_exception_reaches_the_agent_with_its_type_message_and_stack() {
    assert_reported(
        &JAVASCRIPT,
        "Error: boom from JS: x",
        &["probe_js/tool.js:"],
        "tool.js:",
        "email",
    );
}

#[test]
fn a_javascript_tool_that_calls_fetch_is_told_to_use_the_http_provider() {
    let (outcome, _) = fail(&JAVASCRIPT, "fetch");
    let message = panic_message(&JAVASCRIPT, "fetch", outcome);
    assert!(
        message.contains("fetch is not available") && message.contains("`http` provider"),
        "{message}"
    );
}

#[test]
fn a_python_exception_reaches_the_agent_with_its_type_text_and_line() {
    assert_reported(
        &PYTHON,
        "ValueError: bad amount: x",
        &["app.py:", "in probe"],
        "Traceback",
        "len()",
    );
}

#[test]
fn a_tool_error_is_still_a_tool_error_with_its_own_code() {
    for lang in [&*PYTHON, &*JAVASCRIPT] {
        let (outcome, errors) = fail(lang, "tool_error");
        match outcome {
            Outcome::ToolError {
                code,
                message,
                details,
            } => {
                assert_eq!(code, "card_declined", "{}", lang.name);
                assert_eq!(message, "declined: x", "{}", lang.name);
                assert_eq!(details, Some(json!({ "retry": false })), "{}", lang.name);
            }
            other => panic!("{}: expected a tool error, got {other:?}", lang.name),
        }
        assert!(
            errors.is_empty(),
            "{}: nothing logged: {errors:?}",
            lang.name
        );
    }
}

#[test]
fn a_python_tool_imports_a_module_where_it_uses_it() {
    // `import csv`, `importlib.import_module("decimal")` and a module of the tool's own,
    // each inside the function only: a component cannot import a module later than
    // its build, so the SDK imports them while it is built.
    let (outcome, errors) = fail(&PYTHON, "imports");
    match outcome {
        Outcome::Success { result, .. } => assert_eq!(
            result,
            json!({ "quote_all": 1, "sum": "3.10", "shout": "X" }),
            "{errors:?}"
        ),
        other => panic!("expected the imports to work, got {other:?}"),
    }
}

#[test]
fn a_python_tool_that_opens_a_connection_is_told_to_use_the_http_provider() {
    let (outcome, _) = fail(&PYTHON, "connect");
    let message = panic_message(&PYTHON, "connect", outcome);
    assert!(
        message.contains("app.py:") && message.contains("`http` provider"),
        "{message}"
    );
    assert!(!message.contains("unknown encoding"), "{message}");
}
