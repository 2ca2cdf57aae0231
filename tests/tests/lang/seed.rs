//! The seed's scenarios against the example ticket tool of each language: it opens a
//! ticket over HTTP (the `http` provider to a helpdesk on 127.0.0.1 that deduplicates
//! by `Idempotency-Key`) and emails a confirmation (the `mail` provider). Every retry
//! scenario asserts the seed's four things: the retry happened, the effect store holds
//! one record, both attempts carried the same key, and the agent was told a
//! success-shaped result; the opposite cases check that distinct calls both happen.

use std::path::Path;
use std::sync::Barrier;

use justonce::__private::{Behaviour, LocalApi};
use justonce::{CallRequest, Host, Outcome};
use serde_json::{Value, json};

use super::Lang;
use crate::support::process::{Db, json_of, justonce};
use crate::support::success;

fn ticket(lang: &Lang, subject: &str) -> CallRequest {
    CallRequest::new(
        lang.ticket_tool,
        json!({ "email": "ada@example.com", "subject": subject, "priority": "urgent" }).to_string(),
    )
    .conversation("conv-lang")
}

/// The journaled keys of the effects of the one invocation of `tool`.
fn effect_keys(host: &Host, tool: &str) -> Vec<String> {
    let journal = host.journal(None, 100).unwrap();
    let runs: Vec<_> = journal.iter().filter(|e| e.tool == tool).collect();
    assert_eq!(runs.len(), 1, "one invocation record: {journal:?}");
    assert!(runs[0].effects.iter().all(|e| e.state == "done"));
    runs[0].effects.iter().map(|e| e.key.clone()).collect()
}

fn keys_seen(api: &LocalApi) -> Vec<Option<String>> {
    api.requests().into_iter().map(|r| r.key).collect()
}

/// The ticket lands and its answer is lost; so does the mail's. The host retries each
/// under its journaled key; the agent's own retry of the call is replayed.
pub fn lost_responses_are_retried_under_one_key_and_the_agents_retry_is_replayed(lang: &Lang) {
    let api = LocalApi::start().unwrap();
    api.script([Behaviour::ApplyThenDrop]);
    let t = lang.host(&api, 1);
    let request = ticket(lang, "Cannot log in");

    let first = t.host.call(&request).unwrap();

    // The retry happened, for both effects.
    assert_eq!(api.requests().len(), 2, "{:?}", api.requests());
    assert_eq!(t.mail.attempts().len(), 2);
    // The effect store holds one record of each: one ticket, one email.
    let keys = effect_keys(&t.host, lang.ticket_tool);
    assert_eq!(keys.len(), 2, "the ticket and the email");
    let applied = api.applied();
    assert_eq!(applied.len(), 1, "one ticket");
    assert_eq!(applied[0].body["priority"], "urgent");
    let sent = t.mail.sent().unwrap();
    assert_eq!(sent.len(), 1, "one email");
    // Both attempts carried the same key, the journaled one.
    assert_eq!(keys_seen(&api), vec![Some(keys[0].clone()); 2]);
    assert_eq!(t.mail.attempts(), vec![keys[1].clone(); 2]);
    assert_eq!(sent[0].key, keys[1]);
    // The agent was told a success-shaped result with the one ticket and email.
    assert!(!first.replayed);
    let result = success(&first.outcome);
    assert_eq!(result["ticket"], applied[0].id.as_str(), "{result}");
    assert_eq!(
        result["message_id"],
        sent[0].message_id.as_str(),
        "{result}"
    );
    assert!(sent[0].subject.contains(applied[0].id.as_str()));

    // The agent retries the call (its answer was lost too): replayed, nothing sent.
    let again = t.host.call(&request).unwrap();
    assert!(again.replayed, "marked replayed");
    assert_eq!(again.key, first.key, "the same key");
    assert_eq!(
        again.outcome, first.outcome,
        "told the same, success-shaped"
    );
    assert_eq!(api.requests().len(), 2);
    assert_eq!(t.mail.attempts().len(), 2);
}

/// Two calls with different arguments are two tickets and two emails.
pub fn two_different_calls_both_happen(lang: &Lang) {
    let api = LocalApi::start().unwrap();
    let t = lang.host(&api, 0);
    let a = t.host.call(&ticket(lang, "Cannot log in")).unwrap();
    let b = t.host.call(&ticket(lang, "Invoice is wrong")).unwrap();
    assert!(!a.replayed && !b.replayed);
    assert_ne!(a.key, b.key);
    assert_ne!(success(&a.outcome)["ticket"], success(&b.outcome)["ticket"]);
    assert_eq!(api.applied().len(), 2);
    assert_eq!(t.mail.sent().unwrap().len(), 2);
    let keys: Vec<Option<String>> = keys_seen(&api);
    assert_ne!(keys[0], keys[1], "each ticket under its own key");
}

/// Duplicates sent at once run once: one ticket, one email, everyone told the same.
pub fn parallel_duplicates_run_once(lang: &Lang) {
    const CALLERS: usize = 4;
    let api = LocalApi::start().unwrap();
    let t = lang.host(&api, 0);
    let request = ticket(lang, "Cannot log in");
    let barrier = Barrier::new(CALLERS);
    let answers: Vec<_> = std::thread::scope(|s| {
        let callers: Vec<_> = (0..CALLERS)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    t.host.call(&request).unwrap()
                })
            })
            .collect();
        callers.into_iter().map(|c| c.join().unwrap()).collect()
    });
    assert_eq!(api.applied().len(), 1, "one ticket");
    assert_eq!(t.mail.sent().unwrap().len(), 1, "one email");
    let ran = answers.iter().filter(|a| !a.replayed).count();
    assert_eq!(ran, 1, "exactly one caller ran it");
    for a in &answers {
        assert_eq!(a.key, answers[0].key);
        assert_eq!(a.outcome, answers[0].outcome);
        success(&a.outcome);
    }
    assert_eq!(effect_keys(&t.host, lang.ticket_tool).len(), 2);
}

/// A `ToolError` the tool raises reaches the agent with its code and details, is
/// saved, and is replayed; arguments the derived schema refuses (a property it does not
/// declare, a value outside an enum) never reach the tool and leave nothing stored.
pub fn tool_errors_are_replayed_and_the_derived_schema_is_closed(lang: &Lang) {
    let api = LocalApi::start().unwrap();
    let t = lang.host(&api, 0);
    let bad_email = CallRequest::new(
        lang.ticket_tool,
        json!({ "email": "nobody", "subject": "Cannot log in" }).to_string(),
    );
    let first = t.host.call(&bad_email).unwrap();
    match &first.outcome {
        Outcome::ToolError {
            code,
            message,
            details,
        } => {
            assert_eq!(code, "invalid_email");
            assert!(message.contains('@'), "{message}");
            assert_eq!(details, &Some(json!({ "email": "nobody" })));
        }
        other => panic!("expected the tool's error, got {other:?}"),
    }
    let again = t.host.call(&bad_email).unwrap();
    assert!(again.replayed);
    assert_eq!(again.outcome, first.outcome);
    assert!(api.requests().is_empty(), "nothing was sent");

    let tool = t.host.runtime().tool(lang.ticket_tool).unwrap();
    let schema = &tool.input_schema;
    assert_eq!(schema["additionalProperties"], false, "{schema}");
    assert_eq!(schema["required"], json!(["email", "subject"]), "{schema}");
    assert_eq!(
        schema["properties"]["priority"]["default"], "normal",
        "{schema}"
    );
    let stored = t.host.journal(None, 100).unwrap().len();
    for args in [
        json!({ "email": "a@example.com", "subject": "Hi there", "cc": "b@example.com" }),
        json!({ "email": "a@example.com", "subject": "Hi there", "priority": "whenever" }),
        json!({ "email": "a@example.com" }),
    ] {
        let err = t
            .host
            .call(&CallRequest::new(lang.ticket_tool, args.to_string()))
            .unwrap_err();
        assert_eq!(err.kind(), "invalid_arguments", "{args}: {err}");
    }
    assert_eq!(t.host.journal(None, 100).unwrap().len(), stored);
}

/// The `justonce` CLI, killed at `point` of a call of the ticket tool and run again,
/// as `tests/tests/crash.rs` does for Rust tools. Each point runs against its own
/// database in `dir`; the processes share the tests' per-user compiled-component cache.
fn kill_and_resume(lang: &Lang, dir: &Path, point: &str) {
    let name = format!(
        "{}-{}-{}",
        lang.name,
        point.replace(':', "-"),
        std::process::id()
    );
    let db = dir.join(format!("{name}.db"));
    for stale in ["db", "db-wal", "db-shm"] {
        let _ = std::fs::remove_file(dir.join(format!("{name}.{stale}")));
    }
    let api = LocalApi::start().unwrap();
    let config = dir.join(format!("{name}.http.json"));
    let http = json!({
        "services": { "helpdesk": api.url() },
        "allow": { lang.ticket_tool: [api.url()] },
    });
    std::fs::write(&config, http.to_string()).unwrap();
    let component = lang.ticket.to_str().unwrap();
    let args = json!({ "email": "ada@example.com", "subject": "Cannot log in" }).to_string();
    let run = |lease: Option<&str>, fault: Option<&str>| {
        let mut argv = vec!["--http-config", config.to_str().unwrap()];
        if let Some(ms) = lease {
            argv.extend(["--lease-ms", ms]);
        }
        argv.extend(["run", component, "--args", &args, "--conversation", "crash"]);
        justonce(&db, &argv, fault)
    };

    let killed = run(Some("300"), Some(point));
    let stderr = String::from_utf8_lossy(&killed.stderr);
    assert_eq!(killed.status.code(), None, "killed by a signal: {stderr}");
    assert!(killed.stdout.is_empty(), "the caller was never answered");
    assert!(stderr.contains("aborting at"), "{stderr}");
    let state = Db::open(&db);
    let (invocation, _) = state.only_invocation();
    let journaled: Vec<String> = state
        .effects(&invocation)
        .into_iter()
        .map(|e| e.key)
        .collect();

    let out = run(None, None);
    let answer: Value = json_of(&out);
    assert_eq!(out.status.code(), Some(0), "{answer}");
    // Success-shaped, under the key the killed process journaled, and resumed, not
    // replayed: the killed process never saved an outcome.
    assert_eq!(answer["ok"], true, "{answer}");
    assert_eq!(answer["key"], invocation.as_str());
    assert_eq!(answer["replayed"], false);
    // One ticket and one email, each under its journaled key at every attempt.
    let effects = state.effects(&invocation);
    assert_eq!(effects.len(), 2, "{effects:?}");
    assert!(effects.iter().all(|e| e.state == "done"));
    assert_eq!(effects[0].key, journaled[0], "the ticket's key was carried");
    let applied = api.applied();
    assert_eq!(applied.len(), 1, "one ticket after a kill at {point}");
    let ticket_keys = keys_seen(&api);
    assert!(
        ticket_keys
            .iter()
            .all(|k| k.as_deref() == Some(effects[0].key.as_str()))
    );
    let mails = state.mailbox();
    assert_eq!(
        mails.len(),
        1,
        "one email after a kill at {point}: {mails:?}"
    );
    assert_eq!(mails[0].key, effects[1].key);
    assert!(state.requests().iter().all(|k| *k == effects[1].key));
    assert_eq!(answer["result"]["ticket"], applied[0].id.as_str());
    assert_eq!(answer["result"]["message_id"], mails[0].message_id.as_str());
    // Where it died shows in how often each downstream was asked.
    let (ticket_requests, mail_requests) = match point {
        // The ticket landed, its answer was not recorded: asked again, same key.
        "after_provider" => (2, 1),
        // The ticket was on record; the email was sent, its answer not recorded.
        "after_provider:2" => (1, 2),
        other => panic!("no expectation for {other}"),
    };
    assert_eq!(
        ticket_keys.len(),
        ticket_requests,
        "{point}: {ticket_keys:?}"
    );
    assert_eq!(state.requests().len(), mail_requests, "{point}");
}

/// A kill after the ticket was opened, and one after the email was sent, each
/// followed by a fresh process that resumes the call.
pub fn a_crash_mid_call_is_resumed_under_the_same_keys(lang: &Lang) {
    // Beside the test runtimes' cache: the processes load the tool without compiling.
    let dir = super::state_dir();
    std::fs::write(dir.join("justonce.toml"), CLI_CONFIG).unwrap();
    for point in ["after_provider", "after_provider:2"] {
        kill_and_resume(lang, &dir, point);
    }
}

/// The CLI's limits for these tools (see [`super::limits`]).
const CLI_CONFIG: &str = "[limits]\ndeadline_ms = 60000\n";

/// The seed's scenarios as tests of one language.
macro_rules! seed_tests {
    ($module:ident, $lang:expr) => {
        mod $module {
            #[test]
            fn lost_responses_are_retried_under_one_key_and_the_agents_retry_is_replayed() {
                super::lost_responses_are_retried_under_one_key_and_the_agents_retry_is_replayed(
                    &$lang,
                );
            }

            #[test]
            fn two_different_calls_both_happen() {
                super::two_different_calls_both_happen(&$lang);
            }

            #[test]
            fn tool_errors_are_replayed_and_the_derived_schema_is_closed() {
                super::tool_errors_are_replayed_and_the_derived_schema_is_closed(&$lang);
            }

            #[test]
            fn parallel_duplicates_run_once() {
                super::parallel_duplicates_run_once(&$lang);
            }

            // Needs the fault-injection points (see tests/tests/main.rs).
            #[cfg(any(debug_assertions, feature = "fault-injection"))]
            #[test]
            fn a_crash_mid_call_is_resumed_under_the_same_keys() {
                super::a_crash_mid_call_is_resumed_under_the_same_keys(&$lang);
            }
        }
    };
}

seed_tests!(python, super::super::PYTHON);
seed_tests!(javascript, super::super::JAVASCRIPT);
