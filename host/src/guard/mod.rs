//! The guard: the whole invocation state machine, read top to bottom as the contract
//! table in DESIGN.md reads.
//!
//! - [`Guard::call`] **decides**: a call whose arguments are refused stores nothing
//!   (`prepare`); a completed key replays its saved outcome; the same key with other
//!   arguments is a mismatch; a key running elsewhere is waited for, up to a bound,
//!   then `in_progress`; a key whose run stopped (an unknown outcome, a lost host) is
//!   resumed; an absent one runs.
//! - `run` runs the guest through a [`Runner`] with an effect guard
//!   (`effect.rs`) that journals every effect before its provider is called.
//! - `settle` saves the outcome before the caller is answered, or leaves the
//!   invocation resumable when it cannot be saved (an unknown effect outcome, a
//!   divergence, a host fault, a lost lease).
//!
//! The guard needs no wasm: its tests (`contract_tests.rs`) drive it with scripted
//! guests on an in-memory journal.

mod access_log;
mod effect;
mod gateway;
mod handover;
mod heartbeat;
mod invocation;
mod late;
mod prepare;
mod prepared;
mod replayed_keys;
mod runner;
mod settle;
mod task_calls;

#[cfg(test)]
mod contract_tests;
// The PostgreSQL failover drives hosts (guards) over a replicated journal: a test of
// this layer, not of the journal below it.
#[cfg(test)]
mod failover_tests;
pub(crate) mod scripted;

pub(crate) use gateway::GatewayRunner;
pub use handover::HandOver;
pub(crate) use runner::{RECONCILE_TIMEOUT, Runner, ToolProbe, WasmRunner};
pub(crate) use task_calls::{RunningTask, TaskCalls};

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::call::CallRequest;
use crate::call::CallResponse;
use crate::clock::{Clock, millis};
use crate::determinism::{GuestEntropy, Seed};
use crate::error::{Error, Result};
use crate::journal::{
    Begin, BeginOutcome, ClockRef, Holder, HostIdentity, Journal, Lookup, NewInvocation, TakenOver,
};
use crate::keys::InvocationKey;
use crate::metrics::{CallMetrics, ToolCounters};
use crate::mutants::{self, Mutant};
use crate::outcome::Outcome;
use crate::provider::Provider;
use crate::retention::Retention;
use crate::retry::RetryPolicy;
use crate::runtime::spans;
use access_log::Tally;
use effect::{EffectSession, RunStart};
use heartbeat::Heartbeats;
use invocation::{InvocationGuard, WaitBackoff};
use prepare::prepare;
use prepared::Prepared;
use replayed_keys::ReplayedKeys;

/// What every run's effect guard shares: the journal, the providers, the clock and
/// the retry policy.
pub(crate) struct Shared {
    pub journal: Arc<dyn Journal>,
    pub providers: BTreeMap<String, Arc<dyn Provider>>,
    pub clock: Arc<dyn Clock>,
    pub retry: RetryPolicy,
    /// What the guard counts for `/metrics`.
    pub metrics: CallMetrics,
    /// The calls of MCP tasks running here, and those cancelled by their client.
    pub tasks: TaskCalls,
    /// The runs in flight here, and whether the host handed them over.
    pub runs: handover::Runs,
    /// `[tools.NAME] ask_person`: the question each tool's unknown unkeyed effects
    /// put to the person behind the agent at the retry (`effect::probing`).
    pub ask_person: BTreeMap<String, String>,
}

impl Shared {
    /// The server's secrets that key request states, as the journal holds them now
    /// (its first one journaled by whoever asks first). Read at every use: asking is
    /// rare, and a secret rotated by another process is then used at once.
    pub(crate) fn state_keys(&self) -> Result<crate::ask::StateKeys> {
        use crate::ask::{ROTATED_SECRET_KEPT_MS, StateKeys};
        let first = StateKeys::new_secret().map_err(|e| Error::Host(e.into()))?;
        let secrets =
            self.journal
                .state_secrets(self.clock.now_ms(), ROTATED_SECRET_KEPT_MS, &first)?;
        StateKeys::from_hex(&secrets).map_err(|e| Error::Host(e.into()))
    }
}

/// The guard's settings: how long records are kept and leases last, how long a
/// duplicate waits.
#[derive(Debug, Clone)]
pub(crate) struct Policy {
    /// The window of each call, stored with the record it creates.
    pub retention: Arc<Retention>,
    pub lease_ms: i64,
    pub wait_bound: Duration,
    pub poll: Duration,
    /// How often (real time) a run waiting on a provider renews its lease; `None`
    /// never (a host that stands for a paused one, in tests).
    pub renew_every: Option<Duration>,
}

/// The invocation guard of one host.
pub(crate) struct Guard {
    shared: Arc<Shared>,
    runner: Arc<dyn Runner>,
    policy: Policy,
    heartbeats: Arc<Heartbeats>,
    /// In-process duplicates of a running key wait here.
    waiters: InvocationGuard,
    /// Calls that replayed lately: a further retry is prepared by a lookup.
    replayed: ReplayedKeys,
    /// This host process: named in every lease it takes and every call's log line.
    identity: HostIdentity,
    /// This host's lease owner prefix (it names the host); each run adds a counter.
    owner: String,
    runs: AtomicU64,
}

impl Guard {
    /// A guard over `shared` that runs guests through `runner`.
    pub(crate) fn new(shared: Arc<Shared>, runner: Arc<dyn Runner>, policy: Policy) -> Self {
        late::journal_late_answers(shared.providers.values(), &shared.journal, &shared.clock);
        Self {
            heartbeats: Arc::new(Heartbeats::new(
                Arc::clone(&shared),
                policy.lease_ms,
                policy.renew_every,
            )),
            shared,
            runner,
            policy,
            waiters: InvocationGuard::default(),
            replayed: ReplayedKeys::default(),
            identity: HostIdentity::current(None, started_ms())
                .expect("the machine's own name is always usable"),
            owner: String::new(),
            runs: AtomicU64::new(0),
        }
        .identified_as_self()
    }

    /// The same guard, naming `identity` as the host in its leases and log lines.
    pub(crate) fn identified_as(mut self, identity: HostIdentity) -> Self {
        self.identity = identity;
        self.identified_as_self()
    }

    fn identified_as_self(mut self) -> Self {
        self.owner = self.identity.owner_prefix();
        self
    }

    /// The host process this guard runs calls on.
    pub(crate) fn identity(&self) -> &HostIdentity {
        &self.identity
    }

    /// The journal, clock, providers and policy every run shares.
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// How long records of calls in a conversation are kept, in ms: the window of a
    /// record journaled before records carried their own.
    pub(crate) fn retention_ms(&self) -> i64 {
        millis(self.policy.retention.conversation)
    }

    /// The window of every call.
    pub(crate) fn retention(&self) -> &Retention {
        &self.policy.retention
    }

    /// The invocation key a call would run under, without running anything.
    pub(crate) fn key_for(&self, request: &CallRequest) -> Result<InvocationKey> {
        Ok(prepare(&*self.runner, request, None)?.key)
    }

    /// Calls a tool under the guard: runs it the first time, replays the saved
    /// outcome to every retry, waits for a parallel duplicate, and refuses the same key
    /// with different arguments.
    pub(crate) fn call(&self, request: &CallRequest) -> Result<CallResponse> {
        let metrics = &self.shared.metrics;
        let prepared = prepare(&*self.runner, request, Some(&self.replayed))
            .inspect_err(|e| metrics.refused(e.kind()))?;
        self.call_prepared(request, prepared)
    }

    /// A sweep's run of the stopped call `request` (see [`Prepared::probe_only`]):
    /// as the agent's retry, up to its first pending unkeyed effect, whose probe is
    /// asked and its decision journaled; then it stops, performing nothing new, and
    /// the agent's next retry goes on from the decision. A call with nothing left to
    /// probe stops where it would perform something.
    pub(crate) fn probe_call(&self, request: &CallRequest) -> Result<CallResponse> {
        let mut prepared = prepare(&*self.runner, request, None)?;
        prepared.probe_only = true;
        self.call_prepared(request, prepared)
    }

    /// Whether an unknown outcome of the unkeyed effect `provider.operation` of
    /// `tool` has a probe to ask: its provider's, or the tool's own `reconcile`.
    pub(crate) fn has_probe(&self, tool: &str, provider: &str, operation: &str) -> bool {
        let by_provider = self
            .shared
            .providers
            .get(provider)
            .is_some_and(|p| p.probe_of(operation, &serde_json::Value::Null).is_some());
        by_provider
            || self
                .runner
                .tool(tool)
                .is_some_and(|spec| self.runner.tool_probe(&spec).is_some())
    }

    /// [`Guard::call`] once its arguments are accepted.
    fn call_prepared(&self, request: &CallRequest, prepared: Prepared) -> Result<CallResponse> {
        let metrics = &self.shared.metrics;
        let _in_flight = metrics.in_flight();
        let counters = metrics.tool(&prepared.tool.name);
        let started = Instant::now();
        let tool = prepared.tool.name.clone();
        let key = prepared.key.clone();
        let swept = prepared.probe_only;
        let mut tally = Tally::default();
        // Every log line of the call names its key (JUSTONCE_LOG_FORMAT=json), and the
        // call's trace says how it ended.
        let span = spans::call(&prepared.tool.name, &prepared.key).entered();
        let answer = self.decide_and_run(request, prepared, &mut tally);
        if swept {
            // The sweeper's probe, not a call of the agent's: counted by the sweep
            // (`justonce_sweep_probes_total`), not as a call that ended.
            spans::call_failed(&span, access_log::SWEPT);
        } else {
            answered(&span, &counters, &answer);
        }
        // The call's own line stands outside its span: it carries every field itself.
        drop(span);
        access_log::call_ended(
            &self.identity.name,
            (request, swept),
            &tool,
            &key,
            tally,
            started.elapsed(),
            &answer,
        );
        answer
    }

    /// [`Guard::call`] of a call that replayed lately, answered from memory alone:
    /// the same answer, counted, traced and remembered the same, with no I/O,
    /// nothing run and nothing waited for. `None` ("not remembered") whenever the
    /// answer needs the journal or a run (a call not remembered, or with a tool-call
    /// id; a read-only tool; anything the journal's memory cannot vouch for, see
    /// [`Journal::replay_from_memory`]); then [`Guard::call`] decides.
    ///
    /// No duplicate of the call can be running in this process meanwhile: an
    /// outcome is remembered only while its record is complete and within its
    /// window, and such a record never runs again.
    pub(crate) fn replay_from_memory(&self, request: &CallRequest) -> Option<Result<CallResponse>> {
        if request.tool_call_id.is_some() {
            return None;
        }
        let prepared = prepare::recall(&*self.runner, request, &self.replayed)?;
        if prepared.tool.read_only {
            return None;
        }
        let stored = self.shared.journal.replay_from_memory(
            &prepared.key,
            &prepared.fingerprint,
            self.shared.clock.now_ms(),
        )?;
        let metrics = &self.shared.metrics;
        let _in_flight = metrics.in_flight();
        let counters = metrics.tool(&prepared.tool.name);
        let started = Instant::now();
        let tool = prepared.tool.name.clone();
        let span = spans::call(&prepared.tool.name, &prepared.key).entered();
        let answer = replayed(prepared.key, &stored);
        answered(&span, &counters, &answer);
        drop(span);
        if let Ok(response) = &answer {
            access_log::call_ended(
                &self.identity.name,
                (request, false),
                &tool,
                &response.key,
                Tally::default(),
                started.elapsed(),
                &answer,
            );
        }
        Some(answer)
    }

    /// [`Guard::call`] once its arguments are accepted and its key known.
    fn decide_and_run(
        &self,
        request: &CallRequest,
        prepared: Prepared,
        tally: &mut Tally,
    ) -> Result<CallResponse> {
        let owner = format!(
            "{}/{}",
            self.owner,
            self.runs.fetch_add(1, Ordering::Relaxed)
        );
        let started = Instant::now();
        // Journaled only if this call creates the invocation; a resumed run gets the
        // seed its first run drew, so it sees the same random values.
        let seed = Seed::random()?;
        let scope = request.scope();
        let retention_ms = millis(
            self.policy
                .retention
                .of_call(&prepared.tool.name, request.is_scoped()),
        );
        let default_retention_ms = self.retention_ms();
        let begin_now = || Begin {
            key: &prepared.key,
            scope: &scope,
            tool: &prepared.tool.name,
            fingerprint: &prepared.fingerprint,
            arguments: &prepared.canonical,
            explicit_key: request.key.is_some(),
            tool_call_id: request.tool_call_id.as_deref(),
            now: self.shared.clock.now_ms(),
            clock: ClockRef(self.shared.clock.as_ref()),
            retention_ms,
            default_retention_ms,
            lease_ms: self.policy.lease_ms,
            owner: &owner,
            seed: &seed,
            component: prepared.tool.component.as_deref(),
        };
        // Nothing to deduplicate for a read-only tool: no record, no waiting for a
        // duplicate; every call runs, and an effect it asks for traps. Read-only is
        // decided per invocation, from the journal: a call whose key has a record
        // (journaled while its tool was not read-only) goes on from that record as
        // any journaled call does, and is never re-run as a read.
        // Its first look, taken once: the loop's first pass decides from it (a
        // replay is counted once, and the journal read once).
        let mut looked = None;
        if prepared.tool.read_only {
            let found = if mutants::on(Mutant::ReadOnlyFromCatalog) {
                Lookup::Absent
            } else {
                self.shared.journal.lookup(&begin_now())?
            };
            if found != Lookup::Absent {
                looked = Some(found);
            }
        }
        if prepared.tool.read_only && looked.is_none() {
            let start = RunStart {
                entropy: GuestEntropy {
                    seed: seed.clone(),
                    started_ms: self.shared.clock.now_ms(),
                },
                unjournaled: None,
                resumed: false,
                read_only: true,
            };
            return self
                .run(&prepared, &owner, start, tally)?
                .ok_or_else(|| Error::Host(anyhow::anyhow!("a read-only run saves nothing")));
        }
        let mut told_waiting = false;
        let mut waiting = || {
            if !std::mem::replace(&mut told_waiting, true) {
                crate::runtime::log_listener::host_says(&prepared.tool.name, || {
                    "waiting for the first call with this key to finish; its outcome is the answer"
                        .to_owned()
                });
            }
        };
        let mut backoff = WaitBackoff::new(self.policy.poll);
        loop {
            // One call of a key at a time in this process: a duplicate waits here for
            // the running one, then looks again (and replays its outcome).
            let Some(entered) = self.waiters.enter_or_wait(&prepared.key, self.policy.poll) else {
                waiting();
                if started.elapsed() >= self.policy.wait_bound {
                    return Err(Error::InProgress { key: prepared.key });
                }
                continue;
            };
            let begin = begin_now();
            let found = match looked.take() {
                Some(found) => found,
                None => self.shared.journal.lookup(&begin)?,
            };
            let decided = match found {
                // Same key, completed: the saved outcome, byte for byte; nothing runs.
                Lookup::Replay { outcome, .. } => BeginOutcome::Replay(outcome),
                // No record: run first, and journal the invocation with its first
                // effect, or complete with its outcome if it performs none.
                Lookup::Absent => {
                    self.shared.tasks.fresh_run(prepared.key.as_str());
                    let record = NewInvocation {
                        key: prepared.key.clone(),
                        scope: begin.scope.to_owned(),
                        tool: prepared.tool.name.to_string(),
                        fingerprint: prepared.fingerprint.clone(),
                        arguments: prepared.canonical.clone(),
                        explicit_key: begin.explicit_key,
                        created_at: begin.now,
                        retention_ms,
                        seed: seed.clone(),
                        component: prepared.tool.component.as_deref().map(str::to_owned),
                    };
                    let start = RunStart {
                        entropy: GuestEntropy {
                            seed: seed.clone(),
                            started_ms: begin.now,
                        },
                        unjournaled: Some(record),
                        resumed: false,
                        read_only: false,
                    };
                    match self.run(&prepared, &owner, start, tally)? {
                        Some(response) => return Ok(response),
                        // Another process journaled the key meanwhile: look again.
                        None => continue,
                    }
                }
                Lookup::Decide => self.shared.journal.decide(&begin)?,
            };
            match decided {
                BeginOutcome::Run {
                    entropy,
                    resumed,
                    took_over,
                } => {
                    if !resumed {
                        // A new invocation (the old record expired): not the call
                        // that was cancelled.
                        self.shared.tasks.fresh_run(prepared.key.as_str());
                    }
                    if let Some(taken) = &took_over {
                        self.shared.metrics.tool(&prepared.tool.name).took_over();
                        self.log_takeover(&prepared, taken);
                    }
                    crate::fault::point(crate::fault::FaultPoint::AfterDecide);
                    let start = RunStart {
                        entropy,
                        unjournaled: None,
                        resumed,
                        read_only: false,
                    };
                    match self.run(&prepared, &owner, start, tally)? {
                        Some(response) => return Ok(response),
                        None => continue,
                    }
                }
                BeginOutcome::Replay(stored) => {
                    self.replayed.remember(request, &prepared);
                    return replayed(prepared.key, &stored);
                }
                // Same key, other arguments: nothing runs, nothing is stored.
                BeginOutcome::Mismatch(key) => return Err(Error::Mismatch { key }),
                // Running in another process (or host): poll the journal.
                BeginOutcome::Wait => {
                    drop(entered);
                    waiting();
                    let left = self.policy.wait_bound.saturating_sub(started.elapsed());
                    if left.is_zero() {
                        return Err(Error::InProgress { key: prepared.key });
                    }
                    self.waiters.wait(&prepared.key, backoff.next().min(left));
                }
            }
        }
    }

    /// Runs the guest once and settles its outcome. `None` when the run gave way to
    /// another run of the same key that journaled it first (the caller looks again).
    fn run(
        &self,
        prepared: &Prepared,
        owner: &str,
        start: RunStart,
        tally: &mut Tally,
    ) -> Result<Option<CallResponse>> {
        tally.runs += 1;
        let _running = self.shared.runs.enter(&prepared.key, owner);
        let mut session = EffectSession::new(
            Arc::clone(&self.shared),
            Arc::clone(&self.heartbeats),
            prepared,
            owner,
            self.policy.lease_ms,
            start,
        );
        session.tool_probe = self.runner.tool_probe(&prepared.tool);
        session.probe_only = prepared.probe_only;
        let (guest, handler) =
            self.runner
                .run(&prepared.tool, &prepared.canonical, Box::new(session));
        let session = handler
            .into_any()
            .downcast::<EffectSession>()
            .expect("the runner hands back the handler it was given");
        tally.attempts += session.attempts;
        settle::settle(&self.shared, prepared, owner, guest, *session)
    }
}

impl Guard {
    /// Cancels the call of `key` (`tasks/cancel`): the generation its record holds
    /// now, journaled against it ([`Journal::cancel`]) so every host's next claim of
    /// a new effect of it is refused; with no record yet, journaled for the key's
    /// first record, whichever host makes it, and kept in this host's memory for its
    /// first run here that asks for a new effect. It ends with that
    /// generation wherever it ends: once the record is gone, the same call made
    /// again is not cancelled.
    ///
    /// The generation cancelled (`None`: no record yet).
    ///
    /// [`Journal::cancel`]: crate::journal::Journal::cancel
    pub(crate) fn cancel_task(&self, key: &InvocationKey) -> Result<Option<u64>> {
        let generation = self
            .shared
            .journal
            .cancel(key, self.shared.clock.now_ms())?;
        self.shared.tasks.cancel(key.as_str(), generation);
        Ok(generation)
    }

    /// Hands over the calls of every run in flight on this host, for a host that
    /// stops before they end (a drain past its timeout): no run here writes to the
    /// journal any more, and each call's lease ends now, marked handed over, so the
    /// next retry of it, on any host, takes it over at once. Each is logged (`warn`).
    pub(crate) fn hand_over(&self) -> HandOver {
        let mut report = HandOver::default();
        for (key, owner) in self.shared.runs.hand_over() {
            match self
                .shared
                .journal
                .hand_over(&key, &owner, self.shared.clock.now_ms())
            {
                Ok(true) => {
                    tracing::warn!(
                        key = %key,
                        host = %self.identity.name,
                        "handed over call {key}: its lease ends now, and the next retry of it, on any host, takes it over at once"
                    );
                    report.handed_over.push(key);
                }
                // It ended meanwhile, or another host took it over.
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(
                        key = %key,
                        host = %self.identity.name,
                        "cannot hand over call {key}: {e}; a retry takes it over once its lease expires"
                    );
                    report.failed.push((key, e.to_string()));
                }
            }
        }
        report
    }

    /// Says which host's run this one took over: the one line that tells an operator
    /// a host handed a call over as it drained, or left it in the middle (stopped,
    /// stalled, or cut off from its journal) and its lease ran out.
    fn log_takeover(&self, prepared: &Prepared, taken: &TakenOver) {
        let holder = taken.owner.as_deref().map(Holder::of);
        let from = holder
            .as_ref()
            .map(Holder::label)
            .unwrap_or_else(|| "a host that left no owner".into());
        let ended = taken
            .lease_expired_at
            .map(crate::clock::rfc3339)
            .unwrap_or_default();
        let how = match holder.as_ref().is_some_and(|h| h.handed_over) {
            true => format!("that {from} handed over at {ended} as it drained"),
            false => format!(
                "from {from}, whose lease on it ended at {ended} with no word from it (stopped, stalled, or cut off from the journal)"
            ),
        };
        tracing::warn!(
            tool = %prepared.tool.name,
            key = %prepared.key,
            from = %from,
            from_owner = taken.owner.as_deref().unwrap_or(""),
            lease_ended = %ended,
            handed_over = holder.as_ref().is_some_and(|h| h.handed_over),
            host = %self.identity.name,
            "took over a call {how}; its journaled effects replay, a pending one is sent again under the same key"
        );
    }
}

/// How often (real time) a host renews a lease of `lease_ms` while a provider call is
/// in flight.
pub(crate) fn renew_interval(lease_ms: i64) -> Duration {
    Heartbeats::interval_for(lease_ms)
}

/// Records how a call ended on its span and its tool's counters.
fn answered(span: &tracing::Span, counters: &ToolCounters, answer: &Result<CallResponse>) {
    match answer {
        Ok(response) => {
            spans::call_answered(span, &response.outcome, response.replayed);
            counters.answered(match response.replayed {
                true => "replayed",
                false => response.outcome.kind(),
            });
        }
        Err(error) => {
            spans::call_failed(span, error.kind());
            counters.answered(error.kind());
        }
    }
}

/// The answer to a call whose outcome was saved by an earlier attempt.
fn replayed(key: InvocationKey, stored: &str) -> Result<CallResponse> {
    let outcome = Outcome::from_stored(stored).map_err(|e| {
        Error::Host(anyhow::anyhow!(
            "the saved outcome of {key} is unreadable: {e}"
        ))
    })?;
    Ok(CallResponse {
        key,
        replayed: true,
        outcome,
    })
}

/// Now, by this machine's clock (ms since the epoch): when a host process started.
fn started_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(crate::clock::millis)
        .unwrap_or(0)
}
