//! The upstreams an operator disabled (`journal::upstream_disables`), in
//! PostgreSQL: every host of the journal reads the same rows.

use postgres::{GenericClient, Row};

use super::prepared::Db;
use crate::journal::UpstreamDisable;

/// A row of `upstream, disabled_by, disabled_at`.
fn from_row(row: &Row) -> UpstreamDisable {
    UpstreamDisable {
        upstream: row.get(0),
        by: row.get(1),
        at: row.get(2),
    }
}

/// Every disable, by upstream name.
pub(super) fn all<C: GenericClient>(
    db: &mut Db<'_, C>,
) -> Result<Vec<UpstreamDisable>, postgres::Error> {
    let rows = db.query(
        "SELECT upstream, disabled_by, disabled_at FROM upstream_disables ORDER BY upstream",
        &[],
    )?;
    Ok(rows.iter().map(from_row).collect())
}

/// Disables `upstream` by `by` now (the database's clock), unless it is disabled
/// already; the disable on record.
pub(super) fn disable_in<C: GenericClient>(
    db: &mut Db<'_, C>,
    upstream: &str,
    by: &str,
) -> Result<UpstreamDisable, postgres::Error> {
    // One statement: a separate SELECT after `DO NOTHING` could find the row gone
    // (an enable committed in between, READ COMMITTED). The no-op update returns
    // the disable on record, keeping its first disabler.
    db.query_one(
        concat!(
            "INSERT INTO upstream_disables (upstream, disabled_by, disabled_at) VALUES ($1, $2, ",
            db_now!(),
            ") ON CONFLICT (upstream) DO UPDATE SET disabled_by = upstream_disables.disabled_by",
            " RETURNING upstream, disabled_by, disabled_at"
        ),
        &[&upstream, &by],
    )
    .map(|row| from_row(&row))
}

/// Ends the disable of `upstream`; whether there was one.
pub(super) fn enable_in<C: GenericClient>(
    db: &mut Db<'_, C>,
    upstream: &str,
) -> Result<bool, postgres::Error> {
    db.execute(
        "DELETE FROM upstream_disables WHERE upstream = $1",
        &[&upstream],
    )
    .map(|deleted| deleted > 0)
}
