//! Asking the person (issue 56): an upstream write tool the host cannot send again
//! (the tests' ledger, `append`, unannotated) loses its answer, no probe decides, and
//! the tool opts in (`[upstreams.ledger.ask_person]`): the agent's retry asks the
//! person behind it, through the official Python SDK's elicitation
//! (tests/mcp/ask_person_client.py), whether it went through. Yes ends it performed
//! and the retry answers (then replays) without sending it again; no sends it once
//! more under the same key; a decline, or a client that cannot be asked, leaves it
//! unknown and says so. Journaled as the effect's resolution, decided by `person`.

use std::process::Command;

use serde_json::{Value, json};

use crate::mcp_gateway::{Gateway, needed, python};
use crate::mcp_gateway_probes::{journal, resolutions_of};

const CLIENT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/mcp/ask_person_client.py"
);

/// `append` opts in: the question names the line it was to append.
const ASK: &str = r#"
[upstreams.ledger.ask_person]
append = "Did the line {arguments.line} reach the ledger?"
"#;

/// Runs the Python client's `steps` (one client and one server process each) against
/// the gateway; its report, one entry per step.
fn steps(python: &std::path::Path, gateway: &Gateway, steps: Value) -> Vec<Value> {
    let bin = std::env::var("JUSTONCE_TEST_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_justonce").to_owned());
    let db = gateway.dir.path().join("state.db");
    let server = json!([bin, "--db", db, "serve"]);
    let report = crate::mcp_python::client_report(
        Command::new(python)
            .arg(CLIENT)
            .arg(server.to_string())
            .arg(steps.to_string())
            .env("JUSTONCE_LOG", "warn")
            .env_remove("JUSTONCE_CONFIG")
            .env_remove("JUSTONCE_DB"),
    );
    report.as_array().unwrap().clone()
}

fn append(arguments: &Value, answer: Value) -> Value {
    json!({ "tool": "append", "arguments": arguments, "answer": answer })
}

fn said(performed: bool) -> Value {
    json!({ "action": "accept", "content": { "performed": performed } })
}

fn meta<'a>(step: &'a Value, key: &str) -> &'a Value {
    &step["call"]["meta"][format!("dev.justonce/{key}")]
}

/// The agent's JSON error of a step (`structuredContent.error`).
fn error(step: &Value) -> &Value {
    &step["call"]["structured"]["error"]
}

/// The resolutions journaled on the call `key` (its `resolve` operations).
fn resolutions(gateway: &Gateway, key: &Value) -> Vec<Value> {
    resolutions_of(gateway, key.as_str().unwrap())
}

/// The line landed and its answer was lost. The first call is told a retry asks
/// the user; a decline and a client without elicitation leave it unknown (told
/// why, nothing sent); the person's yes ends it performed: the retry answers what
/// was recorded without sending `append` again, and the next retry replays it.
/// One line, one `append`, nothing unresolved after. The opposite case: another
/// line is another call, appended.
#[test]
fn a_person_answers_yes_through_the_python_sdk_and_the_retry_replays() {
    let Some(python) = needed("Python with the MCP SDK", &python()) else {
        return;
    };
    let gateway = Gateway::ledger(&python, ASK);
    let args = json!({ "line": "refund 4417", "lose_first": true });
    let first = steps(&python, &gateway, json!([append(&args, said(true))]));
    let lost = &first[0];
    let unresolved = journal(&gateway, &["--unresolved"]);
    assert_eq!(
        unresolved[0]["pending"], "person (asked at the call's retry)",
        "{unresolved}"
    );
    let report = steps(
        &python,
        &gateway,
        json!([
            append(&args, json!({ "action": "decline" })),
            append(&args, Value::Null),
            append(&args, said(true)),
            append(&args, said(true)),
            append(&json!({ "line": "refund 4418" }), said(true)),
        ]),
    );
    let [declined, cannot, yes, again, other] = report.as_slice() else {
        panic!("five steps: {report:?}");
    };

    assert_eq!(error(lost)["kind"], "outcome_unknown", "{lost}");
    assert_eq!(error(lost)["ends_by"], "ask_person", "{lost}");
    assert!(error(lost).get("retry_after_s").is_none(), "{lost}");
    assert!(
        lost["call"]["text"]
            .to_string()
            .contains("it first asks the user"),
        "{lost}"
    );
    assert_eq!(lost["questions"], json!([]), "the first call asks no one");

    let question = &declined["questions"][0];
    assert_eq!(
        question["message"], "Did the line refund 4417 reach the ledger?",
        "{declined}"
    );
    assert_eq!(
        question["requestedSchema"]["properties"]["performed"]["type"],
        "boolean"
    );
    assert_eq!(error(declined)["kind"], "outcome_unknown", "{declined}");
    assert_eq!(error(declined)["ends_by"], "person", "{declined}");
    assert!(
        error(declined)["message"]
            .as_str()
            .unwrap()
            .contains("the user was asked whether it went through and declined to answer"),
        "{declined}"
    );
    assert_eq!(cannot["questions"], json!([]));
    assert_eq!(error(cannot)["ends_by"], "person", "{cannot}");
    assert!(
        error(cannot)["message"]
            .as_str()
            .unwrap()
            .contains("the user could not be asked"),
        "{cannot}"
    );

    assert_eq!(yes["questions"].as_array().unwrap().len(), 1, "{yes}");
    assert_eq!(yes["call"]["is_error"], false, "{yes}");
    assert_eq!(meta(yes, "replayed"), false, "{yes}");
    assert_eq!(meta(yes, "key"), meta(lost, "key"), "the same call");
    let structured = &yes["call"]["structured"];
    assert_eq!(structured["performed"], true, "{yes}");
    assert_eq!(structured["decided_by"], "person");
    assert_eq!(structured["by"], "the local user");
    assert_eq!(
        structured["question"],
        "Did the line refund 4417 reach the ledger?"
    );
    assert_eq!(yes["call"]["text"][0], structured["message"], "{yes}");

    assert_eq!(again["questions"], json!([]), "a replay asks no one");
    assert_eq!(meta(again, "replayed"), true, "{again}");
    assert_eq!(meta(again, "key"), meta(lost, "key"));
    assert_eq!(again["call"]["structured"], yes["call"]["structured"]);

    let (lines, calls) = gateway.ledger_state();
    assert_eq!(lines, ["refund 4417", "refund 4418"], "one row each");
    assert_eq!(calls.len(), 2, "append not sent again: {calls:?}");
    assert_eq!(other["call"]["is_error"], false, "{other}");
    assert_ne!(meta(other, "key"), meta(lost, "key"));

    assert_eq!(journal(&gateway, &["--unresolved"]), json!([]));
    let resolved = resolutions(&gateway, meta(lost, "key"));
    assert_eq!(resolved.len(), 1, "{resolved:?}");
    assert_eq!(resolved[0]["by"], "person the local user");
    assert_eq!(resolved[0]["detail"]["decided_by"], "person");
    assert_eq!(resolved[0]["detail"]["person"], "the local user");
    assert_eq!(resolved[0]["detail"]["resolution"], "performed");
}

/// The request was lost before the line was written: the person says no, the
/// effect is resolved `not_performed` by them and sent once more under the same key,
/// and the agent gets the ledger's own answer. One line, nothing unresolved.
#[test]
fn a_person_answers_no_and_the_effect_is_sent_once_more_under_the_same_key() {
    let Some(python) = needed("Python with the MCP SDK", &python()) else {
        return;
    };
    let gateway = Gateway::ledger(&python, ASK);
    let args = json!({ "line": "ship order 9", "lose_before": true });
    let lost = &steps(&python, &gateway, json!([append(&args, said(false))]))[0];
    assert_eq!(error(lost)["ends_by"], "ask_person", "{lost}");
    assert!(gateway.ledger_state().0.is_empty(), "nothing landed");
    let no = &steps(&python, &gateway, json!([append(&args, said(false))]))[0];

    assert_eq!(no["questions"].as_array().unwrap().len(), 1, "{no}");
    assert_eq!(no["call"]["is_error"], false, "{no}");
    assert_eq!(no["call"]["text"][0], "appended 'ship order 9'", "{no}");
    let (lines, calls) = gateway.ledger_state();
    assert_eq!(lines, ["ship order 9"], "one row");
    assert_eq!(calls.len(), 2, "sent once more: {calls:?}");
    assert_eq!(calls[0]["key"], calls[1]["key"], "under the same key");
    assert!(calls[0]["key"].is_string());

    assert_eq!(journal(&gateway, &["--unresolved"]), json!([]));
    let resolved = resolutions(&gateway, meta(lost, "key"));
    assert_eq!(resolved.len(), 1, "{resolved:?}");
    assert_eq!(resolved[0]["detail"]["decided_by"], "person");
    assert_eq!(resolved[0]["detail"]["resolution"], "not_performed");
}
