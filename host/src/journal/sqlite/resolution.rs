//! Effects a person must resolve: a pending effect of an unkeyed provider may or may
//! not have happened, and repeating it could do it twice, so the guard fails closed
//! until someone who can look downstream says which it was.

use rusqlite::{Connection, OptionalExtension, params};

use crate::journal::{Answer, Resolution, UnresolvedEffect};

/// Pending effects of unkeyed providers that no live run holds (the run stopped on
/// them, or its host died), oldest first; `now` decides which leases are live.
pub(super) fn unresolved_in(
    conn: &Connection,
    now: i64,
) -> rusqlite::Result<Vec<UnresolvedEffect>> {
    {
        {
            let mut stmt = conn.prepare_cached(
                "SELECT e.key, e.invocation_key, i.scope, i.tool, e.seq, e.provider, e.operation,
                        e.attempts, e.last_error, e.updated_at
                   FROM effects e JOIN invocations i ON i.key = e.invocation_key
                  WHERE e.state = 'pending' AND e.class = 'unkeyed' AND e.resolution IS NULL
                    AND NOT (i.state = 'running' AND i.lease_expires_at > ?1)
                    AND i.state <> 'completed' 
                  ORDER BY e.updated_at, e.key",
            )?;
            stmt.query_map(params![now], |r| {
                Ok(UnresolvedEffect {
                    key: r.get(0)?,
                    invocation: r.get(1)?,
                    conversation: r.get(2)?,
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
        }
    }
}

/// Records a person's decision about the pending unkeyed effect `effect_key`.
/// `Performed` finishes it with `response` (JSON, the downstream's answer if the
/// person knows it); `NotPerformed` lets the next run try once more under the same
/// key. `Err` names why it is refused unless the effect is pending, unkeyed and not
/// held by a live run.
pub(super) fn resolve_in(
    tx: &Connection,
    effect_key: &str,
    resolution: Resolution,
    response: &serde_json::Value,
    now: i64,
) -> rusqlite::Result<Result<(), String>> {
    {
        {
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
            if invocation_state == "completed" {
                return Ok(Err(
                    "its call was abandoned (justonce abandon) and no retry will resume it; \
                     the journal keeps the effect as it was"
                        .into(),
                ));
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
                    params![effect_key, Answer::Ok(response.clone()).to_stored(), now],
                )?,
                Resolution::NotPerformed => tx.execute(
                    "UPDATE effects SET resolution = 'not_performed', resolved_at = ?2, updated_at = ?2
                      WHERE key = ?1",
                    params![effect_key, now],
                )?,
            };
            Ok(Ok(()))
        }
    }
}
