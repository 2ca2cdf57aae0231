//! Tools that ask (issue 43), row by row as the contract tests are: a scripted
//! guest that asks the user before it refunds, a scripted asker that answers now,
//! later or never, on every journal.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use super::*;
use crate::ask::{AskContext, Asked, Asker, Question, StateCheck, check_request_state, with_asker};
use crate::keys::{EffectKey, InvocationKey};

/// What the scripted asker does at its next ask.
#[derive(Clone)]
enum Reply {
    /// The answers come with a later request.
    Later,
    /// Answers these at once.
    Now(Vec<Value>),
    /// The request brings `state` and these answers: answered if the state is this
    /// question's, asked again if it is another's, refused if forged (as the
    /// stateless MCP asker does).
    WithState(String, Vec<Value>),
}

/// An asker with a script of replies, which records every question asked.
struct ScriptedAsker {
    can_ask: Result<(), String>,
    replies: RefCell<Vec<Reply>>,
    /// `(seq, effect key, state)` of each ask.
    asked: RefCell<Vec<(u32, EffectKey, String)>>,
    can_ask_calls: Cell<u32>,
}

impl ScriptedAsker {
    fn new(replies: Vec<Reply>) -> Rc<Self> {
        Rc::new(Self {
            can_ask: Ok(()),
            replies: RefCell::new(replies),
            asked: RefCell::default(),
            can_ask_calls: Cell::new(0),
        })
    }
    fn unable(why: &str) -> Rc<Self> {
        Rc::new(Self {
            can_ask: Err(why.into()),
            replies: RefCell::default(),
            asked: RefCell::default(),
            can_ask_calls: Cell::new(0),
        })
    }
    fn times_asked(&self) -> usize {
        self.asked.borrow().len()
    }
}

impl Asker for ScriptedAsker {
    fn can_ask(&self) -> Result<(), String> {
        self.can_ask_calls.set(self.can_ask_calls.get() + 1);
        self.can_ask.clone()
    }

    fn ask(&self, at: &AskContext<'_>, questions: &[Question]) -> Asked {
        assert_eq!(questions.len(), 1, "the refund tool asks one question");
        self.asked
            .borrow_mut()
            .push((at.seq, at.effect_key.clone(), at.state()));
        let reply = {
            let mut replies = self.replies.borrow_mut();
            assert!(!replies.is_empty(), "asked more often than scripted");
            replies.remove(0)
        };
        match reply {
            Reply::Later => Asked::Later,
            Reply::Now(answers) => Asked::Answered(answers),
            Reply::WithState(state, answers) => match check_request_state(&state, at) {
                StateCheck::ForThisQuestion => Asked::Answered(answers),
                StateCheck::ForAnotherQuestion => Asked::Later,
                StateCheck::Forged => Asked::Invalid("the request state was not made here".into()),
            },
        }
    }
}

fn confirm_question(amount: u64) -> Question {
    Question {
        name: "confirm".into(),
        message: format!("Refund {amount} EUR to card …4242?"),
        schema: json!({
            "type": "object",
            "properties": {"confirm": {"type": "boolean"}},
            "required": ["confirm"],
        }),
    }
}

fn accepted() -> Vec<Value> {
    vec![json!({"action": "accept", "content": {"confirm": true}})]
}

/// The refund tool: holds the amount on `holds` (before it asks, when given), asks
/// the user to confirm, then refunds on `payments` and sends a receipt on `sms`
/// (when given). Returns what it did.
fn refund_tool(
    runner: &mut ScriptedRunner,
    holds: Option<&'static str>,
    sms: Option<&'static str>,
) {
    runner.tool(
        "refund",
        ScriptedRunner::open_schema(),
        move |args, fx: &mut Effects<'_>| {
            let amount = args["amount"].as_u64().unwrap_or(0);
            if let Some(holds) = holds
                && let Err(e) = fx.perform(holds, "hold", args.clone())
            {
                return tool_error("hold_failed", &format!("{e:?}"));
            }
            let answers = match fx.ask(&[confirm_question(amount)]) {
                Ok(answers) => answers,
                Err(e) => return tool_error("not_asked", &format!("{e:?}")),
            };
            let answer = &answers[0];
            if answer["action"] != "accept" || answer["content"]["confirm"] != true {
                return returned(json!({"refunded": false, "user": answer}));
            }
            let refund = match fx.perform("payments", "refund", args.clone()) {
                Ok(refund) => refund,
                Err(e) => return tool_error("refund_failed", &format!("{e:?}")),
            };
            if let Some(sms) = sms
                && let Err(e) = fx.perform(sms, "send", json!({"text": "refunded"}))
            {
                return tool_error("receipt_failed", &format!("{e:?}"));
            }
            returned(json!({"refunded": true, "refund": refund}))
        },
    );
}

fn refund(amount: u64) -> CallRequest {
    CallRequest::new("refund", json!({ "amount": amount }).to_string()).conversation("c1")
}

/// The call of `request` with `asker` answering its questions.
fn call_asked(
    h: &Host,
    asker: &Rc<ScriptedAsker>,
    request: &CallRequest,
) -> crate::error::Result<crate::call::CallResponse> {
    let asker: Rc<dyn Asker> = asker.clone();
    with_asker(asker, || h.guard.call(request))
}

/// A host with the refund tool alone (no hold, no receipt), and its payments.
fn refund_host() -> (Host, Arc<Downstream>) {
    let mut runner = ScriptedRunner::default();
    refund_tool(&mut runner, None, None);
    let payments = Downstream::new(ProviderClass::Keyed, vec![]);
    let h = host(runner, &[("payments", payments.clone())]);
    (h, payments)
}

/// The journaled effects of the one call `key`, as `(provider, state)`.
fn journaled(h: &Host, key: &InvocationKey) -> Vec<(String, String)> {
    h.journal
        .story(key)
        .unwrap()
        .entry
        .map(|entry| {
            entry
                .effects
                .iter()
                .map(|e| (e.provider.clone(), e.state.clone()))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_question_answered_later_suspends_the_call_and_the_retry_with_the_answer_completes_it() {
    let (h, payments) = refund_host();

    // (1) The first call: asked, answers later. The run stops, nothing is saved as
    // the outcome, and the agent is told what to ask and the state to come back with.
    let later = ScriptedAsker::new(vec![Reply::Later]);
    let first = call_asked(&h, &later, &refund(25)).unwrap_err();
    let Error::InputRequired {
        key,
        seq,
        questions,
        state,
        ..
    } = &first
    else {
        panic!("expected input_required, got {first:?}")
    };
    assert_eq!(
        (*seq, questions.as_slice()),
        (0, &[confirm_question(25)][..])
    );
    assert_eq!(first.kind(), "input_required");
    assert!(
        payments.attempts().is_empty(),
        "nothing refunded before the answer"
    );
    let (asked_seq, effect_key, asked_state) = later.asked.borrow()[0].clone();
    assert_eq!((asked_seq, asked_state.as_str()), (0, state.as_str()));
    let keys = h.guard.shared.state_keys().unwrap();
    let this_question = AskContext {
        tool: "refund",
        key,
        seq: 0,
        effect_key: &effect_key,
        principal: None,
        keys: &keys,
    };
    assert_eq!(
        check_request_state(state, &this_question),
        StateCheck::ForThisQuestion
    );
    let entry = h.journal.story(key).unwrap().entry.unwrap();
    assert_eq!(entry.state, "incomplete", "suspended, not completed");
    assert!(entry.outcome.is_none(), "no outcome saved");
    assert_eq!(entry.effects.len(), 1);
    assert_eq!(
        entry.effects[0].key,
        effect_key.as_str(),
        "claimed under its key"
    );
    assert_eq!(entry.effects[0].state, "pending");
    assert!(
        entry.effects[0]
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("awaiting the user's answer")),
        "operators read why it waits: {:?}",
        entry.effects[0].last_error
    );
    let states = entry.states(h.clock.now_ms());
    assert!(states.contains(&"awaiting"), "{states:?}");
    assert!(
        !states.contains(&"unknown"),
        "not an unknown outcome: {states:?}"
    );

    // (2) The retry brings the answer: the tool gets it, refunds once, and the
    // outcome is saved.
    let answering = ScriptedAsker::new(vec![Reply::WithState(state.clone(), accepted())]);
    let done = call_asked(&h, &answering, &refund(25)).unwrap();
    assert!(!done.replayed);
    assert_eq!(&done.key, key);
    let Outcome::Success { result, .. } = &done.outcome else {
        panic!("{:?}", done.outcome)
    };
    assert_eq!(result["refunded"], true, "the agent was told: {result}");
    assert_eq!(answering.times_asked(), 1, "the retry asked once");
    assert_eq!(
        answering.asked.borrow()[0].1,
        effect_key,
        "the retry asked under the same key"
    );
    assert_eq!(payments.applied().len(), 1, "refunded once");
    let story = h.journal.story(key).unwrap().entry.unwrap();
    assert_eq!(story.state, "completed");
    assert_eq!(story.effects[0].state, "done", "the answer is journaled");
    assert_eq!(story.effects[0].response, Some(json!({"ok": accepted()})));

    // A third call replays the outcome: the asker is not consulted, nothing runs.
    let never = ScriptedAsker::new(vec![]);
    let third = call_asked(&h, &never, &refund(25)).unwrap();
    assert!(third.replayed);
    assert_eq!(third.outcome, done.outcome);
    assert_eq!(never.times_asked(), 0);
    assert_eq!(
        never.can_ask_calls.get(),
        0,
        "not even asked whether it can ask"
    );
    assert_eq!(payments.attempts().len(), 1, "refunded once");
}

#[test]
fn a_resumed_run_finds_the_answer_journaled_and_asks_nothing_again() {
    // hold → ask → refund → sms. The first run holds and asks (later); the retry
    // replays the hold, is answered, refunds, and its receipt's outcome stays
    // unknown; the next retry replays hold, answer and refund, and sends the receipt
    // under the same key.
    let mut runner = ScriptedRunner::default();
    refund_tool(&mut runner, Some("holds"), Some("sms"));
    let holds = Downstream::new(ProviderClass::Keyed, vec![]);
    let payments = Downstream::new(ProviderClass::Keyed, vec![]);
    let sms = Downstream::new(ProviderClass::Keyed, vec![Fault::LoseResponse; 3]);
    let h = host(
        runner,
        &[
            ("holds", holds.clone()),
            ("payments", payments.clone()),
            ("sms", sms.clone()),
        ],
    );

    let later = ScriptedAsker::new(vec![Reply::Later]);
    let Err(Error::InputRequired { seq, state, .. }) = call_asked(&h, &later, &refund(40)) else {
        panic!("expected input_required")
    };
    assert_eq!(seq, 1, "the question comes after the hold");
    assert_eq!(holds.applied().len(), 1);

    let answering = ScriptedAsker::new(vec![Reply::WithState(state, accepted())]);
    let unknown = call_asked(&h, &answering, &refund(40)).unwrap_err();
    assert!(
        matches!(unknown, Error::OutcomeUnknown { seq: 3, .. }),
        "{unknown:?}"
    );
    assert_eq!(answering.times_asked(), 1);

    let resumed = ScriptedAsker::new(vec![]);
    let done = call_asked(&h, &resumed, &refund(40)).unwrap();
    let Outcome::Success { result, .. } = &done.outcome else {
        panic!("{:?}", done.outcome)
    };
    assert_eq!(result["refunded"], true, "the agent was told: {result}");
    assert_eq!(
        resumed.times_asked(),
        0,
        "the journaled answer was replayed"
    );
    assert_eq!(resumed.can_ask_calls.get(), 0);
    assert_eq!(
        holds.attempts().len(),
        1,
        "the hold before the ask happened once"
    );
    assert_eq!(payments.attempts().len(), 1, "refunded once");
    let sends = sms.attempts();
    assert_eq!(sends.len(), 4, "the receipt was retried");
    assert!(
        sends.iter().all(|k| *k == sends[0]),
        "under one key: {sends:?}"
    );
    assert_eq!(sms.applied().len(), 1, "the receipt was sent once");
}

#[test]
fn another_question_at_the_same_position_is_a_divergence() {
    let mut runner = ScriptedRunner::default();
    let turn = Arc::new(std::sync::atomic::AtomicU64::new(25));
    let asks = Arc::clone(&turn);
    runner.tool(
        "refund",
        ScriptedRunner::open_schema(),
        move |_args, fx: &mut Effects<'_>| {
            // The question's text changed between runs (a new build, a clock).
            let amount = asks.fetch_add(1, Ordering::SeqCst);
            match fx.ask(&[confirm_question(amount)]) {
                Ok(answers) => returned(json!(answers)),
                Err(e) => tool_error("not_asked", &format!("{e:?}")),
            }
        },
    );
    let h = host(runner, &[]);

    let later = ScriptedAsker::new(vec![Reply::Later]);
    let Err(Error::InputRequired { state, .. }) = call_asked(&h, &later, &refund(25)) else {
        panic!("expected input_required")
    };
    let answering = ScriptedAsker::new(vec![Reply::WithState(state, accepted())]);
    let diverged = call_asked(&h, &answering, &refund(25)).unwrap_err();
    assert!(
        matches!(&diverged, Error::Divergence { seq: 0, detail, .. } if detail.contains("user.elicit")),
        "{diverged:?}"
    );
    assert_eq!(
        answering.times_asked(),
        0,
        "the other question was not asked"
    );
    assert_eq!(turn.load(Ordering::SeqCst), 27);
}

#[test]
fn a_caller_that_cannot_be_asked_is_told_so_and_nothing_is_journaled_for_the_question() {
    let mut runner = ScriptedRunner::default();
    refund_tool(&mut runner, Some("holds"), None);
    let holds = Downstream::new(ProviderClass::Keyed, vec![]);
    let payments = Downstream::new(ProviderClass::Keyed, vec![]);
    let h = host(
        runner,
        &[("holds", holds.clone()), ("payments", payments.clone())],
    );

    // No asker on the thread (the CLI's `run`, a library caller).
    let nobody = h.guard.call(&refund(25)).unwrap_err();
    let Error::InputUnavailable { tool, reason } = &nobody else {
        panic!("expected input_unavailable, got {nobody:?}")
    };
    assert_eq!(tool, "refund");
    assert!(reason.contains("cannot answer questions"), "{reason}");
    assert_eq!(nobody.kind(), "input_unavailable");
    let key = h.guard.key_for(&refund(25)).unwrap();
    assert_eq!(
        journaled(&h, &key),
        [("holds".to_string(), "done".to_string())],
        "the hold is journaled, the question is not"
    );

    // A client that says it cannot answer.
    let unable = ScriptedAsker::unable("the client did not declare elicitation");
    let refused = call_asked(&h, &unable, &refund(25)).unwrap_err();
    assert!(
        matches!(&refused, Error::InputUnavailable { reason, .. } if reason.contains("did not declare")),
        "{refused:?}"
    );
    assert_eq!(unable.times_asked(), 0);
    assert_eq!(
        journaled(&h, &key).len(),
        1,
        "still no record for the question"
    );
    assert!(payments.attempts().is_empty());

    // The opposite case: a client that can answer resumes the call; the hold is
    // not repeated.
    let answering = ScriptedAsker::new(vec![Reply::Now(accepted())]);
    let done = call_asked(&h, &answering, &refund(25)).unwrap();
    assert!(done.outcome.is_success(), "{:?}", done.outcome);
    assert_eq!(holds.attempts().len(), 1, "held once");
    assert_eq!(payments.applied().len(), 1, "refunded once");
}

#[test]
fn a_forged_request_state_is_refused_and_nothing_is_saved() {
    let (h, payments) = refund_host();

    let later = ScriptedAsker::new(vec![Reply::Later]);
    let Err(Error::InputRequired { key, state, .. }) = call_asked(&h, &later, &refund(25)) else {
        panic!("expected input_required")
    };
    let (head, _mac) = state.rsplit_once('.').unwrap();
    let forged = format!("{head}.{}", "0".repeat(32));
    let tampering = ScriptedAsker::new(vec![Reply::WithState(forged, accepted())]);
    let refused = call_asked(&h, &tampering, &refund(25)).unwrap_err();
    assert!(
        matches!(&refused, Error::InputStateInvalid(why) if why.contains("not made here")),
        "{refused:?}"
    );
    assert!(payments.attempts().is_empty(), "nothing refunded");
    let entry = h.journal.story(&key).unwrap().entry.unwrap();
    assert!(entry.outcome.is_none(), "no outcome saved");
    assert_eq!(
        journaled(&h, &key),
        [("user".to_string(), "pending".to_string())],
        "no answer saved"
    );

    // The opposite case: the state this host made is accepted.
    let answering = ScriptedAsker::new(vec![Reply::WithState(state, accepted())]);
    let done = call_asked(&h, &answering, &refund(25)).unwrap();
    assert!(done.outcome.is_success(), "{:?}", done.outcome);
    assert_eq!(payments.applied().len(), 1);
}

/// A request state kept past the call's retention names a question the call no
/// longer asks: once its record expired, the same call is a new one (by design,
/// as for any call), whose question has a new effect key. The old state is refused
/// and nothing is refunded again; the call made again without it is asked anew,
/// and that state's answers complete it.
#[test]
fn a_state_kept_past_the_calls_retention_is_refused_and_the_new_call_asks_anew() {
    let (h, payments) = refund_host();

    let later = ScriptedAsker::new(vec![Reply::Later]);
    let Err(Error::InputRequired { state: old, .. }) = call_asked(&h, &later, &refund(25)) else {
        panic!("expected input_required")
    };
    let answering = ScriptedAsker::new(vec![Reply::WithState(old.clone(), accepted())]);
    assert!(
        call_asked(&h, &answering, &refund(25))
            .unwrap()
            .outcome
            .is_success()
    );
    assert_eq!(payments.applied().len(), 1);
    h.clock.advance(RETENTION + Duration::from_secs(1));

    let late = ScriptedAsker::new(vec![Reply::WithState(old.clone(), accepted())]);
    let refused = call_asked(&h, &late, &refund(25)).unwrap_err();
    assert!(
        matches!(&refused, Error::InputStateInvalid(_)),
        "{refused:?}"
    );
    assert_eq!(
        late.times_asked(),
        1,
        "the new call's question met the old state"
    );
    assert_eq!(payments.applied().len(), 1, "nothing refunded again");

    let again = ScriptedAsker::new(vec![Reply::Later]);
    let Err(Error::InputRequired { state: new, .. }) = call_asked(&h, &again, &refund(25)) else {
        panic!("expected input_required")
    };
    assert_ne!(new, old, "a question of the new call");
    let answering = ScriptedAsker::new(vec![Reply::WithState(new, accepted())]);
    let done = call_asked(&h, &answering, &refund(25)).unwrap();
    assert!(done.outcome.is_success(), "{:?}", done.outcome);
    assert!(!done.replayed);
    assert_eq!(payments.applied().len(), 2, "the new call refunds once");
}

#[test]
fn two_different_calls_each_ask() {
    let (h, payments) = refund_host();
    let asker = ScriptedAsker::new(vec![Reply::Now(accepted()), Reply::Now(accepted())]);

    let a = call_asked(&h, &asker, &refund(25)).unwrap();
    let b = call_asked(&h, &asker, &refund(26)).unwrap();

    assert!(!a.replayed && !b.replayed);
    assert_ne!(a.key, b.key);
    assert_eq!(asker.times_asked(), 2, "each call asked");
    let asked = asker.asked.borrow();
    assert_ne!(asked[0].1, asked[1].1, "under keys of their own");
    assert_eq!(payments.applied().len(), 2, "both refunds happened");
}

#[test]
fn a_declined_question_is_the_tools_to_handle_and_its_outcome_is_saved() {
    let (h, payments) = refund_host();
    let declining = ScriptedAsker::new(vec![Reply::Now(vec![json!({"action": "decline"})])]);

    let told = call_asked(&h, &declining, &refund(25)).unwrap();

    let Outcome::Success { result, .. } = &told.outcome else {
        panic!("{:?}", told.outcome)
    };
    assert_eq!(result["refunded"], false);
    assert_eq!(result["user"]["action"], "decline");
    assert!(payments.attempts().is_empty());
    assert!(call_asked(&h, &declining, &refund(25)).unwrap().replayed);
}

#[test]
fn a_tool_cannot_ask_through_perform_nor_when_read_only_nor_with_malformed_questions() {
    let mut runner = ScriptedRunner::default();
    runner.tool(
        "sneaky",
        ScriptedRunner::open_schema(),
        |_args, fx: &mut Effects<'_>| {
            let perform = fx.perform("user", "elicit", json!([confirm_question(1)]));
            let malformed = fx.ask(&[Question {
                name: "Not A Name".into(),
                ..confirm_question(1)
            }]);
            returned(json!({
                "perform": format!("{perform:?}"),
                "malformed": format!("{malformed:?}"),
            }))
        },
    );
    refund_tool(&mut runner, None, None);
    runner.read_only("refund");
    let h = host(runner, &[]);
    let asker = ScriptedAsker::new(vec![]);

    let sneaky = CallRequest::new("sneaky", "{}").conversation("c1");
    let told = call_asked(&h, &asker, &sneaky).unwrap();
    let Outcome::Success { result, .. } = &told.outcome else {
        panic!("{:?}", told.outcome)
    };
    let perform = result["perform"].as_str().unwrap();
    assert!(
        perform.contains("Denied") && perform.contains("reserved"),
        "{perform}"
    );
    let malformed = result["malformed"].as_str().unwrap();
    assert!(
        malformed.contains("Denied") && malformed.contains("lowercase"),
        "{malformed}"
    );
    assert_eq!(asker.times_asked(), 0);
    assert!(call_asked(&h, &asker, &sneaky).unwrap().replayed, "saved");

    let read_only = call_asked(&h, &asker, &refund(25)).unwrap();
    assert!(
        matches!(&read_only.outcome, Outcome::Trap { reason, .. } if reason == "read_only_effect"),
        "{:?}",
        read_only.outcome
    );
    assert_eq!(asker.times_asked(), 0);
}

/// An asker that advances the manual clock by `by` while the person thinks, then
/// answers.
struct SlowPerson {
    clock: Arc<ManualClock>,
    by: Duration,
}

impl Asker for SlowPerson {
    fn can_ask(&self) -> Result<(), String> {
        Ok(())
    }
    fn ask(&self, _: &AskContext<'_>, _: &[Question]) -> Asked {
        self.clock.advance(self.by);
        Asked::Answered(accepted())
    }
}

#[test]
fn the_users_time_does_not_count_against_the_wall_clock_of_the_effects_after_it() {
    // The refund's first attempt fails before anything happened; its retry comes
    // after the person took longer than the call's wall-clock cap to answer.
    let mut runner = ScriptedRunner::default();
    refund_tool(&mut runner, None, None);
    let payments = Downstream::new(ProviderClass::Keyed, vec![Fault::FailBefore]);
    let h = host(runner, &[("payments", payments.clone())]);
    let slow: Rc<dyn Asker> = Rc::new(SlowPerson {
        clock: h.clock.clone(),
        by: crate::runtime::Limits::default().wall_clock * 2,
    });

    let told = with_asker(slow, || h.guard.call(&refund(25))).unwrap();

    assert_retried_once_under_one_key(&payments, &told);
}

/// An asker whose person answers once the test lets go, after saying the question
/// arrived.
struct HeldPerson {
    reached: mpsc::Sender<()>,
    release: mpsc::Receiver<()>,
}

impl Asker for HeldPerson {
    fn can_ask(&self) -> Result<(), String> {
        Ok(())
    }
    fn ask(&self, _: &AskContext<'_>, _: &[Question]) -> Asked {
        self.reached.send(()).unwrap();
        self.release.recv().unwrap();
        Asked::Answered(accepted())
    }
}

/// `request` made on `host` on a thread of its own, whose person is asked and
/// holds on: once asked, its call, and how to let the person answer.
#[allow(clippy::type_complexity)]
fn call_held(
    host: &Arc<Host>,
    request: CallRequest,
) -> (
    std::thread::JoinHandle<crate::error::Result<crate::call::CallResponse>>,
    mpsc::Sender<()>,
) {
    let (reached_tx, reached_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel();
    let host = Arc::clone(host);
    let call = std::thread::spawn(move || {
        let person: Rc<dyn Asker> = Rc::new(HeldPerson {
            reached: reached_tx,
            release: release_rx,
        });
        with_asker(person, || host.guard.call(&request))
    });
    reached_rx.recv().unwrap();
    (call, release_tx)
}

#[test]
fn a_run_waiting_for_the_user_keeps_its_lease_and_no_other_host_takes_over() {
    let mut runner = ScriptedRunner::default();
    refund_tool(&mut runner, None, None);
    let runner = Arc::new(runner);
    let payments = Downstream::new(ProviderClass::Keyed, vec![]);
    let clock = Arc::new(ManualClock::default());
    let journal = fresh_journal(&clock);
    let providers: [(&str, Arc<dyn Provider>); 1] = [("payments", payments.clone())];
    let a = Arc::new(host_on(
        Arc::clone(&journal),
        clock.clone(),
        Arc::clone(&runner),
        &providers,
    ));
    let b = host_on(Arc::clone(&journal), clock.clone(), runner, &providers);

    let (a_call, release_tx) = call_held(&a, refund(25));
    // The person takes longer than the lease, and A renews it meanwhile (bounded
    // wait for its renewal thread).
    clock.advance(LEASE * 2);
    wait_for_renewal(&journal, &clock);
    let b_err = with_asker(ScriptedAsker::new(vec![]), || b.guard.call(&refund(25))).unwrap_err();
    release_tx.send(()).unwrap();
    let a_answer = a_call.join().unwrap().unwrap();

    assert!(
        matches!(b_err, Error::InProgress { .. }),
        "B waited: {b_err:?}"
    );
    assert!(a_answer.outcome.is_success(), "{:?}", a_answer.outcome);
    assert_eq!(payments.applied().len(), 1, "refunded once");
    assert!(
        b.guard.call(&refund(25)).unwrap().replayed,
        "B's retry gets A's outcome"
    );
}

/// A request state is keyed by a secret of the journal's, not by anything an agent
/// can see: another host of the journal checks it, another journal does not, and a
/// rotation keeps the old secret's states for its window (on the journal's clock).
#[test]
fn request_states_are_keyed_by_the_journals_secret_which_its_hosts_share_and_rotation_keeps_for_a_window()
 {
    use crate::ask::{ROTATED_SECRET_KEPT_MS, StateKeys};
    let (h, _) = refund_host();
    let other = host_on(
        Arc::clone(&h.journal),
        h.clock.clone(),
        Arc::new(ScriptedRunner::default()),
        &[],
    );
    let key = InvocationKey::parse("c1.refund").unwrap();
    let effect = crate::keys::effect_key(&key, 1, 0);
    let at = |keys| AskContext {
        tool: "refund",
        key: &key,
        seq: 0,
        effect_key: &effect,
        principal: Some("alice"),
        keys,
    };
    let ours = h.guard.shared.state_keys().unwrap();
    let state = at(&ours).state();
    assert_eq!(at(&ours).state(), state, "one secret, kept");

    let theirs = other.guard.shared.state_keys().unwrap();
    assert_eq!(
        check_request_state(&state, &at(&theirs)),
        StateCheck::ForThisQuestion
    );
    let (elsewhere, _) = refund_host();
    let foreign = elsewhere.guard.shared.state_keys().unwrap();
    assert_ne!(
        at(&foreign).state(),
        state,
        "another journal, another secret"
    );
    assert_eq!(
        check_request_state(&state, &at(&foreign)),
        StateCheck::Forged
    );

    h.journal
        .rotate_state_secret(h.clock.now_ms(), &StateKeys::new_secret().unwrap())
        .unwrap();
    let rotated = other.guard.shared.state_keys().unwrap();
    let new_state = at(&rotated).state();
    assert_ne!(new_state, state, "new states under the new secret");
    assert_eq!(
        check_request_state(&state, &at(&rotated)),
        StateCheck::ForThisQuestion
    );
    h.clock
        .advance(Duration::from_millis(ROTATED_SECRET_KEPT_MS as u64 - 1));
    let within = h.guard.shared.state_keys().unwrap();
    assert_eq!(
        check_request_state(&state, &at(&within)),
        StateCheck::ForThisQuestion
    );
    h.clock.advance(Duration::from_millis(1));
    let after = h.guard.shared.state_keys().unwrap();
    assert_eq!(check_request_state(&state, &at(&after)), StateCheck::Forged);
    assert_eq!(
        check_request_state(&new_state, &at(&after)),
        StateCheck::ForThisQuestion
    );
}

/// A downstream that cannot be sent again, whose tool opts in to asking the person
/// about an unknown outcome (issue 56): its provider supplies the question.
struct AsksThePerson(Arc<Downstream>);

impl Provider for AsksThePerson {
    fn class(&self) -> ProviderClass {
        self.0.class()
    }

    fn perform(&self, request: &EffectRequest<'_>) -> Result<Value, ProviderError> {
        self.0.perform(request)
    }

    fn person_question_of(&self, _operation: &str, _payload: &Value) -> Option<String> {
        Some("Did the payment of {payload.amount} go through?".into())
    }
}

/// A host whose `pay` tool pays through a ledger that asks the person, and the
/// ledger, which has `faults`.
fn asking_ledger(faults: Vec<Fault>) -> (Host, Arc<Downstream>) {
    let mut runner = ScriptedRunner::default();
    pay_tool(&mut runner, "ledger");
    let ledger = Downstream::new(ProviderClass::Unkeyed, faults);
    let h = host(
        runner,
        &[("ledger", Arc::new(AsksThePerson(ledger.clone())))],
    );
    (h, ledger)
}

fn performed(yes: bool) -> Value {
    json!({ "action": "accept", "content": { "performed": yes } })
}

/// Stateless, as `input_required` asks: the retry asks about the pending effect (at
/// its position, under its key) and suspends; the request that brings the state and
/// the person's yes ends it performed, journaled by the principal's name, and the
/// tool gets what was recorded. Nothing is sent again; a later retry replays.
#[test]
fn a_person_who_says_yes_with_the_state_they_were_given_ends_the_unknown_performed_by_name() {
    let (h, ledger) = asking_ledger(vec![Fault::LoseResponse]);
    let alices = || pay(40).principal("alice");
    let Err(Error::OutcomeUnknown { key, ends_by, .. }) = h.guard.call(&alices()) else {
        panic!("the effect's outcome should be unknown")
    };
    assert_eq!(ends_by, crate::error::EndsBy::AskPerson, "a retry asks");

    let asker = ScriptedAsker::new(vec![Reply::Later]);
    let Err(Error::InputRequired {
        seq,
        questions,
        state,
        ..
    }) = call_asked(&h, &asker, &alices())
    else {
        panic!("the retry should wait for the person's answer")
    };
    assert_eq!(seq, 0);
    assert_eq!(questions[0].message, "Did the payment of 40 go through?");
    assert_eq!(
        asker.asked.borrow()[0].1.as_str(),
        ledger.attempts()[0],
        "asked about the pending effect, under its key"
    );

    let answering = ScriptedAsker::new(vec![Reply::WithState(state, vec![performed(true)])]);
    let done = call_asked(&h, &answering, &alices()).unwrap();
    assert!(!done.replayed);
    let Outcome::Success { result, .. } = &done.outcome else {
        panic!("{:?}", done.outcome)
    };
    assert_eq!(result["performed"], true, "{result}");
    assert_eq!(result["decided_by"], "person");
    assert_eq!(result["by"], "alice");
    assert_eq!(result["question"], "Did the payment of 40 go through?");
    assert_eq!(ledger.attempts().len(), 1, "not sent again");
    assert_eq!(ledger.applied().len(), 1, "the effect happened once");
    assert!(h.journal.unresolved(h.clock.now_ms()).unwrap().is_empty());
    let resolved: Vec<_> = h
        .journal
        .story(&key)
        .unwrap()
        .operations
        .into_iter()
        .filter(|o| o.action == crate::journal::Action::Resolve)
        .collect();
    assert_eq!(resolved.len(), 1, "{resolved:?}");
    assert_eq!(resolved[0].by, "person alice");
    assert_eq!(resolved[0].detail["decided_by"], "person");
    assert_eq!(resolved[0].detail["person"], "alice");
    assert_eq!(
        counted(&h, r#"justonce_resolutions_total{decided_by="person"}"#),
        1.0
    );
    let again = call_asked(&h, &ScriptedAsker::new(vec![]), &alices()).unwrap();
    assert!(again.replayed, "replayed, nobody asked");
}

/// A client that cannot be asked, and a person who declines, leave it unknown (told
/// why, nothing sent, nothing journaled); a no sends it once more under the same key.
/// The opposite case: another call is another effect, and asks no one.
#[test]
fn a_person_who_declines_or_cannot_be_asked_leaves_it_unknown_and_a_no_sends_it_once_more() {
    let (h, ledger) = asking_ledger(vec![Fault::FailBefore]);
    let Err(Error::OutcomeUnknown { .. }) = h.guard.call(&pay(41)) else {
        panic!("the effect's outcome should be unknown")
    };
    let unknown = |asker: &Rc<ScriptedAsker>| match call_asked(&h, asker, &pay(41)) {
        Err(Error::OutcomeUnknown {
            ends_by, reason, ..
        }) => (ends_by, reason),
        other => panic!("still unknown: {other:?}"),
    };
    let (ends_by, reason) = unknown(&ScriptedAsker::unable("no elicitation here"));
    assert_eq!(ends_by, crate::error::EndsBy::Person, "{reason}");
    assert!(
        reason.contains("the user could not be asked: no elicitation here"),
        "{reason}"
    );
    let declining = ScriptedAsker::new(vec![Reply::Now(vec![json!({ "action": "decline" })])]);
    let (ends_by, reason) = unknown(&declining);
    assert_eq!(ends_by, crate::error::EndsBy::Person, "{reason}");
    assert!(reason.contains("declined to answer"), "{reason}");
    assert_eq!(ledger.attempts().len(), 1, "not sent again");
    assert_eq!(h.journal.unresolved(h.clock.now_ms()).unwrap().len(), 1);

    let no = ScriptedAsker::new(vec![Reply::Now(vec![performed(false)])]);
    let done = call_asked(&h, &no, &pay(41)).unwrap();
    assert!(done.outcome.is_success(), "{:?}", done.outcome);
    let attempts = ledger.attempts();
    assert_eq!(attempts.len(), 2, "sent once more");
    assert_eq!(attempts[0], attempts[1], "under the same key");
    assert_eq!(ledger.applied().len(), 1, "the effect happened once");
    assert!(h.journal.unresolved(h.clock.now_ms()).unwrap().is_empty());

    let other = ScriptedAsker::new(vec![]);
    assert!(
        call_asked(&h, &other, &pay(42))
            .unwrap()
            .outcome
            .is_success()
    );
    assert_eq!(ledger.applied().len(), 2);
    assert_eq!(other.times_asked(), 0);
}

/// An upstream that asks the call's client a question (`elicitation/create`) while
/// it performs, and records the reply it got.
struct AskingUpstream {
    replies: Mutex<Vec<crate::provider::ClientReply>>,
}

impl Provider for AskingUpstream {
    fn class(&self) -> ProviderClass {
        ProviderClass::Keyed
    }

    fn perform(&self, request: &EffectRequest<'_>) -> Result<Value, ProviderError> {
        let question = json!({
            "message": "Refund 25 EUR?",
            "requestedSchema": { "type": "object", "properties": { "confirm": { "type": "boolean" } } },
        });
        let client = request
            .client
            .expect("the guard answers the upstream's requests");
        let reply = client.request("elicitation/create", &question, false);
        self.replies.lock().unwrap().push(reply.clone());
        match reply {
            crate::provider::ClientReply::Result(answer) => Ok(answer),
            _ => Err(ProviderError::Rejected(json!("not answered"))),
        }
    }
}

/// An upstream whose request runs on past its first attempt (a transport that
/// follows it), asking the call's client one question in each attempt: the
/// second attempt either takes the request up, told of the question asked on it
/// (`takes_up`), or sends it anew, and the upstream asks from its first question
/// again.
struct AsksAcrossAttempts {
    takes_up: bool,
    /// The questions the first attempt's client answered.
    asked: Mutex<u32>,
    replies: Mutex<Vec<crate::provider::ClientReply>>,
}

impl AsksAcrossAttempts {
    fn ask(&self, client: &dyn crate::provider::ClientRequests, message: &str) {
        let question = json!({
            "message": message,
            "requestedSchema": { "type": "object", "properties": { "confirm": { "type": "boolean" } } },
        });
        let reply = client.request("elicitation/create", &question, false);
        self.replies.lock().unwrap().push(reply);
    }
}

impl Provider for AsksAcrossAttempts {
    fn class(&self) -> ProviderClass {
        ProviderClass::Keyed
    }

    fn perform(&self, request: &EffectRequest<'_>) -> Result<Value, ProviderError> {
        let client = request
            .client
            .expect("the guard answers the upstream's requests");
        if request.attempt == 1 {
            self.ask(client, "First?");
            *self.asked.lock().unwrap() = client.questions();
            return Err(ProviderError::Unknown("no answer within 1 s".into()));
        }
        if self.takes_up {
            client.taking_up(*self.asked.lock().unwrap());
        } else {
            self.ask(client, "First?");
        }
        self.ask(client, "Second?");
        Ok(json!({ "paid": true }))
    }
}

/// An upstream's second question on a request an attempt took up is the call's
/// second question, asked once; the first is never asked again (before, the count
/// started from zero on the taken-up request: the second question was read as a
/// divergence from the first's record, and the call stopped). The opposite: a
/// request sent anew asks its first question again, answered from the journal.
#[test]
fn an_upstreams_next_question_on_a_request_taken_up_follows_those_asked_on_it() {
    for takes_up in [true, false] {
        let mut runner = ScriptedRunner::default();
        pay_tool(&mut runner, "upstream");
        let upstream = Arc::new(AsksAcrossAttempts {
            takes_up,
            asked: Mutex::default(),
            replies: Mutex::default(),
        });
        let h = host(runner, &[("upstream", upstream.clone())]);
        let person = ScriptedAsker::new(vec![Reply::Now(accepted()), Reply::Now(accepted())]);

        let told = call_asked(&h, &person, &pay(10)).unwrap();

        assert!(
            told.outcome.is_success(),
            "takes up {takes_up}: {:?}",
            told.outcome
        );
        let seqs: Vec<u32> = person
            .asked
            .borrow()
            .iter()
            .map(|(seq, _, _)| *seq)
            .collect();
        assert_eq!(
            seqs,
            [1, 2],
            "takes up {takes_up}: each question asked once"
        );
        let replies = upstream.replies.lock().unwrap().clone();
        assert!(
            replies
                .iter()
                .all(|r| matches!(r, crate::provider::ClientReply::Result(_))),
            "takes up {takes_up}: every question answered: {replies:?}"
        );
        assert_eq!(replies.len(), if takes_up { 2 } else { 3 });
    }
}

/// An upstream's question answered by the person reaches the upstream only while
/// the run holds its lease, once the answer is on record: here the person takes
/// longer than the lease (the journal's clock), another host takes the call over,
/// and the answer is refused to the upstream, nothing of it saved, and the run
/// ends lease-lost (before, the upstream acted on an answer the journal did not
/// hold, beside the run that took over).
#[test]
fn an_upstreams_question_answered_after_the_run_lost_its_lease_is_not_passed_on() {
    let mut runner = ScriptedRunner::default();
    pay_tool(&mut runner, "upstream");
    let runner = Arc::new(runner);
    let upstream = Arc::new(AskingUpstream {
        replies: Mutex::default(),
    });
    let taker = Downstream::new(ProviderClass::Keyed, vec![]);
    let clock = Arc::new(ManualClock::default());
    let journal = fresh_journal(&clock);
    let asking: [(&str, Arc<dyn Provider>); 1] = [("upstream", upstream.clone())];
    let taking: [(&str, Arc<dyn Provider>); 1] = [("upstream", taker.clone())];
    // A renews nothing (a paused host): its lease runs out on the journal's clock.
    let a = Arc::new(host_renewing(
        Arc::clone(&journal),
        clock.clone(),
        Arc::clone(&runner),
        &asking,
        None,
    ));
    let b = host_on(Arc::clone(&journal), clock.clone(), runner, &taking);
    let (a_call, release_tx) = call_held(&a, pay(10));
    clock.advance(LEASE + Duration::from_secs(1));
    let b_answer = b.guard.call(&pay(10)).unwrap();
    release_tx.send(()).unwrap();
    let a_answer = a_call.join().unwrap();

    let replies = upstream.replies.lock().unwrap().clone();
    assert!(
        matches!(&replies[..], [crate::provider::ClientReply::Error { message, .. }] if message.contains("lost its lease")),
        "the upstream was refused the answer: {replies:?}"
    );
    assert!(
        matches!(a_answer, Err(Error::LeaseLost { .. })),
        "{a_answer:?}"
    );
    assert!(b_answer.outcome.is_success(), "{:?}", b_answer.outcome);
    let key = b.guard.key_for(&pay(10)).unwrap();
    let answered: Vec<_> = journaled(&b, &key)
        .into_iter()
        .filter(|(provider, state)| provider == crate::ask::PROVIDER && state == "done")
        .collect();
    assert!(
        answered.is_empty(),
        "nothing of A's answer saved: {answered:?}"
    );
    assert_eq!(taker.applied().len(), 1, "B's run performed it, once");
}

on_postgres!(
    a_question_answered_later_suspends_the_call_and_the_retry_with_the_answer_completes_it,
    a_resumed_run_finds_the_answer_journaled_and_asks_nothing_again,
    another_question_at_the_same_position_is_a_divergence,
    a_caller_that_cannot_be_asked_is_told_so_and_nothing_is_journaled_for_the_question,
    a_forged_request_state_is_refused_and_nothing_is_saved,
    a_state_kept_past_the_calls_retention_is_refused_and_the_new_call_asks_anew,
    two_different_calls_each_ask,
    a_declined_question_is_the_tools_to_handle_and_its_outcome_is_saved,
    a_tool_cannot_ask_through_perform_nor_when_read_only_nor_with_malformed_questions,
    the_users_time_does_not_count_against_the_wall_clock_of_the_effects_after_it,
    a_run_waiting_for_the_user_keeps_its_lease_and_no_other_host_takes_over,
    request_states_are_keyed_by_the_journals_secret_which_its_hosts_share_and_rotation_keeps_for_a_window,
    a_person_who_says_yes_with_the_state_they_were_given_ends_the_unknown_performed_by_name,
    a_person_who_declines_or_cannot_be_asked_leaves_it_unknown_and_a_no_sends_it_once_more,
    an_upstreams_question_answered_after_the_run_lost_its_lease_is_not_passed_on,
    an_upstreams_next_question_on_a_request_taken_up_follows_those_asked_on_it,
);

#[test]
fn every_ask_test_runs_on_postgres_too() {
    let source = include_str!("ask_tests.rs");
    let tests: Vec<&str> = source
        .split("#[test]\nfn ")
        .skip(1)
        .filter_map(|rest| rest.split('(').next())
        .filter(|name| *name != "every_ask_test_runs_on_postgres_too")
        .collect();
    assert!(tests.len() >= 8, "{tests:?}");
    let missing: Vec<_> = tests
        .iter()
        .filter(|name| !on_postgres::NAMES.contains(name))
        .collect();
    assert!(missing.is_empty(), "not run on PostgreSQL: {missing:?}");
}
