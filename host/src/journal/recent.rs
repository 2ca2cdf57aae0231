//! Outcomes a journal read lately, so a retry is replayed without a query (both
//! backends keep one).
//!
//! A completed invocation never changes: its record is only ever deleted, by `gc`, an
//! operator's `forget`, or a call after it expired. So an outcome remembered here is
//! the journal's, as long as it is within its record's own window (checked on every
//! hit, on the clock the journal gives) and nothing was deleted since (the journal
//! clears this memory then). What is remembered is bounded in entries and in bytes;
//! older entries make way for newer ones.
//!
//! A read that began before a clear must not refill the memory with what the clear
//! removed: [`Recent::remember`] takes the [generation](Recent::generation) seen
//! before the read, and remembers nothing when a clear came in between.
//!
//! How a deletion elsewhere reaches this memory is the backend's: on SQLite every
//! operation is a row of the journal's `operations` table, so at most every
//! [`RECHECK_MS`] of the host's clock the journal looks at the newest row, and when it
//! changed, everything remembered is dropped (another process's `forget` reaches a
//! long-lived host within a second); on PostgreSQL each host listens for the
//! operations and deletions of every other (`postgres/listen.rs`).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::keys::{Fingerprint, InvocationKey};

/// At most this many outcomes are remembered.
const MAX_ENTRIES: usize = 4096;
/// At most this many bytes of outcomes are remembered.
const MAX_BYTES: usize = 16 << 20;
/// A larger outcome is not remembered (the journal serves it).
const MAX_OUTCOME_BYTES: usize = 64 << 10;
/// How long (on the host's clock) a replay from memory may go without looking for
/// operations other processes made on the journal.
pub(crate) const RECHECK_MS: i64 = 1_000;

#[derive(Debug)]
struct Entry {
    fingerprint: Fingerprint,
    /// When the record's window ends.
    expires_at: i64,
    outcome: Arc<str>,
}

#[derive(Debug, Default)]
struct State {
    entries: HashMap<InvocationKey, Entry>,
    /// Insertion order, for eviction.
    order: VecDeque<InvocationKey>,
    bytes: usize,
    /// The newest operation seen in the journal, and when it was looked for.
    operations: Option<(i64, i64)>,
    /// How many times everything was dropped.
    generation: u64,
}

/// What a remembered outcome says about a call.
#[derive(Debug, PartialEq)]
pub(crate) enum Recall {
    /// Completed with the same arguments: replay this.
    Replay(Arc<str>),
    /// Not remembered (or remembered with other arguments, or expired): ask the
    /// journal.
    Unknown,
}

/// Recently completed outcomes of one store.
#[derive(Debug, Default)]
pub(crate) struct Recent {
    state: Mutex<State>,
    /// Replays answered from memory and not yet added to the journal's counts.
    uncounted: Mutex<HashMap<InvocationKey, u32>>,
}

/// Replays from memory are added to the journal once this many keys have some.
const MAX_UNCOUNTED: usize = 256;

impl Recent {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What to hand [`Recent::remember`] for a read that starts now.
    pub(crate) fn generation(&self) -> u64 {
        self.lock().generation
    }

    /// Remembers the outcome of `key`, read complete by a read that began at
    /// `generation`, whose record's window ends at `expires_at`; nothing when the
    /// memory was cleared since that read began (the read may predate a deletion).
    pub(crate) fn remember(
        &self,
        key: &InvocationKey,
        fingerprint: &Fingerprint,
        expires_at: i64,
        outcome: &str,
        generation: u64,
    ) {
        if outcome.len() > MAX_OUTCOME_BYTES {
            return;
        }
        let mut state = self.lock();
        if state.generation != generation {
            return;
        }
        // A key that ran again (its old record expired) replaces what was remembered.
        if let Some(old) = state.entries.remove(key) {
            state.bytes -= old.outcome.len();
            state.order.retain(|k| k != key);
        }
        state.bytes += outcome.len();
        state.entries.insert(
            key.clone(),
            Entry {
                fingerprint: fingerprint.clone(),
                expires_at,
                outcome: Arc::from(outcome),
            },
        );
        state.order.push_back(key.clone());
        while state.entries.len() > MAX_ENTRIES || state.bytes > MAX_BYTES {
            let Some(oldest) = state.order.pop_front() else {
                break;
            };
            if let Some(gone) = state.entries.remove(&oldest) {
                state.bytes -= gone.outcome.len();
            }
        }
    }

    /// What is remembered of `key` for a call with `fingerprint` at `now`.
    pub(crate) fn recall(
        &self,
        key: &InvocationKey,
        fingerprint: &Fingerprint,
        now: i64,
    ) -> Recall {
        let state = self.lock();
        match state.entries.get(key) {
            Some(e) if e.fingerprint == *fingerprint && now < e.expires_at => {
                Recall::Replay(Arc::clone(&e.outcome))
            }
            _ => Recall::Unknown,
        }
    }

    /// Counts a replay of `key` answered from memory; `true` when the counts should
    /// be added to the journal now ([`Recent::take_uncounted`]) to bound them.
    pub(crate) fn count(&self, key: &InvocationKey) -> bool {
        let mut uncounted = self.uncounted.lock().unwrap_or_else(|p| p.into_inner());
        *uncounted.entry(key.clone()).or_default() += 1;
        uncounted.len() >= MAX_UNCOUNTED
    }

    /// [`Recent::count`] when the counts stay within their bound; `false`, and
    /// nothing counted, when they would have to be added to the journal now (a
    /// write, which a replay from memory alone does not make).
    pub(crate) fn count_unless_due(&self, key: &InvocationKey) -> bool {
        let mut uncounted = self.uncounted.lock().unwrap_or_else(|p| p.into_inner());
        let after = uncounted.len() + usize::from(!uncounted.contains_key(key));
        if after >= MAX_UNCOUNTED {
            return false;
        }
        *uncounted.entry(key.clone()).or_default() += 1;
        true
    }

    /// The replays from memory not yet added to the journal's counts, now taken.
    pub(crate) fn take_uncounted(&self) -> HashMap<InvocationKey, u32> {
        std::mem::take(&mut *self.uncounted.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Forgets everything (records were deleted), keeping what the journal saw of
    /// its operations.
    pub(crate) fn clear(&self) {
        let mut state = self.lock();
        let operations = state.operations;
        Self::drop_all(&mut state);
        state.operations = operations;
    }

    fn drop_all(state: &mut State) {
        let generation = state.generation + 1;
        *state = State {
            generation,
            ..State::default()
        };
    }

    /// Whether, at `now`, the journal's operations must be looked at before a replay
    /// from memory.
    pub(crate) fn operations_due(&self, now: i64) -> bool {
        self.lock()
            .operations
            .is_none_or(|(_, at)| now.saturating_sub(at) >= RECHECK_MS || now < at)
    }

    /// Takes note of the journal's newest operation at `now`; a different one than
    /// last seen (or the first look) drops everything remembered.
    pub(crate) fn saw_operations(&self, latest: i64, now: i64) {
        let mut state = self.lock();
        if state.operations.map(|(seen, _)| seen) != Some(latest) {
            Self::drop_all(&mut state);
        }
        state.operations = Some((latest, now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u32) -> InvocationKey {
        InvocationKey::from_stored(format!("{n:032x}"))
    }

    fn print(c: char) -> Fingerprint {
        Fingerprint::from_stored(c.to_string().repeat(64))
    }

    #[test]
    fn replays_only_the_same_arguments_within_the_records_window() {
        let recent = Recent::default();
        recent.remember(&key(1), &print('a'), 2_000, "out", 0);
        assert_eq!(
            recent.recall(&key(1), &print('a'), 1_999),
            Recall::Replay(Arc::from("out"))
        );
        assert_eq!(recent.recall(&key(1), &print('b'), 1_500), Recall::Unknown);
        assert_eq!(
            recent.recall(&key(1), &print('a'), 2_000),
            Recall::Unknown,
            "expired at the boundary"
        );
        assert_eq!(recent.recall(&key(2), &print('a'), 1_500), Recall::Unknown);
        recent.clear();
        assert_eq!(recent.recall(&key(1), &print('a'), 1_500), Recall::Unknown);
    }

    #[test]
    fn a_read_that_began_before_a_clear_remembers_nothing() {
        let recent = Recent::default();
        let before = recent.generation();
        recent.clear();
        recent.remember(&key(1), &print('a'), 2_000, "stale", before);
        assert_eq!(recent.recall(&key(1), &print('a'), 1), Recall::Unknown);
        // The opposite: a read that began after it.
        recent.remember(&key(1), &print('a'), 2_000, "out", recent.generation());
        assert_eq!(
            recent.recall(&key(1), &print('a'), 1),
            Recall::Replay(Arc::from("out"))
        );
    }

    #[test]
    fn a_new_operation_in_the_journal_drops_what_is_remembered() {
        let recent = Recent::default();
        assert!(recent.operations_due(0), "first look");
        recent.saw_operations(7, 0);
        recent.remember(&key(1), &print('a'), 1 << 40, "out", recent.generation());
        assert!(!recent.operations_due(RECHECK_MS - 1));
        assert!(recent.operations_due(RECHECK_MS), "a second later");
        recent.saw_operations(7, RECHECK_MS);
        let remembered = recent.recall(&key(1), &print('a'), RECHECK_MS);
        assert_eq!(remembered, Recall::Replay(Arc::from("out")), "nothing new");
        recent.saw_operations(8, 2 * RECHECK_MS);
        assert_eq!(
            recent.recall(&key(1), &print('a'), 2 * RECHECK_MS),
            Recall::Unknown,
            "an operation elsewhere"
        );
        assert!(!recent.operations_due(2 * RECHECK_MS + 1));
    }

    #[test]
    fn a_count_that_would_be_due_is_left_to_count() {
        let recent = Recent::default();
        for n in 0..(MAX_UNCOUNTED as u32 - 1) {
            assert!(recent.count_unless_due(&key(n)), "{n}");
        }
        assert!(
            recent.count_unless_due(&key(0)),
            "a key already counted adds no row"
        );
        assert!(
            !recent.count_unless_due(&key(u32::MAX)),
            "one more key would make the counts due"
        );
        let counts = recent.take_uncounted();
        assert_eq!(counts.len(), MAX_UNCOUNTED - 1);
        assert_eq!(counts[&key(0)], 2);
        assert!(!counts.contains_key(&key(u32::MAX)), "nothing counted");
        // The opposite: `count` counts it and says the counts are due.
        for n in 0..(MAX_UNCOUNTED as u32 - 1) {
            recent.count(&key(n));
        }
        assert!(recent.count(&key(u32::MAX)));
    }

    #[test]
    fn forgets_the_oldest_past_its_bounds_and_skips_large_outcomes() {
        let recent = Recent::default();
        for n in 0..(MAX_ENTRIES as u32 + 10) {
            recent.remember(&key(n), &print('a'), 10, "x", 0);
        }
        assert_eq!(recent.recall(&key(0), &print('a'), 1), Recall::Unknown);
        assert!(matches!(
            recent.recall(&key(MAX_ENTRIES as u32 + 9), &print('a'), 1),
            Recall::Replay(_)
        ));
        let big = "y".repeat(MAX_OUTCOME_BYTES + 1);
        recent.remember(&key(u32::MAX), &print('a'), 10, &big, 0);
        assert_eq!(
            recent.recall(&key(u32::MAX), &print('a'), 1),
            Recall::Unknown
        );
    }
}
