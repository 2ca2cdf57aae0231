//! What a `justonce --db FILE` process left in its database: the `mail` provider's
//! mailbox and the journal.

use std::path::Path;

use serde_json::Value;

/// How many emails the built-in `mail` provider holds in the database at `db`.
pub fn mailbox_count(db: &Path) -> i64 {
    let conn = rusqlite::Connection::open(db).expect("open the database");
    conn.query_row("SELECT COUNT(*) FROM mailbox", [], |r| r.get(0))
        .expect("count the mailbox")
}

/// The invocations `justonce journal --json` lists for the database at `db`.
pub fn journal(db: &Path) -> Vec<Value> {
    let out = super::cli::justonce_command(Some(db))
        .args(["journal", "--json"])
        .output()
        .expect("run justonce journal");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let journal: Value = serde_json::from_slice(&out.stdout).expect("journal JSON");
    journal.as_array().expect("an array").clone()
}
