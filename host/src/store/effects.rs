//! Effect records: one per guarded host-import call, written before the provider runs.

use rusqlite::{Connection, OptionalExtension, params};

use super::Store;
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
        "SELECT key, provider, operation, fingerprint, state, attempts, response
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
            })
    })
    .optional()
}

/// Journals an effect with its first attempt already counted, and reads its key back
/// (a later attempt never recomputes it).
pub(crate) fn insert(
    conn: &Connection,
    e: &NewEffect<'_>,
    state: EffectState,
) -> rusqlite::Result<(EffectKey, u32)> {
    conn.prepare_cached(
        "INSERT INTO effects (key, invocation_key, seq, provider, class, operation, fingerprint,
                              state, attempts, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 1, ?9, ?9)
      RETURNING key, attempts",
    )?
    .query_row(
        params![
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
        ],
        |r| Ok((EffectKey::from_stored(r.get(0)?), r.get(1)?)),
    )
}

pub(crate) fn begin_attempt_in(
    conn: &Connection,
    invocation: &InvocationKey,
    seq: u32,
    now: i64,
) -> rusqlite::Result<(EffectKey, u32)> {
    conn.prepare_cached(
        "UPDATE effects SET attempts = attempts + 1, updated_at = ?3
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
    conn.prepare_cached(
        "UPDATE effects SET state = 'done', response = ?2, updated_at = ?3 WHERE key = ?1",
    )?
    .execute(params![key.as_str(), response, now])?;
    Ok(())
}

impl Store {
    /// The journaled effect at `seq` of `invocation`, if any.
    pub fn effect(&self, invocation: &InvocationKey, seq: u32) -> Result<Option<EffectRecord>> {
        self.with(|conn| get(conn, invocation, seq))
    }

    /// Journals a pending effect with its first attempt counted, in one write, and
    /// returns the key read back with the attempt's number (1). The write is durable
    /// (see [`Store::make_durable`]) before this returns, so before the provider is
    /// called: it is what lets a retry after a crash or a power cut find the key it
    /// must reuse, and what tells it that an unkeyed effect may have happened.
    pub fn insert_pending(&self, effect: &NewEffect<'_>) -> Result<(EffectKey, u32)> {
        let first = self.with(|conn| insert(conn, effect, EffectState::Pending))?;
        self.make_durable()?;
        Ok(first)
    }

    /// Counts one more attempt and returns the key to use, read back from the journal
    /// (never recomputed) with the attempt's number.
    pub fn begin_attempt(&self, invocation: &InvocationKey, seq: u32, now: i64) -> Result<(EffectKey, u32)> {
        self.with(|conn| begin_attempt_in(conn, invocation, seq, now))
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
