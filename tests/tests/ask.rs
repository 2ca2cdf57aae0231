//! Tools that ask (issue 43), end to end through the library: the `asks_refund`
//! guest asks the user to confirm before it refunds, and a scripted asker answers
//! later (the call stops and is resumed by its retry) or at once. Every retry test
//! asserts the retry happened, the effect happened once, the same key on both
//! attempts, and what the agent was told; the opposite cases sit beside.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use justonce::{
    AskContext, Asked, Asker, CallRequest, EffectKey, Error, Limits, Outcome, Question, StateCheck,
    check_request_state, with_asker,
};
use serde_json::{Value, json};

use crate::support::{FakePayments, Fault, TestHost, test_host};

/// What the scripted asker does at its next ask.
enum Reply {
    /// The answers come with a later request.
    Later,
    /// The request carries `state` and these answers (as the stateless MCP asker
    /// reads them): answered if the state is this question's.
    WithState(String, Vec<Value>),
}

/// An asker that follows a script and records each ask's effect key.
struct Scripted {
    replies: RefCell<Vec<Reply>>,
    asked: RefCell<Vec<(EffectKey, Vec<Question>)>>,
}

impl Scripted {
    fn new(replies: Vec<Reply>) -> Rc<Self> {
        Rc::new(Self {
            replies: RefCell::new(replies),
            asked: RefCell::default(),
        })
    }
    fn times(&self) -> usize {
        self.asked.borrow().len()
    }
    fn keys(&self) -> Vec<EffectKey> {
        self.asked.borrow().iter().map(|(k, _)| k.clone()).collect()
    }
}

impl Asker for Scripted {
    fn can_ask(&self) -> Result<(), String> {
        Ok(())
    }

    fn ask(&self, at: &AskContext<'_>, questions: &[Question]) -> Asked {
        self.asked
            .borrow_mut()
            .push((at.effect_key.clone(), questions.to_vec()));
        match self.replies.borrow_mut().remove(0) {
            Reply::Later => Asked::Later,
            Reply::WithState(state, answers) => match check_request_state(&state, at) {
                StateCheck::ForThisQuestion => Asked::Answered(answers),
                StateCheck::ForAnotherQuestion => Asked::Later,
                StateCheck::Forged => Asked::Invalid("forged".into()),
            },
        }
    }
}

fn host() -> (TestHost, Arc<FakePayments>) {
    let payments = Arc::new(FakePayments::new(Fault::None));
    let t = test_host(|b| b.provider("payments", payments.clone()));
    (t, payments)
}

fn refund(order: u64, amount: u64) -> CallRequest {
    CallRequest::new(
        "asks_refund",
        json!({ "order_id": order, "amount_eur": amount }).to_string(),
    )
    .conversation("conv-ask")
}

fn call(
    t: &TestHost,
    asker: &Rc<Scripted>,
    request: &CallRequest,
) -> Result<justonce::CallResponse, Error> {
    let asker: Rc<dyn Asker> = asker.clone();
    with_asker(asker, || t.host.call(request))
}

fn confirmed() -> Vec<Value> {
    vec![json!({ "action": "accept", "content": { "confirm": true } })]
}

fn result_of(outcome: &Outcome) -> &Value {
    match outcome {
        Outcome::Success { result, .. } => result,
        other => panic!("expected a success-shaped result, got {other:?}"),
    }
}

#[test]
fn a_question_answered_later_stops_the_call_and_its_retry_with_the_answer_refunds_once() {
    let (t, payments) = host();
    let later = Scripted::new(vec![Reply::Later]);

    // The first call asks; the answer comes later. The agent is told what to ask,
    // and nothing was refunded or saved.
    let first = call(&t, &later, &refund(4417, 25)).unwrap_err();
    let Error::InputRequired {
        key,
        seq,
        questions,
        requests,
        state,
    } = &first
    else {
        panic!("expected input_required, got {first:?}")
    };
    assert_eq!(*seq, 0);
    assert_eq!(questions.len(), 1);
    assert!(
        requests.is_empty(),
        "a component asks no upstream's request"
    );
    assert_eq!(questions[0].message, "Refund 25 EUR to card …4242?");
    assert_eq!(
        questions[0].schema["properties"]["confirm"]["type"],
        "boolean"
    );
    assert_eq!(first.to_agent_json()["error"]["kind"], "input_required");
    assert!(payments.attempts().is_empty(), "nothing refunded yet");

    // The retry carries the answer: asked again under the same key, answered, and
    // the refund happens once.
    let answering = Scripted::new(vec![Reply::WithState(state.clone(), confirmed())]);
    let done = call(&t, &answering, &refund(4417, 25)).unwrap();
    assert_eq!(&done.key, key);
    assert!(!done.replayed);
    assert_eq!(answering.times(), 1, "the retry happened and asked");
    assert_eq!(
        later.keys(),
        answering.keys(),
        "both asks carried the same key"
    );
    assert_eq!(payments.attempts().len(), 1);
    assert_eq!(payments.applied().len(), 1, "the refund happened once");
    assert_eq!(payments.applied()[0].1["amount_eur"], 25);
    let told = result_of(&done.outcome);
    assert_eq!(told["refunded"], true);
    assert_eq!(
        told["refund"]["refund_id"], "re_0001",
        "the agent was told: {told}"
    );

    // The agent's own retry replays: nobody is asked, nothing is refunded.
    let nobody = Scripted::new(vec![]);
    let replay = call(&t, &nobody, &refund(4417, 25)).unwrap();
    assert!(replay.replayed);
    assert_eq!(replay.outcome, done.outcome);
    assert_eq!(nobody.times(), 0);
    assert_eq!(payments.attempts().len(), 1);
}

#[test]
fn two_different_refunds_each_ask_and_a_declined_one_refunds_nothing() {
    let (t, payments) = host();
    let asker = Scripted::new(vec![Reply::Later, Reply::Later, Reply::Later]);

    let Err(Error::InputRequired { state: a, .. }) = call(&t, &asker, &refund(1, 10)) else {
        panic!("the first refund asks")
    };
    let Err(Error::InputRequired { state: b, .. }) = call(&t, &asker, &refund(2, 20)) else {
        panic!("the second refund asks too")
    };
    let Err(Error::InputRequired { state: c, .. }) = call(&t, &asker, &refund(3, 30)) else {
        panic!("the third refund asks too")
    };
    let keys = asker.keys();
    assert_ne!(keys[0], keys[1], "each question has its own key");
    assert_ne!(a, b);

    let answers = Scripted::new(vec![
        Reply::WithState(a, confirmed()),
        Reply::WithState(b, confirmed()),
        Reply::WithState(c, vec![json!({ "action": "decline" })]),
    ]);
    assert_eq!(
        result_of(&call(&t, &answers, &refund(1, 10)).unwrap().outcome)["refunded"],
        true
    );
    assert_eq!(
        result_of(&call(&t, &answers, &refund(2, 20)).unwrap().outcome)["refunded"],
        true
    );
    let declined = call(&t, &answers, &refund(3, 30)).unwrap();
    assert_eq!(
        result_of(&declined.outcome),
        &json!({ "refunded": false, "user": "decline", "content": null })
    );
    assert_eq!(
        payments.applied().len(),
        2,
        "both confirmed refunds happened"
    );
}

#[test]
fn a_caller_that_cannot_be_asked_is_told_so_and_an_ask_counts_against_the_effect_budget() {
    // No asker (a library caller): the call says why, nothing is refunded.
    let (t, payments) = host();
    let refused = t.host.call(&refund(5, 50)).unwrap_err();
    assert!(
        matches!(&refused, Error::InputUnavailable { tool, reason }
            if tool == "asks_refund" && reason.contains("cannot answer questions")),
        "{refused:?}"
    );
    assert!(payments.attempts().is_empty());

    // A budget of one effect: the ask takes it, the refund after it traps.
    let payments = Arc::new(FakePayments::new(Fault::None));
    let one = Limits {
        max_effects: 1,
        ..Limits::default()
    };
    let t = test_host(|b| {
        b.provider("payments", payments.clone())
            .tool_limits("asks_refund", one)
    });
    let asker = Scripted::new(vec![Reply::Later]);
    let Err(Error::InputRequired { state, .. }) = call(&t, &asker, &refund(6, 60)) else {
        panic!("asks")
    };
    let answers = Scripted::new(vec![Reply::WithState(state, confirmed())]);
    let trapped = call(&t, &answers, &refund(6, 60)).unwrap();
    assert!(
        matches!(&trapped.outcome, Outcome::Trap { reason, .. } if reason == "effect_budget_exceeded"),
        "{:?}",
        trapped.outcome
    );
    assert!(
        payments.attempts().is_empty(),
        "nothing refunded past the budget"
    );
}
