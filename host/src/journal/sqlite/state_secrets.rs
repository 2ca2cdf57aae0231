//! The server's secrets that key request states (`ask::StateKeys`), in the journal so
//! every process of it checks every other's states.

use rusqlite::{Connection, params};

/// The secrets newest first: the current one and those rotated out less than
/// `keep_ms` before `now`.
pub(super) fn newest_first(
    conn: &Connection,
    now: i64,
    keep_ms: i64,
) -> rusqlite::Result<Vec<String>> {
    conn.prepare_cached(
        "SELECT secret FROM state_secrets
          WHERE rotated_at IS NULL OR rotated_at > ?1 - ?2
          ORDER BY id DESC",
    )?
    .query_map(params![now, keep_ms], |r| r.get(0))?
    .collect()
}

/// Journals `secret` as the first one, unless the journal holds one already.
pub(super) fn first_in(conn: &Connection, secret: &str, now: i64) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO state_secrets (id, secret, created_at)
         SELECT 1, ?1, ?2 WHERE NOT EXISTS (SELECT 1 FROM state_secrets)",
        params![secret, now],
    )?;
    Ok(())
}

/// Makes `secret` the newest; every other one is rotated out at `now`.
pub(super) fn rotate_in(conn: &Connection, secret: &str, now: i64) -> rusqlite::Result<()> {
    conn.execute(
        "UPDATE state_secrets SET rotated_at = ?1 WHERE rotated_at IS NULL",
        [now],
    )?;
    conn.execute(
        "INSERT INTO state_secrets (id, secret, created_at)
         SELECT coalesce(max(id), 0) + 1, ?1, ?2 FROM state_secrets",
        params![secret, now],
    )?;
    Ok(())
}
