//! Answers that came after their request was given up (past the upstream's
//! `timeout_ms`): kept by the effect key the request carried, so the retry of its
//! call is answered with what the upstream did instead of `outcome_unknown`.
//!
//! A `tools/call` past its timeout is not forgotten: it stays registered on its
//! connection (see `client`), and a later attempt under the same key waits on it
//! rather than sending it again. Its answer, when one comes while nobody waits, is
//! kept here until the call's next attempt takes it (the guard then saves it as
//! the effect's answer, as it would an answer that came in time). Kept in memory,
//! bounded; and handed at once to whoever journals late answers (the guard, see
//! `Provider::hand_late_answers_to`), which saves it as the effect's answer when no
//! run holds the call: then it is no longer kept here, and a retry after a restart
//! is answered from the journal.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;

/// The most late answers kept per upstream; the oldest goes first.
pub(crate) const MAX_LATE_ANSWERS: usize = 256;

/// The most bytes of late answers kept per upstream (their JSON); the oldest goes
/// first, and one larger than this alone is not kept.
pub(crate) const MAX_LATE_BYTES: usize = 64 << 20;

/// Journals a late answer (the effect key, the JSON-RPC response); whether it was
/// saved as the effect's answer.
pub(crate) type Journaling = Arc<dyn Fn(&str, &Value) -> bool + Send + Sync>;

/// One upstream's late answers, by effect key.
#[derive(Default)]
pub(crate) struct LateAnswers {
    kept: Mutex<Kept>,
    /// Who journals one as it comes, if anyone does.
    journaling: Mutex<Option<Journaling>>,
}

impl std::fmt::Debug for LateAnswers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LateAnswers").finish_non_exhaustive()
    }
}

#[derive(Debug, Default)]
struct Kept {
    /// Oldest first: the effect key, the JSON-RPC response, its size.
    answers: VecDeque<(String, Value, usize)>,
    bytes: usize,
}

impl LateAnswers {
    fn lock(&self) -> MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps `response` (a JSON-RPC response, credentials stripped already), the
    /// answer to the request that carried `key`; the oldest ones go past the caps.
    /// Whether it was kept.
    pub(crate) fn keep(&self, key: &str, response: Value) -> bool {
        let size = serde_json::to_vec(&response).map_or(usize::MAX, |v| v.len());
        if size > MAX_LATE_BYTES {
            return false;
        }
        let mut kept = self.lock();
        kept.answers.retain(|(k, ..)| k != key);
        kept.answers.push_back((key.to_owned(), response, size));
        kept.bytes = kept.answers.iter().map(|(.., size)| size).sum();
        while kept.answers.len() > MAX_LATE_ANSWERS || kept.bytes > MAX_LATE_BYTES {
            let Some((.., size)) = kept.answers.pop_front() else {
                break;
            };
            kept.bytes -= size;
        }
        true
    }

    /// Hands each answer kept from now on to `journaling` as it comes.
    pub(crate) fn journal_with(&self, journaling: Journaling) {
        *self.journaling.lock().unwrap_or_else(|p| p.into_inner()) = Some(journaling);
    }

    /// Said by the reader of `upstream` once it kept (`kept`), or could not keep,
    /// the answer under `key` (outside its own lock): logged, and handed to whoever
    /// journals late answers, on a thread of its own (a journal that is slow to
    /// answer holds up no reader); one journaled is no longer kept here.
    pub(crate) fn told(self: &Arc<Self>, upstream: &str, key: &str, kept: bool) {
        if !kept {
            tracing::warn!(target: "justonce::upstream", upstream = %upstream, effect = %key, "an answer came after its request was given up, too large to keep (over {MAX_LATE_BYTES} bytes): the call stays unknown");
            return;
        }
        tracing::info!(target: "justonce::upstream", upstream = %upstream, effect = %key, "an answer came after its request was given up: kept, the call's retry is answered with it");
        let journaling = self
            .journaling
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let Some(journaling) = journaling else {
            return;
        };
        let (late, named, effect) = (Arc::clone(self), upstream.to_owned(), key.to_owned());
        let spawned = std::thread::Builder::new()
            .name(format!("upstream-{upstream}-late"))
            .spawn(move || late.journal(&journaling, &named, &effect));
        if let Err(e) = spawned {
            tracing::warn!(target: "justonce::upstream", upstream = %upstream, effect = %key, "a late answer is not journaled (no thread: {e}); it is kept for the call's retry");
        }
    }

    /// Hands the answer kept under `key` to `journaling`; forgets it once journaled.
    fn journal(&self, journaling: &Journaling, upstream: &str, key: &str) {
        let answer = self
            .lock()
            .answers
            .iter()
            .find(|(k, ..)| k == key)
            .map(|(_, answer, _)| answer.clone());
        // Taken by the call's retry meanwhile: that run saves it.
        let Some(answer) = answer else { return };
        if journaling(key, &answer) {
            // The journal answers the retry now, on any host, after any restart.
            self.take(key);
            tracing::info!(target: "justonce::upstream", upstream = %upstream, effect = %key, "the late answer is journaled as the effect's answer");
        }
    }

    /// The answer kept for `key`, taken (the caller saves it or hands it on).
    pub(crate) fn take(&self, key: &str) -> Option<Value> {
        let mut kept = self.lock();
        let at = kept.answers.iter().position(|(k, ..)| k == key)?;
        let (_, response, size) = kept.answers.remove(at)?;
        kept.bytes -= size;
        Some(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_answer_is_taken_once_by_its_key_and_the_oldest_go_past_the_cap() {
        let late = LateAnswers::default();
        assert!(late.keep("k1", json!({ "id": 2, "result": { "n": 1 } })));
        assert_eq!(late.take("k2"), None, "another key's");
        assert_eq!(
            late.take("k1"),
            Some(json!({ "id": 2, "result": { "n": 1 } }))
        );
        assert_eq!(late.take("k1"), None, "taken once");
        for n in 0..=MAX_LATE_ANSWERS {
            late.keep(&format!("k{n}"), json!(n));
        }
        assert_eq!(late.take("k0"), None, "the oldest went");
        assert_eq!(late.take("k1"), Some(json!(1)));
        assert_eq!(
            late.take(&format!("k{MAX_LATE_ANSWERS}")),
            Some(json!(MAX_LATE_ANSWERS))
        );
    }
}
