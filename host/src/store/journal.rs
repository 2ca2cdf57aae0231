//! Reading the journal for people (`justonce journal`) and expiring it (`justonce gc`).

use rusqlite::params;
use serde::Serialize;

use super::Store;
use crate::error::Result;

/// One invocation with its effects, as `justonce journal` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct JournalEntry {
    /// The invocation key.
    pub key: String,
    /// The conversation scope.
    pub scope: String,
    /// The tool.
    pub tool: String,
    /// `running`, `incomplete` or `completed`.
    pub state: String,
    /// How many times the guest was run for it.
    pub runs: u32,
    /// The tool-call ids that map to it.
    pub tool_call_ids: Vec<String>,
    /// The saved outcome, when completed.
    pub outcome: Option<serde_json::Value>,
    /// When it was created (ms since the epoch).
    pub created_at: i64,
    /// Its effects, in order.
    pub effects: Vec<JournalEffect>,
}

/// One effect, as `justonce journal` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct JournalEffect {
    /// Position in the invocation.
    pub seq: u32,
    /// The effect key.
    pub key: String,
    /// Provider name.
    pub provider: String,
    /// Provider class.
    pub class: String,
    /// Operation.
    pub operation: String,
    /// `pending` or `done`.
    pub state: String,
    /// Attempts made.
    pub attempts: u32,
    /// The saved answer, when done.
    pub response: Option<serde_json::Value>,
    /// Why the last attempt's outcome was unknown, if it was.
    pub last_error: Option<String>,
    /// What a person decided about it (`performed`, `not_performed`), if anything.
    pub resolution: Option<String>,
}

/// What `gc` removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct GcReport {
    /// Invocation records removed.
    pub invocations: u64,
    /// Effect records removed with them.
    pub effects: u64,
    /// Tool-call-id aliases removed with them.
    pub aliases: u64,
}

fn parse_json(text: Option<String>) -> Option<serde_json::Value> {
    text.map(|t| serde_json::from_str(&t).unwrap_or(serde_json::Value::String(t)))
}

impl Store {
    /// Invocations (newest first), optionally of one conversation, with their effects.
    pub fn journal(&self, scope: Option<&str>, limit: u32) -> Result<Vec<JournalEntry>> {
        self.journal_where(scope, None, limit)
    }

    /// Invocations (newest first) whose scope starts with `prefix` (the calls of one
    /// principal, see [`crate::host::principal_scope`]), with their effects.
    pub fn journal_by_prefix(&self, prefix: &str, limit: u32) -> Result<Vec<JournalEntry>> {
        self.journal_where(None, Some(prefix), limit)
    }

    fn journal_where(
        &self,
        scope: Option<&str>,
        prefix: Option<&str>,
        limit: u32,
    ) -> Result<Vec<JournalEntry>> {
        self.flush()?;
        self.with(|conn| {
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
        })
    }

    /// Deletes every record created at or before `now - retention`, except invocations
    /// that a live lease still holds.
    pub fn gc(&self, now: i64, retention_ms: i64) -> Result<GcReport> {
        self.flush()?;
        let cutoff = now.saturating_sub(retention_ms);
        let report = self.transaction(|tx| {
            let expired = "SELECT key FROM invocations WHERE created_at <= ?1
                             AND NOT (state = 'running' AND lease_expires_at > ?2)";
            let effects = tx.execute(
                &format!("DELETE FROM effects WHERE invocation_key IN ({expired})"),
                params![cutoff, now],
            )?;
            let aliases = tx.execute(
                &format!("DELETE FROM aliases WHERE invocation_key IN ({expired})"),
                params![cutoff, now],
            )?;
            let invocations = tx.execute(
                "DELETE FROM invocations WHERE created_at <= ?1
                   AND NOT (state = 'running' AND lease_expires_at > ?2)",
                params![cutoff, now],
            )?;
            Ok(Ok::<_, ()>(GcReport {
                invocations: invocations as u64,
                effects: effects as u64,
                aliases: aliases as u64,
            }))
        })?;
        // After the delete: a replay remembered meanwhile may be of a deleted record.
        // (A `gc` in another process is not seen here; this process replays what it
        // answered within its own retention.)
        self.forget_recent();
        Ok(report.expect("gc never fails logically"))
    }
}
