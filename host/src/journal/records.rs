//! The records the guard reads and writes through a [`Journal`](super::Journal):
//! what every backend stores, independent of how.

use super::read::Resolution;
use crate::determinism::{GuestEntropy, Seed};
use crate::keys::{EffectKey, Fingerprint, InvocationKey};

/// Where an invocation is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InvocationState {
    /// A host holds the lease and is running the guest.
    Running,
    /// The guest stopped on an effect whose outcome is unknown (or a divergence);
    /// a retry resumes it.
    Incomplete,
    /// The outcome is saved and is replayed to every retry.
    Completed,
}

/// A keyed effect's definitive answer that its run has not written yet: it is saved
/// with the run's next commit (the next effect's claim, or the outcome), so a
/// one-effect call costs two commits, not three. Only for a provider that
/// deduplicates by key: should the process die before that commit, the effect is
/// still pending and a retry performs it again under the same key, which the
/// downstream answers as before. An unkeyed effect's answer is never deferred.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DeferredAnswer {
    /// The effect's key.
    pub key: EffectKey,
    /// Its answer.
    pub answer: super::Answer,
    /// When it was answered (ms).
    pub at: i64,
}

/// A request to start (or join) an invocation.
#[derive(Debug, Clone)]
pub struct Begin<'a> {
    /// The invocation key.
    pub key: &'a InvocationKey,
    /// The conversation scope.
    pub scope: &'a str,
    /// The tool's name.
    pub tool: &'a str,
    /// The fingerprint of the tool and its canonical arguments.
    pub fingerprint: &'a Fingerprint,
    /// The canonical arguments (JSON text), stored with a new record so people can
    /// read what the call was. Never a secret: credentials live in the host's
    /// service headers, not in arguments.
    pub arguments: &'a str,
    /// Whether the caller chose the key.
    pub explicit_key: bool,
    /// The provider's tool-call id, if the caller has one.
    pub tool_call_id: Option<&'a str>,
    /// The current time (ms), read before the journal was reached: what a first
    /// look (which takes no lock) judges by, and the label of what it writes.
    pub now: i64,
    /// The clock `now` was read from. A journal that decides on the host's clock
    /// (SQLite: one machine, one clock) reads it again once it holds the lock it
    /// decides under: a `now` read before waiting for that lock may be older than
    /// a lease another run took meanwhile (the clock stepped back), and would find
    /// that live lease expired.
    pub clock: ClockRef<'a>,
    /// This call's window (ms), stored with a record it creates: a completed record
    /// is treated as absent from its completion plus its own stored window on.
    pub retention_ms: i64,
    /// The window of a record journaled before records carried their own (ms): the
    /// host's retention.
    pub default_retention_ms: i64,
    /// How long a lease taken now lasts (ms).
    pub lease_ms: i64,
    /// Who takes the lease.
    pub owner: &'a str,
    /// A fresh seed, journaled if this call creates the invocation (a resumed one
    /// keeps the seed it was created with).
    pub seed: &'a Seed,
    /// The digest (`sha256:…`) of the component that runs the call, recorded with
    /// each run (a retry across a redeploy keeps the key and shows the new digest).
    pub component: Option<&'a str>,
}

/// A clock lent to the journal for one request (see [`Begin::clock`]).
#[derive(Clone, Copy)]
pub struct ClockRef<'a>(pub &'a dyn crate::clock::Clock);

impl std::fmt::Debug for ClockRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ClockRef({} ms)", self.0.now_ms())
    }
}

/// The run a takeover took a call from: its lease owner (which names its host, see
/// [`super::Holder`]) and when its lease ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TakenOver {
    /// The lease owner of the run that stopped, if the journal held one.
    pub owner: Option<String>,
    /// When its lease expired (ms since the epoch).
    pub lease_expired_at: Option<i64>,
}

/// What the caller of [`Journal::decide`](super::Journal::decide) must do next.
#[derive(Debug, Clone, PartialEq)]
pub enum BeginOutcome {
    /// Run the guest: this caller holds the lease.
    Run {
        /// Whether an earlier, unfinished run exists (its journaled effects replay).
        resumed: bool,
        /// The run that held the lease until it expired, when this run took it over
        /// (its host died or stalled); `None` for a first run or a resumed suspension.
        took_over: Option<TakenOver>,
        /// The journaled clock start and random seed the guest sees.
        entropy: GuestEntropy,
    },
    /// Return this saved outcome (stored text), marked replayed.
    Replay(String),
    /// Another run holds a live lease: wait for it.
    Wait,
    /// The key or tool-call id is bound to different arguments.
    Mismatch(InvocationKey),
}

/// What [`Journal::lookup`](super::Journal::lookup) found.
#[derive(Debug, Clone, PartialEq)]
pub enum Lookup {
    /// The saved outcome of a completed, live invocation with the same arguments
    /// (and a tool-call id, if any, already bound to it).
    Replay {
        /// The saved outcome (stored text).
        outcome: String,
        /// When its window ends (ms): its completion plus its retention.
        expires_at: i64,
    },
    /// No record of the key at all, and no tool-call id to bind.
    Absent,
    /// Anything else (running, resumable, expired, a mismatch, an alias to bind):
    /// for [`Journal::decide`](super::Journal::decide).
    Decide,
}

/// An invocation that a run has not journaled yet. A call that finds no record runs
/// its guest first and writes the record with its first effect (with the lease, in
/// that effect's transaction) or, if it performs none, complete with its outcome:
/// one commit instead of two for a call without effects.
#[derive(Debug, Clone)]
pub struct NewInvocation {
    pub key: InvocationKey,
    pub scope: String,
    pub tool: String,
    pub fingerprint: Fingerprint,
    /// The canonical arguments (JSON text), for people reading the journal.
    pub arguments: String,
    pub explicit_key: bool,
    /// The invocation's creation time: the start of the guest's wall clock.
    pub created_at: i64,
    /// How long the record is kept once completed (ms), stored with it.
    pub retention_ms: i64,
    /// The seed of the guest's random values.
    pub seed: Seed,
    /// The digest (`sha256:…`) of the component that runs it.
    pub component: Option<String>,
}

/// Whether an effect's outcome is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EffectState {
    /// Journaled; the provider has not given a definitive answer yet.
    Pending,
    /// The definitive answer is saved in `response`.
    Done,
}

/// One effect as the journal holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct EffectRecord {
    /// The effect's idempotency key, as stored.
    pub key: EffectKey,
    /// The provider's name.
    pub provider: String,
    /// The operation.
    pub operation: String,
    /// The fingerprint of provider, operation and payload.
    pub fingerprint: Fingerprint,
    /// The class decided when the effect was first claimed: every later decision
    /// about it (resend or not, read or effect) reads this, never the provider's
    /// class as configured now. `None` for a class this build does not know.
    pub class: Option<crate::provider::ProviderClass>,
    /// Pending or done.
    pub state: EffectState,
    /// Attempts made so far.
    pub attempts: u32,
    /// The saved answer (stored text) when done.
    pub response: Option<String>,
    /// What a person decided about it, if it was pending and unkeyed.
    pub resolution: Option<Resolution>,
    /// What its provider called it the last time a run met it, when that differed
    /// from [`EffectRecord::class`] (`keyed`, `unkeyed`, `transactional`, `read`).
    pub catalog_class: Option<String>,
}

/// The lease a run must still hold to perform an effect: the guard renews it before
/// every attempt, and an attempt whose run lost it (another host took over) is not
/// made.
#[derive(Debug, Clone, Copy)]
pub struct Lease<'a> {
    /// The run that must hold the lease.
    pub owner: &'a str,
    /// The new expiry when it does (ms), on the host's clock: what SQLite (one
    /// machine) stores.
    pub until: i64,
    /// How long the lease lasts from now (ms): PostgreSQL adds it to the database's
    /// clock, so hosts whose clocks differ agree on when it expires.
    pub ms: i64,
}

/// An effect about to be journaled.
#[derive(Debug, Clone, Copy)]
pub struct NewEffect<'a> {
    /// The effect key, derived once here and stored.
    pub key: &'a EffectKey,
    /// The invocation it belongs to.
    pub invocation: &'a InvocationKey,
    /// Its position in the invocation.
    pub seq: u32,
    /// The provider's name.
    pub provider: &'a str,
    /// The provider's class (`keyed`, …), recorded for people reading the journal.
    pub class: &'a str,
    /// The operation.
    pub operation: &'a str,
    /// The fingerprint of provider, operation and payload.
    pub fingerprint: &'a Fingerprint,
    /// What can end the effect's outcome should it become unknown, decided by the
    /// guard at the claim (an unkeyed effect's only): `probe NAME` (the provider's
    /// probe or the tool's `reconcile`, asked at the call's retry), `ask_person` or
    /// `person`. Shown by `journal --unresolved` and the console.
    pub ends_by: Option<&'a str>,
    /// The current time (ms).
    pub now: i64,
}

/// Why a run may not journal an effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Another host took the invocation over (this run's lease expired).
    LeaseLost,
    /// The run had not journaled its invocation, and another run did meanwhile.
    Superseded,
    /// A transactional provider did not perform the effect (its configuration
    /// refuses it); nothing was written.
    NotPerformed(String),
    /// The run's generation of the call was cancelled by its client (`tasks/cancel`,
    /// journaled by [`Journal::cancel`](super::Journal::cancel), on any host) and the
    /// effect is a new one: nothing was claimed.
    Cancelled,
}
