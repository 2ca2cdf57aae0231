//! The PostgreSQL journal: the SQLite journal's records in a database several hosts
//! share (DESIGN.md, "Several hosts").
//!
//! Hosts serialize per key, not per database: `decide` and every fenced write lock
//! the invocation's row (`SELECT … FOR UPDATE`, or an `UPDATE` that names the lease
//! owner), first records are `INSERT … ON CONFLICT DO NOTHING`, and a tool-call id is
//! bound under a transaction-scoped advisory lock of its own. Each host keeps a few
//! connections (`pool.rs`); one the server ended while it sat idle is found before
//! anything is written and replaced, so a database that went away or restarted
//! costs only the calls in flight (a retryable error, the call resumable under the
//! same keys) and nothing after it is back.
//!
//! Every session, the pool's and the listener's, goes through one TLS connector
//! (`tls.rs`, libpq's `sslmode` on rustls), made from the URL and libpq's
//! environment (`libpq.rs`).

/// The database's clock (ms since the epoch), for every statement that decides a
/// lease, an expiry or gc: hosts' own clocks may differ, the database's is one.
/// `clock_timestamp()`, not `now()`: a transaction that waited for a row lock judges
/// at the time it decides. A session may pin it (`justonce.now_ms`): only tests do,
/// see [`PostgresJournal::with_database_clock`].
macro_rules! db_now {
    () => {
        "coalesce(nullif(current_setting('justonce.now_ms', true), '')::BIGINT, \
         (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT)"
    };
}

/// The channel (SQL text) on which a journal's hosts hear that records they may
/// remember were deleted (`listen.rs`): one per schema, so journals sharing a
/// database in schemas of their own do not clear each other's memory.
macro_rules! channel {
    () => {
        "'justonce_recent/' || left(current_schema(), 40)"
    };
}

mod credentials;
#[cfg(test)]
pub(crate) mod formation;
mod libpq;
mod listen;
mod operations;
mod ops;
mod outbox;
mod pool;
mod prepared;
pub(crate) mod schema;
#[cfg(test)]
mod test_certs;
pub mod testing;
mod tls;
#[cfg(test)]
mod tls_tests;
mod tokens;
mod upstream_disables;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use postgres::{Client, Transaction};

use prepared::Db;

pub use schema::CURRENT_VERSION;

use super::mark::{self, JournalMark};
use super::operate;
use super::schedule::{self, ScheduledGc, Turn};
use super::{Action, CallStory, Operated, Operator};
use super::{
    Answer, Begin, BeginOutcome, DeferredAnswer, Durability, EffectRecord, GcReport, Journal,
    JournalEntry, JournalStats, Lease, Lookup, NewEffect, NewInvocation, Refusal, Resolution,
    Scopes, TransactionalRequest, UnresolvedEffect,
};
use crate::error::{Error, Result};
use crate::journal::recent::Recall;
use crate::keys::{EffectKey, Fingerprint, InvocationKey};
use crate::provider::Provider;

/// How long one statement may run, lock waits included, before it fails (and its
/// call with it, resumable): a host never hangs on a stuck database.
const STATEMENT_TIMEOUT: Duration = Duration::from_secs(30);

/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections kept open per host.
const POOL_SIZE: usize = 8;

/// Where a PostgreSQL journal is and how to log in.
#[derive(Clone)]
pub struct PostgresTarget {
    config: postgres::Config,
    /// The TLS connector of every connection (its `sslmode`, certificates, keys).
    tls: tls::Connector,
    /// libpq's password file, where a password may be looked up.
    passfile: Option<PathBuf>,
    /// `user@host:port/db`, never with the password: what errors and logs name.
    shown: String,
}

impl std::fmt::Debug for PostgresTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

impl std::fmt::Display for PostgresTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

/// Whether `database` names a PostgreSQL database (a `postgres://` or
/// `postgresql://` URL) rather than a SQLite file.
pub fn is_postgres_url(database: &str) -> bool {
    database.starts_with("postgres://") || database.starts_with("postgresql://")
}

impl PostgresTarget {
    /// Parses a `postgres://USER[:PASSWORD]@HOST[:PORT]/DB[?options]` URL, with no
    /// environment but `password` (used where the URL has none). See
    /// [`PostgresTarget::from_url`].
    #[cfg(test)]
    pub fn parse(url: &str, password: Option<&str>) -> Result<Self> {
        Self::from_url(url, &|name| {
            (name == "PGPASSWORD")
                .then(|| password.map(str::to_string))
                .flatten()
        })
    }

    /// Parses a `postgres://` URL as libpq does: its options (TLS with libpq's
    /// `sslmode`, `sslrootcert`, `sslcert`, `sslkey`; `passfile`; tokio-postgres's
    /// own), and, where the URL says nothing, libpq's environment as `env` gives it
    /// (`PGHOST`, `PGPORT`, `PGUSER`, `PGPASSWORD`, `PGDATABASE`, `PGSSLMODE`, …; see
    /// `libpq.rs`). The URL's text never appears in an error; a certificate or key
    /// file that cannot be read is named.
    pub fn from_url(url: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Self> {
        let libpq::Settings {
            mut config,
            tls,
            passfile,
        } = libpq::settings(url, env).map_err(|e| Error::Host(anyhow::Error::new(e)))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("justonce");
        }
        // Several hosts are a primary and its standbys: a journal writes on every
        // call, so a host connects only to the one that takes writes, whatever the
        // URL's order (libpq's `target_session_attrs=read-write`, which the URL may
        // say itself). A `read-only` the URL asks for is kept (the operator's reads).
        if config.get_hosts().len() > 1
            && config.get_target_session_attrs() == postgres::config::TargetSessionAttrs::Any
        {
            config.target_session_attrs(postgres::config::TargetSessionAttrs::ReadWrite);
        }
        Ok(Self::with_tls(config, tls, passfile))
    }

    /// Without a password yet (none in the URL, no `PGPASSWORD`), takes it from
    /// `password_file` (the configuration's; an unreadable one is an error), else
    /// from the first line for this login in libpq's password file (`passfile` in
    /// the URL, `PGPASSFILE`, else `~/.pgpass`).
    pub(crate) fn password_from_files(
        mut self,
        password_file: Option<&std::path::Path>,
    ) -> Result<Self> {
        let pgpass = self.passfile.clone();
        if self.config.get_password().is_some() {
            return Ok(self);
        }
        let password = match password_file {
            Some(path) => Some(credentials::read_password_file(path)?),
            None => pgpass.as_deref().and_then(|path| {
                let host = match self.config.get_hosts().first() {
                    Some(postgres::config::Host::Tcp(name)) => name.clone(),
                    #[cfg(unix)]
                    Some(postgres::config::Host::Unix(path)) => path.display().to_string(),
                    None => "localhost".into(),
                };
                let login = credentials::Login {
                    host: &host,
                    port: self.config.get_ports().first().copied().unwrap_or(5432),
                    database: self.config.get_dbname().unwrap_or(""),
                    user: self.config.get_user().unwrap_or(""),
                };
                credentials::from_pgpass(path, &login)
            }),
        };
        if let Some(password) = password {
            self.config.password(password);
        }
        Ok(self)
    }

    /// A target from a ready configuration, without TLS (tests build one for a
    /// database of their own).
    pub(crate) fn from_config(config: postgres::Config) -> Self {
        let tls = tls::Connector::new(tls::SslMode::Disable, &tls::TlsFiles::default(), None)
            .expect("sslmode=disable reads no file");
        Self::with_tls(config, tls, None)
    }

    /// A target of `config` whose every session goes through `tls`.
    fn with_tls(
        mut config: postgres::Config,
        tls: tls::Connector,
        passfile: Option<PathBuf>,
    ) -> Self {
        tls.negotiate_in(&mut config);
        let ports = config.get_ports();
        let mut hosts: Vec<String> = config
            .get_hosts()
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let host = match h {
                    postgres::config::Host::Tcp(name) => name.clone(),
                    #[cfg(unix)]
                    postgres::config::Host::Unix(path) => path.display().to_string(),
                };
                // One port for all hosts, or one each (the URL's `h1:p1,h2:p2`).
                let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
                format!("{host}:{port}")
            })
            .collect();
        if hosts.is_empty() {
            hosts.push(format!(
                "localhost:{}",
                ports.first().copied().unwrap_or(5432)
            ));
        }
        // No user (none in the URL, no PGUSER) is the operating system's, as in libpq.
        let shown = format!(
            "postgres://{}{}/{}",
            config
                .get_user()
                .map(|u| format!("{u}@"))
                .unwrap_or_default(),
            hosts.join(","),
            config.get_dbname().unwrap_or("")
        );
        // A mode that must encrypt is named, so that a failed handshake says which.
        let shown = match tls.required() {
            Some(mode) => format!("{shown}?sslmode={mode}"),
            None => shown,
        };
        Self {
            config,
            tls,
            passfile,
            shown,
        }
    }

    /// A new session on the target's server, through its TLS connector.
    fn connect(&self) -> std::result::Result<Client, postgres::Error> {
        self.config.connect(self.tls.clone())
    }
}

/// The PostgreSQL journal.
pub(crate) struct PostgresJournal {
    target: PostgresTarget,
    durability: Durability,
    /// Idle connections; a call takes one (or connects) and gives it back unless it
    /// failed.
    idle: Mutex<Vec<prepared::Conn>>,
    commits: AtomicU64,
    /// Round trips to the server so far (see `prepared.rs`).
    trips: AtomicU64,
    /// The outcomes this host read lately, and the listener that keeps them true
    /// (`listen.rs`).
    memory: std::sync::Arc<listen::Shared>,
    /// How long commits take.
    metrics: crate::metrics::JournalMetrics,
    /// Tests and the simulator only: a clock standing for the database server's (see
    /// [`PostgresJournal::with_database_clock`]).
    database_clock: Option<std::sync::Arc<dyn crate::clock::Clock>>,
}

#[cfg(test)]
impl PostgresJournal {
    /// How many sessions this journal's listener has listened on so far (a test of
    /// a failover sees it listen again on the new primary).
    pub(crate) fn listener_sessions(&self) -> u64 {
        self.memory.sessions()
    }

    /// Whether the listener listens now (its memory may be used).
    pub(crate) fn listener_live(&self) -> bool {
        self.memory.live()
    }
}

impl std::fmt::Debug for PostgresJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresJournal")
            .field("target", &self.target)
            .finish()
    }
}

impl PostgresJournal {
    /// Connects, and creates or migrates the schema (refusing one a newer build
    /// wrote).
    pub(crate) fn open(target: PostgresTarget, durability: Durability) -> Result<Self> {
        let journal = Self {
            memory: listen::start(&target),
            target,
            durability,
            idle: Mutex::new(Vec::new()),
            commits: AtomicU64::new(0),
            trips: AtomicU64::new(0),
            metrics: Default::default(),
            database_clock: None,
        };
        let mut client = journal.connect()?;
        match schema::migrate(&mut client).map_err(|e| journal.error(e))? {
            None => {}
            Some(found) => {
                return Err(Error::NewerSchema {
                    path: PathBuf::from(journal.target.shown.clone()),
                    found,
                    supported: CURRENT_VERSION,
                });
            }
        }
        journal.give_back(prepared::Conn::new(client));
        Ok(journal)
    }

    /// Tests and the simulator only: every session of this journal reads the
    /// database's clock from `clock` (a manual clock the test moves) instead of the
    /// server's. Statements that decide a lease, an expiry or gc read the database's
    /// clock, never the host's (see `ops::db_now!`); a test that steps over a boundary
    /// pins that clock per session (`justonce.now_ms`, set each time a connection is
    /// taken from the pool), and hosts whose own clocks differ still agree.
    /// Production never sets it, so the server's `clock_timestamp()` decides.
    pub(crate) fn with_database_clock(
        mut self,
        clock: std::sync::Arc<dyn crate::clock::Clock>,
    ) -> Self {
        self.database_clock = Some(clock);
        self
    }

    /// The clock the memory of outcomes judges windows on (ms): the host's monotonic
    /// clock, or the database's clock a test pinned (see `listen.rs`).
    fn memory_now(&self) -> i64 {
        match &self.database_clock {
            Some(clock) => clock.now_ms(),
            None => self.memory.monotonic_ms(),
        }
    }

    /// Adds the replays this host answered from memory to the journal's counts (the
    /// listener does every heartbeat; the operator's reads do first). Bookkeeping: a
    /// failure is logged, never the caller's.
    fn flush_replays(&self) {
        let counts = self.memory.recent.take_uncounted();
        if counts.is_empty() {
            return;
        }
        if let Err(e) = self.single(|client| ops::add_replays(client, &counts)) {
            tracing::warn!("cannot count {} key(s)' replays: {e}", counts.len());
        }
    }

    fn error(&self, source: postgres::Error) -> Error {
        Error::Postgres {
            target: self.target.shown.clone(),
            source,
        }
    }

    fn connect(&self) -> Result<Client> {
        let mut client = self.target.connect().map_err(|e| self.error(e))?;
        let synchronous = match self.durability {
            Durability::Full => "on",
            // Committed (visible, and kept by a killed host) but not waited for on
            // the database's disk: PostgreSQL's own form of `normal`.
            Durability::Normal => "off",
        };
        client
            .batch_execute(&format!(
                "SET statement_timeout = {}; SET synchronous_commit = {synchronous};",
                STATEMENT_TIMEOUT.as_millis()
            ))
            .map_err(|e| self.error(e))?;
        Ok(client)
    }

    /// Runs the write `f` of a run in one transaction, only while the run still holds
    /// the invocation's lease (which it renews): `false`, and nothing written, when
    /// another host took the call over.
    fn fenced(
        &self,
        invocation: &InvocationKey,
        lease: &Lease<'_>,
        f: impl FnOnce(&mut Db<'_, Transaction<'_>>) -> std::result::Result<(), postgres::Error>,
    ) -> Result<bool> {
        self.transaction(|tx| {
            if !ops::renew_lease_in(tx, invocation, lease)? {
                return Ok(Err(()));
            }
            f(tx)?;
            Ok(Ok(()))
        })
        .map(|r| r.is_ok())
    }

    /// Runs an operator's action in one transaction; a refusal writes nothing and is
    /// the error `refused` makes of its reason.
    fn operate(
        &self,
        refused: impl FnOnce(String) -> Error,
        f: impl FnOnce(
            &mut Transaction<'_>,
        )
            -> std::result::Result<std::result::Result<Operated, String>, postgres::Error>,
    ) -> Result<Operated> {
        let done = self.transaction(|db| f(db.c))?.map_err(refused)?;
        // This host's own memory at once (an operation may delete a record it
        // remembers); every other host's by the notification the operation sent.
        self.memory.recent.clear();
        Ok(done)
    }

    /// Saves a run's `deferred` effect answers, while the run `owner` holds the lease
    /// of `invocation`, then runs the write `f`, in one transaction committed
    /// whatever `f` found (a refusal writes nothing of its own). The answers go
    /// first: `f` may release the lease (suspend).
    fn with_deferred<R>(
        &self,
        invocation: &InvocationKey,
        owner: &str,
        deferred: &[DeferredAnswer],
        f: impl FnOnce(&mut Db<'_, Transaction<'_>>) -> std::result::Result<R, postgres::Error>,
    ) -> Result<R> {
        let done = self.transaction(|tx| {
            ops::finish_deferred(tx, invocation, owner, deferred)?;
            let done = f(tx)?;
            Ok(Ok::<_, std::convert::Infallible>(done))
        })?;
        let Ok(done) = done;
        Ok(done)
    }
}

impl Drop for PostgresJournal {
    fn drop(&mut self) {
        self.memory.stop();
        self.flush_replays();
    }
}

impl Journal for PostgresJournal {
    fn lookup(&self, b: &Begin<'_>) -> Result<Lookup> {
        let memory = &self.memory;
        // A retry with a tool-call id reads the journal: its alias is checked there.
        let remembers = b.tool_call_id.is_none() && memory.live();
        if remembers
            && let Recall::Replay(outcome) =
                memory
                    .recent
                    .recall(b.key, b.fingerprint, self.memory_now())
        {
            if memory.recent.count(b.key) {
                self.flush_replays();
            }
            return Ok(Lookup::Replay {
                outcome: outcome.to_string(),
                expires_at: 0,
            });
        }
        let generation = memory.recent.generation();
        let anchor = self.memory_now();
        let (found, db_now) = self.read(|client| ops::lookup_in(client, b))?;
        if let Lookup::Replay {
            outcome,
            expires_at,
        } = &found
        {
            if remembers {
                // Counted in memory, added to the journal by the listener.
                if memory.recent.count(b.key) {
                    self.flush_replays();
                }
                let until = listen::local_deadline(anchor, db_now, *expires_at);
                memory
                    .recent
                    .remember(b.key, b.fingerprint, until, outcome, generation);
            } else if let Err(e) =
                // Bookkeeping, not an answer: a failure is logged, never the caller's.
                self.single(|client| ops::count_replay_unsynced(client, b.key))
            {
                tracing::warn!(key = %b.key, "cannot count a replay: {e}");
            }
        }
        Ok(found)
    }

    fn replay_from_memory(
        &self,
        key: &InvocationKey,
        fingerprint: &Fingerprint,
        _now: i64,
    ) -> Option<Arc<str>> {
        // What `lookup` does before a replay from memory, a flush of the counts left
        // to it; windows are judged on the memory's own clock, as there.
        let memory = &self.memory;
        if !memory.live() {
            return None;
        }
        let Recall::Replay(outcome) = memory.recent.recall(key, fingerprint, self.memory_now())
        else {
            return None;
        };
        memory.recent.count_unless_due(key).then_some(outcome)
    }

    fn decide(&self, b: &Begin<'_>) -> Result<BeginOutcome> {
        self.transaction(|tx| ops::begin_in(tx, b).map(Ok::<_, ()>))
            .map(|r| r.unwrap_or(BeginOutcome::Wait))
    }

    fn effect(&self, invocation: &InvocationKey, seq: u32) -> Result<Option<EffectRecord>> {
        self.read(|client| ops::get(client, invocation, seq))
    }

    fn effects_from(&self, invocation: &InvocationKey, seq: u32) -> Result<u32> {
        self.read(|client| ops::count_from(client, invocation, seq))
    }

    fn claim_attempt(
        &self,
        effect: &NewEffect<'_>,
        lease: &Lease<'_>,
        unjournaled: Option<&NewInvocation>,
        deferred: &[DeferredAnswer],
    ) -> Result<std::result::Result<(EffectKey, u32), Refusal>> {
        match (unjournaled, deferred.is_empty()) {
            // The first effect of a fresh call: one round trip.
            (Some(record), true) => {
                return self.single(|client| ops::claim_first_in(client, effect, lease, record));
            }
            (None, true) => {
                return self.transaction(|tx| ops::claim_in(tx, effect, lease, unjournaled));
            }
            _ => {}
        }
        // A refused claim wrote nothing of its own; saved answers still count.
        self.with_deferred(effect.invocation, lease.owner, deferred, |tx| {
            ops::claim_in(tx, effect, lease, unjournaled)
        })
    }

    fn perform_transactional(
        &self,
        effect: &NewEffect<'_>,
        lease: &Lease<'_>,
        unjournaled: Option<&NewInvocation>,
        provider: &dyn Provider,
        request: &TransactionalRequest<'_>,
    ) -> Result<std::result::Result<Answer, Refusal>> {
        self.transaction(|tx| {
            ops::perform_transactional_in(tx, effect, lease, unjournaled, provider, request)
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
            ops::note_error_in(tx, key, error, now)
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
        // The invocation's row first (the lease), then the effect's.
        self.transaction(|tx| {
            let held = ops::renew_lease_in(tx, invocation, lease)?;
            let recorded = ops::finish(tx, key, &answer.to_stored(), now)?;
            Ok(Ok::<_, ()>(held.then(|| answer.or_recorded(recorded))))
        })
        .map(|r| r.unwrap_or(None))
    }

    fn answer_late(
        &self,
        effect: &EffectKey,
        answer: &Answer,
        now: i64,
    ) -> Result<std::result::Result<(), String>> {
        let saved = self.transaction(|db| {
            operate::answer_late(
                &mut operations::Tx(db.c),
                effect.as_str(),
                &answer.to_stored(),
                now,
            )
        })?;
        if saved.is_ok() {
            // A host that remembers the call's outcome remembers none: it has none.
            self.memory.recent.clear();
        }
        Ok(saved)
    }

    fn save_deferred(
        &self,
        invocation: &InvocationKey,
        lease: &Lease<'_>,
        deferred: &[DeferredAnswer],
    ) -> Result<bool> {
        self.with_deferred(invocation, lease.owner, deferred, |tx| {
            ops::renew_lease_in(tx, invocation, lease)
        })
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
            ops::not_performed_in(tx, key, reason, now)
        })
    }

    fn renew(&self, invocation: &InvocationKey, lease: &Lease<'_>) -> Result<bool> {
        self.single(|client| ops::renew_lease_in(client, invocation, lease))
    }

    fn hand_over(&self, key: &InvocationKey, owner: &str, now: i64) -> Result<bool> {
        self.single(|client| ops::hand_over_in(client, key, owner, now))
    }

    fn complete(
        &self,
        key: &InvocationKey,
        owner: &str,
        outcome: &str,
        now: i64,
        deferred: &[DeferredAnswer],
    ) -> Result<bool> {
        self.single(|client| ops::complete_with_in(client, key, owner, outcome, now, deferred))
    }

    fn complete_new(&self, record: &NewInvocation, outcome: &str, now: i64) -> Result<bool> {
        self.single(|client| ops::insert_in(client, record, None, Some((outcome, now))))
    }

    fn suspend(
        &self,
        key: &InvocationKey,
        owner: &str,
        now: i64,
        deferred: &[DeferredAnswer],
    ) -> Result<bool> {
        if deferred.is_empty() {
            return self.single(|client| ops::suspend_in(client, key, owner, now));
        }
        self.with_deferred(key, owner, deferred, |tx| {
            ops::suspend_in(tx, key, owner, now)
        })
    }

    fn entries(&self, scope: Option<&str>, limit: u32) -> Result<Vec<JournalEntry>> {
        self.flush_replays();
        self.read(|client| ops::entries_in(client.c, &Scopes::exactly(scope), limit))
    }

    fn entries_by_prefix(&self, prefix: &str, limit: u32) -> Result<Vec<JournalEntry>> {
        self.flush_replays();
        self.read(|client| ops::entries_in(client.c, &Scopes::prefix(prefix), limit))
    }

    fn entries_in_conversation(&self, conversation: &str, limit: u32) -> Result<Vec<JournalEntry>> {
        self.flush_replays();
        let scopes = Scopes::conversation(conversation);
        self.read(|client| ops::entries_in(client.c, &scopes, limit))
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
        self.read(|client| {
            Ok(CallStory {
                key: key.to_string(),
                entry: ops::entry_in(client.c, key.as_str())?,
                operations: operations::operations_of(client.c, key.as_str())?,
            })
        })
    }

    fn forget(&self, key: &InvocationKey, operator: &Operator<'_>) -> Result<Operated> {
        let result = self.operate(super::cannot(Action::Forget, key), |tx| {
            operate::forget(&mut operations::Tx(tx), key.as_str(), operator)
        });
        super::logged(Action::Forget, key.as_str(), operator, result)
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

    fn gc(&self, now: i64, default_retention_ms: i64) -> Result<GcReport> {
        let report = self.commit(|tx| ops::gc_in(tx, now, default_retention_ms))?;
        // This host's own memory at once; every other host's by the notification.
        if report.invocations > 0 {
            self.memory.recent.clear();
        }
        Ok(report)
    }

    fn mark(&self, fresh_id: &str) -> Result<JournalMark> {
        let marked = self.commit(|tx| {
            tx.c.execute(
                "INSERT INTO journal_meta (name, value, at) VALUES ($1, $2, NULL), ($3, '', 0)
                 ON CONFLICT (name) DO NOTHING",
                &[&mark::ID_ROW, &fresh_id, &mark::NEWEST_CALL_ROW],
            )?;
            let row = tx.c.query_one(
                "UPDATE journal_meta
                    SET at = greatest(coalesce(at, 0), coalesce((SELECT max(created_at) FROM invocations), 0))
                  WHERE name = $1
              RETURNING at, (SELECT value FROM journal_meta WHERE name = $2)",
                &[&mark::NEWEST_CALL_ROW, &mark::ID_ROW],
            )?;
            Ok(JournalMark {
                newest_call_at: row.get(0),
                id: row.get(1),
            })
        })?;
        Ok(marked)
    }

    fn gc_if_due(
        &self,
        _now: i64,
        every_ms: i64,
        default_retention_ms: i64,
        by: &str,
    ) -> Result<ScheduledGc> {
        let ran = self.transaction(|tx| {
            tx.c.execute(
                "INSERT INTO journal_meta (name, value, at) VALUES ($1, '', NULL)
                 ON CONFLICT (name) DO NOTHING",
                &[&schedule::GC_ROW],
            )?;
            // SKIP LOCKED: a host that finds another collecting goes on, unblocked.
            let Some(row) = tx.c.query_opt(
                concat!(
                    "SELECT value, at, ",
                    db_now!(),
                    " FROM journal_meta WHERE name = $1 FOR UPDATE SKIP LOCKED"
                ),
                &[&schedule::GC_ROW],
            )?
            else {
                return Ok(Err(ScheduledGc::Busy));
            };
            let (last_by, last, now): (String, Option<i64>, i64) =
                (row.get(0), row.get(1), row.get(2));
            if let Some(last) = last
                && !schedule::due(Some(last), now, every_ms)
            {
                return Ok(Err(ScheduledGc::NotDue { last, by: last_by }));
            }
            let report = ops::gc_in(tx, now, default_retention_ms)?;
            tx.c.execute(
                "UPDATE journal_meta SET value = $2, at = $3 WHERE name = $1",
                &[&schedule::GC_ROW, &by, &now],
            )?;
            Ok(Ok(report))
        })?;
        match ran {
            Ok(report) => {
                if report.invocations > 0 {
                    self.memory.recent.clear();
                }
                Ok(ScheduledGc::Ran(report))
            }
            Err(skipped) => Ok(skipped),
        }
    }

    fn take_turn(&self, row: &str, _now: i64, every_ms: i64, by: &str) -> Result<Turn> {
        let turn = self.transaction(|tx| {
            tx.c.execute(
                "INSERT INTO journal_meta (name, value, at) VALUES ($1, '', NULL)
                 ON CONFLICT (name) DO NOTHING",
                &[&row],
            )?;
            // The row is locked by the first host's UPDATE: a second one waits for its
            // commit, then finds the turn taken.
            let taken = tx.c.query_opt(
                concat!(
                    "UPDATE journal_meta SET value = $2, at = ",
                    db_now!(),
                    " WHERE name = $1 AND (at IS NULL OR at <= ",
                    db_now!(),
                    " - $3) RETURNING at"
                ),
                &[&row, &by, &every_ms],
            )?;
            if let Some(taken) = taken {
                return Ok(Ok(Turn::Taken { at: taken.get(0) }));
            }
            let last = tx.c.query_one(
                "SELECT value, at FROM journal_meta WHERE name = $1",
                &[&row],
            )?;
            Ok(Err(Turn::NotDue {
                by: last.get(0),
                last: last.get::<_, Option<i64>>(1).unwrap_or_default(),
            }))
        })?;
        Ok(turn.unwrap_or_else(|not_due| not_due))
    }

    fn unresolved(&self, now: i64) -> Result<Vec<UnresolvedEffect>> {
        self.read(|client| ops::unresolved_in(client, now))
    }

    fn state_secrets(&self, _now: i64, keep_ms: i64, first: &str) -> Result<Vec<String>> {
        const NEWEST_FIRST: &str = concat!(
            "SELECT secret FROM state_secrets WHERE rotated_at IS NULL OR rotated_at > ",
            db_now!(),
            " - $1 ORDER BY id DESC"
        );
        let secrets = |rows: Vec<postgres::Row>| rows.iter().map(|r| r.get(0)).collect();
        let found: Vec<String> =
            self.read(|client| client.query(NEWEST_FIRST, &[&keep_ms]).map(secrets))?;
        if !found.is_empty() {
            return Ok(found);
        }
        let made = self.commit(|tx| {
            tx.execute(
                concat!(
                    "INSERT INTO state_secrets (id, secret, created_at) VALUES (1, $1, ",
                    db_now!(),
                    ") ON CONFLICT (id) DO NOTHING"
                ),
                &[&first],
            )?;
            tx.query(NEWEST_FIRST, &[&keep_ms]).map(secrets)
        })?;
        Ok(made)
    }

    fn note_catalog(&self, invocation: &InvocationKey, seq: u32, says: Option<&str>) -> Result<()> {
        self.single(|client| ops::note_catalog_in(client, invocation, seq, says))
    }

    fn cancel(&self, key: &InvocationKey, _now: i64) -> Result<Option<u64>> {
        let seed = self.commit(|tx| ops::cancel_in(tx, key))?;
        Ok(crate::journal::read::generation_of(seed))
    }

    fn upstream_disables(&self) -> Result<Vec<super::UpstreamDisable>> {
        self.read(upstream_disables::all)
    }

    fn disable_upstream(
        &self,
        upstream: &str,
        by: &str,
        _now: i64,
    ) -> Result<super::UpstreamDisable> {
        self.commit(|tx| upstream_disables::disable_in(tx, upstream, by))
    }

    fn enable_upstream(&self, upstream: &str) -> Result<bool> {
        self.commit(|tx| upstream_disables::enable_in(tx, upstream))
    }

    fn rotate_state_secret(&self, _now: i64, secret: &str) -> Result<()> {
        self.commit(|tx| {
            // One rotation at a time: a second waits, then rotates out the first's.
            tx.execute("LOCK TABLE state_secrets IN EXCLUSIVE MODE", &[])?;
            tx.execute(
                concat!(
                    "UPDATE state_secrets SET rotated_at = ",
                    db_now!(),
                    " WHERE rotated_at IS NULL"
                ),
                &[],
            )?;
            tx.execute(
                concat!(
                    "INSERT INTO state_secrets (id, secret, created_at) SELECT coalesce(max(id), 0) + 1, $1, ",
                    db_now!(),
                    " FROM state_secrets"
                ),
                &[&secret],
            )
            .map(|_| ())
        })
    }

    fn attention(&self, now: i64) -> Result<super::Attention> {
        self.read(|client| {
            let stuck: i64 = client.query_one(super::STUCK_CALLS_SQL, &[&now])?.get(0);
            let running_owners = client
                .query(super::LIVE_OWNERS_SQL, &[&now])?
                .into_iter()
                .map(|r| r.get(0))
                .collect();
            Ok(super::Attention {
                stuck: u64::try_from(stuck).unwrap_or(0),
                running_owners,
            })
        })
    }

    fn pending_effects(&self) -> Result<u64> {
        let row = self.read(|client| client.query_one(super::PENDING_EFFECTS_SQL, &[]))?;
        Ok(u64::try_from(row.get::<_, i64>(0)).unwrap_or(0))
    }

    fn ping(&self) -> Result<()> {
        self.read(|client| client.query_one("SELECT 1", &[]).map(drop))
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

    fn stats(&self) -> JournalStats {
        let commits = self.commits.load(Ordering::Relaxed);
        JournalStats {
            commits,
            // The database syncs each commit itself under `synchronous_commit = on`.
            syncs: if self.durability == Durability::Full {
                commits
            } else {
                0
            },
        }
    }

    fn metrics(&self) -> &crate::metrics::JournalMetrics {
        &self.metrics
    }

    fn round_trips(&self) -> u64 {
        self.trips.load(Ordering::Relaxed)
    }

    fn prepare_provider(&self, provider: &dyn Provider) -> Result<()> {
        // Hosts that start together create a provider's tables one at a time.
        self.transaction(|tx| {
            schema::lock(tx)?;
            provider.prepare_postgres(tx).map(Ok::<_, ()>)
        })
        .map(|_| ())
    }

    fn outbox(&self) -> &dyn super::outbox::OutboxQueue {
        self
    }

    fn tokens(&self) -> Option<&dyn super::tokens::TokenTable> {
        Some(self)
    }

    fn as_sqlite(&self) -> Option<&super::sqlite::SqliteJournal> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_never_appears_in_an_error_and_an_unreachable_database_is_retry_safe() {
        // Port 1 on the loopback: nothing listens, the connection is refused.
        let target =
            PostgresTarget::parse("postgres://ada:s3cret-pw@127.0.0.1:1/journal", None).unwrap();
        assert_eq!(target.to_string(), "postgres://ada@127.0.0.1:1/journal");
        assert!(!format!("{target:?}").contains("s3cret"));
        let err = PostgresJournal::open(target, Durability::Full).unwrap_err();
        let mut shown = format!("{err} {err:?}");
        let mut cause = std::error::Error::source(&err);
        while let Some(inner) = cause {
            shown.push_str(&format!(" {inner}"));
            cause = inner.source();
        }
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(
            shown.contains("postgres://ada@127.0.0.1:1/journal"),
            "{shown}"
        );
        assert_eq!(err.kind(), "store_unavailable");
        assert!(err.retry_safe());

        // The opposite: a URL that is not one is refused without echoing it.
        let err = PostgresTarget::parse("postgres://ada:s3cret-pw@[bad", None).unwrap_err();
        assert!(!err.to_string().contains("s3cret"), "{err}");
    }

    /// A URL of a primary and its standby: shown with both hosts, and connecting only
    /// to the one that takes writes, whether or not the URL says so; one host alone
    /// keeps the URL's setting (no extra round trip per connection).
    #[test]
    fn a_url_of_several_hosts_follows_the_one_that_takes_writes() {
        use postgres::config::TargetSessionAttrs;
        let url = "postgres://ada@10.0.0.1:5432,10.0.0.2:5433/journal";
        let target = PostgresTarget::parse(url, None).unwrap();
        assert_eq!(
            target.to_string(),
            "postgres://ada@10.0.0.1:5432,10.0.0.2:5433/journal"
        );
        assert_eq!(
            target.config.get_target_session_attrs(),
            TargetSessionAttrs::ReadWrite
        );
        let said =
            PostgresTarget::parse(&format!("{url}?target_session_attrs=read-write"), None).unwrap();
        assert_eq!(
            said.config.get_target_session_attrs(),
            TargetSessionAttrs::ReadWrite
        );
        let one = PostgresTarget::parse("postgres://ada@10.0.0.1:5432/journal", None).unwrap();
        assert_eq!(
            one.config.get_target_session_attrs(),
            TargetSessionAttrs::Any
        );
        // A host without a port in a URL is on 5432; one port in the key-value form
        // is every host's.
        let default = PostgresTarget::parse("postgres://ada@a,b:6000/journal", None).unwrap();
        assert_eq!(default.to_string(), "postgres://ada@a:5432,b:6000/journal");
        let shared = PostgresTarget::from_config(
            "host=a,b port=6000 user=ada dbname=journal"
                .parse()
                .unwrap(),
        );
        assert_eq!(shared.to_string(), "postgres://ada@a:6000,b:6000/journal");
    }

    #[test]
    fn a_password_file_or_pgpass_logs_in_and_a_wrong_password_is_refused_unshown() {
        const NAME: &str =
            "a_password_file_or_pgpass_logs_in_and_a_wrong_password_is_refused_unshown";
        let Some(cluster) = testing::cluster(NAME) else {
            return;
        };
        let Some(url) = cluster.password_login(&cluster.database()) else {
            eprintln!("skipped (no password login on the test server): {NAME}");
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let open = |password_file: Option<&std::path::Path>, pgpass: Option<&std::path::Path>| {
            let pgpass = pgpass.map(|p| p.display().to_string());
            PostgresTarget::from_url(&url, &|name| {
                (name == "PGPASSFILE").then(|| pgpass.clone()).flatten()
            })
            .and_then(|t| t.password_from_files(password_file))
            .and_then(|t| PostgresJournal::open(t, Durability::Full))
        };
        let shown = |err: &Error| {
            let mut shown = format!("{err} {err:?}");
            let mut cause = std::error::Error::source(err);
            while let Some(inner) = cause {
                shown.push_str(&format!(" {inner}"));
                cause = inner.source();
            }
            shown
        };

        // No password anywhere: refused.
        assert!(open(None, None).is_err());
        // The configuration's password file.
        let file = dir.path().join("db-password");
        std::fs::write(&file, format!("{}\n", testing::PASSWORD)).unwrap();
        open(Some(&file), None).unwrap();
        // libpq's password file, its colon and backslash escaped.
        let pgpass = dir.path().join(".pgpass");
        let escaped = testing::PASSWORD.replace('\\', "\\\\").replace(':', "\\:");
        let target = PostgresTarget::parse(&url, None).unwrap();
        let port = target.config.get_ports()[0];
        std::fs::write(
            &pgpass,
            format!(
                "127.0.0.1:{port}:*:someone_else:wrong\n127.0.0.1:{port}:*:{}:{escaped}\n",
                testing::PASSWORD_ROLE
            ),
        )
        .unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        open(None, Some(&pgpass)).unwrap();

        // A wrong password is refused, and neither it nor the right one is shown.
        std::fs::write(&file, "wrong-s3cret\n").unwrap();
        let err = open(Some(&file), Some(&pgpass)).unwrap_err();
        let text = shown(&err);
        assert!(text.contains("justonce_pw@127.0.0.1"), "{text}");
        assert!(
            !text.contains("wrong-s3cret") && !text.contains(testing::PASSWORD),
            "{text}"
        );
    }

    /// gc and forget lock an invocation's row before its effects and aliases, so run
    /// together, over and over, neither ever waits for the other in a cycle (a
    /// deadlock, `40P01`, would fail one of them).
    #[test]
    fn gc_and_forget_run_together_never_deadlock() {
        const NAME: &str = "gc_and_forget_run_together_never_deadlock";
        let Some(cluster) = testing::cluster(NAME) else {
            return;
        };
        let config = cluster.schema();
        let open = || {
            std::sync::Arc::new(
                PostgresJournal::open(
                    PostgresTarget::from_config(config.clone()),
                    Durability::Normal,
                )
                .unwrap(),
            )
        };
        let (collector, operator) = (open(), open());
        let fp = crate::keys::Fingerprint::from_stored("f".repeat(64));
        for round in 0..30 {
            let keys: Vec<InvocationKey> = (0..6)
                .map(|i| super::latency::key(&format!("r{round}x"), i))
                .collect();
            for k in &keys {
                super::latency::one_effect(&collector, k, "o", &fp);
            }
            let gc = {
                let collector = std::sync::Arc::clone(&collector);
                // Everything completed is past a retention of 0.
                std::thread::spawn(move || collector.gc(i64::MAX / 4, 0).map(|_| ()))
            };
            let forgets: Vec<_> = keys
                .into_iter()
                .map(|k| {
                    let operator = std::sync::Arc::clone(&operator);
                    std::thread::spawn(move || {
                        let by = Operator {
                            by: "ada",
                            force: true,
                            now: 5,
                        };
                        // Refused when gc removed it first: not a deadlock.
                        match operator.forget(&k, &by) {
                            Err(Error::CannotOperate { .. }) | Ok(_) => Ok(()),
                            Err(e) => Err(e),
                        }
                    })
                })
                .collect();
            gc.join().unwrap().unwrap();
            for f in forgets {
                f.join().unwrap().unwrap();
            }
        }
    }

    #[test]
    fn the_password_comes_from_the_url_before_pgpassword() {
        let from_url = PostgresTarget::parse("postgres://ada:inurl@h/db", Some("env")).unwrap();
        assert_eq!(from_url.config.get_password(), Some(&b"inurl"[..]));
        let from_env = PostgresTarget::parse("postgres://ada@h/db", Some("env")).unwrap();
        assert_eq!(from_env.config.get_password(), Some(&b"env"[..]));
    }

    #[test]
    fn a_database_a_newer_justonce_wrote_is_refused_unchanged() {
        let Some(cluster) =
            testing::cluster("a_database_a_newer_justonce_wrote_is_refused_unchanged")
        else {
            return;
        };
        let config = cluster.schema();
        let open = || {
            PostgresJournal::open(
                PostgresTarget::from_config(config.clone()),
                Durability::Full,
            )
        };
        open().unwrap();
        // Opening again at the same version is fine (the opposite case).
        open().unwrap();
        let mut client = config.connect(postgres::NoTls).unwrap();
        client
            .execute(
                "UPDATE justonce_schema SET version = $1",
                &[&(CURRENT_VERSION + 1)],
            )
            .unwrap();
        let err = open().unwrap_err();
        assert!(
            matches!(err, Error::NewerSchema { found, .. } if found == CURRENT_VERSION + 1),
            "{err:?}"
        );
        assert!(err.to_string().contains("upgrade justonce"), "{err}");
        let version: i64 = client
            .query_one("SELECT version FROM justonce_schema", &[])
            .unwrap()
            .get(0);
        assert_eq!(version, CURRENT_VERSION + 1, "left as it was");
    }
}

/// Rough figures of the journal's own cost per call on PostgreSQL (the statements a
/// call makes, without wasm): `cargo test -p justonce --lib postgres_latency --
/// --ignored --nocapture`. `hosts` threads stand for hosts, each with its journal.
#[cfg(test)]
mod latency {
    use std::sync::Arc;
    use std::time::Instant;

    use super::*;
    use crate::determinism::Seed;
    use crate::keys::Fingerprint;

    pub(super) fn key(prefix: &str, i: usize) -> InvocationKey {
        InvocationKey::from_stored(format!("{prefix}{i:028}"))
    }

    /// The clock a [`begin`] lends the journal, which PostgreSQL never reads.
    static UNREAD_CLOCK: std::sync::LazyLock<crate::clock::ManualClock> =
        std::sync::LazyLock::new(crate::clock::ManualClock::default);

    /// The first look at `k` by `owner` at `now`: a call of tool `t` in scope `s`
    /// with arguments `{}`, kept for a very long time.
    pub(super) fn begin<'a>(
        k: &'a InvocationKey,
        fp: &'a Fingerprint,
        seed: &'a Seed,
        owner: &'a str,
        now: i64,
    ) -> Begin<'a> {
        Begin {
            arguments: "{}",
            key: k,
            scope: "s",
            tool: "t",
            fingerprint: fp,
            explicit_key: false,
            tool_call_id: None,
            now,
            // Never read: PostgreSQL decides on the database's clock. One clock for
            // every call, where each call leaked one of its own.
            clock: crate::journal::ClockRef(&*UNREAD_CLOCK),
            retention_ms: 1 << 40,
            default_retention_ms: 1 << 40,
            lease_ms: 60_000,
            owner,
            seed,
            component: None,
        }
    }

    /// One call with one effect, as the guard writes it: the first look, the claim
    /// that journals the invocation with the effect, its answer, the outcome.
    pub(super) fn one_effect(
        j: &PostgresJournal,
        k: &InvocationKey,
        owner: &str,
        fp: &Fingerprint,
    ) {
        let seed = Seed::random().unwrap();
        assert_eq!(
            j.lookup(&begin(k, fp, &seed, owner, 1)).unwrap(),
            Lookup::Absent
        );
        let record = NewInvocation {
            arguments: "{}".into(),
            key: k.clone(),
            scope: "s".into(),
            tool: "t".into(),
            fingerprint: fp.clone(),
            explicit_key: false,
            created_at: 1,
            retention_ms: 1 << 40,
            seed: seed.clone(),
            component: None,
        };
        let ek = EffectKey::from_stored(format!("e{}", k.as_str()));
        let lease = Lease {
            owner,
            until: 60_000,
            ms: 60_000,
        };
        let effect = NewEffect {
            key: &ek,
            invocation: k,
            seq: 0,
            provider: "p",
            class: "keyed",
            operation: "op",
            fingerprint: fp,
            ends_by: None,
            now: 1,
        };
        j.claim_attempt(&effect, &lease, Some(&record), &[])
            .unwrap()
            .unwrap();
        assert!(
            j.finish_effect(&ek, &Answer::Ok(serde_json::json!(1)), &lease, k, 2)
                .unwrap()
                .is_some()
        );
        assert!(j.complete(k, owner, "{}", 3, &[]).unwrap());
    }

    #[test]
    #[ignore = "a measurement, not a test"]
    fn postgres_latency() {
        let Some(cluster) = testing::cluster("postgres_latency") else {
            return;
        };
        let config = cluster.schema();
        let open = || {
            Arc::new(
                PostgresJournal::open(
                    PostgresTarget::from_config(config.clone()),
                    Durability::Full,
                )
                .unwrap(),
            )
        };
        let j = open();
        let fp = Fingerprint::from_stored("f".repeat(64));
        let n = 300;
        let t = Instant::now();
        for i in 0..n {
            let seed = Seed::random().unwrap();
            let record = NewInvocation {
                arguments: "{}".into(),
                key: key("a", i),
                scope: "s".into(),
                tool: "t".into(),
                fingerprint: fp.clone(),
                explicit_key: false,
                created_at: 1,
                retention_ms: 1 << 40,
                seed,
                component: None,
            };
            assert!(j.complete_new(&record, "{}", 1).unwrap());
        }
        let none = t.elapsed() / n as u32;
        let t = Instant::now();
        for i in 0..n {
            one_effect(&j, &key("b", i), "o", &fp);
        }
        let one = t.elapsed() / n as u32;
        let t = Instant::now();
        for i in 0..n {
            let seed = Seed::random().unwrap();
            let k = key("b", i);
            let b = begin(&k, &fp, &seed, "o", 5);
            assert!(matches!(j.lookup(&b).unwrap(), Lookup::Replay { .. }));
        }
        let replay = t.elapsed() / n as u32;
        println!("per call: no effect {none:?}, one effect {one:?}, replay {replay:?}");
        for hosts in [1usize, 2, 4] {
            let per = 200;
            let t = Instant::now();
            let threads: Vec<_> = (0..hosts)
                .map(|h| {
                    let j = open();
                    let fp = fp.clone();
                    std::thread::spawn(move || {
                        for i in 0..per {
                            one_effect(
                                &j,
                                &key(&format!("c{hosts}h{h}x"), i),
                                &format!("o{h}"),
                                &fp,
                            );
                        }
                    })
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
            let rate = (hosts * per) as f64 / t.elapsed().as_secs_f64();
            println!("{hosts} host(s): {rate:.0} one-effect calls/s");
        }
    }
}
