//! Running the `justonce` binary as a separate process, and reading what it leaves
//! behind (its journal, and the `mail` provider's mailbox), which outlives it: in one
//! SQLite file, or a PostgreSQL database and a mailbox file beside the process.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rusqlite::Connection;
use serde_json::Value;
use tempfile::TempDir;

pub use super::cli::json_of;
use super::cli::justonce_command;

/// Runs `justonce --db DB ARGS…` to completion. With `fault`, the process is armed to
/// abort at that point (`JUSTONCE_FAULT`).
pub fn justonce(db: &Path, args: &[&str], fault: Option<&str>) -> Output {
    run(justonce_command(Some(db)), args, fault)
}

fn run(mut command: Command, args: &[&str], fault: Option<&str>) -> Output {
    command.args(args);
    if let Some(point) = fault {
        command.env(justonce::__private::FAULT_ENV, point);
    }
    command.output().expect("run justonce")
}

/// Which journal the processes of a test use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// A SQLite file, which also holds the built-in mailbox.
    Sqlite,
    /// A database of the test cluster; the built-in mailbox is
    /// `.justonce/mailbox.db` in the process's working directory.
    Postgres,
}

/// A fresh, empty journal of one backend, and the directory its processes run in.
pub struct TestJournal {
    dir: TempDir,
    /// The `--db` argument: a file in `dir`, or a database URL.
    db: PathBuf,
    postgres: Option<String>,
}

impl TestJournal {
    /// A new journal on `backend`. For PostgreSQL, the test must have checked that
    /// there is a cluster (`postgres_testing::cluster(name)`, which skips by name).
    pub fn new(backend: Backend) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let postgres = (backend == Backend::Postgres).then(|| {
            justonce::__private::postgres_testing::cluster("a test journal")
                .expect("the test checked that there is PostgreSQL")
                .database()
        });
        let db = match &postgres {
            Some(url) => PathBuf::from(url),
            None => dir.path().join("state.db"),
        };
        Self { dir, db, postgres }
    }

    /// Runs `justonce --db DB ARGS…` to completion in the journal's directory; with
    /// `fault`, armed to abort there.
    pub fn justonce(&self, args: &[&str], fault: Option<&str>) -> Output {
        let mut command = justonce_command(Some(&self.db));
        command.current_dir(self.dir.path());
        run(command, args, fault)
    }

    /// Read access to the journal and the mailbox the processes share.
    pub fn read(&self) -> Db {
        match &self.postgres {
            None => Db::open(&self.db),
            Some(url) => Db {
                mailbox: open(&self.dir.path().join(".justonce/mailbox.db")),
                postgres: Some(RefCell::new(
                    postgres::Client::connect(url, postgres::NoTls)
                        .expect("connect to the journal's database"),
                )),
            },
        }
    }
}

fn open(path: &Path) -> Connection {
    Connection::open(path).expect("open the database")
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

/// Read access to the mailbox and the journal the processes share.
pub struct Db {
    /// The mailbox's SQLite file; the journal too, unless `postgres` holds it.
    mailbox: Connection,
    postgres: Option<RefCell<postgres::Client>>,
}

impl Db {
    /// A SQLite file holding both the journal and the mailbox.
    pub fn open(path: &Path) -> Self {
        Self {
            mailbox: open(path),
            postgres: None,
        }
    }

    /// Every email accepted, oldest first.
    pub fn mailbox(&self) -> Vec<Mail> {
        let mut stmt = self
            .mailbox
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
            .mailbox
            .prepare("SELECT key FROM mailbox_requests ORDER BY id")
            .unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    /// The rows of `sql` on the journal, every column text (SQL both databases
    /// understand: `$1` for `param`, `CAST(… AS TEXT)` for numbers).
    fn journal_rows(&self, sql: &str, param: Option<&str>) -> Vec<Vec<Option<String>>> {
        match &self.postgres {
            Some(client) => {
                let params: Vec<&(dyn postgres::types::ToSql + Sync)> = match &param {
                    Some(p) => vec![p],
                    None => vec![],
                };
                let rows = client.borrow_mut().query(sql, &params).unwrap();
                rows.iter()
                    .map(|r| (0..r.len()).map(|i| r.get(i)).collect())
                    .collect()
            }
            None => {
                let mut stmt = self.mailbox.prepare(sql).unwrap();
                let columns = stmt.column_count();
                stmt.query_map(rusqlite::params_from_iter(param), |r| {
                    (0..columns).map(|i| r.get(i)).collect()
                })
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
            }
        }
    }

    /// The state of the one invocation in the journal, and its key.
    pub fn only_invocation(&self) -> (String, String) {
        let rows: Vec<(String, String)> = self
            .journal_rows("SELECT key, state FROM invocations", None)
            .into_iter()
            .map(|r| (text(&r[0]), text(&r[1])))
            .collect();
        assert_eq!(rows.len(), 1, "one invocation: {rows:?}");
        rows.into_iter().next().unwrap()
    }

    /// The effects of `invocation`, in order.
    pub fn effects(&self, invocation: &str) -> Vec<EffectRow> {
        self.journal_rows(
            "SELECT CAST(seq AS TEXT), key, state, CAST(attempts AS TEXT) \
             FROM effects WHERE invocation_key = $1 ORDER BY seq",
            Some(invocation),
        )
        .into_iter()
        .map(|r| EffectRow {
            seq: text(&r[0]).parse().unwrap(),
            key: text(&r[1]),
            state: text(&r[2]),
            attempts: text(&r[3]).parse().unwrap(),
        })
        .collect()
    }

    /// The saved outcome of `invocation`, if any.
    pub fn outcome(&self, invocation: &str) -> Option<Value> {
        self.journal_rows(
            "SELECT outcome FROM invocations WHERE key = $1",
            Some(invocation),
        )
        .into_iter()
        .next()
        .and_then(|mut r| r.swap_remove(0))
        .map(|t| serde_json::from_str(&t).unwrap())
    }
}

/// A column that is never NULL.
fn text(column: &Option<String>) -> String {
    column.clone().expect("a non-NULL column")
}
