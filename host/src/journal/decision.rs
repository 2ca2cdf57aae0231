//! The one decision a journal makes for a call that finds a record of its key:
//! run, replay, wait, mismatch, resume or expired. Every backend calls [`decide`]
//! with the row it read (and locked, where it locks rows) and keeps only its SQL.
//!
//! What the backends still do differently, and why:
//! - **The clock.** `now` is the database's clock on PostgreSQL (read in the deciding
//!   statement, so hosts whose clocks differ agree); on SQLite, one machine, it is
//!   the host's injected clock.
//! - **A lost race.** PostgreSQL has no single writer: a host that finds no row, then
//!   loses the insert to another host and the row to a delete, answers `Wait` and the
//!   guard looks again. SQLite's `BEGIN IMMEDIATE` serializes writers, so it never
//!   loses one.
//! - **Replays a process remembers.** A SQLite host answers a plain retry of an
//!   outcome it saved or read lately from memory (`sqlite/recent.rs`), without a
//!   read. It counts those replays in memory and adds them to the journal's counts
//!   before it reads them, with its next counted replay, and when it closes the
//!   journal, so both journals count every replay (another process reading the
//!   journal meanwhile sees a count behind by those). A `forget` in another process
//!   reaches that memory within `recent::RECHECK_MS`. A PostgreSQL host keeps the
//!   same memory, kept true by notifications from the other hosts instead
//!   (`postgres/listen.rs`), and adds its replays to the counts every heartbeat.
//! - **gc of mail.** The test mailer's mailbox lives in a SQLite file only, so only a
//!   SQLite gc reports mailbox rows.

use super::{Begin, InvocationState, Lookup};
use crate::keys::Fingerprint;

/// The record a call found under its key, as the decision needs it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Found<'a> {
    /// Where the invocation is in its life.
    pub state: InvocationState,
    /// The fingerprint of the arguments it was made with.
    pub fingerprint: &'a str,
    /// When it completed (ms), if it did.
    pub completed_at: Option<i64>,
    /// When the lease of the run holding it expires (ms), if one does.
    pub lease_expires_at: Option<i64>,
    /// How long it is kept once completed (ms): the record's own window, or the
    /// host's retention for a record journaled before records carried one.
    pub retention_ms: i64,
}

/// What a call that found (or did not find) a record does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// No record: run, journaling it under this call's lease and a fresh generation.
    Run,
    /// Completed with the same arguments within retention: replay the saved outcome,
    /// counted.
    Replay,
    /// Another run holds a live lease: wait for it.
    Wait,
    /// The key holds other arguments: nothing runs, nothing is written.
    Mismatch,
    /// Running with an expired lease, or suspended: take the lease and resume under
    /// the record's generation (its effects keep their keys).
    Resume,
    /// Completed and past retention: treated as absent, by design. The record is
    /// replaced by a new one with a fresh generation, so its effects get new keys.
    Expired,
}

/// The state a journal stores as text.
pub(crate) fn parse_state(s: &str) -> InvocationState {
    match s {
        "running" => InvocationState::Running,
        "completed" => InvocationState::Completed,
        _ => InvocationState::Incomplete,
    }
}

/// Whether a record that completed at `completed_at` is past retention at `now`.
/// Only a completed record expires: a call that is running, suspended with an
/// unknown outcome or waiting for a person never does.
pub(crate) fn expired(completed_at: Option<i64>, now: i64, retention_ms: i64) -> bool {
    completed_at.is_some_and(|at| now >= at.saturating_add(retention_ms))
}

/// The decision for a call with `fingerprint` at `now` that found `found`.
pub(crate) fn decide(found: Option<&Found<'_>>, fingerprint: &Fingerprint, now: i64) -> Decision {
    let Some(found) = found else {
        return Decision::Run;
    };
    let completed = found.state == InvocationState::Completed;
    if completed && expired(found.completed_at, now, found.retention_ms) {
        // Before the arguments are compared: an expired record binds nothing.
        Decision::Expired
    } else if found.fingerprint != fingerprint.as_str() {
        Decision::Mismatch
    } else if completed {
        Decision::Replay
    } else if found.state == InvocationState::Running
        && found.lease_expires_at.is_some_and(|until| until > now)
    {
        Decision::Wait
    } else {
        Decision::Resume
    }
}

/// Whether resuming `found` takes over a run that held the lease until it expired (a
/// host that died or stalled), not a call that was left suspended.
pub(crate) fn takes_over(found: &Found<'_>) -> bool {
    found.state == InvocationState::Running
}

/// What a call's first look (read-only) makes of the record it read at `now`: a
/// saved outcome to replay, no record at all (and no tool-call id to bind), or
/// something for the deciding transaction. A backend still checks that a replay's
/// tool-call id, if any, is bound to the key.
pub(crate) fn first_look(
    found: Option<&Found<'_>>,
    outcome: Option<String>,
    b: &Begin<'_>,
    now: i64,
) -> Lookup {
    match (decide(found, b.fingerprint, now), outcome) {
        (Decision::Run, _) if b.tool_call_id.is_none() => Lookup::Absent,
        (Decision::Replay, Some(outcome)) => Lookup::Replay {
            outcome,
            expires_at: found
                .and_then(|f| f.completed_at.map(|at| at.saturating_add(f.retention_ms)))
                .unwrap_or(b.now),
        },
        _ => Lookup::Decide,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_found_record_gets_its_one_decision() {
        let fp = Fingerprint::from_stored("a".repeat(64));
        let other = "b".repeat(64);
        let row = |state, fingerprint, completed_at, lease_expires_at| Found {
            state,
            fingerprint,
            completed_at,
            lease_expires_at,
            retention_ms: 100,
        };
        let same = fp.as_str();
        use InvocationState::{Completed, Incomplete, Running};
        let cases = [
            (row(Completed, same, Some(0), None), 99, Decision::Replay),
            // Retention boundary: at `completed_at + retention` it is gone.
            (row(Completed, same, Some(0), None), 100, Decision::Expired),
            (
                row(Completed, &other, Some(0), None),
                99,
                Decision::Mismatch,
            ),
            (
                row(Completed, &other, Some(0), None),
                100,
                Decision::Expired,
            ),
            (row(Running, same, None, Some(10)), 9, Decision::Wait),
            // Lease boundary: at its expiry another run may take over.
            (row(Running, same, None, Some(10)), 10, Decision::Resume),
            (row(Running, &other, None, Some(10)), 9, Decision::Mismatch),
            // Open calls never expire.
            (
                row(Incomplete, same, None, None),
                i64::MAX,
                Decision::Resume,
            ),
            (row(Running, same, None, None), 5, Decision::Resume),
        ];
        for (found, now, expected) in cases {
            assert_eq!(
                decide(Some(&found), &fp, now),
                expected,
                "{found:?} at {now}"
            );
        }
        assert_eq!(decide(None, &fp, 0), Decision::Run);
    }
}
