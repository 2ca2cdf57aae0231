//! Where one history's journal lives: a fresh SQLite file, or a fresh schema of the
//! throwaway PostgreSQL cluster (`journal/postgres/testing.rs`, started once per
//! process), removed when the history ends. Each host opens its own connection(s);
//! a verifier connection no guard uses reads what the journal holds, as another
//! process would.
//!
//! What differs between the two:
//! - **The clock.** On PostgreSQL the history's shared clock is the database
//!   server's (`PostgresJournal::with_database_clock`): it decides leases, expiry and
//!   gc, and the hosts' own clocks (skewed, jumping) only label. On SQLite every host
//!   is a process on one machine, so all read that machine's clock (no skew).
//! - **The resource fault.** On SQLite a host's connection may not grow the file
//!   (a full disk: `PRAGMA max_page_count`); on PostgreSQL a host's connections are
//!   terminated by the server (`pg_terminate_backend`: a database that went away),
//!   mid-statement or between statements.
//! - **Power loss.** Every other SQLite history runs under `Full` without checkpoints
//!   (the WAL only grows); [`Store::power_cut`] keeps the database file and the WAL
//!   as far as an fsync covered it, as a disk does when the power goes. Of the rest,
//!   half run under `Normal` and half under `Full` as a user's journal does, with
//!   checkpoints and the WAL's runway (`journal/sqlite/runway.rs`), which the
//!   power-loss model cannot have: it reads what an fsync kept from the WAL's length.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rusqlite::OptionalExtension;

use super::clock::SimClock;
use crate::clock::Clock;
use crate::journal::postgres::{PostgresJournal, PostgresTarget, testing};
use crate::journal::sqlite::{SqliteJournal, forget_synced_wal, synced_wal_length};
use crate::journal::{self, Durability, Journal};

/// Which journal the hosts of a history share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum JournalKind {
    /// One SQLite file, a connection per host.
    #[default]
    Sqlite,
    /// One PostgreSQL database (a schema of its own per history), on the throwaway
    /// cluster the tests use.
    Postgres,
}

impl JournalKind {
    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Sqlite => "sqlite",
            Self::Postgres => "postgres",
        }
    }

    /// The kind called `name`.
    pub fn parse(name: &str) -> Option<Self> {
        [Self::Sqlite, Self::Postgres]
            .into_iter()
            .find(|k| k.name() == name)
    }
}

/// A history's journal cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No PostgreSQL server to simulate on.
    #[error(
        "no PostgreSQL for the simulator: no initdb and pg_ctl in /usr/lib/postgresql/*/bin (or JUSTONCE_PG_BIN), and no JUSTONCE_TEST_PG_URL"
    )]
    NoPostgres,
    /// The cluster refused to make the history's schema.
    #[error("cannot make the history's PostgreSQL schema: {0}")]
    Schema(#[source] postgres::Error),
}

/// How a history's SQLite journal is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SqliteMode {
    /// `Durability::Normal`, with checkpoints.
    Normal,
    /// `Durability::Full` as a user opens it: checkpoints, and the WAL's runway.
    Full,
    /// `Durability::Full` under the power-loss model (see [`Store::power_cut`]).
    PowerLoss,
}

/// A history's journal.
// One per history, made once and never moved on a hot path: boxing a variant would
// buy nothing but an indirection.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Store {
    Sqlite {
        /// The history's directory, removed with it.
        dir: PathBuf,
        mode: SqliteMode,
        /// Every database file the history ran on, the one in use last: after a
        /// power cut in the middle of it, the hosts go on with the copy of what the
        /// cut kept.
        files: Mutex<Vec<PathBuf>>,
    },
    Postgres {
        config: Box<postgres::Config>,
        schema: String,
        admin_url: String,
        /// The verifier's own reads.
        reader: Mutex<Option<postgres::Client>>,
    },
}

/// The row of an invocation: its state and stored outcome.
pub(crate) type Held = Option<(String, Option<String>)>;

impl Store {
    /// A fresh, empty journal of `kind` for the history of `seed`, opened in `mode`
    /// on SQLite.
    pub(crate) fn new(kind: JournalKind, seed: u64, mode: SqliteMode) -> Result<Self, StoreError> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        match kind {
            JournalKind::Sqlite => {
                let dir = std::env::temp_dir().join(format!("justonce-sim-{pid}-{seed:x}-{n}"));
                Ok(Self::Sqlite {
                    files: Mutex::new(vec![dir.join("journal.db")]),
                    dir,
                    mode,
                })
            }
            JournalKind::Postgres => {
                let cluster = testing::cluster("the simulator").ok_or(StoreError::NoPostgres)?;
                let schema = format!("sim_{pid}_{n}");
                let admin_url = cluster.admin_url();
                let mut admin = postgres::Client::connect(&admin_url, postgres::NoTls)
                    .map_err(StoreError::Schema)?;
                admin
                    .batch_execute(&format!("CREATE SCHEMA {schema}"))
                    .map_err(StoreError::Schema)?;
                let mut config: postgres::Config = admin_url.parse().map_err(StoreError::Schema)?;
                config.options(&format!("-c search_path={schema}"));
                Ok(Self::Postgres {
                    config: Box::new(config),
                    schema,
                    admin_url,
                    reader: Mutex::new(None),
                })
            }
        }
    }

    /// Which kind it is.
    pub(crate) fn kind(&self) -> JournalKind {
        match self {
            Self::Sqlite { .. } => JournalKind::Sqlite,
            Self::Postgres { .. } => JournalKind::Postgres,
        }
    }

    /// A new connection (`host`'s, or the verifier's with `None`) to the journal,
    /// whose database clock is `clock` on PostgreSQL.
    pub(crate) fn open(
        &self,
        host: Option<usize>,
        clock: &Arc<SimClock>,
    ) -> crate::error::Result<Arc<dyn Journal>> {
        match self {
            Self::Sqlite { mode, .. } => {
                let path = self.live().expect("a SQLite store has a file");
                match mode {
                    SqliteMode::Normal => journal::open(&path, Durability::Normal, None),
                    SqliteMode::Full => journal::open(&path, Durability::Full, None),
                    SqliteMode::PowerLoss => Ok(Arc::new(SqliteJournal::open_for_power_loss(
                        &path,
                        Durability::Full,
                    )?)),
                }
            }
            Self::Postgres { config, .. } => {
                let mut config = postgres::Config::clone(config);
                config.application_name(&self.application(host));
                let database: Arc<dyn Clock> = clock.clone();
                let journal =
                    PostgresJournal::open(PostgresTarget::from_config(config), Durability::Normal)?
                        .with_database_clock(database);
                Ok(Arc::new(journal))
            }
        }
    }

    /// The SQLite file the hosts run on now; `None` on PostgreSQL.
    fn live(&self) -> Option<PathBuf> {
        match self {
            Self::Sqlite { files, .. } => files
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .last()
                .cloned(),
            Self::Postgres { .. } => None,
        }
    }

    /// From now on connections open what `cut` kept: the history goes on after
    /// its power cut. Every connection to the file in use before is left alone
    /// (its writes are lost with the power); it should be closed.
    pub(crate) fn resume_after(&self, cut: &PowerCut) {
        if let Self::Sqlite { files, .. } = self {
            files
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(cut.path.clone());
        }
    }

    /// The name `host`'s sessions carry, so the server can end them.
    fn application(&self, host: Option<usize>) -> String {
        let schema = match self {
            Self::Postgres { schema, .. } => schema.as_str(),
            Self::Sqlite { .. } => "",
        };
        match host {
            Some(i) => format!("{schema}_h{i}"),
            None => format!("{schema}_verifier"),
        }
    }

    /// The state and stored outcome of the invocation `key`, read through the
    /// verifier's connection.
    pub(crate) fn held(&self, verifier: &dyn Journal, key: &str) -> Result<Held, String> {
        const SQL: &str = "SELECT state, outcome FROM invocations WHERE key = ";
        match self {
            Self::Sqlite { .. } => {
                let sqlite = verifier.as_sqlite().ok_or("not a SQLite journal")?;
                sqlite
                    .read(|c| {
                        c.query_row(&format!("{SQL}?1"), [key], |r| Ok((r.get(0)?, r.get(1)?)))
                            .optional()
                    })
                    .map_err(|e| e.to_string())
            }
            Self::Postgres { .. } => self.pg_read(|c| {
                Ok(c.query_opt(&format!("{SQL}$1"), &[&key])?
                    .map(|r| (r.get(0), r.get(1))))
            }),
        }
    }

    /// What a power cut now would leave of a SQLite journal under `Full` (opened
    /// without checkpoints, so its WAL only grows): the database file and as much
    /// of the WAL as an fsync began after, copied beside it. A reader of what it
    /// holds (`held` of an invocation); `None` for other journals.
    pub(crate) fn power_cut(&self) -> Option<Result<PowerCut, String>> {
        let Self::Sqlite {
            mode: SqliteMode::PowerLoss,
            files,
            ..
        } = self
        else {
            return None;
        };
        let copy = || -> std::io::Result<PowerCut> {
            let (path, n) = {
                let files = files.lock().unwrap_or_else(|p| p.into_inner());
                (files.last().cloned().unwrap_or_default(), files.len())
            };
            let wal = with_suffix(&path, "-wal");
            let kept = path.with_file_name(format!("after-power-cut-{n}.db"));
            std::fs::copy(&path, &kept)?;
            let synced = usize::try_from(synced_wal_length(&wal)).unwrap_or(usize::MAX);
            let mut frames = std::fs::read(&wal)?;
            frames.truncate(synced);
            std::fs::write(with_suffix(&kept, "-wal"), frames)?;
            Ok(PowerCut { path: kept })
        };
        Some(copy().map_err(|e| format!("cannot copy what a power cut keeps: {e}")))
    }

    /// Positions the transactional ledger holds more than one row for, one line each.
    pub(crate) fn ledger_duplicates(&self, verifier: &dyn Journal) -> Vec<String> {
        const SQL: &str = "SELECT invocation, generation, seq, COUNT(*) FROM sim_ledger
                            GROUP BY invocation, generation, seq HAVING COUNT(*) > 1";
        let line = |(inv, generation, seq, n): (String, i64, i64, i64)| {
            format!("the transactional ledger applied ({inv}, gen {generation}, #{seq}) {n} times")
        };
        let rows: Result<Vec<(String, i64, i64, i64)>, String> = match self {
            Self::Sqlite { .. } => match verifier.as_sqlite() {
                None => Err("not a SQLite journal".into()),
                Some(sqlite) => sqlite
                    .read(|c| {
                        c.prepare(SQL)?
                            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
                            .collect()
                    })
                    .map_err(|e| e.to_string()),
            },
            Self::Postgres { .. } => self.pg_read(|c| {
                Ok(c.query(SQL, &[])?
                    .iter()
                    .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
                    .collect())
            }),
        };
        match rows {
            Ok(rows) => rows.into_iter().map(line).collect(),
            Err(e) => vec![format!("cannot read the ledger: {e}")],
        }
    }

    fn pg_read<R>(
        &self,
        f: impl FnOnce(&mut postgres::Client) -> Result<R, postgres::Error>,
    ) -> Result<R, String> {
        let Self::Postgres { config, reader, .. } = self else {
            return Err("not a PostgreSQL journal".into());
        };
        let mut reader = reader.lock().unwrap_or_else(|p| p.into_inner());
        if reader.as_ref().is_none_or(postgres::Client::is_closed) {
            *reader = Some(config.connect(postgres::NoTls).map_err(|e| e.to_string())?);
        }
        let client = reader.as_mut().expect("connected above");
        f(client).map_err(|e| e.to_string())
    }

    /// The resource fault on `host`'s journal: on SQLite its connection may not grow
    /// the file (a full disk) until [`Store::relieve`]; on PostgreSQL the server
    /// terminates its sessions now. `false` when it could not be done.
    pub(crate) fn starve(&self, host: usize, journal: &dyn Journal) -> bool {
        match self {
            Self::Sqlite { .. } => set_page_limit(journal, None),
            Self::Postgres { admin_url, .. } => {
                let ended =
                    postgres::Client::connect(admin_url, postgres::NoTls).and_then(|mut c| {
                        c.query(
                            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                          WHERE application_name = $1",
                            &[&self.application(Some(host))],
                        )
                    });
                ended.is_ok_and(|rows| !rows.is_empty())
            }
        }
    }

    /// Ends [`Store::starve`] for `journal` (SQLite: room on the disk again).
    pub(crate) fn relieve(&self, journal: &dyn Journal) {
        if let Self::Sqlite { .. } = self {
            set_page_limit(journal, Some(2_000_000_000));
        }
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        match self {
            Self::Sqlite { dir, files, .. } => {
                for path in files.get_mut().unwrap_or_else(|p| p.into_inner()).iter() {
                    forget_synced_wal(&with_suffix(path, "-wal"));
                }
                let _ = std::fs::remove_dir_all(dir);
            }
            Self::Postgres {
                schema,
                admin_url,
                reader,
                ..
            } => {
                drop(reader.get_mut().map(Option::take));
                if let Ok(mut admin) = postgres::Client::connect(admin_url, postgres::NoTls) {
                    let _ = admin.batch_execute(&format!("DROP SCHEMA {schema} CASCADE"));
                }
            }
        }
    }
}

/// Caps the pages the host's connection may write to `limit`, or to what the file
/// has now (a full disk). `false` when it could not be done.
fn set_page_limit(journal: &dyn Journal, limit: Option<i64>) -> bool {
    let Some(sqlite) = journal.as_sqlite() else {
        return false;
    };
    sqlite
        .read(|c| {
            let limit = match limit {
                Some(limit) => limit,
                None => c.query_row("PRAGMA page_count", [], |r| r.get(0))?,
            };
            c.query_row(&format!("PRAGMA max_page_count = {limit}"), [], |r| {
                r.get::<_, i64>(0)
            })
        })
        .is_ok()
}

/// `path` with `suffix` appended to its name (`journal.db-wal`).
fn with_suffix(path: &std::path::Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// What a simulated power cut left of a SQLite journal: a copy that SQLite recovers
/// when it is opened.
pub(crate) struct PowerCut {
    path: PathBuf,
}

impl PowerCut {
    /// The state and stored outcome of the invocation `key` after the power cut.
    pub(crate) fn held(&self, key: &str) -> Result<Held, String> {
        let conn = rusqlite::Connection::open(&self.path).map_err(|e| e.to_string())?;
        conn.query_row(
            "SELECT state, outcome FROM invocations WHERE key = ?1",
            [key],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::determinism::Seed;
    use crate::journal::NewInvocation;
    use crate::keys::{Fingerprint, InvocationKey};

    /// The power-loss model: what a durable point synced survives a power cut, a
    /// commit after it does not.
    #[test]
    fn a_power_cut_keeps_what_was_synced_and_drops_the_rest() {
        let store = Store::new(JournalKind::Sqlite, 7, SqliteMode::PowerLoss).unwrap();
        let clock = Arc::new(SimClock::new(1_000));
        let journal = store.open(Some(0), &clock).unwrap();
        let key = InvocationKey::from_stored("a".repeat(32));
        let record = NewInvocation {
            arguments: "{}".into(),
            key: key.clone(),
            scope: "s".into(),
            tool: "t".into(),
            fingerprint: Fingerprint::from_stored("f".repeat(64)),
            explicit_key: false,
            created_at: 1,
            retention_ms: 1 << 40,
            seed: Seed::random().unwrap(),
            component: None,
        };
        // Saved and synced before it would be answered.
        assert!(journal.complete_new(&record, "synced", 1).unwrap());
        // Committed after the last fsync, and never synced.
        journal
            .as_sqlite()
            .unwrap()
            .with(|c| {
                c.execute(
                    "UPDATE invocations SET outcome = 'unsynced' WHERE key = ?1",
                    [key.as_str()],
                )
            })
            .unwrap();
        assert_eq!(
            store.held(&*journal, key.as_str()).unwrap(),
            Some(("completed".into(), Some("unsynced".into()))),
            "before the cut"
        );

        let cut = store.power_cut().expect("a Full SQLite journal").unwrap();
        assert_eq!(
            cut.held(key.as_str()).unwrap(),
            Some(("completed".into(), Some("synced".into())))
        );
        // The opposite: a journal opened as a user's has no power-loss model.
        for mode in [SqliteMode::Normal, SqliteMode::Full] {
            let store = Store::new(JournalKind::Sqlite, 8, mode).unwrap();
            assert!(store.power_cut().is_none(), "{mode:?}");
        }
    }
}
