//! Effects a person must resolve: a pending effect of an unkeyed provider may or may
//! not have happened, and repeating it could do it twice, so the guard fails closed
//! until someone who can look downstream says which it was.

use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use super::Store;
use crate::error::{Error, Result};

/// What a person decided about a pending unkeyed effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Resolution {
    /// It happened: the effect is finished with the answer the person gave, and the
    /// resumed call replays that answer without calling the provider.
    Performed,
    /// It did not happen: the resumed call makes one more attempt under the same key.
    NotPerformed,
}

impl Resolution {
    /// The name stored in the journal.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Performed => "performed",
            Self::NotPerformed => "not_performed",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Self> {
        match s {
            "performed" => Some(Self::Performed),
            "not_performed" => Some(Self::NotPerformed),
            _ => None,
        }
    }
}

/// A pending unkeyed effect whose run has stopped: it waits for a person.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UnresolvedEffect {
    /// The effect key (what `justonce resolve` takes).
    pub key: String,
    /// The invocation it belongs to.
    pub invocation: String,
    /// The invocation's conversation scope.
    pub scope: String,
    /// The tool that asked for it.
    pub tool: String,
    /// Its position in the invocation.
    pub seq: u32,
    /// The provider.
    pub provider: String,
    /// The operation.
    pub operation: String,
    /// Attempts made.
    pub attempts: u32,
    /// Why the last attempt's outcome was unknown, if known.
    pub last_error: Option<String>,
    /// When it was last touched (ms since the epoch).
    pub updated_at: i64,
}

impl Store {
    /// Pending effects of unkeyed providers that no live run holds (the run stopped
    /// on them, or its host died), oldest first; `now` decides which leases are live.
    pub fn unresolved(&self, now: i64) -> Result<Vec<UnresolvedEffect>> {
        self.flush()?;
        self.with(|conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT e.key, e.invocation_key, i.scope, i.tool, e.seq, e.provider, e.operation,
                        e.attempts, e.last_error, e.updated_at
                   FROM effects e JOIN invocations i ON i.key = e.invocation_key
                  WHERE e.state = 'pending' AND e.class = 'unkeyed' AND e.resolution IS NULL
                    AND NOT (i.state = 'running' AND i.lease_expires_at > ?1)
                  ORDER BY e.updated_at, e.key",
            )?;
            stmt.query_map(params![now], |r| {
                Ok(UnresolvedEffect {
                    key: r.get(0)?,
                    invocation: r.get(1)?,
                    scope: r.get(2)?,
                    tool: r.get(3)?,
                    seq: r.get(4)?,
                    provider: r.get(5)?,
                    operation: r.get(6)?,
                    attempts: r.get(7)?,
                    last_error: r.get(8)?,
                    updated_at: r.get(9)?,
                })
            })?
            .collect()
        })
    }

    /// Records a person's decision about the pending unkeyed effect `effect_key`.
    /// `Performed` finishes it with `response` (JSON, the downstream's answer if the
    /// person knows it); `NotPerformed` lets the next run try once more under the same
    /// key. Refused, naming the reason, unless the effect is pending, unkeyed and not
    /// held by a live run.
    pub fn resolve(
        &self,
        effect_key: &str,
        resolution: Resolution,
        response: &serde_json::Value,
        now: i64,
    ) -> Result<()> {
        self.flush()?;
        let refused = self.transaction(|tx| {
            let row: Option<(String, String, String, Option<i64>)> = tx
                .query_row(
                    "SELECT e.state, e.class, i.state, i.lease_expires_at
                       FROM effects e JOIN invocations i ON i.key = e.invocation_key
                      WHERE e.key = ?1",
                    params![effect_key],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
                )
                .optional()?;
            let Some((state, class, invocation_state, lease)) = row else {
                return Ok(Err("the journal holds no effect with this key".to_string()));
            };
            if state != "pending" {
                return Ok(Err(
                    "it already has a definitive answer; there is nothing to resolve".into(),
                ));
            }
            if class != "unkeyed" {
                return Ok(Err(format!(
                    "it is a {class} effect; the host retries it under its key on the next call, so a person need not resolve it"
                )));
            }
            if invocation_state == "running" && lease.is_some_and(|t| t > now) {
                return Ok(Err(
                    "its call is running right now; resolve it after the run stops".into(),
                ));
            }
            match resolution {
                Resolution::Performed => tx.execute(
                    "UPDATE effects SET state = 'done', response = ?2, resolution = 'performed',
                            resolved_at = ?3, updated_at = ?3
                      WHERE key = ?1",
                    params![effect_key, crate::guard::stored_ok(response), now],
                )?,
                Resolution::NotPerformed => tx.execute(
                    "UPDATE effects SET resolution = 'not_performed', resolved_at = ?2, updated_at = ?2
                      WHERE key = ?1",
                    params![effect_key, now],
                )?,
            };
            Ok(Ok(()))
        })?;
        refused.map_err(|reason| Error::CannotResolve {
            effect: effect_key.to_string(),
            reason,
        })
    }
}
