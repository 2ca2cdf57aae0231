//! An upstream write tool the host cannot send again (unannotated: the tests' ledger,
//! `append`) loses its answer, and its probe (`[upstreams.ledger.probes.append]`, the
//! ledger's read-only `recorded`) says at the agent's retry whether it happened: the
//! call ends from that, journaled as the effect's resolution by `probe`, and nothing
//! waits for a person. Without a probe, the model is told to stop, and an operator's
//! resolution without an answer is told as what was recorded.

use serde_json::{Value, json};

use crate::mcp_gateway::{Gateway, needed, own_content, python, replayed};
use crate::support::cli::{json_of, justonce_command};

/// The probe of `append`: `recorded(key)` answers what `append` answered under the
/// effect's key, or `null` when it appended nothing under it.
const PROBE: &str = r#"
[upstreams.ledger.probes.append]
tool = "recorded"
arguments = { key = "{key}" }
pointer = "/result"
answer = "non_empty"
"#;

/// `justonce journal ARGS --json` of the gateway's journal.
pub(crate) fn journal(gateway: &Gateway, args: &[&str]) -> Value {
    let out = justonce_command(Some(&gateway.dir.path().join("state.db")))
        .arg("journal")
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    json_of(&out)
}

fn error(answer: &Value) -> &Value {
    &answer["result"]["structuredContent"]["error"]
}

/// The host's note for the model (the last content item), if any.
fn note(answer: &Value) -> String {
    let last = answer["result"]["content"]
        .as_array()
        .unwrap()
        .last()
        .unwrap();
    assert_eq!(last["_meta"]["dev.justonce/note"], true, "{answer}");
    last["text"]
        .as_str()
        .or(last["resource"]["text"].as_str())
        .unwrap()
        .to_owned()
}

/// The resolutions journaled on the call of `answer` (its `resolve` operations,
/// `journal KEY --json`).
fn resolutions(gateway: &Gateway, answer: &Value) -> Vec<Value> {
    let key = answer["result"]["_meta"]["dev.justonce/key"]
        .as_str()
        .unwrap();
    resolutions_of(gateway, key)
}

/// The resolutions journaled on the call `key` (its `resolve` operations).
pub(crate) fn resolutions_of(gateway: &Gateway, key: &str) -> Vec<Value> {
    journal(gateway, &[key])["operations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["action"] == "resolve")
        .cloned()
        .collect()
}

/// The line landed and its answer was lost: the retry asks `recorded`, which finds
/// it, and the call ends performed with one line in the ledger, the tool not sent
/// again, the agent told the effect was confirmed by the probe. Nothing waits for a
/// person. The opposite case, another line, is appended.
#[test]
fn a_lost_answer_whose_write_landed_ends_performed_by_its_probe_with_one_row() {
    let Some(python) = needed("Python with the MCP SDK", &python()) else {
        return;
    };
    let gateway = Gateway::ledger(&python, PROBE);
    let mut server = gateway.serve(&[]);
    let args = json!({ "line": "paid invoice 7", "lose_first": true });
    let lost = server.client.call("append", args.clone(), json!({}));
    assert_eq!(error(&lost)["kind"], "outcome_unknown", "{lost}");
    assert_eq!(error(&lost)["ends_by"], "probe", "{lost}");
    assert_eq!(error(&lost)["retry_after_s"], 10, "{lost}");
    assert!(
        note(&lost).contains("it first asks the downstream whether the effect happened"),
        "{lost}"
    );

    let unresolved = journal(&gateway, &["--unresolved"]);
    assert_eq!(
        unresolved[0]["pending"], "probe ledger.recorded",
        "{unresolved}"
    );

    let retry = server.client.call("append", args.clone(), json!({}));
    assert_eq!(retry["result"]["isError"], false, "{retry}");
    assert!(!replayed(&retry), "{retry}");
    let structured = &retry["result"]["structuredContent"];
    assert_eq!(structured["performed"], true, "{retry}");
    assert_eq!(structured["decided_by"], "probe");
    assert_eq!(structured["by"], "ledger.recorded");
    assert_eq!(
        structured["probe_answer"],
        json!({ "result": "appended 'paid invoice 7'" })
    );
    assert_eq!(
        own_content(&retry),
        [json!({ "type": "text", "text": structured["message"] })],
        "{retry}"
    );
    let (lines, calls) = gateway.ledger_state();
    assert_eq!(lines, ["paid invoice 7"], "one row");
    assert_eq!(calls.len(), 1, "append was not sent again: {calls:?}");

    assert_eq!(journal(&gateway, &["--unresolved"]), json!([]));
    let resolved = resolutions(&gateway, &retry);
    assert_eq!(resolved.len(), 1, "{resolved:?}");
    assert_eq!(resolved[0]["by"], "probe ledger.recorded");
    assert_eq!(resolved[0]["detail"]["decided_by"], "probe");
    assert_eq!(resolved[0]["detail"]["resolution"], "performed");

    // The same call again replays what the probe decided.
    let again = server.client.call("append", args, json!({}));
    assert!(replayed(&again), "{again}");
    assert_eq!(own_content(&again), own_content(&retry));

    // The opposite case: another call is another line.
    let other = json!({ "line": "paid invoice 8" });
    assert!(!replayed(&server.client.call("append", other, json!({}))));
    assert_eq!(gateway.ledger_state().0.len(), 2);
}

/// The request was lost before the line was written: the probe finds nothing under
/// the key, the effect is resolved `not_performed` by it and sent once more under
/// the same key, and the agent gets that answer. One line; nothing unresolved.
#[test]
fn a_lost_request_that_never_landed_is_not_performed_by_its_probe_and_sent_once_more() {
    let Some(python) = needed("Python with the MCP SDK", &python()) else {
        return;
    };
    let gateway = Gateway::ledger(&python, PROBE);
    let mut server = gateway.serve(&[]);
    let args = json!({ "line": "shipped order 1", "lose_before": true });
    let lost = server.client.call("append", args.clone(), json!({}));
    assert_eq!(error(&lost)["kind"], "outcome_unknown", "{lost}");
    assert!(gateway.ledger_state().0.is_empty(), "nothing landed");

    let retry = server.client.call("append", args, json!({}));
    assert_eq!(retry["result"]["isError"], false, "{retry}");
    assert_eq!(
        own_content(&retry)[0]["text"],
        "appended 'shipped order 1'",
        "{retry}"
    );
    let (lines, calls) = gateway.ledger_state();
    assert_eq!(lines, ["shipped order 1"], "one row");
    assert_eq!(calls.len(), 2, "sent once more: {calls:?}");
    assert_eq!(calls[0]["key"], calls[1]["key"], "under the same key");
    assert!(calls[0]["key"].is_string());

    assert_eq!(journal(&gateway, &["--unresolved"]), json!([]));
    let resolved = resolutions(&gateway, &retry);
    assert_eq!(resolved.len(), 1, "{resolved:?}");
    assert_eq!(resolved[0]["detail"]["decided_by"], "probe");
    assert_eq!(resolved[0]["detail"]["resolution"], "not_performed");
}

/// Without a probe the model is told to stop; an operator's `resolve --performed`
/// without `--response` is then told as what the operator recorded (not an empty
/// result), and a later replay has that text above its note.
#[test]
fn without_a_probe_the_model_stops_and_an_operators_resolution_says_what_was_recorded() {
    let Some(python) = needed("Python with the MCP SDK", &python()) else {
        return;
    };
    let gateway = Gateway::ledger(&python, "");
    let mut server = gateway.serve(&[]);
    let args = json!({ "line": "paid invoice 9", "lose_first": true });
    let lost = server.client.call("append", args.clone(), json!({}));
    assert_eq!(error(&lost)["ends_by"], "person", "{lost}");
    assert!(error(&lost).get("retry_after_s").is_none(), "{lost}");
    assert!(
        note(&lost).starts_with("justonce: the outcome is unknown"),
        "{lost}"
    );
    assert!(note(&lost).contains("Stop retrying this call"), "{lost}");

    let unresolved = journal(&gateway, &["--unresolved"]);
    assert_eq!(unresolved[0]["pending"], "person", "{unresolved}");
    let effect = unresolved[0]["key"].as_str().unwrap();
    let out = justonce_command(Some(&gateway.dir.path().join("state.db")))
        .args(["resolve", effect, "--performed", "--by", "ada"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");

    let retry = server.client.call("append", args.clone(), json!({}));
    assert_eq!(retry["result"]["isError"], false, "{retry}");
    assert_eq!(
        own_content(&retry),
        [json!({
            "type": "text",
            "text": "ada (operator) recorded that this effect was performed; the downstream's own answer is not on record"
        })],
        "{retry}"
    );
    let again = server.client.call("append", args, json!({}));
    assert!(replayed(&again), "{again}");
    assert_eq!(own_content(&again), own_content(&retry));
    assert!(note(&again).contains("the result above"), "{again}");
    assert_eq!(gateway.ledger_state().1.len(), 1, "sent once");
}
