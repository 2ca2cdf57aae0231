//! The world around the hosts: fake downstreams that remember every effect they
//! applied and under which key, and the switchboard of faults they and the
//! simulator's chaos thread inject, each with a counter.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use rusqlite::{Connection, params};
use serde_json::{Value, json};

use super::clock::SimClock;
use super::rng::Rng;
use crate::clock::Clock;
use crate::http::HttpConfig;
use crate::provider::{
    EarlierAttempt, EffectRequest, Probed, Provider, ProviderClass, ProviderError, ReadRequest,
};
use crate::providers::OutboxProvider;

/// A kind of fault the simulator injects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FaultKind {
    /// The effect happened downstream, then its response was lost.
    LostResponse,
    /// The downstream said the key's first request is still in flight (HTTP 409).
    InFlight,
    /// The downstream asked to come back later (HTTP 429 or 503 with Retry-After).
    Throttled,
    /// The downstream was slower than the lease: another host may take the call over.
    SlowPastLease,
    /// The shared clock jumped forward.
    ClockForward,
    /// The shared clock jumped back.
    ClockBack,
    /// `gc` ran while calls were in flight.
    Gc,
    /// `gc` ran with the clock past the retention of what completed so far.
    GcPastRetention,
    /// A host's journal connection refused writes (a full disk).
    DiskFull,
    /// A host died in the middle of an effect and was restarted.
    Crash,
    /// The downstream refused the connection: nothing was sent.
    Refused,
    /// The downstream took a while (real time) but less than the lease: a host that
    /// takes the call over meanwhile would send its key twice at once.
    Slow,
    /// A host died at a step of the guard (after deciding, after the claim, after
    /// the provider answered, after the record, after the outcome was saved but
    /// before answering), and was restarted or lost only that call.
    CrashAtStep,
    /// One host's clock (alone) jumped; PostgreSQL only (see `store.rs`).
    HostClockJump,
    /// The PostgreSQL server ended a host's sessions (the database went away).
    SessionsEnded,
    /// The machine lost power (SQLite under `Full`): what was not synced is gone.
    PowerCut,
    /// A run stopped between its effects (a GC pause, a suspended VM) for longer
    /// than its lease, with no heartbeat (they beat only during a provider call), then
    /// went on: another host may have taken the call over meanwhile.
    PausePastLease,
    /// A keyed downstream answered a repeated key with the first answer, in a body
    /// that differs (as Stripe's `Idempotent-Replayed` or any HTTP `Date` does).
    ReplayDiffers,
    /// The machine lost power in the middle of a history, while a webhook was being
    /// delivered; the history went on from what the cut kept.
    PowerCutMidHistory,
    /// The unkeyed downstream's catalog changed between runs (an upstream tool's
    /// annotations after `list_changed`, an edited configuration): its effect now
    /// said to be keyed, or a read, or back to what it was.
    CatalogChanged,
    /// A client's `tasks/cancel` of a call, taken by one host while the call may
    /// run, or be resumed, on another.
    CancelAcrossHosts,
    /// An operator's `forget` of a call, from another process (none of the hosts):
    /// the same call made again is a new generation.
    ForgottenElsewhere,
    /// Many runs of one principal's calls resumed at once on one host, without a
    /// `tools/call` of their own (tasks resumed by `tasks/update`, a console
    /// "Resume now"), each through the host's admission.
    ResumeFlood,
    /// The unkeyed downstream's probe (issue 56) said the opposite of what it knew.
    ProbeLied,
    /// The unkeyed downstream's probe did not answer in time.
    ProbeTimedOut,
    /// The unkeyed downstream's probe answered after its run's lease ran out, with
    /// what it knew when it was asked: another host may have taken the call over.
    ProbeLate,
}

impl FaultKind {
    /// Every kind, in the order the report prints them.
    pub const ALL: [FaultKind; 26] = [
        Self::LostResponse,
        Self::InFlight,
        Self::Throttled,
        Self::SlowPastLease,
        Self::ClockForward,
        Self::ClockBack,
        Self::Gc,
        Self::GcPastRetention,
        Self::DiskFull,
        Self::Crash,
        Self::Refused,
        Self::Slow,
        Self::CrashAtStep,
        Self::HostClockJump,
        Self::SessionsEnded,
        Self::PowerCut,
        Self::PausePastLease,
        Self::ReplayDiffers,
        Self::PowerCutMidHistory,
        Self::CatalogChanged,
        Self::CancelAcrossHosts,
        Self::ForgottenElsewhere,
        Self::ResumeFlood,
        Self::ProbeLied,
        Self::ProbeTimedOut,
        Self::ProbeLate,
    ];

    /// Its name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Self::LostResponse => "lost_response",
            Self::InFlight => "in_flight_409",
            Self::Throttled => "throttled_429_503",
            Self::SlowPastLease => "slow_past_lease",
            Self::ClockForward => "clock_forward",
            Self::ClockBack => "clock_back",
            Self::Gc => "gc",
            Self::GcPastRetention => "gc_past_retention",
            Self::DiskFull => "disk_full",
            Self::Crash => "crash",
            Self::Refused => "refused",
            Self::Slow => "slow_within_lease",
            Self::CrashAtStep => "crash_at_step",
            Self::HostClockJump => "host_clock_jump",
            Self::SessionsEnded => "db_sessions_ended",
            Self::PowerCut => "power_cut",
            Self::PausePastLease => "pause_past_lease",
            Self::ReplayDiffers => "replay_differs",
            Self::PowerCutMidHistory => "power_cut_mid_history",
            Self::CatalogChanged => "catalog_changed",
            Self::CancelAcrossHosts => "cancel_across_hosts",
            Self::ForgottenElsewhere => "forgotten_elsewhere",
            Self::ResumeFlood => "resume_flood",
            Self::ProbeLied => "probe_lied",
            Self::ProbeTimedOut => "probe_timed_out",
            Self::ProbeLate => "probe_late",
        }
    }
}

/// How often (percent) a run pauses past its lease at each point between its
/// effects: often enough that a history pauses a few times (and a paused run's
/// duplicate takes over now and then), rarely enough that most runs go through.
const PAUSE_PERCENT: u64 = 3;

/// The panic a crashing provider raises: the host dies mid-call (and is restarted),
/// or, without `restart`, only the call's thread dies and the host lives on.
pub(crate) struct SimCrash {
    pub restart: bool,
}

/// Where faults are decided and counted, and the schedule of what was injected.
pub(crate) struct Chaos {
    enabled: AtomicBool,
    /// Set from the moment a power cut in the middle of the history is decided until
    /// the history goes on from what it kept: every host is dead meanwhile.
    powered_off: AtomicBool,
    /// Keyed answers replayed so far, and runs paused between effects now: a paused
    /// run wakes as soon as a downstream replays a key (often the one it performed,
    /// for the run that took its call over), the worst moment to wake.
    replays: Mutex<(u64, usize)>,
    replayed: Condvar,
    rng: Mutex<Rng>,
    counts: [AtomicU64; FaultKind::ALL.len()],
    schedule: Mutex<Vec<String>>,
    pub clock: Arc<SimClock>,
    pub lease_ms: i64,
}

impl Chaos {
    pub(crate) fn new(rng: Rng, clock: Arc<SimClock>, lease_ms: i64) -> Self {
        Self {
            enabled: AtomicBool::new(true),
            powered_off: AtomicBool::new(false),
            replays: Mutex::default(),
            replayed: Condvar::new(),
            rng: Mutex::new(rng),
            counts: Default::default(),
            schedule: Mutex::default(),
            clock,
            lease_ms,
        }
    }

    /// Whether faults are still injected.
    pub(crate) fn enabled(&self) -> bool {
        self.enabled.load(Ordering::SeqCst)
    }

    /// Stops injecting faults (the history's fault-free end).
    pub(crate) fn stop(&self) {
        self.enabled.store(false, Ordering::SeqCst);
    }

    /// Whether the machine is off (see [`Chaos::power_off`]).
    pub(crate) fn powered_off(&self) -> bool {
        self.powered_off.load(Ordering::SeqCst)
    }

    /// The power goes: from now on no host sends anything, and a call that ends
    /// told its agent nothing. Set before the cut's copy is made, so that an answer
    /// given before it was synced before the copy.
    pub(crate) fn power_off(&self) {
        self.powered_off.store(true, Ordering::SeqCst);
    }

    /// The power is back: the hosts that open the journal now run on what the cut
    /// kept.
    pub(crate) fn power_on(&self) {
        self.powered_off.store(false, Ordering::SeqCst);
    }

    /// Maybe stops the calling run (a guest between two effects, or after its last
    /// one) for longer than its lease, as a GC pause or a suspended VM does: the
    /// shared clock moves past the lease (no heartbeat renews it outside a provider
    /// call) and the thread sleeps a few real milliseconds, time for another host to
    /// take the call over; then the run goes on as if nothing happened.
    pub(crate) fn pause_between_effects(&self, at: &str) {
        let Some((true, real_ms)) =
            self.roll(|rng| (rng.chance(PAUSE_PERCENT), rng.between(2, 12)))
        else {
            return;
        };
        self.record(FaultKind::PausePastLease, &format!("{at} {real_ms}ms"));
        self.clock.shift(self.lease_ms + 1_000);
        let mut replays = self.replays.lock().unwrap_or_else(|p| p.into_inner());
        replays.1 += 1;
        let seen = replays.0;
        let until = Instant::now() + Duration::from_millis(real_ms);
        while replays.0 == seen {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            replays = self
                .replayed
                .wait_timeout(replays, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        replays.1 -= 1;
    }

    /// A keyed downstream is about to answer a replayed key: wakes every paused run,
    /// and, if there was one, holds this answer a moment, so that the woken run's
    /// next write (which would save its own answer, if it were not fenced) lands
    /// before the write of the run this answer goes to.
    fn replaying(&self) {
        let paused = {
            let mut replays = self.replays.lock().unwrap_or_else(|p| p.into_inner());
            replays.0 += 1;
            self.replayed.notify_all();
            replays.1 > 0
        };
        if paused {
            std::thread::sleep(Duration::from_millis(3));
        }
    }

    /// A draw from the shared generator, while faults are on.
    pub(crate) fn roll<T>(&self, f: impl FnOnce(&mut Rng) -> T) -> Option<T> {
        self.enabled()
            .then(|| f(&mut self.rng.lock().unwrap_or_else(|p| p.into_inner())))
    }

    /// Counts one fault of `kind` and writes it into the schedule.
    pub(crate) fn record(&self, kind: FaultKind, detail: &str) {
        let i = FaultKind::ALL.iter().position(|k| *k == kind).unwrap_or(0);
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        let line = format!("t={} {} {detail}", self.clock.now_ms(), kind.name());
        self.schedule
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(line);
    }

    /// Maybe crashes host `host` at the guard's fault point `point` (the hook of
    /// [`crate::fault::with_hook`]).
    pub(crate) fn crash_at(&self, point: crate::fault::FaultPoint, host: usize) {
        let Some((dice, restart)) = self.roll(|rng| (rng.below(1000), rng.chance(50))) else {
            return;
        };
        if dice < 12 {
            let detail = format!("host {host} at {} restart={restart}", point.as_str());
            self.record(FaultKind::CrashAtStep, &detail);
            std::panic::panic_any(SimCrash { restart });
        }
    }

    /// How many faults of each kind were injected.
    pub(crate) fn counts(&self) -> BTreeMap<FaultKind, u64> {
        FaultKind::ALL
            .iter()
            .zip(&self.counts)
            .map(|(k, n)| (*k, n.load(Ordering::Relaxed)))
            .collect()
    }

    /// Every fault injected, in order.
    pub(crate) fn schedule(&self) -> Vec<String> {
        self.schedule
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// Where an effect stands in its invocation: invocation key, generation, position.
pub(crate) type Position = (String, u64, u32);

/// The key of an effect a downstream applied when it came as a read (its catalog
/// called it one): none.
pub(crate) const SENT_AS_READ: &str = "(sent as a read, no key)";

/// One effect a downstream applied.
#[derive(Debug, Clone)]
pub(crate) struct Applied {
    /// The key it came with.
    pub key: String,
    /// Its invocation, generation (the guest puts it in the payload) and position.
    pub position: Position,
    /// What it was: operation and payload.
    pub what: String,
    /// The clock's moment it was applied.
    pub at: usize,
    /// Where it stands among the applies and call starts of the process
    /// ([`next_order`]): a journaled effect's when it was applied; one sent as a
    /// read ([`SENT_AS_READ`]) the moment the call that read it began, since a run
    /// only finds what was journaled before it began.
    pub order: u64,
}

/// One answer of the unkeyed downstream's probe (issue 56), as the simulator saw
/// it given.
#[derive(Debug, Clone)]
pub(crate) struct ProbeSaid {
    /// Its number, in the answer a `performed` carries (`{"probe": id}`), which the
    /// journal saves inside the effect's answer when the guard journals it.
    pub id: u64,
    /// The effect key it was asked about.
    pub key: String,
    /// What it said: performed or not.
    pub performed: bool,
    /// Whether it said the opposite of what the downstream knew when asked.
    pub lied: bool,
    /// Where it stands among the applies ([`next_order`]), as it was answered.
    pub order: u64,
}

/// The next number of one order over every apply and every call start.
pub(crate) fn next_order() -> u64 {
    static ORDER: AtomicU64 = AtomicU64::new(0);
    ORDER.fetch_add(1, Ordering::SeqCst)
}

/// A fake downstream of the keyed or unkeyed class. A keyed one deduplicates by key,
/// as a payments API with `Idempotency-Key` does; an unkeyed one applies every
/// request it receives.
///
/// An unkeyed one's catalog may change ([`Downstream::change_catalog`]): its effect
/// said to be keyed, or a read. Said keyed once, it deduplicates every key it meets
/// from then on (it became idempotent, and stays so whatever it says later); a key it
/// met before is news to it. Said to be a read, its effect is still a write.
pub(crate) struct Downstream {
    name: &'static str,
    class: ProviderClass,
    chaos: Arc<Chaos>,
    state: Mutex<DownState>,
    says_keyed: AtomicBool,
    says_read: AtomicBool,
    dedupes: AtomicBool,
    /// Whether it has a probe ([`Downstream::with_probe`]).
    probes: AtomicBool,
    /// Every answer its probe gave.
    said: Mutex<Vec<ProbeSaid>>,
}

#[derive(Default)]
struct DownState {
    /// A keyed downstream's answer per key (a refusal too), with what was applied
    /// under it and how many times it was replayed.
    answers: BTreeMap<String, (String, Result<Value, ProviderError>, u64)>,
    applied: Vec<Applied>,
    /// Requests on the wire now: key, the clock's moment their call began, a number,
    /// and who sent it (host and attempt, for the overlap's line).
    in_flight: Vec<(String, usize, u64, String)>,
    next_flight: u64,
    /// Keys sent while a request under them was on the wire and its lease could not
    /// have run out.
    overlaps: Vec<String>,
}

thread_local! {
    /// The clock's moment the call this thread serves began (see [`in_call`]).
    static CALL_FROM: std::cell::Cell<Option<(usize, usize)>> = const { std::cell::Cell::new(None) };
    /// Where the call this thread serves began among the applies ([`next_order`]).
    static CALL_ORDER: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

/// Runs `f`, a call that began at the clock's moment `from` on host `host`, on this
/// thread: the downstreams it reaches know since when its run can have held its
/// lease, and which host sent what they received.
pub(crate) fn in_call<R>(from: usize, host: usize, f: impl FnOnce() -> R) -> R {
    struct Reset(Option<(usize, usize)>, Option<u64>);
    impl Drop for Reset {
        fn drop(&mut self) {
            CALL_FROM.set(self.0);
            CALL_ORDER.set(self.1);
        }
    }
    let _reset = Reset(
        CALL_FROM.replace(Some((from, host))),
        CALL_ORDER.replace(Some(next_order())),
    );
    f()
}

/// A request on the wire; it lands (or dies) when dropped.
struct Flight<'a> {
    downstream: &'a Downstream,
    id: u64,
}

impl Drop for Flight<'_> {
    fn drop(&mut self) {
        let mut state = self.downstream.lock();
        state.in_flight.retain(|(_, _, id, _)| *id != self.id);
    }
}

impl Downstream {
    pub(crate) fn new(name: &'static str, class: ProviderClass, chaos: Arc<Chaos>) -> Self {
        Self {
            name,
            class,
            chaos,
            state: Mutex::default(),
            says_keyed: AtomicBool::new(false),
            says_read: AtomicBool::new(false),
            dedupes: AtomicBool::new(false),
            probes: AtomicBool::new(false),
            said: Mutex::default(),
        }
    }

    /// Gives an unkeyed downstream a probe (`Provider::probe_of`, issue 56): asked
    /// whether an effect happened, it answers from the effects it applied under the
    /// effect's key, truthfully, or (while faults are on) lies, times out, or
    /// answers after its run's lease ran out.
    pub(crate) fn with_probe(self) -> Self {
        self.probes.store(true, Ordering::SeqCst);
        self
    }

    /// Every answer its probe gave.
    pub(crate) fn probe_answers(&self) -> Vec<ProbeSaid> {
        self.said.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Changes what the catalog says of an unkeyed downstream's effect: keyed
    /// (`true`) or not, and a read or not. Returns what it says now.
    pub(crate) fn change_catalog(&self, keyed: bool, read: bool) -> String {
        if self.class != ProviderClass::Unkeyed {
            return String::new();
        }
        if keyed {
            self.dedupes.store(true, Ordering::SeqCst);
        }
        self.says_keyed.store(keyed, Ordering::SeqCst);
        self.says_read.store(read, Ordering::SeqCst);
        format!("{} says keyed={keyed} read={read}", self.name)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, DownState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every effect applied, in order.
    pub(crate) fn applied(&self) -> Vec<Applied> {
        self.lock().applied.clone()
    }

    /// Every time a key was sent while another request under it was on the wire and
    /// the run that sent that one could not have lost its lease: from its call's
    /// start to now the clock never spread over a lease, so no host could have found
    /// the lease expired (a downstream without an in-flight lock applies both).
    pub(crate) fn overlaps(&self) -> Vec<String> {
        self.lock().overlaps.clone()
    }

    /// Puts `request` on the wire, noting an overlap.
    fn take_off(&self, request: &EffectRequest<'_>) -> Flight<'_> {
        let key = request.key.as_str();
        let now = self.chaos.clock.mark();
        let (from, host) = CALL_FROM.get().map_or((now, None), |(f, h)| (f, Some(h)));
        let sender = format!(
            "host {} try {} gen {}",
            host.map_or("?".into(), |h| h.to_string()),
            request.attempt,
            request.payload["gen"]
        );
        let mut state = self.lock();
        for (other, since, _, first) in &state.in_flight {
            if other == key && self.chaos.clock.spread(*since, now) < self.chaos.lease_ms {
                let line = format!(
                    "{} key {key} was sent while a request under it was on the wire and its run's lease was live (t={}..{}; on the wire: {first}; sent: {sender})",
                    self.name,
                    self.chaos.clock.at(*since),
                    self.chaos.clock.at(now)
                );
                state.overlaps.push(line);
                break;
            }
        }
        let id = state.next_flight;
        state.next_flight += 1;
        state.in_flight.push((key.to_string(), from, id, sender));
        Flight {
            downstream: self,
            id,
        }
    }

    /// Applies the request (once per key when keyed) and returns the downstream's
    /// answer to it.
    fn apply(&self, request: &EffectRequest<'_>) -> Result<Value, ProviderError> {
        let what = format!("{} {}", request.operation, request.payload);
        let key = request.key.to_string();
        let generation = request.payload["gen"].as_u64().unwrap_or(u64::MAX);
        let applied = Applied {
            key: key.clone(),
            position: (request.invocation.to_string(), generation, request.seq),
            what: what.clone(),
            at: self.chaos.clock.mark(),
            order: next_order(),
        };
        let amount = request.payload["amount"].as_u64().unwrap_or(1);
        let mut state = self.lock();
        if self.class == ProviderClass::Keyed || self.dedupes.load(Ordering::SeqCst) {
            if let Some((first, answer, replays)) = state.answers.get_mut(&key) {
                // A repeated key: the first answer again, a refusal as a refusal,
                // nothing applied. (A second request with another payload under it is
                // recorded for the checker.) Its meaning is the first's, its body is
                // not: it says which replay it is, as Stripe's `Idempotent-Replayed`
                // header or an HTTP `Date` would, so a run handed a replay is told
                // something another run was not.
                *replays += 1;
                let answer = replayed(answer, *replays);
                let repeated = *first != what;
                if repeated {
                    state.applied.push(applied);
                }
                drop(state);
                self.chaos.record(
                    FaultKind::ReplayDiffers,
                    &format!("{} {key} #{}", self.name, request.seq),
                );
                self.chaos.replaying();
                return answer;
            }
            if self.class != ProviderClass::Keyed {
                // An unkeyed downstream that deduplicates now: its own answer, kept
                // under the key.
                state.applied.push(applied);
                let answer = Ok(json!({"sent": state.applied.len()}));
                state.answers.insert(key, (what, answer.clone(), 0));
                return answer;
            }
            let answer = if amount.is_multiple_of(13) {
                Err(ProviderError::Rejected(json!({"declined": true})))
            } else {
                Ok(
                    json!({"id": format!("{}-{}", self.name, state.answers.len()), "amount": amount}),
                )
            };
            state.answers.insert(key, (what, answer.clone(), 0));
            state.applied.push(applied);
            return answer;
        }
        state.applied.push(applied);
        Ok(json!({"sent": state.applied.len()}))
    }
}

/// The `n`th replay of `answer`: the same answer with `"replayed": n` in its body.
fn replayed(answer: &Result<Value, ProviderError>, n: u64) -> Result<Value, ProviderError> {
    let mark = |mut body: Value| {
        if let Some(fields) = body.as_object_mut() {
            fields.insert("replayed".into(), json!(n));
        }
        body
    };
    match answer {
        Ok(body) => Ok(mark(body.clone())),
        Err(ProviderError::Rejected(body)) => Err(ProviderError::Rejected(mark(body.clone()))),
        Err(other) => Err(other.clone()),
    }
}

impl Provider for Downstream {
    fn class(&self) -> ProviderClass {
        if self.says_keyed.load(Ordering::SeqCst) {
            ProviderClass::Keyed
        } else {
            self.class
        }
    }

    fn perform(&self, request: &EffectRequest<'_>) -> Result<Value, ProviderError> {
        if self.chaos.powered_off() {
            // The machine is off: its hosts send nothing more.
            std::panic::panic_any(SimCrash { restart: false });
        }
        let _flight = self.take_off(request);
        let chaos = &self.chaos;
        let fault = chaos.roll(|rng| (rng.below(100), rng.between(1, 4), rng.between(2, 12)));
        let Some((dice, secs, real_ms)) = fault else {
            return self.apply(request);
        };
        let at = format!(
            "{} {} #{} try {}",
            self.name, request.key, request.seq, request.attempt
        );
        match dice {
            0..12 => {
                chaos.record(FaultKind::LostResponse, &at);
                self.apply(request).ok();
                Err(ProviderError::Unknown(
                    "timed out reading the response".into(),
                ))
            }
            12..17 if self.class == ProviderClass::Keyed => {
                chaos.record(FaultKind::InFlight, &at);
                Err(ProviderError::Throttled {
                    reason: "409 Conflict: the key's first request is in progress".into(),
                    retry_after: None,
                })
            }
            17..22 => {
                chaos.record(FaultKind::Throttled, &format!("{at} retry-after {secs}s"));
                Err(ProviderError::Throttled {
                    reason: "429 Too Many Requests".into(),
                    retry_after: Some(Duration::from_secs(secs)),
                })
            }
            22..26 => {
                // The lease runs out while the request is on the wire; other hosts
                // get a moment to take the call over before it lands.
                chaos.record(FaultKind::SlowPastLease, &at);
                chaos.clock.shift(chaos.lease_ms + 1_000);
                std::thread::sleep(Duration::from_millis(real_ms));
                self.apply(request)
            }
            26..29 => {
                let landed = dice == 27;
                let restart = secs % 2 == 0;
                let detail = format!("{at} landed={landed} restart={restart}");
                chaos.record(FaultKind::Crash, &detail);
                if landed {
                    self.apply(request).ok();
                }
                std::panic::panic_any(SimCrash { restart })
            }
            33..38 => {
                chaos.record(FaultKind::Slow, &format!("{at} {real_ms}ms"));
                std::thread::sleep(Duration::from_millis(real_ms));
                self.apply(request)
            }
            29..33 => {
                chaos.record(FaultKind::Refused, &at);
                Err(ProviderError::NotPerformed {
                    reason: "connection refused".into(),
                    retry: dice != 29,
                })
            }
            _ => self.apply(request),
        }
    }

    fn earlier_attempt(&self, key: &crate::keys::EffectKey) -> Option<EarlierAttempt> {
        // A downstream with a probe knows the requests it is still answering (as the
        // gateway knows its upstreams' calls in flight): a probe asked meanwhile
        // would say "not performed" of an effect about to be.
        let running = self.probes.load(Ordering::SeqCst)
            && self
                .lock()
                .in_flight
                .iter()
                .any(|(k, ..)| k == key.as_str());
        running.then_some(EarlierAttempt::Running)
    }

    fn probe_of(&self, _operation: &str, _payload: &Value) -> Option<String> {
        (self.class == ProviderClass::Unkeyed && self.probes.load(Ordering::SeqCst))
            .then(|| format!("{}.delivered", self.name))
    }

    fn probe(&self, request: &EffectRequest<'_>) -> Result<Probed, String> {
        let key = request.key.as_str();
        let knew = self.lock().applied.iter().any(|a| a.key == key);
        let chaos = &self.chaos;
        let fault = chaos.roll(|rng| (rng.below(100), rng.between(2, 12)));
        let at = format!("{} {key} #{}", self.name, request.seq);
        let (said, lied) = match fault {
            Some((0..10, _)) => {
                chaos.record(FaultKind::ProbeLied, &format!("{at} knew {knew}"));
                (!knew, true)
            }
            Some((10..20, _)) => {
                chaos.record(FaultKind::ProbeTimedOut, &at);
                return Err("timed out".into());
            }
            Some((20..30, real_ms)) => {
                // What it knew when asked, told after the run's lease ran out.
                chaos.record(FaultKind::ProbeLate, &format!("{at} {real_ms}ms"));
                chaos.clock.shift(chaos.lease_ms + 1_000);
                std::thread::sleep(Duration::from_millis(real_ms));
                (knew, false)
            }
            _ => (knew, false),
        };
        let mut answers = self.said.lock().unwrap_or_else(|p| p.into_inner());
        let id = answers.len() as u64;
        answers.push(ProbeSaid {
            id,
            key: key.to_string(),
            performed: said,
            lied,
            order: next_order(),
        });
        Ok(if said {
            Probed::Performed(json!({ "delivered": true, "probe": id }))
        } else {
            Probed::NotPerformed
        })
    }

    fn unjournaled_read(&self, operation: &str, _payload: &Value) -> bool {
        operation == "balance" || self.says_read.load(Ordering::SeqCst)
    }

    fn read(&self, request: &ReadRequest<'_>) -> Result<Value, ProviderError> {
        if request.operation == "balance" {
            return Ok(json!({"applied": self.lock().applied.len()}));
        }
        // A write its catalog calls a read: it happens, with no key, at the
        // position the read stands before.
        let mut state = self.lock();
        state.applied.push(Applied {
            key: SENT_AS_READ.into(),
            position: (
                request.invocation.to_string(),
                request.payload["gen"].as_u64().unwrap_or(u64::MAX),
                request.seq,
            ),
            what: format!("{} {}", request.operation, request.payload),
            at: self.chaos.clock.mark(),
            order: CALL_ORDER.get().unwrap_or_else(next_order),
        });
        Ok(json!({"sent": state.applied.len()}))
    }
}

/// A transactional downstream: a ledger table in the journal database, one row per
/// effect applied, written in the effect record's transaction.
pub(crate) struct Ledger;

impl Provider for Ledger {
    fn class(&self) -> ProviderClass {
        ProviderClass::Transactional
    }

    fn perform(&self, _request: &EffectRequest<'_>) -> Result<Value, ProviderError> {
        Err(ProviderError::Invalid("only inside a transaction".into()))
    }

    fn prepare(&self, db: &Connection) -> rusqlite::Result<()> {
        db.execute_batch(
            "CREATE TABLE IF NOT EXISTS sim_ledger (
                 invocation TEXT NOT NULL, generation INTEGER NOT NULL, seq INTEGER NOT NULL,
                 effect_key TEXT NOT NULL, what TEXT NOT NULL
             ) STRICT;",
        )
    }

    fn perform_in_transaction(
        &self,
        tx: &Connection,
        request: &EffectRequest<'_>,
    ) -> Result<Value, ProviderError> {
        let generation = request.payload["gen"].as_i64().unwrap_or(-1);
        tx.execute(
            "INSERT INTO sim_ledger (invocation, generation, seq, effect_key, what)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                request.invocation.as_str(),
                generation,
                request.seq,
                request.key.as_str(),
                request.payload.to_string()
            ],
        )
        .map_err(|e| ProviderError::Invalid(format!("ledger: {e}")))?;
        Ok(json!({"row": tx.last_insert_rowid()}))
    }

    fn prepare_postgres(&self, tx: &mut postgres::Transaction<'_>) -> Result<(), postgres::Error> {
        tx.batch_execute(
            "CREATE TABLE IF NOT EXISTS sim_ledger (
                 row_id BIGSERIAL PRIMARY KEY,
                 invocation TEXT NOT NULL, generation BIGINT NOT NULL, seq BIGINT NOT NULL,
                 effect_key TEXT NOT NULL, what TEXT NOT NULL
             );",
        )
    }

    fn perform_in_postgres(
        &self,
        tx: &mut postgres::Transaction<'_>,
        request: &EffectRequest<'_>,
    ) -> Result<Value, ProviderError> {
        let generation = request.payload["gen"].as_i64().unwrap_or(-1);
        let row = tx
            .query_one(
                "INSERT INTO sim_ledger (invocation, generation, seq, effect_key, what)
                 VALUES ($1, $2, $3, $4, $5) RETURNING row_id",
                &[
                    &request.invocation.as_str(),
                    &generation,
                    &i64::from(request.seq),
                    &request.key.as_str(),
                    &request.payload.to_string(),
                ],
            )
            .map_err(|e| ProviderError::Invalid(format!("ledger: {e}")))?;
        Ok(json!({"row": row.get::<_, i64>(0)}))
    }
}

/// The built-in transactional outbox (`providers/outbox.rs`), as a host has it, that
/// also remembers in the simulator's memory (which no power cut reaches) which
/// effect key each message was enqueued under, for which invocation, generation and
/// position: a webhook the receiver got under a key is then known to be some
/// intent's even when the journal lost the enqueue.
pub(crate) struct Outbox {
    inner: OutboxProvider,
    clock: Arc<SimClock>,
    enqueued: Mutex<Vec<Applied>>,
}

impl Outbox {
    pub(crate) fn new(config: Arc<HttpConfig>, clock: Arc<SimClock>) -> Self {
        let stamps: Arc<dyn Clock> = clock.clone();
        Self {
            inner: OutboxProvider::new(config, stamps),
            clock,
            enqueued: Mutex::default(),
        }
    }

    /// Every enqueue that committed or may have (a transaction rolled back after
    /// the provider wrote is here too: its key is never delivered).
    pub(crate) fn enqueued(&self) -> Vec<Applied> {
        self.enqueued
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn note(&self, request: &EffectRequest<'_>, answer: &Result<Value, ProviderError>) {
        if answer.is_err() {
            return;
        }
        let generation = request.payload["json"]["gen"].as_u64().unwrap_or(u64::MAX);
        let applied = Applied {
            key: request.key.to_string(),
            position: (request.invocation.to_string(), generation, request.seq),
            what: format!("{} {}", request.operation, request.payload),
            at: self.clock.mark(),
            order: next_order(),
        };
        self.enqueued
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(applied);
    }
}

impl Provider for Outbox {
    fn class(&self) -> ProviderClass {
        self.inner.class()
    }

    fn perform(&self, request: &EffectRequest<'_>) -> Result<Value, ProviderError> {
        self.inner.perform(request)
    }

    fn prepare(&self, db: &Connection) -> rusqlite::Result<()> {
        self.inner.prepare(db)
    }

    fn perform_in_transaction(
        &self,
        tx: &Connection,
        request: &EffectRequest<'_>,
    ) -> Result<Value, ProviderError> {
        let answer = self.inner.perform_in_transaction(tx, request);
        self.note(request, &answer);
        answer
    }

    fn prepare_postgres(&self, tx: &mut postgres::Transaction<'_>) -> Result<(), postgres::Error> {
        self.inner.prepare_postgres(tx)
    }

    fn perform_in_postgres(
        &self,
        tx: &mut postgres::Transaction<'_>,
        request: &EffectRequest<'_>,
    ) -> Result<Value, ProviderError> {
        let answer = self.inner.perform_in_postgres(tx, request);
        self.note(request, &answer);
        answer
    }
}
