//! Effect records: one per guarded host-import call, written before the provider runs.

use rusqlite::{Connection, OptionalExtension, params};

use super::invocations::create_running_in;
use crate::fault::{self, FaultPoint};
use crate::journal::{
    Answer, DeferredAnswer, EffectRecord, EffectState, Lease, NewEffect, NewInvocation, Refusal,
    Resolution, TransactionalRequest, transactional_answer,
};
use crate::keys::{EffectKey, Fingerprint, InvocationKey};
use crate::provider::{EffectRequest, Provider, ProviderClass};

pub(super) fn get(
    conn: &Connection,
    invocation: &InvocationKey,
    seq: u32,
) -> rusqlite::Result<Option<EffectRecord>> {
    conn.prepare_cached(
        "SELECT key, provider, operation, fingerprint, state, attempts, response, resolution, class,
                catalog_class
           FROM effects WHERE invocation_key = ?1 AND seq = ?2",
    )?
    .query_row(params![invocation.as_str(), seq], |r| {
        Ok(EffectRecord {
            key: EffectKey::from_stored(r.get(0)?),
            provider: r.get(1)?,
            operation: r.get(2)?,
            fingerprint: Fingerprint::from_stored(r.get(3)?),
            class: ProviderClass::parse(&r.get::<_, String>(8)?),
            state: if r.get::<_, String>(4)? == "done" {
                EffectState::Done
            } else {
                EffectState::Pending
            },
            attempts: r.get(5)?,
            response: r.get(6)?,
            resolution: r
                .get::<_, Option<String>>(7)?
                .as_deref()
                .and_then(Resolution::parse),
            catalog_class: r.get(9)?,
        })
    })
    .optional()
}

/// Notes what the provider of the effect at `seq` of `invocation` calls it now,
/// when that differs from its record (`None`: they agree again); writes nothing
/// when the journal says so already.
pub(super) fn note_catalog_in(
    conn: &Connection,
    invocation: &InvocationKey,
    seq: u32,
    says: Option<&str>,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "UPDATE effects SET catalog_class = ?3
          WHERE invocation_key = ?1 AND seq = ?2 AND catalog_class IS NOT ?3",
    )?
    .execute(params![invocation.as_str(), seq, says])?;
    Ok(())
}

/// Journals an effect unless the journal already holds one at its position.
pub(super) fn insert(
    conn: &Connection,
    e: &NewEffect<'_>,
    state: EffectState,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO effects (key, invocation_key, seq, provider, class, operation, fingerprint,
                              state, attempts, created_at, updated_at, ends_by)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 0, ?9, ?9, ?10)
         ON CONFLICT DO NOTHING",
    )?
    .execute(params![
        e.key.as_str(),
        e.invocation.as_str(),
        e.seq,
        e.provider,
        e.class,
        e.operation,
        e.fingerprint.as_str(),
        match state {
            EffectState::Pending => "pending",
            EffectState::Done => "done",
        },
        e.now,
        e.ends_by
    ])?;
    Ok(())
}

pub(super) fn begin_attempt_in(
    conn: &Connection,
    invocation: &InvocationKey,
    seq: u32,
    now: i64,
) -> rusqlite::Result<(EffectKey, u32)> {
    conn.prepare_cached(
        // An attempt consumes a person's `not_performed` resolution: if this attempt's
        // outcome is unknown too, a person must look again.
        "UPDATE effects SET attempts = attempts + 1, updated_at = ?3, resolution = NULL
          WHERE invocation_key = ?1 AND seq = ?2
      RETURNING key, attempts",
    )?
    .query_row(params![invocation.as_str(), seq, now], |r| {
        Ok((EffectKey::from_stored(r.get(0)?), r.get(1)?))
    })
}

/// Saves an effect's answer unless one is recorded already; returns the recorded
/// one in that case (`None`: this one was saved).
pub(super) fn finish(
    conn: &Connection,
    invocation: &InvocationKey,
    key: &EffectKey,
    response: &str,
    now: i64,
) -> rusqlite::Result<Option<String>> {
    // The first definitive answer stays: a run that lost its lease may still be
    // answered after the run that took over recorded the same answer.
    let saved = conn
        .prepare_cached(
            "UPDATE effects SET state = 'done', response = ?3, updated_at = ?4
              WHERE invocation_key = ?1 AND key = ?2 AND state = 'pending'",
        )?
        .execute(params![invocation.as_str(), key.as_str(), response, now])?;
    if saved == 1 {
        return Ok(None);
    }
    conn.prepare_cached(
        "SELECT response FROM effects
          WHERE invocation_key = ?1 AND key = ?2 AND state = 'done'",
    )?
    .query_row(params![invocation.as_str(), key.as_str()], |r| {
        r.get::<_, Option<String>>(0)
    })
    .optional()
    .map(Option::flatten)
}

/// Saves a run's deferred answers of keyed effects of `invocation` (see
/// [`DeferredAnswer`]), each only if its effect is still pending (the first answer
/// stays), and only while the run `owner` holds the lease: a run that lost it saves
/// nothing, since the run that took over may have asked the downstream again and
/// handed its tool that answer instead (DESIGN.md, "What the tool saw is what the
/// journal holds"). Run before the write that releases the lease (complete,
/// suspend). `false`: nothing saved.
pub(super) fn finish_deferred(
    conn: &Connection,
    invocation: &InvocationKey,
    owner: &str,
    deferred: &[DeferredAnswer],
) -> rusqlite::Result<bool> {
    if deferred.is_empty() {
        return Ok(false);
    }
    let held = conn
        .prepare_cached(
            "SELECT 1 FROM invocations
              WHERE key = ?1 AND lease_owner = ?2 AND state = 'running'",
        )?
        .query_row(params![invocation.as_str(), owner], |_| Ok(()))
        .optional()?
        .is_some();
    if !held && !crate::mutants::on(crate::mutants::Mutant::UnfencedDeferred) {
        return Ok(false);
    }
    for answer in deferred {
        finish(
            conn,
            invocation,
            &answer.key,
            &answer.answer.to_stored(),
            answer.at,
        )?;
    }
    Ok(true)
}

/// Extends the lease of `invocation` if `lease.owner` still holds it.
pub(super) fn renew_lease_in(
    conn: &Connection,
    invocation: &InvocationKey,
    lease: &Lease<'_>,
) -> rusqlite::Result<bool> {
    let sql = if crate::mutants::on(crate::mutants::Mutant::UnfencedRenew) {
        "UPDATE invocations SET lease_expires_at = ?3
          WHERE key = ?1 AND ?2 IS NOT NULL AND state = 'running'"
    } else {
        "UPDATE invocations SET lease_expires_at = ?3
          WHERE key = ?1 AND lease_owner = ?2 AND state = 'running'"
    };
    let n = conn.prepare_cached(sql)?.execute(params![
        invocation.as_str(),
        lease.owner,
        lease.until
    ])?;
    Ok(n == 1)
}

/// Makes sure `lease.owner` holds `invocation` before an effect is journaled: renews
/// its lease, or, for a run that has not journaled the invocation yet
/// (`unjournaled`), journals it running under that lease.
pub(super) fn hold_in(
    conn: &Connection,
    invocation: &InvocationKey,
    lease: &Lease<'_>,
    unjournaled: Option<&NewInvocation>,
) -> rusqlite::Result<std::result::Result<(), Refusal>> {
    Ok(match unjournaled {
        Some(record) => create_running_in(conn, record, lease.owner, lease.until)?
            .then_some(())
            .ok_or(Refusal::Superseded),
        None => renew_lease_in(conn, invocation, lease)?
            .then_some(())
            .ok_or(Refusal::LeaseLost),
    })
}

/// In one transaction (the caller's): holds the lease (see [`hold_in`]), journals the
/// effect as pending unless it is already, counts one more attempt, and returns the
/// key read back from the journal with the attempt's number.
pub(super) fn claim_in(
    tx: &Connection,
    effect: &NewEffect<'_>,
    lease: &Lease<'_>,
    unjournaled: Option<&NewInvocation>,
) -> rusqlite::Result<std::result::Result<(EffectKey, u32), Refusal>> {
    if let Err(refusal) = hold_in(tx, effect.invocation, lease, unjournaled)? {
        return Ok(Err(refusal));
    }
    // A run that journaled its invocation just now is cancelled too when a cancel
    // was taken before the call had a record (the trigger of `early_cancels` bound
    // it to this record).
    if cancelled_before_in(tx, effect)? {
        return Ok(Err(Refusal::Cancelled));
    }
    insert(tx, effect, EffectState::Pending)?;
    Ok(Ok(begin_attempt_in(
        tx,
        effect.invocation,
        effect.seq,
        effect.now,
    )?))
}

/// Whether `effect` is a new effect (none journaled at its position) of a
/// generation its client cancelled ([`Journal::cancel`](crate::journal::Journal::cancel)
/// on any host): one primary-key read in the claim's transaction.
fn cancelled_before_in(conn: &Connection, effect: &NewEffect<'_>) -> rusqlite::Result<bool> {
    if crate::mutants::on(crate::mutants::Mutant::JournaledCancelIgnored) {
        return Ok(false);
    }
    conn.prepare_cached(
        "SELECT 1 FROM invocations i
          WHERE i.key = ?1 AND i.cancelled_entropy = i.entropy
            AND NOT EXISTS (SELECT 1 FROM effects e WHERE e.invocation_key = ?1 AND e.seq = ?2)",
    )?
    .query_row(params![effect.invocation.as_str(), effect.seq], |_| Ok(()))
    .optional()
    .map(|found| found.is_some())
}

/// Journals a cancel of the call of `key` against the generation its record holds
/// now (see [`Journal::cancel`](crate::journal::Journal::cancel)): that record's seed;
/// `None` without a record (or a seed), and then the cancel is kept for the key's
/// first record (`early_cancels`), taken at `now` (the journal's clock: `gc` removes
/// it once the retention has passed, if its call never came).
pub(super) fn cancel_in(
    conn: &Connection,
    key: &InvocationKey,
    now: i64,
) -> rusqlite::Result<Option<String>> {
    let seed = conn
        .prepare_cached(
            "UPDATE invocations SET cancelled_entropy = entropy
              WHERE key = ?1 AND entropy IS NOT NULL
          RETURNING entropy",
        )?
        .query_row(params![key.as_str()], |r| r.get(0))
        .optional()?;
    if seed.is_none() {
        conn.prepare_cached(
            "INSERT INTO early_cancels (key, created_at) SELECT ?1, ?2
              WHERE NOT EXISTS (SELECT 1 FROM invocations WHERE key = ?1)
             ON CONFLICT (key) DO NOTHING",
        )?
        .execute(params![key.as_str(), now])?;
    }
    Ok(seed)
}

/// Claims a transactional effect and performs it in the same transaction: the
/// provider's writes, the record and its answer commit together (a refusal rolls back
/// what the provider wrote before refusing, through a savepoint).
pub(super) fn perform_transactional_in(
    tx: &mut rusqlite::Transaction<'_>,
    effect: &NewEffect<'_>,
    lease: &Lease<'_>,
    unjournaled: Option<&NewInvocation>,
    provider: &dyn Provider,
    request: &TransactionalRequest<'_>,
) -> rusqlite::Result<std::result::Result<Answer, Refusal>> {
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
    let savepoint = tx.savepoint_with_name("provider")?;
    fault::point(FaultPoint::BeforeEffect);
    let performed = provider.perform_in_transaction(&savepoint, &full);
    fault::point(FaultPoint::AfterProvider);
    if performed.is_ok() {
        savepoint.commit()?;
    } else {
        drop(savepoint);
    }
    let answer = match transactional_answer(effect.provider, performed) {
        Ok(answer) => answer,
        // Rolls the whole transaction back: no record, nothing performed.
        Err(reason) => return Ok(Err(Refusal::NotPerformed(reason))),
    };
    finish(tx, effect.invocation, &key, &answer.to_stored(), effect.now)?;
    Ok(Ok(answer))
}

/// How many effects of `invocation` are journaled at position `seq` or later.
pub(super) fn count_from(
    conn: &Connection,
    invocation: &InvocationKey,
    seq: u32,
) -> rusqlite::Result<u32> {
    conn.query_row(
        "SELECT COUNT(*) FROM effects WHERE invocation_key = ?1 AND seq >= ?2",
        params![invocation.as_str(), seq],
        |r| r.get(0),
    )
}

/// Marks an effect's last attempt as known not performed, with the reason.
pub(super) fn not_performed_in(
    conn: &Connection,
    invocation: &InvocationKey,
    key: &EffectKey,
    reason: &str,
    now: i64,
) -> rusqlite::Result<()> {
    conn.execute(
        "UPDATE effects SET resolution = 'not_performed', last_error = ?3, updated_at = ?4
          WHERE invocation_key = ?1 AND key = ?2 AND state = 'pending'",
        params![invocation.as_str(), key.as_str(), reason, now],
    )?;
    Ok(())
}

/// Notes why the last attempt's outcome is unknown.
pub(super) fn note_error_in(
    conn: &Connection,
    invocation: &InvocationKey,
    key: &EffectKey,
    error: &str,
    now: i64,
) -> rusqlite::Result<()> {
    conn.execute(
        "UPDATE effects SET last_error = ?3, updated_at = ?4
          WHERE invocation_key = ?1 AND key = ?2",
        params![invocation.as_str(), key.as_str(), error, now],
    )?;
    Ok(())
}
