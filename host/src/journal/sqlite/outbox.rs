//! The outbox queue on SQLite: one delivery pass at a time, under a lock file next to
//! the database (`<db>.deliver.lock`), which the operating system releases when the
//! process dies, so a restarted deliverer resumes at once.

use std::path::{Path, PathBuf};

use rusqlite::{OptionalExtension, params};

use super::SqliteJournal;
use crate::error::Result;
use crate::journal::outbox::{
    DEPTH_SQL, MESSAGE_COLUMNS, OutboxDepth, OutboxMessage, OutboxQueue, SQLITE_SCHEMA, Settle,
    Taken, parse_headers, settle_sql,
};

impl OutboxQueue for SqliteJournal {
    fn prepare_outbox(&self) -> Result<()> {
        self.write(|conn| conn.execute_batch(SQLITE_SCHEMA))
    }

    fn pass_lock_file(&self) -> Option<PathBuf> {
        let path = self.path();
        (path != Path::new(":memory:")).then(|| {
            let mut name = path.as_os_str().to_owned();
            name.push(".deliver.lock");
            PathBuf::from(name)
        })
    }

    fn take_message(&self, now: i64, _hold_ms: i64, skip: &[i64]) -> Result<Option<Taken>> {
        // Not hidden: passes are exclusive under the lock file.
        let skip = serde_json::to_string(skip).expect("ids serialize");
        let taken = self.transaction(|tx| {
            let taken = tx
                .query_row(
                    "UPDATE outbox SET attempts = attempts + 1, updated_at = ?1
                      WHERE id = (SELECT id FROM outbox
                                   WHERE state = 'pending' AND next_attempt_at <= ?1
                                     AND id NOT IN (SELECT value FROM json_each(?2))
                                   ORDER BY next_attempt_at, id LIMIT 1)
                  RETURNING id, effect_key, method, url, headers, body, attempts, tool",
                    params![now, skip],
                    |r| {
                        let headers: String = r.get(4)?;
                        Ok(Taken {
                            id: r.get(0)?,
                            effect_key: r.get(1)?,
                            method: r.get(2)?,
                            url: r.get(3)?,
                            headers: parse_headers(&headers),
                            body: r.get(5)?,
                            attempt: r.get(6)?,
                            tool: r.get(7)?,
                        })
                    },
                )
                .optional()?;
            Ok(Ok::<_, ()>(taken))
        })?;
        let taken = taken.unwrap_or(None);
        // Nothing leaves before the record that keys it is as durable as promised:
        // the enqueue (with its invocation and effect) committed unsynced, its
        // outcome's durable point may not have come yet, and a power cut then would
        // lose the message after it was sent; the retry would enqueue it again under
        // a new generation, a new key. One fsync covers the enqueue and this take
        // (and nothing when the commits are on disk already).
        if taken.is_some() && !crate::mutants::on(crate::mutants::Mutant::DeliveryBeforeDurable) {
            self.durable_if_full()?;
        }
        Ok(taken)
    }

    fn settle_message(&self, taken: &Taken, settle: Settle<'_>, now: i64) -> Result<()> {
        let c = settle.columns();
        self.write(|conn| {
            conn.execute(
                &settle_sql('?', "?8"),
                params![
                    taken.id,
                    c.state,
                    c.status,
                    c.error,
                    c.response,
                    c.retry_in_ms,
                    taken.attempt,
                    now
                ],
            )
        })?;
        Ok(())
    }

    fn outbox_messages(&self) -> Result<Vec<OutboxMessage>> {
        self.with(|conn| {
            let mut stmt =
                conn.prepare(&format!("SELECT {MESSAGE_COLUMNS} FROM outbox ORDER BY id"))?;
            stmt.query_map([], |r| {
                Ok(OutboxMessage {
                    id: r.get(0)?,
                    effect_key: r.get(1)?,
                    tool: r.get(2)?,
                    method: r.get(3)?,
                    url: r.get(4)?,
                    state: r.get(5)?,
                    attempts: r.get(6)?,
                    last_status: r.get(7)?,
                    last_error: r.get(8)?,
                })
            })?
            .collect()
        })
    }

    fn outbox_depth(&self) -> Result<OutboxDepth> {
        self.with_reader(|conn| {
            let exists: bool = conn.query_row(
                "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'outbox')",
                [],
                |r| r.get(0),
            )?;
            if !exists {
                return Ok(OutboxDepth::default());
            }
            conn.query_row(DEPTH_SQL, [], |r| {
                Ok(OutboxDepth {
                    pending: r.get(0)?,
                    retrying: r.get(1)?,
                    failed: r.get(2)?,
                })
            })
        })
    }
}
