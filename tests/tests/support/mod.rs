//! Shared helpers: one compiled runtime per test binary, test providers with fault
//! injection, and a small builder for hosts on a manual clock.

#![allow(dead_code)]

pub mod builds;
pub mod cli;
pub mod db;
pub mod gate;
pub mod hold_first;
pub mod install;
pub mod mcp;
pub mod mcp_http;
pub mod otlp;
pub mod process;
pub mod prometheus;
pub mod providers;

use std::path::Path;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use justonce::{Host, HostBuilder, ManualClock, RetryPolicy};
use justonce::{Limits, Runtime};

pub use hold_first::HoldFirst;
pub use providers::{FakePayments, Fault, RefusingOutbox};

/// Test guests that the sandbox refuses at load (they import what it does not allow).
pub const REFUSED_AT_LOAD: &[&str] = &["open_socket"];

/// Test guests left out of [`RUNTIME`] on purpose: `diverge_v2` is a second build of
/// the tool `diverge`, loaded only by the hosts that stand for an upgraded deployment
/// (see determinism.rs).
pub const NOT_IN_RUNTIME: &[&str] = &["diverge_v2"];

/// Every example tool and test guest, compiled once for the whole test binary.
pub static RUNTIME: LazyLock<Arc<Runtime>> = LazyLock::new(|| {
    let mut runtime = Runtime::new(Limits::default()).expect("runtime");
    for (name, bytes) in justonce::__private::EXAMPLE_TOOLS {
        runtime
            .load(Path::new(name), bytes)
            .unwrap_or_else(|e| panic!("example tool {name}: {e}"));
    }
    for (name, path) in justonce_tests::guests::ALL {
        if NOT_IN_RUNTIME.contains(name) {
            continue;
        }
        let loaded = runtime.load_file(Path::new(path)).map(|_| ());
        if REFUSED_AT_LOAD.contains(name) {
            assert!(
                loaded.is_err(),
                "test guest {name} should be refused at load"
            );
        } else {
            loaded.unwrap_or_else(|e| panic!("test guest {name}: {e}"));
        }
    }
    Arc::new(runtime)
});

/// A host on the shared runtime with an in-memory journal, a manual clock, zero
/// backoff, and a mail provider the test can inspect.
pub struct TestHost {
    pub host: Host,
    pub clock: ManualClock,
    pub mail: Arc<justonce::__private::MailProvider>,
}

/// Builds a [`TestHost`]; `configure` adds providers or changes policies.
pub fn test_host(configure: impl FnOnce(HostBuilder) -> HostBuilder) -> TestHost {
    test_host_with_mail(0, configure)
}

/// As [`test_host`], with a mail provider that loses the first `lose` responses per key.
pub fn test_host_with_mail(
    lose: u32,
    configure: impl FnOnce(HostBuilder) -> HostBuilder,
) -> TestHost {
    let clock = ManualClock::default();
    let mail = Arc::new(
        justonce::__private::MailProvider::open(
            None,
            Arc::new(clock.clone()),
            Duration::from_secs(24 * 3600),
        )
        .expect("mailbox")
        .lose_first_responses(lose),
    );
    let builder = Host::builder()
        .runtime(RUNTIME.clone())
        .clock(Arc::new(clock.clone()))
        .retry_policy(RetryPolicy::immediate(3))
        .provider("mail", mail.clone());
    let host = configure(builder).build().expect("host");
    TestHost { host, clock, mail }
}

/// `send_receipt` arguments for one order.
pub fn receipt_args(order: u64, email: &str) -> String {
    format!(r#"{{"orders":[{{"order_id":{order},"email":"{email}","amount_cents":1299}}]}}"#)
}

/// The whole journal as JSON, to compare before and after a call that must store
/// nothing.
pub fn journal_snapshot(host: &Host) -> serde_json::Value {
    serde_json::to_value(host.journal(None, 10_000).expect("journal")).expect("json")
}

/// Calls `echo` with a fresh message and asserts it ran and succeeded: the host
/// still serves normal calls.
pub fn assert_still_serving(host: &Host) {
    let message = format!(
        "still here {}",
        host.journal(None, 10_000).map_or(0, |j| j.len())
    );
    let response = host
        .call(&justonce::CallRequest::new(
            "echo",
            serde_json::json!({ "message": message }).to_string(),
        ))
        .expect("a normal call after the bad one");
    assert!(!response.replayed, "the normal call ran");
    assert_eq!(
        response.outcome,
        justonce::Outcome::Success {
            result: serde_json::json!({ "echo": message }),
            content: None,
        }
    );
}

/// How many invocation records the journal holds.
pub fn invocation_count(host: &Host) -> usize {
    host.journal(None, 10_000).expect("journal").len()
}

/// The result of a successful outcome; panics with the outcome otherwise.
pub fn success(outcome: &justonce::Outcome) -> &serde_json::Value {
    match outcome {
        justonce::Outcome::Success { result, .. } => result,
        other => panic!("expected a success-shaped result, got {other:?}"),
    }
}

/// `(now_nanos, random)` from the body of a mail the `time_and_random` guest sent.
pub fn time_and_random_body(body: &str) -> (u64, u64) {
    let field = |name: &str| {
        body.split_whitespace()
            .find_map(|part| part.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("no {name} in {body}"))
    };
    (field("now_nanos"), field("random"))
}
