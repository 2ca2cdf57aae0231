//! Hostile guests and the sandbox's limits. Each guest is contained, its outcome names
//! the limit it ran into, and the same `Host` goes on serving the next call. Limits are
//! small and set per tool, so no assertion depends on how fast the machine is.

use std::time::Duration;

use justonce::Limits;
use justonce::{CallRequest, Error, Outcome};
use serde_json::{Value, json};

use crate::support::{self, assert_still_serving, journal_snapshot, test_host};

/// The saved trap's reason and message, or a panic with what came instead.
fn trap(outcome: &Outcome) -> (&str, &str) {
    match outcome {
        Outcome::Trap { reason, message } => (reason, message),
        other => panic!("expected a trap, got {other:?}"),
    }
}

fn result(outcome: &Outcome) -> &Value {
    match outcome {
        Outcome::Success { result, .. } => result,
        other => panic!("expected a result, got {other:?}"),
    }
}

/// Runs `tool` under `limits` (set for that tool only), checks that the trap is saved
/// and replayed, and that the host still serves `echo` under the defaults.
fn contained(tool: &str, args: &str, limits: Limits) -> (String, String) {
    let t = test_host(|b| b.tool_limits(tool, limits));
    let request = CallRequest::new(tool, args);
    let first = t.host.call(&request).unwrap();
    let (reason, message) = trap(&first.outcome);
    let retry = t.host.call(&request).unwrap();
    assert!(retry.replayed, "the trap is the saved outcome");
    assert_eq!(retry.outcome, first.outcome);
    assert_eq!(t.host.journal(None, 10).unwrap()[0].runs, 1, "not re-run");
    assert_still_serving(&t.host);
    (reason.to_string(), message.to_string())
}

#[test]
fn an_infinite_loop_ends_with_deadline_exceeded() {
    let limits = Limits {
        deadline: Duration::from_millis(50),
        ..Limits::default()
    };
    let (reason, message) = contained("loop_forever", "{}", limits);
    assert_eq!(reason, "deadline_exceeded");
    assert!(message.contains("deadline of 50 ms"), "{message}");
}

#[test]
fn an_infinite_loop_with_a_fuel_limit_ends_with_fuel_exhausted() {
    let limits = Limits {
        fuel: Some(5_000_000),
        ..Limits::default()
    };
    let (reason, _) = contained("loop_forever", "{}", limits);
    assert_eq!(reason, "fuel_exhausted");
}

#[test]
fn a_memory_bomb_ends_with_memory_limit() {
    let limits = Limits {
        memory_bytes: 16 << 20,
        ..Limits::default()
    };
    let (reason, message) = contained("memory_bomb", "{}", limits);
    assert_eq!(reason, "memory_limit");
    assert!(
        message.contains(&(16u64 << 20).to_string()),
        "names the limit: {message}"
    );
}

#[test]
fn deep_recursion_ends_with_stack_overflow() {
    let (reason, _) = contained("deep_recursion", "{}", Limits::default());
    assert_eq!(reason, "stack_overflow");
}

#[test]
fn an_effect_flood_stops_at_the_budget_with_exactly_the_budget_performed() {
    let limits = Limits {
        max_effects: 5,
        ..Limits::default()
    };
    let t = test_host(|b| b.tool_limits("effect_flood", limits));
    let first = t
        .host
        .call(&CallRequest::new("effect_flood", "{}"))
        .unwrap();
    let (reason, message) = trap(&first.outcome);
    assert_eq!(reason, "effect_budget_exceeded");
    assert!(message.contains("more than 5 effects"), "{message}");
    let journal = t.host.journal(None, 10).unwrap();
    assert_eq!(
        journal[0].effects.len(),
        5,
        "the budget, and not one more, was performed"
    );
    assert!(journal[0].effects.iter().all(|e| e.state == "done"));
    let stored = |key: &str| {
        t.host
            .inspect_sqlite(|c| {
                use justonce::__private::KvProvider;
                KvProvider::get(c, &KvProvider::stored_key("effect_flood", None, key))
            })
            .unwrap()
    };
    assert_eq!(stored("4"), Some(json!(4)));
    assert_eq!(stored("5"), None);
    let retry = t
        .host
        .call(&CallRequest::new("effect_flood", "{}"))
        .unwrap();
    assert!(retry.replayed);
    assert_eq!(t.host.journal(None, 10).unwrap()[0].effects.len(), 5);
    assert_still_serving(&t.host);
}

#[test]
fn an_oversized_effect_payload_traps_before_anything_is_journaled() {
    let limits = Limits {
        max_payload_bytes: 256,
        ..Limits::default()
    };
    let t = test_host(|b| b.tool_limits("kv_put", limits));
    let big = "x".repeat(1024);
    let args = json!({ "entries": [{ "key": "big", "value": big }] }).to_string();
    let first = t.host.call(&CallRequest::new("kv_put", args)).unwrap();
    let (reason, message) = trap(&first.outcome);
    assert_eq!(reason, "payload_too_large");
    assert!(message.contains("limit is 256 bytes"), "{message}");
    assert!(t.host.journal(None, 10).unwrap()[0].effects.is_empty());
    assert_still_serving(&t.host);
}

#[test]
fn an_oversized_result_is_a_result_too_large_trap() {
    let limits = Limits {
        max_result_bytes: 100,
        ..Limits::default()
    };
    let t = test_host(|b| b.tool_limits("raw_output", limits));
    let output = json!({ "big": "y".repeat(200) }).to_string();
    let first = t
        .host
        .call(&CallRequest::new(
            "raw_output",
            json!({ "output": output }).to_string(),
        ))
        .unwrap();
    assert_eq!(trap(&first.outcome).0, "result_too_large");
    // Under the limit the same tool's result passes.
    let small = t
        .host
        .call(&CallRequest::new(
            "raw_output",
            json!({ "output": "[1,2]" }).to_string(),
        ))
        .unwrap();
    assert_eq!(result(&small.outcome), &json!([1, 2]));
}

#[test]
fn an_oversized_argument_is_refused_before_anything_is_stored() {
    let limits = Limits {
        max_args_bytes: 64,
        ..Limits::default()
    };
    let t = test_host(|b| b.tool_limits("echo", limits));
    let before = journal_snapshot(&t.host);
    let args = json!({ "message": "z".repeat(100) }).to_string();
    let err = t.host.call(&CallRequest::new("echo", args)).unwrap_err();
    assert_eq!(err.kind(), "invalid_arguments");
    assert!(
        err.to_string().contains("exceeds the limit of 64 bytes"),
        "{err}"
    );
    assert_eq!(journal_snapshot(&t.host), before, "nothing stored");
    let ok = t
        .host
        .call(&CallRequest::new("echo", r#"{"message":"short"}"#))
        .unwrap();
    assert!(ok.outcome.is_success());
}

#[test]
fn reading_a_file_finds_no_file_system() {
    let t = test_host(|b| b);
    let response = t.host.call(&CallRequest::new("read_file", "{}")).unwrap();
    let output = result(&response.outcome);
    assert_eq!(
        output["contents"],
        Value::Null,
        "no file was read: {output}"
    );
    let error = output["error"]
        .as_str()
        .expect("the read failed with an error");
    assert!(!error.is_empty());
    assert_still_serving(&t.host);
}

#[test]
fn the_environment_and_the_arguments_are_empty() {
    let t = test_host(|b| b);
    let response = t.host.call(&CallRequest::new("read_env", "{}")).unwrap();
    let output = result(&response.outcome);
    assert_eq!(output["vars"], json!([]), "{output}");
    assert_eq!(output["args"], json!([]), "{output}");
    assert!(
        std::env::vars().next().is_some(),
        "the host process itself has an environment to leak"
    );
    assert_still_serving(&t.host);
}

#[test]
fn a_guest_that_opens_a_socket_is_refused_at_load_with_the_import_named() {
    let mut runtime = justonce::Runtime::new(Limits::default()).unwrap();
    let path = std::path::Path::new(justonce_tests::guests::OPEN_SOCKET_COMPONENT);
    let err = runtime.load_file(path).unwrap_err();
    assert!(matches!(err, Error::Load { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains("open_socket.wasm"),
        "names the file: {message}"
    );
    assert!(
        message.contains("`wasi:sockets/"),
        "names the import: {message}"
    );
    // Said once for all its `wasi:sockets` imports, with what to use instead.
    assert_eq!(
        message.matches("network sockets are not available").count(),
        1,
        "{message}"
    );
    assert!(message.contains("the `http` provider"), "{message}");
    assert!(runtime.tool("open_socket").is_none());
    assert!(support::REFUSED_AT_LOAD.contains(&"open_socket"));
}

#[test]
fn a_chatty_guest_is_not_killed_by_its_output_and_none_of_it_reaches_the_result() {
    let limits = Limits {
        max_output_bytes: 1024,
        ..Limits::default()
    };
    let t = test_host(|b| b.tool_limits("chatty", limits));
    let response = t
        .host
        .call(&CallRequest::new("chatty", r#"{"lines":2000}"#))
        .unwrap();
    let output = result(&response.outcome);
    let printed = output["printed"].as_u64().unwrap();
    assert!(
        printed > 100 * 1024,
        "far more than the cap was printed: {printed}"
    );
    let agent = response.to_json().to_string();
    assert!(
        !agent.contains("quick brown fox"),
        "output stays out of results: {agent}"
    );
}

/// A mail downstream that takes longer to answer than the guest's whole deadline.
pub(crate) struct SlowMail(pub(crate) Duration);

impl justonce::Provider for SlowMail {
    fn class(&self) -> justonce::ProviderClass {
        justonce::ProviderClass::Keyed
    }

    fn perform(
        &self,
        _request: &justonce::EffectRequest<'_>,
    ) -> Result<Value, justonce::ProviderError> {
        // Not a wait for a state: this stands for a slow network, and the test's
        // assertion holds only if the host does not count it against the guest.
        std::thread::sleep(self.0);
        Ok(json!({ "message_id": "msg-slow" }))
    }
}

#[test]
fn time_spent_in_a_provider_does_not_count_against_the_guests_deadline() {
    let limits = Limits {
        deadline: Duration::from_millis(50),
        ..Limits::default()
    };
    let t = test_host(|b| {
        b.tool_limits("send_receipt", limits).provider(
            "mail",
            std::sync::Arc::new(SlowMail(Duration::from_millis(300))),
        )
    });
    let response = t
        .host
        .call(&CallRequest::new(
            "send_receipt",
            support::receipt_args(1, "a@example.com"),
        ))
        .unwrap();
    // Without the allowance the effect would happen and the saved outcome would be a
    // `deadline_exceeded` trap, telling the agent the receipt failed.
    assert_eq!(
        result(&response.outcome)["sent"][0]["message_id"],
        "msg-slow"
    );
}
