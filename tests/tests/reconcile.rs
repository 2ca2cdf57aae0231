//! A component tool's own probe (issue 56): the `reconcile_mail` guest exports
//! `reconcile`, which the host asks at the agent's retry whether its unkeyed mail,
//! whose answer was lost, went out. It decides as an upstream's probe does: the
//! resolution is journaled with `decided_by: probe`, and the call goes on from it.

use std::sync::{Arc, Mutex};

use justonce::{
    CallRequest, Clock, EffectRequest, EndsBy, Error, Provider, ProviderClass, ProviderError,
    ReadRequest,
};
use serde_json::{Value, json};

use crate::support::{RUNTIME, success, test_host};

/// What the unkeyed mailer does with a `send`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Mood {
    /// Sends it and answers.
    Fine,
    /// Sends it, then the answer is lost (a timeout after the mail went out).
    LosesTheAnswer,
    /// Times out before the mail goes out: nothing is sent, and the sender cannot tell.
    TimesOutFirst,
}

/// A mail API that cannot deduplicate (no idempotency key), whose log can be searched
/// by the key a message was sent under (`find`, a read).
pub(crate) struct UnkeyedMailer {
    mood: Mutex<Mood>,
    /// The key of every `send` it received.
    requests: Mutex<Vec<String>>,
    /// The mails it sent: key, payload, message id.
    sent: Mutex<Vec<(String, Value, String)>>,
    /// The key of every `find`.
    finds: Mutex<Vec<String>>,
}

impl UnkeyedMailer {
    pub(crate) fn new(mood: Mood) -> Arc<Self> {
        Arc::new(Self {
            mood: Mutex::new(mood),
            requests: Mutex::new(Vec::new()),
            sent: Mutex::new(Vec::new()),
            finds: Mutex::new(Vec::new()),
        })
    }

    pub(crate) fn set_mood(&self, mood: Mood) {
        *self.mood.lock().unwrap() = mood;
    }

    pub(crate) fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }

    pub(crate) fn sent(&self) -> Vec<(String, Value, String)> {
        self.sent.lock().unwrap().clone()
    }

    pub(crate) fn finds(&self) -> Vec<String> {
        self.finds.lock().unwrap().clone()
    }
}

impl Provider for UnkeyedMailer {
    fn class(&self) -> ProviderClass {
        ProviderClass::Unkeyed
    }

    fn perform(&self, request: &EffectRequest<'_>) -> Result<Value, ProviderError> {
        let key = request.key.to_string();
        self.requests.lock().unwrap().push(key.clone());
        let mood = *self.mood.lock().unwrap();
        if mood == Mood::TimesOutFirst {
            return Err(ProviderError::Unknown("the mail API timed out".into()));
        }
        let mut sent = self.sent.lock().unwrap();
        let id = format!("m-{}", sent.len() + 1);
        sent.push((key, request.payload.clone(), id.clone()));
        if mood == Mood::LosesTheAnswer {
            return Err(ProviderError::Unknown(
                "the mail API accepted the mail, then the answer was lost".into(),
            ));
        }
        Ok(json!({ "message_id": id }))
    }

    fn unjournaled_read(&self, operation: &str, _payload: &Value) -> bool {
        operation == "find"
    }

    fn read(&self, request: &ReadRequest<'_>) -> Result<Value, ProviderError> {
        let key = request.payload["key"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        self.finds.lock().unwrap().push(key.clone());
        let sent = self.sent.lock().unwrap();
        Ok(sent
            .iter()
            .find(|(k, _, _)| *k == key)
            .map_or(Value::Null, |(_, _, id)| json!({ "message_id": id })))
    }
}

pub(crate) fn mail(subject: &str) -> CallRequest {
    CallRequest::new(
        "reconcile_mail",
        json!({ "to": "ada@example.com", "subject": subject }).to_string(),
    )
    .conversation("c")
}

/// The first call's answer is lost: the agent is told the outcome is unknown, and
/// that retrying can end it (the tool's probe), and the effect waits for it.
fn lost_first_answer(t: &crate::support::TestHost, request: &CallRequest) -> String {
    let err = t.host.call(request).unwrap_err();
    let Error::OutcomeUnknown { ends_by, .. } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(
        *ends_by,
        EndsBy::Probe,
        "its tool's probe can end it: {err}"
    );
    let unresolved = t.host.unresolved(t.clock.now_ms()).unwrap();
    assert_eq!(unresolved.len(), 1, "{unresolved:?}");
    unresolved[0].key.clone()
}

#[test]
fn the_tools_reconcile_finds_the_mail_sent_and_the_retry_goes_on_from_its_answer() {
    let smtp = UnkeyedMailer::new(Mood::LosesTheAnswer);
    let t = test_host(|b| b.provider("smtp", smtp.clone()));
    assert!(RUNTIME.tool("reconcile_mail").unwrap().reconciles());
    let effect = lost_first_answer(&t, &mail("invoice"));
    smtp.set_mood(Mood::Fine);

    // The retry asks the tool's `reconcile`, which finds the mail under the effect's
    // key: nothing is sent again, and the tool goes on with the message id it found.
    let retried = t.host.call(&mail("invoice")).unwrap();
    assert!(!retried.replayed, "the retry ran");
    let output = success(&retried.outcome);
    assert_eq!(output["message_id"], "m-1");
    assert_eq!(output["then"], "told the caller about m-1");
    assert_eq!(smtp.sent().len(), 1, "one mail");
    assert_eq!(smtp.requests(), [effect.as_str()], "sent once, never again");
    assert_eq!(smtp.finds(), [effect.as_str()], "asked under the same key");
    assert!(t.host.unresolved(t.clock.now_ms()).unwrap().is_empty());

    // Journaled as the effect's resolution, decided by the probe.
    let story = t.host.story(&retried.key).unwrap();
    let resolve = story
        .operations
        .iter()
        .find(|o| o.by == "probe reconcile_mail.reconcile")
        .unwrap_or_else(|| panic!("{:?}", story.operations));
    assert_eq!(resolve.detail["decided_by"], "probe");
    assert_eq!(resolve.detail["resolution"], "performed");
    assert!(
        t.host
            .metrics_text()
            .contains(r#"justonce_resolutions_total{decided_by="probe"} 1"#)
    );

    // The next retry replays the same answer; another mail is another call.
    let again = t.host.call(&mail("invoice")).unwrap();
    assert!(again.replayed);
    assert_eq!(success(&again.outcome)["message_id"], "m-1");
    let other = t.host.call(&mail("receipt")).unwrap();
    assert_eq!(success(&other.outcome)["message_id"], "m-2");
    assert_eq!(smtp.sent().len(), 2, "two different calls both happen");
}

#[test]
fn the_tools_reconcile_finds_no_mail_and_the_retry_sends_it_once_under_the_same_key() {
    let smtp = UnkeyedMailer::new(Mood::TimesOutFirst);
    let t = test_host(|b| b.provider("smtp", smtp.clone()));
    let effect = lost_first_answer(&t, &mail("invoice"));
    assert!(smtp.sent().is_empty(), "the mail never went out");
    smtp.set_mood(Mood::Fine);

    let retried = t.host.call(&mail("invoice")).unwrap();
    assert!(!retried.replayed, "the retry ran");
    assert_eq!(success(&retried.outcome)["message_id"], "m-1");
    assert_eq!(smtp.finds(), [effect.as_str()], "its probe asked once");
    assert_eq!(
        smtp.requests(),
        [effect.clone(), effect.clone()],
        "sent once more, under the same key"
    );
    assert_eq!(smtp.sent().len(), 1, "one mail");
    assert!(t.host.unresolved(t.clock.now_ms()).unwrap().is_empty());
    let story = t.host.story(&retried.key).unwrap();
    assert!(
        story
            .operations
            .iter()
            .any(|o| o.by == "probe reconcile_mail.reconcile"
                && o.detail["resolution"] == "not_performed"),
        "{:?}",
        story.operations
    );
}

/// `reconcile` runs with reads only: one that asks for an effect is stopped with a
/// trap that says so, nothing is sent, and the effect stays unknown.
#[test]
fn a_reconcile_that_asks_for_an_effect_is_stopped_and_the_effect_stays_unknown() {
    let smtp = UnkeyedMailer::new(Mood::LosesTheAnswer);
    let t = test_host(|b| b.provider("smtp", smtp.clone()));
    lost_first_answer(&t, &mail("misbehave"));
    smtp.set_mood(Mood::Fine);

    let err = t.host.call(&mail("misbehave")).unwrap_err();
    let Error::OutcomeUnknown {
        reason, ends_by, ..
    } = &err
    else {
        panic!("{err:?}");
    };
    assert!(
        reason.contains("reconcile_mail.reconcile")
            && reason.contains("read_only_effect")
            && reason.contains("may only read")
            && reason.contains("smtp.send"),
        "{reason}"
    );
    assert_eq!(
        *ends_by,
        EndsBy::Probe,
        "a probe that failed may be asked again"
    );
    assert_eq!(smtp.requests().len(), 1, "nothing sent again");
    assert_eq!(t.host.unresolved(t.clock.now_ms()).unwrap().len(), 1);
}

/// A tool without `reconcile` (every component built before it) loads and fails
/// closed as before: only a person can end its unknown.
#[test]
fn a_tool_without_reconcile_is_unchanged() {
    assert!(!RUNTIME.tool("payments_refund").unwrap().reconciles());
    let payments = Arc::new(crate::support::FakePayments::with_class(
        ProviderClass::Unkeyed,
        crate::support::Fault::LoseFirst(1),
    ));
    let t = test_host(|b| b.provider("payments", payments.clone()));
    let refund = CallRequest::new("payments_refund", r#"{"order_id":5,"amount_cents":500}"#)
        .conversation("c");
    let err = t.host.call(&refund).unwrap_err();
    assert!(
        matches!(
            &err,
            Error::OutcomeUnknown {
                ends_by: EndsBy::Person,
                ..
            }
        ),
        "{err:?}"
    );
}

/// A host named `name` on the journal `url` (a SQLite file or a PostgreSQL URL) with
/// the mailer `smtp`, reading `clock` (on PostgreSQL, the database's clock too).
fn host_on(
    url: &str,
    name: &str,
    clock: &justonce::ManualClock,
    smtp: &Arc<UnkeyedMailer>,
) -> crate::support::TestHost {
    let clock = Arc::new(clock.clone());
    test_host(|b| {
        let b = b
            .database(url)
            .clock(clock)
            .identity(justonce::HostIdentity::named(name).unwrap())
            .provider("smtp", smtp.clone());
        match url.starts_with("postgres") {
            true => b.database_clock_is_host_clock(),
            false => b,
        }
    })
}

const MINUTE: std::time::Duration = std::time::Duration::from_secs(60);

/// `serve`'s sweeper, through the library, on the journal `url`: one host of the
/// journal sweeps per interval (on the journal's clock, the tests' manual one), at
/// most `max` probes a sweep, oldest first; each decision is journaled as the
/// agent's retry would journal it, and that retry goes on from it.
fn the_sweeper_decides_what_a_probe_can(url: &str) {
    let clock = justonce::ManualClock::default();
    let smtp = UnkeyedMailer::new(Mood::LosesTheAnswer);
    let a = host_on(url, "web-a", &clock, &smtp);
    let b = host_on(url, "web-b", &clock, &smtp);
    let sent = lost_first_answer(&a, &mail("invoice"));
    clock.advance(std::time::Duration::from_millis(1));
    smtp.set_mood(Mood::TimesOutFirst);
    let err = a.host.call(&mail("receipt")).unwrap_err();
    assert!(matches!(err, Error::OutcomeUnknown { .. }), "{err:?}");
    let never_sent = smtp.requests()[1].clone();
    assert_eq!(a.host.unresolved(clock.now_ms()).unwrap().len(), 2);
    smtp.set_mood(Mood::Fine);

    // web-a takes the turn and asks one probe, the oldest: the mail went out.
    let swept = a.host.sweep_if_due(MINUTE, 1).unwrap();
    let justonce::ScheduledSweep::Ran(report) = swept else {
        panic!("{swept:?}");
    };
    assert_eq!((report.performed, report.probed()), (1, 1), "{report:?}");
    assert_eq!(smtp.finds(), [sent.as_str()], "asked under its key");
    let left = a.host.unresolved(clock.now_ms()).unwrap();
    assert_eq!(left.len(), 1, "at most one probe a sweep: {left:?}");
    assert_eq!(left[0].key, never_sent);
    assert!(
        a.host
            .metrics_text()
            .contains(r#"justonce_sweep_probes_total{result="performed"} 1"#)
    );

    // Not web-b's turn within the interval; once it has passed, web-b sweeps the
    // other: never sent, so not performed.
    let now = clock.now_ms();
    assert_eq!(
        b.host.sweep_if_due(MINUTE, 1).unwrap(),
        justonce::ScheduledSweep::NotDue {
            last: now,
            by: "web-a".into()
        }
    );
    clock.advance(MINUTE);
    let justonce::ScheduledSweep::Ran(report) = b.host.sweep_if_due(MINUTE, 1).unwrap() else {
        panic!("web-b's turn");
    };
    assert_eq!(
        (report.not_performed, report.probed()),
        (1, 1),
        "{report:?}"
    );
    assert!(a.host.unresolved(clock.now_ms()).unwrap().is_empty());
    assert_eq!(smtp.requests().len(), 2, "the sweeps sent nothing");

    // The agent's retries go on from the decisions: the first gets the mail the
    // probe found, nothing sent; the second is sent once more under its key.
    let first = a.host.call(&mail("invoice")).unwrap();
    assert_eq!(success(&first.outcome)["message_id"], "m-1");
    let second = b.host.call(&mail("receipt")).unwrap();
    assert_eq!(success(&second.outcome)["message_id"], "m-2");
    assert_eq!(smtp.requests(), [sent, never_sent.clone(), never_sent]);
    assert_eq!(smtp.sent().len(), 2, "one mail each");
}

#[test]
fn the_sweeper_decides_what_a_probe_can_on_a_sqlite_journal() {
    let dir = tempfile::tempdir().unwrap();
    the_sweeper_decides_what_a_probe_can(dir.path().join("journal.db").to_str().unwrap());
}

#[test]
fn the_sweeper_decides_what_a_probe_can_on_a_postgres_journal() {
    let test = "the_sweeper_decides_what_a_probe_can_on_a_postgres_journal";
    let Some(cluster) = justonce::__private::postgres_testing::cluster(test) else {
        return;
    };
    the_sweeper_decides_what_a_probe_can(&cluster.database());
}

/// `journal --unresolved` says what can end each unknown as the guard decided it at
/// the claim, without loading the tool: the tool's own `reconcile` for the mail, a
/// person for the refund of a tool without one (the CLI said `person` for both).
#[test]
fn journal_unresolved_names_the_tools_reconcile_as_what_the_mail_waits_for() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let smtp = UnkeyedMailer::new(Mood::LosesTheAnswer);
    let payments = Arc::new(crate::support::FakePayments::with_class(
        ProviderClass::Unkeyed,
        crate::support::Fault::AlwaysTimeout,
    ));
    let host = justonce::Host::builder()
        .database(&db)
        .runtime(RUNTIME.clone())
        .retry_policy(justonce::RetryPolicy::immediate(1))
        .provider("smtp", smtp.clone())
        .provider("payments", payments.clone())
        .build()
        .unwrap();
    assert!(host.call(&mail("invoice")).is_err());
    let refund = CallRequest::new("payments_refund", r#"{"order_id":5,"amount_cents":500}"#)
        .conversation("c");
    assert!(host.call(&refund).is_err());

    let listed =
        crate::support::process::justonce(&db, &["journal", "--unresolved", "--json"], None);
    assert_eq!(listed.status.code(), Some(0), "{listed:?}");
    let listed = crate::support::process::json_of(&listed);
    let pending = |tool: &str| {
        listed
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["tool"] == tool)
            .unwrap_or_else(|| panic!("{tool} in {listed}"))["pending"]
            .clone()
    };
    assert_eq!(
        pending("reconcile_mail"),
        "probe reconcile_mail.reconcile",
        "{listed}"
    );
    assert_eq!(pending("payments_refund"), "person", "{listed}");
}
