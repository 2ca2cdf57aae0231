//! A Python tool's own probe (`export(tool, reconcile=…)`) and a JavaScript tool's
//! (`reconciler(…)`), built against the `reconciling-tool` world, decide as the Rust
//! guest's does: the mail whose answer was lost is found, and the retry goes on from
//! it, nothing sent again.

use std::path::Path;

use std::sync::Arc;

use justonce::{CallRequest, Clock as _, EndsBy, Error, Runtime};
use serde_json::json;

use super::{limits, state_dir, toolchain};
use crate::reconcile::{Mood, UnkeyedMailer};
use crate::support::{success, test_host};

#[test]
fn a_python_tools_reconcile_finds_the_mail_sent_and_the_retry_goes_on() {
    let wasm = toolchain::build_python_world("tests/guests_lang/reconcile_py", "reconciling-tool")
        .unwrap_or_else(|e| panic!("cannot build the Python tool: {e}"));
    finds_the_mail_sent_and_the_retry_goes_on(&wasm, "reconcile_mail_py");
}

#[test]
fn a_javascript_tools_reconcile_finds_the_mail_sent_and_the_retry_goes_on() {
    let wasm = toolchain::build_js_world("tests/guests_lang/reconcile_js", "reconciling-tool")
        .unwrap_or_else(|e| panic!("cannot build the JavaScript tool: {e}"));
    finds_the_mail_sent_and_the_retry_goes_on(&wasm, "reconcile_mail_js");
}

/// The tool `name` of the component `wasm` mails once, its answer is lost; the retry
/// asks its `reconcile`, which finds the mail under the effect's key, and goes on
/// from it: one mail, nothing unresolved.
fn finds_the_mail_sent_and_the_retry_goes_on(wasm: &Path, name: &str) {
    let mut runtime = Runtime::new(limits()).expect("runtime");
    runtime.set_compile_cache(state_dir().join("cache"));
    assert!(runtime.load_file(wasm).expect("loads").reconciles());
    let smtp = UnkeyedMailer::new(Mood::LosesTheAnswer);
    let t = test_host(|b| {
        b.runtime(Arc::new(runtime))
            .limits(limits())
            .provider("smtp", smtp.clone())
    });
    let call = CallRequest::new(
        name,
        json!({ "to": "ada@example.com", "subject": "invoice" }).to_string(),
    )
    .conversation("c");
    let err = t.host.call(&call).unwrap_err();
    assert!(
        matches!(
            &err,
            Error::OutcomeUnknown {
                ends_by: EndsBy::Probe,
                ..
            }
        ),
        "{err:?}"
    );
    let effect = t.host.unresolved(t.clock.now_ms()).unwrap()[0].key.clone();
    smtp.set_mood(Mood::Fine);

    let retried = t.host.call(&call).unwrap();
    assert!(!retried.replayed, "the retry ran");
    assert_eq!(success(&retried.outcome)["message_id"], "m-1");
    assert_eq!(
        success(&retried.outcome)["then"],
        "told the caller about m-1"
    );
    assert_eq!(smtp.requests(), [effect.as_str()], "sent once, never again");
    assert_eq!(smtp.finds(), [effect.as_str()], "asked under the same key");
    assert!(t.host.unresolved(t.clock.now_ms()).unwrap().is_empty());
}
