//! Statements prepared once per connection, and the round trips a host makes.
//!
//! A statement given to the `postgres` crate as text is prepared (one round trip) and
//! then run (another) every time. The journal's statements are fixed texts, so each
//! connection prepares each one once, on first use, and keeps it: a call's statement
//! is then one round trip. [`Db`] is what the journal's steps use: a connection or a
//! transaction on it, with that connection's prepared statements, counting the round
//! trips it makes (the bench prints them per call).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use postgres::types::ToSql;
use postgres::{Client, GenericClient, Row, Statement};

type PgResult<T> = Result<T, postgres::Error>;

/// The statements prepared on one connection, by their text (they live and die
/// with its session).
#[derive(Default)]
pub(super) struct Statements(HashMap<&'static str, Statement>);

/// One pooled connection and the statements prepared on it.
pub(super) struct Conn {
    pub(super) client: Client,
    pub(super) statements: Statements,
    /// When its last use ended well (an answer from the server), if it was used.
    pub(super) answered_at: Option<std::time::Instant>,
}

impl Conn {
    /// A connection with nothing prepared yet.
    pub(super) fn new(client: Client) -> Self {
        Self {
            client,
            statements: Statements::default(),
            answered_at: None,
        }
    }
}

/// A connection (or a transaction on it) with its prepared statements.
pub(super) struct Db<'a, C> {
    /// The client itself, for statements that are not worth preparing (an
    /// operator's reads and writes): each is two round trips.
    pub(super) c: &'a mut C,
    statements: &'a mut Statements,
    trips: &'a AtomicU64,
}

impl<'a, C> Db<'a, C> {
    /// `client` (a connection, or a transaction on it) with the connection's
    /// `statements`, counting round trips in `trips`.
    pub(super) fn new(c: &'a mut C, statements: &'a mut Statements, trips: &'a AtomicU64) -> Self {
        Self {
            c,
            statements,
            trips,
        }
    }
}

impl<C: GenericClient> Db<'_, C> {
    /// Notes `n` round trips to the server.
    pub(super) fn trip(&self, n: u64) {
        self.trips.fetch_add(n, Ordering::Relaxed);
    }

    /// `sql`, prepared on this connection (preparing it is a round trip, once).
    fn statement(&mut self, sql: &'static str) -> PgResult<Statement> {
        if let Some(statement) = self.statements.0.get(sql) {
            return Ok(statement.clone());
        }
        self.trip(1);
        let statement = self.c.prepare(sql)?;
        self.statements.0.insert(sql, statement.clone());
        Ok(statement)
    }

    /// Runs the prepared `sql`; the rows it changed.
    pub(super) fn execute(
        &mut self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> PgResult<u64> {
        let statement = self.statement(sql)?;
        self.trip(1);
        self.c.execute(&statement, params)
    }

    /// Runs the prepared `sql`; its one row.
    pub(super) fn query_one(
        &mut self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> PgResult<Row> {
        let statement = self.statement(sql)?;
        self.trip(1);
        self.c.query_one(&statement, params)
    }

    /// Runs the prepared `sql`; its rows.
    pub(super) fn query(
        &mut self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> PgResult<Vec<Row>> {
        let statement = self.statement(sql)?;
        self.trip(1);
        self.c.query(&statement, params)
    }

    /// Runs the prepared `sql`; its row, if any.
    pub(super) fn query_opt(
        &mut self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> PgResult<Option<Row>> {
        let statement = self.statement(sql)?;
        self.trip(1);
        self.c.query_opt(&statement, params)
    }
}

impl<C> std::ops::Deref for Db<'_, C> {
    type Target = C;
    fn deref(&self) -> &C {
        self.c
    }
}

/// The client itself, for what is not a prepared statement (a statement built at run
/// time, `batch_execute`, a savepoint): each statement two round trips.
impl<C> std::ops::DerefMut for Db<'_, C> {
    fn deref_mut(&mut self) -> &mut C {
        self.c
    }
}
