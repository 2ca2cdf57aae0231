//! The log an operator reads during an incident (issue 40): one line per call with
//! the fields someone greps for, `warn` for a takeover (naming the host that
//! stopped), a retry (with what the attempt got) and an unknown outcome, and the
//! journal saying who holds a call or whose lease ended. Driven like the contract
//! tests, on two hosts that share one journal, with the log captured as JSON.

use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use serde_json::Value;

use super::*;
use crate::journal::{HostIdentity, LeaseStatus, Operator};
use crate::test_log::logged;

fn named(mut host: Host, name: &str) -> Host {
    host.guard = host
        .guard
        .identified_as(HostIdentity::current(Some(name), 0).unwrap());
    host
}

/// The lines whose message starts with `start`.
fn lines_saying<'a>(lines: &'a [Value], start: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|l| {
            l["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with(start))
        })
        .collect()
}

#[test]
fn a_takeover_is_logged_naming_the_host_that_stopped_and_each_call_gets_one_line() {
    let mut runner = ScriptedRunner::default();
    pay_tool(&mut runner, "payments");
    let runner = Arc::new(runner);
    let (reached_tx, reached_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel();
    let gate = Arc::new(Mutex::new(Some((reached_tx, release_rx))));
    // web-1's attempt hangs past its lease (the host that was killed).
    let payments = Downstream::new(ProviderClass::Keyed, vec![Fault::Hold(gate)]);
    let clock = Arc::new(ManualClock::default());
    let journal = fresh_journal(&clock);
    let providers: [(&str, Arc<dyn Provider>); 1] = [("payments", payments.clone())];
    let a = Arc::new(named(
        host_renewing(
            Arc::clone(&journal),
            clock.clone(),
            Arc::clone(&runner),
            &providers,
            None,
        ),
        "web-1",
    ));
    let b = named(
        host_on(Arc::clone(&journal), clock.clone(), runner, &providers),
        "web-2",
    );
    let a_call = {
        let a = Arc::clone(&a);
        std::thread::spawn(move || a.guard.call(&pay(10)))
    };
    reached_rx.recv().unwrap();

    // While web-1 holds it, the journal says so; once its lease ended, whose it was.
    let now = clock.now_ms();
    let entry = journal.entries(None, 1).unwrap().remove(0).judged_at(now);
    assert!(
        entry.holding.starts_with("running on web-1 (pid "),
        "{}",
        entry.holding
    );
    assert!(
        entry.holding.contains(", lease until "),
        "{}",
        entry.holding
    );
    clock.advance(LEASE + Duration::from_secs(1));
    let entry = journal
        .entries(None, 1)
        .unwrap()
        .remove(0)
        .judged_at(clock.now_ms());
    assert!(
        matches!(
            entry.lease_status(clock.now_ms()),
            LeaseStatus::Ended { .. }
        ),
        "{entry:?}"
    );
    assert!(
        entry.holding.starts_with("stopped: web-1 (pid ")
            && entry
                .holding
                .ends_with("'s lease ended at 2026-01-01T00:01:00.000Z; the next retry of the same call resumes it"),
        "{}",
        entry.holding
    );
    assert_eq!(entry.states(clock.now_ms()), ["stopped", "unknown"]);

    let (answer, lines) = logged(|| b.guard.call(&pay(10)));
    release_tx.send(()).unwrap();
    let _ = a_call.join().unwrap();
    assert!(answer.unwrap().outcome.is_success());

    let takeover = lines_saying(&lines, "took over a call from web-1");
    assert_eq!(takeover.len(), 1, "{lines:#?}");
    let takeover = takeover[0];
    assert_eq!(takeover["level"], "WARN");
    assert!(
        takeover["fields"]["from"]
            .as_str()
            .unwrap()
            .starts_with("web-1 (pid "),
        "{takeover}"
    );
    assert_eq!(takeover["fields"]["host"], "web-2");
    assert_eq!(
        takeover["fields"]["lease_ended"],
        "2026-01-01T00:01:00.000Z"
    );

    let retry = lines_saying(&lines, "retrying effect #0 under the same key");
    assert_eq!(retry.len(), 1, "{lines:#?}");
    assert_eq!(retry[0]["level"], "WARN");
    assert_eq!(retry[0]["fields"]["after"], "earlier_run");
    assert_eq!(retry[0]["fields"]["attempt"], 2);

    let calls: Vec<&Value> = lines
        .iter()
        .filter(|l| l["target"] == "justonce::call")
        .collect();
    assert_eq!(calls.len(), 1, "one line per call: {lines:#?}");
    let call = &calls[0]["fields"];
    assert_eq!(calls[0]["level"], "INFO");
    assert_eq!(call["message"], "call answered");
    assert_eq!(call["tool"], "pay");
    assert_eq!(call["key"].as_str().unwrap(), entry.key);
    assert_eq!(call["conversation"], "c1");
    assert_eq!(call["outcome"], "success");
    assert_eq!(call["replayed"], false);
    assert_eq!(call["runs"], 1);
    assert_eq!(call["attempts"], 1);
    assert_eq!(call["host"], "web-2");
    assert!(call["duration_ms"].is_u64(), "{call}");

    // The agent's next retry: replayed, nothing ran.
    let (_, lines) = logged(|| b.guard.call(&pay(10)).unwrap());
    let call = lines
        .iter()
        .find(|l| l["target"] == "justonce::call")
        .unwrap();
    assert_eq!(call["fields"]["replayed"], true);
    assert_eq!(call["fields"]["runs"], 0);
    assert_eq!(call["fields"]["attempts"], 0);
}

#[test]
fn an_unknown_outcome_is_a_warning_that_says_the_retry_is_safe_and_what_each_attempt_got() {
    let mut runner = ScriptedRunner::default();
    pay_tool(&mut runner, "payments");
    let payments = Downstream::new(ProviderClass::Keyed, vec![Fault::LoseResponse; 3]);
    let h = named(host(runner, &[("payments", payments.clone())]), "web-1");

    let (answer, lines) = logged(|| h.guard.call(&pay(10)));
    assert!(
        matches!(answer, Err(Error::OutcomeUnknown { .. })),
        "{answer:?}"
    );

    let retries = lines_saying(&lines, "retrying effect #0 under the same key");
    assert_eq!(retries.len(), 2, "{lines:#?}");
    for retry in &retries {
        assert_eq!(retry["fields"]["after"], "unknown");
        assert!(
            retry["fields"]["message"]
                .as_str()
                .unwrap()
                .ends_with("the last attempt got: outcome unknown: timed out reading the response"),
            "{retry}"
        );
    }
    let unknown = lines_saying(&lines, "outcome unknown: effect #0 (payments)");
    assert_eq!(unknown.len(), 1, "{lines:#?}");
    assert_eq!(unknown[0]["level"], "WARN");
    let call = lines
        .iter()
        .find(|l| l["target"] == "justonce::call")
        .unwrap();
    assert_eq!(call["level"], "WARN");
    assert_eq!(call["fields"]["outcome"], "outcome_unknown");
    assert_eq!(call["fields"]["attempts"], 3);
    assert!(
        call["fields"]["message"]
            .as_str()
            .unwrap()
            .contains("the same call resumes it under the same effect key"),
        "{call}"
    );

    // The journal says it is stuck (no host holds it; its outcome is unknown).
    let entry = h.journal.entries(None, 1).unwrap().remove(0);
    assert_eq!(entry.states(h.clock.now_ms()), ["incomplete", "unknown"]);
}

#[test]
fn operator_actions_are_logged_with_who_refused_ones_too() {
    let mut runner = ScriptedRunner::default();
    pay_tool(&mut runner, "payments");
    let payments = Downstream::new(ProviderClass::Keyed, vec![Fault::LoseResponse; 3]);
    let h = host(runner, &[("payments", payments.clone())]);
    assert!(h.guard.call(&pay(10)).is_err());
    let key =
        crate::keys::InvocationKey::parse(&h.journal.entries(None, 1).unwrap()[0].key).unwrap();
    let operator = |force| Operator {
        by: "grace",
        force,
        now: h.clock.now_ms(),
    };

    let (refused, lines) = logged(|| h.journal.forget(&key, &operator(false)));
    assert!(refused.is_err());
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert_eq!(lines[0]["level"], "WARN");
    assert_eq!(lines[0]["target"], "justonce::operator");
    assert_eq!(lines[0]["fields"]["by"], "grace");
    assert_eq!(lines[0]["fields"]["action"], "forget");
    assert!(
        lines[0]["fields"]["message"]
            .as_str()
            .unwrap()
            .starts_with(&format!("operator grace: forget {key} refused: ")),
        "{}",
        lines[0]
    );

    let (done, lines) = logged(|| h.journal.abandon(&key, &operator(false)));
    assert!(done.is_ok(), "{done:?}");
    assert_eq!(lines[0]["level"], "INFO");
    assert_eq!(
        lines[0]["fields"]["message"],
        format!("operator grace: abandon {key} done")
    );
}

/// A downstream that answers 409 (still processing this key) `conflicts` times, then
/// succeeds.
struct StillProcessing(Mutex<u32>);

impl Provider for StillProcessing {
    fn class(&self) -> ProviderClass {
        ProviderClass::Keyed
    }

    fn perform(
        &self,
        request: &crate::provider::EffectRequest<'_>,
    ) -> Result<Value, ProviderError> {
        let mut left = self.0.lock().unwrap();
        if *left > 0 {
            *left -= 1;
            return Err(ProviderError::Conflict {
                reason: "https://pay.example/refunds answered 409".into(),
                retry_after: None,
            });
        }
        Ok(serde_json::json!({ "id": request.key.to_string() }))
    }
}

#[test]
fn metrics_say_which_tool_retries_against_which_provider_a_409_is_a_conflict_and_what_is_stuck() {
    let mut runner = ScriptedRunner::default();
    pay_tool(&mut runner, "payments");
    let runner = Arc::new(runner);
    let payments: Arc<dyn Provider> = Arc::new(StillProcessing(Mutex::new(1)));
    let lost: Arc<dyn Provider> =
        Downstream::new(ProviderClass::Keyed, vec![Fault::LoseResponse; 3]);
    let clock = Arc::new(ManualClock::default());
    let journal = fresh_journal(&clock);
    let h = host_on(
        Arc::clone(&journal),
        clock.clone(),
        Arc::clone(&runner),
        &[("payments", payments)],
    );
    assert!(h.guard.call(&pay(10)).unwrap().outcome.is_success());
    assert_eq!(
        counted(
            &h,
            r#"justonce_tool_effect_retries_total{tool="pay",provider="payments",service="payments",after="conflict"}"#
        ),
        1.0
    );
    assert_eq!(
        counted(
            &h,
            r#"justonce_effect_attempts_total{provider="payments",result="conflict"}"#
        ),
        1.0
    );
    assert_eq!(
        counted(
            &h,
            r#"justonce_effect_attempts_total{provider="payments",result="throttled"}"#
        ),
        0.0,
        "a 409 is not throttling"
    );
    let now = h.clock.now_ms();
    assert_eq!(h.journal.attention(now).unwrap().stuck, 0);

    // A call stuck on an unknown outcome counts until it is abandoned.
    // (Another host, the same journal, whose downstream loses every response.)
    let h = host_on(journal, clock, runner, &[("payments", lost)]);
    assert!(h.guard.call(&pay(11)).is_err());
    let now = h.clock.now_ms();
    assert_eq!(h.journal.attention(now).unwrap().stuck, 1);
    assert_eq!(
        counted(
            &h,
            r#"justonce_tool_effect_retries_total{tool="pay",provider="payments",service="payments",after="unknown"}"#
        ),
        2.0
    );
    let stuck = h
        .journal
        .entries(None, 10)
        .unwrap()
        .into_iter()
        .find(|e| e.state != "completed")
        .unwrap();
    let key = crate::keys::InvocationKey::parse(&stuck.key).unwrap();
    let operator = Operator {
        by: "grace",
        force: false,
        now,
    };
    h.journal.abandon(&key, &operator).unwrap();
    assert_eq!(
        h.journal.attention(now).unwrap().stuck,
        0,
        "an abandoned call is not stuck"
    );
}

/// The same on PostgreSQL: its statements for the lease's previous owner and for
/// what needs attention are its own.
mod on_postgres {
    macro_rules! on_postgres {
        ($($name:ident),* $(,)?) => {$(
            #[test]
            fn $name() {
                super::super::run_on_postgres(stringify!($name), super::$name);
            }
        )*};
    }
    on_postgres!(
        a_takeover_is_logged_naming_the_host_that_stopped_and_each_call_gets_one_line,
        an_unknown_outcome_is_a_warning_that_says_the_retry_is_safe_and_what_each_attempt_got,
        operator_actions_are_logged_with_who_refused_ones_too,
        metrics_say_which_tool_retries_against_which_provider_a_409_is_a_conflict_and_what_is_stuck,
    );
}
