//! The floors the figures are measured against: what the contract cannot do without,
//! measured on this machine in the same rounds as the figures.
//!
//! - (2) and (3): the journal writes a fresh call must make, with the journal's own
//!   rows. A copy of the journal's schema gets one echo and one send_receipt call's
//!   records through a real host; their rows are the templates. A no-effect call's
//!   floor is one point read of its key (is it a retry?) and one autocommit insert of
//!   its completed record; a one-effect call's is that read, one commit of its
//!   running record with its effect record (durable before the provider runs), and one
//!   commit of the outcome with the effect's answer (before the answer is returned).
//!   Same tables, indexes, row sizes and pragmas as the journal; no guard, no guest,
//!   no JSON, no checkpoint in the timed part (the WAL is truncated between rounds,
//!   untimed), so it is a lower bound of the journal's share.
//! - (6): the guest alone (`call_unguarded`, no journal) run by 1 and by 8 threads:
//!   what the cores can do for the calls' CPU work, the ceiling of the guarded
//!   scaling.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use justonce::{Durability, Runtime};
use rusqlite::types::Value as Sql;

/// One row of a journal table: its columns and values.
struct Row {
    columns: Vec<String>,
    values: Vec<Sql>,
}

impl Row {
    fn read(conn: &rusqlite::Connection, sql: &str) -> Row {
        let mut stmt = conn.prepare(sql).expect("template query");
        let columns: Vec<String> = stmt.column_names().iter().map(|c| c.to_string()).collect();
        let n = columns.len();
        let values = stmt
            .query_row([], |r| (0..n).map(|i| r.get::<_, Sql>(i)).collect())
            .expect("a template row");
        Row { columns, values }
    }

    fn set(&mut self, column: &str, value: Sql) {
        let i = self
            .columns
            .iter()
            .position(|c| c == column)
            .unwrap_or_else(|| panic!("no column {column}"));
        self.values[i] = value;
    }

    fn get(&self, column: &str) -> Sql {
        let i = self.columns.iter().position(|c| c == column).expect(column);
        self.values[i].clone()
    }

    fn insert_sql(&self, table: &str) -> String {
        let marks: Vec<String> = (1..=self.columns.len()).map(|i| format!("?{i}")).collect();
        format!(
            "INSERT INTO {table} ({}) VALUES ({})",
            self.columns.join(", "),
            marks.join(", ")
        )
    }
}

/// A journal-shaped store: the journal's schema and template rows of its records.
pub struct JournalRows {
    conn: rusqlite::Connection,
    echo: Row,
    receipt: Row,
    effect: Row,
    next: u64,
}

/// A key spread like the journal's (hex of a hash), never repeated.
fn key(n: u64) -> String {
    // splitmix64, twice: 32 hex digits as a SHA-256 prefix would be.
    let mix = |mut z: u64| {
        z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    format!("{:016x}{:016x}", mix(n), mix(n ^ 0xA5A5_A5A5))
}

impl JournalRows {
    /// Makes the store in `dir`: a real host journals one call of each kind there
    /// first, so the schema and the rows are the journal's.
    pub fn new(
        runtime: &Arc<Runtime>,
        dir: &Path,
        make_calls: impl FnOnce(&justonce::Host),
    ) -> Self {
        let db = dir.join("state.db");
        {
            let host = super::host_on(runtime, &db, Durability::Normal);
            make_calls(&host);
        }
        let conn = rusqlite::Connection::open(&db).expect("journal copy");
        let _: String = conn
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .expect("wal");
        // The journal's own settings (`journal/sqlite/mod.rs`).
        conn.execute_batch("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;")
            .expect("pragmas");
        let echo = Row::read(
            &conn,
            "SELECT * FROM invocations WHERE tool = 'echo' LIMIT 1",
        );
        let receipt = Row::read(
            &conn,
            "SELECT * FROM invocations WHERE tool = 'send_receipt' LIMIT 1",
        );
        let effect = Row::read(&conn, "SELECT * FROM effects LIMIT 1");
        JournalRows {
            conn,
            echo,
            receipt,
            effect,
            next: 0,
        }
    }

    /// A fresh key, and whether a record of it exists (the first look of a call).
    fn fresh_key(&mut self) -> String {
        self.next += 1;
        let key = key(self.next);
        let found: Option<String> = self
            .conn
            .prepare_cached("SELECT fingerprint FROM invocations WHERE key = ?1")
            .and_then(|mut s| {
                rusqlite::OptionalExtension::optional(s.query_row([&key], |r| r.get(0)))
            })
            .expect("lookup");
        assert!(found.is_none(), "a floor key repeated");
        key
    }

    /// (2)'s journal floor: the first look and one commit of the completed record.
    pub fn no_effect(&mut self) {
        let key = self.fresh_key();
        self.echo.set("key", Sql::Text(key));
        self.echo
            .set("scope", Sql::Text(format!("floor-{}", self.next)));
        let sql = self.echo.insert_sql("invocations");
        self.conn
            .prepare_cached(&sql)
            .and_then(|mut s| s.execute(rusqlite::params_from_iter(&self.echo.values)))
            .expect("insert");
    }

    /// (3)'s journal floor: the first look, the commit of the running record with its
    /// effect record, and the commit of the outcome with the effect's answer.
    pub fn one_effect(&mut self) {
        let key = self.fresh_key();
        let outcome = self.receipt.get("outcome");
        let response = self.effect.get("response");
        let mut running = Row {
            columns: self.receipt.columns.clone(),
            values: self.receipt.values.clone(),
        };
        running.set("key", Sql::Text(key.clone()));
        running.set("scope", Sql::Text(format!("floor-{}", self.next)));
        running.set("state", Sql::Text("running".into()));
        running.set("outcome", Sql::Null);
        running.set("completed_at", Sql::Null);
        running.set("lease_owner", Sql::Text("floor/1".into()));
        running.set("lease_expires_at", Sql::Integer(i64::MAX));
        self.effect
            .set("key", Sql::Text(self::key(self.next ^ (1 << 62))));
        self.effect.set("invocation_key", Sql::Text(key.clone()));
        self.effect.set("state", Sql::Text("pending".into()));
        self.effect.set("response", Sql::Null);
        let tx = self.conn.unchecked_transaction().expect("begin");
        tx.prepare_cached(&running.insert_sql("invocations"))
            .and_then(|mut s| s.execute(rusqlite::params_from_iter(&running.values)))
            .expect("insert the running record");
        tx.prepare_cached(&self.effect.insert_sql("effects"))
            .and_then(|mut s| s.execute(rusqlite::params_from_iter(&self.effect.values)))
            .expect("insert the effect record");
        tx.commit().expect("commit the claim");
        let tx = self.conn.unchecked_transaction().expect("begin");
        tx.prepare_cached(
            "UPDATE invocations SET state = 'completed', outcome = ?2, completed_at = 1,
                    updated_at = 1, lease_owner = NULL, lease_expires_at = NULL
              WHERE key = ?1",
        )
        .and_then(|mut s| s.execute(rusqlite::params![key, outcome]))
        .expect("save the outcome");
        tx.prepare_cached(
            "UPDATE effects SET state = 'done', response = ?2, attempts = 1, updated_at = 1
              WHERE invocation_key = ?1 AND seq = 0",
        )
        .and_then(|mut s| s.execute(rusqlite::params![key, response]))
        .expect("save the effect's answer");
        tx.commit().expect("commit the outcome");
    }

    /// Empties the WAL into the database, outside the timed part.
    pub fn checkpoint(&self) {
        let _ = self
            .conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
    }
}

/// Calls per second of the guest alone (`call_unguarded`, no guard, no journal)
/// with `threads` threads: the CPU ceiling of figure (6).
pub fn bare_throughput(
    runtime: &Arc<Runtime>,
    tool: &str,
    args: &str,
    threads: usize,
    run_for: Duration,
) -> f64 {
    let done = AtomicU64::new(0);
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut calls = 0;
                while start.elapsed() < run_for {
                    let _ = runtime.call_unguarded(tool, args);
                    calls += 1;
                }
                done.fetch_add(calls, Ordering::Relaxed);
            });
        }
    });
    done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}
