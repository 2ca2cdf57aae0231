//! Running the `justonce` binary as a separate process, and reading the SQLite file it
//! leaves behind (the journal and the `mail` provider's mailbox), which outlives it.

use std::path::Path;
use std::process::Output;

use rusqlite::{Connection, OptionalExtension};
use serde_json::Value;

pub use super::cli::json_of;
use super::cli::justonce_command;

/// Runs `justonce --db DB ARGS…` to completion. With `fault`, the process is armed to
/// abort at that point (`JUSTONCE_FAULT`).
pub fn justonce(db: &Path, args: &[&str], fault: Option<&str>) -> Output {
    let mut command = justonce_command(Some(db));
    command.args(args);
    if let Some(point) = fault {
        command.env(justonce::__private::FAULT_ENV, point);
    }
    command.output().expect("run justonce")
}

/// One email in the mailbox table.
#[derive(Debug, Clone, PartialEq)]
pub struct Mail {
    pub key: String,
    pub message_id: String,
    pub body: String,
}

/// One effect record, as the journal holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct EffectRow {
    pub seq: u32,
    pub key: String,
    pub state: String,
    pub attempts: u32,
}

/// Read access to a database file the processes share.
pub struct Db(Connection);

impl Db {
    pub fn open(path: &Path) -> Self {
        Self(Connection::open(path).expect("open the database"))
    }

    /// Every email accepted, oldest first.
    pub fn mailbox(&self) -> Vec<Mail> {
        let mut stmt = self
            .0
            .prepare("SELECT key, message_id, body FROM mailbox ORDER BY id")
            .unwrap();
        stmt.query_map([], |r| {
            Ok(Mail {
                key: r.get(0)?,
                message_id: r.get(1)?,
                body: r.get(2)?,
            })
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
    }

    /// The key of every request the mailbox received, duplicates included.
    pub fn requests(&self) -> Vec<String> {
        let mut stmt = self
            .0
            .prepare("SELECT key FROM mailbox_requests ORDER BY id")
            .unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    /// The state of the one invocation in the journal, and its key.
    pub fn only_invocation(&self) -> (String, String) {
        let mut stmt = self
            .0
            .prepare("SELECT key, state FROM invocations")
            .unwrap();
        let rows: Vec<(String, String)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(rows.len(), 1, "one invocation: {rows:?}");
        rows.into_iter().next().unwrap()
    }

    /// The effects of `invocation`, in order.
    pub fn effects(&self, invocation: &str) -> Vec<EffectRow> {
        let mut stmt = self
            .0
            .prepare("SELECT seq, key, state, attempts FROM effects WHERE invocation_key = ?1 ORDER BY seq")
            .unwrap();
        stmt.query_map([invocation], |r| {
            Ok(EffectRow {
                seq: r.get(0)?,
                key: r.get(1)?,
                state: r.get(2)?,
                attempts: r.get(3)?,
            })
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
    }

    /// The saved outcome of `invocation`, if any.
    pub fn outcome(&self, invocation: &str) -> Option<Value> {
        self.0
            .query_row(
                "SELECT outcome FROM invocations WHERE key = ?1",
                [invocation],
                |r| r.get::<_, Option<String>>(0),
            )
            .optional()
            .unwrap()
            .flatten()
            .map(|t| serde_json::from_str(&t).unwrap())
    }
}
