//! Python and JavaScript tools that ask (issue 43), through the SDKs' `ask`: the
//! probes' `ask` asks the person to confirm a mail, then sends it. The first run is
//! asked and answered, and its mail's outcome stays unknown (every attempt's answer
//! lost); the retry resumes the call: the journaled answer is replayed, nobody is
//! asked again, one mail went. Another call is asked again, and its decline sends
//! nothing. The person is a scripted [`Asker`] on the calling thread (the library's
//! API, as an MCP server puts its client there).

use std::cell::RefCell;
use std::rc::Rc;

use justonce::__private::LocalApi;
use justonce::{AskContext, Asked, Asker, CallRequest, Error, Question, with_asker};
use serde_json::{Value, json};

use super::{JAVASCRIPT, Lang, PYTHON};
use crate::support::success;

/// The person behind the agent: answers every question with `answer`, and keeps
/// what it was asked.
struct Person {
    answer: RefCell<Value>,
    asked: RefCell<Vec<Vec<Question>>>,
}

impl Person {
    fn answering(answer: Value) -> Rc<Self> {
        Rc::new(Self {
            answer: RefCell::new(answer),
            asked: RefCell::default(),
        })
    }

    fn times_asked(&self) -> usize {
        self.asked.borrow().len()
    }
}

impl Asker for Person {
    fn can_ask(&self) -> Result<(), String> {
        Ok(())
    }

    fn ask(&self, _: &AskContext<'_>, questions: &[Question]) -> Asked {
        self.asked.borrow_mut().push(questions.to_vec());
        Asked::Answered(vec![self.answer.borrow().clone(); questions.len()])
    }
}

fn asks_once_and_a_resumed_call_replays_the_answer(lang: &Lang) {
    let api = LocalApi::start().unwrap();
    // Every answer of the mail's first three attempts is lost: the first run ends
    // with its outcome unknown, after the mailbox took the mail.
    let t = lang.host(&api, 3);
    let person = Person::answering(json!({"action": "accept", "content": {"confirm": true}}));
    let call = |request: &CallRequest| {
        with_asker(Rc::clone(&person) as Rc<dyn Asker>, || t.host.call(request))
    };
    let args = |message: &str| {
        json!({ "op": "ask", "message": message, "email": "ada@example.com" }).to_string()
    };
    let request = CallRequest::new(lang.probe_tool, args("Your refund")).conversation("c");

    let first = call(&request);
    assert!(
        matches!(first, Err(Error::OutcomeUnknown { .. })),
        "{}: {first:?}",
        lang.name
    );
    let asked = person.asked.borrow().clone();
    assert_eq!(asked.len(), 1, "{}: asked once", lang.name);
    let [question] = &asked[0][..] else {
        panic!("{}: one question: {asked:?}", lang.name)
    };
    assert_eq!(question.name, "confirm");
    assert!(
        question.message.contains("ada@example.com"),
        "{}",
        question.message
    );
    assert_eq!(
        question.schema["properties"]["confirm"]["type"], "boolean",
        "{}",
        question.schema
    );
    let sent = t.mail.sent().unwrap();
    assert_eq!(sent.len(), 1, "{}: the mailbox took the mail", lang.name);

    // The retry resumes the call: the answer is replayed, the mail finished under
    // its key.
    let resumed = call(&request).unwrap();
    assert!(!resumed.replayed, "{}: the guest ran again", lang.name);
    assert_eq!(
        success(&resumed.outcome),
        &json!({ "answer": "accept", "message_id": sent[0].message_id }),
        "{}",
        lang.name
    );
    assert_eq!(person.times_asked(), 1, "{}: not asked again", lang.name);
    let attempts = t.mail.attempts();
    assert_eq!(attempts.len(), 4, "{}", lang.name);
    assert!(attempts.iter().all(|k| *k == attempts[0]), "{attempts:?}");
    assert_eq!(t.mail.sent().unwrap().len(), 1, "{}: one mail", lang.name);

    // The agent's retry of the finished call: its outcome, nothing run or asked.
    let again = call(&request).unwrap();
    assert!(again.replayed);
    assert_eq!(again.outcome, resumed.outcome);
    assert_eq!(person.times_asked(), 1);

    // Another call is asked again; declined, it mails nothing.
    *person.answer.borrow_mut() = json!({"action": "decline"});
    let other = CallRequest::new(lang.probe_tool, args("Another")).conversation("c");
    let declined = call(&other).unwrap();
    assert_eq!(
        success(&declined.outcome),
        &json!({ "answer": "decline", "message_id": null }),
        "{}",
        lang.name
    );
    assert_eq!(
        person.times_asked(),
        2,
        "{}: the other call asked",
        lang.name
    );
    assert_eq!(
        t.mail.sent().unwrap().len(),
        1,
        "{}: no second mail",
        lang.name
    );
}

#[test]
fn a_python_tool_asked_and_answered_replays_the_answer_when_resumed() {
    asks_once_and_a_resumed_call_replays_the_answer(&PYTHON);
}

#[test]
fn a_javascript_tool_asked_and_answered_replays_the_answer_when_resumed() {
    asks_once_and_a_resumed_call_replays_the_answer(&JAVASCRIPT);
}
