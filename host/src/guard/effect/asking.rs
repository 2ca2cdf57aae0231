//! Asking the user (issue 43): the effect `user.elicit` at its position in the
//! invocation, guarded as any effect is.
//!
//! 1. Checks that need no journal: an interrupted run, malformed questions (a
//!    refusal of the tool's own doing, which takes the position), a read-only tool.
//! 2. A resumed run compares the journal at this position: other questions are a
//!    divergence, answered ones replay and nobody is asked again.
//! 3. A caller that cannot be asked (no asker on the thread, or one whose client
//!    cannot answer) leaves nothing journaled for the question: the call returns
//!    `input_unavailable`.
//! 4. Otherwise the question is claimed like a keyed effect (pending, its key before
//!    anyone is asked; a pending one a later run finds is asked again), then asked:
//!    answers are saved like a keyed effect's answer and handed to the tool; answers
//!    that come later stop the run, which is suspended awaiting them.

use serde_json::Value;

use super::{
    EffectSession, Interruption, after_interruption, cancelled, effect_result, lease_lost,
};
use crate::ask::{self, AskContext, Asked, Question};
use crate::error::Error;
use crate::journal::{Answer, EffectState, NewEffect};
use crate::keys::{self, EffectKey};
use crate::mutants::{self, Mutant};
use crate::provider::ProviderClass;
use crate::runtime::EffectFailure;

impl EffectSession {
    /// Guards one `input.ask` of the guest. `Err` is a host fault, as for `perform`.
    pub(super) fn asked(
        &mut self,
        questions: &[Question],
    ) -> Result<Result<Vec<String>, EffectFailure>, Error> {
        // 1. Checks that need no journal.
        if self.interrupted.is_some() {
            return Ok(Err(after_interruption()));
        }
        if self.handed_over() {
            return Ok(Err(lease_lost()));
        }
        if let Err(why) = ask::check_questions(questions) {
            self.next_seq += 1;
            return Ok(Err(EffectFailure::Denied(format!(
                "the questions cannot be asked: {why}"
            ))));
        }
        if self.read_only {
            return Ok(Err(EffectFailure::ReadOnly(format!(
                "the tool `{}` is marked read-only but asked the user a question: asking is an effect, \
                 journaled like one, and a read-only tool's calls are not journaled; remove its read-only \
                 mark to ask",
                self.tool
            ))));
        }
        let payload = ask::payload(questions);
        let counters = self
            .shared
            .metrics
            .effect(ask::PROVIDER, ask::PROVIDER, &self.tool);
        let answer = self.journaled_ask(questions, &payload);
        counters.effect_ended(effect_result(&answer));
        answer
    }

    /// Steps 2 to 4.
    fn journaled_ask(
        &mut self,
        questions: &[Question],
        payload: &Value,
    ) -> Result<Result<Vec<String>, EffectFailure>, Error> {
        let seq = self.next_seq;
        self.next_seq += 1;
        // Only a resumed run can find the question journaled already.
        let resumed = self.resumed;
        let (key, state, asked) =
            match self.ask_at((seq, ask::OPERATION), resumed, questions, payload)? {
                AskStep::Replayed(stored) => return Ok(answers_to_guest(stored)),
                AskStep::Refused(failure) => return Ok(Err(failure)),
                AskStep::CannotAsk(why) => return Ok(Err(self.input_unavailable(why))),
                AskStep::Asked { key, state, asked } => (key, state, asked),
            };
        match asked {
            Asked::Answered(answers) => Ok(match self.save_answers(&key, answers, questions)? {
                Ok(saved) => answers_to_guest(saved),
                Err(why) => Err(self.input_unavailable(why)),
            }),
            Asked::Later => {
                // What operators read on the pending question (`journal`, console).
                self.note_unknown(&key, AWAITING)?;
                tracing::info!(
                    tool = %self.tool,
                    key = %self.invocation,
                    seq,
                    "the tool asked the user; the call is suspended awaiting the answers"
                );
                self.interrupted = Some(Interruption::AwaitingInput {
                    seq,
                    questions: questions.to_vec(),
                    requests: Vec::new(),
                    state,
                });
                Ok(Err(EffectFailure::Stopped(
                    "the call stopped to wait for the user's answers".into(),
                )))
            }
            Asked::Unavailable(why) => {
                self.note_unknown(&key, &format!("the user could not be asked: {why}"))?;
                Ok(Err(self.input_unavailable(why)))
            }
            Asked::Invalid(why) => {
                self.interrupted = Some(Interruption::InputStateInvalid(why.clone()));
                Ok(Err(EffectFailure::Stopped(format!(
                    "the request's answers were refused: {why}"
                ))))
            }
        }
    }

    /// Steps 2 to 4 for the question at `seq`, journaled as `operation`: the
    /// journal's answer when it holds one (read when `look`), else the question
    /// claimed and asked.
    pub(super) fn ask_at(
        &mut self,
        (seq, operation): (u32, &str),
        look: bool,
        questions: &[Question],
        payload: &Value,
    ) -> Result<AskStep, Error> {
        let fingerprint = match keys::effect_fingerprint(ask::PROVIDER, operation, payload) {
            Ok(f) => f,
            Err(e) => {
                return Ok(AskStep::Refused(EffectFailure::Denied(format!(
                    "questions: {e}"
                ))));
            }
        };

        // 2. The journal at this position.
        let existing = if look {
            self.shared.journal.effect(&self.invocation, seq)?
        } else {
            None
        };
        if let Some(record) = &existing {
            if record.fingerprint != fingerprint {
                return Ok(AskStep::Refused(self.diverged(
                    record,
                    seq,
                    ask::PROVIDER,
                    operation,
                )));
            }
            if record.state == EffectState::Done && !mutants::on(Mutant::AskAnsweredAgain) {
                let stored = Answer::from_stored(record.response.as_deref().unwrap_or(""));
                return Ok(AskStep::Replayed(stored));
            }
        }
        if existing.is_none() && self.refused_by_a_cancel() {
            return Ok(AskStep::Refused(cancelled()));
        }

        // 3. Before anything is journaled: can this caller be asked at all?
        let Some(asker) = ask::current() else {
            return Ok(AskStep::CannotAsk(ask::NO_ASKER.into()));
        };
        if let Err(why) = asker.can_ask() {
            return Ok(AskStep::CannotAsk(why));
        }

        // 4. Claimed (the key read back), then asked.
        let key = keys::effect_key(&self.invocation, self.entropy.seed.generation(), seq);
        let invocation = self.invocation.clone();
        let new = NewEffect {
            key: &key,
            invocation: &invocation,
            seq,
            provider: ask::PROVIDER,
            class: ProviderClass::Keyed.as_str(),
            operation,
            fingerprint: &fingerprint,
            ends_by: None,
            now: self.shared.clock.now_ms(),
        };
        let claimed = self.shared.journal.claim_attempt(
            &new,
            &self.lease(),
            self.unjournaled.as_ref(),
            &self.deferred,
        )?;
        // Saved with the claim, refused or not.
        self.deferred.clear();
        let key = match claimed {
            Ok((key, _attempt)) => key,
            Err(refusal) => {
                return Ok(AskStep::Refused(self.refused(refusal, seq, ask::PROVIDER)));
            }
        };
        self.unjournaled = None;
        self.attempts += 1;
        let principal = self.principal.clone();
        let tool = self.tool.clone();
        let state_keys = self.shared.state_keys()?;
        let at = AskContext {
            tool: &tool,
            key: &invocation,
            seq,
            effect_key: &key,
            principal: principal.as_deref(),
            keys: &state_keys,
        };
        // A person may take a while: the lease is renewed meanwhile (as for a slow
        // provider), and their time does not count against the call's wall clock,
        // which bounds the retries of the effects after the question.
        let asked_at = self.shared.clock.now_ms();
        let beat = self.heartbeats.beat(&self.invocation, &self.owner);
        let asked = asker.ask(&at, questions);
        drop(beat);
        let waited = self.shared.clock.now_ms().saturating_sub(asked_at).max(0);
        self.ends_at_ms = self.ends_at_ms.saturating_add(waited);
        let state = at.state();
        Ok(AskStep::Asked { key, state, asked })
    }

    /// Saves the person's `answers` to `questions` asked under `key`, as a keyed
    /// effect's answer; `Err` (why, noted on the question) when they cannot be used.
    pub(super) fn save_answers(
        &mut self,
        key: &EffectKey,
        answers: Vec<Value>,
        questions: &[Question],
    ) -> Result<Result<Answer, String>, Error> {
        if let Err(why) = ask::check_answers(&answers, questions) {
            let why = format!("the client's answers cannot be used: {why}");
            self.note_unknown(key, &why)?;
            return Ok(Err(why));
        }
        let answer = Answer::Ok(Value::Array(answers));
        // A keyed answer: deferred to the run's next commit, handed on as it is.
        let _handed = self.save_answer(key, answer.clone(), ProviderClass::Keyed)?;
        Ok(Ok(answer))
    }

    /// The caller cannot be asked: the run stops, and the call says why.
    fn input_unavailable(&mut self, why: String) -> EffectFailure {
        let message = format!("the call stopped: the user cannot be asked ({why})");
        self.interrupted = Some(Interruption::InputUnavailable(why));
        EffectFailure::Stopped(message)
    }
}

/// What a pending question says while its answers are awaited.
pub(crate) const AWAITING: &str =
    "awaiting the user's answer: the same call, made again with the answers, resumes it";

/// Where [`EffectSession::ask_at`] left a question.
pub(super) enum AskStep {
    /// The journal holds its answer: nobody is asked.
    Replayed(Answer),
    /// Refused before anyone was asked (a divergence, a cancel, a lost lease).
    Refused(EffectFailure),
    /// This caller cannot be asked: why. Nothing of the question is journaled.
    CannotAsk(String),
    /// Claimed under `key` and asked: what became of it, and the request state of
    /// the question.
    Asked {
        /// The question's effect key.
        key: EffectKey,
        /// Its request state ([`AskContext::state`]).
        state: String,
        /// What became of asking.
        asked: Asked,
    },
}

/// What the guest is told of an ask's saved answer: each answer's JSON text.
fn answers_to_guest(answer: Answer) -> Result<Vec<String>, EffectFailure> {
    match answer {
        Answer::Ok(Value::Array(answers)) => Ok(answers.iter().map(Value::to_string).collect()),
        Answer::Ok(other) => Err(EffectFailure::Denied(format!(
            "the journal holds an unreadable answer for this question: {other}"
        ))),
        Answer::Rejected(answer) => Err(EffectFailure::Rejected(answer.to_string())),
        Answer::Denied(message) => Err(EffectFailure::Denied(message)),
    }
}
