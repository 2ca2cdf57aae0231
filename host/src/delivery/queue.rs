//! The outbox rows as the deliverer reads and updates them.

use rusqlite::{Connection, params};

/// A pending message, due now.
#[derive(Debug, Clone)]
pub(super) struct Queued {
    pub id: i64,
    pub effect_key: String,
    pub method: String,
    pub url: String,
    pub headers: Result<Vec<(String, String)>, String>,
    pub body: Vec<u8>,
}

/// Pending messages whose next attempt is due at `now`, oldest first.
pub(super) fn due(conn: &Connection, now: i64, limit: u32) -> rusqlite::Result<Vec<Queued>> {
    let mut stmt = conn.prepare(
        "SELECT id, effect_key, method, url, headers, body FROM outbox
          WHERE state = 'pending' AND next_attempt_at <= ?1
          ORDER BY next_attempt_at, id LIMIT ?2",
    )?;
    stmt.query_map(params![now, limit], |r| {
        let headers: String = r.get(4)?;
        Ok(Queued {
            id: r.get(0)?,
            effect_key: r.get(1)?,
            method: r.get(2)?,
            url: r.get(3)?,
            headers: serde_json::from_str(&headers)
                .map_err(|e| format!("the queued message's headers are unreadable: {e}")),
            body: r.get(5)?,
        })
    })?
    .collect()
}

/// Counts an attempt before it is made, so a sender that dies mid-request leaves
/// the attempt on record. Returns the attempt's number.
pub(super) fn begin_attempt(conn: &Connection, id: i64, now: i64) -> rusqlite::Result<u32> {
    conn.query_row(
        "UPDATE outbox SET attempts = attempts + 1, updated_at = ?2 WHERE id = ?1
         RETURNING attempts",
        params![id, now],
        |r| r.get(0),
    )
}

/// Records the delivery.
pub(super) fn delivered(
    conn: &Connection,
    id: i64,
    status: u16,
    response: &str,
    now: i64,
) -> rusqlite::Result<()> {
    conn.execute(
        "UPDATE outbox SET state = 'delivered', last_status = ?2, last_error = NULL,
                response = ?3, delivered_at = ?4, updated_at = ?4 WHERE id = ?1",
        params![id, status, response, now],
    )?;
    Ok(())
}

/// Keeps the message pending until `next_attempt_at`.
pub(super) fn retry_later(
    conn: &Connection,
    id: i64,
    status: Option<u16>,
    error: &str,
    next_attempt_at: i64,
    now: i64,
) -> rusqlite::Result<()> {
    conn.execute(
        "UPDATE outbox SET last_status = ?2, last_error = ?3, next_attempt_at = ?4,
                updated_at = ?5 WHERE id = ?1",
        params![id, status, error, next_attempt_at, now],
    )?;
    Ok(())
}

/// Gives up on the message.
pub(super) fn failed(
    conn: &Connection,
    id: i64,
    status: Option<u16>,
    error: &str,
    now: i64,
) -> rusqlite::Result<()> {
    conn.execute(
        "UPDATE outbox SET state = 'failed', last_status = ?2, last_error = ?3,
                updated_at = ?4 WHERE id = ?1",
        params![id, status, error, now],
    )?;
    Ok(())
}
