//! Kill the host at every step. A child `justonce` process is armed with
//! `JUSTONCE_FAULT` and aborts (no unwinding, like `kill -9`) at one point of a call; a
//! fresh process retries the same call. Whatever the point, the mailbox (a keyed
//! downstream in a SQLite file, which outlives both processes) holds exactly one
//! email, every request carried the key the killed process journaled, and the agent
//! is told a success-shaped result.
//!
//! Every test runs on both journals: `NAME::on_sqlite` (the mailbox is in the
//! journal's file) and `NAME::on_postgres` (a database of the test cluster; the
//! mailbox is a file in the processes' working directory), skipped by name where
//! there is no PostgreSQL.

use justonce::__private::FaultPoint;
use serde_json::Value;

use crate::support::process::{Backend, TestJournal, json_of};
use crate::support::time_and_random_body;

/// Kill-and-retry runs per fault point.
const REPEATS: u64 = 3;

/// The killed process's lease: the retry finds it live, waits, and takes over once
/// it has expired, as a retry after a real crash does.
const CHILD_LEASE_MS: &str = "300";

fn receipt(order: u64) -> String {
    format!(
        r#"{{"orders":[{{"order_id":{order},"email":"ada@example.com","amount_cents":1299}}]}}"#
    )
}

/// Runs `tool ARGS` in a child armed with `fault` and checks that it died there.
fn kill(journal: &TestJournal, tool: &str, args: &str, fault: &str) {
    let out = journal.justonce(
        &[
            "--lease-ms",
            CHILD_LEASE_MS,
            "run",
            tool,
            "--args",
            args,
            "--conversation",
            "crash",
        ],
        Some(fault),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "the child was meant to die at {fault}: {stderr}"
    );
    assert_eq!(
        out.status.code(),
        None,
        "killed by a signal, not an exit: {stderr}"
    );
    assert!(out.stdout.is_empty(), "the caller was never answered");
    assert!(stderr.contains("aborting at"), "{stderr}");
}

/// Retries the call in a fresh, unarmed process and returns what it printed.
fn retry(journal: &TestJournal, tool: &str, args: &str) -> Value {
    let out = journal.justonce(
        &["run", tool, "--args", args, "--conversation", "crash"],
        None,
    );
    let v = json_of(&out);
    assert_eq!(out.status.code(), Some(0), "{v}");
    v
}

/// One kill-and-retry run of `send_receipt` at `point`; checks the journal the killed
/// process left, then the retry's answer and the mailbox.
fn kill_and_retry(backend: Backend, point: FaultPoint, order: u64) {
    let journal = TestJournal::new(backend);
    let args = receipt(order);
    kill(&journal, "send_receipt", &args, point.as_str());

    // Where the process died shows in what it left behind.
    let state = journal.read();
    let (invocation, inv_state) = state.only_invocation();
    let effects = state.effects(&invocation);
    assert_eq!(effects.len(), 1, "{effects:?}");
    let journaled_key = effects[0].key.clone();
    let (mails, requests) = (state.mailbox().len(), state.requests().len());
    match point {
        FaultPoint::BeforeEffect => {
            assert_eq!(
                (inv_state.as_str(), effects[0].state.as_str()),
                ("running", "pending")
            );
            assert_eq!((mails, requests), (0, 0), "the provider was never called");
        }
        FaultPoint::AfterProvider => {
            assert_eq!(
                (inv_state.as_str(), effects[0].state.as_str()),
                ("running", "pending")
            );
            assert_eq!(
                (mails, requests),
                (1, 1),
                "sent, but the answer was not recorded"
            );
        }
        FaultPoint::AfterRecord => {
            // The mail provider is keyed: its answer is saved with the outcome, in
            // one commit, so the effect is still pending and the retry asks again
            // under the same key (the mailbox sends nothing twice).
            assert_eq!(
                (inv_state.as_str(), effects[0].state.as_str()),
                ("running", "pending")
            );
            assert_eq!(state.outcome(&invocation), None);
            assert_eq!((mails, requests), (1, 1), "sent once, answered");
        }
        FaultPoint::AfterOutcome => {
            assert_eq!(
                (inv_state.as_str(), effects[0].state.as_str()),
                ("completed", "done")
            );
        }
        FaultPoint::FsyncFails => unreachable!("not a crash"),
        // Reached only when a journaled call is decided again (a resume): the
        // simulator crashes there; these tests kill a first run.
        FaultPoint::AfterDecide => unreachable!("not a first run's point"),
    }

    let answer = retry(&journal, "send_receipt", &args);

    // What the agent is told: success-shaped, with the one email's id, under the
    // invocation key the killed process journaled.
    assert_eq!(answer["ok"], true, "{answer}");
    assert_eq!(answer["key"], invocation.as_str());
    assert_eq!(
        answer["replayed"],
        point == FaultPoint::AfterOutcome,
        "{answer}"
    );
    let mails = state.mailbox();
    assert_eq!(
        mails.len(),
        1,
        "exactly one email after a kill at {point:?}: {mails:?}"
    );
    assert_eq!(
        answer["result"]["sent"][0]["message_id"],
        mails[0].message_id.as_str()
    );
    assert_eq!(answer["result"]["sent"][0]["order_id"], order);
    // Every request downstream, from either process, carried the journaled key.
    let requests = state.requests();
    assert!(!requests.is_empty());
    assert!(
        requests.iter().all(|k| *k == journaled_key),
        "{requests:?} vs {journaled_key}"
    );
    assert_eq!(mails[0].key, journaled_key);
    let expected_requests = if matches!(point, FaultPoint::AfterProvider | FaultPoint::AfterRecord)
    {
        2
    } else {
        1
    };
    assert_eq!(requests.len(), expected_requests, "{point:?}: {requests:?}");
    let (_, final_state) = state.only_invocation();
    assert_eq!(final_state, "completed");
    assert_eq!(state.effects(&invocation)[0].state, "done");
}

fn killed_before_the_effect_then_retried_sends_one_email(backend: Backend) {
    for run in 0..REPEATS {
        kill_and_retry(backend, FaultPoint::BeforeEffect, 100 + run);
    }
}

fn killed_after_the_provider_answered_then_retried_sends_one_email(backend: Backend) {
    for run in 0..REPEATS {
        kill_and_retry(backend, FaultPoint::AfterProvider, 200 + run);
    }
}

fn killed_after_recording_the_effect_then_retried_sends_one_email(backend: Backend) {
    for run in 0..REPEATS {
        kill_and_retry(backend, FaultPoint::AfterRecord, 300 + run);
    }
}

fn killed_after_saving_the_outcome_then_retried_replays_it(backend: Backend) {
    for run in 0..REPEATS {
        kill_and_retry(backend, FaultPoint::AfterOutcome, 400 + run);
    }
}

fn killed_at_the_second_of_two_effects_then_retried_replays_the_first_and_sends_the_second_once(
    backend: Backend,
) {
    for point in ["before_effect:2", "after_provider:2"] {
        let journal = TestJournal::new(backend);
        let args = r#"{"orders":[
            {"order_id":1,"email":"a@example.com","amount_cents":100},
            {"order_id":2,"email":"b@example.com","amount_cents":200}]}"#;
        kill(&journal, "send_receipt", args, point);
        let state = journal.read();
        let (invocation, _) = state.only_invocation();
        let before = state.effects(&invocation);
        assert_eq!(
            before.iter().map(|e| e.state.as_str()).collect::<Vec<_>>(),
            ["done", "pending"],
            "{point}"
        );

        let answer = retry(&journal, "send_receipt", args);
        assert_eq!(answer["ok"], true, "{answer}");
        let mails = state.mailbox();
        assert_eq!(mails.len(), 2, "{point}: one email per order: {mails:?}");
        let keys: Vec<&str> = before.iter().map(|e| e.key.as_str()).collect();
        assert_eq!([mails[0].key.as_str(), mails[1].key.as_str()], keys[..]);
        let requests = state.requests();
        // The first email was replayed from the journal: requested once, by the
        // killed process only.
        assert_eq!(
            requests.iter().filter(|k| *k == keys[0]).count(),
            1,
            "{requests:?}"
        );
        let second = requests.iter().filter(|k| *k == keys[1]).count();
        assert_eq!(
            second,
            if point.starts_with("after_provider") {
                2
            } else {
                1
            }
        );
        let sent = answer["result"]["sent"].as_array().unwrap();
        assert_eq!(sent[0]["message_id"], mails[0].message_id.as_str());
        assert_eq!(sent[1]["message_id"], mails[1].message_id.as_str());
    }
}

fn a_guest_that_mails_the_time_and_a_random_number_is_killed_and_resumed_with_the_same_values(
    backend: Backend,
) {
    let tool = justonce_tests::guests::TIME_AND_RANDOM_COMPONENT;
    for run in 0..REPEATS {
        let journal = TestJournal::new(backend);
        // Each run its own call; the process dies after the mail was sent.
        let args = format!(r#"{{"run":{run}}}"#);
        kill(&journal, tool, &args, "after_provider");
        let state = journal.read();
        let sent_by_the_killed_process = state.mailbox();
        assert_eq!(sent_by_the_killed_process.len(), 1);
        let (now_nanos, random) = time_and_random_body(&sent_by_the_killed_process[0].body);

        let answer = retry(&journal, tool, &args);
        assert_eq!(answer["ok"], true, "no divergence: {answer}");
        assert_eq!(answer["replayed"], false);
        // The resumed guest read the same clock and random values, so it asked for
        // the same mail under the same key, and the mailbox deduplicated it.
        assert_eq!(answer["result"]["now_nanos"], now_nanos, "{answer}");
        assert_eq!(answer["result"]["random"], random, "{answer}");
        let mails = state.mailbox();
        assert_eq!(mails.len(), 1, "{mails:?}");
        assert_eq!(answer["result"]["message_id"], mails[0].message_id.as_str());
        let requests = state.requests();
        assert_eq!(requests, [mails[0].key.clone(), mails[0].key.clone()]);
    }
}

fn an_upgraded_tool_that_asks_for_a_different_effect_on_resume_gets_divergence_and_sends_nothing(
    backend: Backend,
) {
    let journal = TestJournal::new(backend);
    let args = r#"{"variant":"a"}"#;
    kill(
        &journal,
        justonce_tests::guests::DIVERGE_COMPONENT,
        args,
        "before_effect",
    );
    let state = journal.read();
    let (invocation, _) = state.only_invocation();
    let journaled = state.effects(&invocation);

    // The same call resumed by a new build of the tool, which sends another mail.
    let v2 = justonce_tests::guests::DIVERGE_V2_COMPONENT;
    for _ in 0..2 {
        let out = journal.justonce(
            &["run", v2, "--args", args, "--conversation", "crash"],
            None,
        );
        let answer = json_of(&out);
        assert_eq!(out.status.code(), Some(4), "{answer}");
        assert_eq!(answer["error"]["kind"], "divergence", "{answer}");
        assert_eq!(answer["key"], invocation.as_str());
        assert!(state.mailbox().is_empty(), "nothing was sent");
        assert!(state.requests().is_empty(), "the provider was never called");
        assert_eq!(
            state.effects(&invocation),
            journaled,
            "the journal is untouched"
        );
    }

    // The original build resumes it fine: one email.
    let answer = retry(&journal, justonce_tests::guests::DIVERGE_COMPONENT, args);
    assert_eq!(answer["ok"], true, "{answer}");
    assert_eq!(state.mailbox().len(), 1);
    assert_eq!(state.requests(), [journaled[0].key.clone()]);
}

/// A failed fsync of the SQLite journal (`full`) stops the host: the call is not
/// answered as if it were durable, the host exits with a host failure that says why,
/// and a fresh process (the journal reopened) finishes the call with one email.
#[test]
fn a_failed_fsync_stops_the_host_with_a_host_failure_that_says_why() {
    let journal = TestJournal::new(Backend::Sqlite);
    let args = receipt(500);
    let out = journal.justonce(
        &[
            "--lease-ms",
            CHILD_LEASE_MS,
            "run",
            "send_receipt",
            "--args",
            &args,
            "--conversation",
            "crash",
        ],
        Some(FaultPoint::FsyncFails.as_str()),
    );
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(5), "a host failure: {said}");
    assert!(
        said.contains("refuses writes") && said.contains("fsync"),
        "{said}"
    );
    let answer = retry(&journal, "send_receipt", &args);
    assert_eq!(answer["ok"], true, "{answer}");
    assert_eq!(journal.read().mailbox().len(), 1);
}

/// Each test, twice: `NAME::on_sqlite` and `NAME::on_postgres`, the latter skipped
/// by name where there is no PostgreSQL (a failure under `CI=true`).
macro_rules! on_both_journals {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            use crate::support::process::Backend;

            #[test]
            fn on_sqlite() {
                super::$name(Backend::Sqlite);
            }

            #[test]
            fn on_postgres() {
                let test = concat!(module_path!(), "::on_postgres");
                if justonce::__private::postgres_testing::cluster(test).is_some() {
                    super::$name(Backend::Postgres);
                }
            }
        }
    )*};
}

on_both_journals!(
    killed_before_the_effect_then_retried_sends_one_email,
    killed_after_the_provider_answered_then_retried_sends_one_email,
    killed_after_recording_the_effect_then_retried_sends_one_email,
    killed_after_saving_the_outcome_then_retried_replays_it,
    killed_at_the_second_of_two_effects_then_retried_replays_the_first_and_sends_the_second_once,
    a_guest_that_mails_the_time_and_a_random_number_is_killed_and_resumed_with_the_same_values,
    an_upgraded_tool_that_asks_for_a_different_effect_on_resume_gets_divergence_and_sends_nothing,
);
