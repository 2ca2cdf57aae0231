//! Step 4's other way out (issue 56): where the tool opts in (`[tools.NAME]
//! ask_person`, `[upstreams.NAME.ask_person]`) and no probe decided, the retry of a
//! call whose unkeyed effect's outcome is unknown asks the person behind the agent
//! one yes-or-no question through the client's elicitation, as a tool's own
//! questions are asked (`crate::ask`: the session's `elicitation/create`, a stateless
//! request's `input_required`, a task's `input_required`), about the pending effect
//! at its own position and under its own key (the request state names them).
//!
//! The question itself is not journaled (it is a question about the effect, not an
//! effect): what the person says is, as the effect's resolution decided by `person`
//! with their name (the call's principal), fenced by the run's lease. Yes finishes
//! the effect with an answer that says who confirmed it, since the downstream's own
//! answer was lost; no sends it again under its key. No answer (declined,
//! cancelled), a client that cannot be asked, or a question the effect cannot fill
//! in leave it unknown, and the agent is told which.

use serde_json::Value;

use super::probing::Probing;
use super::{EffectSession, Interruption, answer_to_guest};
use crate::ask::{self, AskContext, Asked};
use crate::ask_person::{self, PersonSaid};
use crate::error::{EndsBy, Error};
use crate::journal::{
    Answer, DecidedBy, EffectRecord, ProbeRun, Resolution, performed_without_answer,
};
use crate::provider::Provider;
use crate::runtime::EffectFailure;

/// Who the person is in the journal when the call named no principal (a local
/// client over stdio).
const LOCAL_USER: &str = "the local user";

/// The pending effect asked about.
pub(super) struct Pending<'a> {
    pub record: &'a EffectRecord,
    pub seq: u32,
    pub provider_name: &'a str,
    pub operation: &'a str,
    pub payload: &'a Value,
}

impl EffectSession {
    /// The question the person is asked about an unknown unkeyed effect of
    /// `operation` with `payload`, where the tool or its provider opts in: the
    /// provider's (an upstream's `[upstreams.NAME.ask_person]`), else the tool's
    /// (`[tools.NAME] ask_person`).
    pub(super) fn person_question(
        &self,
        provider: &dyn Provider,
        operation: &str,
        payload: &Value,
    ) -> Option<String> {
        provider
            .person_question_of(operation, payload)
            .or_else(|| self.shared.ask_person.get(&self.tool).cloned())
    }

    /// Asks the person whether the pending effect happened, where the tool opts in;
    /// `unknown` is what the agent is told when it does not (or no one answers),
    /// with `ends_by`, what a retry can still do. `Err` is a host fault.
    pub(super) fn ask_person_pending(
        &mut self,
        provider: &dyn Provider,
        pending: &Pending<'_>,
        unknown: String,
        ends_by: EndsBy,
    ) -> Result<Result<Probing, EffectFailure>, Error> {
        let still = |why: String, ends_by: EndsBy| {
            Ok(Ok(Probing::Unknown {
                reason: format!("{unknown}; {why}"),
                ends_by,
            }))
        };
        let Some(template) = self.person_question(provider, pending.operation, pending.payload)
        else {
            return Ok(Ok(Probing::Unknown {
                reason: unknown,
                ends_by,
            }));
        };
        // A probe that erred may decide at the next retry; without one, only a
        // person can.
        let after = match ends_by {
            EndsBy::Probe => EndsBy::Probe,
            _ => EndsBy::Person,
        };
        let context = ask_person::context(
            pending.record.key.as_str(),
            pending.provider_name,
            pending.operation,
            pending.payload,
        );
        let question = match ask_person::question(&template, &context) {
            Ok(question) => question,
            Err(why) => return still(format!("the user could not be asked: {why}"), after),
        };
        let Some(asker) = ask::current() else {
            return still(
                format!("the user could not be asked: {}", ask::NO_ASKER),
                after,
            );
        };
        if let Err(why) = asker.can_ask() {
            return still(format!("the user could not be asked: {why}"), after);
        }
        let state_keys = self.shared.state_keys()?;
        let principal = self.principal.clone();
        let tool = self.tool.clone();
        let invocation = self.invocation.clone();
        let at = AskContext {
            tool: &tool,
            key: &invocation,
            seq: pending.seq,
            effect_key: &pending.record.key,
            principal: principal.as_deref(),
            keys: &state_keys,
        };
        let questions = [question];
        let asked_at = self.shared.clock.now_ms();
        let beat = self.heartbeats.beat(&self.invocation, &self.owner);
        let asked = asker.ask(&at, &questions);
        drop(beat);
        let waited = self.shared.clock.now_ms().saturating_sub(asked_at).max(0);
        self.ends_at_ms = self.ends_at_ms.saturating_add(waited);
        let answer = match asked {
            Asked::Answered(answers) => {
                if let Err(why) = ask::check_answers(&answers, &questions) {
                    return still(format!("the client's answer cannot be used: {why}"), after);
                }
                answers.into_iter().next().unwrap_or(Value::Null)
            }
            Asked::Later => {
                tracing::info!(
                    tool = %self.tool,
                    key = %self.invocation,
                    seq = pending.seq,
                    "the user is asked whether effect #{} went through; the call is suspended awaiting the answer",
                    pending.seq
                );
                let [question] = questions;
                self.interrupted = Some(Interruption::AwaitingInput {
                    seq: pending.seq,
                    questions: vec![question],
                    requests: Vec::new(),
                    state: at.state(),
                });
                return Ok(Err(EffectFailure::Stopped(
                    "the call stopped to wait for the user's answer".into(),
                )));
            }
            Asked::Unavailable(why) => {
                return still(format!("the user could not be asked: {why}"), after);
            }
            Asked::Invalid(why) => {
                self.interrupted = Some(Interruption::InputStateInvalid(why.clone()));
                return Ok(Err(EffectFailure::Stopped(format!(
                    "the request's answers were refused: {why}"
                ))));
            }
        };
        let resolution = match ask_person::read(&answer) {
            PersonSaid::Performed => Resolution::Performed,
            PersonSaid::NotPerformed => Resolution::NotPerformed,
            PersonSaid::NoAnswer(what) => {
                return still(
                    format!(
                        "the user was asked whether it went through and {what}; the same call made again asks again"
                    ),
                    after,
                );
            }
        };
        let person = principal.as_deref().unwrap_or(LOCAL_USER);
        let mut saved = Value::Null;
        if resolution == Resolution::Performed {
            saved = performed_without_answer(DecidedBy::Person, person);
            saved["question"] = Value::String(questions[0].message.clone());
        }
        self.save_deferred()?;
        let run = ProbeRun {
            decided_by: DecidedBy::Person,
            by: person,
            owner: &self.owner,
            now: self.shared.clock.now_ms(),
            sweep: self.probe_only,
        };
        match self.shared.journal.resolve_by_probe(
            pending.record.key.as_str(),
            resolution,
            &saved,
            &run,
        ) {
            Ok(_) => {}
            Err(Error::CannotResolve { reason, .. }) => {
                return still(
                    format!(
                        "the user said {}, which was not journaled: {reason}",
                        resolution.as_str()
                    ),
                    EndsBy::Person,
                );
            }
            Err(fault) => return Err(fault),
        }
        self.shared.metrics.resolved(DecidedBy::Person.as_str());
        tracing::info!(
            tool = %self.tool,
            key = %self.invocation,
            seq = pending.seq,
            person,
            resolution = resolution.as_str(),
            "effect #{} resolved by the user ({person}) as {}; the call goes on from it",
            pending.seq,
            resolution.as_str()
        );
        Ok(Ok(match resolution {
            Resolution::Performed => Probing::Answered(answer_to_guest(Answer::Ok(saved))),
            Resolution::NotPerformed => Probing::Resend,
        }))
    }
}
