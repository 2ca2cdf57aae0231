//! Effects a person must resolve: a pending effect of an unkeyed provider may or may
//! not have happened, and repeating it could do it twice, so the guard fails closed
//! until someone who can look downstream says which it was.

use rusqlite::{Connection, params};

use crate::journal::UnresolvedEffect;

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
                        e.attempts, e.last_error, e.updated_at, e.ends_by
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
                    class: "unkeyed".into(),
                    ends_by: r.get(10)?,
                    pending: None,
                })
            })?
            .collect()
        }
    }
}
