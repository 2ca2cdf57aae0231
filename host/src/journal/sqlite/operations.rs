//! The rows `justonce forget`, `abandon` and `resolve` read and write on SQLite;
//! what they decide is shared with PostgreSQL (`journal/operate.rs`).

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value;

use super::journal::effects_of;
use crate::journal::operate::{Found, OperateTx};
use crate::journal::{Action, JournalEffect, JournalOperation};

/// One operation's transaction.
pub(super) struct Tx<'a>(pub &'a Connection);

/// The id of the newest operation on the journal (0 when there is none): a change
/// tells a long-lived host that records it remembers may be gone.
pub(super) fn latest_id(conn: &Connection) -> rusqlite::Result<i64> {
    conn.prepare_cached("SELECT coalesce(max(id), 0) FROM operations")?
        .query_row([], |r| r.get(0))
}

/// The operations on `key`, oldest first.
pub(super) fn operations_of(
    conn: &Connection,
    key: &str,
) -> rusqlite::Result<Vec<JournalOperation>> {
    conn.prepare_cached(
        "SELECT action, who, at, detail FROM operations WHERE invocation_key = ?1 ORDER BY at, id",
    )?
    .query_map(params![key], |r| {
        let action: String = r.get(0)?;
        let detail: String = r.get(3)?;
        Ok(JournalOperation {
            key: key.to_string(),
            // The table's CHECK admits only the actions this build knows.
            action: Action::parse(&action).unwrap_or(Action::Forget),
            by: r.get(1)?,
            at: r.get(2)?,
            detail: serde_json::from_str(&detail).unwrap_or(Value::String(detail)),
        })
    })?
    .collect()
}

impl OperateTx for Tx<'_> {
    type Error = rusqlite::Error;

    fn find(&mut self, key: &str) -> rusqlite::Result<Option<Found>> {
        self.0
            .query_row(
                "SELECT state, lease_expires_at, outcome, lease_owner FROM invocations WHERE key = ?1",
                params![key],
                |r| {
                    Ok(Found {
                        state: r.get(0)?,
                        lease_owner: r.get(3)?,
                        lease_expires_at: r.get(1)?,
                        outcome: r.get(2)?,
                        now: None,
                    })
                },
            )
            .optional()
    }

    fn effects(&mut self, key: &str) -> rusqlite::Result<Vec<JournalEffect>> {
        effects_of(self.0, key)
    }

    fn operations(&mut self, key: &str) -> rusqlite::Result<Vec<JournalOperation>> {
        operations_of(self.0, key)
    }

    fn delete(&mut self, key: &str) -> rusqlite::Result<()> {
        self.0.execute(
            "DELETE FROM effects WHERE invocation_key = ?1",
            params![key],
        )?;
        self.0.execute(
            "DELETE FROM aliases WHERE invocation_key = ?1",
            params![key],
        )?;
        self.0
            .execute("DELETE FROM invocations WHERE key = ?1", params![key])?;
        Ok(())
    }

    fn close(&mut self, key: &str, outcome: &str, now: i64) -> rusqlite::Result<()> {
        self.0.execute(
            "UPDATE invocations SET state = 'completed', outcome = ?2, completed_at = ?3,
                    updated_at = ?3, lease_owner = NULL, lease_expires_at = NULL
              WHERE key = ?1",
            params![key, outcome, now],
        )?;
        Ok(())
    }

    fn record(&mut self, op: &JournalOperation) -> rusqlite::Result<()> {
        self.0.execute(
            "INSERT INTO operations (invocation_key, action, who, at, detail)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                op.key,
                op.action.as_str(),
                op.by,
                op.at,
                op.detail.to_string()
            ],
        )?;
        Ok(())
    }

    fn effect_of(&mut self, key: &str) -> rusqlite::Result<Option<String>> {
        self.0
            .query_row(
                "SELECT invocation_key FROM effects WHERE key = ?1",
                params![key],
                |r| r.get(0),
            )
            .optional()
    }

    fn resolve_effect(
        &mut self,
        key: &str,
        performed: Option<&str>,
        now: i64,
    ) -> rusqlite::Result<()> {
        match performed {
            Some(answer) => self.0.execute(
                "UPDATE effects SET state = 'done', response = ?2, resolution = 'performed',
                        resolved_at = ?3, updated_at = ?3
                  WHERE key = ?1",
                params![key, answer, now],
            )?,
            None => self.0.execute(
                "UPDATE effects SET resolution = 'not_performed', resolved_at = ?2,
                        updated_at = ?2
                  WHERE key = ?1",
                params![key, now],
            )?,
        };
        Ok(())
    }
    fn answer_effect(&mut self, key: &str, answer: &str, now: i64) -> rusqlite::Result<()> {
        self.0.execute(
            "UPDATE effects SET state = 'done', response = ?2, updated_at = ?3
              WHERE key = ?1 AND state = 'pending'",
            params![key, answer, now],
        )?;
        Ok(())
    }
}
