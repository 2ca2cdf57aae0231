//! The bad day of an operator (issue 17), through the `justonce` binary: one call's
//! story (`journal KEY`), `forget` and `abandon`, each refused where it would be
//! unsafe, and recorded with who and when.

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::support::cli::justonce_command;
use crate::support::db::mailbox_count;
use crate::support::process::{Db, json_of, justonce};

const ARGS: &str =
    r#"{"orders":[{"order_id":4417,"email":"ada@example.com","amount_cents":1299}]}"#;

/// `justonce run send_receipt` in conversation `c`, with `extra` flags before `run`.
fn run(db: &Path, extra: &[&str], fault: Option<&str>) -> Output {
    let mut args = extra.to_vec();
    args.extend(["run", "send_receipt", "--args", ARGS, "--conversation", "c"]);
    justonce(db, &args, fault)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn story(db: &Path, key: &str) -> Value {
    let out = justonce(db, &["journal", key, "--json"], None);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    json_of(&out)
}

/// Whether `text` is an RFC 3339 time in UTC, as the journal prints it.
fn is_rfc3339_utc(text: &Value) -> bool {
    let text = text.as_str().unwrap_or_default();
    text.len() == 24 && text.ends_with('Z') && text.as_bytes()[10] == b'T'
}

#[test]
fn a_forgotten_call_runs_again_under_a_new_key_and_its_story_says_who_forgot_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let first = json_of(&run(&db, &[], None));
    let key = first["key"].as_str().unwrap().to_string();
    assert!(json_of(&run(&db, &[], None))["replayed"] == true);

    let before = story(&db, &key);
    let entry = &before["entry"];
    assert_eq!(entry["conversation"], "c");
    assert!(entry.get("scope").is_none(), "one name in text and JSON");
    assert_eq!(
        entry["arguments"],
        serde_json::from_str::<Value>(ARGS).unwrap()
    );
    assert_eq!(entry["replays"], 1);
    assert_eq!(entry["summary"], "success");
    assert!(is_rfc3339_utc(&entry["created_at"]), "{entry}");
    assert!(is_rfc3339_utc(&entry["completed_at"]), "{entry}");
    assert!(
        is_rfc3339_utc(&entry["effects"][0]["updated_at"]),
        "{entry}"
    );
    let old_effect_key = entry["effects"][0]["key"].clone();

    let forgot = justonce(&db, &["forget", &key, "--by", "grace"], None);
    assert_eq!(forgot.status.code(), Some(0), "{}", stderr(&forgot));
    let out = String::from_utf8_lossy(&forgot.stdout);
    assert!(
        out.contains(&format!("call {key} forgotten (by grace, ")),
        "{out}"
    );
    let again = json_of(&run(&db, &[], None));

    assert_eq!(
        again["replayed"], false,
        "forget lets the same call run again"
    );
    assert_eq!(
        mailbox_count(&db),
        2,
        "sent again: that is what forget means"
    );
    let after = story(&db, &key);
    assert_ne!(
        after["entry"]["effects"][0]["key"], old_effect_key,
        "under a new effect key downstream"
    );
    let op = &after["operations"][0];
    assert_eq!(
        (&op["action"], &op["by"]),
        (&"forget".into(), &"grace".into())
    );
    assert!(is_rfc3339_utc(&op["at"]), "{op}");
    assert_eq!(op["detail"]["effects"][0]["key"], old_effect_key);

    // The text shows the same fields by the same names.
    let text = justonce(&db, &["journal", &key], None);
    let text = String::from_utf8_lossy(&text.stdout);
    for field in [
        "conversation=c",
        "replays=0",
        "arguments: {",
        "forget  by=grace",
    ] {
        assert!(text.contains(field), "{field} in:\n{text}");
    }
}

#[test]
fn forget_of_a_call_with_an_unknown_outcome_is_refused_unless_forced_and_abandon_closes_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    // The email is sent, then the process dies before it records the answer.
    let killed = run(&db, &["--lease-ms", "1"], Some("after_provider"));
    assert_eq!(killed.status.code(), None, "{}", stderr(&killed));
    let (key, state) = Db::open(&db).only_invocation();
    assert_eq!(state, "running");

    let refused = justonce(&db, &["forget", &key, "--by", "grace"], None);
    assert_eq!(
        refused.status.code(),
        Some(2),
        "bad input: {}",
        stderr(&refused)
    );
    let reason = stderr(&refused);
    assert!(
        reason.contains(&format!("cannot forget call {key}"))
            && reason.contains("outcome is unknown"),
        "{reason}"
    );
    assert!(story(&db, &key)["entry"].is_object(), "nothing changed");

    let abandoned = justonce(&db, &["abandon", &key, "--by", "grace", "--json"], None);
    let mut command = justonce_command(Some(&db));
    command.args(["abandon", &key]).env("USER", "grace");
    let twice = command.output().unwrap();
    let retry = run(&db, &[], None);

    assert_eq!(abandoned.status.code(), Some(0), "{}", stderr(&abandoned));
    let abandoned = json_of(&abandoned);
    assert_eq!(abandoned["result"], "done");
    assert_eq!(
        abandoned["operation"]["detail"]["effects"][0]["performed"],
        "unknown"
    );
    assert_eq!(twice.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&twice.stdout).contains("abandoned already"),
        "{}",
        String::from_utf8_lossy(&twice.stdout)
    );
    assert_eq!(
        retry.status.code(),
        Some(1),
        "a saved trap: {}",
        stderr(&retry)
    );
    let retry = json_of(&retry);
    assert_eq!(
        retry["replayed"], true,
        "an abandoned outcome is an outcome"
    );
    assert_eq!(retry["error"]["code"], "abandoned");
    assert!(
        retry["error"]["message"]
            .as_str()
            .unwrap()
            .contains("#0 mail.send"),
        "{retry}"
    );
    assert_eq!(mailbox_count(&db), 1, "nothing sent again");

    // Its email's outcome is still unknown: forgetting it needs --force.
    let unforced = justonce(&db, &["forget", &key, "--by", "grace"], None);
    assert_eq!(unforced.status.code(), Some(2), "{}", stderr(&unforced));
    let forced = justonce(&db, &["forget", &key, "--by", "grace", "--force"], None);
    assert_eq!(forced.status.code(), Some(0), "{}", stderr(&forced));
}

#[test]
fn operations_name_what_is_wrong_with_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let key = json_of(&run(&db, &[], None))["key"]
        .as_str()
        .unwrap()
        .to_string();
    let never = "0".repeat(32);
    let cases: [(Vec<&str>, &str); 5] = [
        (
            vec!["forget", "not a key", "--by", "g"],
            "invalid idempotency key",
        ),
        (vec!["journal", "not a key"], "invalid idempotency key"),
        (vec!["forget", &never, "--by", "g"], "no call with this key"),
        (
            vec!["abandon", &never, "--by", "g"],
            "no call with this key",
        ),
        (vec!["abandon", &key, "--by", "g"], "outcome of its own"),
    ];
    for (args, expected) in cases {
        let out = justonce(&db, &args, None);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(expected),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    let mut command = justonce_command(Some(&db));
    command.args(["forget", &key]).env_remove("USER");
    let nobody = command.output().unwrap();
    assert_eq!(nobody.status.code(), Some(2));
    assert!(stderr(&nobody).contains("--by NAME"), "{}", stderr(&nobody));
    assert_eq!(
        json_of(&run(&db, &[], None))["replayed"],
        true,
        "no refused operation changed anything"
    );
}

/// `rotate-state-secret`: the states a host makes from then on are under a new secret
/// of the journal's, and the states made before are still checked as its own; the
/// command says so. Another journal's host never checks them.
#[test]
fn rotate_state_secret_makes_new_states_under_a_new_secret_and_honours_the_old_ones() {
    use justonce::{AskContext, Host, InvocationKey, StateCheck, check_request_state};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let open = |path: &Path| {
        Host::builder()
            .runtime(crate::support::RUNTIME.clone())
            .database(path)
            .build()
            .unwrap()
    };
    let host = open(&db);
    let key = InvocationKey::parse("c1.refund").unwrap();
    let effect = justonce::__private::effect_key(&key, 1, 0);
    let at = |keys| AskContext {
        tool: "refund",
        key: &key,
        seq: 0,
        effect_key: &effect,
        principal: None,
        keys,
    };
    let before = host.state_keys().unwrap();
    let state = at(&before).state();

    let out = justonce(&db, &["rotate-state-secret"], None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("rotated the request-state secret"), "{said}");

    let after = host.state_keys().unwrap();
    assert_ne!(at(&after).state(), state, "new states under the new secret");
    assert_eq!(
        check_request_state(&state, &at(&after)),
        StateCheck::ForThisQuestion
    );
    let elsewhere = open(&dir.path().join("other.db")).state_keys().unwrap();
    assert_eq!(
        check_request_state(&state, &at(&elsewhere)),
        StateCheck::Forged
    );
}
