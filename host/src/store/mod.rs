//! The SQLite journal: invocation records, tool-call-id aliases and effect records.
//!
//! One file in WAL mode. Every transaction that reads and then writes starts with
//! `BEGIN IMMEDIATE`, so two processes on one file serialize instead of failing with
//! `database is locked`.

mod effects;
mod invocations;
mod journal;
mod resolution;
mod schema;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::Connection;

pub use effects::{EffectRecord, EffectState, Lease, NewEffect};
pub(crate) use effects::{
    begin_attempt_in, finish as finish_effect_in, insert as insert_effect, renew_lease_in,
};
pub use invocations::{Begin, BeginOutcome, InvocationState};
pub use journal::{GcReport, JournalEffect, JournalEntry};
pub use resolution::{Resolution, UnresolvedEffect};
pub use schema::CURRENT_VERSION;

use crate::error::{Error, Result};

/// How hard SQLite works to make a commit survive a power cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// `synchronous=FULL`: every commit is on disk before it returns (an fsync per
    /// commit). The default: an effect record must not vanish after its payment ran.
    #[default]
    Full,
    /// `synchronous=NORMAL`: commits survive a crash of the process but the last ones
    /// may be lost on a power cut. Faster.
    Normal,
}

impl Durability {
    fn pragma(self) -> &'static str {
        match self {
            Self::Full => "FULL",
            Self::Normal => "NORMAL",
        }
    }
}

/// The journal database.
pub struct Store {
    path: PathBuf,
    conn: Mutex<Connection>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

/// Opens a SQLite file, creating its parent directory first.
pub(crate) fn open_file(path: &Path) -> Result<Connection> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| {
            Error::Host(anyhow::anyhow!("cannot create the directory {}: {e}", parent.display()))
        })?;
    }
    Connection::open(path).map_err(|e| Error::store(path, e))
}

/// How long a connection waits for another process's write lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

impl Store {
    /// Opens (creating if needed) the journal at `path`, with its parent directory.
    pub fn open(path: &Path, durability: Durability) -> Result<Self> {
        let conn = open_file(path)?;
        Self::init(path.to_path_buf(), conn, durability, true)
    }

    /// A journal that lives in memory only, for tests and dry runs.
    pub fn in_memory() -> Result<Self> {
        let path = PathBuf::from(":memory:");
        let conn = Connection::open_in_memory().map_err(|e| Error::store(&path, e))?;
        Self::init(path, conn, Durability::Normal, false)
    }

    fn init(path: PathBuf, mut conn: Connection, durability: Durability, wal: bool) -> Result<Self> {
        let setup = |conn: &mut Connection| -> rusqlite::Result<schema::Migration> {
            conn.busy_timeout(BUSY_TIMEOUT)?;
            if wal {
                // Returns the mode in force; a read-only or corrupt file fails here.
                let _: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
            }
            conn.pragma_update(None, "synchronous", durability.pragma())?;
            conn.pragma_update(None, "foreign_keys", "ON")?;
            schema::migrate(conn)
        };
        match setup(&mut conn).map_err(|e| Error::store(&path, e))? {
            schema::Migration::Current => {}
            schema::Migration::Newer(found) => {
                return Err(Error::NewerSchema {
                    path,
                    found,
                    supported: CURRENT_VERSION,
                });
            }
        }
        Ok(Self {
            path,
            conn: Mutex::new(conn),
        })
    }

    /// Where the journal lives (`:memory:` for an in-memory one).
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves no half-done transaction behind:
        // rusqlite rolls back on drop. The connection is still usable.
        self.conn.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs a read-only query against the journal database (tests and tools that
    /// inspect a provider's tables use it).
    pub fn read<R>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<R>) -> Result<R> {
        self.with(|conn| f(conn))
    }

    /// Runs `f` with the connection, mapping SQLite errors to [`Error::Store`].
    pub(crate) fn with<R>(
        &self,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<R>,
    ) -> Result<R> {
        let mut conn = self.lock();
        f(&mut conn).map_err(|e| Error::store(&self.path, e))
    }

    /// Runs `f` inside one `BEGIN IMMEDIATE` transaction, committed if `f` returns
    /// `Ok(Ok(_))` and rolled back otherwise.
    pub(crate) fn transaction<R, E>(
        &self,
        f: impl FnOnce(&mut rusqlite::Transaction<'_>) -> rusqlite::Result<std::result::Result<R, E>>,
    ) -> Result<std::result::Result<R, E>> {
        self.with(|conn| {
            let mut tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let result = f(&mut tx)?;
            if result.is_ok() {
                tx.commit()?;
            }
            Ok(result)
        })
    }
}
