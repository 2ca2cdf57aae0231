//! Probes (issue 56), row by row as the contract tests are, on every journal: an
//! unkeyed effect whose outcome is unknown is asked about by its provider's probe at
//! the call's retry, and the call goes on from what the probe says, journaled as the
//! effect's resolution by `probe`.

use super::*;
use crate::error::EndsBy;
use crate::keys::InvocationKey;
use crate::provider::Probed;

/// A downstream whose probe tells the truth (performed when the key's effect was
/// applied), after failing its first `fails` asks; it records the key of each ask.
struct WithProbe {
    inner: Arc<Downstream>,
    fails: Mutex<u32>,
    asked: Mutex<Vec<String>>,
}

impl WithProbe {
    fn new(faults: Vec<Fault>, fails: u32) -> Arc<Self> {
        Arc::new(Self {
            inner: Downstream::new(ProviderClass::Unkeyed, faults),
            fails: Mutex::new(fails),
            asked: Mutex::default(),
        })
    }
}

impl Provider for WithProbe {
    fn class(&self) -> ProviderClass {
        self.inner.class()
    }

    fn perform(&self, request: &EffectRequest<'_>) -> Result<Value, ProviderError> {
        self.inner.perform(request)
    }

    fn probe_of(&self, operation: &str, _payload: &Value) -> Option<String> {
        Some(format!("ledger.{operation}"))
    }

    fn probe(&self, request: &EffectRequest<'_>) -> Result<Probed, String> {
        let key = request.key.to_string();
        self.asked.lock().unwrap().push(key.clone());
        let mut fails = self.fails.lock().unwrap();
        if *fails > 0 {
            *fails -= 1;
            return Err("the read timed out".into());
        }
        Ok(if self.inner.applied().contains(&key) {
            Probed::Performed(json!({ "found": key }))
        } else {
            Probed::NotPerformed
        })
    }
}

/// The resolutions journaled on `key`'s call.
fn resolutions(h: &Host, key: &InvocationKey) -> Vec<crate::journal::JournalOperation> {
    let story = h.journal.story(key).unwrap();
    story
        .operations
        .into_iter()
        .filter(|o| o.action == crate::journal::Action::Resolve)
        .collect()
}

#[test]
fn a_probe_that_finds_the_effect_ends_it_performed_and_nothing_is_sent_again() {
    let mut runner = ScriptedRunner::default();
    pay_tool(&mut runner, "ledger");
    let ledger = WithProbe::new(vec![Fault::LoseResponse], 0);
    let h = host(runner, &[("ledger", ledger.clone())]);
    let Err(Error::OutcomeUnknown { key, ends_by, .. }) = h.guard.call(&pay(40)) else {
        panic!("the effect's outcome should be unknown")
    };
    assert_eq!(ends_by, EndsBy::Probe, "a retry can end it");
    assert!(
        ledger.asked.lock().unwrap().is_empty(),
        "not asked before the retry"
    );

    let done = h.guard.call(&pay(40)).unwrap();
    assert!(!done.replayed);
    let Outcome::Success { result, .. } = &done.outcome else {
        panic!("{:?}", done.outcome)
    };
    let attempts = ledger.inner.attempts();
    assert_eq!(attempts.len(), 1, "not sent again");
    assert_eq!(ledger.inner.applied().len(), 1, "the effect happened once");
    assert_eq!(
        *ledger.asked.lock().unwrap(),
        attempts,
        "asked once, under its key"
    );
    assert_eq!(result["performed"], true, "{result}");
    assert_eq!(result["decided_by"], "probe");
    assert_eq!(result["probe_answer"], json!({ "found": attempts[0] }));
    assert!(h.journal.unresolved(h.clock.now_ms()).unwrap().is_empty());
    let resolved = resolutions(&h, &key);
    assert_eq!(resolved.len(), 1, "{resolved:?}");
    assert_eq!(resolved[0].by, "probe ledger.pay");
    assert_eq!(resolved[0].detail["decided_by"], "probe");
    assert_eq!(resolved[0].detail["resolution"], "performed");
    // The same call again replays it, asking nothing.
    assert!(h.guard.call(&pay(40)).unwrap().replayed);
    assert_eq!(ledger.asked.lock().unwrap().len(), 1);
}

#[test]
fn a_probe_that_fails_leaves_it_unknown_and_one_that_finds_nothing_sends_it_once_more() {
    let mut runner = ScriptedRunner::default();
    pay_tool(&mut runner, "ledger");
    let ledger = WithProbe::new(vec![Fault::FailBefore], 1);
    let h = host(runner, &[("ledger", ledger.clone())]);
    let Err(Error::OutcomeUnknown { key, .. }) = h.guard.call(&pay(41)) else {
        panic!("the effect's outcome should be unknown")
    };
    let Err(Error::OutcomeUnknown {
        ends_by, reason, ..
    }) = h.guard.call(&pay(41))
    else {
        panic!("a failed probe decides nothing")
    };
    assert_eq!(ends_by, EndsBy::Probe, "{reason}");
    assert!(reason.contains("the read timed out"), "{reason}");
    assert_eq!(ledger.inner.attempts().len(), 1, "not sent again");
    assert!(resolutions(&h, &key).is_empty(), "nothing journaled");

    let done = h.guard.call(&pay(41)).unwrap();
    assert!(
        matches!(done.outcome, Outcome::Success { .. }),
        "{:?}",
        done.outcome
    );
    let attempts = ledger.inner.attempts();
    assert_eq!(attempts.len(), 2, "sent once more");
    assert_eq!(attempts[0], attempts[1], "under the same key");
    assert_eq!(ledger.inner.applied().len(), 1, "the effect happened once");
    assert!(h.journal.unresolved(h.clock.now_ms()).unwrap().is_empty());
    let resolved = resolutions(&h, &key);
    assert_eq!(resolved.len(), 1, "{resolved:?}");
    assert_eq!(resolved[0].detail["resolution"], "not_performed");

    // The opposite case: another call is another effect, never probed.
    h.guard.call(&pay(42)).unwrap();
    assert_eq!(ledger.inner.applied().len(), 2);
    assert_eq!(ledger.asked.lock().unwrap().len(), 2);
}

/// The sweeper's run of a call shows as what it is: its access log line says the
/// sweeper probed the call and what the probe found (`outcome: swept`, at info),
/// not an `outcome_unknown` call the agent was told to retry; it is not counted
/// as a call that ended; and the resolution its probe journaled, which the call's
/// story shows (the console's `/console/api/call` serves the journal's story),
/// names the sweep.
#[test]
fn a_sweeps_run_is_shown_as_the_sweepers_probe_with_its_verdict() {
    let mut runner = ScriptedRunner::default();
    pay_tool(&mut runner, "ledger");
    let ledger = WithProbe::new(vec![Fault::LoseResponse], 1);
    let h = host(runner, &[("ledger", ledger.clone())]);
    let Err(Error::OutcomeUnknown { key, .. }) = h.guard.call(&pay(40)) else {
        panic!("the effect's outcome should be unknown")
    };
    let calls_unknown = r#"justonce_calls_total{tool="pay",outcome="outcome_unknown"}"#;
    assert_eq!(counted(&h, calls_unknown), 1.0);
    let line_of = |lines: &[Value]| {
        let calls: Vec<Value> = lines
            .iter()
            .filter(|l| l["target"] == "justonce::call")
            .cloned()
            .collect();
        assert_eq!(calls.len(), 1, "{lines:#?}");
        calls[0].clone()
    };

    // The probe fails: still unknown.
    let (_, lines) = crate::test_log::logged(|| h.guard.probe_call(&pay(40)));
    let line = line_of(&lines);
    assert_eq!(
        (&line["level"], &line["fields"]["outcome"]),
        (&json!("INFO"), &json!("swept")),
        "{line}"
    );
    let message = line["fields"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("the sweeper probed the call at effect #0 (ledger): still unknown")
            && message.contains("the read timed out"),
        "{message}"
    );

    // The probe finds it performed.
    let (_, lines) = crate::test_log::logged(|| h.guard.probe_call(&pay(40)));
    let line = line_of(&lines);
    assert_eq!(line["fields"]["outcome"], "swept", "{line}");
    let message = line["fields"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "the sweeper probed the call at effect #0 (ledger): its probe found it performed"
        ),
        "{message}"
    );
    assert_eq!(counted(&h, calls_unknown), 1.0, "the sweeps are no calls");
    let resolved = resolutions(&h, &key);
    assert_eq!(resolved.len(), 1, "{resolved:?}");
    assert_eq!(resolved[0].by, "sweep: probe ledger.pay");
    assert_eq!(resolved[0].detail["sweep"], true);
    assert_eq!(resolved[0].detail["decided_by"], "probe");

    // The agent's retry goes on from it; its own probe is no sweep's.
    assert!(h.guard.call(&pay(40)).unwrap().outcome.is_success());
    assert_eq!(ledger.inner.attempts().len(), 1, "sent once");
}

on_postgres!(
    a_probe_that_finds_the_effect_ends_it_performed_and_nothing_is_sent_again,
    a_probe_that_fails_leaves_it_unknown_and_one_that_finds_nothing_sends_it_once_more,
    a_sweeps_run_is_shown_as_the_sweepers_probe_with_its_verdict,
);

#[test]
fn every_probe_test_runs_on_postgres_too() {
    let source = include_str!("probe_tests.rs");
    let tests: Vec<&str> = source
        .split("#[test]\nfn ")
        .skip(1)
        .filter_map(|rest| rest.split('(').next())
        .filter(|name| *name != "every_probe_test_runs_on_postgres_too")
        .collect();
    assert_eq!(tests.len(), on_postgres::NAMES.len(), "{tests:?}");
    assert!(
        tests.iter().all(|name| on_postgres::NAMES.contains(name)),
        "{tests:?}"
    );
}
