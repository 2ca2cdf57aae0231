//! What an upstream MCP server asks of the client while its `tools/call` runs
//! (issue 58), answered on the call's own thread while the call's effect is
//! performed:
//!
//! - `elicitation/create` is the call's question to the person, journaled like a
//!   component's `input.ask` (`asking`): at the positions after the upstream call's,
//!   in the order the upstream asks within one attempt, matched by position and
//!   content. A resent call (keyed, or a retry in the same run) whose upstream asks
//!   the same question again gets the journaled answer, and nobody is asked twice;
//!   another question there is a divergence. The answer is saved before the upstream
//!   reads it. A client that cannot be asked is not asked (nothing journaled): the
//!   upstream is refused, `-32021` where the client did not declare `elicitation`.
//! - `sampling/createMessage` and `roots/list` are the client's to answer where it
//!   declared them ([`crate::ask::Asker::forward`]), `-32021` naming the capability
//!   where it did not. They are not journaled: a model's completion and a list of
//!   roots are the client's answers, not effects, and a resent call asks again.
//!   A client that answers with a later request (`input_required`) gets them among
//!   what the call asks for, as a question: in a journaled call the upstream's
//!   request waits for the call made again with the answer (where it can wait: over
//!   stdio), tied to it by the request state of the upstream call's position; in a
//!   read (sent without a key, journaled nowhere) the upstream's request is refused
//!   and the read sent again with the answer, which needs no state.

use std::cell::{Cell, RefCell};

use serde_json::Value;

use super::asking::AskStep;
use super::{EffectSession, Interruption};
use crate::ask::{self, AskContext, Asked, Forwarded, Question, UpstreamRequest};
use crate::error::Error;
use crate::journal::Answer;
use crate::keys::EffectKey;
use crate::provider::{ClientReply, ClientRequests};

/// The method of an upstream's question to the person.
const ELICIT_METHOD: &str = "elicitation/create";

/// The JSON-RPC code of a request the client did not declare the capability for
/// (SEP-2575's missing client capability).
const MISSING_CAPABILITY: i64 = -32021;

/// The JSON-RPC code of a request refused for another reason.
const INTERNAL: i64 = -32603;

/// The name an upstream's question takes (an `inputRequests` key, a journal entry).
const QUESTION_NAME: &str = "upstream_question";

/// Answers the upstream's requests of one attempt of the effect at `after`.
pub(super) struct CallsClient<'s> {
    session: RefCell<&'s mut EffectSession>,
    /// The upstream call's position: its questions take the ones after it.
    after: u32,
    /// Questions asked in this attempt so far, counting those of the earlier
    /// attempt it took up ([`ClientRequests::taking_up`]).
    asked: Cell<u32>,
    /// Whether the last of them is answered later (the call stopped for it).
    later: Cell<bool>,
    /// The upstream call's effect key, in a journaled call; `None` in an
    /// unjournaled read, which asks no question.
    key: Option<EffectKey>,
    /// Whether this attempt takes up an earlier one waiting upstream on the
    /// person's answer ([`ClientRequests::resumes`]).
    resumes: bool,
}

impl<'s> CallsClient<'s> {
    /// The client of the effect at `after` of `session`'s run, journaled under
    /// `key`; `None` for a read, which journals nothing and so asks no question.
    pub(super) fn new(session: &'s mut EffectSession, after: u32, key: Option<EffectKey>) -> Self {
        Self {
            session: RefCell::new(session),
            after,
            asked: Cell::new(0),
            later: Cell::new(false),
            key,
            resumes: false,
        }
    }

    /// The same, for an attempt that takes up an earlier one (`resumes`) waiting
    /// upstream on the person's answer, and must send nothing anew.
    pub(super) fn resuming(mut self, resumes: bool) -> Self {
        self.resumes = resumes;
        self
    }

    /// The session back once the attempt ended: its next position follows the
    /// questions asked.
    pub(super) fn finish(self) -> &'s mut EffectSession {
        let after = self.after + self.asked.get() + 1;
        let session = self.session.into_inner();
        session.next_seq = session.next_seq.max(after);
        session
    }

    /// The upstream's `elicitation/create`, asked as the call's question.
    fn question(&self, params: &Value, can_wait: bool) -> ClientReply {
        if self.key.is_none() {
            return refusal(
                INTERNAL,
                "the tool is a read (read-only), whose call journals nothing, so justonce asks no question for it: its upstream or configuration must not mark it read-only"
                    .into(),
            );
        }
        let question = match question_of(params) {
            Ok(question) => question,
            Err(why) => return refusal(-32602, why),
        };
        let seq = self.after + 1 + self.asked.get();
        self.asked.set(self.asked.get() + 1);
        let mut session = self.session.borrow_mut();
        match session.upstream_question(seq, question, can_wait) {
            Ok(reply) => {
                self.later.set(reply == ClientReply::Later);
                reply
            }
            Err(fault) => faulted(&mut session, "journal the question", fault),
        }
    }
}

impl ClientRequests for CallsClient<'_> {
    fn resumes(&self) -> bool {
        self.resumes
    }

    fn questions(&self) -> u32 {
        self.asked.get() - u32::from(self.later.get())
    }

    fn taking_up(&self, questions: u32) {
        // Its questions took the positions after the upstream call's: the next
        // one asked on the request takes the one after them.
        self.asked.set(self.asked.get().max(questions));
    }

    fn request(&self, method: &str, params: &Value, can_wait: bool) -> ClientReply {
        if method == ELICIT_METHOD {
            return self.question(params, can_wait);
        }
        let Some(asker) = ask::current() else {
            return refusal(
                INTERNAL,
                format!("{}: {method} cannot be passed on", ask::NO_ASKER),
            );
        };
        let (forwarded, state) = match &self.key {
            Some(key) => {
                let mut session = self.session.borrow_mut();
                let keys = match session.shared.state_keys() {
                    Ok(keys) => keys,
                    Err(fault) => {
                        return faulted(&mut session, "read its request-state secrets", fault);
                    }
                };
                let at = AskContext {
                    tool: &session.tool,
                    key: &session.invocation,
                    seq: self.after,
                    effect_key: key,
                    principal: session.principal.as_deref(),
                    keys: &keys,
                };
                (asker.forward(Some(&at), method, params), at.state())
            }
            None => (asker.forward(None, method, params), String::new()),
        };
        match forwarded {
            Forwarded::Answered(result) => ClientReply::Result(result),
            Forwarded::Refused { code, message } => refusal(code, message),
            Forwarded::NotDeclared(capability) => refusal(
                MISSING_CAPABILITY,
                format!(
                    "the client of this call did not declare the `{capability}` capability, so justonce cannot pass {method} to it"
                ),
            ),
            Forwarded::Unavailable(why) => refusal(INTERNAL, why),
            Forwarded::Later(request) => self.later(request, state, can_wait),
        }
    }
}

impl CallsClient<'_> {
    /// The upstream's `request`, which the client answers with a later request:
    /// the call stops awaiting it. A journaled call's upstream request waits
    /// (`can_wait`) for the call made again with the answer and `state`; a read's is
    /// refused, and the read sent again with the answer. Where it cannot wait, it
    /// is refused saying why.
    fn later(&self, request: UpstreamRequest, state: String, can_wait: bool) -> ClientReply {
        let method = request.method.clone();
        if self.key.is_some() && !can_wait {
            return refusal(
                INTERNAL,
                format!(
                    "the client answers {method} with a later request (input_required), and this upstream's request cannot wait for it (over Streamable HTTP it ends with its response stream)"
                ),
            );
        }
        let mut session = self.session.borrow_mut();
        tracing::info!(tool = %session.tool, key = %session.invocation, "the upstream sent {method}; the call is suspended awaiting its client's answer");
        // A read's upstream may ask again once refused: all of it is asked for.
        match &mut session.interrupted {
            Some(Interruption::AwaitingInput { requests, .. }) => requests.push(request),
            _ => {
                session.interrupted = Some(Interruption::AwaitingInput {
                    seq: self.after,
                    questions: Vec::new(),
                    requests: vec![request],
                    state,
                });
            }
        }
        if let Some(key) = &self.key {
            // What operators read on the pending upstream call (`journal`, console).
            let awaiting = format!(
                "its upstream waits for the client's answer to its {method}: the same call, made again with it, resumes it"
            );
            if let Err(fault) = session.note_unknown(key, &awaiting) {
                session.host_fault = Some(fault);
            }
            return ClientReply::Later;
        }
        refusal(
            INTERNAL,
            format!(
                "the client answers {method} with a later request (input_required): this read is sent again with its answer"
            ),
        )
    }
}

fn refusal(code: i64, message: String) -> ClientReply {
    ClientReply::Error { code, message }
}

/// The host's own `fault` while it answered an upstream's request: the run ends
/// with it, and the upstream is refused, told what justonce could not `do`.
fn faulted(session: &mut EffectSession, what: &str, fault: Error) -> ClientReply {
    let reply = refusal(INTERNAL, format!("justonce could not {what}: {fault}"));
    session.host_fault = Some(fault);
    reply
}

/// The question an `elicitation/create`'s `params` ask, in form mode; `Err` why it
/// cannot be asked.
fn question_of(params: &Value) -> Result<Question, String> {
    if params.get("mode").and_then(Value::as_str) == Some("url") {
        return Err("justonce passes form-mode questions only, not URL-mode elicitation".into());
    }
    let message = params
        .get("message")
        .and_then(Value::as_str)
        .ok_or("elicitation/create without a `message`")?;
    let schema = params
        .get("requestedSchema")
        .cloned()
        .ok_or("elicitation/create without a `requestedSchema`")?;
    let question = Question {
        name: QUESTION_NAME.into(),
        message: message.into(),
        schema,
    };
    ask::check_questions(std::slice::from_ref(&question))
        .map_err(|why| format!("the question cannot be asked: {why}"))?;
    Ok(question)
}

impl EffectSession {
    /// The upstream's `question` at `seq`: the journal's answer if it holds one,
    /// else the person's, saved before the upstream reads it. What cannot be asked
    /// is refused to the upstream; the run goes on and the upstream's answer to its
    /// call is the call's, as for any effect.
    ///
    /// A client that answers with a later request (`input_required`: the stateless
    /// revision, a task) stops the call awaiting the answer, as a component's
    /// question does, while the upstream's request waits (`can_wait`: over stdio) for
    /// the call made again with it; where it cannot wait it is refused.
    fn upstream_question(
        &mut self,
        seq: u32,
        question: Question,
        can_wait: bool,
    ) -> Result<ClientReply, Error> {
        let questions = [question];
        let payload = ask::payload(&questions);
        // Looked up in every run: an attempt resent within this run asks again too.
        let at = (seq, ask::UPSTREAM_OPERATION);
        let (key, state, asked) = match self.ask_at(at, true, &questions, &payload)? {
            AskStep::Replayed(stored) => {
                tracing::info!(tool = %self.tool, key = %self.invocation, seq, "the upstream asked the question journaled at #{seq} again: answered from the journal, nobody is asked");
                return Ok(first_answer(stored));
            }
            AskStep::Refused(failure) => {
                return Ok(refusal(
                    INTERNAL,
                    format!("the question was refused: {}", failure.kind()),
                ));
            }
            // Both texts of a client that did not declare it name the capability.
            AskStep::CannotAsk(why) if why.contains("elicitation capability") => {
                return Ok(refusal(MISSING_CAPABILITY, why));
            }
            AskStep::CannotAsk(why) => return Ok(refusal(INTERNAL, why)),
            AskStep::Asked { key, state, asked } => (key, state, asked),
        };
        let why = match asked {
            Asked::Answered(answers) => match self.save_answers(&key, answers, &questions)? {
                Ok(answer) => {
                    // On record (durable) before the upstream acts on it; a run that
                    // lost its lease hands over nothing the journal lacks.
                    if !self.save_deferred()? {
                        return Ok(refusal(
                            INTERNAL,
                            "the call's run lost its lease before the answer was on record: not passed on".into(),
                        ));
                    }
                    return Ok(first_answer(answer));
                }
                Err(why) => why,
            },
            Asked::Later if can_wait => {
                self.note_unknown(&key, super::asking::AWAITING)?;
                tracing::info!(tool = %self.tool, key = %self.invocation, seq, "the upstream asked the user; the call is suspended awaiting the answers, its upstream call left waiting");
                let [question] = questions;
                self.interrupted = Some(Interruption::AwaitingInput {
                    seq,
                    questions: vec![question],
                    requests: Vec::new(),
                    state,
                });
                return Ok(ClientReply::Later);
            }
            Asked::Later => "the client answers questions with a later request (input_required), and this upstream's request cannot wait for it (over Streamable HTTP it ends with its response stream)".into(),
            Asked::Unavailable(why) | Asked::Invalid(why) => why,
        };
        self.note_unknown(&key, &format!("the user could not be asked: {why}"))?;
        Ok(refusal(INTERNAL, why))
    }
}

/// The reply that carries the one answer of an upstream's question on record.
fn first_answer(answer: Answer) -> ClientReply {
    match answer {
        Answer::Ok(Value::Array(mut answers)) if answers.len() == 1 => {
            ClientReply::Result(answers.remove(0))
        }
        other => refusal(
            INTERNAL,
            format!("the journal holds an unreadable answer for this question: {other:?}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_form_question_is_asked_and_a_url_or_unusable_one_refused_saying_why() {
        let schema = json!({ "type": "object", "properties": { "name": { "type": "string" } } });
        let asked = question_of(&json!({ "message": "Who?", "requestedSchema": schema }));
        assert_eq!(
            asked,
            Ok(Question {
                name: QUESTION_NAME.into(),
                message: "Who?".into(),
                schema: schema.clone(),
            })
        );
        let url = question_of(&json!({ "mode": "url", "message": "Go", "url": "https://x" }));
        assert!(url.unwrap_err().contains("form-mode questions only"));
        let no_schema = question_of(&json!({ "message": "Who?" }));
        assert!(no_schema.unwrap_err().contains("requestedSchema"));
        let nested = json!({ "type": "object", "properties": { "a": { "type": "object" } } });
        let nested = question_of(&json!({ "message": "Who?", "requestedSchema": nested }));
        assert!(nested.unwrap_err().contains("property `a`"));
    }
}
