//! Invocation records: one per tool-call intent, with its lease and saved outcome.

use rusqlite::{Connection, OptionalExtension, Transaction, params};

use crate::determinism::{GuestEntropy, Seed};
use crate::journal::decision::{self, Decision, Found, expired, parse_state};
use crate::journal::{Begin, BeginOutcome, Lookup, NewInvocation, TakenOver};
use crate::keys::InvocationKey;

/// Leaves the run `owner` resumable (an effect's outcome is unknown) and releases its
/// lease; `false` when the run no longer holds it.
pub(super) fn suspend_in(
    conn: &Connection,
    key: &InvocationKey,
    owner: &str,
    now: i64,
) -> rusqlite::Result<bool> {
    let n = conn.execute(
        "UPDATE invocations SET state = 'incomplete', updated_at = ?3,
                lease_owner = NULL, lease_expires_at = NULL
          WHERE key = ?1 AND lease_owner = ?2 AND state = 'running'",
        params![key.as_str(), owner, now],
    )?;
    Ok(n == 1)
}

/// Ends the lease of the run `owner` at `now` under its handed-over owner (see
/// `Journal::hand_over`); `false` when the run no longer holds it.
pub(super) fn hand_over_in(
    conn: &Connection,
    key: &InvocationKey,
    owner: &str,
    now: i64,
) -> rusqlite::Result<bool> {
    let n = conn.execute(
        "UPDATE invocations SET lease_owner = ?3, lease_expires_at = ?4, updated_at = ?4
          WHERE key = ?1 AND lease_owner = ?2 AND state = 'running'",
        params![
            key.as_str(),
            owner,
            crate::journal::holder::handed_over(owner),
            now
        ],
    )?;
    Ok(n == 1)
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
                                      lease_owner, lease_expires_at, entropy, arguments,
                                      retention_ms, component)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 1, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)
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
            record.seed.to_hex(),
            record.arguments,
            record.retention_ms,
            record.component
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
    let sql = if crate::mutants::on(crate::mutants::Mutant::ExpiryFromStart) {
        "UPDATE invocations SET state = 'completed', outcome = ?3, completed_at = created_at,
                updated_at = ?4, lease_owner = NULL, lease_expires_at = NULL
          WHERE key = ?1 AND lease_owner = ?2 AND state = 'running'"
    } else {
        "UPDATE invocations SET state = 'completed', outcome = ?3, completed_at = ?4,
                updated_at = ?4, lease_owner = NULL, lease_expires_at = NULL
          WHERE key = ?1 AND lease_owner = ?2 AND state = 'running'"
    };
    let n = conn
        .prepare_cached(sql)?
        .execute(params![key.as_str(), owner, outcome, now])?;
    Ok(n == 1)
}

/// Counts one more retry answered with the saved outcome of `key`.
pub(super) fn count_replay_in(conn: &Connection, key: &InvocationKey) -> rusqlite::Result<()> {
    count_replays_in(conn, key, 1)
}

/// Counts `n` more retries answered with the saved outcome of `key`.
pub(super) fn count_replays_in(
    conn: &Connection,
    key: &InvocationKey,
    n: u32,
) -> rusqlite::Result<()> {
    conn.prepare_cached("UPDATE invocations SET replays = replays + ?2 WHERE key = ?1")?
        .execute(params![key.as_str(), n])?;
    Ok(())
}

pub(super) fn lookup_in(conn: &Connection, b: &Begin<'_>) -> rusqlite::Result<Lookup> {
    type Row = (String, String, Option<String>, Option<i64>, Option<i64>);
    let row: Option<Row> = conn
        .prepare_cached(
            "SELECT fingerprint, state, outcome, completed_at, retention_ms
               FROM invocations WHERE key = ?1",
        )?
        .query_row(params![b.key.as_str()], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .optional()?;
    let found = row
        .as_ref()
        .map(|(fingerprint, state, _, completed_at, retention)| Found {
            state: parse_state(state),
            fingerprint,
            completed_at: *completed_at,
            lease_expires_at: None,
            retention_ms: retention.unwrap_or(b.default_retention_ms),
        });
    let outcome = row
        .as_ref()
        .and_then(|(_, _, outcome, _, _)| outcome.clone());
    let look = decision::first_look(found.as_ref(), outcome, b, b.now);
    if let (Lookup::Replay { .. }, Some(call_id)) = (&look, b.tool_call_id) {
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
    Ok(look)
}

pub(super) fn begin_in(tx: &Transaction<'_>, b: &Begin<'_>) -> rusqlite::Result<BeginOutcome> {
    // A tool-call id bound to a live invocation of other arguments is a mismatch.
    if let Some(call_id) = b.tool_call_id {
        let bound: Option<(String, Option<i64>, Option<i64>)> = tx
            .query_row(
                "SELECT i.key, i.completed_at, i.retention_ms
                   FROM aliases a JOIN invocations i ON i.key = a.invocation_key
                  WHERE a.scope = ?1 AND a.tool_call_id = ?2",
                params![b.scope, call_id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()?;
        if let Some((bound_key, completed, retention)) = bound
            && bound_key != b.key.as_str()
            && !expired(
                completed,
                b.now,
                retention.unwrap_or(b.default_retention_ms),
            )
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
        Option<i64>,
        Option<i64>,
        Option<String>,
    );
    let existing: Option<Row> = tx
        .prepare_cached(
            "SELECT fingerprint, state, outcome, created_at, lease_expires_at, entropy,
                    completed_at, retention_ms, lease_owner
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
                r.get(6)?,
                r.get(7)?,
                r.get(8)?,
            ))
        })
        .optional()?;
    let fresh = || GuestEntropy {
        seed: b.seed.clone(),
        started_ms: b.now,
    };

    let found = existing.as_ref().map(
        |(fingerprint, state, _, _, lease_expires_at, _, completed_at, retention, _)| Found {
            state: parse_state(state),
            fingerprint,
            completed_at: *completed_at,
            lease_expires_at: *lease_expires_at,
            retention_ms: retention.unwrap_or(b.default_retention_ms),
        },
    );
    let took_over = found
        .as_ref()
        .filter(|f| decision::takes_over(f))
        .map(|f| TakenOver {
            owner: existing.as_ref().and_then(|row| row.8.clone()),
            lease_expired_at: f.lease_expires_at,
        });
    let outcome = match decision::decide(found.as_ref(), b.fingerprint, b.now) {
        Decision::Run => {
            insert(tx, b)?;
            BeginOutcome::Run {
                resumed: false,
                took_over: None,
                entropy: fresh(),
            }
        }
        Decision::Expired => {
            // Past retention the record is treated as absent, by design.
            tx.execute(
                "DELETE FROM invocations WHERE key = ?1",
                params![b.key.as_str()],
            )?;
            insert(tx, b)?;
            BeginOutcome::Run {
                resumed: false,
                took_over: None,
                entropy: fresh(),
            }
        }
        Decision::Mismatch => return Ok(BeginOutcome::Mismatch(b.key.clone())),
        Decision::Replay => {
            // Counted in the transaction that decides it, so the durable point of
            // the replay covers the count too.
            count_replay_in(tx, b.key)?;
            let saved = existing.and_then(|row| row.2);
            BeginOutcome::Replay(saved.unwrap_or_default())
        }
        Decision::Wait => BeginOutcome::Wait,
        Decision::Resume => {
            let (created, entropy) = existing.map(|row| (row.3, row.5)).unwrap_or((b.now, None));
            // The seed journaled at creation; a record written before seeds were
            // journaled gets one now, so its later resumes agree with this one.
            let seed = entropy.as_deref().and_then(Seed::from_hex);
            let seed = seed.unwrap_or_else(|| b.seed.clone());
            tx.execute(
                "UPDATE invocations SET state = 'running', runs = runs + 1, updated_at = ?2,
                        lease_owner = ?3, lease_expires_at = ?4, entropy = ?5,
                        component = coalesce(?6, component)
                  WHERE key = ?1",
                params![
                    b.key.as_str(),
                    b.now,
                    b.owner,
                    b.now.saturating_add(b.lease_ms),
                    seed.to_hex(),
                    b.component
                ],
            )?;
            BeginOutcome::Run {
                resumed: true,
                took_over,
                entropy: GuestEntropy {
                    seed,
                    started_ms: created,
                },
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
        arguments: b.arguments.to_owned(),
        explicit_key: b.explicit_key,
        created_at: b.now,
        retention_ms: b.retention_ms,
        seed: b.seed.clone(),
        component: b.component.map(str::to_owned),
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
