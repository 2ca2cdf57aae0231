//! The effect guard: pending record first, then the provider, retried with the stored
//! key while the outcome is unknown; the definitive answer is saved and replayed.

use std::sync::Arc;

use serde_json::{Value, json};

use super::Shared;
use crate::determinism::GuestEntropy;
use crate::error::Error;
use crate::fault::{self, FaultPoint};
use crate::keys::{self, EffectKey, InvocationKey};
use crate::provider::{EffectRequest, Provider, ProviderClass, ProviderError, ReadRequest};
use crate::store::{BehindJob, EffectState, Lease, NewEffect, NewInvocation, Refusal, Resolution};

/// Why `perform` returned no response; each maps to a WIT `effect-error` case.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum EffectFailure {
    Rejected(String),
    OutcomeUnknown(String),
    Denied(String),
    Divergence(String),
}

/// What stopped an invocation short of a savable outcome.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Interruption {
    OutcomeUnknown {
        seq: u32,
        provider: String,
        reason: String,
    },
    Divergence {
        seq: u32,
        detail: String,
    },
    /// Another host took the call over; this run may perform nothing more.
    LeaseLost {
        seq: u32,
    },
    /// This run had not journaled its invocation when another run did (a duplicate
    /// in another process): it performed nothing, its outcome does not count, and
    /// the call looks again (and waits for, or replays, the other run).
    Superseded,
}

/// How a run starts: what its guest sees and what the journal holds of it.
pub(crate) struct RunStart {
    /// The journaled clock start and seed (or this run's fresh ones).
    pub entropy: GuestEntropy,
    /// The invocation's record when the run found none: it writes it.
    pub unjournaled: Option<NewInvocation>,
    /// Whether an earlier run journaled effects this run must replay.
    pub resumed: bool,
}

/// The effect guard for one run of one invocation.
pub(crate) struct EffectSession {
    shared: Arc<Shared>,
    invocation: InvocationKey,
    /// The tool being run; providers see it (the `http` allowlist is per tool).
    tool: String,
    /// The run that holds the invocation's lease.
    owner: String,
    /// How far each effect renews the lease.
    lease_ms: i64,
    /// The journaled clock start and seed the guest's WASI clocks and random use.
    pub entropy: GuestEntropy,
    next_seq: u32,
    /// The invocation's record while this run has not journaled it: a run that found
    /// no record writes it with its first effect, or complete with its outcome.
    pub unjournaled: Option<NewInvocation>,
    /// Whether an earlier run journaled effects this run must replay; a fresh run
    /// never reads the journal before an effect.
    resumed: bool,
    /// Whether this run performed an effect outside the journal's own transactions
    /// (keyed or unkeyed): its outcome then needs a durable point before the answer.
    pub performed_outside: bool,
    /// Whether this run attempted an unkeyed effect: its answer and the run's outcome
    /// are then never written behind the call (a lost one needs a person).
    pub performed_unkeyed: bool,
    /// Set by the first effect whose outcome is unknown or that diverged; later
    /// effects in the same run are refused.
    pub interrupted: Option<Interruption>,
    /// Set when the journal itself failed; the run's outcome is then not saved.
    pub host_fault: Option<Error>,
}

/// The saved answer of an effect, as stored in `effects.response`.
pub(crate) fn stored_ok(v: &Value) -> String {
    json!({ "ok": v }).to_string()
}
fn stored_rejected(v: &Value) -> String {
    json!({ "rejected": v }).to_string()
}
/// A refusal before anything happened, saved with the exact message the guest got,
/// so a resumed run is told the same thing.
fn stored_denied(message: &str) -> String {
    json!({ "denied": message }).to_string()
}
fn replay(stored: &str) -> Result<String, EffectFailure> {
    let v: Value = serde_json::from_str(stored).unwrap_or(Value::Null);
    match (
        v.get("ok"),
        v.get("rejected"),
        v.get("denied").and_then(Value::as_str),
    ) {
        (Some(ok), _, _) => Ok(ok.to_string()),
        (None, Some(rejected), _) => Err(EffectFailure::Rejected(rejected.to_string())),
        (None, None, Some(denied)) => Err(EffectFailure::Denied(denied.to_string())),
        _ => Err(EffectFailure::Denied(format!(
            "the journal holds an unreadable response for this effect: {stored}"
        ))),
    }
}

impl EffectSession {
    /// A session for one run of `invocation` under `owner`'s lease.
    pub(crate) fn new(
        shared: Arc<Shared>,
        invocation: InvocationKey,
        tool: &str,
        owner: &str,
        lease_ms: i64,
        start: RunStart,
    ) -> Self {
        Self {
            shared,
            invocation,
            tool: tool.to_owned(),
            owner: owner.to_string(),
            lease_ms,
            entropy: start.entropy,
            next_seq: 0,
            unjournaled: start.unjournaled,
            resumed: start.resumed,
            performed_outside: false,
            performed_unkeyed: false,
            interrupted: None,
            host_fault: None,
        }
    }

    /// Guards one `perform` call from the guest. `Err` is a host fault (the journal
    /// failed): the guest traps and the run's outcome is not saved.
    pub(crate) fn perform(
        &mut self,
        provider_name: &str,
        operation: &str,
        payload: &str,
    ) -> Result<Result<String, EffectFailure>, Error> {
        if self.interrupted.is_some() {
            return Ok(Err(EffectFailure::Denied(
                "an earlier effect of this call is unresolved; no further effects are performed"
                    .into(),
            )));
        }
        let shared = Arc::clone(&self.shared);
        let (provider, payload) = match self.check(provider_name, payload) {
            Ok(checked) => checked,
            Err(reason) => {
                // A refused call takes a position like an effect, so a resumed call
                // that is refused the same way sees the same positions.
                self.next_seq += 1;
                return Ok(Err(EffectFailure::Denied(reason)));
            }
        };
        if provider.unjournaled_read(operation, &payload) {
            return Ok(self.read(provider.as_ref(), provider_name, operation, &payload));
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let fingerprint = match keys::effect_fingerprint(provider_name, operation, &payload) {
            Ok(f) => f,
            Err(e) => return Ok(Err(EffectFailure::Denied(format!("payload: {e}")))),
        };

        // Only a resumed run can find its effects journaled already.
        let existing = if self.resumed {
            shared.store.effect(&self.invocation, seq)?
        } else {
            None
        };
        if let Some(record) = &existing {
            if record.fingerprint != fingerprint {
                let detail = format!(
                    "the journal holds {}.{} at this position, the guest asked for {provider_name}.{operation} with another payload",
                    record.provider, record.operation
                );
                self.interrupted = Some(Interruption::Divergence {
                    seq,
                    detail: detail.clone(),
                });
                return Ok(Err(EffectFailure::Divergence(detail)));
            }
            if record.state == EffectState::Done {
                return Ok(replay(record.response.as_deref().unwrap_or("")));
            }
        }

        let class = provider.class();
        let now = shared.clock.now_ms();
        let key = keys::effect_key(&self.invocation, seq);
        let invocation = self.invocation.clone();
        let new = NewEffect {
            key: &key,
            invocation: &invocation,
            seq,
            provider: provider_name,
            class: class.as_str(),
            operation,
            fingerprint: &fingerprint,
            now,
        };
        if class == ProviderClass::Transactional {
            return self.transactional(provider.as_ref(), &new, &payload);
        }
        if let Some(record) = &existing
            && class == ProviderClass::Unkeyed
            && record.resolution != Some(Resolution::NotPerformed)
        {
            // A pending unkeyed effect may have happened; repeating it could do it
            // twice. Fail closed until a person resolves it.
            let reason = format!(
                "an earlier attempt of this unkeyed effect may have taken effect; a person must resolve it \
                 (`justonce journal --unresolved`, then `justonce resolve {} --performed` or `--not-performed`)",
                record.key
            );
            return Ok(Err(self.unknown(seq, provider_name, reason)));
        }
        self.attempts(provider.as_ref(), class, &new, &payload)
    }

    /// Whether the outcome of this run must be on disk before the caller is answered:
    /// when it performed an effect outside the journal's own transactions, or resumed
    /// a run that may have. A fresh run whose effects were all transactional (or that
    /// had none) can lose its outcome to a power cut only together with those effects,
    /// and a retry then runs it again as a new call.
    pub(crate) fn needs_durable_outcome(&self) -> bool {
        self.resumed || self.performed_outside
    }

    /// After the guest finished: the first position and number of journaled effects
    /// this run never asked for, if any (a resumed guest that stopped short).
    pub(crate) fn skipped_journaled_effects(&self) -> Result<Option<(u32, u32)>, Error> {
        if !self.resumed {
            return Ok(None);
        }
        let journaled = self
            .shared
            .store
            .effects_from(&self.invocation, self.next_seq)?;
        Ok((journaled > 0).then_some((self.next_seq, journaled)))
    }

    /// Checks the budget, the payload and the provider before anything is journaled.
    fn check(
        &self,
        provider_name: &str,
        payload: &str,
    ) -> Result<(Arc<dyn Provider>, Value), String> {
        // The effect budget and the payload cap are the sandbox's (runtime/state.rs):
        // they trap before a request gets here.
        let shared = &self.shared;
        let payload: Value =
            serde_json::from_str(payload).map_err(|e| format!("payload is not valid JSON: {e}"))?;
        let Some(provider) = shared.providers.get(provider_name) else {
            let known: Vec<&str> = shared.providers.keys().map(String::as_str).collect();
            return Err(format!(
                "no provider named `{provider_name}`; this host has: {}",
                known.join(", ")
            ));
        };
        Ok((Arc::clone(provider), payload))
    }

    /// An unjournaled read: no record, no key; retried under the policy because a
    /// read is safe to repeat. Still unknown after the budget, the call is left
    /// resumable like an unknown effect, so retrying it reads again.
    fn read(
        &mut self,
        provider: &dyn Provider,
        provider_name: &str,
        operation: &str,
        payload: &Value,
    ) -> Result<String, EffectFailure> {
        let shared = Arc::clone(&self.shared);
        let mut hint = None;
        let mut made = 0;
        loop {
            made += 1;
            let pause = shared.retry.pause_before(made, hint);
            if !pause.is_zero() {
                shared.clock.sleep(pause);
            }
            let request = ReadRequest {
                tool: &self.tool,
                invocation: &self.invocation,
                attempt: made,
                operation,
                payload,
            };
            let reason = match provider.read(&request) {
                Ok(response) => return Ok(response.to_string()),
                Err(ProviderError::Rejected(answer)) => {
                    return Err(EffectFailure::Rejected(answer.to_string()));
                }
                Err(ProviderError::Invalid(reason)) => {
                    return Err(EffectFailure::Denied(format!(
                        "{provider_name} refused the request: {reason}"
                    )));
                }
                Err(ProviderError::Unknown(reason)) => {
                    hint = None;
                    reason
                }
                Err(ProviderError::Throttled {
                    reason,
                    retry_after,
                }) => {
                    hint = retry_after;
                    reason
                }
            };
            if made >= shared.retry.max_attempts {
                // A read has no position of its own: name the effect it came before.
                let reason = format!(
                    "a read (not journaled, before effect #{}) failed {made} time(s): {reason}",
                    self.next_seq
                );
                return Err(self.unknown(self.next_seq, provider_name, reason));
            }
        }
    }

    fn unknown(&mut self, seq: u32, provider: &str, reason: String) -> EffectFailure {
        self.interrupted = Some(Interruption::OutcomeUnknown {
            seq,
            provider: provider.to_string(),
            reason: reason.clone(),
        });
        EffectFailure::OutcomeUnknown(format!("{reason}; retrying the same tool call is safe"))
    }

    fn lease_lost(&mut self, seq: u32) -> EffectFailure {
        self.interrupted = Some(Interruption::LeaseLost { seq });
        EffectFailure::Denied(
            "another host took this call over (this run's lease expired); nothing was performed"
                .into(),
        )
    }

    fn refused(&mut self, refusal: Refusal, seq: u32) -> EffectFailure {
        match refusal {
            Refusal::LeaseLost => self.lease_lost(seq),
            Refusal::Superseded => {
                self.interrupted = Some(Interruption::Superseded);
                EffectFailure::Denied(
                    "another run of this call started meanwhile; this run performed nothing and gives way to it"
                        .into(),
                )
            }
        }
    }

    fn lease(&self) -> Lease<'_> {
        Lease {
            owner: &self.owner,
            until: self.shared.clock.now_ms().saturating_add(self.lease_ms),
        }
    }

    fn attempts(
        &mut self,
        provider: &dyn Provider,
        class: ProviderClass,
        new: &NewEffect<'_>,
        payload: &Value,
    ) -> Result<Result<String, EffectFailure>, Error> {
        let shared = Arc::clone(&self.shared);
        let budget = if class == ProviderClass::Unkeyed {
            1
        } else {
            shared.retry.max_attempts
        };
        let mut made = 0;
        let mut hint = None;
        loop {
            made += 1;
            let pause = shared.retry.pause_before(made, hint);
            if !pause.is_zero() {
                shared.clock.sleep(pause);
            }
            // The key is read back from the journal on every attempt, never recomputed,
            // and only while this run still holds the lease.
            let now = shared.clock.now_ms();
            let claimed = shared.store.claim_attempt(
                &NewEffect { now, ..*new },
                &self.lease(),
                self.unjournaled.as_ref(),
            )?;
            let (key, attempt) = match claimed {
                Ok(claimed) => claimed,
                Err(refusal) => return Ok(Err(self.refused(refusal, new.seq))),
            };
            self.unjournaled = None;
            self.performed_outside = true;
            self.performed_unkeyed |= class == ProviderClass::Unkeyed;
            // The one write that must be on disk before the provider is called: the
            // pending record with its key, written with the lease renewal and the
            // attempt in one transaction. After a crash or a power cut, a retry finds it
            // and reuses the key (keyed), or learns the effect may have happened
            // (unkeyed). Taking the lease in `begin` and saving the provider's answer
            // need no fsync of their own: a lease lost with the power has no holder
            // left to fence, and an answer lost with the power is fetched again under
            // the same key (keyed) or fails closed (unkeyed). The outcome is made
            // durable before the caller is answered.
            shared.store.make_durable()?;
            let request = EffectRequest {
                tool: &self.tool,
                key: &key,
                invocation: &self.invocation,
                seq: new.seq,
                attempt,
                operation: new.operation,
                payload,
            };
            fault::point(FaultPoint::BeforeEffect);
            let answer = provider.perform(&request);
            fault::point(FaultPoint::AfterProvider);
            let gave_up = match answer {
                Ok(response) => {
                    self.save_answer(class, &key, &stored_ok(&response))?;
                    return Ok(Ok(response.to_string()));
                }
                Err(ProviderError::Rejected(answer)) => {
                    self.save_answer(class, &key, &stored_rejected(&answer))?;
                    return Ok(Err(EffectFailure::Rejected(answer.to_string())));
                }
                Err(ProviderError::Invalid(reason)) => {
                    // Refused before doing anything: finish the record as a refusal so
                    // a retry does not ask again and the journal says what happened.
                    let message = format!("{} refused the request: {reason}", new.provider);
                    self.save_answer(class, &key, &stored_denied(&message))?;
                    return Ok(Err(EffectFailure::Denied(message)));
                }
                Err(ProviderError::Unknown(reason)) => {
                    hint = None;
                    self.note_unknown(&key, reason, made, budget, class, new)?
                }
                Err(ProviderError::Throttled {
                    reason,
                    retry_after,
                }) => {
                    hint = retry_after;
                    self.note_unknown(&key, reason, made, budget, class, new)?
                }
            };
            if let Some(failure) = gave_up {
                return Ok(Err(failure));
            }
        }
    }

    /// Saves an effect's definitive answer. With `Normal` durability a keyed one is
    /// written behind the call (see `store/behind.rs`): lost, a retry asks the
    /// downstream again under the same key. Otherwise it is committed before the guest
    /// goes on.
    fn save_answer(
        &self,
        class: ProviderClass,
        key: &EffectKey,
        stored: &str,
    ) -> Result<(), Error> {
        let store = &self.shared.store;
        let now = self.shared.clock.now_ms();
        if class == ProviderClass::Keyed && store.writes_behind() {
            store.write_behind(BehindJob::Finish {
                invocation: self.invocation.clone(),
                key: key.clone(),
                response: stored.to_owned(),
                now,
            })
        } else {
            store.finish_effect(key, stored, now)
        }
    }

    /// Records an attempt whose outcome is unknown; past the budget, gives up.
    fn note_unknown(
        &mut self,
        key: &crate::keys::EffectKey,
        reason: String,
        made: u32,
        budget: u32,
        class: ProviderClass,
        new: &NewEffect<'_>,
    ) -> Result<Option<EffectFailure>, Error> {
        let shared = Arc::clone(&self.shared);
        shared
            .store
            .note_attempt_error(key, &reason, shared.clock.now_ms())?;
        if made < budget {
            return Ok(None);
        }
        let mut reason = format!(
            "{reason} (after {made} attempt{} with key {key})",
            if made == 1 { "" } else { "s" }
        );
        if class == ProviderClass::Unkeyed {
            reason.push_str(&format!(
                "; this unkeyed effect is not repeated until a person resolves it: `justonce resolve {key} --performed` or `--not-performed`"
            ));
        }
        Ok(Some(self.unknown(new.seq, new.provider, reason)))
    }

    fn transactional(
        &mut self,
        provider: &dyn Provider,
        new: &NewEffect<'_>,
        payload: &Value,
    ) -> Result<Result<String, EffectFailure>, Error> {
        let shared = Arc::clone(&self.shared);
        let invocation = &self.invocation;
        let lease = self.lease();
        let unjournaled = self.unjournaled.as_ref();
        let outcome = shared.store.transaction(|tx| {
            // No durable point: the record and the provider's writes commit together
            // or not at all, so a power cut can only lose both.
            if let Err(refusal) = crate::store::hold_in(tx, invocation, &lease, unjournaled)? {
                return Ok(Err(refusal));
            }
            crate::store::insert_effect(tx, new, EffectState::Pending)?;
            let (key, attempt) = crate::store::begin_attempt_in(tx, invocation, new.seq, new.now)?;
            let request = EffectRequest {
                tool: &self.tool,
                key: &key,
                invocation,
                seq: new.seq,
                attempt,
                operation: new.operation,
                payload,
            };
            // The provider's writes and the record commit together, or neither does;
            // a refusal rolls back whatever the provider wrote before refusing.
            let savepoint = tx.savepoint_with_name("provider")?;
            fault::point(FaultPoint::BeforeEffect);
            let answer = provider.perform_in_transaction(&savepoint, &request);
            fault::point(FaultPoint::AfterProvider);
            let (stored, result) = match answer {
                Ok(response) => {
                    savepoint.commit()?;
                    (stored_ok(&response), Ok(response.to_string()))
                }
                Err(ProviderError::Rejected(answer)) => {
                    drop(savepoint);
                    (
                        stored_rejected(&answer),
                        Err(EffectFailure::Rejected(answer.to_string())),
                    )
                }
                Err(
                    ProviderError::Invalid(reason)
                    | ProviderError::Unknown(reason)
                    | ProviderError::Throttled { reason, .. },
                ) => {
                    drop(savepoint);
                    let message = format!("{} refused the request: {reason}", new.provider);
                    (stored_denied(&message), Err(EffectFailure::Denied(message)))
                }
            };
            crate::store::finish_effect_in(tx, &key, &stored, new.now)?;
            Ok(Ok(result))
        })?;
        Ok(match outcome {
            Ok(result) => {
                self.unjournaled = None;
                result
            }
            Err(refusal) => Err(self.refused(refusal, new.seq)),
        })
    }
}

impl std::fmt::Debug for EffectSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EffectSession")
            .field("invocation", &self.invocation)
            .field("next_seq", &self.next_seq)
            .finish()
    }
}
