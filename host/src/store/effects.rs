//! Effect records: one per guarded host-import call, written before the provider runs.

use rusqlite::{Connection, OptionalExtension, params};

use super::Store;
use super::invocations::{NewInvocation, create_running_in};
use super::resolution::Resolution;
use crate::error::Result;
use crate::keys::{EffectKey, Fingerprint, InvocationKey};

/// Whether an effect's outcome is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EffectState {
    /// Journaled; the provider has not given a definitive answer yet.
    Pending,
    /// The definitive answer is saved in `response`.
    Done,
}

/// One effect as the journal holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct EffectRecord {
    /// The effect's idempotency key, as stored.
    pub key: EffectKey,
    /// The provider's name.
    pub provider: String,
    /// The operation.
    pub operation: String,
    /// The fingerprint of provider, operation and payload.
    pub fingerprint: Fingerprint,
    /// Pending or done.
    pub state: EffectState,
    /// Attempts made so far.
    pub attempts: u32,
    /// The saved answer (stored text) when done.
    pub response: Option<String>,
    /// What a person decided about it, if it was pending and unkeyed.
    pub resolution: Option<Resolution>,
}

/// The lease a run must still hold to perform an effect: the guard renews it before
/// every attempt, and an attempt whose run lost it (another host took over) is not
/// made.
#[derive(Debug, Clone, Copy)]
pub struct Lease<'a> {
    /// The run that must hold the lease.
    pub owner: &'a str,
    /// The new expiry when it does (ms).
    pub until: i64,
}

/// An effect about to be journaled.
#[derive(Debug, Clone, Copy)]
pub struct NewEffect<'a> {
    /// The effect key, derived once here and stored.
    pub key: &'a EffectKey,
    /// The invocation it belongs to.
    pub invocation: &'a InvocationKey,
    /// Its position in the invocation.
    pub seq: u32,
    /// The provider's name.
    pub provider: &'a str,
    /// The provider's class (`keyed`, …), recorded for people reading the journal.
    pub class: &'a str,
    /// The operation.
    pub operation: &'a str,
    /// The fingerprint of provider, operation and payload.
    pub fingerprint: &'a Fingerprint,
    /// The current time (ms).
    pub now: i64,
}

pub(crate) fn get(
    conn: &Connection,
    invocation: &InvocationKey,
    seq: u32,
) -> rusqlite::Result<Option<EffectRecord>> {
    conn.prepare_cached(
        "SELECT key, provider, operation, fingerprint, state, attempts, response, resolution
           FROM effects WHERE invocation_key = ?1 AND seq = ?2",
    )?
    .query_row(params![invocation.as_str(), seq], |r| {
        Ok(EffectRecord {
            key: EffectKey::from_stored(r.get(0)?),
            provider: r.get(1)?,
            operation: r.get(2)?,
            fingerprint: Fingerprint::from_stored(r.get(3)?),
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
        })
    })
    .optional()
}

/// Journals an effect unless the journal already holds one at its position.
pub(crate) fn insert(
    conn: &Connection,
    e: &NewEffect<'_>,
    state: EffectState,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO effects (key, invocation_key, seq, provider, class, operation, fingerprint,
                              state, attempts, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 0, ?9, ?9)
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
        e.now
    ])?;
    Ok(())
}

pub(crate) fn begin_attempt_in(
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

pub(crate) fn finish(
    conn: &Connection,
    key: &EffectKey,
    response: &str,
    now: i64,
) -> rusqlite::Result<()> {
    // The first definitive answer stays: a run that lost its lease may still be
    // answered after the run that took over recorded the same answer.
    conn.prepare_cached(
        "UPDATE effects SET state = 'done', response = ?2, updated_at = ?3
          WHERE key = ?1 AND state = 'pending'",
    )?
    .execute(params![key.as_str(), response, now])?;
    Ok(())
}

/// Extends the lease of `invocation` if `lease.owner` still holds it.
pub(crate) fn renew_lease_in(
    conn: &Connection,
    invocation: &InvocationKey,
    lease: &Lease<'_>,
) -> rusqlite::Result<bool> {
    let n = conn
        .prepare_cached(
            "UPDATE invocations SET lease_expires_at = ?3
              WHERE key = ?1 AND lease_owner = ?2 AND state = 'running'",
        )?
        .execute(params![invocation.as_str(), lease.owner, lease.until])?;
    Ok(n == 1)
}

/// Why a run may not journal an effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Another host took the invocation over (this run's lease expired).
    LeaseLost,
    /// The run had not journaled its invocation, and another run did meanwhile.
    Superseded,
}

/// Makes sure `lease.owner` holds `invocation` before an effect is journaled: renews
/// its lease, or, for a run that has not journaled the invocation yet
/// (`unjournaled`), journals it running under that lease.
pub(crate) fn hold_in(
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

impl Store {
    /// The journaled effect at `seq` of `invocation`, if any.
    pub fn effect(&self, invocation: &InvocationKey, seq: u32) -> Result<Option<EffectRecord>> {
        self.flush_key(invocation);
        self.with(|conn| get(conn, invocation, seq))
    }

    /// In one immediate transaction: renews the run's lease (or, for a run that has
    /// not journaled its invocation yet, writes the invocation with the lease),
    /// journals the effect as pending unless it is journaled already, counts one more
    /// attempt, and returns the key to use, read back from the journal (never
    /// recomputed), with the attempt's number. The caller makes this write durable
    /// ([`Store::make_durable`]) before the provider is called: it is what lets a
    /// retry after a crash or a power cut find the key it must reuse.
    ///
    /// When the run may not make the attempt ([`Refusal`]), nothing is written.
    pub(crate) fn claim_attempt(
        &self,
        effect: &NewEffect<'_>,
        lease: &Lease<'_>,
        unjournaled: Option<&NewInvocation>,
    ) -> Result<std::result::Result<(EffectKey, u32), Refusal>> {
        self.transaction(|tx| {
            if let Err(refusal) = hold_in(tx, effect.invocation, lease, unjournaled)? {
                return Ok(Err(refusal));
            }
            insert(tx, effect, EffectState::Pending)?;
            Ok(Ok(begin_attempt_in(
                tx,
                effect.invocation,
                effect.seq,
                effect.now,
            )?))
        })
    }

    /// How many effects of `invocation` are journaled at position `seq` or later.
    pub fn effects_from(&self, invocation: &InvocationKey, seq: u32) -> Result<u32> {
        self.flush_key(invocation);
        self.with(|conn| {
            conn.query_row(
                "SELECT COUNT(*) FROM effects WHERE invocation_key = ?1 AND seq >= ?2",
                params![invocation.as_str(), seq],
                |r| r.get(0),
            )
        })
    }

    /// Notes why the last attempt's outcome is unknown.
    pub fn note_attempt_error(&self, key: &EffectKey, error: &str, now: i64) -> Result<()> {
        self.with(|conn| {
            conn.execute(
                "UPDATE effects SET last_error = ?2, updated_at = ?3 WHERE key = ?1",
                params![key.as_str(), error, now],
            )?;
            Ok(())
        })
    }

    /// Saves the definitive answer of an effect.
    pub fn finish_effect(&self, key: &EffectKey, response: &str, now: i64) -> Result<()> {
        self.with(|conn| finish(conn, key, response, now))
    }
}
