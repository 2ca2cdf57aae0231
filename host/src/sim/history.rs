//! One history: several hosts (guards, each with its own connection to one journal,
//! SQLite or PostgreSQL, see `store.rs`) shared by agents that call, retry, re-plan,
//! duplicate and reuse keys, while a chaos thread moves the clocks (the shared one,
//! and on PostgreSQL each host's own), runs `gc` and fills the disk or ends the
//! database's sessions, the downstreams lose responses, throttle, stall and crash,
//! and hosts crash at the guard's steps, runs pause past their leases between
//! effects, and an outbox delivery loop sends webhooks to a receiver on 127.0.0.1.
//! On SQLite under the power-loss model, the power may go in the middle of the
//! history, as a webhook arrives: the hosts restart on what the cut kept. Then
//! faults stop and every call is retried until it has a final answer, and the
//! outbox is delivered; everything anyone was told, and every webhook the receiver
//! got, is recorded for the checker.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::{Value, json};

use super::check::{self, Call, Res};
use super::clock::{HostClock, SimClock};
use super::guests;
use super::receiver::{Delivery, Receiver, Take};
use super::rng::Rng;
use super::store::{Held, JournalKind, PowerCut, SqliteMode, Store, StoreError};
use super::world::{Chaos, Downstream, FaultKind, Ledger, Outbox, SimCrash, next_order};
use crate::call::CallRequest;
use crate::clock::Clock;
use crate::delivery::{Deliverer, DeliveryPolicy};
use crate::guard::scripted::ScriptedRunner;
use crate::guard::{Guard, Policy, Shared};
use crate::http::HttpConfig;
use crate::journal::{Journal, Resolution};
use crate::keys::InvocationKey;
use crate::outcome::Outcome;
use crate::provider::{Provider, ProviderClass};
use crate::providers::KvProvider;
use crate::retention::Retention;
use crate::retry::RetryPolicy;
use crate::serving::admission::Admission;

/// Records are kept this long (simulated time).
pub(crate) const RETENTION_MS: i64 = 3_600_000;
/// A run's lease.
const LEASE_MS: i64 = 30_000;
/// Rounds of the fault-free end before a call without a final answer is a violation.
const FINAL_ROUNDS: usize = 12;
/// In a history that may lose power in the middle, the chance (percent) that it
/// goes as a given webhook arrives: a few webhooks arrive before it does.
const CUT_PERCENT: u64 = 25;
/// The chance (percent) that the receiver records a webhook and loses its answer:
/// delivery then sends it again, under the same key.
const LOSE_ANSWER_PERCENT: u64 = 10;
/// Calls of one principal each host lets run at once (`serving::admission`): small,
/// so that a flood of resumes meets it.
const CAP_PER_PRINCIPAL: usize = 2;
/// What resumes a run without a `tools/call` of its own, in a flood: the
/// `tasks/update` that completed a task's answers, an operator's "Resume now" in
/// the console, and a background reconciliation (a sweeper that would resume a
/// call whose unknown outcome a probe ended; `serve` runs none yet).
const RESUMED_BY: [&str; 3] = ["tasks/update", "console Resume now", "reconciliation"];

/// Delivery passes of the fault-free end, each after the clock moved past every
/// backoff.
const FINAL_PASSES: usize = 20;

/// How big a history is.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Size {
    /// Hosts sharing the journal.
    pub hosts: usize,
    /// Agents calling concurrently.
    pub agents: usize,
    /// Steps each agent takes.
    pub steps: usize,
}

/// What one history did and what the checker found.
#[derive(Debug)]
pub(crate) struct Outcomes {
    pub faults: BTreeMap<FaultKind, u64>,
    pub violations: Vec<String>,
    pub schedule: Vec<String>,
    pub calls: usize,
    /// How the calls ended: `answered`, `replayed`, `crashed` or an error's kind.
    pub endings: BTreeMap<String, u64>,
}

/// One tool call's intent: the same intent may be sent many times, written
/// differently.
#[derive(Debug, Clone)]
struct Intent {
    tool: &'static str,
    /// The arguments as the tool sees them (defaults filled in, no nulls): the
    /// checker's name for the intent, made without the host's normalization.
    args: Value,
    scope: String,
    key: Option<String>,
    call_id: Option<String>,
}

/// One host: a guard over its own connection to the shared journal file.
struct SimHost {
    guard: Guard,
    journal: Arc<dyn Journal>,
}

struct World {
    clock: Arc<SimClock>,
    /// Each host's own clock (a restarted host's process runs on the same machine).
    host_clocks: Vec<Arc<HostClock>>,
    chaos: Arc<Chaos>,
    runner: Arc<ScriptedRunner>,
    providers: BTreeMap<String, Arc<dyn Provider>>,
    pay: Arc<Downstream>,
    sms: Arc<Downstream>,
    /// The outbox the `hook` tool enqueues to, and where its webhooks go.
    outbox: Arc<Outbox>,
    http: Arc<HttpConfig>,
    receiver: Receiver,
    hosts: Vec<Mutex<Arc<SimHost>>>,
    /// A connection no guard uses: what the journal holds, as another process sees it.
    verifier: Mutex<Arc<dyn Journal>>,
    /// Whether the power may go in the middle of this history (then `CUT_PERCENT`
    /// of webhooks, as each arrives, until it has).
    may_cut: bool,
    /// The power cut in the middle of the history, once it happened: what it kept,
    /// and the clock's moment it happened.
    cut: Mutex<Option<(PowerCut, usize)>>,
    intents: Mutex<Vec<Intent>>,
    calls: Mutex<Vec<Call>>,
    /// The request state of each intent's last `input_required`: its agent calls
    /// again with it and the answers (the stateless wire's way).
    states: Mutex<BTreeMap<usize, String>>,
    /// Every answer the person gave, under the effect key of the question.
    given: Arc<Mutex<Vec<check::Given>>>,
    /// The effect key of the question each request state was issued for.
    issued: Arc<Mutex<BTreeMap<String, String>>>,
    /// Every cancel a host took.
    cancels: Mutex<Vec<check::Cancel>>,
    /// Every record an operator forgot from another process.
    forgotten: Mutex<Vec<check::Forget>>,
    /// Each host's admission: its calls in flight per principal, capped at
    /// [`CAP_PER_PRINCIPAL`]; a host restarted in its place keeps its slot's (the
    /// permits of a dead process's calls are dropped as their threads unwind).
    admissions: Vec<Admission>,
    /// Every call that ran on a host, admitted, from its start to its end.
    runs: Mutex<Vec<check::Run>>,
    policy: Policy,
    /// Host panics that were not simulated crashes.
    panics: Mutex<Vec<String>>,
    /// The journal's database: last, so every connection is closed before it goes.
    store: Store,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Silences the simulated crashes' panics (and only those).
fn quiet_crashes() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info.payload().is::<SimCrash>() {
                previous(info);
            }
        }));
    });
}

impl World {
    /// Opens host `i`'s connection and guard. Even hosts renew the leases of runs
    /// waiting on a provider (as a live host does); odd ones stand for paused hosts
    /// and never do, so a slow downstream lets another host take over.
    fn open_host(&self, i: usize) -> crate::error::Result<Arc<SimHost>> {
        let journal = self.store.open(Some(i), &self.clock)?;
        for provider in self.providers.values() {
            journal.prepare_provider(provider.as_ref())?;
        }
        let shared = Arc::new(Shared {
            journal: Arc::clone(&journal),
            providers: self.providers.clone(),
            clock: self.host_clocks[i].clone(),
            retry: RetryPolicy {
                max_attempts: 3,
                initial_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_secs(1),
                max_retry_after: Duration::from_secs(5),
            },
            metrics: Default::default(),
            tasks: Default::default(),
            runs: Default::default(),
            ask_person: Default::default(),
        });
        let runner: Arc<dyn crate::guard::Runner> = self.runner.clone();
        let policy = Policy {
            renew_every: i.is_multiple_of(2).then_some(Duration::from_millis(1)),
            ..self.policy.clone()
        };
        Ok(Arc::new(SimHost {
            guard: Guard::new(shared, runner, policy),
            journal,
        }))
    }

    fn host(&self, i: usize) -> Arc<SimHost> {
        Arc::clone(&lock(&self.hosts[i % self.hosts.len()]))
    }

    fn verifier(&self) -> Arc<dyn Journal> {
        Arc::clone(&lock(&self.verifier))
    }

    /// A deliverer of the outbox over a connection of its own, with the hosts' HTTP
    /// configuration and the shared clock; `None` (and a violation noted) when the
    /// journal cannot be opened.
    fn deliverer(&self) -> Option<Deliverer> {
        let made = || -> crate::error::Result<Deliverer> {
            let journal = self.store.open(None, &self.clock)?;
            for provider in self.providers.values() {
                journal.prepare_provider(provider.as_ref())?;
            }
            let shared = Arc::new(Shared {
                journal,
                providers: self.providers.clone(),
                clock: self.clock.clone(),
                retry: RetryPolicy::default(),
                metrics: Default::default(),
                tasks: Default::default(),
                runs: Default::default(),
                ask_person: Default::default(),
            });
            let runner: Arc<dyn crate::guard::Runner> = self.runner.clone();
            let guard = Guard::new(shared, runner, self.policy.clone());
            let host = crate::host::Host::new(
                guard,
                runtime(),
                crate::runtime::ToolLimits::default(),
                Arc::clone(&self.http),
            );
            Ok(Deliverer::new(&host)?.policy(DeliveryPolicy {
                initial_backoff: Duration::from_secs(1),
                max_backoff: Duration::from_secs(10),
                ..DeliveryPolicy::default()
            }))
        };
        made()
            .map_err(|e| lock(&self.panics).push(format!("cannot start delivery: {e}")))
            .ok()
    }

    /// What the receiver does with webhook `delivery`, as it arrives: refuses it if
    /// the power is off (the host that sent it is dead), maybe cuts the power now
    /// (the webhook arrived before the cut; its deliverer waits for an answer that
    /// never counts), or loses its answer.
    fn received(&self, _delivery: &Delivery) -> Take {
        if self.chaos.powered_off() {
            return Take::Dead;
        }
        let Some((cut, lose)) = self
            .chaos
            .roll(|rng| (rng.chance(CUT_PERCENT), rng.chance(LOSE_ANSWER_PERCENT)))
        else {
            return Take::Answer;
        };
        if cut && self.may_cut && lock(&self.cut).is_none() {
            // Off first: an answer given before this moment was synced before the
            // copy of what the disk kept is made.
            self.chaos.power_off();
            let at = self.clock.mark();
            match self.store.power_cut() {
                Some(Ok(kept)) => {
                    self.chaos
                        .record(FaultKind::PowerCutMidHistory, "as a webhook arrived");
                    *lock(&self.cut) = Some((kept, at));
                }
                Some(Err(e)) => {
                    lock(&self.panics).push(e);
                    self.chaos.power_on();
                }
                None => self.chaos.power_on(),
            }
            return Take::Answer;
        }
        if lose { Take::LoseAnswer } else { Take::Answer }
    }

    /// After a power cut in the middle of the history: every host (and the
    /// verifier) restarts on what the cut kept, and the power is back. The answers
    /// given before the cut must all be there: what it took back, one line each.
    fn restart_after_cut(&self) -> Vec<String> {
        let Some((kept, at)) = lock(&self.cut).take() else {
            return Vec::new();
        };
        let calls = lock(&self.calls).clone();
        let forgotten = lock(&self.forgotten).clone();
        let history = check::History {
            forgotten: &forgotten,
            ..check::History::of_calls(&calls, &self.clock, RETENTION_MS)
        };
        let mut violations = check::lost_by_power_cut(&history, at, |key, outcome| {
            on_record_in(kept.held(key), outcome)
        });
        // A cancel acknowledged after the cut's moment may or may not be in what the
        // disk kept (its sync may have come after the power went: a process the cut
        // would have stopped acknowledged it), as an answer given then is not checked
        // either; one acknowledged before it was synced before the copy, and holds.
        for cancel in lock(&self.cancels).iter_mut().filter(|c| c.at >= at) {
            cancel.maybe_lost = true;
        }
        self.store.resume_after(&kept);
        let reopened = (|| -> crate::error::Result<()> {
            for i in 0..self.hosts.len() {
                *lock(&self.hosts[i]) = self.open_host(i)?;
            }
            let verifier = self.store.open(None, &self.clock)?;
            for provider in self.providers.values() {
                verifier.prepare_provider(provider.as_ref())?;
            }
            *lock(&self.verifier) = verifier;
            Ok(())
        })();
        if let Err(e) = reopened {
            violations.push(format!(
                "the journal cannot be opened after the power cut: {e}"
            ));
        }
        self.chaos.power_on();
        violations
    }

    /// Sends `request` (of intent `intent`) to host `host` as its agent's
    /// `tools/call`: see [`World::admitted_call`].
    fn call(&self, intent: usize, request: &CallRequest, host: usize, final_phase: bool) -> Res {
        self.admitted_call(intent, request, host, final_phase, None)
    }

    /// Runs `request` (of intent `intent`) on host `host` once the host's admission
    /// lets its principal in: as a `tools/call` (`resumed_by` `None`), or resumed
    /// by what `resumed_by` names (`Admission::resume`). Past the cap nothing
    /// runs and the agent is told to come back (`too_many`, as the server's 429);
    /// otherwise the run is recorded, from its start to its end, for the checker.
    fn admitted_call(
        &self,
        intent: usize,
        request: &CallRequest,
        host: usize,
        final_phase: bool,
        resumed_by: Option<&'static str>,
    ) -> Res {
        let at = host % self.hosts.len();
        let principal = principal_of(&lock(&self.intents)[intent].scope);
        let admission = &self.admissions[at];
        let permit = match resumed_by {
            None => admission.enter(&principal),
            Some(_) => admission.resume(&principal),
        };
        let Some(permit) = permit else {
            return Res::Error {
                kind: TOO_MANY.into(),
                retry_safe: true,
                message: admission.full(&principal),
            };
        };
        let start = next_order();
        let res = self.run_call(intent, request, host, final_phase);
        lock(&self.runs).push(check::Run {
            host: at,
            principal,
            by: resumed_by.unwrap_or("tools/call"),
            start,
            end: next_order(),
        });
        drop(permit);
        res
    }

    /// Runs `request` (of intent `intent`) on host `host`, and records what the agent
    /// was told and whether the journal, read through another connection, holds it.
    fn run_call(
        &self,
        intent: usize,
        request: &CallRequest,
        host: usize,
        final_phase: bool,
    ) -> Res {
        let h = self.host(host);
        let key = h.guard.key_for(request).ok().map(|k| k.to_string());
        // The call by the agent's own account (the tool and the arguments as it
        // sees them, however they were spelled), and, where the host rather than the
        // caller chooses the key, the intent: one intent must have one key and one key
        // one intent.
        let fingerprint = {
            let intents = lock(&self.intents);
            format!("{} {}", intents[intent].tool, intents[intent].args)
        };
        let meaning = request
            .key
            .is_none()
            .then(|| format!("{} {fingerprint}", request.scope()));
        let from = self.clock.mark();
        let chaos = Arc::clone(&self.chaos);
        let at = host % self.hosts.len();
        let crash: crate::fault::Hook = Rc::new(move |point| chaos.crash_at(point, at));
        let person = Rc::new(Person {
            state: lock(&self.states).get(&intent).cloned(),
            chaos: Arc::clone(&self.chaos),
            given: Arc::clone(&self.given),
            issued: Arc::clone(&self.issued),
            stale: Cell::new(false),
        });
        let asker: Rc<dyn crate::ask::Asker> = person.clone();
        let answer = catch_unwind(AssertUnwindSafe(|| {
            crate::fault::with_hook(crash, || {
                super::world::in_call(from, at, || {
                    crate::ask::with_asker(asker, || h.guard.call(request))
                })
            })
        }));
        // The state the agent calls again with, or none once it was refused.
        let told_state = match &answer {
            Ok(Err(crate::error::Error::InputRequired { state, .. })) => Some(Some(state.clone())),
            Ok(Err(crate::error::Error::InputStateInvalid(_))) => Some(None),
            _ => None,
        };
        let res = match answer {
            // The power went while the call ran: the agent was told nothing.
            Ok(_) if self.chaos.powered_off() => Res::Crashed,
            Ok(Ok(response)) => Res::Answer {
                outcome: response.outcome,
                replayed: response.replayed,
            },
            Ok(Err(e)) => Res::Error {
                kind: e.kind().to_string(),
                retry_safe: e.retry_safe(),
                message: e.to_string(),
            },
            Err(payload) if payload.is::<SimCrash>() => {
                // The host (or only this call's thread) died mid-call; a new process
                // takes a dead host's place. The run's lease is left to expire.
                let restart = payload
                    .downcast_ref::<SimCrash>()
                    .is_some_and(|c| c.restart);
                let i = host % self.hosts.len();
                if restart && let Ok(fresh) = self.open_host(i) {
                    *lock(&self.hosts[i]) = fresh;
                }
                Res::Crashed
            }
            Err(payload) => {
                let message = payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                lock(&self.panics).push(format!("a host panicked: {message}"));
                Res::Crashed
            }
        };
        // An agent told nothing (the power went) keeps what it had.
        if let Some(state) = told_state.filter(|_| res != Res::Crashed) {
            let mut states = lock(&self.states);
            match state {
                Some(state) => states.insert(intent, state),
                None => states.remove(&intent),
            };
        }
        let on_record = match (&res, &key) {
            (Res::Answer { outcome, .. }, Some(key)) => Some(self.on_record(key, outcome)),
            _ => None,
        };
        let to = self.clock.mark();
        lock(&self.calls).push(Call {
            intent,
            key,
            meaning,
            fingerprint,
            alias: request
                .tool_call_id
                .as_ref()
                .map(|id| (request.scope().to_string(), id.clone())),
            from,
            to,
            res: res.clone(),
            on_record: on_record.flatten(),
            final_phase,
            host,
            stale_state: person.stale.get(),
        });
        res
    }

    /// A flood of resumes: several runs of one principal's calls resumed at once on
    /// one host, each by what [`RESUMED_BY`] names, through the host's admission
    /// (past its cap a resume runs nothing). What happened, for the schedule.
    fn resume_flood(&self, rng: &mut Rng) -> Option<String> {
        let intents = lock(&self.intents).clone();
        let scope = intents.get(rng.index(intents.len().max(1)))?.scope.clone();
        let theirs: Vec<usize> = (0..intents.len())
            .filter(|&i| intents[i].scope == scope)
            .collect();
        let host = rng.index(self.hosts.len());
        let resumes: Vec<(usize, CallRequest, &'static str)> = (0..rng.between(3, 6))
            .map(|_| {
                let i = theirs[rng.index(theirs.len())];
                (
                    i,
                    intents[i].request(rng),
                    RESUMED_BY[rng.index(RESUMED_BY.len())],
                )
            })
            .collect();
        let refused = std::thread::scope(|s| {
            let runs: Vec<_> = resumes
                .iter()
                .map(|(i, request, by)| {
                    s.spawn(move || self.admitted_call(*i, request, host, false, Some(by)))
                })
                .collect();
            runs.into_iter()
                .map(|run| run.join())
                .filter(|res| matches!(res, Ok(Res::Error { kind, .. }) if kind == TOO_MANY))
                .count()
        });
        Some(format!(
            "host {host}: {} runs of {} resumed at once, {refused} refused",
            resumes.len(),
            principal_of(&scope)
        ))
    }

    /// The key of a recent call, one that got no final answer when there is one
    /// (its generation is likely open, or resumed next).
    fn recent_key(&self, rng: &mut Rng) -> Option<InvocationKey> {
        let calls = lock(&self.calls);
        let recent: Vec<&Call> = calls.iter().rev().take(30).collect();
        let open: Vec<&&Call> = recent
            .iter()
            .filter(|c| !matches!(c.res, Res::Answer { .. }))
            .collect();
        let key = match open.is_empty() {
            false => open[rng.index(open.len())].key.as_deref(),
            true if recent.is_empty() => None,
            true => recent[rng.index(recent.len())].key.as_deref(),
        };
        InvocationKey::parse(key?).ok()
    }

    /// A client's `tasks/cancel` taken by host `i` of a recent call, which may run
    /// or be resumed on another host; recorded with how many effects the generation
    /// it was taken against held right after.
    fn cancel_on(&self, i: usize, rng: &mut Rng) -> Option<String> {
        let key = self.recent_key(rng)?;
        let generation = self.host(i).guard.cancel_task(&key).ok()?;
        let effects = generation.map_or(usize::MAX, |g| {
            self.verifier()
                .story(&key)
                .ok()
                .and_then(|story| story.entry)
                .filter(|entry| entry.generation == Some(g))
                .map_or(usize::MAX, |entry| entry.effects.len())
        });
        let at = self.clock.mark();
        lock(&self.cancels).push(check::Cancel {
            key: key.to_string(),
            generation,
            effects,
            host: i,
            at,
            maybe_lost: false,
        });
        Some(format!("host {i}: {key} generation {generation:?}"))
    }

    /// An operator's `forget` (not forced) from another process than the hosts': of
    /// a call a host cancelled, half the time, else of a recent call.
    fn forget_elsewhere(&self, rng: &mut Rng) -> Option<String> {
        let cancelled = {
            let cancels = lock(&self.cancels);
            (!cancels.is_empty() && rng.chance(50))
                .then(|| cancels[rng.index(cancels.len())].key.clone())
        };
        let key = match cancelled {
            Some(key) => InvocationKey::parse(&key).ok()?,
            None => self.recent_key(rng)?,
        };
        let operator = crate::journal::Operator {
            by: "sim",
            force: false,
            now: self.clock.now_ms(),
        };
        let from = self.clock.mark();
        let forgotten = self.verifier().forget(&key, &operator);
        let to = self.clock.mark();
        let Ok(crate::journal::Operated::Done(_)) = forgotten else {
            return None;
        };
        lock(&self.forgotten).push(check::Forget {
            key: key.to_string(),
            from,
            to,
        });
        Some(key.to_string())
    }

    /// `None` when the journal holds `outcome` as the completed outcome of `key`;
    /// otherwise what it holds instead.
    fn on_record(&self, key: &str, outcome: &Outcome) -> Option<String> {
        on_record_in(self.store.held(&*self.verifier(), key), outcome)
    }
}

/// The person behind an agent, as its client reaches them for one call: asked
/// while the call runs, they answer at once (a session's elicitation) or later (the
/// stateless wire: the call ends `input_required` with a request state, and the
/// agent calls again with it and the answers). Accepts or declines at random while
/// faults are on; after, answers at once and accepts. A state issued for the same
/// position of an earlier generation of the call (its record expired meanwhile) is
/// refused as not this question's (`input_state_invalid`, as the MCP server says it),
/// and the agent calls again without it; any other state refused is a violation.
/// Answers that come with a state are recorded under the question the state was
/// issued for, the one the person was shown: answers the guard took for another
/// question are then on record under a key they were not given to.
struct Person {
    /// The state of the intent's last `input_required`, sent back with the answers.
    state: Option<String>,
    chaos: Arc<Chaos>,
    given: Arc<Mutex<Vec<check::Given>>>,
    /// The effect key of the question each state was issued for.
    issued: Arc<Mutex<BTreeMap<String, String>>>,
    /// Whether it refused a state issued for an earlier generation's question.
    stale: Cell<bool>,
}

impl crate::ask::Asker for Person {
    fn can_ask(&self) -> Result<(), String> {
        Ok(())
    }

    fn ask(
        &self,
        at: &crate::ask::AskContext<'_>,
        _questions: &[crate::ask::Question],
    ) -> crate::ask::Asked {
        use crate::ask::{Asked, StateCheck, StateKeys, check_request_state};
        let (later, accept) = self
            .chaos
            .roll(|rng| (rng.chance(50), rng.chance(60)))
            .unwrap_or((false, true));
        let answers = vec![guests::confirmed(accept)];
        let effect_key = at.effect_key.to_string();
        // An agent that learned this question's effect key (an echoing downstream)
        // forges its state, with no secret of the server's, and answers in the
        // person's place: the server must refuse it (the answers are no one's).
        if self.state.is_none() && self.chaos.roll(|rng| rng.chance(10)) == Some(true) {
            let unkeyed = StateKeys::from_hex(&[hex::encode([0; crate::ask::STATE_SECRET_LEN])])
                .expect("a secret of the right length");
            let forged =
                crate::ask::request_state(at.key, at.seq, at.effect_key, at.principal, &unkeyed);
            if check_request_state(&forged, at) == StateCheck::ForThisQuestion {
                return Asked::Answered(vec![guests::confirmed(true)]);
            }
        }
        let issued_for = self
            .state
            .as_ref()
            .and_then(|state| lock(&self.issued).get(state).cloned());
        let asked = match &self.state {
            Some(state) => match check_request_state(state, at) {
                StateCheck::ForThisQuestion => Asked::Answered(answers),
                StateCheck::ForAnotherQuestion => Asked::Later,
                StateCheck::Forged => {
                    if issued_for.as_ref().is_some_and(|k| *k != effect_key) {
                        self.stale.set(true);
                    }
                    Asked::Invalid(format!(
                        "the request state {state} is not this question's ({issued_for:?}, asked at {effect_key})"
                    ))
                }
            },
            None if later => Asked::Later,
            None => Asked::Answered(answers),
        };
        match &asked {
            Asked::Answered(answers) => lock(&self.given).push(check::Given {
                effect_key: issued_for.unwrap_or(effect_key),
                answers: Value::Array(answers.clone()),
            }),
            Asked::Later => {
                lock(&self.issued).insert(at.state(), effect_key);
            }
            _ => {}
        }
        asked
    }
}

/// `None` when `held` (an invocation's state and stored outcome) is `outcome`,
/// completed; otherwise what it is instead.
fn on_record_in(held: Result<Held, String>, outcome: &Outcome) -> Option<String> {
    match held {
        Ok(Some((state, Some(stored))))
            if state == "completed"
                && Outcome::from_stored(&stored).ok().as_ref() == Some(outcome) =>
        {
            None
        }
        Ok(Some((state, stored))) => Some(format!("{state} with {stored:?}")),
        Ok(None) => Some("no record".into()),
        Err(e) => Some(format!("unreadable: {e}")),
    }
}

/// How an intent's arguments are written this time: the tool sees the same
/// arguments every time, however they are spelled — member order, `1`, `1.0`, `1e0`
/// or `1.0e+0`, a string's characters escaped or not, a default written out or left
/// out, `null` for an option left out.
fn write_args(view: &Value, rng: &mut Rng) -> String {
    let mut args = view.clone();
    if let Some(action) = args.get_mut("action").and_then(Value::as_object_mut) {
        if action["kind"] == "cancel" && action["at"] == "now" && rng.chance(50) {
            action.remove("at");
        }
        if action["kind"] == "ship" && !action.contains_key("note") && rng.chance(30) {
            action.insert("note".into(), Value::Null);
        }
    }
    if args.get("memo").is_none() && rng.chance(20) {
        args["memo"] = Value::Null;
    }
    let mut out = String::new();
    spell(&args, rng, &mut out);
    out
}

/// Writes `value` as JSON, each part in a spelling `rng` picks.
fn spell(value: &Value, rng: &mut Rng, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut members: Vec<(&String, &Value)> = map.iter().collect();
            for i in (1..members.len()).rev() {
                members.swap(i, rng.index(i + 1));
            }
            out.push_str("{ ");
            for (i, (name, item)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(" , ");
                }
                spell_string(name, rng, out);
                out.push_str(": ");
                spell(item, rng, out);
            }
            out.push_str(" }");
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                spell(item, rng, out);
            }
            out.push(']');
        }
        Value::String(text) => spell_string(text, rng, out),
        Value::Number(n) => match n.as_u64() {
            Some(u) => {
                let digits = u.to_string();
                match rng.below(4) {
                    0 => out.push_str(&format!("{digits}.0")),
                    1 => out.push_str(&format!("{digits}e0")),
                    2 => {
                        // Scientific: 1.2345e+4, trailing zeros of the mantissa dropped.
                        let (head, tail) = digits.split_at(1);
                        let tail = tail.trim_end_matches('0');
                        let dot = if tail.is_empty() { "" } else { "." };
                        out.push_str(&format!("{head}{dot}{tail}e+{}", digits.len() - 1));
                    }
                    _ => out.push_str(&digits),
                }
            }
            None => out.push_str(&n.to_string()),
        },
        other => out.push_str(&other.to_string()),
    }
}

/// Writes `text` as a JSON string, some of its characters as `\uXXXX` escapes.
fn spell_string(text: &str, rng: &mut Rng, out: &mut String) {
    if !rng.chance(30) {
        out.push_str(&Value::String(text.to_owned()).to_string());
        return;
    }
    out.push('"');
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || (c as u32) > 0xffff || rng.chance(50) => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

impl Intent {
    fn new(rng: &mut Rng, agent: usize, n: usize) -> Self {
        let tool = guests::TOOLS[rng.index(guests::TOOLS.len())];
        // Few distinct amounts, so agents meet on the same keys.
        let mut args = json!({
            "amount": rng.between(1, 40),
            "to": (["ada", "bob"][rng.index(2)]),
        });
        if tool == "pay_many" {
            args["count"] = json!(rng.between(1, 3));
        }
        if rng.chance(25) {
            args["order"] = json!(guests::BIG_IDS[rng.index(guests::BIG_IDS.len())]);
        }
        if rng.chance(25) {
            args["action"] = match rng.below(3) {
                0 => json!({ "kind": "cancel", "at": "now" }),
                1 => json!({ "kind": "cancel", "at": "noon" }),
                _ => json!({ "kind": "ship", "carrier": (["ups", "dhl"][rng.index(2)]) }),
            };
        }
        if rng.chance(10) {
            args["memo"] = json!("caf\u{e9} \u{1f600}");
        }
        let scope = format!("conv-{}", rng.below(3));
        let key = rng
            .chance(20)
            .then(|| format!("key-{agent}-{n}-{}", rng.below(1000)));
        let call_id = rng.chance(20).then(|| format!("call-{agent}-{n}"));
        Self {
            tool,
            args,
            scope,
            key,
            call_id,
        }
    }

    /// Another call that differs only in an id a double cannot tell from this one's
    /// (the opposite case of a respelling: both must happen).
    fn twin(&self) -> Option<Self> {
        let order = self.args.get("order")?.as_u64()?;
        let i = guests::BIG_IDS.iter().position(|id| *id == order)?;
        let mut twin = self.clone();
        twin.args["order"] = json!(guests::BIG_IDS[i ^ 1]);
        twin.key = None;
        twin.call_id = None;
        Some(twin)
    }

    /// The same key (explicit or tool-call id) with other arguments.
    fn reused(&self, rng: &mut Rng) -> Self {
        let mut other = self.clone();
        other.args["amount"] = json!(self.args["amount"].as_u64().unwrap_or(1) + rng.between(1, 5));
        other
    }

    fn request(&self, rng: &mut Rng) -> CallRequest {
        let mut request =
            CallRequest::new(self.tool, write_args(&self.args, rng)).conversation(&self.scope);
        if let Some(key) = &self.key {
            request = request.key(key);
        }
        if let Some(id) = &self.call_id {
            request = request.tool_call_id(id);
        } else if rng.chance(15) {
            // Re-planned: a new tool-call id for the same arguments.
            request = request.tool_call_id(format!("replan-{}", rng.next_u64()));
        }
        request
    }
}

fn register(world: &World, intent: Intent) -> usize {
    let mut intents = lock(&world.intents);
    intents.push(intent);
    intents.len() - 1
}

/// One agent: new calls, retries, re-plans, parallel duplicates, reused keys.
fn agent(world: &Arc<World>, mut rng: Rng, id: usize, steps: usize) {
    let mut mine: Vec<usize> = Vec::new();
    let hosts = world.hosts.len();
    for n in 0..steps {
        if world.chaos.powered_off() {
            // The machine is off: nothing more is called until it restarts.
            break;
        }
        let action = rng.below(100);
        let pick = |rng: &mut Rng, mine: &[usize]| mine[rng.index(mine.len())];
        match action {
            // Retry an earlier call, as written before or re-planned.
            0..25 if !mine.is_empty() => {
                let i = pick(&mut rng, &mine);
                let request = lock(&world.intents)[i].request(&mut rng);
                world.call(i, &request, rng.index(hosts), false);
            }
            // Parallel duplicates of one call on different hosts.
            25..40 => {
                let i = match mine.is_empty() || rng.chance(50) {
                    true => register(world, Intent::new(&mut rng, id, n)),
                    false => pick(&mut rng, &mine),
                };
                mine.push(i);
                let copies = rng.between(2, 3) as usize;
                let requests: Vec<(CallRequest, usize)> = (0..copies)
                    .map(|c| (lock(&world.intents)[i].request(&mut rng), c))
                    .collect();
                let first = rng.index(hosts);
                std::thread::scope(|s| {
                    for (request, c) in &requests {
                        s.spawn(move || world.call(i, request, first + c, false));
                    }
                });
            }
            // The same key with other arguments.
            40..50 if !mine.is_empty() => {
                let i = pick(&mut rng, &mine);
                let other = lock(&world.intents)[i].reused(&mut rng);
                if other.key.is_some() || other.call_id.is_some() {
                    let j = register(world, other);
                    let request = lock(&world.intents)[j].request(&mut rng);
                    world.call(j, &request, rng.index(hosts), false);
                }
            }
            // A call retried until it is answered (a bounded agent).
            50..60 if !mine.is_empty() => {
                let i = pick(&mut rng, &mine);
                for _ in 0..4 {
                    let request = lock(&world.intents)[i].request(&mut rng);
                    match world.call(i, &request, rng.index(hosts), false) {
                        Res::Error {
                            retry_safe: true, ..
                        }
                        | Res::Crashed => {}
                        _ => break,
                    }
                }
            }
            _ => {
                let i = register(world, Intent::new(&mut rng, id, n));
                mine.push(i);
                let request = lock(&world.intents)[i].request(&mut rng);
                world.call(i, &request, rng.index(hosts), false);
                // Its twin, whose id only a rounded key would confuse with this one's.
                let twin = lock(&world.intents)[i].twin();
                if let Some(twin) = twin.filter(|_| rng.chance(50)) {
                    let j = register(world, twin);
                    mine.push(j);
                    let request = lock(&world.intents)[j].request(&mut rng);
                    world.call(j, &request, rng.index(hosts), false);
                }
            }
        }
    }
}

/// Moves the clock, runs `gc` and fills a host's disk until `stop`.
fn stir(world: &World, mut rng: Rng, stop: &AtomicBool) {
    let chaos = &world.chaos;
    // Half the histories change the unkeyed downstream's catalog now and then; the
    // other half keep it as it is, so that it never deduplicates there.
    let changes_catalog = rng.chance(50);
    while !stop.load(Ordering::SeqCst) && !chaos.powered_off() {
        std::thread::sleep(Duration::from_micros(rng.between(1_000, 5_000)));
        let dice = rng.below(116);
        match dice {
            0..30 => {
                let ms = rng.between(1_000, 20_000) as i64;
                world.clock.shift(ms);
                chaos.record(FaultKind::ClockForward, &format!("+{ms}ms"));
            }
            30..45 => {
                let ms = LEASE_MS + rng.between(1_000, 30_000) as i64;
                world.clock.shift(ms);
                chaos.record(FaultKind::ClockForward, &format!("+{ms}ms past the lease"));
            }
            45..46 => {
                let ms = RETENTION_MS + rng.between(1_000, 600_000) as i64;
                world.clock.shift(ms);
                chaos.record(FaultKind::ClockForward, &format!("+{ms}ms past retention"));
            }
            46..47 => {
                // Long enough that a call begun before it and completed after it is
                // still within retention when one counted from its start is not.
                let ms = RETENTION_MS / 3 + rng.between(0, RETENTION_MS as u64 / 6) as i64;
                world.clock.shift(ms);
                chaos.record(
                    FaultKind::ClockForward,
                    &format!("+{ms}ms, a third of retention"),
                );
            }
            47..65 => {
                let ms = rng.between(1_000, 40_000) as i64;
                world.clock.shift(-ms);
                chaos.record(FaultKind::ClockBack, &format!("-{ms}ms"));
            }
            65..80 => {
                let i = rng.index(world.hosts.len());
                let host = world.host(i);
                // The host's own time: on PostgreSQL gc goes by the database's.
                let now = world.host_clocks[i].now_ms();
                if let Ok(report) = host.journal.gc(now, RETENTION_MS) {
                    let kind = if report.invocations > 0 {
                        FaultKind::GcPastRetention
                    } else {
                        FaultKind::Gc
                    };
                    chaos.record(kind, &format!("removed {}", report.invocations));
                }
            }
            80..90 => {
                let i = rng.index(world.hosts.len());
                let host = world.host(i);
                if world.store.starve(i, &*host.journal) {
                    let kind = match world.store.kind() {
                        JournalKind::Sqlite => FaultKind::DiskFull,
                        JournalKind::Postgres => FaultKind::SessionsEnded,
                    };
                    chaos.record(kind, &format!("host {i}"));
                    std::thread::sleep(Duration::from_micros(rng.between(1_000, 10_000)));
                    world.store.relieve(&*host.journal);
                }
            }
            // One host's clock alone jumps: PostgreSQL only (on SQLite the hosts are
            // processes of one machine, which read one clock).
            90..97 if world.store.kind() == JournalKind::Postgres => {
                let i = rng.index(world.hosts.len());
                let ms = match rng.below(10) {
                    0 => RETENTION_MS + rng.between(1_000, 600_000) as i64,
                    _ => rng.between(1_000, 3 * LEASE_MS as u64) as i64,
                } * if rng.chance(50) { 1 } else { -1 };
                world.host_clocks[i].step(ms);
                let offset = world.host_clocks[i].offset();
                chaos.record(
                    FaultKind::HostClockJump,
                    &format!("host {i} {ms:+}ms, now {offset:+}ms off"),
                );
            }
            97..100 if changes_catalog => {
                let says = world.sms.change_catalog(rng.chance(50), rng.chance(30));
                chaos.record(FaultKind::CatalogChanged, &says);
            }
            100..106 => {
                let i = rng.index(world.hosts.len());
                if let Some(what) = world.cancel_on(i, &mut rng) {
                    chaos.record(FaultKind::CancelAcrossHosts, &what);
                }
            }
            106..110 => {
                if let Some(key) = world.forget_elsewhere(&mut rng) {
                    chaos.record(FaultKind::ForgottenElsewhere, &key);
                }
            }
            110..116 => {
                if let Some(what) = world.resume_flood(&mut rng) {
                    chaos.record(FaultKind::ResumeFlood, &what);
                }
            }
            _ => {}
        }
    }
}

/// What an agent past its principal's cap is told (the server's `-32029`, 429):
/// nothing ran.
const TOO_MANY: &str = "too_many";

/// The principal whose calls run in conversation `scope`: each conversation is one
/// principal's, so that the agents meet under one principal's cap.
fn principal_of(scope: &str) -> String {
    format!("principal of {scope}")
}

/// A person's answer to each pending unkeyed effect, from what the downstream knows.
fn resolve_unkeyed(world: &World) {
    let now = world.clock.now_ms();
    let verifier = world.verifier();
    let Ok(unresolved) = verifier.unresolved(now) else {
        return;
    };
    let applied = world.sms.applied();
    for effect in unresolved {
        let done = applied.iter().any(|a| a.key == effect.key);
        let (resolution, response) = if done {
            (Resolution::Performed, json!({"sent": "resolved"}))
        } else {
            (Resolution::NotPerformed, json!(null))
        };
        let person = crate::journal::Operator {
            by: "sim",
            force: false,
            now,
        };
        let _ = verifier.resolve(&effect.key, resolution, &response, &person);
    }
}

/// How far each host's clock is from the shared one at the start: on PostgreSQL up
/// to two leases either way (the skew, twice the lease); on SQLite none.
fn skews(kind: JournalKind, hosts: usize, rng: &mut Rng) -> Vec<i64> {
    (0..hosts)
        .map(|_| match kind {
            JournalKind::Sqlite => 0,
            JournalKind::Postgres => rng.between(0, 4 * LEASE_MS as u64) as i64 - 2 * LEASE_MS,
        })
        .collect()
}

/// A history that could not start, and why.
fn unstarted(chaos: &Chaos, why: String) -> Outcomes {
    Outcomes {
        faults: chaos.counts(),
        violations: vec![why],
        schedule: Vec::new(),
        calls: 0,
        endings: BTreeMap::new(),
    }
}

/// Runs the history of `seed` on a fresh journal of `kind`.
pub(crate) fn run(seed: u64, size: Size, kind: JournalKind) -> Result<Outcomes, StoreError> {
    quiet_crashes();
    let mut rng = Rng::new(seed);
    // Every other SQLite history runs under `Full` where a power cut is simulated at
    // its end (and, in half of them, one in the middle too, as a webhook arrives);
    // of the rest, half under `Normal`, half under `Full` (see `store.rs`).
    let may_cut = kind == JournalKind::Sqlite && seed % 4 == 3;
    let mode = match seed % 4 {
        1 | 3 => SqliteMode::PowerLoss,
        0 => SqliteMode::Normal,
        _ => SqliteMode::Full,
    };
    let store = Store::new(kind, seed, mode)?;
    let clock = Arc::new(SimClock::new(1_767_225_600_000));
    let chaos = Arc::new(Chaos::new(rng.fork(), Arc::clone(&clock), LEASE_MS));
    let pay = Arc::new(Downstream::new(
        "pay",
        ProviderClass::Keyed,
        Arc::clone(&chaos),
    ));
    // Half the histories give the unkeyed downstream a probe (issue 56).
    let sms = Downstream::new("sms", ProviderClass::Unkeyed, Arc::clone(&chaos));
    let sms = Arc::new(if rng.chance(50) {
        sms.with_probe()
    } else {
        sms
    });
    let mut providers: BTreeMap<String, Arc<dyn Provider>> = BTreeMap::new();
    providers.insert("kv".into(), Arc::new(KvProvider));
    providers.insert("ledger".into(), Arc::new(Ledger));
    providers.insert("pay".into(), pay.clone());
    providers.insert("sms".into(), sms.clone());
    let receiver = match Receiver::start(Arc::clone(&clock)) {
        Ok(receiver) => receiver,
        Err(e) => {
            return Ok(unstarted(
                &chaos,
                format!("cannot start the webhook receiver: {e}"),
            ));
        }
    };
    let http = Arc::new(
        HttpConfig::default()
            .service("webhooks", receiver.url())
            .allow("hook", receiver.url()),
    );
    let outbox = Arc::new(Outbox::new(Arc::clone(&http), Arc::clone(&clock)));
    providers.insert("outbox".into(), outbox.clone());
    let verifier = match store.open(None, &clock) {
        Ok(j) => j,
        Err(e) => return Ok(unstarted(&chaos, format!("cannot open the journal: {e}"))),
    };
    let host_clocks = skews(kind, size.hosts, &mut rng)
        .into_iter()
        .map(|offset| Arc::new(HostClock::new(Arc::clone(&clock), offset)))
        .collect();
    for provider in providers.values() {
        let _ = verifier.prepare_provider(provider.as_ref());
    }
    let mut world = World {
        clock: Arc::clone(&clock),
        host_clocks,
        chaos: Arc::clone(&chaos),
        runner: Arc::new(guests::runner(Arc::clone(&chaos))),
        providers,
        pay,
        sms,
        outbox,
        http,
        receiver,
        hosts: Vec::new(),
        verifier: Mutex::new(verifier),
        may_cut,
        cut: Mutex::default(),
        intents: Mutex::default(),
        calls: Mutex::default(),
        states: Mutex::default(),
        given: Arc::default(),
        issued: Arc::default(),
        cancels: Mutex::default(),
        forgotten: Mutex::default(),
        admissions: (0..size.hosts)
            .map(|_| Admission::new(CAP_PER_PRINCIPAL))
            .collect(),
        runs: Mutex::default(),
        policy: Policy {
            retention: Arc::new(Retention::new(Duration::from_millis(RETENTION_MS as u64))),
            lease_ms: LEASE_MS,
            wait_bound: Duration::from_millis(20),
            poll: Duration::from_millis(1),
            renew_every: None,
        },
        panics: Mutex::default(),
        store,
    };
    for i in 0..size.hosts {
        let host = world.open_host(i).expect("a host opens the journal");
        world.hosts.push(Mutex::new(host));
    }
    let world = Arc::new(world);
    // The receiver asks the world what to do with each webhook; it holds it weakly,
    // as the world owns the receiver.
    let weak = Arc::downgrade(&world);
    world.receiver.hook(Arc::new(move |delivery| {
        weak.upgrade()
            .map_or(Take::Dead, |world| world.received(delivery))
    }));

    // The faulty phase.
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let chaos_rng = rng.fork();
        let stop = &stop;
        let w = &world;
        s.spawn(move || stir(w, chaos_rng, stop));
        s.spawn(move || deliver(w, stop));
        let agents: Vec<_> = (0..size.agents)
            .map(|id| {
                let agent_rng = rng.fork();
                s.spawn(move || agent(w, agent_rng, id, size.steps))
            })
            .collect();
        for a in agents {
            let _ = a.join();
        }
        stop.store(true, Ordering::SeqCst);
    });

    // After a power cut, every host restarts on what it kept.
    let mut violations = world.restart_after_cut();

    // Faults stop; every call is retried until it has a final answer.
    chaos.stop();
    for host in &world.hosts {
        world.store.relieve(&*lock(host).journal);
    }
    let count = lock(&world.intents).len();
    let mut open: Vec<usize> = (0..count).collect();
    for round in 0..FINAL_ROUNDS {
        if open.is_empty() {
            break;
        }
        // Leases of crashed or stalled runs run out; a person resolves what waits
        // for one.
        world.clock.shift(LEASE_MS + 1_000);
        resolve_unkeyed(&world);
        open.retain(|&i| {
            let request = lock(&world.intents)[i].request(&mut rng);
            // Kept open while the answer is not final: a refused request state too,
            // which the agent drops and calls again without.
            match world.call(i, &request, round + i, true) {
                Res::Error {
                    retry_safe: true, ..
                }
                | Res::Crashed => true,
                Res::Error { kind, .. } => kind == "input_state_invalid",
                Res::Answer { .. } => false,
            }
        });
    }

    // The outbox is delivered: every pass after the clock moved past every backoff.
    if let Some(deliverer) = world.deliverer() {
        for _ in 0..FINAL_PASSES {
            world.clock.shift(15_000);
            match deliverer.run_once() {
                Ok(report) if report.attempts.is_empty() => break,
                Ok(_) => {}
                Err(e) => {
                    lock(&world.panics)
                        .push(format!("a delivery pass failed after faults stopped: {e}"));
                    break;
                }
            }
        }
    }

    let calls = std::mem::take(&mut *lock(&world.calls));
    violations.extend(std::mem::take(&mut *lock(&world.panics)));
    let verifier = world.verifier();
    violations.extend(world.store.ledger_duplicates(&*verifier));
    violations.extend(world.pay.overlaps());
    violations.extend(world.sms.overlaps());
    // What the journal holds now, every invocation with its effects' answers.
    let recorded = match verifier.entries(None, u32::MAX) {
        Ok(entries) => entries,
        Err(e) => {
            violations.push(format!("cannot read the journal's entries: {e}"));
            Vec::new()
        }
    };
    let given = lock(&world.given).clone();
    let cancels = lock(&world.cancels).clone();
    let forgotten = lock(&world.forgotten).clone();
    let runs = lock(&world.runs).clone();
    let probes = world.sms.probe_answers();
    let history = check::History {
        calls: &calls,
        runs: &runs,
        cap: CAP_PER_PRINCIPAL,
        probes: &probes,
        keyed: &world.pay.applied(),
        unkeyed: &world.sms.applied(),
        open: &open,
        outbox: &world.outbox.enqueued(),
        deliveries: &world.receiver.deliveries(),
        recorded: &recorded,
        given: &given,
        cancels: &cancels,
        forgotten: &forgotten,
        clock: &world.clock,
        retention_ms: RETENTION_MS,
    };
    violations.extend(check::check(&history));
    // The power goes: what was not synced is gone, and nothing answered may be.
    match world.store.power_cut() {
        None => {}
        Some(Err(e)) => violations.push(e),
        Some(Ok(cut)) => {
            chaos.record(FaultKind::PowerCut, "at the end");
            let end = world.clock.mark();
            violations.extend(check::lost_by_power_cut(&history, end, |key, outcome| {
                on_record_in(cut.held(key), outcome)
            }));
        }
    }
    let outcomes = Outcomes {
        faults: chaos.counts(),
        violations,
        schedule: chaos.schedule(),
        calls: calls.len(),
        endings: calls.iter().fold(BTreeMap::new(), |mut endings, call| {
            *endings.entry(call.res.ending().to_string()).or_default() += 1;
            endings
        }),
    };
    drop(verifier);
    drop(world);
    Ok(outcomes)
}

/// The delivery loop of the faulty phase: a pass every millisecond on a connection
/// of its own, until `stop` or the power goes (its deliverer dies with the hosts).
fn deliver(world: &World, stop: &AtomicBool) {
    let Some(deliverer) = world.deliverer() else {
        return;
    };
    while !stop.load(Ordering::SeqCst) && !world.chaos.powered_off() {
        // A full disk or an ended session fails a pass; the next one tries again.
        let _ = deliverer.run_once();
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The one wasm runtime every history's deliverers' hosts share (a host needs one;
/// delivery runs no tool).
fn runtime() -> Arc<crate::runtime::Runtime> {
    static RUNTIME: OnceLock<Arc<crate::runtime::Runtime>> = OnceLock::new();
    Arc::clone(RUNTIME.get_or_init(|| {
        Arc::new(
            crate::runtime::Runtime::new(crate::runtime::Limits::default())
                .expect("a wasm runtime for the deliverers' hosts"),
        )
    }))
}
