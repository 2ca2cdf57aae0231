//! The SQLite journal: invocation records, tool-call-id aliases and effect records in
//! one file in WAL mode, the embedded default.
//!
//! Every transaction that reads and then writes starts with `BEGIN IMMEDIATE`, so two
//! processes on one file serialize instead of failing with `database is locked`. Its
//! machinery stays private: group commit of fsyncs (`durable`), checkpoints off the
//! call path (`checkpoint`); the outcomes it read lately are in `journal/recent.rs`.

mod checkpoint;
mod durable;
mod effects;
mod group;
mod invocations;
mod journal;
mod operations;
mod outbox;
mod owned;
mod resolution;
mod runway;
pub(crate) mod schema;
mod state_secrets;
mod upstream_disables;

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension};

pub(crate) use durable::{forget_synced_wal, synced_wal_length};
pub use schema::CURRENT_VERSION;

use super::mark::{self, JournalMark};
use super::operate;
use super::recent;
use super::schedule::{self, ScheduledGc, Turn};
use super::{
    Action, Answer, Begin, BeginOutcome, CallStory, DeferredAnswer, Durability, EffectRecord,
    GcReport, Journal, JournalEntry, JournalStats, Lease, Lookup, NewEffect, NewInvocation,
    Operated, Operator, Refusal, Resolution, Scopes, TransactionalRequest, UnresolvedEffect,
};
use crate::error::{Error, Result};
use crate::keys::{EffectKey, Fingerprint, InvocationKey};
use crate::provider::Provider;

/// The SQLite journal database.
pub(crate) struct SqliteJournal {
    path: PathBuf,
    durability: Durability,
    conn: Mutex<Connection>,
    /// A second connection for a call's first look, so it never waits behind a
    /// commit (`None` for an in-memory journal, which one connection holds).
    reader: Option<Mutex<Connection>>,
    sync: Arc<durable::GroupSync>,
    /// Concurrent callers' claims and outcomes share a commit.
    group: group::GroupCommit,
    recent: recent::Recent,
    _checkpointer: Option<checkpoint::Checkpointer>,
}

impl std::fmt::Debug for SqliteJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteJournal")
            .field("path", &self.path)
            .finish()
    }
}

/// Opens a SQLite file, creating its parent directory first. A new directory is
/// `0700` and a new file `0600` (SQLite gives its `-wal` and `-shm` files the
/// database's mode): the journal holds arguments, outcomes and each call's seed.
pub(crate) fn open_file(path: &Path) -> Result<Connection> {
    use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(|e| {
                Error::Host(anyhow::anyhow!(
                    "cannot create the directory {}: {e}",
                    parent.display()
                ))
            })?;
    }
    // A new file is created here, empty, so that SQLite does not create it with the
    // umask's mode. An existing one keeps its mode, and SQLite reports any problem.
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path);
    Connection::open(path).map_err(|e| Error::store(path, e))
}

/// How long a connection waits for another process's write lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

impl SqliteJournal {
    /// Opens (creating if needed) the journal at `path`, with its parent directory.
    pub(crate) fn open(path: &Path, durability: Durability) -> Result<Self> {
        let conn = open_file(path)?;
        Self::init(path.to_path_buf(), conn, durability, true, true)
    }

    /// The simulator's power-loss model: [`open`](Self::open) without checkpoints
    /// (no background checkpointer, no automatic ones), so the WAL only grows while
    /// a connection is open, and each fsync records how much of it is durable (see
    /// `durable::synced_wal_length`): a power cut keeps the database file and that
    /// much of the WAL.
    pub(crate) fn open_for_power_loss(path: &Path, durability: Durability) -> Result<Self> {
        let conn = open_file(path)?;
        Self::init(path.to_path_buf(), conn, durability, true, false)
    }

    /// A journal that lives in memory only, for tests and dry runs.
    pub(crate) fn in_memory() -> Result<Self> {
        let path = PathBuf::from(":memory:");
        let conn = Connection::open_in_memory().map_err(|e| Error::store(&path, e))?;
        Self::init(path, conn, Durability::Normal, false, true)
    }

    fn init(
        path: PathBuf,
        mut conn: Connection,
        durability: Durability,
        wal: bool,
        checkpoints: bool,
    ) -> Result<Self> {
        let sync = Arc::new(durable::GroupSync::recording(
            &path,
            wal && durability == Durability::Full,
            !checkpoints,
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
                let pages = if checkpoints {
                    checkpoint::BACKSTOP_PAGES
                } else {
                    0
                };
                conn.pragma_update(None, "wal_autocheckpoint", pages)?;
            }
            conn.pragma_update(None, "foreign_keys", "ON")?;
            let migrated = schema::migrate(conn)?;
            if wal {
                let page_size: u64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0))?;
                sync.lay_runways(page_size);
            }
            Ok(migrated)
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
        let checkpointer = if wal && checkpoints {
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
        Ok(Self {
            path,
            durability,
            conn: Mutex::new(conn),
            reader,
            sync,
            group: group::GroupCommit::default(),
            recent: recent::Recent::default(),
            _checkpointer: checkpointer,
        })
    }

    /// Runs the read-only `f` on whichever connection is free.
    fn with_reader<R>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<R>) -> Result<R> {
        let Some(reader) = &self.reader else {
            return self.with(|conn| f(conn));
        };
        // The main connection's page cache is warm (it made the last writes); the
        // reader's is dropped whenever another connection wrote. Use the reader only
        // while the main one is busy.
        let main = self.conn.try_lock().ok();
        let result = match main {
            Some(conn) => f(&conn),
            None => f(&reader.lock().unwrap_or_else(|p| p.into_inner())),
        };
        result.map_err(|e| Error::store(&self.path, e))
    }

    /// Returns once every commit this journal made before the call is on disk: one
    /// fsync of the WAL, shared with every caller waiting at the same time. Free with
    /// [`Durability::Normal`] and for an in-memory journal.
    fn make_durable(&self) -> Result<()> {
        self.sync.make_durable().map_err(|p| self.poisoned(p))
    }

    /// Returns once every commit visible now is on disk, whichever process made it:
    /// for a replay read from the journal, which may be of another process's commit
    /// that it has not synced yet. Free where durable points are.
    fn sync_everything(&self) -> Result<()> {
        self.sync.sync_everything().map_err(|p| self.poisoned(p))
    }

    fn poisoned(&self, durable::Poisoned(reason): durable::Poisoned) -> Error {
        Error::JournalPoisoned {
            path: self.path.clone(),
            reason,
        }
    }

    /// Runs the write `f` with the connection, unless an fsync failed (then nothing
    /// is written: see `durable`).
    fn write<R>(&self, f: impl FnOnce(&mut Connection) -> rusqlite::Result<R>) -> Result<R> {
        self.sync.check().map_err(|p| self.poisoned(p))?;
        let started = std::time::Instant::now();
        let written = self.with(f);
        if written.is_ok() {
            self.sync.metrics.committed(started.elapsed());
        }
        written
    }

    /// Where the journal lives (`:memory:` for an in-memory one).
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The connection (a grouped transaction is never left open on it).
    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves no half-done transaction behind:
        // rusqlite rolls back on drop. The connection is still usable.
        self.conn
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs the call-path write `f` in the transaction that concurrent callers share
    /// (see `group`; `f` may run on another caller's thread), and returns once that
    /// transaction is committed, with the commit's mark for
    /// [`durable_to_if_full`](Self::durable_to_if_full); `f` says whether its write
    /// is kept (`false`: a refusal, undone). A `durable` write (one that will need
    /// its durable point) may come back durable already: its round's leader
    /// settled it.
    fn grouped<R: Send + 'static>(
        &self,
        durable: bool,
        f: impl FnOnce(&Connection) -> rusqlite::Result<(R, bool)> + Send + 'static,
    ) -> Result<group::Written<R>> {
        self.sync.check().map_err(|p| self.poisoned(p))?;
        let started = std::time::Instant::now();
        let durable = durable && self.durability == Durability::Full;
        let written = self
            .group
            .write(&self.conn, f, durable, &*self.sync)
            .map_err(|e| Error::store(&self.path, e));
        if written.is_ok() {
            // Until the commit that holds the write (or its round's fsync): what the
            // caller waited.
            self.sync.metrics.committed(started.elapsed());
        }
        written
    }

    /// Runs a read-only query against the journal database (tests and tools that
    /// inspect a provider's tables use it).
    pub(crate) fn read<R>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<R>) -> Result<R> {
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
    fn transaction<R, E>(
        &self,
        f: impl FnOnce(&mut rusqlite::Transaction<'_>) -> rusqlite::Result<std::result::Result<R, E>>,
    ) -> Result<std::result::Result<R, E>> {
        self.write(|conn| {
            let mut tx =
                conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let result = f(&mut tx)?;
            if result.is_ok() {
                tx.commit()?;
            }
            Ok(result)
        })
    }

    /// Runs `f` inside one `BEGIN IMMEDIATE` transaction that nothing refuses:
    /// committed unless `f` fails.
    fn commit<R>(
        &self,
        f: impl FnOnce(&mut rusqlite::Transaction<'_>) -> rusqlite::Result<R>,
    ) -> Result<R> {
        let Ok(done) = self.transaction(|tx| f(tx).map(Ok::<_, Infallible>))?;
        Ok(done)
    }

    /// Runs the write `f` of a run in one transaction, only while the run still holds
    /// the invocation's lease (which it renews): `false`, and nothing written, when
    /// another host took the call over.
    fn fenced(
        &self,
        invocation: &InvocationKey,
        lease: &Lease<'_>,
        f: impl FnOnce(&Connection) -> rusqlite::Result<()>,
    ) -> Result<bool> {
        self.transaction(|tx| {
            if !effects::renew_lease_in(tx, invocation, lease)? {
                return Ok(Err(()));
            }
            f(tx)?;
            Ok(Ok(()))
        })
        .map(|r| r.is_ok())
    }

    /// Runs an operator's `action` on `key` in one transaction, durable before it
    /// returns under [`Durability::Full`]; a refusal writes nothing.
    fn operate(
        &self,
        refused: impl FnOnce(String) -> Error,
        f: impl FnOnce(
            &rusqlite::Transaction<'_>,
        ) -> rusqlite::Result<std::result::Result<Operated, String>>,
    ) -> Result<Operated> {
        let done = self.transaction(|tx| f(tx))?.map_err(refused)?;
        self.durable_if_full()?;
        Ok(done)
    }

    /// Counts a replay found by a read, after its durable point: the count is
    /// bookkeeping, not an answer, so neither this replay nor a later durable point
    /// waits for an fsync of it, and a power cut may lose it. A failure is logged,
    /// never the caller's: the answer is on disk already. Replays this process
    /// answered from `recent` are counted in memory (the fastest path stays free of
    /// writes) and added here too.
    fn count_replay(&self, key: &InvocationKey) {
        let mut counts = self.recent.take_uncounted();
        *counts.entry(key.clone()).or_default() += 1;
        self.add_replays(counts);
    }

    /// Adds replays this process answered from its memory to the journal's counts,
    /// so they agree with a journal that reads every replay (PostgreSQL): before the
    /// counts are read here, with the next counted replay, and when the journal is
    /// closed. Bookkeeping like [`SqliteJournal::count_replay`]: no fsync of its own.
    fn flush_replays(&self) {
        let counts = self.recent.take_uncounted();
        if !counts.is_empty() {
            self.add_replays(counts);
        }
    }

    fn add_replays(&self, counts: std::collections::HashMap<InvocationKey, u32>) {
        if self.sync.check().is_err() {
            return;
        }
        let conn = self.lock();
        let before = self.sync.written();
        let counted = conn.unchecked_transaction().and_then(|tx| {
            for (key, n) in &counts {
                invocations::count_replays_in(&tx, key, *n)?;
            }
            tx.commit()
        });
        self.sync.note_written();
        self.sync.excuse_since(before);
        drop(conn);
        if let Err(e) = counted {
            tracing::warn!("cannot count {} key(s)' replays: {e}", counts.len());
        }
    }

    /// Makes the commits up to `mark` durable when this journal's durability asks
    /// for it (for a grouped write, its own mark: at once when its round was
    /// settled already).
    fn durable_to_if_full(&self, mark: u64) -> Result<()> {
        if self.durability == Durability::Full {
            self.sync
                .make_durable_to(mark)
                .map_err(|p| self.poisoned(p))?;
        }
        Ok(())
    }

    /// Makes a saved answer durable when this journal's durability asks for it:
    /// every commit made so far.
    fn durable_if_full(&self) -> Result<()> {
        self.durable_to_if_full(self.sync.written())
    }
}

impl Drop for SqliteJournal {
    fn drop(&mut self) {
        self.flush_replays();
    }
}

impl Journal for SqliteJournal {
    fn lookup(&self, b: &Begin<'_>) -> Result<Lookup> {
        if b.tool_call_id.is_none() && self.recent.operations_due(b.now) {
            let latest = self.with_reader(operations::latest_id)?;
            self.recent.saw_operations(latest, b.now);
        }
        if b.tool_call_id.is_none()
            && let recent::Recall::Replay(outcome) = self.recent.recall(b.key, b.fingerprint, b.now)
        {
            // Durable before it is returned, like the answer its first caller got.
            self.make_durable()?;
            if self.recent.count(b.key) {
                self.flush_replays();
            }
            return Ok(Lookup::Replay {
                outcome: outcome.to_string(),
                expires_at: 0,
            });
        }
        let generation = self.recent.generation();
        let found = self.with_reader(|conn| invocations::lookup_in(conn, b))?;
        if let Lookup::Replay {
            outcome,
            expires_at,
        } = &found
        {
            // Perhaps another process's commit, not synced yet: one fsync that starts
            // now covers it.
            self.sync_everything()?;
            self.count_replay(b.key);
            if b.tool_call_id.is_none() {
                self.recent
                    .remember(b.key, b.fingerprint, *expires_at, outcome, generation);
            }
        }
        Ok(found)
    }

    fn replay_from_memory(
        &self,
        key: &InvocationKey,
        fingerprint: &Fingerprint,
        now: i64,
    ) -> Option<Arc<str>> {
        // What `lookup` does before a replay from memory, each step that would read,
        // fsync or write left to it.
        if self.recent.operations_due(now) {
            return None;
        }
        let recent::Recall::Replay(outcome) = self.recent.recall(key, fingerprint, now) else {
            return None;
        };
        (self.sync.is_durable() && self.recent.count_unless_due(key)).then_some(outcome)
    }

    fn decide(&self, b: &Begin<'_>) -> Result<BeginOutcome> {
        let outcome = self
            .transaction(|tx| {
                // The time it decides, read under the write lock: a lease another run
                // took while this caller waited for the lock is judged as it is now.
                let b = Begin {
                    now: b.clock.0.now_ms(),
                    ..b.clone()
                };
                Ok(Ok::<_, ()>(invocations::begin_in(tx, &b)?))
            })
            .map(|r| r.unwrap_or(BeginOutcome::Wait))?;
        if matches!(outcome, BeginOutcome::Replay(_)) {
            self.make_durable()?;
        }
        Ok(outcome)
    }

    fn effect(&self, invocation: &InvocationKey, seq: u32) -> Result<Option<EffectRecord>> {
        self.with(|conn| effects::get(conn, invocation, seq))
    }

    fn effects_from(&self, invocation: &InvocationKey, seq: u32) -> Result<u32> {
        self.with(|conn| effects::count_from(conn, invocation, seq))
    }

    fn claim_attempt(
        &self,
        effect: &NewEffect<'_>,
        lease: &Lease<'_>,
        unjournaled: Option<&NewInvocation>,
        deferred: &[DeferredAnswer],
    ) -> Result<std::result::Result<(EffectKey, u32), Refusal>> {
        let (effect, lease) = (
            owned::OwnedEffect::new(effect),
            owned::OwnedLease::new(lease),
        );
        let (unjournaled, deferred) = (unjournaled.cloned(), deferred.to_vec());
        let written = self.grouped(true, move |conn| {
            let (effect, lease) = (effect.view(), lease.view());
            // Before the claim, while the lease is judged as the claim will judge it:
            // a run that lost it saves neither.
            let saved = effects::finish_deferred(conn, effect.invocation, lease.owner, &deferred)?;
            let claimed = effects::claim_in(conn, &effect, &lease, unjournaled.as_ref())?;
            // A refused claim wrote nothing of its own; saved answers still count.
            let keep = claimed.is_ok() || saved;
            Ok((claimed, keep))
        })?;
        // The one write that must be on disk before the provider is called: after a
        // crash or a power cut, a retry finds the key it must reuse.
        if written.value.is_ok() {
            self.durable_to_if_full(written.mark)?;
        }
        Ok(written.value)
    }

    fn perform_transactional(
        &self,
        effect: &NewEffect<'_>,
        lease: &Lease<'_>,
        unjournaled: Option<&NewInvocation>,
        provider: &dyn Provider,
        request: &TransactionalRequest<'_>,
    ) -> Result<std::result::Result<Answer, Refusal>> {
        // No durable point of its own: the provider's writes and the record commit
        // together, and the outcome's durable point (the WAL is written in order)
        // makes them durable before any caller is answered. A power cut before that
        // loses both, and the call, unanswered, runs again.
        self.transaction(|tx| {
            effects::perform_transactional_in(tx, effect, lease, unjournaled, provider, request)
        })
    }

    fn note_attempt_error(
        &self,
        key: &EffectKey,
        error: &str,
        lease: &Lease<'_>,
        invocation: &InvocationKey,
        now: i64,
    ) -> Result<bool> {
        self.fenced(invocation, lease, |tx| {
            effects::note_error_in(tx, invocation, key, error, now)
        })
    }

    fn finish_effect(
        &self,
        key: &EffectKey,
        answer: &Answer,
        lease: &Lease<'_>,
        invocation: &InvocationKey,
        now: i64,
    ) -> Result<Option<Answer>> {
        let (key, answer, lease) = (key.clone(), answer.clone(), owned::OwnedLease::new(lease));
        let invocation = invocation.clone();
        let written = self.grouped(false, move |conn| {
            let held = effects::renew_lease_in(conn, &invocation, &lease.view())?;
            let recorded = effects::finish(conn, &invocation, &key, &answer.to_stored(), now)?;
            Ok((held.then(|| answer.or_recorded(recorded)), true))
        })?;
        Ok(written.value)
    }

    fn answer_late(
        &self,
        effect: &EffectKey,
        answer: &Answer,
        now: i64,
    ) -> Result<std::result::Result<(), String>> {
        let saved = self.transaction(|tx| {
            operate::answer_late(
                &mut operations::Tx(tx),
                effect.as_str(),
                &answer.to_stored(),
                now,
            )
        })?;
        if saved.is_ok() {
            self.durable_if_full()?;
        }
        Ok(saved)
    }

    fn save_deferred(
        &self,
        invocation: &InvocationKey,
        lease: &Lease<'_>,
        deferred: &[DeferredAnswer],
    ) -> Result<bool> {
        let (invocation, lease) = (invocation.clone(), owned::OwnedLease::new(lease));
        let deferred = deferred.to_vec();
        // Durable (`full`): what follows may hand an answer to a downstream (an
        // upstream's question answered), which must not outlive its record.
        let written = self.grouped(true, move |conn| {
            let lease = lease.view();
            let saved = effects::finish_deferred(conn, &invocation, lease.owner, &deferred)?;
            let held = effects::renew_lease_in(conn, &invocation, &lease)?;
            Ok((held, saved || held))
        })?;
        if written.value {
            self.durable_to_if_full(written.mark)?;
        }
        Ok(written.value)
    }

    fn not_performed(
        &self,
        key: &EffectKey,
        reason: &str,
        lease: &Lease<'_>,
        invocation: &InvocationKey,
        now: i64,
    ) -> Result<bool> {
        self.fenced(invocation, lease, |tx| {
            effects::not_performed_in(tx, invocation, key, reason, now)
        })
    }

    fn renew(&self, invocation: &InvocationKey, lease: &Lease<'_>) -> Result<bool> {
        self.write(|conn| effects::renew_lease_in(conn, invocation, lease))
    }

    fn hand_over(&self, key: &InvocationKey, owner: &str, now: i64) -> Result<bool> {
        self.write(|conn| invocations::hand_over_in(conn, key, owner, now))
    }

    fn complete(
        &self,
        key: &InvocationKey,
        owner: &str,
        outcome: &str,
        now: i64,
        deferred: &[DeferredAnswer],
    ) -> Result<bool> {
        let (key, owner, outcome) = (key.clone(), owner.to_owned(), outcome.to_owned());
        let deferred = deferred.to_vec();
        let saved = self.grouped(true, move |conn| {
            // Before the outcome releases the lease: saved only while it is held.
            effects::finish_deferred(conn, &key, &owner, &deferred)?;
            let saved = invocations::complete_in(conn, &key, &owner, &outcome, now)?;
            Ok((saved, true))
        })?;
        if saved.value {
            self.durable_to_if_full(saved.mark)?;
        }
        Ok(saved.value)
    }

    fn complete_new(&self, record: &NewInvocation, outcome: &str, now: i64) -> Result<bool> {
        let (record, outcome) = (record.clone(), outcome.to_owned());
        let saved = self.grouped(true, move |conn| {
            Ok((
                invocations::insert_completed_in(conn, &record, &outcome, now)?,
                true,
            ))
        })?;
        if saved.value {
            self.durable_to_if_full(saved.mark)?;
        }
        Ok(saved.value)
    }

    fn suspend(
        &self,
        key: &InvocationKey,
        owner: &str,
        now: i64,
        deferred: &[DeferredAnswer],
    ) -> Result<bool> {
        self.write(|conn| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            effects::finish_deferred(&tx, key, owner, deferred)?;
            let suspended = invocations::suspend_in(&tx, key, owner, now)?;
            tx.commit()?;
            Ok(suspended)
        })
    }

    fn entries(&self, scope: Option<&str>, limit: u32) -> Result<Vec<JournalEntry>> {
        self.flush_replays();
        self.with(|conn| journal::entries_in(conn, &Scopes::exactly(scope), limit))
    }

    fn entries_by_prefix(&self, prefix: &str, limit: u32) -> Result<Vec<JournalEntry>> {
        self.flush_replays();
        self.with(|conn| journal::entries_in(conn, &Scopes::prefix(prefix), limit))
    }

    fn entries_in_conversation(&self, conversation: &str, limit: u32) -> Result<Vec<JournalEntry>> {
        self.flush_replays();
        let scopes = Scopes::conversation(conversation);
        self.with(|conn| journal::entries_in(conn, &scopes, limit))
    }

    fn gc(&self, now: i64, default_retention_ms: i64) -> Result<GcReport> {
        let report = self.commit(|tx| journal::gc_in(tx, now, default_retention_ms))?;
        // After the delete: a replay remembered meanwhile may be of a deleted record.
        // (A `gc` in another process is not seen here; this process replays what it
        // answered within its own retention.)
        self.recent.clear();
        Ok(report)
    }

    fn mark(&self, fresh_id: &str) -> Result<JournalMark> {
        let marked = self.commit(|tx| {
            tx.execute(
                "INSERT INTO journal_meta (name, value, at) VALUES (?1, ?2, NULL), (?3, '', 0)
                 ON CONFLICT (name) DO NOTHING",
                rusqlite::params![mark::ID_ROW, fresh_id, mark::NEWEST_CALL_ROW],
            )?;
            tx.execute(
                "UPDATE journal_meta
                    SET at = max(coalesce(at, 0), coalesce((SELECT max(created_at) FROM invocations), 0))
                  WHERE name = ?1",
                [mark::NEWEST_CALL_ROW],
            )?;
            let id: String = tx.query_row(
                "SELECT value FROM journal_meta WHERE name = ?1",
                [mark::ID_ROW],
                |r| r.get(0),
            )?;
            let newest_call_at: i64 = tx.query_row(
                "SELECT at FROM journal_meta WHERE name = ?1",
                [mark::NEWEST_CALL_ROW],
                |r| r.get(0),
            )?;
            Ok(JournalMark { id, newest_call_at })
        })?;
        Ok(marked)
    }

    fn gc_if_due(
        &self,
        now: i64,
        every_ms: i64,
        default_retention_ms: i64,
        by: &str,
    ) -> Result<ScheduledGc> {
        // BEGIN IMMEDIATE: a second host waits for the first's commit, then finds
        // its run recorded.
        let ran = self.transaction(|tx| {
            // Taken and collected in one transaction: a failed gc takes no turn.
            if let Turn::NotDue { last, by } = turn_in(tx, schedule::GC_ROW, now, every_ms, by)? {
                return Ok(Err(ScheduledGc::NotDue { last, by }));
            }
            Ok(Ok(journal::gc_in(tx, now, default_retention_ms)?))
        })?;
        match ran {
            Ok(report) => {
                self.recent.clear();
                Ok(ScheduledGc::Ran(report))
            }
            Err(skipped) => Ok(skipped),
        }
    }

    fn take_turn(&self, row: &str, now: i64, every_ms: i64, by: &str) -> Result<Turn> {
        // BEGIN IMMEDIATE: a second host waits for the first's commit, then finds
        // its turn recorded.
        self.commit(|tx| turn_in(tx, row, now, every_ms, by))
    }

    fn unresolved(&self, now: i64) -> Result<Vec<UnresolvedEffect>> {
        self.with(|conn| resolution::unresolved_in(conn, now))
    }

    fn state_secrets(&self, now: i64, keep_ms: i64, first: &str) -> Result<Vec<String>> {
        let found = self.with_reader(|conn| state_secrets::newest_first(conn, now, keep_ms))?;
        if !found.is_empty() {
            return Ok(found);
        }
        let made = self.commit(|tx| {
            state_secrets::first_in(tx, first, now)?;
            state_secrets::newest_first(tx, now, keep_ms)
        })?;
        // A state made under a secret a power cut then takes back would be refused
        // as forged: the secret is on disk before any state is made under it.
        self.durable_if_full()?;
        Ok(made)
    }

    fn note_catalog(&self, invocation: &InvocationKey, seq: u32, says: Option<&str>) -> Result<()> {
        self.commit(|tx| effects::note_catalog_in(tx, invocation, seq, says))
    }

    fn cancel(&self, key: &InvocationKey, now: i64) -> Result<Option<u64>> {
        let seed = self.commit(|tx| effects::cancel_in(tx, key, now))?;
        self.durable_if_full()?;
        Ok(crate::journal::read::generation_of(seed))
    }

    fn rotate_state_secret(&self, now: i64, secret: &str) -> Result<()> {
        self.commit(|tx| state_secrets::rotate_in(tx, secret, now))?;
        self.durable_if_full()
    }

    fn upstream_disables(&self) -> Result<Vec<super::UpstreamDisable>> {
        self.with_reader(upstream_disables::all)
    }

    fn disable_upstream(
        &self,
        upstream: &str,
        by: &str,
        now: i64,
    ) -> Result<super::UpstreamDisable> {
        let disable = self.commit(|tx| upstream_disables::disable_in(tx, upstream, by, now))?;
        self.durable_if_full()?;
        Ok(disable)
    }

    fn enable_upstream(&self, upstream: &str) -> Result<bool> {
        let was = self.commit(|tx| upstream_disables::enable_in(tx, upstream))?;
        self.durable_if_full()?;
        Ok(was)
    }

    fn attention(&self, now: i64) -> Result<super::Attention> {
        self.with_reader(|conn| {
            let stuck = conn.query_row(super::STUCK_CALLS_SQL, [now], |r| r.get(0))?;
            let running_owners = conn
                .prepare_cached(super::LIVE_OWNERS_SQL)?
                .query_map([now], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?;
            Ok(super::Attention {
                stuck,
                running_owners,
            })
        })
    }

    fn pending_effects(&self) -> Result<u64> {
        self.with_reader(|conn| conn.query_row(super::PENDING_EFFECTS_SQL, [], |r| r.get(0)))
    }

    fn ping(&self) -> Result<()> {
        // Reads the file's first page (the schema), not only the connection.
        self.with_reader(|conn| {
            conn.query_row("SELECT count(*) FROM sqlite_schema", [], |r| {
                r.get::<_, i64>(0)
            })
        })
        .map(drop)
    }

    fn resolve(
        &self,
        effect_key: &str,
        resolution: Resolution,
        response: &serde_json::Value,
        operator: &Operator<'_>,
    ) -> Result<Operated> {
        let result = self.operate(super::cannot_resolve(effect_key), |tx| {
            let tx = &mut operations::Tx(tx);
            operate::resolve(tx, effect_key, resolution, response, operator)
        });
        super::logged(Action::Resolve, effect_key, operator, result)
    }

    fn resolve_by_probe(
        &self,
        effect_key: &str,
        resolution: Resolution,
        answer: &serde_json::Value,
        run: &operate::ProbeRun<'_>,
    ) -> Result<Operated> {
        self.operate(super::cannot_resolve(effect_key), |tx| {
            let tx = &mut operations::Tx(tx);
            operate::resolve_by_probe(tx, effect_key, resolution, answer, run)
        })
    }

    fn story(&self, key: &InvocationKey) -> Result<CallStory> {
        self.flush_replays();
        self.with(|conn| {
            Ok(CallStory {
                key: key.to_string(),
                entry: journal::entry_in(conn, key.as_str())?,
                operations: operations::operations_of(conn, key.as_str())?,
            })
        })
    }

    fn forget(&self, key: &InvocationKey, operator: &Operator<'_>) -> Result<Operated> {
        let done = super::logged(
            Action::Forget,
            key.as_str(),
            operator,
            self.operate(super::cannot(Action::Forget, key), |tx| {
                operate::forget(&mut operations::Tx(tx), key.as_str(), operator)
            }),
        )?;
        // After the delete: a replay remembered meanwhile may be of the deleted
        // record. (Another process notices the operation within `RECHECK_MS`.)
        self.recent.clear();
        Ok(done)
    }

    fn abandon(&self, key: &InvocationKey, operator: &Operator<'_>) -> Result<Operated> {
        let result = self.operate(super::cannot(Action::Abandon, key), |tx| {
            operate::abandon(&mut operations::Tx(tx), key.as_str(), operator)
        });
        super::logged(Action::Abandon, key.as_str(), operator, result)
    }

    fn resume(
        &self,
        key: &InvocationKey,
        operator: &Operator<'_>,
        host: &str,
        was: &str,
    ) -> Result<Operated> {
        let result = self.operate(super::cannot(Action::Resume, key), |tx| {
            operate::resume(&mut operations::Tx(tx), key.as_str(), operator, host, was)
        });
        super::logged(Action::Resume, key.as_str(), operator, result)
    }

    fn stats(&self) -> JournalStats {
        self.sync.stats()
    }

    fn writer_busy(&self) -> Option<std::time::Duration> {
        Some(self.group.busy())
    }

    fn metrics(&self) -> &crate::metrics::JournalMetrics {
        &self.sync.metrics
    }

    fn prepare_provider(&self, provider: &dyn Provider) -> Result<()> {
        self.write(|conn| provider.prepare(conn))
    }

    fn outbox(&self) -> &dyn super::outbox::OutboxQueue {
        self
    }

    fn as_sqlite(&self) -> Option<&SqliteJournal> {
        Some(self)
    }
}

#[cfg(test)]
mod tests;

/// Takes the turn at the chore of `journal_meta` row `row` for `by` in `tx`, if its
/// last turn, by any host, was `every_ms` or more before `now`, or never (see
/// [`Journal::take_turn`]); the caller's transaction (BEGIN IMMEDIATE) makes a
/// second host wait for the first's commit and find the turn taken.
fn turn_in(
    tx: &rusqlite::Transaction<'_>,
    row: &str,
    now: i64,
    every_ms: i64,
    by: &str,
) -> rusqlite::Result<Turn> {
    let last: Option<(String, Option<i64>)> = tx
        .query_row(
            "SELECT value, at FROM journal_meta WHERE name = ?1",
            [row],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    if let Some((by, Some(last))) = last
        && !schedule::due(Some(last), now, every_ms)
    {
        return Ok(Turn::NotDue { last, by });
    }
    tx.execute(
        "INSERT INTO journal_meta (name, value, at) VALUES (?1, ?2, ?3)
         ON CONFLICT (name) DO UPDATE SET value = excluded.value, at = excluded.at",
        rusqlite::params![row, by, now],
    )?;
    Ok(Turn::Taken { at: now })
}
