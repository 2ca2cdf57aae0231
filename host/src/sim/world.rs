//! The world around the hosts: fake downstreams that remember every effect they
//! applied and under which key, and the switchboard of faults they and the
//! simulator's chaos thread inject, each with a counter.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, params};
use serde_json::{Value, json};

use super::clock::SimClock;
use super::rng::Rng;
use crate::clock::Clock;
use crate::provider::{EffectRequest, Provider, ProviderClass, ProviderError, ReadRequest};

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
}

impl FaultKind {
    /// Every kind, in the order the report prints them.
    pub const ALL: [FaultKind; 11] = [
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
        }
    }
}

/// The panic a crashing provider raises: the host dies mid-call (and is restarted),
/// or, without `restart`, only the call's thread dies and the host lives on.
pub(crate) struct SimCrash {
    pub restart: bool,
}

/// Where faults are decided and counted, and the schedule of what was injected.
pub(crate) struct Chaos {
    enabled: AtomicBool,
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

/// One effect a downstream applied.
#[derive(Debug, Clone)]
pub(crate) struct Applied {
    /// The key it came with.
    pub key: String,
    /// Its invocation, generation (the guest puts it in the payload) and position.
    pub position: Position,
    /// What it was: operation and payload.
    pub what: String,
}

/// A fake downstream of the keyed or unkeyed class. A keyed one deduplicates by key,
/// as a payments API with `Idempotency-Key` does; an unkeyed one applies every
/// request it receives.
pub(crate) struct Downstream {
    name: &'static str,
    class: ProviderClass,
    chaos: Arc<Chaos>,
    state: Mutex<DownState>,
}

#[derive(Default)]
struct DownState {
    /// A keyed downstream's answer per key, with what was applied under it.
    answers: BTreeMap<String, (String, Value)>,
    applied: Vec<Applied>,
}

impl Downstream {
    pub(crate) fn new(name: &'static str, class: ProviderClass, chaos: Arc<Chaos>) -> Self {
        Self {
            name,
            class,
            chaos,
            state: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, DownState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every effect applied, in order.
    pub(crate) fn applied(&self) -> Vec<Applied> {
        self.lock().applied.clone()
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
        };
        let amount = request.payload["amount"].as_u64().unwrap_or(1);
        let mut state = self.lock();
        if self.class == ProviderClass::Keyed {
            if let Some((_, answer)) = state.answers.get(&key) {
                // A repeated key: the first answer again, nothing applied. (A second
                // request with another payload under it is recorded for the checker.)
                let answer = answer.clone();
                if state.answers[&key].0 != what {
                    state.applied.push(applied);
                }
                return Ok(answer);
            }
            // A refusal is definitive and depends on the request alone.
            let answer = if amount.is_multiple_of(13) {
                json!({"declined": true})
            } else {
                json!({"id": format!("{}-{}", self.name, state.answers.len()), "amount": amount})
            };
            state.answers.insert(key, (what, answer.clone()));
            state.applied.push(applied);
            if amount.is_multiple_of(13) {
                return Err(ProviderError::Rejected(answer));
            }
            return Ok(answer);
        }
        state.applied.push(applied);
        Ok(json!({"sent": state.applied.len()}))
    }
}

impl Provider for Downstream {
    fn class(&self) -> ProviderClass {
        self.class
    }

    fn perform(&self, request: &EffectRequest<'_>) -> Result<Value, ProviderError> {
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

    fn unjournaled_read(&self, operation: &str, _payload: &Value) -> bool {
        operation == "balance"
    }

    fn read(&self, _request: &ReadRequest<'_>) -> Result<Value, ProviderError> {
        Ok(json!({"applied": self.lock().applied.len()}))
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
}

/// Positions the ledger holds more than one row for.
pub(crate) fn ledger_duplicates(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare(
        "SELECT invocation, generation, seq, COUNT(*) FROM sim_ledger
          GROUP BY invocation, generation, seq HAVING COUNT(*) > 1",
    )?;
    stmt.query_map([], |r| {
        Ok(format!(
            "the transactional ledger applied ({}, gen {}, #{}) {} times",
            r.get::<_, String>(0)?,
            r.get::<_, i64>(1)?,
            r.get::<_, i64>(2)?,
            r.get::<_, i64>(3)?
        ))
    })?
    .collect()
}
