//! The SQLite journal: invocation records, tool-call-id aliases and effect records.
//!
//! One file in WAL mode. Every transaction that reads and then writes starts with
//! `BEGIN IMMEDIATE`, so two processes on one file serialize instead of failing with
//! `database is locked`.

mod behind;
mod checkpoint;
mod durable;
mod effects;
mod invocations;
mod journal;
mod recent;
mod resolution;
mod schema;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::Connection;

pub(crate) use behind::Job as BehindJob;
pub use durable::StoreStats;
pub use effects::{EffectRecord, EffectState, Lease, NewEffect};
pub(crate) use effects::{
    Refusal, begin_attempt_in, finish as finish_effect_in, hold_in, insert as insert_effect,
};
pub use invocations::{Begin, BeginOutcome, InvocationState};
pub(crate) use invocations::{Lookup, NewInvocation};
pub use journal::{GcReport, JournalEffect, JournalEntry};
pub use resolution::{Resolution, UnresolvedEffect};
pub use schema::CURRENT_VERSION;

use crate::error::{Error, Result};

/// How hard the journal works to make a commit survive a power cut. Both modes
/// survive a crash of the process; they differ only when the machine loses power.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Like SQLite's `synchronous=FULL` where the contract needs it: the effect record
    /// is on disk before its provider is called, and the outcome of a call that
    /// performed an effect outside the journal (keyed or unkeyed) is on disk before a
    /// caller is answered (or replayed), so no power cut can make a payment that ran
    /// forget its key or its answer. Concurrent callers share those fsyncs (group
    /// commit, see `store/durable.rs`). Other commits are not waited for: taking a
    /// lease, an effect's answer that a keyed retry would fetch again, and the outcome
    /// of a call whose effects were all transactional or that had none, which a file
    /// journal writes behind the answer (see `store/behind.rs`): lost, by a power cut
    /// or a crash, a retry runs again a call that did nothing outside the journal. The
    /// default.
    #[default]
    Full,
    /// `synchronous=NORMAL` and no durable points: no fsync on the call path. A power
    /// cut may lose the last commits — an effect that ran may then be performed again
    /// under a key the journal forgot. And a file journal writes behind the call what
    /// the caller need not wait for (see `store/behind.rs`): the outcome of a call
    /// that performed no unkeyed effect, and keyed answers, committed by a writer
    /// thread within about a millisecond; a crash of the process in that window loses
    /// them, and a retry then runs the call again (its keyed effects under the keys
    /// already journaled). Faster; for journals that can be rebuilt.
    Normal,
}

/// The journal database.
pub struct Store {
    /// Dropped first: drains the queue before anything else closes.
    behind: Option<behind::WriteBehind>,
    path: PathBuf,
    durability: Durability,
    conn: Arc<Mutex<Connection>>,
    /// A second connection for a call's first look, so it never waits behind a
    /// commit (`None` for an in-memory journal, which one connection holds).
    reader: Option<Mutex<Connection>>,
    sync: Arc<durable::GroupSync>,
    recent: Arc<recent::Recent>,
    _checkpointer: Option<checkpoint::Checkpointer>,
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
            Error::Host(anyhow::anyhow!(
                "cannot create the directory {}: {e}",
                parent.display()
            ))
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

    fn init(
        path: PathBuf,
        mut conn: Connection,
        durability: Durability,
        wal: bool,
    ) -> Result<Self> {
        let sync = Arc::new(durable::GroupSync::new(
            &path,
            wal && durability == Durability::Full,
        ));
        sync.watch(&conn);
        let setup = |conn: &mut Connection| -> rusqlite::Result<schema::Migration> {
            conn.busy_timeout(BUSY_TIMEOUT)?;
            // Read before anything writes, so that a file from a newer justonce (or one
            // that is not a database at all) is left exactly as it was.
            let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
            if version > CURRENT_VERSION {
                return Ok(schema::Migration::Newer(version));
            }
            if wal {
                // Returns the mode in force; a read-only or corrupt file fails here.
                let _: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
            }
            // Durable points fsync the WAL themselves (see `durable`), so commits
            // never wait for the disk inside the write lock.
            conn.pragma_update(None, "synchronous", "NORMAL")?;
            if wal {
                conn.pragma_update(None, "wal_autocheckpoint", checkpoint::BACKSTOP_PAGES)?;
            }
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
        sync.note_written();
        let checkpointer = if wal {
            checkpoint::Checkpointer::start(&path)
        } else {
            None
        };
        let reader = if wal {
            let reader = Connection::open(&path)
                .and_then(|r| r.busy_timeout(BUSY_TIMEOUT).map(|()| r))
                .map_err(|e| Error::store(&path, e))?;
            Some(Mutex::new(reader))
        } else {
            None
        };
        let conn = Arc::new(Mutex::new(conn));
        let recent = Arc::new(recent::Recent::default());
        let behind = if wal {
            let sync = Arc::clone(&sync);
            let lost = Arc::clone(&recent);
            let writer = behind::WriteBehind::start(
                Arc::clone(&conn),
                move || sync.note_written(),
                move |key| lost.forget(key),
            )
            .map_err(|e| Error::Host(anyhow::anyhow!("cannot start the journal writer: {e}")))?;
            Some(writer)
        } else {
            None
        };
        Ok(Self {
            behind,
            path,
            durability,
            conn,
            reader,
            sync,
            recent,
            _checkpointer: checkpointer,
        })
    }

    /// Whether this journal writes behind the call what a call need not wait for
    /// (see `store/behind.rs`): a file journal with [`Durability::Normal`].
    pub(crate) fn writes_behind(&self) -> bool {
        self.behind.is_some() && self.durability == Durability::Normal
    }

    /// Whether this journal can write behind the call what needs no durable point in
    /// either mode: the outcome of a call that performed no effect outside the journal
    /// (every file journal).
    pub(crate) fn can_write_behind(&self) -> bool {
        self.behind.is_some()
    }

    /// Queues a write the caller need not wait for; applied at once when this journal
    /// does not write behind.
    pub(crate) fn write_behind(&self, job: BehindJob) -> Result<()> {
        match &self.behind {
            Some(behind) => {
                behind.push(job);
                Ok(())
            }
            None => self.with(|conn| job.apply(conn).map(drop)),
        }
    }

    /// Applies `job` now, on the caller's thread. `false`: the journal had moved on
    /// and nothing was written.
    pub(crate) fn write_through(&self, job: BehindJob) -> Result<bool> {
        self.with(|conn| job.apply(conn))
    }

    /// Waits until every write made behind a call is in the journal (see
    /// [`Durability::Normal`]); fails, once, with the journal's error if one could not
    /// be saved since the last flush (the log names its call). Every read through this
    /// API flushes first, and so does every guarded call, so a journal that stopped
    /// saving fails the next call with the reason.
    pub fn flush(&self) -> Result<()> {
        match &self.behind {
            Some(behind) => behind.flush().map_err(|lost| self.lost(lost)),
            None => Ok(()),
        }
    }

    /// Remembers the outcome of `key` as saved (or queued to be) complete, so a retry
    /// in this process is replayed without a query (see `store/recent.rs`).
    pub(crate) fn remember(
        &self,
        key: &crate::keys::InvocationKey,
        fingerprint: &crate::keys::Fingerprint,
        created_at: i64,
        outcome: &str,
    ) {
        self.recent.remember(key, fingerprint, created_at, outcome);
    }

    /// The remembered outcome of `key` if it completed with `fingerprint` and is
    /// within retention at `now`.
    pub(crate) fn recall(
        &self,
        key: &crate::keys::InvocationKey,
        fingerprint: &crate::keys::Fingerprint,
        now: i64,
        retention_ms: i64,
    ) -> Option<Arc<str>> {
        match self.recent.recall(key, fingerprint, now, retention_ms) {
            recent::Recall::Replay(outcome) => Some(outcome),
            recent::Recall::Unknown => None,
        }
    }

    /// Forgets the remembered outcomes (records were deleted).
    pub(crate) fn forget_recent(&self) {
        self.recent.clear();
    }

    /// The journal's error if a write made behind a call could not be saved since the
    /// last report; does not wait for queued writes.
    pub(crate) fn take_behind_failure(&self) -> Result<()> {
        match self
            .behind
            .as_ref()
            .and_then(behind::WriteBehind::take_failure)
        {
            Some(lost) => Err(self.lost(lost)),
            None => Ok(()),
        }
    }

    fn lost(&self, lost: behind::Lost) -> Error {
        Error::LostWrite {
            path: self.path.clone(),
            key: lost.key,
            source: lost.error,
        }
    }

    /// Wakes the write-behind thread for anything queued (a run that ends without an
    /// outcome to carry its keyed answers).
    pub(crate) fn nudge_behind(&self) {
        if let Some(behind) = &self.behind {
            behind.nudge();
        }
    }

    /// Waits until the writes queued for `key` are in the journal.
    pub(crate) fn flush_key(&self, key: &crate::keys::InvocationKey) {
        if let Some(behind) = &self.behind {
            behind.flush_key(key);
        }
    }

    /// Runs the read-only `f` on whichever connection is free.
    pub(crate) fn with_reader<R>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<R>,
    ) -> Result<R> {
        let Some(reader) = &self.reader else {
            return self.with(|conn| f(conn));
        };
        // The main connection's page cache is warm (it made the last writes); the
        // reader's is dropped whenever another connection wrote. Use the reader only
        // while the main one is busy (committing a batch written behind).
        let result = match self.conn.try_lock() {
            Ok(conn) => f(&conn),
            Err(_) => f(&reader.lock().unwrap_or_else(|p| p.into_inner())),
        };
        result.map_err(|e| Error::store(&self.path, e))
    }

    /// Returns once every commit this store made before the call is on disk: one
    /// fsync of the WAL, shared with every caller waiting at the same time. Free with
    /// [`Durability::Normal`] and for an in-memory journal.
    pub fn make_durable(&self) -> Result<()> {
        self.sync.make_durable().map_err(|e| {
            Error::Host(anyhow::anyhow!(
                "cannot sync the journal {}: {e}",
                self.path.display()
            ))
        })
    }

    /// How many commits and fsyncs this store made so far (once the writes queued
    /// behind calls are applied).
    pub fn stats(&self) -> StoreStats {
        if let Some(behind) = &self.behind {
            behind.wait_all();
        }
        self.sync.stats()
    }

    /// Where the journal lives (`:memory:` for an in-memory one).
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves no half-done transaction behind:
        // rusqlite rolls back on drop. The connection is still usable.
        self.conn
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs a read-only query against the journal database (tests and tools that
    /// inspect a provider's tables use it).
    pub fn read<R>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<R>) -> Result<R> {
        self.flush()?;
        self.with(|conn| f(conn))
    }

    /// Runs `f` with the connection, mapping SQLite errors to [`Error::Store`].
    pub(crate) fn with<R>(
        &self,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<R>,
    ) -> Result<R> {
        let mut conn = self.lock();
        let result = f(&mut conn);
        self.sync.note_written();
        result.map_err(|e| Error::store(&self.path, e))
    }

    /// Runs `f` inside one `BEGIN IMMEDIATE` transaction, committed if `f` returns
    /// `Ok(Ok(_))` and rolled back otherwise.
    pub(crate) fn transaction<R, E>(
        &self,
        f: impl FnOnce(&mut rusqlite::Transaction<'_>) -> rusqlite::Result<std::result::Result<R, E>>,
    ) -> Result<std::result::Result<R, E>> {
        self.with(|conn| {
            let mut tx =
                conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let result = f(&mut tx)?;
            if result.is_ok() {
                tx.commit()?;
            }
            Ok(result)
        })
    }
}
