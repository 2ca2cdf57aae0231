//! Asking a session's client (protocol 2025-11-25 and older, over stdio or an HTTP
//! session; issue 43): while a tool call runs, the server sends the client its own
//! JSON-RPC request `elicitation/create` `{message, requestedSchema}`, one per
//! question and in order, and the call's thread waits for each response.
//!
//! The connection's reader hands the client's responses to [`Pending::respond`] by
//! id; the waiting call reads its answer, or after [`ServerConfig::ask_timeout`]
//! none, or the connection's end ([`Pending::close`]). A client that declared no
//! `elicitation` capability in `initialize` is not asked at all. With a session the
//! answer comes within the call, so [`SessionAsker`] never answers
//! [`Asked::Later`].
//!
//! [`ServerConfig::ask_timeout`]: super::ServerConfig::ask_timeout

use std::collections::HashMap;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::protocol::{ErrorData, RequestId};
use crate::ask::{self, AskContext, Asked, Asker, Forwarded, Question};

/// The method of the server's request that asks the client's user.
pub const ELICIT_METHOD: &str = "elicitation/create";

/// How long a call waits for the client's answer to one question unless configured
/// (`[mcp] ask_timeout_ms`): a person reads and answers within it.
pub const DEFAULT_ASK_TIMEOUT: Duration = Duration::from_secs(300);

/// What a session's client declared in `initialize` that a call may ask of it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Declared {
    /// `elicitation` (form mode): its tools' and upstreams' questions.
    pub elicitation: bool,
    /// `sampling`: an upstream's `sampling/createMessage`.
    pub sampling: bool,
    /// `roots`: an upstream's `roots/list`.
    pub roots: bool,
}

impl Declared {
    /// What `capabilities` (an `initialize`'s) declare.
    pub(crate) fn from_capabilities(capabilities: Option<&Value>) -> Self {
        let has = |name| capabilities.is_some_and(|c| c.get(name).is_some_and(Value::is_object));
        Self {
            elicitation: declares_elicitation(capabilities),
            sampling: has("sampling"),
            roots: has("roots"),
        }
    }

    /// The capability `method` (a request of an upstream's) needs, and whether it
    /// was declared; `None` for a method that is not forwarded.
    pub(crate) fn needs(self, method: &str) -> Option<(&'static str, bool)> {
        match method {
            SAMPLING_METHOD => Some(("sampling", self.sampling)),
            ROOTS_METHOD => Some(("roots", self.roots)),
            _ => None,
        }
    }
}

/// An upstream's request that its client sample its model.
pub const SAMPLING_METHOD: &str = "sampling/createMessage";

/// An upstream's request for its client's roots.
pub const ROOTS_METHOD: &str = "roots/list";

/// Whether a client that declared `capabilities` (in its `initialize`, or in a
/// stateless request's `_meta`) can be asked: it declared `elicitation`, in form mode (`{}` before 2025-11-25 means form mode;
/// justonce asks no URL-mode questions).
pub(crate) fn declares_elicitation(capabilities: Option<&Value>) -> bool {
    match capabilities.and_then(|c| c.get("elicitation")) {
        Some(Value::Object(modes)) => modes.contains_key("form") || !modes.contains_key("url"),
        _ => false,
    }
}

/// What the client answered one request of the server's: its result or its error.
pub(crate) type Outcome = Result<Value, ErrorData>;

/// The server's requests to one client (a stdio connection or an HTTP session) that
/// wait for their responses.
#[derive(Debug, Default)]
pub(crate) struct Pending(Mutex<State>);

#[derive(Debug, Default)]
struct State {
    /// The number of the next request's id.
    next: u64,
    /// Each waiting request's id (its JSON text) and who waits for it.
    waiting: HashMap<String, Waiter>,
    /// The connection ended: no request is sent, none waits.
    closed: bool,
}

/// A call waiting for the response to one of the server's requests.
#[derive(Debug)]
struct Waiter {
    /// The client's request id of the call that asked, if known.
    call: Option<RequestId>,
    /// Where the response goes.
    answer: SyncSender<Result<Outcome, NoResponse>>,
}

/// Why a request of the server's got no response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NoResponse {
    /// None came within the bound.
    TimedOut,
    /// The connection ended first (or had ended).
    Closed,
    /// The client cancelled the call that asked (`notifications/cancelled`).
    Cancelled,
}

impl Pending {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A fresh id for a request of the call `call` and where its response will
    /// arrive; `None` once the connection ended.
    fn open(
        &self,
        call: Option<&RequestId>,
    ) -> Option<(RequestId, Receiver<Result<Outcome, NoResponse>>)> {
        let mut state = self.lock();
        if state.closed {
            return None;
        }
        state.next += 1;
        let id = Value::String(format!("justonce-elicit-{}", state.next));
        let id = RequestId::try_from(&id).expect("a string id is valid");
        let (answer, answered) = sync_channel(1);
        let waiter = Waiter {
            call: call.cloned(),
            answer,
        };
        state.waiting.insert(id.to_string(), waiter);
        Some((id, answered))
    }

    /// Sends a request of `method` with `params` through `send` for the call
    /// `call` and waits up to `timeout` for the client's response.
    pub(crate) fn request(
        &self,
        send: &dyn Fn(&Value),
        (method, params): (&str, Value),
        call: Option<&RequestId>,
        timeout: Duration,
    ) -> Result<Outcome, NoResponse> {
        let (id, answered) = self.open(call).ok_or(NoResponse::Closed)?;
        send(&json!({
            "jsonrpc": "2.0",
            "id": id.to_json(),
            "method": method,
            "params": params,
        }));
        let got = answered.recv_timeout(timeout);
        self.lock().waiting.remove(&id.to_string());
        match got {
            Ok(outcome) => outcome,
            Err(RecvTimeoutError::Timeout) => Err(NoResponse::TimedOut),
            Err(RecvTimeoutError::Disconnected) => Err(NoResponse::Closed),
        }
    }

    /// Hands the client's response to request `id` to the call waiting for it;
    /// `false` when none waits (never sent, answered already, or given up on).
    pub(crate) fn respond(&self, id: &RequestId, outcome: Outcome) -> bool {
        let Some(waiter) = self.lock().waiting.remove(&id.to_string()) else {
            return false;
        };
        waiter.answer.try_send(Ok(outcome)).is_ok()
    }

    /// The client cancelled the call `call`: its question waits no more (the call
    /// ends without an answer, resumable); whether one waited.
    pub(crate) fn cancel_call(&self, call: &RequestId) -> bool {
        let mut state = self.lock();
        let ids: Vec<String> = state
            .waiting
            .iter()
            .filter(|(_, w)| w.call.as_ref() == Some(call))
            .map(|(id, _)| id.clone())
            .collect();
        for id in &ids {
            if let Some(waiter) = state.waiting.remove(id) {
                let _ = waiter.answer.try_send(Err(NoResponse::Cancelled));
            }
        }
        !ids.is_empty()
    }

    /// The connection ended: every waiting request reads that, and no new one is
    /// sent.
    pub(crate) fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        state.waiting.clear();
    }

    /// Whether [`Pending::close`] was called.
    pub(crate) fn is_closed(&self) -> bool {
        self.lock().closed
    }
}

/// Asks a session's client, on the thread that runs its call (see the module docs).
pub(crate) struct SessionAsker {
    /// What the client declared in `initialize`.
    declared: Declared,
    pending: Arc<Pending>,
    send: Box<dyn Fn(&Value)>,
    timeout: Duration,
    /// The client's request id of the call, which a cancellation names.
    call: Option<RequestId>,
}

impl SessionAsker {
    /// Asks through `send` (the client's output: a stdio line, an event on the
    /// call's stream), reading the answers from `pending`, each within `timeout`.
    pub(crate) fn new(
        pending: Arc<Pending>,
        send: impl Fn(&Value) + 'static,
        timeout: Duration,
    ) -> Self {
        Self {
            declared: Declared {
                elicitation: true,
                ..Declared::default()
            },
            pending,
            send: Box::new(send),
            timeout,
            call: None,
        }
    }

    /// The same asker, for the call the client sent as request `call`: a
    /// `notifications/cancelled` of it ends the wait for its answer.
    pub(crate) fn for_call(mut self, call: RequestId) -> Self {
        self.call = Some(call);
        self
    }

    /// Asks one question: the client's `ElicitResult`, or why there is none.
    fn ask_one(&self, question: &Question) -> Result<Value, String> {
        let params = json!({
            "message": question.message,
            "requestedSchema": question.schema,
        });
        match self.pending.request(
            &*self.send,
            (ELICIT_METHOD, params),
            self.call.as_ref(),
            self.timeout,
        ) {
            Ok(Ok(result)) => elicit_result(result)
                .map_err(|why| {
                    format!("the client's answer to {ELICIT_METHOD} is not an ElicitResult: {why}")
                })
                .and_then(|answer| {
                    ask::check_answer(question, &answer)
                        .map(|()| answer)
                        .map_err(|why| format!("the client's answer to {ELICIT_METHOD}: {why}"))
                }),
            Ok(Err(error)) => Err(format!(
                "the client answered {ELICIT_METHOD} with an error ({}: {})",
                error.code.0, error.message
            )),
            Err(NoResponse::TimedOut) => Err(format!(
                "the client did not answer {ELICIT_METHOD} within {}",
                duration_text(self.timeout)
            )),
            Err(NoResponse::Closed) => Err(CLOSED.into()),
            Err(NoResponse::Cancelled) => Err(CANCELLED.into()),
        }
    }
}

/// Why a client that disconnected cannot be asked.
const CLOSED: &str = "the client disconnected before it answered";

/// Why a call the client cancelled while it was asked got no answer.
const CANCELLED: &str = "the client cancelled the call while it was asked";

/// Why a client that declared no `elicitation` capability cannot be asked.
pub(crate) const NOT_DECLARED: &str =
    "the client declared no elicitation capability when it initialized, so it cannot be asked";

/// Why a session's client whose request takes no stream cannot be asked over HTTP.
pub(crate) const NO_STREAM: &str = "the request does not accept a text/event-stream response, on which the question would go to the client";

/// The asker of a session's client that cannot be asked, saying why.
pub(crate) struct CannotAsk(pub &'static str);

impl Asker for CannotAsk {
    fn can_ask(&self) -> Result<(), String> {
        Err(self.0.into())
    }

    fn ask(&self, _: &AskContext<'_>, _: &[Question]) -> Asked {
        Asked::Unavailable(self.0.into())
    }
}

/// The asker of a call of a session's client: one that asks it through `send` and
/// `pending` what it `declared` (its questions if it declared `elicitation`, else it
/// says it cannot be asked; an upstream's sampling and roots where it declared them).
/// `call` is the client's request id of the call, which a cancellation names.
pub(crate) fn session_asker(
    (declared, call): (Declared, RequestId),
    pending: Arc<Pending>,
    send: impl Fn(&Value) + 'static,
    timeout: Duration,
) -> std::rc::Rc<dyn Asker> {
    let mut asker = SessionAsker::new(pending, send, timeout).for_call(call);
    asker.declared = declared;
    std::rc::Rc::new(asker)
}

impl Asker for SessionAsker {
    fn can_ask(&self) -> Result<(), String> {
        if !self.declared.elicitation {
            return Err(NOT_DECLARED.into());
        }
        if self.pending.is_closed() {
            return Err(CLOSED.into());
        }
        Ok(())
    }

    fn ask(&self, _at: &AskContext<'_>, questions: &[Question]) -> Asked {
        if let Err(why) = self.can_ask() {
            return Asked::Unavailable(why);
        }
        let mut answers = Vec::with_capacity(questions.len());
        for question in questions {
            match self.ask_one(question) {
                Ok(answer) => answers.push(answer),
                Err(why) => return Asked::Unavailable(why),
            }
        }
        Asked::Answered(answers)
    }

    /// Sent to the client as a request of the server's, on the call's connection,
    /// where it declared the capability in `initialize`; waited for within the ask
    /// timeout, like a question.
    fn forward(&self, _at: Option<&AskContext<'_>>, method: &str, params: &Value) -> Forwarded {
        match self.declared.needs(method) {
            None => {
                return Forwarded::Unavailable(format!("{method} is not passed to clients"));
            }
            Some((capability, false)) => return Forwarded::NotDeclared(capability),
            Some((_, true)) => {}
        }
        match self.pending.request(
            &*self.send,
            (method, params.clone()),
            self.call.as_ref(),
            self.timeout,
        ) {
            Ok(Ok(result)) => Forwarded::Answered(result),
            Ok(Err(error)) => Forwarded::Refused {
                code: i64::from(error.code.0),
                message: error.message.to_string(),
            },
            Err(NoResponse::TimedOut) => Forwarded::Unavailable(format!(
                "the client did not answer {method} within {}",
                duration_text(self.timeout)
            )),
            Err(NoResponse::Closed) => Forwarded::Unavailable(CLOSED.into()),
            Err(NoResponse::Cancelled) => Forwarded::Unavailable(CANCELLED.into()),
        }
    }
}

/// A client's `elicitation/create` result as the answer saved: its `action`, and
/// the `content` of an accepted one (its `_meta` and anything else dropped).
pub(crate) fn elicit_result(result: Value) -> Result<Value, String> {
    let Value::Object(mut result) = result else {
        return Err("not an object".into());
    };
    let action = match result.get("action") {
        Some(Value::String(a)) if matches!(a.as_str(), "accept" | "decline" | "cancel") => {
            a.clone()
        }
        Some(other) => return Err(format!("unknown action {other}")),
        None => return Err("no action".into()),
    };
    let mut answer = Map::new();
    if action == "accept" {
        match result.remove("content") {
            None | Some(Value::Null) => {}
            Some(content @ Value::Object(_)) => {
                answer.insert("content".into(), content);
            }
            Some(_) => return Err("its content is not an object".into()),
        }
    }
    answer.insert("action".into(), Value::String(action));
    Ok(Value::Object(answer))
}

/// A bound as people say it: whole seconds, or milliseconds below one.
fn duration_text(d: Duration) -> String {
    if d >= Duration::from_secs(1) && d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    use crate::keys::{InvocationKey, effect_key};

    /// Runs `run` with the context of a question of a call of `refund`.
    fn at_a_question<R>(run: impl FnOnce(&AskContext<'_>) -> R) -> R {
        let key = InvocationKey::parse("conv.refund").unwrap();
        let effect = effect_key(&key, 1, 0);
        run(&AskContext {
            tool: "refund",
            key: &key,
            seq: 0,
            effect_key: &effect,
            principal: None,
            keys: &crate::ask::test_keys(),
        })
    }

    /// Runs `ask` with `questions` while a client thread answers each request it
    /// reads with what `answer` makes of it; the requests it read, and the outcome.
    fn asked_with(
        questions: &[Question],
        timeout: Duration,
        answer: impl Fn(&Value) -> Option<Outcome> + Send + 'static,
    ) -> (Vec<Value>, Asked) {
        let pending = Arc::new(Pending::default());
        let (to_client, from_server) = std::sync::mpsc::channel::<Value>();
        let client = {
            let pending = Arc::clone(&pending);
            std::thread::spawn(move || {
                let mut seen = Vec::new();
                for request in from_server {
                    let id = RequestId::try_from(&request["id"]).unwrap();
                    if let Some(outcome) = answer(&request) {
                        assert!(pending.respond(&id, outcome), "someone waits for {id}");
                    }
                    seen.push(request);
                }
                seen
            })
        };
        let asked = {
            let asker = SessionAsker::new(
                Arc::clone(&pending),
                move |m| to_client.send(m.clone()).unwrap(),
                timeout,
            );
            at_a_question(|at| asker.ask(at, questions))
        };
        (client.join().unwrap(), asked)
    }

    #[test]
    fn each_question_is_one_request_in_order_and_the_answers_come_back_in_order() {
        let (seen, asked) = asked_with(
            &[Question::yes_or_no("first"), Question::yes_or_no("second")],
            Duration::from_secs(60),
            |request| {
                let ok = request["params"]["message"] == "first?";
                Some(Ok(json!({
                    "action": "accept",
                    "content": {"ok": ok},
                    "_meta": {"client": "x"},
                })))
            },
        );
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[0]["method"], ELICIT_METHOD);
        assert_eq!(seen[0]["params"]["message"], "first?");
        assert_eq!(seen[1]["params"]["message"], "second?");
        assert_eq!(
            seen[0]["params"]["requestedSchema"],
            Question::yes_or_no("first").schema
        );
        assert_ne!(seen[0]["id"], seen[1]["id"], "one id per request");
        assert_eq!(
            asked,
            Asked::Answered(vec![
                json!({"action": "accept", "content": {"ok": true}}),
                json!({"action": "accept", "content": {"ok": false}}),
            ])
        );
    }

    #[test]
    fn a_decline_is_an_answer_and_a_malformed_or_refused_one_is_unavailable() {
        let (_, declined) =
            asked_with(&[Question::yes_or_no("q")], Duration::from_secs(60), |_| {
                Some(Ok(json!({"action": "decline", "content": {"ignored": 1}})))
            });
        assert_eq!(
            declined,
            Asked::Answered(vec![json!({"action": "decline"})])
        );
        let (_, malformed) =
            asked_with(&[Question::yes_or_no("q")], Duration::from_secs(60), |_| {
                Some(Ok(json!({"action": "maybe"})))
            });
        assert!(
            matches!(&malformed, Asked::Unavailable(why) if why.contains("not an ElicitResult")),
            "{malformed:?}"
        );
        let (_, misfit) = asked_with(&[Question::yes_or_no("q")], Duration::from_secs(60), |_| {
            Some(Ok(json!({"action": "accept", "content": {"ok": "yes"}})))
        });
        assert!(
            matches!(&misfit, Asked::Unavailable(why) if why.contains("does not fit its requestedSchema")),
            "{misfit:?}"
        );
        let (seen, refused) = asked_with(
            &[Question::yes_or_no("a"), Question::yes_or_no("b")],
            Duration::from_secs(60),
            |_| {
                Some(Err(ErrorData::invalid_request(
                    "Elicitation not supported",
                    None,
                )))
            },
        );
        assert_eq!(seen.len(), 1, "the first refusal ends the asking");
        assert!(
            matches!(&refused, Asked::Unavailable(why) if why.contains("Elicitation not supported")),
            "{refused:?}"
        );
    }

    #[test]
    fn no_answer_within_the_bound_is_unavailable_and_a_late_one_finds_no_one() {
        let (seen, asked) = asked_with(&[Question::yes_or_no("q")], Duration::ZERO, |_| None);
        assert_eq!(seen.len(), 1);
        assert_eq!(
            asked,
            Asked::Unavailable(format!(
                "the client did not answer {ELICIT_METHOD} within 0 ms"
            ))
        );
    }

    #[test]
    fn a_closed_connection_wakes_the_waiting_call_and_refuses_new_questions() {
        let pending = Arc::new(Pending::default());
        let sent = std::rc::Rc::new(RefCell::new(Vec::new()));
        std::thread::scope(|scope| {
            let waiting = scope.spawn(|| {
                pending.request(
                    &|_| {},
                    (ELICIT_METHOD, json!({})),
                    None,
                    Duration::from_secs(600),
                )
            });
            while pending.lock().waiting.is_empty() {
                std::thread::yield_now();
            }
            pending.close();
            assert_eq!(waiting.join().unwrap(), Err(NoResponse::Closed));
        });
        let log = std::rc::Rc::clone(&sent);
        let asker = SessionAsker::new(
            Arc::clone(&pending),
            move |m| log.borrow_mut().push(m.clone()),
            DEFAULT_ASK_TIMEOUT,
        );
        assert_eq!(asker.can_ask(), Err(CLOSED.into()));
        let id = RequestId::try_from(&json!("justonce-elicit-1")).unwrap();
        assert!(
            !pending.respond(&id, Ok(json!({}))),
            "no one waits any more"
        );
        assert!(sent.borrow().is_empty(), "nothing is sent once closed");
    }

    /// A cancellation of the call ends its wait, and only its.
    #[test]
    fn a_cancelled_call_stops_waiting_for_its_answer_and_another_call_waits_on() {
        let pending = Pending::default();
        let call = |n: i64| RequestId::try_from(&json!(n)).unwrap();
        std::thread::scope(|scope| {
            let ask = |n: i64| {
                let pending = &pending;
                scope.spawn(move || {
                    pending.request(
                        &|_| {},
                        (ELICIT_METHOD, json!({})),
                        Some(&call(n)),
                        Duration::from_secs(600),
                    )
                })
            };
            let (first, second) = (ask(1), ask(2));
            while pending.lock().waiting.len() < 2 {
                std::thread::yield_now();
            }
            assert!(!pending.cancel_call(&call(3)), "no such call waits");
            assert!(pending.cancel_call(&call(1)));
            assert_eq!(first.join().unwrap(), Err(NoResponse::Cancelled));
            assert_eq!(pending.lock().waiting.len(), 1, "the other call waits on");
            let waiting = pending.lock().waiting.keys().next().cloned().unwrap();
            let id =
                RequestId::try_from(&serde_json::from_str::<Value>(&waiting).unwrap()).unwrap();
            assert!(pending.respond(&id, Ok(json!({"action": "cancel"}))));
            assert_eq!(second.join().unwrap(), Ok(Ok(json!({"action": "cancel"}))));
        });
    }

    #[test]
    fn a_client_is_asked_only_if_it_declared_elicitation_in_form_mode() {
        for (capabilities, asks) in [
            (json!({"elicitation": {}}), true),
            (json!({"elicitation": {"form": {}}}), true),
            (json!({"elicitation": {"form": {}, "url": {}}}), true),
            (json!({"elicitation": {"url": {}}}), false),
            (json!({"sampling": {}}), false),
            (json!({"elicitation": true}), false),
        ] {
            assert_eq!(
                declares_elicitation(Some(&capabilities)),
                asks,
                "{capabilities}"
            );
        }
        assert!(!declares_elicitation(None));
        let sent = std::rc::Rc::new(RefCell::new(0));
        let count = std::rc::Rc::clone(&sent);
        let not_declared = session_asker(
            (Declared::default(), RequestId::try_from(&json!(1)).unwrap()),
            Arc::default(),
            move |_| *count.borrow_mut() += 1,
            DEFAULT_ASK_TIMEOUT,
        );
        assert_eq!(not_declared.can_ask(), Err(NOT_DECLARED.into()));
        assert_eq!(
            at_a_question(|at| not_declared.ask(at, &[Question::yes_or_no("q")])),
            Asked::Unavailable(NOT_DECLARED.into())
        );
        assert_eq!(*sent.borrow(), 0, "nothing was sent to it");
    }
}
