//! The journal: the one narrow interface the guard needs from storage, and its
//! backends.
//!
//! The guard decides; the journal remembers. Every operation here is one atomic step
//! of the contract (DESIGN.md, "The contract"): look a call up, decide it (run, replay,
//! wait, mismatch) and take its lease, claim an effect's attempt with its key before
//! the provider runs, finish it, complete or suspend the invocation, and the
//! operator's reads and writes (`journal`, `gc`, `resolve`, outbox delivery). A
//! backend knows nothing of the guard; it only keeps these steps atomic and fenced:
//! a write of a run that no longer holds the invocation's lease changes nothing.
//!
//! The SQLite journal (`sqlite/`) is the embedded default; several hosts share a
//! PostgreSQL journal (`postgres/`).

mod answer;
pub(crate) mod decision;
mod holder;
pub(crate) mod mark;
mod operate;
pub(crate) mod outbox;
pub(crate) mod postgres;
mod read;
pub(crate) mod recent;
mod records;
pub(crate) mod schedule;
mod select;
pub(crate) mod sqlite;
pub(crate) mod tokens;
mod upstream_disables;

use std::path::Path;

pub(crate) use answer::Answer;
pub use holder::{BadHostName, Holder, HostIdentity, LeaseStatus};
pub use mark::JournalMark;
pub(crate) use operate::{ProbeRun, performed_without_answer};
pub use read::{
    Action, CALL_STATES, CallStory, DecidedBy, GcReport, JournalEffect, JournalEntry,
    JournalOperation, JournalStats, Operated, Operator, Resolution, UnresolvedEffect,
};
pub(crate) use records::{
    Begin, BeginOutcome, ClockRef, DeferredAnswer, EffectRecord, EffectState, InvocationState,
    Lease, Lookup, NewEffect, NewInvocation, Refusal, TakenOver,
};
pub use schedule::{ScheduledGc, Turn};
pub(crate) use select::{Scopes, Selection};
pub use sqlite::CURRENT_VERSION;
pub use upstream_disables::UpstreamDisable;

use crate::error::Result;
use crate::keys::{EffectKey, Fingerprint, InvocationKey};
use crate::provider::{Provider, ProviderError};

/// How hard the journal works to make what a caller was told survive a power cut.
/// In both modes an answer is committed before it is returned, so a killed process
/// loses nothing it answered; they differ only when the machine loses power.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Every answer is on disk (fsync) before it is returned, and so is every effect
    /// record before its provider is called. Concurrent callers share the fsyncs
    /// (group commit). The default.
    #[default]
    Full,
    /// Every answer is committed before it is returned, not synced (SQLite's
    /// `synchronous=NORMAL`): a killed process loses nothing it answered; a power cut
    /// may lose the last commits, and an effect that ran may then be performed again
    /// under a key the journal forgot. For journals that can be rebuilt.
    Normal,
}

/// The operations the guard performs on the journal. Each is atomic; each write of a
/// run names the run's lease (`owner`) and changes nothing when the run no longer
/// holds it (fencing).
pub(crate) trait Journal: Send + Sync + std::fmt::Debug {
    /// The read-only first look of a call: a saved outcome to replay, no record at
    /// all, or something [`Journal::decide`] must settle.
    fn lookup(&self, begin: &Begin<'_>) -> Result<Lookup>;

    /// The saved outcome of `key`, completed with `fingerprint`, that this journal
    /// replays from its memory alone, with no I/O (no query, no fsync, no write),
    /// counted as [`Journal::lookup`] counts a replay: exactly the replay `lookup`
    /// would answer, at `now` on the host's clock (a journal whose memory judges
    /// windows on its own clock uses that). `None` ("not remembered") whenever
    /// anything would need the journal itself (a look for other processes'
    /// operations, an fsync, a flush of the counts, a listener not listening, a
    /// window over, another fingerprint); the caller then calls `lookup`. Not for a
    /// call with a tool-call id (its alias is checked in the journal).
    fn replay_from_memory(
        &self,
        key: &InvocationKey,
        fingerprint: &Fingerprint,
        now: i64,
    ) -> Option<std::sync::Arc<str>> {
        let _ = (key, fingerprint, now);
        None
    }

    /// Decides, atomically, whether this call runs, replays, waits or is a mismatch,
    /// taking the lease when it runs. A mismatch writes nothing. A replayed outcome is
    /// durable before it is returned.
    fn decide(&self, begin: &Begin<'_>) -> Result<BeginOutcome>;

    /// The journaled effect at `seq` of `invocation`, if any.
    fn effect(&self, invocation: &InvocationKey, seq: u32) -> Result<Option<EffectRecord>>;

    /// How many effects of `invocation` are journaled at position `seq` or later.
    fn effects_from(&self, invocation: &InvocationKey, seq: u32) -> Result<u32>;

    /// Atomically: renews the run's lease (or journals its invocation running under
    /// it, for a run that has not yet), journals the effect as pending unless it is
    /// already, counts one more attempt, and returns the key to use, read back (never
    /// recomputed), with the attempt's number. Durable before it returns when the
    /// journal's durability asks for it: the provider is called next. The run's
    /// `deferred` answers of earlier keyed effects are saved in the same commit while
    /// the run holds the lease (also when the claim is refused for another reason);
    /// a run that lost it saves none: the run that took over may have handed its
    /// tool another answer to the same key.
    fn claim_attempt(
        &self,
        effect: &NewEffect<'_>,
        lease: &Lease<'_>,
        unjournaled: Option<&NewInvocation>,
        deferred: &[DeferredAnswer],
    ) -> Result<std::result::Result<(EffectKey, u32), Refusal>>;

    /// The same claim for a transactional provider, which then performs the effect
    /// in the same transaction: its writes, the effect's record and its answer commit
    /// together, or nothing does (a refusal rolls back what the provider wrote).
    fn perform_transactional(
        &self,
        effect: &NewEffect<'_>,
        lease: &Lease<'_>,
        unjournaled: Option<&NewInvocation>,
        provider: &dyn Provider,
        request: &TransactionalRequest<'_>,
    ) -> Result<std::result::Result<Answer, Refusal>>;

    /// Notes why the last attempt's outcome is unknown. `false`: the run lost its
    /// lease and nothing was written.
    fn note_attempt_error(
        &self,
        key: &EffectKey,
        error: &str,
        lease: &Lease<'_>,
        invocation: &InvocationKey,
        now: i64,
    ) -> Result<bool>;

    /// Saves an effect's definitive answer, renewing the run's lease, and returns the
    /// answer the journal holds for it: this one, or the first one recorded when
    /// another hand answered it first (a person's `resolve`, a run that took over),
    /// which is the one every resumed run will replay. `None`: the run lost its
    /// lease; the answer is saved all the same (pending→done only moves one way, and
    /// the first answer stays), so a run that took over, or a retry, finds the true
    /// outcome instead of an unknown one.
    fn finish_effect(
        &self,
        key: &EffectKey,
        answer: &Answer,
        lease: &Lease<'_>,
        invocation: &InvocationKey,
        now: i64,
    ) -> Result<Option<Answer>>;

    /// Saves `answer` as the answer of the pending keyed or unkeyed effect `effect`,
    /// which its downstream gave after the run that sent it gave up (an upstream's
    /// late answer), at `now`: only while no run holds the call (its last run left
    /// it resumable, releasing the lease), so no run's tool was handed another answer
    /// to it, and the next run of the call, on any host, replays this one. `Ok(Err)`
    /// says why nothing was written (a run holds the call: the provider hands the
    /// answer to that run's next attempt instead). Durable under
    /// [`Durability::Full`].
    fn answer_late(
        &self,
        effect: &EffectKey,
        answer: &Answer,
        now: i64,
    ) -> Result<std::result::Result<(), String>>;

    /// Saves the run's `deferred` answers of keyed effects in a commit of their own
    /// (before a write that cannot carry them), renewing the lease, and only while
    /// the run holds it; `false` when it lost it (nothing written). Durable as the
    /// journal promises (`full`: synced) before it returns: an answer saved here may
    /// be handed to a downstream next (an upstream's question answered).
    fn save_deferred(
        &self,
        invocation: &InvocationKey,
        lease: &Lease<'_>,
        deferred: &[DeferredAnswer],
    ) -> Result<bool>;

    /// Records that an attempt of an effect was known not to happen (a refused
    /// connection, a configuration refusal), so a later run may attempt it again
    /// even when it is unkeyed. `false`: the run lost its lease, nothing written.
    fn not_performed(
        &self,
        key: &EffectKey,
        reason: &str,
        lease: &Lease<'_>,
        invocation: &InvocationKey,
        now: i64,
    ) -> Result<bool>;

    /// Renews the run's lease; `false` when it lost it.
    fn renew(&self, invocation: &InvocationKey, lease: &Lease<'_>) -> Result<bool>;

    /// Hands the call of the run `owner` over, for a host that stops before the run
    /// ends (a drain past its timeout): its lease ends at `now` (PostgreSQL: the
    /// database's clock) under the owner [`holder::handed_over`] makes of `owner`, so
    /// the next call of the key takes it over at once and says whose it was, and
    /// every later write of the run is fenced as after a takeover. The call stays
    /// running (its effects pending, as the run left them). `false` when the run no
    /// longer holds the lease (it ended, or another host took the call over):
    /// nothing is written.
    fn hand_over(&self, key: &InvocationKey, owner: &str, now: i64) -> Result<bool>;

    /// Saves the outcome of the run `owner` and releases its lease, with the run's
    /// `deferred` effect answers in the same commit; `false` when the run lost the
    /// lease (neither the outcome nor the deferred answers are written). Durable
    /// before it returns under [`Durability::Full`].
    fn complete(
        &self,
        key: &InvocationKey,
        owner: &str,
        outcome: &str,
        now: i64,
        deferred: &[DeferredAnswer],
    ) -> Result<bool>;

    /// Journals a run that never journaled its invocation (it performed no effect)
    /// complete with its outcome; `false` when a record of the key exists already
    /// (another run wins; nothing written). Durable under [`Durability::Full`].
    fn complete_new(&self, record: &NewInvocation, outcome: &str, now: i64) -> Result<bool>;

    /// Leaves the run `owner` resumable and releases its lease, with the run's
    /// `deferred` effect answers in the same commit; `false` when the run lost the
    /// lease (nothing is written, the deferred answers neither).
    fn suspend(
        &self,
        key: &InvocationKey,
        owner: &str,
        now: i64,
        deferred: &[DeferredAnswer],
    ) -> Result<bool>;

    /// Invocations (newest first), optionally of one scope, with their effects.
    fn entries(&self, scope: Option<&str>, limit: u32) -> Result<Vec<JournalEntry>>;

    /// Invocations (newest first) whose scope starts with `prefix` (the calls of one
    /// principal, see [`principal_scope`](crate::principal_scope)).
    fn entries_by_prefix(&self, prefix: &str, limit: u32) -> Result<Vec<JournalEntry>>;

    /// Invocations (newest first) in one conversation whoever made them: its bare
    /// scope ([`bare_scope`](crate::call::bare_scope)) and every principal's scope
    /// with it ([`principal_scope`](crate::principal_scope)).
    fn entries_in_conversation(&self, conversation: &str, limit: u32) -> Result<Vec<JournalEntry>>;

    /// Deletes every completed record past its own window at `now` (a record
    /// journaled before records carried one: `default_retention_ms`), and provider
    /// rows older than `default_retention_ms`; never a call that is open.
    fn gc(&self, now: i64, default_retention_ms: i64) -> Result<GcReport>;

    /// [`Journal::gc`], if the last scheduled gc of this journal (by any host) ran
    /// `every_ms` or more ago on the journal's clock (`now` on SQLite, the database's
    /// on PostgreSQL), recorded as run by `by`; one host at a time (see
    /// [`schedule`]).
    fn gc_if_due(
        &self,
        now: i64,
        every_ms: i64,
        default_retention_ms: i64,
        by: &str,
    ) -> Result<ScheduledGc>;

    /// Takes the turn at the chore recorded in `journal_meta` row `row` (the sweep of
    /// unknown outcomes) for `by`, if its last turn, by any host, was taken `every_ms`
    /// or more before `now` (PostgreSQL: the database's clock), or never: one host of
    /// the journal per interval. Recorded in the statement that decides, so two hosts
    /// that ask at once get one turn between them.
    fn take_turn(&self, row: &str, now: i64, every_ms: i64, by: &str) -> Result<Turn>;

    /// Pending unkeyed effects that wait for a person.
    fn unresolved(&self, now: i64) -> Result<Vec<UnresolvedEffect>>;

    /// Notes what the provider of the effect at `seq` of `invocation` calls it now
    /// (`keyed`, `unkeyed`, `transactional`, `read`) when that differs from the
    /// class its record holds, for `justonce journal` and the console to show
    /// beside the record (which wins); `None` when they agree again. Not fenced: a
    /// note, not a decision.
    fn note_catalog(&self, invocation: &InvocationKey, seq: u32, says: Option<&str>) -> Result<()>;

    /// `tasks/cancel`: journals a cancel of the call of `key` against the generation
    /// its record holds now, and returns that generation (`None`: no record, or one
    /// journaled before records carried their seed; with no record, the cancel is
    /// kept by key and binds the key's first record, whoever makes it). From then
    /// on every host's claim of a new effect of that generation is refused
    /// ([`Refusal::Cancelled`]), read in the claim's own statement or transaction.
    /// The cancel ends with the record: a new generation of the key (after a
    /// `forget` by any process, an expiry, `gc`) is not cancelled. Durable under
    /// [`Durability::Full`].
    fn cancel(&self, key: &InvocationKey) -> Result<Option<u64>>;

    /// The server's secrets that key request states ([`crate::ask::StateKeys`]),
    /// newest first, as lowercase hex: the current one, and those rotated out less
    /// than `keep_ms` before `now` (PostgreSQL: the database's clock). Journals
    /// `first` as the first one when the journal holds none, so every host of the
    /// journal uses the same.
    fn state_secrets(&self, now: i64, keep_ms: i64, first: &str) -> Result<Vec<String>>;

    /// `justonce rotate-state-secret`: `secret` becomes the newest; every other is
    /// rotated out at `now` (PostgreSQL: the database's clock).
    fn rotate_state_secret(&self, now: i64, secret: &str) -> Result<()>;

    /// How many effects are claimed without a definitive answer: in flight, or
    /// whose outcome is unknown.
    fn pending_effects(&self) -> Result<u64>;

    /// A cheap read that writes nothing, for `/readyz`: `Ok` when the journal
    /// answers now (on PostgreSQL, a round trip to its server).
    fn ping(&self) -> Result<()>;

    /// What needs an operator's eye at `now` (ms), for `/metrics`: the calls stuck
    /// with an unknown outcome, and the lease owners of the calls running now.
    fn attention(&self, now: i64) -> Result<Attention>;

    /// `justonce resolve`: atomically records a person's decision about a pending
    /// unkeyed effect (see [`Resolution`]) and the operation, on the effect's call
    /// (`operator.force` is not used). Refused ([`Error::CannotResolve`]) for an
    /// effect the journal does not hold, one with a definitive answer, a keyed or
    /// transactional one, one whose call was abandoned or holds a live lease.
    /// Durable under [`Durability::Full`].
    ///
    /// [`Error::CannotResolve`]: crate::error::Error::CannotResolve
    fn resolve(
        &self,
        effect_key: &str,
        resolution: Resolution,
        response: &serde_json::Value,
        operator: &Operator<'_>,
    ) -> Result<Operated>;

    /// Atomically records what the probe or the person of `run` decided about the
    /// pending unkeyed effect `effect_key` at the call's retry (see [`Resolution`];
    /// `Performed` finishes it with `answer`) and the operation, on the effect's
    /// call, as a `resolve` whose detail says `decided_by` (`probe` or `person`) and
    /// who. Only while `run.owner` holds the call's
    /// lease: refused ([`Error::CannotResolve`]) otherwise, or for an effect that is
    /// not pending and unkeyed. Durable under [`Durability::Full`].
    ///
    /// [`Error::CannotResolve`]: crate::error::Error::CannotResolve
    fn resolve_by_probe(
        &self,
        effect_key: &str,
        resolution: Resolution,
        answer: &serde_json::Value,
        run: &ProbeRun<'_>,
    ) -> Result<Operated>;

    /// One call's whole story: its record with every effect (keys sent downstream,
    /// attempts, answers, last errors, resolutions), if the journal holds it, and the
    /// operations on it, oldest first, which outlive a `forget`.
    fn story(&self, key: &InvocationKey) -> Result<CallStory>;

    /// `justonce forget`: atomically deletes the record of `key` (its effects and
    /// tool-call ids with it) and records the operation (key, `forget`, who, when, a
    /// detail naming the state, outcome and effects removed). The same call then runs
    /// again; its effects get new keys downstream, because the record's generation
    /// went with it. Unless `operator.force`, refused ([`Error::CannotOperate`]) for a
    /// call whose run holds a live lease, or with an effect whose outcome is unknown
    /// (pending, and not resolved `not_performed`). A key with no record that an
    /// earlier `forget` removed is [`Operated::AlreadyDone`]; one never recorded is
    /// refused. Durable under [`Durability::Full`]. A backend that keeps outcomes
    /// in memory forgets the key's there too.
    ///
    /// [`Error::CannotOperate`]: crate::error::Error::CannotOperate
    fn forget(&self, key: &InvocationKey, operator: &Operator<'_>) -> Result<Operated>;

    /// `justonce abandon`: atomically saves the outcome `Trap { reason: "abandoned",
    /// message }` for a call that is incomplete (or running, whose lease expired),
    /// releases any lease, and records the operation. The message says who and when
    /// and lists the effects performed and those whose outcome is unknown (they stay
    /// pending in the record). Every retry then replays it, and retention counts from
    /// now. A call abandoned already is [`Operated::AlreadyDone`]; a call completed
    /// with an outcome of its own, or no record, is refused, and so, unless
    /// `operator.force`, is a call whose run holds a live lease (its later writes are
    /// then fenced off). Durable under [`Durability::Full`].
    fn abandon(&self, key: &InvocationKey, operator: &Operator<'_>) -> Result<Operated>;

    /// The console's "resume now", before the run: atomically checks that `key` is
    /// a call no host runs (open, and its lease ended or released) and records the
    /// operation, with `host` (the host that will run it) and `was` (where the call
    /// stood, as the person saw it) in its detail. Refused ([`Error::CannotOperate`])
    /// for no record, a completed call, or a live lease (never forced). The run
    /// itself is the host's ordinary call under the same key. Durable under
    /// [`Durability::Full`].
    ///
    /// [`Error::CannotOperate`]: crate::error::Error::CannotOperate
    fn resume(
        &self,
        key: &InvocationKey,
        operator: &Operator<'_>,
        host: &str,
        was: &str,
    ) -> Result<Operated>;

    /// Commits and fsyncs so far.
    fn stats(&self) -> JournalStats;

    /// Round trips to a database server so far (none for an embedded journal).
    fn round_trips(&self) -> u64 {
        0
    }

    /// How long the journal's one writer has been busy making and committing the
    /// call path's grouped writes so far (`None` where writes are not serialized on
    /// one connection): the serial part of every call, which bounds the calls per
    /// second concurrent callers can reach.
    fn writer_busy(&self) -> Option<std::time::Duration> {
        None
    }

    /// How long its commits and fsyncs took, for `/metrics`.
    fn metrics(&self) -> &crate::metrics::JournalMetrics;

    /// Creates what a transactional provider keeps in the journal.
    fn prepare_provider(&self, provider: &dyn Provider) -> Result<()>;

    /// The outbox queue in this journal, for delivery.
    fn outbox(&self) -> &dyn outbox::OutboxQueue;

    /// This journal's identity and its mark, the creation time of its newest call
    /// ever, brought up to date now (see [`mark`]). The identity is made with the
    /// journal's schema; `fresh_id` stands in should its row be missing.
    fn mark(&self, fresh_id: &str) -> Result<JournalMark>;

    /// The upstreams an operator disabled, by name, for every host of the journal.
    fn upstream_disables(&self) -> Result<Vec<UpstreamDisable>>;

    /// Journals that the operator `by` disabled the upstream `upstream` at `now`
    /// (PostgreSQL: the database's clock), durable under [`Durability::Full`]. An
    /// upstream disabled already stays disabled by whoever did it first. Answers the
    /// disable on record.
    fn disable_upstream(&self, upstream: &str, by: &str, now: i64) -> Result<UpstreamDisable>;

    /// Ends the disable of `upstream` (an operator's enable), durable under
    /// [`Durability::Full`]; whether it was disabled.
    fn enable_upstream(&self, upstream: &str) -> Result<bool>;

    /// The bearer tokens this journal keeps for every host of it (PostgreSQL);
    /// `None` where each host's tokens file keeps them (SQLite).
    fn tokens(&self) -> Option<&dyn tokens::TokenTable> {
        None
    }

    /// The SQLite journal behind this one, for tests that read a provider's tables.
    fn as_sqlite(&self) -> Option<&sqlite::SqliteJournal>;
}

/// [`Journal::pending_effects`] on both backends.
const PENDING_EFFECTS_SQL: &str = "SELECT COUNT(*) FROM effects WHERE state = 'pending'";

/// Calls stuck with an unknown outcome at `$1` (ms): not completed (an abandoned call
/// is), no live lease (a call in flight is not stuck), and an effect attempted with
/// no answer and no person's resolution. A question to the user (provider `user`)
/// awaiting its answers is not stuck. The same on both journals.
const STUCK_CALLS_SQL: &str = "SELECT COUNT(*) FROM invocations i
  WHERE i.state <> 'completed'
    AND NOT (i.state = 'running' AND i.lease_expires_at > $1)
    AND EXISTS (SELECT 1 FROM effects e
                 WHERE e.invocation_key = i.key AND e.state = 'pending'
                   AND e.resolution IS NULL AND e.attempts > 0
                   AND e.provider <> 'user')";

/// The lease owners of the calls running at `$1` (ms) under a live lease.
const LIVE_OWNERS_SQL: &str = "SELECT lease_owner FROM invocations
  WHERE state = 'running' AND lease_expires_at > $1 AND lease_owner IS NOT NULL";

/// What needs an operator's eye, read from the journal when `/metrics` is scraped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Attention {
    /// Calls stuck with an unknown outcome (see [`Journal::attention`]).
    pub stuck: u64,
    /// The lease owner of each call running now (each names its host).
    pub running_owners: Vec<String>,
}

/// A transactional effect's request, but for the key and attempt number, which the
/// journal reads back inside its transaction.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TransactionalRequest<'a> {
    /// The tool whose call asked for it.
    pub tool: &'a str,
    /// The authenticated principal of the call, if any.
    pub principal: Option<&'a str>,
    /// The operation.
    pub operation: &'a str,
    /// The payload.
    pub payload: &'a serde_json::Value,
}

/// Opens the journal at `path`: a SQLite file (created with its directory), or the
/// PostgreSQL database a `postgres://` URL names, with TLS as its `sslmode` says and
/// libpq's environment (`PGUSER`, `PGSSLMODE`, …) filling in what it leaves out.
/// Its password comes from the URL, else `PGPASSWORD`, else `password_file`, else
/// libpq's password file (`passfile`, `PGPASSFILE`, else `~/.pgpass`).
pub(crate) fn open(
    path: &Path,
    durability: Durability,
    password_file: Option<&Path>,
) -> Result<std::sync::Arc<dyn Journal>> {
    open_with_clock(path, durability, password_file, None)
}

/// [`open`], and, for tests only, a PostgreSQL journal whose database clock is
/// `database_clock` (see `PostgresJournal::with_database_clock`).
pub(crate) fn open_with_clock(
    path: &Path,
    durability: Durability,
    password_file: Option<&Path>,
    database_clock: Option<std::sync::Arc<dyn crate::clock::Clock>>,
) -> Result<std::sync::Arc<dyn Journal>> {
    let text = path.to_string_lossy();
    if self::postgres::is_postgres_url(&text) {
        let target =
            self::postgres::PostgresTarget::from_url(&text, &|name| std::env::var(name).ok())?
                .password_from_files(password_file)?;
        let journal = self::postgres::PostgresJournal::open(target, durability)?;
        return Ok(std::sync::Arc::new(match database_clock {
            Some(clock) => journal.with_database_clock(clock),
            None => journal,
        }));
    }
    Ok(std::sync::Arc::new(sqlite::SqliteJournal::open(
        path, durability,
    )?))
}

/// A journal that lives in memory only.
pub(crate) fn in_memory() -> Result<std::sync::Arc<dyn Journal>> {
    Ok(std::sync::Arc::new(sqlite::SqliteJournal::in_memory()?))
}

/// Maps what a transactional provider answered to the answer saved for it; `Err`
/// when it was not performed (nothing is saved, the transaction rolls back).
pub(crate) fn transactional_answer(
    provider_name: &str,
    answer: std::result::Result<serde_json::Value, ProviderError>,
) -> std::result::Result<Answer, String> {
    Ok(match answer {
        Ok(response) => Answer::Ok(response),
        Err(ProviderError::Rejected(answer)) => Answer::Rejected(answer),
        Err(ProviderError::NotPerformed { reason, .. }) => return Err(reason),
        Err(
            ProviderError::Invalid(reason)
            | ProviderError::Unknown(reason)
            | ProviderError::Throttled { reason, .. }
            | ProviderError::Conflict { reason, .. },
        ) => Answer::Denied(format!("{provider_name} refused the request: {reason}")),
    })
}

/// Writes the line of an operator's action on `target` (a call's key, or an effect's
/// for `resolve`): `info` when done (or found done already), `warn` when refused, with
/// why; the same on every journal, whichever front end (CLI, console) asked.
fn log_operated(action: Action, target: &str, operator: &Operator<'_>, result: &Result<Operated>) {
    let (action, by, force) = (action.as_str(), operator.by, operator.force);
    match result {
        // A resume is recorded before its run, which logs how it ended.
        Ok(Operated::Done(_)) if action == Action::Resume.as_str() => {
            tracing::info!(target: "justonce::operator", action, key = target, by, force, "operator {by}: {action} {target} recorded")
        }
        Ok(Operated::Done(_)) => {
            tracing::info!(target: "justonce::operator", action, key = target, by, force, "operator {by}: {action} {target} done")
        }
        Ok(Operated::AlreadyDone(_)) => tracing::info!(
            target: "justonce::operator",
            action,
            key = target,
            by,
            force,
            "operator {by}: {action} {target}: an earlier operation did it already"
        ),
        Err(error) => tracing::warn!(
            target: "justonce::operator",
            action,
            key = target,
            by,
            force,
            "operator {by}: {action} {target} refused: {error}"
        ),
    }
}

/// [`log_operated`], passing the result through.
fn logged(
    action: Action,
    target: &str,
    operator: &Operator<'_>,
    result: Result<Operated>,
) -> Result<Operated> {
    log_operated(action, target, operator, &result);
    result
}

/// The error a resolution of `effect_key` is refused with, given the reason.
fn cannot_resolve(effect_key: &str) -> impl FnOnce(String) -> crate::error::Error {
    let effect = effect_key.to_string();
    move |reason| crate::error::Error::CannotResolve { effect, reason }
}

/// The error an operator's `action` on `key` is refused with, given the reason.
fn cannot(action: Action, key: &InvocationKey) -> impl FnOnce(String) -> crate::error::Error {
    let key = key.clone();
    move |reason| crate::error::Error::CannotOperate {
        action: action.as_str(),
        key,
        reason,
    }
}
