//! Invocation records: one per tool-call intent, with its lease and saved outcome.

use rusqlite::{Connection, OptionalExtension, Transaction, params};

use super::Store;
use crate::determinism::{GuestEntropy, Seed};
use crate::error::Result;
use crate::keys::{Fingerprint, InvocationKey};

/// Where an invocation is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InvocationState {
    /// A host holds the lease and is running the guest.
    Running,
    /// The guest stopped on an effect whose outcome is unknown (or a divergence);
    /// a retry resumes it.
    Incomplete,
    /// The outcome is saved and is replayed to every retry.
    Completed,
}

/// A request to start (or join) an invocation.
#[derive(Debug, Clone)]
pub struct Begin<'a> {
    /// The invocation key.
    pub key: &'a InvocationKey,
    /// The conversation scope.
    pub scope: &'a str,
    /// The tool's name.
    pub tool: &'a str,
    /// The fingerprint of the tool and its canonical arguments.
    pub fingerprint: &'a Fingerprint,
    /// Whether the caller chose the key.
    pub explicit_key: bool,
    /// The provider's tool-call id, if the caller has one.
    pub tool_call_id: Option<&'a str>,
    /// The current time (ms).
    pub now: i64,
    /// Records created at or before `now - retention` are treated as absent.
    pub retention_ms: i64,
    /// How long a lease taken now lasts (ms).
    pub lease_ms: i64,
    /// Who takes the lease.
    pub owner: &'a str,
    /// A fresh seed, journaled if this call creates the invocation (a resumed one
    /// keeps the seed it was created with).
    pub seed: &'a Seed,
}

/// What the caller of [`Store::begin`] must do next.
#[derive(Debug, Clone, PartialEq)]
pub enum BeginOutcome {
    /// Run the guest: this caller holds the lease.
    Run {
        /// Whether an earlier, unfinished run exists (its journaled effects replay).
        resumed: bool,
        /// The journaled clock start and random seed the guest sees.
        entropy: GuestEntropy,
    },
    /// Return this saved outcome (stored text), marked replayed.
    Replay(String),
    /// Another run holds a live lease: wait for it.
    Wait,
    /// The key or tool-call id is bound to different arguments.
    Mismatch(InvocationKey),
}

fn expired(created_at: i64, now: i64, retention_ms: i64) -> bool {
    now >= created_at.saturating_add(retention_ms)
}

impl Store {
    /// Decides, in one immediate transaction, whether this call runs, replays, waits
    /// or is a mismatch, and takes the lease when it runs. A mismatch writes nothing.
    ///
    /// A replayed outcome is durable (see [`Store::make_durable`]) before it is
    /// returned, like the one its first caller got.
    pub fn begin(&self, b: &Begin<'_>) -> Result<BeginOutcome> {
        match self.lookup(b)? {
            Lookup::Replay { outcome, .. } => {
                self.make_durable()?;
                Ok(BeginOutcome::Replay(outcome))
            }
            Lookup::Absent | Lookup::Decide => self.decide(b),
        }
    }

    /// The read-only first look of a call, without the write lock: a saved outcome to
    /// replay, no record at all, or something [`Store::decide`] must settle.
    pub(crate) fn lookup(&self, b: &Begin<'_>) -> Result<Lookup> {
        // A write of this key still queued behind an earlier call lands first.
        self.flush_key(b.key);
        self.with_reader(|conn| lookup_in(conn, b))
    }

    /// The write half of [`Store::begin`]: one immediate transaction that runs,
    /// replays, waits or refuses, taking the lease when it runs.
    pub(crate) fn decide(&self, b: &Begin<'_>) -> Result<BeginOutcome> {
        let outcome = self
            .transaction(|tx| Ok(Ok::<_, ()>(begin_in(tx, b)?)))
            .map(|r| r.unwrap_or(BeginOutcome::Wait))?;
        if matches!(outcome, BeginOutcome::Replay(_)) {
            self.make_durable()?;
        }
        Ok(outcome)
    }

    /// Saves the outcome of a run that holds the lease, and releases the lease.
    /// Returns `false` when the lease was lost to another host (nothing written).
    /// With `durable`, the outcome is on disk (see [`Store::make_durable`]) before this
    /// returns: the answer a caller gets is then one a retry can get again even after
    /// a power cut.
    pub fn complete(
        &self,
        key: &InvocationKey,
        owner: &str,
        outcome: &str,
        now: i64,
        durable: bool,
    ) -> Result<bool> {
        let saved = self.with(|conn| complete_in(conn, key, owner, outcome, now))?;
        if saved && durable {
            self.make_durable()?;
        }
        Ok(saved)
    }

    /// Leaves a run resumable (an effect's outcome is unknown) and releases the lease.
    pub fn suspend(&self, key: &InvocationKey, owner: &str, now: i64) -> Result<bool> {
        // Keyed answers queued behind this run have no outcome to ride with.
        self.nudge_behind();
        self.with(|conn| {
            let n = conn.execute(
                "UPDATE invocations SET state = 'incomplete', updated_at = ?3,
                        lease_owner = NULL, lease_expires_at = NULL
                  WHERE key = ?1 AND lease_owner = ?2 AND state = 'running'",
                params![key.as_str(), owner, now],
            )?;
            Ok(n == 1)
        })
    }
}

pub(crate) fn parse_state(s: &str) -> InvocationState {
    match s {
        "running" => InvocationState::Running,
        "completed" => InvocationState::Completed,
        _ => InvocationState::Incomplete,
    }
}

/// What [`Store::lookup`] found.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Lookup {
    /// The saved outcome of a completed, live invocation with the same arguments
    /// (and a tool-call id, if any, already bound to it), and when it was created.
    Replay { outcome: String, created_at: i64 },
    /// No record of the key at all, and no tool-call id to bind.
    Absent,
    /// Anything else (running, resumable, expired, a mismatch, an alias to bind):
    /// for [`Store::decide`].
    Decide,
}

/// An invocation that a run has not journaled yet. A call that finds no record runs
/// its guest first and writes the record with its first effect (with the lease, in
/// that effect's transaction) or, if it performs none, complete with its outcome:
/// one commit instead of two for a call without effects.
#[derive(Debug, Clone)]
pub(crate) struct NewInvocation {
    pub key: InvocationKey,
    pub scope: String,
    pub tool: String,
    pub fingerprint: Fingerprint,
    pub explicit_key: bool,
    /// The invocation's creation time: the start of the guest's wall clock.
    pub created_at: i64,
    /// The seed of the guest's random values.
    pub seed: Seed,
}

/// Journals `record` as running under `owner`'s lease until `lease_until`, unless a
/// record of the key exists already (another run started meanwhile): `false` then,
/// and nothing is written.
pub(crate) fn create_running_in(
    conn: &Connection,
    record: &NewInvocation,
    owner: &str,
    lease_until: i64,
) -> rusqlite::Result<bool> {
    insert_in(conn, record, Some((owner, lease_until)), None)
}

/// Journals `record` complete with `outcome`, unless a record of the key exists
/// already: `false` then, and nothing is written.
pub(crate) fn insert_completed_in(
    conn: &Connection,
    record: &NewInvocation,
    outcome: &str,
    now: i64,
) -> rusqlite::Result<bool> {
    insert_in(conn, record, None, Some((outcome, now)))
}

/// Inserts a new invocation record, running under a lease or complete with an
/// outcome, unless the key has one already (`false`, nothing written).
fn insert_in(
    conn: &Connection,
    record: &NewInvocation,
    lease: Option<(&str, i64)>,
    completed: Option<(&str, i64)>,
) -> rusqlite::Result<bool> {
    let state = if completed.is_some() {
        "completed"
    } else {
        "running"
    };
    let n = conn
        .prepare_cached(
            "INSERT INTO invocations (key, scope, tool, fingerprint, explicit_key, state, runs,
                                      outcome, created_at, updated_at, completed_at,
                                      lease_owner, lease_expires_at, entropy)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 1, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
             ON CONFLICT (key) DO NOTHING",
        )?
        .execute(params![
            record.key.as_str(),
            record.scope,
            record.tool,
            record.fingerprint.as_str(),
            record.explicit_key,
            state,
            completed.map(|(outcome, _)| outcome),
            record.created_at,
            completed.map_or(record.created_at, |(_, at)| at),
            completed.map(|(_, at)| at),
            lease.map(|(owner, _)| owner),
            lease.map(|(_, until)| until),
            record.seed.to_hex()
        ])?;
    Ok(n == 1)
}

/// Saves the outcome of the run `owner` and releases its lease; `false` (nothing
/// written) when that run no longer holds it.
pub(crate) fn complete_in(
    conn: &Connection,
    key: &InvocationKey,
    owner: &str,
    outcome: &str,
    now: i64,
) -> rusqlite::Result<bool> {
    let n = conn
        .prepare_cached(
            "UPDATE invocations SET state = 'completed', outcome = ?3, completed_at = ?4,
                    updated_at = ?4, lease_owner = NULL, lease_expires_at = NULL
              WHERE key = ?1 AND lease_owner = ?2 AND state = 'running'",
        )?
        .execute(params![key.as_str(), owner, outcome, now])?;
    Ok(n == 1)
}

fn lookup_in(conn: &Connection, b: &Begin<'_>) -> rusqlite::Result<Lookup> {
    let row: Option<(String, String, Option<String>, i64)> = conn
        .prepare_cached(
            "SELECT fingerprint, state, outcome, created_at FROM invocations WHERE key = ?1",
        )?
        .query_row(params![b.key.as_str()], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .optional()?;
    let Some((fingerprint, state, outcome, created)) = row else {
        return Ok(if b.tool_call_id.is_none() {
            Lookup::Absent
        } else {
            Lookup::Decide
        });
    };
    let Some(outcome) = outcome.filter(|_| parse_state(&state) == InvocationState::Completed)
    else {
        return Ok(Lookup::Decide);
    };
    if fingerprint != b.fingerprint.as_str() || expired(created, b.now, b.retention_ms) {
        return Ok(Lookup::Decide);
    }
    if let Some(call_id) = b.tool_call_id {
        let bound: Option<String> = conn
            .prepare_cached(
                "SELECT invocation_key FROM aliases WHERE scope = ?1 AND tool_call_id = ?2",
            )?
            .query_row(params![b.scope, call_id], |r| r.get(0))
            .optional()?;
        if bound.as_deref() != Some(b.key.as_str()) {
            return Ok(Lookup::Decide);
        }
    }
    Ok(Lookup::Replay {
        outcome,
        created_at: created,
    })
}

fn begin_in(tx: &Transaction<'_>, b: &Begin<'_>) -> rusqlite::Result<BeginOutcome> {
    // A tool-call id bound to a live invocation of other arguments is a mismatch.
    if let Some(call_id) = b.tool_call_id {
        let bound: Option<(String, i64)> = tx
            .query_row(
                "SELECT i.key, i.created_at FROM aliases a JOIN invocations i ON i.key = a.invocation_key
                  WHERE a.scope = ?1 AND a.tool_call_id = ?2",
                params![b.scope, call_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        if let Some((bound_key, created)) = bound
            && bound_key != b.key.as_str()
            && !expired(created, b.now, b.retention_ms)
        {
            return Ok(BeginOutcome::Mismatch(InvocationKey::from_stored(
                bound_key,
            )));
        }
    }

    type Row = (
        String,
        String,
        Option<String>,
        i64,
        Option<i64>,
        Option<String>,
    );
    let existing: Option<Row> = tx
        .prepare_cached(
            "SELECT fingerprint, state, outcome, created_at, lease_expires_at, entropy
               FROM invocations WHERE key = ?1",
        )?
        .query_row(params![b.key.as_str()], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
            ))
        })
        .optional()?;
    let fresh = || GuestEntropy {
        seed: b.seed.clone(),
        started_ms: b.now,
    };

    let outcome = match existing {
        Some((fingerprint, state, outcome, created, lease_expires, entropy)) => {
            let state = parse_state(&state);
            let lease_live =
                state == InvocationState::Running && lease_expires.is_some_and(|t| t > b.now);
            if expired(created, b.now, b.retention_ms) && !lease_live {
                // Past retention the record is treated as absent, by design.
                tx.execute(
                    "DELETE FROM invocations WHERE key = ?1",
                    params![b.key.as_str()],
                )?;
                insert(tx, b)?;
                BeginOutcome::Run {
                    resumed: false,
                    entropy: fresh(),
                }
            } else if fingerprint != b.fingerprint.as_str() {
                return Ok(BeginOutcome::Mismatch(b.key.clone()));
            } else if state == InvocationState::Completed {
                BeginOutcome::Replay(outcome.unwrap_or_default())
            } else if lease_live {
                BeginOutcome::Wait
            } else {
                // The seed journaled at creation; a record written before seeds were
                // journaled gets one now, so its later resumes agree with this one.
                let seed = entropy.as_deref().and_then(Seed::from_hex);
                let seed = seed.unwrap_or_else(|| b.seed.clone());
                tx.execute(
                    "UPDATE invocations SET state = 'running', runs = runs + 1, updated_at = ?2,
                            lease_owner = ?3, lease_expires_at = ?4, entropy = ?5
                      WHERE key = ?1",
                    params![
                        b.key.as_str(),
                        b.now,
                        b.owner,
                        b.now.saturating_add(b.lease_ms),
                        seed.to_hex()
                    ],
                )?;
                BeginOutcome::Run {
                    resumed: true,
                    entropy: GuestEntropy {
                        seed,
                        started_ms: created,
                    },
                }
            }
        }
        None => {
            insert(tx, b)?;
            BeginOutcome::Run {
                resumed: false,
                entropy: fresh(),
            }
        }
    };

    if let Some(call_id) = b.tool_call_id {
        tx.execute(
            "INSERT INTO aliases (scope, tool_call_id, invocation_key, created_at)
             VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (scope, tool_call_id) DO UPDATE
               SET invocation_key = excluded.invocation_key, created_at = excluded.created_at
               WHERE aliases.invocation_key <> excluded.invocation_key",
            params![b.scope, call_id, b.key.as_str(), b.now],
        )?;
    }
    Ok(outcome)
}

fn insert(tx: &Transaction<'_>, b: &Begin<'_>) -> rusqlite::Result<()> {
    let record = NewInvocation {
        key: b.key.clone(),
        scope: b.scope.to_owned(),
        tool: b.tool.to_owned(),
        fingerprint: b.fingerprint.clone(),
        explicit_key: b.explicit_key,
        created_at: b.now,
        seed: b.seed.clone(),
    };
    // The caller deleted any record of the key in this transaction.
    insert_in(
        tx,
        &record,
        Some((b.owner, b.now.saturating_add(b.lease_ms))),
        None,
    )?;
    Ok(())
}
