//! Reading the journal for people (`justonce journal`) and expiring it (`justonce gc`).

use rusqlite::{Connection, params};

use crate::journal::{GcReport, JournalEffect, JournalEntry};

fn parse_json(text: Option<String>) -> Option<serde_json::Value> {
    text.map(|t| serde_json::from_str(&t).unwrap_or(serde_json::Value::String(t)))
}

/// Invocations (newest first), optionally of one scope, with their effects.
pub(super) fn entries_in(
    conn: &Connection,
    scope: Option<&str>,
    prefix: Option<&str>,
    limit: u32,
) -> rusqlite::Result<Vec<JournalEntry>> {
    {
        {
            let mut inv = conn.prepare_cached(
                "SELECT key, scope, tool, state, runs, outcome, created_at FROM invocations
                  WHERE (?1 IS NULL OR scope = ?1)
                    AND (?3 IS NULL OR substr(scope, 1, length(?3)) = ?3)
                  ORDER BY created_at DESC, key LIMIT ?2",
            )?;
            let mut entries = inv
                .query_map(params![scope, limit, prefix], |r| {
                    Ok(JournalEntry {
                        key: r.get(0)?,
                        scope: r.get(1)?,
                        tool: r.get(2)?,
                        state: r.get(3)?,
                        runs: r.get(4)?,
                        tool_call_ids: Vec::new(),
                        outcome: parse_json(r.get(5)?),
                        created_at: r.get(6)?,
                        effects: Vec::new(),
                    })
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let mut ids = conn.prepare_cached(
                "SELECT tool_call_id FROM aliases WHERE invocation_key = ?1 ORDER BY created_at, tool_call_id",
            )?;
            let mut effects = conn.prepare_cached(
                "SELECT seq, key, provider, class, operation, state, attempts, response, last_error,
                        resolution
                   FROM effects WHERE invocation_key = ?1 ORDER BY seq",
            )?;
            for entry in &mut entries {
                entry.tool_call_ids = ids
                    .query_map(params![entry.key], |r| r.get(0))?
                    .collect::<rusqlite::Result<_>>()?;
                entry.effects = effects
                    .query_map(params![entry.key], |r| {
                        Ok(JournalEffect {
                            seq: r.get(0)?,
                            key: r.get(1)?,
                            provider: r.get(2)?,
                            class: r.get(3)?,
                            operation: r.get(4)?,
                            state: r.get(5)?,
                            attempts: r.get(6)?,
                            response: parse_json(r.get(7)?),
                            last_error: r.get(8)?,
                            resolution: r.get(9)?,
                        })
                    })?
                    .collect::<rusqlite::Result<_>>()?;
            }
            Ok(entries)
        }
    }
}

/// Deletes every completed record whose retention ended at or before `now`; a call
/// that is running, suspended or waiting for a person is never deleted.
pub(super) fn gc_in(tx: &Connection, now: i64, retention_ms: i64) -> rusqlite::Result<GcReport> {
    let cutoff = now.saturating_sub(retention_ms);
    let expired = "SELECT key FROM invocations WHERE state = 'completed' AND completed_at <= ?1";
    let effects = tx.execute(
        &format!("DELETE FROM effects WHERE invocation_key IN ({expired})"),
        params![cutoff],
    )?;
    let aliases = tx.execute(
        &format!("DELETE FROM aliases WHERE invocation_key IN ({expired})"),
        params![cutoff],
    )?;
    let invocations = tx.execute(
        "DELETE FROM invocations WHERE state = 'completed' AND completed_at <= ?1",
        params![cutoff],
    )?;
    // Tables of providers that keep their rows in this file, if they exist: delivered
    // (or given up) outbox messages, and the built-in mailbox's rows.
    let has = |table: &str| -> rusqlite::Result<bool> {
        tx.query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1)",
            params![table],
            |r| r.get(0),
        )
    };
    let outbox = if has("outbox")? {
        tx.execute(
            "DELETE FROM outbox WHERE state IN ('delivered', 'failed') AND updated_at <= ?1",
            params![cutoff],
        )?
    } else {
        0
    };
    let mut mailbox = 0;
    if has("mailbox")? {
        mailbox += tx.execute("DELETE FROM mailbox WHERE sent_at <= ?1", params![cutoff])?;
    }
    if has("mailbox_requests")? {
        mailbox += tx.execute(
            "DELETE FROM mailbox_requests WHERE received_at <= ?1",
            params![cutoff],
        )?;
    }
    Ok(GcReport {
        invocations: invocations as u64,
        effects: effects as u64,
        aliases: aliases as u64,
        outbox: outbox as u64,
        mailbox: mailbox as u64,
    })
}
