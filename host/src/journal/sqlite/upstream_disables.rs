//! The upstreams an operator disabled (`journal::upstream_disables`), in SQLite.

use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::journal::UpstreamDisable;

/// A row of `upstream, disabled_by, disabled_at`.
fn from_row(row: &Row<'_>) -> rusqlite::Result<UpstreamDisable> {
    Ok(UpstreamDisable {
        upstream: row.get(0)?,
        by: row.get(1)?,
        at: row.get(2)?,
    })
}

/// Every disable, by upstream name.
pub(super) fn all(conn: &Connection) -> rusqlite::Result<Vec<UpstreamDisable>> {
    conn.prepare_cached(
        "SELECT upstream, disabled_by, disabled_at FROM upstream_disables ORDER BY upstream",
    )?
    .query_map([], from_row)?
    .collect()
}

/// Disables `upstream` by `by` at `now`, unless it is disabled already; the disable
/// on record.
pub(super) fn disable_in(
    conn: &Connection,
    upstream: &str,
    by: &str,
    now: i64,
) -> rusqlite::Result<UpstreamDisable> {
    conn.execute(
        "INSERT INTO upstream_disables (upstream, disabled_by, disabled_at) VALUES (?1, ?2, ?3)
         ON CONFLICT (upstream) DO NOTHING",
        params![upstream, by, now],
    )?;
    conn.query_row(
        "SELECT upstream, disabled_by, disabled_at FROM upstream_disables WHERE upstream = ?1",
        [upstream],
        from_row,
    )
}

/// Ends the disable of `upstream`; whether there was one.
pub(super) fn enable_in(conn: &Connection, upstream: &str) -> rusqlite::Result<bool> {
    conn.query_row(
        "DELETE FROM upstream_disables WHERE upstream = ?1 RETURNING 1",
        [upstream],
        |_| Ok(()),
    )
    .optional()
    .map(|deleted| deleted.is_some())
}
