//! Answers that came after their attempt was given up, journaled as they come.
//!
//! A provider that learns an effect's answer late (an upstream's answer past its
//! `timeout_ms`) hands it here at once ([`Provider::hand_late_answers_to`]). It is
//! saved as the effect's answer when no run holds the call (its last run gave up
//! and left it resumable: `Journal::answer_late` checks that in the write), so the
//! call's retry, on any host and after a restart, is answered from the journal.
//! When a run holds the call, nothing is written: the provider keeps the answer and
//! hands it to that run's next attempt ([`Provider::earlier_attempt`]), which saves
//! it as an answer in time. Either way, the answer on record is the one a tool was
//! handed, or will be.

use std::sync::Arc;

use serde_json::Value;

use crate::clock::Clock;
use crate::journal::{Answer, Journal};
use crate::provider::{LateAnswerSink, Provider, ProviderError};

/// The effect's answer a late one is: a response, or the downstream's refusal;
/// `None` for what is no answer (not performed, unknown after all).
pub(super) fn answer_of(late: &Result<Value, ProviderError>) -> Option<Answer> {
    match late {
        Ok(response) => Some(Answer::Ok(response.clone())),
        Err(ProviderError::Rejected(answer)) => Some(Answer::Rejected(answer.clone())),
        Err(_) => None,
    }
}

/// Tells every provider of `providers` to hand its late answers to `journal`,
/// saved at `clock`'s time.
pub(super) fn journal_late_answers<'a>(
    providers: impl IntoIterator<Item = &'a Arc<dyn Provider>>,
    journal: &Arc<dyn Journal>,
    clock: &Arc<dyn Clock>,
) {
    for provider in providers {
        provider.hand_late_answers_to(journaling(Arc::clone(journal), Arc::clone(clock)));
    }
}

/// The sink that saves a late answer in `journal` when no run holds its call.
fn journaling(journal: Arc<dyn Journal>, clock: Arc<dyn Clock>) -> LateAnswerSink {
    Arc::new(move |effect, late| {
        let Some(answer) = answer_of(late) else {
            return false;
        };
        match journal.answer_late(effect, &answer, clock.now_ms()) {
            Ok(Ok(())) => true,
            Ok(Err(why)) => {
                tracing::info!(%effect, "a late answer is not journaled now ({why}); the call's next attempt takes it");
                false
            }
            Err(e) => {
                tracing::warn!(%effect, "a late answer could not be journaled ({e}); the call's next attempt here takes it");
                false
            }
        }
    })
}
