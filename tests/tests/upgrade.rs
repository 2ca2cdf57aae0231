//! Rolling upgrades: a new host works on a journal an old host still uses. The
//! journal is made at the previous release's schema by that release's migrations
//! (append-only, so replaying them is exactly what that release made), holds a call
//! the old release wrote, and is migrated by a new host, which serves that call and
//! makes its own; every table and column the old release used is unchanged (the
//! migrations since only add tables, and columns its inserts may leave out), so the old host's own writes and reads go on: a call
//! it writes after the migration is served by the new host too. On SQLite and
//! PostgreSQL.

use std::collections::BTreeMap;
use std::path::Path;

use justonce::__private::postgres_testing::cluster;
use justonce::__private::schemas;
use justonce::CallRequest;
use serde_json::json;

use crate::support::{TestHost, test_host};

fn request(n: u64) -> CallRequest {
    CallRequest::new(
        "echo",
        json!({ "message": format!("call {n}") }).to_string(),
    )
    .conversation("upgrade")
}

/// A call as a host writes it, made on a scratch journal at `scratch`: what the old
/// release wrote too (the code that writes these tables did not change).
fn written_by_a_host(scratch: &str, n: u64) -> TestHost {
    let t = test_host(|b| b.database(scratch));
    let answered = t.host.call(&request(n)).unwrap();
    assert!(!answered.replayed);
    t
}

/// Every table's columns (name, type, not null, default), by table.
type Tables = BTreeMap<String, Vec<(String, String, bool, Option<String>)>>;

fn sqlite_tables(db: &Path) -> Tables {
    let conn = rusqlite::Connection::open(db).unwrap();
    let names: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    names
        .into_iter()
        .map(|table| {
            let columns = conn
                .prepare(&format!("PRAGMA table_info({table})"))
                .unwrap()
                .query_map([], |r| {
                    Ok((r.get(1)?, r.get(2)?, r.get::<_, i64>(3)? == 1, r.get(4)?))
                })
                .unwrap()
                .map(Result::unwrap)
                .collect();
            (table, columns)
        })
        .collect()
}

/// Copies the rows of the call tables from the SQLite journal `from` into `to`,
/// the columns `to` has (what the old release's host writes).
fn sqlite_copy_calls(from: &Path, to: &Path, old: &Tables) {
    let conn = rusqlite::Connection::open(to).unwrap();
    conn.execute("ATTACH DATABASE ?1 AS scratch", [from.to_str().unwrap()])
        .unwrap();
    for table in ["invocations", "effects", "aliases"] {
        let columns: Vec<&str> = old[table].iter().map(|c| c.0.as_str()).collect();
        let columns = columns.join(", ");
        conn.execute(
            &format!("INSERT INTO main.{table} ({columns}) SELECT {columns} FROM scratch.{table}"),
            [],
        )
        .unwrap();
    }
}

fn assert_old_tables_unchanged(old: &Tables, new: &Tables) {
    for (table, columns) in old {
        let Some(now) = new.get(table) else {
            panic!("the previous release's table {table} is gone");
        };
        // Its columns come first, as they were: what that release reads.
        assert_eq!(
            now.get(..columns.len()),
            Some(&columns[..]),
            "the previous release's columns of {table} are unchanged"
        );
        // A column added since is one its inserts may leave out: nullable, or with a
        // default.
        for (name, _, not_null, default) in &now[columns.len()..] {
            assert!(
                !*not_null || default.is_some(),
                "{table}.{name}, added since the previous release, is NOT NULL without a default: that release's inserts fail"
            );
        }
    }
    assert!(new.len() >= old.len());
}

#[test]
fn a_new_host_works_on_a_sqlite_journal_an_old_host_still_uses() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("journal.db");
    let mut conn = rusqlite::Connection::open(&db).unwrap();
    schemas::sqlite_migrate_to(&mut conn, schemas::SQLITE_PREVIOUS).unwrap();
    drop(conn);
    let old = sqlite_tables(&db);
    let scratch = dir.path().join("scratch-1.db");
    written_by_a_host(scratch.to_str().unwrap(), 1);
    sqlite_copy_calls(&scratch, &db, &old);

    // The new host migrates the journal and serves the old host's call.
    let new = test_host(|b| b.database(&db));
    let version: i64 = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, schemas::SQLITE_CURRENT, "migrated");
    assert!(new.host.call(&request(1)).unwrap().replayed, "served");
    assert!(!new.host.call(&request(2)).unwrap().replayed, "its own");
    assert_old_tables_unchanged(&old, &sqlite_tables(&db));

    // The old host goes on: a call it writes now is served by the new host too.
    let scratch = dir.path().join("scratch-3.db");
    written_by_a_host(scratch.to_str().unwrap(), 3);
    sqlite_copy_calls(&scratch, &db, &old);
    assert!(new.host.call(&request(3)).unwrap().replayed);
}

fn postgres_tables(url: &str) -> Tables {
    let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
    let mut tables = Tables::new();
    for row in client
        .query(
            "SELECT table_name, column_name, data_type, is_nullable = 'NO', column_default
               FROM information_schema.columns WHERE table_schema = current_schema()
              ORDER BY table_name, ordinal_position",
            &[],
        )
        .unwrap()
    {
        tables.entry(row.get(0)).or_default().push((
            row.get(1),
            row.get(2),
            row.get(3),
            row.get(4),
        ));
    }
    tables
}

/// Copies the rows of the call tables from the journal `from` into `to`, the
/// columns `to` has.
fn postgres_copy_calls(from: &str, to: &str) {
    let mut from = postgres::Client::connect(from, postgres::NoTls).unwrap();
    let mut to = postgres::Client::connect(to, postgres::NoTls).unwrap();
    for table in ["invocations", "effects", "aliases"] {
        for row in from
            .query(&format!("SELECT row_to_json(t)::TEXT FROM {table} t"), &[])
            .unwrap()
        {
            let json: String = row.get(0);
            to.execute(
                &format!(
                    "INSERT INTO {table} SELECT * FROM json_populate_record(NULL::{table}, $1::TEXT::JSON)"
                ),
                &[&json],
            )
            .unwrap();
        }
    }
}

#[test]
fn a_new_host_works_on_a_postgres_journal_an_old_host_still_uses() {
    let Some(cluster) = cluster("a_new_host_works_on_a_postgres_journal_an_old_host_still_uses")
    else {
        return;
    };
    let url = cluster.database();
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    schemas::postgres_migrate_to(&mut client, schemas::POSTGRES_PREVIOUS).unwrap();
    let old = postgres_tables(&url);
    let scratch = cluster.database();
    written_by_a_host(&scratch, 1);
    postgres_copy_calls(&scratch, &url);

    let new = test_host(|b| b.database(&url));
    let version: i64 = client
        .query_one("SELECT version FROM justonce_schema", &[])
        .unwrap()
        .get(0);
    assert_eq!(version, schemas::POSTGRES_CURRENT, "migrated");
    assert!(new.host.call(&request(1)).unwrap().replayed, "served");
    assert!(!new.host.call(&request(2)).unwrap().replayed, "its own");
    assert_old_tables_unchanged(&old, &postgres_tables(&url));

    let scratch = cluster.database();
    written_by_a_host(&scratch, 3);
    postgres_copy_calls(&scratch, &url);
    assert!(new.host.call(&request(3)).unwrap().replayed);
}
