//! The journal's steps in SQL for PostgreSQL: the SQLite journal's logic (see
//! `sqlite/invocations.rs`, `effects.rs`, `journal.rs`, `resolution.rs`), with row
//! locks where SQLite relies on its one writer.

use postgres::{GenericClient, Transaction};

use super::prepared::Db;

use crate::determinism::{GuestEntropy, Seed};
use crate::fault::{self, FaultPoint};
use crate::journal::decision::{self, Decision, Found, expired, parse_state};
use crate::journal::read::{
    EFFECT_COLUMNS, ENTRY_COLUMNS, expires_at, generation_of, parse_json, shown_state, summary,
};
use crate::journal::{
    Answer, Begin, BeginOutcome, DeferredAnswer, EffectRecord, EffectState, GcReport,
    JournalEffect, JournalEntry, Lease, Lookup, NewEffect, NewInvocation, Refusal, Resolution,
    Scopes, TakenOver, TransactionalRequest, UnresolvedEffect, transactional_answer,
};
use crate::keys::{EffectKey, Fingerprint, InvocationKey};
use crate::provider::{EffectRequest, Provider, ProviderClass};

type PgResult<T> = Result<T, postgres::Error>;

fn seq_of(seq: u32) -> i32 {
    i32::try_from(seq).unwrap_or(i32::MAX)
}

/// Inserts a new invocation record, running under a lease (its owner, and how long
/// it lasts from now on the database's clock) or complete with an outcome (and the
/// host's time, a label), unless the key has one already (`false`, nothing written).
pub(super) fn insert_in(
    client: &mut Db<'_, impl GenericClient>,
    record: &NewInvocation,
    lease: Option<(&str, i64)>,
    completed: Option<(&str, i64)>,
) -> PgResult<bool> {
    let state = if completed.is_some() {
        "completed"
    } else {
        "running"
    };
    let n = client.execute(
        concat!(
            "INSERT INTO invocations (key, scope, tool, fingerprint, explicit_key, state, runs,
                                      outcome, created_at, updated_at, completed_at,
                                      lease_owner, lease_expires_at, entropy, arguments,
                                      retention_ms, component)
             VALUES ($1, $2, $3, $4, $5, $6, 1, $7, $8, $9,
                     CASE WHEN $10 THEN ",
            db_now!(),
            " END, $11, ",
            db_now!(),
            " + $12, $13, $14, $15, $16)
             ON CONFLICT (key) DO NOTHING"
        ),
        &[
            &record.key.as_str(),
            &record.scope,
            &record.tool,
            &record.fingerprint.as_str(),
            &record.explicit_key,
            &state,
            &completed.map(|(outcome, _)| outcome),
            &record.created_at,
            &completed.map_or(record.created_at, |(_, at)| at),
            &completed.is_some(),
            &lease.map(|(owner, _)| owner),
            &lease.map(|(_, ms)| ms),
            &record.seed.to_hex(),
            &record.arguments,
            &record.retention_ms,
            &record.component,
        ],
    )?;
    Ok(n == 1)
}

/// Saves the outcome of the run `owner` and releases its lease; `false` (nothing
/// written) when that run no longer holds it.
pub(super) fn complete_in(
    client: &mut Db<'_, impl GenericClient>,
    key: &InvocationKey,
    owner: &str,
    outcome: &str,
    now: i64,
) -> PgResult<bool> {
    let n = client.execute(
        concat!(
            "UPDATE invocations SET state = 'completed', outcome = $3, completed_at = ",
            db_now!(),
            ", updated_at = $4, lease_owner = NULL, lease_expires_at = NULL
              WHERE key = $1 AND lease_owner = $2 AND state = 'running'"
        ),
        &[&key.as_str(), &owner, &outcome, &now],
    )?;
    Ok(n == 1)
}

/// [`complete_in`] and the run's deferred effect answers in one statement (one round
/// trip, one commit): the answers are saved only when the outcome is, that is while
/// the run still holds the lease (each only while its effect is pending: the first
/// answer stays). The main
/// query reads `completed`, so the invocation's row is locked before the effects'
/// rows, in the order every other write of a run takes them.
pub(super) fn complete_with_in(
    client: &mut Db<'_, impl GenericClient>,
    key: &InvocationKey,
    owner: &str,
    outcome: &str,
    now: i64,
    deferred: &[DeferredAnswer],
) -> PgResult<bool> {
    if deferred.is_empty() {
        return complete_in(client, key, owner, outcome, now);
    }
    let keys: Vec<&str> = deferred.iter().map(|d| d.key.as_str()).collect();
    let stored: Vec<String> = deferred.iter().map(|d| d.answer.to_stored()).collect();
    let at: Vec<i64> = deferred.iter().map(|d| d.at).collect();
    static UNFENCED: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| COMPLETE_WITH.replace(DEFERRED_FENCE, ""));
    let sql = if crate::mutants::on(crate::mutants::Mutant::UnfencedDeferred) {
        UNFENCED.as_str()
    } else {
        COMPLETE_WITH
    };
    let row = client.query_one(
        sql,
        &[&key.as_str(), &owner, &outcome, &now, &keys, &stored, &at],
    )?;
    Ok(row.get::<_, i64>(0) == 1)
}

/// [`complete_with_in`]'s statement. The answers are looked for among the effects of
/// the run's invocation (`invocation_key = $1`, its index; a run defers only its own
/// effects' answers): a join with the `unnest` alone is planned, once per
/// connection, against the table as it was then, and on a young journal that plan
/// reads every effect on every call.
pub(super) const COMPLETE_WITH: &str = concat!(
    "WITH completed AS (
        UPDATE invocations SET state = 'completed', outcome = $3, completed_at = ",
    db_now!(),
    ", updated_at = $4, lease_owner = NULL, lease_expires_at = NULL
         WHERE key = $1 AND lease_owner = $2 AND state = 'running'
     RETURNING 1
     ), answered AS (
        UPDATE effects SET state = 'done', response = d.response, updated_at = d.at
          FROM unnest($5::TEXT[], $6::TEXT[], $7::BIGINT[]) AS d (key, response, at)
         WHERE effects.invocation_key = $1 AND effects.key = d.key
           AND effects.state = 'pending'
           AND EXISTS (SELECT 1 FROM completed)
     )
     SELECT count(*) FROM completed"
);

/// The part of [`COMPLETE_WITH`] that saves the deferred answers only when the run
/// still held the lease (its outcome was saved): a fenced run's answers would
/// contradict what the run that took over handed its tool.
const DEFERRED_FENCE: &str = "AND EXISTS (SELECT 1 FROM completed)";

/// Saves a run's deferred answers of keyed effects, each only while its effect is
/// pending (the first answer stays), and only while the run `owner` holds the lease
/// of `invocation` (the row locked first, in the order every write of a run takes
/// them): a run that lost it saves nothing, since the run that took over may have
/// handed its tool another answer to the same key. `false`: nothing saved.
pub(super) fn finish_deferred(
    client: &mut Db<'_, impl GenericClient>,
    invocation: &InvocationKey,
    owner: &str,
    deferred: &[DeferredAnswer],
) -> PgResult<bool> {
    if deferred.is_empty() {
        return Ok(false);
    }
    let held = client
        .query_opt(
            "SELECT 1 FROM invocations
              WHERE key = $1 AND lease_owner = $2 AND state = 'running' FOR UPDATE",
            &[&invocation.as_str(), &owner],
        )?
        .is_some();
    if !held && !crate::mutants::on(crate::mutants::Mutant::UnfencedDeferred) {
        return Ok(false);
    }
    for answer in deferred {
        finish(client, &answer.key, &answer.answer.to_stored(), answer.at)?;
    }
    Ok(true)
}

/// Leaves the run `owner` resumable and releases its lease; `false` when the run no
/// longer holds it.
pub(super) fn suspend_in(
    client: &mut Db<'_, impl GenericClient>,
    key: &InvocationKey,
    owner: &str,
    now: i64,
) -> PgResult<bool> {
    let n = client.execute(
        "UPDATE invocations SET state = 'incomplete', updated_at = $3,
                lease_owner = NULL, lease_expires_at = NULL
          WHERE key = $1 AND lease_owner = $2 AND state = 'running'",
        &[&key.as_str(), &owner, &now],
    )?;
    Ok(n == 1)
}

/// Ends the lease of the run `owner` now, on the database's clock, under its
/// handed-over owner (see `Journal::hand_over`); `false` when the run no longer holds
/// it.
pub(super) fn hand_over_in(
    client: &mut Db<'_, impl GenericClient>,
    key: &InvocationKey,
    owner: &str,
    now: i64,
) -> PgResult<bool> {
    let n = client.execute(
        concat!(
            "UPDATE invocations SET lease_owner = $3, updated_at = $4, lease_expires_at = ",
            db_now!(),
            " WHERE key = $1 AND lease_owner = $2 AND state = 'running'"
        ),
        &[
            &key.as_str(),
            &owner,
            &crate::journal::holder::handed_over(owner),
            &now,
        ],
    )?;
    Ok(n == 1)
}

/// The first look of a call, with the database's clock it was judged at.
pub(super) fn lookup_in(
    client: &mut Db<'_, impl GenericClient>,
    b: &Begin<'_>,
) -> PgResult<(Lookup, i64)> {
    let row = client.query_opt(
        concat!(
            "SELECT fingerprint, state, outcome, completed_at, ",
            db_now!(),
            ", retention_ms FROM invocations WHERE key = $1"
        ),
        &[&b.key.as_str()],
    )?;
    type Row = (
        String,
        String,
        Option<String>,
        Option<i64>,
        i64,
        Option<i64>,
    );
    let (fingerprint, state, outcome, completed_at, now, retention): Row = match &row {
        Some(r) => (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4), r.get(5)),
        None => Default::default(),
    };
    let found = row.is_some().then(|| Found {
        state: parse_state(&state),
        fingerprint: &fingerprint,
        completed_at,
        lease_expires_at: None,
        retention_ms: retention.unwrap_or(b.default_retention_ms),
    });
    let look = decision::first_look(found.as_ref(), outcome, b, now);
    if let (Lookup::Replay { .. }, Some(call_id)) = (&look, b.tool_call_id) {
        let bound: Option<String> = client
            .query_opt(
                "SELECT invocation_key FROM aliases WHERE scope = $1 AND tool_call_id = $2",
                &[&b.scope, &call_id],
            )?
            .map(|r| r.get(0));
        if bound.as_deref() != Some(b.key.as_str()) {
            return Ok((Lookup::Decide, now));
        }
    }
    Ok((look, now))
}

/// A number for a tool-call id's advisory lock: hosts binding the same id serialize.
fn alias_lock(scope: &str, call_id: &str) -> i64 {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("{scope}\u{0}{call_id}").as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(bytes)
}

pub(super) fn begin_in(tx: &mut Db<'_, Transaction<'_>>, b: &Begin<'_>) -> PgResult<BeginOutcome> {
    if let Some(call_id) = b.tool_call_id {
        // Two hosts binding one id to different keys would otherwise both see it
        // unbound.
        tx.execute(
            "SELECT pg_advisory_xact_lock($1)",
            &[&alias_lock(b.scope, call_id)],
        )?;
        let bound = tx.query_opt(
            concat!(
                "SELECT i.key, i.completed_at, ",
                db_now!(),
                ", i.retention_ms FROM aliases a JOIN invocations i ON i.key = a.invocation_key
                  WHERE a.scope = $1 AND a.tool_call_id = $2"
            ),
            &[&b.scope, &call_id],
        )?;
        if let Some(row) = bound {
            let (bound_key, completed, now, retention): (String, Option<i64>, i64, Option<i64>) =
                (row.get(0), row.get(1), row.get(2), row.get(3));
            let retention_ms = retention.unwrap_or(b.default_retention_ms);
            if bound_key != b.key.as_str() && !expired(completed, now, retention_ms) {
                return Ok(BeginOutcome::Mismatch(InvocationKey::from_stored(
                    bound_key,
                )));
            }
        }
    }

    let fresh = || GuestEntropy {
        seed: b.seed.clone(),
        started_ms: b.now,
    };
    // The row lock serializes hosts deciding the same key. A host that finds no row
    // inserts one; if another inserted it meanwhile (ON CONFLICT), the second look
    // finds and locks it. The database's clock is read in the same statement: if it
    // is read before the lock is granted, it is earlier than the decision, which only
    // makes a lease look live longer and a record expire later.
    let mut outcome = None;
    for _ in 0..2 {
        let existing = tx.query_opt(
            concat!(
                "SELECT fingerprint, state, outcome, created_at, lease_expires_at, entropy,
                        completed_at, ",
                db_now!(),
                ", retention_ms, lease_owner FROM invocations WHERE key = $1 FOR UPDATE"
            ),
            &[&b.key.as_str()],
        )?;
        let Some(row) = existing else {
            if insert(tx, b)? {
                outcome = Some(BeginOutcome::Run {
                    resumed: false,
                    took_over: None,
                    entropy: fresh(),
                });
                break;
            }
            continue;
        };
        let fingerprint: String = row.get(0);
        let state: String = row.get(1);
        let retention: Option<i64> = row.get(8);
        let found = Found {
            state: parse_state(&state),
            fingerprint: &fingerprint,
            completed_at: row.get(6),
            lease_expires_at: row.get(4),
            retention_ms: retention.unwrap_or(b.default_retention_ms),
        };
        let now: i64 = row.get(7);
        outcome = Some(match decision::decide(Some(&found), b.fingerprint, now) {
            // A row was found: never `Run`, but the same as `Expired` if it were.
            Decision::Run | Decision::Expired => {
                // Past retention the record is treated as absent, by design.
                tx.execute("DELETE FROM invocations WHERE key = $1", &[&b.key.as_str()])?;
                insert(tx, b)?;
                BeginOutcome::Run {
                    resumed: false,
                    took_over: None,
                    entropy: fresh(),
                }
            }
            Decision::Mismatch => return Ok(BeginOutcome::Mismatch(b.key.clone())),
            Decision::Replay => {
                // Counted in the transaction that decides it.
                count_replay_in(tx, b.key)?;
                BeginOutcome::Replay(row.get::<_, Option<String>>(2).unwrap_or_default())
            }
            Decision::Wait => BeginOutcome::Wait,
            Decision::Resume => {
                let entropy: Option<String> = row.get(5);
                let seed = entropy.as_deref().and_then(Seed::from_hex);
                let seed = seed.unwrap_or_else(|| b.seed.clone());
                tx.execute(
                    concat!(
                        "UPDATE invocations SET state = 'running', runs = runs + 1, updated_at = $2,
                                lease_owner = $3, lease_expires_at = ",
                        db_now!(),
                        " + $4, entropy = $5, component = coalesce($6, component)
                          WHERE key = $1"
                    ),
                    &[
                        &b.key.as_str(),
                        &b.now,
                        &b.owner,
                        &b.lease_ms,
                        &seed.to_hex(),
                        &b.component,
                    ],
                )?;
                BeginOutcome::Run {
                    resumed: true,
                    took_over: decision::takes_over(&found).then(|| TakenOver {
                        owner: row.get(9),
                        lease_expired_at: found.lease_expires_at,
                    }),
                    entropy: GuestEntropy {
                        seed,
                        started_ms: row.get(3),
                    },
                }
            }
        });
        break;
    }
    // Both looks lost a race with a delete and an insert: let the guard ask again.
    let Some(outcome) = outcome else {
        return Ok(BeginOutcome::Wait);
    };

    if let Some(call_id) = b.tool_call_id {
        tx.execute(
            "INSERT INTO aliases (scope, tool_call_id, invocation_key, created_at)
             VALUES ($1, $2, $3, $4)
             ON CONFLICT (scope, tool_call_id) DO UPDATE
               SET invocation_key = excluded.invocation_key, created_at = excluded.created_at
               WHERE aliases.invocation_key <> excluded.invocation_key",
            &[&b.scope, &call_id, &b.key.as_str(), &b.now],
        )?;
    }
    Ok(outcome)
}

fn insert(tx: &mut Db<'_, Transaction<'_>>, b: &Begin<'_>) -> PgResult<bool> {
    let record = NewInvocation {
        key: b.key.clone(),
        scope: b.scope.to_owned(),
        tool: b.tool.to_owned(),
        fingerprint: b.fingerprint.clone(),
        explicit_key: b.explicit_key,
        created_at: b.now,
        retention_ms: b.retention_ms,
        seed: b.seed.clone(),
        arguments: b.arguments.to_owned(),
        component: b.component.map(str::to_owned),
    };
    insert_in(tx, &record, Some((b.owner, b.lease_ms)), None)
}

pub(super) fn get(
    client: &mut Db<'_, impl GenericClient>,
    invocation: &InvocationKey,
    seq: u32,
) -> PgResult<Option<EffectRecord>> {
    Ok(client
        .query_opt(
            "SELECT key, provider, operation, fingerprint, state, attempts, response, resolution, class,
                    catalog_class
               FROM effects WHERE invocation_key = $1 AND seq = $2",
            &[&invocation.as_str(), &seq_of(seq)],
        )?
        .map(|r| EffectRecord {
            key: EffectKey::from_stored(r.get(0)),
            provider: r.get(1),
            operation: r.get(2),
            fingerprint: Fingerprint::from_stored(r.get(3)),
            class: ProviderClass::parse(&r.get::<_, String>(8)),
            state: if r.get::<_, String>(4) == "done" {
                EffectState::Done
            } else {
                EffectState::Pending
            },
            attempts: u32::try_from(r.get::<_, i32>(5)).unwrap_or(0),
            response: r.get(6),
            resolution: r
                .get::<_, Option<String>>(7)
                .as_deref()
                .and_then(Resolution::parse),
            catalog_class: r.get(9),
        }))
}

/// Notes what the provider of the effect at `seq` of `invocation` calls it now,
/// when that differs from its record (`None`: they agree again); writes nothing
/// when the journal says so already.
pub(super) fn note_catalog_in(
    client: &mut Db<'_, impl GenericClient>,
    invocation: &InvocationKey,
    seq: u32,
    says: Option<&str>,
) -> PgResult<()> {
    client.execute(
        "UPDATE effects SET catalog_class = $3
          WHERE invocation_key = $1 AND seq = $2 AND catalog_class IS DISTINCT FROM $3",
        &[&invocation.as_str(), &seq_of(seq), &says],
    )?;
    Ok(())
}

pub(super) fn count_from(
    client: &mut Db<'_, impl GenericClient>,
    invocation: &InvocationKey,
    seq: u32,
) -> PgResult<u32> {
    let n: i64 = client
        .query_one(
            "SELECT COUNT(*) FROM effects WHERE invocation_key = $1 AND seq >= $2",
            &[&invocation.as_str(), &seq_of(seq)],
        )?
        .get(0);
    Ok(u32::try_from(n).unwrap_or(u32::MAX))
}

/// Extends the lease of `invocation` if `lease.owner` still holds it. The `UPDATE`
/// locks the row, so a fenced write that follows in the same transaction cannot be
/// overtaken by a host taking the call over.
pub(super) fn renew_lease_in(
    client: &mut Db<'_, impl GenericClient>,
    invocation: &InvocationKey,
    lease: &Lease<'_>,
) -> PgResult<bool> {
    if crate::mutants::on(crate::mutants::Mutant::HostClockLease) {
        let n = client.execute(
            "UPDATE invocations SET lease_expires_at = $3
              WHERE key = $1 AND lease_owner = $2 AND state = 'running'",
            &[&invocation.as_str(), &lease.owner, &lease.until],
        )?;
        return Ok(n == 1);
    }
    let n = client.execute(
        concat!(
            "UPDATE invocations SET lease_expires_at = ",
            db_now!(),
            " + $3 WHERE key = $1 AND lease_owner = $2 AND state = 'running'"
        ),
        &[&invocation.as_str(), &lease.owner, &lease.ms],
    )?;
    Ok(n == 1)
}

/// [`renew_lease_in`] for a claim of `effect`, reading in the same statement
/// whether it is a new effect (none journaled at its position) of a generation its
/// client cancelled ([`Journal::cancel`](crate::journal::Journal::cancel) on any
/// host): `None` when the run lost its lease, else whether the claim is refused.
fn renew_for_claim_in(
    client: &mut Db<'_, impl GenericClient>,
    effect: &NewEffect<'_>,
    lease: &Lease<'_>,
) -> PgResult<Option<bool>> {
    /// Whether the claimed effect is new (`$4`: its position) and its generation
    /// cancelled.
    macro_rules! refused_by_a_cancel {
        () => {
            " WHERE key = $1 AND lease_owner = $2 AND state = 'running'
             RETURNING coalesce(cancelled_entropy = entropy, FALSE)
                   AND NOT EXISTS (SELECT 1 FROM effects e
                                    WHERE e.invocation_key = $1 AND e.seq = $4)"
        };
    }
    let (sql, until) = if crate::mutants::on(crate::mutants::Mutant::HostClockLease) {
        (
            concat!(
                "UPDATE invocations SET lease_expires_at = $3",
                refused_by_a_cancel!()
            ),
            lease.until,
        )
    } else {
        (
            concat!(
                "UPDATE invocations SET lease_expires_at = ",
                db_now!(),
                " + $3",
                refused_by_a_cancel!()
            ),
            lease.ms,
        )
    };
    let row = client.query_opt(
        sql,
        &[
            &effect.invocation.as_str(),
            &lease.owner,
            &until,
            &seq_of(effect.seq),
        ],
    )?;
    let ignored = crate::mutants::on(crate::mutants::Mutant::JournaledCancelIgnored);
    Ok(row.map(|r| r.get::<_, bool>(0) && !ignored))
}

/// Journals a cancel of the call of `key` against the generation its record holds
/// now (see [`Journal::cancel`](crate::journal::Journal::cancel)): that record's
/// seed; `None` without a record (or a seed), and then the cancel is kept for the
/// key's first record (`early_cancels`, whose trigger binds it; taken at the
/// database's clock, for `gc` to remove once the retention has passed if its call
/// never came). The key's advisory
/// lock, which that trigger takes too, comes first: a first record made at once
/// either is seen here or sees the row.
pub(super) fn cancel_in(
    tx: &mut Db<'_, impl GenericClient>,
    key: &InvocationKey,
) -> PgResult<Option<String>> {
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended($1, 54))",
        &[&key.as_str()],
    )?;
    let seed: Option<String> = tx
        .query_opt(
            "UPDATE invocations SET cancelled_entropy = entropy
              WHERE key = $1 AND entropy IS NOT NULL
          RETURNING entropy",
            &[&key.as_str()],
        )?
        .map(|r| r.get(0));
    if seed.is_none() {
        tx.execute(
            concat!(
                "INSERT INTO early_cancels (key, created_at) SELECT $1, ",
                db_now!(),
                " WHERE NOT EXISTS (SELECT 1 FROM invocations WHERE key = $1)
             ON CONFLICT (key) DO NOTHING"
            ),
            &[&key.as_str()],
        )?;
    }
    Ok(seed)
}

/// [`claim_in`] for the first effect of a run that has not journaled its invocation,
/// in one statement (one round trip, committed by itself): the invocation running
/// under the run's lease (from the database's clock) and the effect pending with its
/// first attempt, or nothing when a record of the key exists already
/// ([`Refusal::Superseded`]) or a cancel was taken before the call had a record
/// ([`Refusal::Cancelled`], as a claim in a transaction rolls back). A fresh
/// invocation has no effects, so the effect is inserted with its attempt counted.
pub(super) fn claim_first_in(
    client: &mut Db<'_, impl GenericClient>,
    effect: &NewEffect<'_>,
    lease: &Lease<'_>,
    record: &NewInvocation,
) -> PgResult<Result<(EffectKey, u32), Refusal>> {
    let row = client.query_opt(
        concat!(
            "WITH early AS (
                SELECT EXISTS (SELECT 1 FROM early_cancels WHERE key = $1::TEXT) AS cancelled
             ), created AS (
                INSERT INTO invocations (key, scope, tool, fingerprint, explicit_key, state,
                                         runs, created_at, updated_at, lease_owner,
                                         lease_expires_at, entropy, arguments, retention_ms,
                                         component)
                SELECT $1::TEXT, $2::TEXT, $3::TEXT, $4::TEXT, $5::BOOLEAN, 'running', 1,
                       $6::BIGINT, $6::BIGINT, $7::TEXT, ",
            db_now!(),
            " + $8::BIGINT, $9::TEXT, $10::TEXT, $11::BIGINT, $19::TEXT
                  FROM early WHERE NOT early.cancelled
                ON CONFLICT (key) DO NOTHING
                RETURNING key
             ), claimed AS (
                INSERT INTO effects (key, invocation_key, seq, provider, class, operation,
                                     fingerprint, state, attempts, created_at, updated_at,
                                     ends_by)
                SELECT $12, key, $13, $14, $15, $16, $17, 'pending', 1, $18, $18, $20
                  FROM created
                RETURNING key, attempts
             )
             SELECT c.key, c.attempts, early.cancelled FROM early LEFT JOIN claimed c ON TRUE"
        ),
        &[
            &record.key.as_str(),
            &record.scope,
            &record.tool,
            &record.fingerprint.as_str(),
            &record.explicit_key,
            &record.created_at,
            &lease.owner,
            &lease.ms,
            &record.seed.to_hex(),
            &record.arguments,
            &record.retention_ms,
            &effect.key.as_str(),
            &seq_of(effect.seq),
            &effect.provider,
            &effect.class,
            &effect.operation,
            &effect.fingerprint.as_str(),
            &effect.now,
            // The component that ran the first run, as every other first write
            // records it (`insert_in`).
            &record.component,
            &effect.ends_by,
        ],
    )?;
    // Nothing written: the record exists already, or the call was cancelled before
    // it had one (its outcome, when saved, makes the record the cancel binds).
    Ok(match row {
        Some(row) if row.get::<_, Option<String>>(0).is_some() => Ok(claimed(&row)),
        Some(row) if row.get::<_, bool>(2) => Err(Refusal::Cancelled),
        _ => Err(Refusal::Superseded),
    })
}

/// The key and attempt number a claim read back (`RETURNING key, attempts`).
fn claimed(row: &postgres::Row) -> (EffectKey, u32) {
    (
        EffectKey::from_stored(row.get(0)),
        u32::try_from(row.get::<_, i32>(1)).unwrap_or(0),
    )
}

pub(super) fn claim_in(
    tx: &mut Db<'_, Transaction<'_>>,
    effect: &NewEffect<'_>,
    lease: &Lease<'_>,
    unjournaled: Option<&NewInvocation>,
) -> PgResult<Result<(EffectKey, u32), Refusal>> {
    let held = match unjournaled {
        Some(record) => insert_in(tx, record, Some((lease.owner, lease.ms)), None)?
            .then_some(())
            .ok_or(Refusal::Superseded),
        // A run that journaled its invocation just now cannot have been cancelled
        // in the journal (no host could name its generation before).
        None => match renew_for_claim_in(tx, effect, lease)? {
            None => Err(Refusal::LeaseLost),
            Some(true) => Err(Refusal::Cancelled),
            Some(false) => Ok(()),
        },
    };
    if let Err(refusal) = held {
        return Ok(Err(refusal));
    }
    tx.execute(
        "INSERT INTO effects (key, invocation_key, seq, provider, class, operation, fingerprint,
                              state, attempts, created_at, updated_at, ends_by)
         VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', 0, $8, $8, $9)
         ON CONFLICT DO NOTHING",
        &[
            &effect.key.as_str(),
            &effect.invocation.as_str(),
            &seq_of(effect.seq),
            &effect.provider,
            &effect.class,
            &effect.operation,
            &effect.fingerprint.as_str(),
            &effect.now,
            &effect.ends_by,
        ],
    )?;
    // An attempt consumes a person's `not_performed` resolution.
    let row = tx.query_one(
        "UPDATE effects SET attempts = attempts + 1, updated_at = $3, resolution = NULL
          WHERE invocation_key = $1 AND seq = $2
      RETURNING key, attempts",
        &[
            &effect.invocation.as_str(),
            &seq_of(effect.seq),
            &effect.now,
        ],
    )?;
    Ok(Ok(claimed(&row)))
}

pub(super) fn perform_transactional_in(
    tx: &mut Db<'_, Transaction<'_>>,
    effect: &NewEffect<'_>,
    lease: &Lease<'_>,
    unjournaled: Option<&NewInvocation>,
    provider: &dyn Provider,
    request: &TransactionalRequest<'_>,
) -> PgResult<Result<Answer, Refusal>> {
    let (key, attempt) = match claim_in(tx, effect, lease, unjournaled)? {
        Ok(claimed) => claimed,
        Err(refusal) => return Ok(Err(refusal)),
    };
    let full = EffectRequest {
        tool: request.tool,
        principal: request.principal,
        key: &key,
        invocation: effect.invocation,
        seq: effect.seq,
        attempt,
        operation: request.operation,
        payload: request.payload,
        client: None,
    };
    let mut savepoint = tx.savepoint("provider")?;
    fault::point(FaultPoint::BeforeEffect);
    let performed = provider.perform_in_postgres(&mut savepoint, &full);
    fault::point(FaultPoint::AfterProvider);
    if performed.is_ok() {
        savepoint.commit()?;
    } else {
        drop(savepoint);
    }
    let answer = match transactional_answer(effect.provider, performed) {
        Ok(answer) => answer,
        Err(reason) => return Ok(Err(Refusal::NotPerformed(reason))),
    };
    finish(tx, &key, &answer.to_stored(), effect.now)?;
    Ok(Ok(answer))
}

/// Saves an effect's answer unless one is recorded already; returns the recorded
/// one in that case (`None`: this one was saved).
pub(super) fn finish(
    client: &mut Db<'_, impl GenericClient>,
    key: &EffectKey,
    response: &str,
    now: i64,
) -> PgResult<Option<String>> {
    // The first definitive answer stays (see the SQLite journal's `finish`).
    let saved = client.execute(
        "UPDATE effects SET state = 'done', response = $2, updated_at = $3
          WHERE key = $1 AND state = 'pending'",
        &[&key.as_str(), &response, &now],
    )?;
    if saved == 1 {
        return Ok(None);
    }
    let row = client.query_opt(
        "SELECT response FROM effects WHERE key = $1 AND state = 'done'",
        &[&key.as_str()],
    )?;
    Ok(row.and_then(|r| r.get::<_, Option<String>>(0)))
}

pub(super) fn not_performed_in(
    client: &mut Db<'_, impl GenericClient>,
    key: &EffectKey,
    reason: &str,
    now: i64,
) -> PgResult<()> {
    client.execute(
        "UPDATE effects SET resolution = 'not_performed', last_error = $2, updated_at = $3
          WHERE key = $1 AND state = 'pending'",
        &[&key.as_str(), &reason, &now],
    )?;
    Ok(())
}

pub(super) fn note_error_in(
    client: &mut Db<'_, impl GenericClient>,
    key: &EffectKey,
    error: &str,
    now: i64,
) -> PgResult<()> {
    client.execute(
        "UPDATE effects SET last_error = $2, updated_at = $3 WHERE key = $1",
        &[&key.as_str(), &error, &now],
    )?;
    Ok(())
}

fn count(n: i32) -> u32 {
    u32::try_from(n).unwrap_or(0)
}

fn entry_from(r: &postgres::Row) -> JournalEntry {
    let outcome: Option<String> = r.get(7);
    JournalEntry {
        key: r.get(0),
        conversation: r.get(1),
        tool: r.get(2),
        state: r.get(3),
        arguments: parse_json(r.get(4)),
        runs: count(r.get(5)),
        replays: count(r.get(6)),
        tool_call_ids: Vec::new(),
        summary: outcome.as_deref().map(summary),
        outcome: parse_json(outcome),
        created_at: r.get(8),
        completed_at: r.get(9),
        expires_at: expires_at(r.get(9), r.get(13)),
        effects: Vec::new(),
        component: r.get(10),
        lease_owner: r.get(11),
        lease_expires_at: r.get(12),
        holding: String::new(),
        judged: 0,
        generation: generation_of(r.get(14)),
        cancelled: r.get(15),
    }
}

/// The effects of `invocation`, in order (a refused one shows as `refused`).
pub(super) fn effects_of(
    client: &mut impl GenericClient,
    invocation: &str,
) -> PgResult<Vec<JournalEffect>> {
    Ok(client
        .query(
            &format!("SELECT {EFFECT_COLUMNS} FROM effects WHERE invocation_key = $1 ORDER BY seq"),
            &[&invocation],
        )?
        .into_iter()
        .map(|e| {
            let response = parse_json(e.get(7));
            JournalEffect {
                seq: count(e.get(0)),
                key: e.get(1),
                provider: e.get(2),
                class: e.get(3),
                operation: e.get(4),
                state: shown_state(e.get(5), response.as_ref()),
                attempts: count(e.get(6)),
                response,
                last_error: e.get(8),
                resolution: e.get(9),
                created_at: e.get(10),
                updated_at: e.get(11),
                catalog_class: e.get(12),
            }
        })
        .collect())
}

/// Fills in the tool-call ids and effects of `entry`.
fn complete_entry(client: &mut impl GenericClient, entry: &mut JournalEntry) -> PgResult<()> {
    entry.tool_call_ids = client
        .query(
            "SELECT tool_call_id FROM aliases WHERE invocation_key = $1
              ORDER BY created_at, tool_call_id",
            &[&entry.key],
        )?
        .into_iter()
        .map(|r| r.get(0))
        .collect();
    entry.effects = effects_of(client, &entry.key)?;
    Ok(())
}

pub(super) fn entries_in(
    client: &mut impl GenericClient,
    scopes: &Scopes,
    limit: u32,
) -> PgResult<Vec<JournalEntry>> {
    let rows = client.query(
        &format!(
            "SELECT {ENTRY_COLUMNS} FROM invocations
              WHERE ($1::TEXT IS NULL OR scope = $1
                     OR ($4::TEXT IS NOT NULL AND left(scope, 1) = '['
                         AND right(scope, length($4)) = $4))
                AND ($3::TEXT IS NULL OR left(scope, length($3)) = $3)
              ORDER BY created_at DESC, key LIMIT $2"
        ),
        &[
            &scopes.exactly.as_deref(),
            &i64::from(limit),
            &scopes.prefix.as_deref(),
            &scopes.suffix.as_deref(),
        ],
    )?;
    let mut entries: Vec<JournalEntry> = rows.iter().map(entry_from).collect();
    for entry in &mut entries {
        complete_entry(client, entry)?;
    }
    Ok(entries)
}

/// The invocation `key` with its effects, if the journal holds it.
pub(super) fn entry_in(
    client: &mut impl GenericClient,
    key: &str,
) -> PgResult<Option<JournalEntry>> {
    let Some(row) = client.query_opt(
        &format!("SELECT {ENTRY_COLUMNS} FROM invocations WHERE key = $1"),
        &[&key],
    )?
    else {
        return Ok(None);
    };
    let mut entry = entry_from(&row);
    complete_entry(client, &mut entry)?;
    Ok(Some(entry))
}

/// Counts one more retry answered with the saved outcome of `key`.
pub(super) fn count_replay_in(
    client: &mut Db<'_, impl GenericClient>,
    key: &InvocationKey,
) -> PgResult<()> {
    client.execute(
        "UPDATE invocations SET replays = replays + 1 WHERE key = $1",
        &[&key.as_str()],
    )?;
    Ok(())
}

/// Counts one more retry of `key` in a statement of its own whose commit waits for no
/// WAL flush: the count is bookkeeping, not an answer (as on SQLite, a crash may lose
/// it), and a replay should not wait for the disk.
pub(super) fn count_replay_unsynced(
    client: &mut Db<'_, impl GenericClient>,
    key: &InvocationKey,
) -> PgResult<()> {
    client.execute(
        "WITH unsynced AS (SELECT set_config('synchronous_commit', 'off', true))
         UPDATE invocations SET replays = replays + 1
          WHERE key = $1 AND EXISTS (SELECT 1 FROM unsynced)",
        &[&key.as_str()],
    )?;
    Ok(())
}

/// Adds replays a host answered from its memory to the journal's counts, in a
/// commit that waits for no WAL flush (bookkeeping, as [`count_replay_unsynced`]).
pub(super) fn add_replays(
    client: &mut Db<'_, impl GenericClient>,
    counts: &std::collections::HashMap<InvocationKey, u32>,
) -> PgResult<()> {
    let keys: Vec<&str> = counts.keys().map(InvocationKey::as_str).collect();
    let n: Vec<i32> = counts
        .values()
        .map(|n| i32::try_from(*n).unwrap_or(i32::MAX))
        .collect();
    client.execute(
        "WITH unsynced AS (SELECT set_config('synchronous_commit', 'off', true))
         UPDATE invocations SET replays = replays + d.n
           FROM unnest($1::TEXT[], $2::INT[]) AS d (key, n)
          WHERE invocations.key = d.key AND EXISTS (SELECT 1 FROM unsynced)",
        &[&keys, &n],
    )?;
    Ok(())
}

/// Deletes every completed record past its own window on the database's clock (a
/// record journaled before records carried one: `default_retention_ms`; the caller's
/// `now` is not used: a host whose clock runs ahead must not expire records early),
/// and provider rows older than `default_retention_ms`. The expired invocations are
/// locked first, in key order, then their effects and aliases deleted: the order
/// `forget` and `decide` lock in too, so gc and they never wait for each other in a
/// cycle.
pub(super) fn gc_in(
    tx: &mut Db<'_, Transaction<'_>>,
    _now: i64,
    default_retention_ms: i64,
) -> PgResult<GcReport> {
    let now: i64 = tx.query_one(concat!("SELECT ", db_now!()), &[])?.get(0);
    let cutoff = now.saturating_sub(default_retention_ms);
    // `now - window` rather than `completed_at + window`: no sum can overflow.
    let keys: Vec<String> = tx
        .query(
            "SELECT key FROM invocations
              WHERE state = 'completed'
                AND completed_at <= $1::BIGINT - COALESCE(retention_ms, $2::BIGINT)
              ORDER BY key FOR UPDATE",
            &[&now, &default_retention_ms],
        )?
        .into_iter()
        .map(|r| r.get(0))
        .collect();
    let effects = tx.execute(
        "DELETE FROM effects WHERE invocation_key = ANY($1)",
        &[&keys],
    )?;
    let aliases = tx.execute(
        "DELETE FROM aliases WHERE invocation_key = ANY($1)",
        &[&keys],
    )?;
    let invocations = tx.execute("DELETE FROM invocations WHERE key = ANY($1)", &[&keys])?;
    if invocations > 0 {
        // Every host drops the outcomes it remembers, when this commits (`listen.rs`).
        tx.execute(concat!("SELECT pg_notify(", channel!(), ", '')"), &[])?;
    }
    let has = |tx: &mut Db<'_, Transaction<'_>>, table: &str| -> PgResult<bool> {
        Ok(tx
            .query_one("SELECT to_regclass($1) IS NOT NULL", &[&table])?
            .get(0))
    };
    let outbox = if has(tx, "outbox")? {
        tx.execute(
            "DELETE FROM outbox WHERE state IN ('delivered', 'failed') AND updated_at <= $1",
            &[&cutoff],
        )?
    } else {
        0
    };
    // Cancels whose call never made a record: one an older host took (no time) is
    // stamped now, and removed a retention later.
    tx.execute(
        "UPDATE early_cancels SET created_at = $1 WHERE created_at IS NULL",
        &[&now],
    )?;
    let early_cancels = tx.execute(
        "DELETE FROM early_cancels WHERE created_at <= $1",
        &[&cutoff],
    )?;
    Ok(GcReport {
        invocations,
        effects,
        aliases,
        outbox,
        mailbox: 0,
        early_cancels,
    })
}

/// Pending unkeyed effects of calls no run holds (a live lease on the database's
/// clock; the caller's `now` is not used).
pub(super) fn unresolved_in(
    client: &mut Db<'_, impl GenericClient>,
    _now: i64,
) -> PgResult<Vec<UnresolvedEffect>> {
    Ok(client
        .query(
            concat!(
                r#"SELECT e.key, e.invocation_key, i.scope, i.tool, e.seq, e.provider, e.operation,
                    e.attempts, e.last_error, e.updated_at, e.ends_by
               FROM effects e JOIN invocations i ON i.key = e.invocation_key
              WHERE e.state = 'pending' AND e.class = 'unkeyed' AND e.resolution IS NULL
                AND NOT (i.state = 'running' AND i.lease_expires_at > "#,
                db_now!(),
                r#")
                AND i.state <> 'completed'
              ORDER BY e.updated_at, e.key"#
            ),
            &[],
        )?
        .into_iter()
        .map(|r| UnresolvedEffect {
            key: r.get(0),
            invocation: r.get(1),
            conversation: r.get(2),
            tool: r.get(3),
            seq: count(r.get(4)),
            provider: r.get(5),
            operation: r.get(6),
            attempts: count(r.get(7)),
            last_error: r.get(8),
            updated_at: r.get(9),
            class: "unkeyed".into(),
            ends_by: r.get(10),
            pending: None,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plan PostgreSQL keeps for `sql` once it stops planning it per call (its
    /// generic plan), on the tables as they are now.
    fn generic_plan(client: &mut postgres::Client, sql: &str) -> String {
        let params = client.prepare(sql).unwrap().params().len();
        client
            .batch_execute(&format!(
                "SET plan_cache_mode = force_generic_plan; PREPARE planned AS {sql}"
            ))
            .unwrap();
        let nulls = vec!["NULL"; params].join(", ");
        let plan: Vec<String> = client
            .query(&format!("EXPLAIN EXECUTE planned ({nulls})"), &[])
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        client.batch_execute("DEALLOCATE planned").unwrap();
        plan.join("\n")
    }

    /// Saving a call's outcome with its effects' answers looks the effects up by
    /// index even in the plan made on a young journal's tables (a plan kept for the
    /// connection's life), never by reading the whole table.
    #[test]
    fn saving_an_outcome_with_its_answers_never_reads_every_effect() {
        const NAME: &str = "saving_an_outcome_with_its_answers_never_reads_every_effect";
        let Some(cluster) = super::super::testing::cluster(NAME) else {
            return;
        };
        let mut client = cluster.schema().connect(postgres::NoTls).unwrap();
        assert_eq!(super::super::schema::migrate(&mut client).unwrap(), None);
        let plan = generic_plan(&mut client, COMPLETE_WITH);
        assert!(plan.contains("Update on effects"), "{plan}");
        assert!(!plan.contains("Seq Scan"), "{plan}");
    }
}
