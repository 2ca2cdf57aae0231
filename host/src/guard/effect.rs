//! The effect guard: one run's answer to every `perform` its guest makes.
//!
//! Read top to bottom as the contract does:
//! 1. checks that need no journal (an interrupted run, an unknown provider, a read);
//! 2. a resumed run compares the journal at this position: another effect is a
//!    divergence, a finished one replays its answer;
//! 3. a transactional effect is claimed and performed in one journal transaction;
//! 4. a pending unkeyed effect that may have happened fails closed;
//! 5. otherwise the effect is claimed (record and key before the provider), performed,
//!    and retried under the same key while its outcome is unknown; the definitive
//!    answer is saved, fenced by the run's lease.
//!
//! Asking the user is an effect too (`asking`): it replays like one, and is claimed
//! like a keyed one before anyone is asked.

mod asking;
mod asking_person;
mod client_requests;
mod probing;
mod reconciling;

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::Shared;
use super::heartbeat::Heartbeats;
use super::prepared::Prepared;
use crate::ask::{self, Question};
use crate::determinism::GuestEntropy;
use crate::error::{EndsBy, Error};
use crate::fault::{self, FaultPoint};
use crate::journal::{
    Answer, DeferredAnswer, EffectState, Lease, NewEffect, NewInvocation, Refusal, Resolution,
    TransactionalRequest,
};
use crate::keys::{self, EffectKey, InvocationKey};
use crate::mutants::{self, Mutant};
use crate::provider::{
    EarlierAttempt, EffectRequest, Provider, ProviderClass, ProviderError, ReadRequest,
};
use crate::runtime::{EffectFailure, EffectHandler, spans};
use client_requests::CallsClient;
use probing::Probing;

/// How often a run renews a lease that ran out before its provider call (see
/// `EffectSession::still_holds_lease`) before it gives the attempt up.
const LEASE_CHECKS: usize = 3;

/// What stopped an invocation short of a savable outcome.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Interruption {
    /// An effect's outcome stayed unknown.
    OutcomeUnknown {
        seq: u32,
        provider: String,
        reason: String,
        ends_by: EndsBy,
    },
    /// The guest asked for another effect than the journal holds.
    Divergence { seq: u32, detail: String },
    /// An effect was known not to be performed for a reason outside the tool (the
    /// host's configuration, a refused connection): nothing is saved.
    NotPerformed {
        seq: u32,
        provider: String,
        reason: String,
    },
    /// Another host took the call over; this run may perform nothing more.
    LeaseLost,
    /// This run had not journaled its invocation when another run did (a duplicate
    /// in another process): it performed nothing, its outcome does not count, and
    /// the call looks again (and waits for, or replays, the other run).
    Superseded,
    /// The tool asked the user at `seq`, and the answers come with a later request:
    /// the call is suspended, waiting for them.
    AwaitingInput {
        seq: u32,
        questions: Vec<Question>,
        /// What an upstream asked of the client besides questions (sampling,
        /// roots), answered with the same later request; not journaled.
        requests: Vec<ask::UpstreamRequest>,
        /// The request state the answers must come back with (empty for a read's
        /// requests: nothing of a read is journaled to tie them to).
        state: String,
    },
    /// The tool asked the user, and this caller cannot be asked: why.
    InputUnavailable(String),
    /// The request answered with a request state this host did not make: why.
    InputStateInvalid(String),
}

/// How a run starts: what its guest sees and what the journal holds of it.
pub(crate) struct RunStart {
    /// The journaled clock start and seed (or this run's fresh ones).
    pub entropy: GuestEntropy,
    /// The invocation's record when the run found none: it writes it.
    pub unjournaled: Option<NewInvocation>,
    /// Whether an earlier run journaled effects this run must replay.
    pub resumed: bool,
    /// The tool only reads: nothing is journaled, reads run, an effect traps.
    pub read_only: bool,
}

/// The effect guard for one run of one invocation.
pub(crate) struct EffectSession {
    shared: Arc<Shared>,
    /// Renews this run's lease while a provider call is in flight.
    heartbeats: Arc<Heartbeats>,
    invocation: InvocationKey,
    /// The tool being run; providers see it (the `http` allowlist is per tool).
    tool: String,
    /// The authenticated principal of the call, if any; providers see it.
    principal: Option<String>,
    /// The run that holds the invocation's lease.
    owner: String,
    /// How far each journal write renews the lease.
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
    /// Set by the first effect whose outcome is unknown, that diverged or whose run
    /// lost its lease; later effects in the same run are refused.
    pub interrupted: Option<Interruption>,
    /// Set when the journal itself failed; the run's outcome is then not saved.
    pub host_fault: Option<Error>,
    /// The tool only reads: its run journals nothing and may not perform an effect.
    pub read_only: bool,
    /// The call's wall-clock cap, and when it ends on the host's clock: no attempt
    /// of an effect starts after it.
    wall_clock: Duration,
    ends_at_ms: i64,
    /// Answers of keyed effects not written yet: the run's next commit (the next
    /// claim, its outcome, or its suspension) saves them.
    pub deferred: Vec<DeferredAnswer>,
    /// Attempts at effects this run made (each sent under its key), for the call's
    /// log line.
    pub attempts: u32,
    /// The tool's own probe of its effects (its component's `reconcile`), if any:
    /// asked about a pending unkeyed effect whose provider has no probe.
    pub tool_probe: Option<Arc<dyn super::ToolProbe>>,
    /// A sweep's run: it asks the probe of the first pending unkeyed effect,
    /// journals its decision and stops, performing nothing new.
    pub probe_only: bool,
}

/// One attempt's result, for [`EffectSession::retrying`].
enum Attempt<T> {
    /// A definitive answer (or a refusal): stop.
    Done(T),
    /// The outcome is unknown; try again (after `retry_after`, if the downstream said).
    Unknown {
        reason: String,
        retry_after: Option<Duration>,
    },
}

impl EffectHandler for EffectSession {
    fn perform(
        &mut self,
        provider: &str,
        operation: &str,
        payload: &str,
    ) -> Result<Result<String, EffectFailure>, String> {
        self.guarded(provider, operation, payload, Caller::Guest)
    }

    fn perform_upstream(
        &mut self,
        provider: &str,
        operation: &str,
        payload: &str,
    ) -> Result<Result<String, EffectFailure>, String> {
        self.guarded(provider, operation, payload, Caller::Gateway)
    }

    fn ask(
        &mut self,
        questions: &[Question],
    ) -> Result<Result<Vec<String>, EffectFailure>, String> {
        let asked = self.asked(questions);
        self.fault_to_trap(asked)
    }

    fn entropy(&self) -> &GuestEntropy {
        &self.entropy
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// Who asked for an effect: an upstream's provider (`mcp:NAME`) is the gateway's
/// alone, never a guest's.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Caller {
    /// A guest's `perform` (a component tool).
    Guest,
    /// The gateway's runner, for an upstream tool's call.
    Gateway,
}

impl EffectSession {
    fn guarded(
        &mut self,
        provider: &str,
        operation: &str,
        payload: &str,
        caller: Caller,
    ) -> Result<Result<String, EffectFailure>, String> {
        let answer = self.guard(provider, operation, payload, caller);
        self.fault_to_trap(answer)
    }

    /// A fault of the host (the journal failed) is kept for the call's answer, and
    /// the guest traps with its message.
    fn fault_to_trap<T>(
        &mut self,
        answer: Result<Result<T, EffectFailure>, Error>,
    ) -> Result<Result<T, EffectFailure>, String> {
        answer.map_err(|fault| {
            let message = fault.to_string();
            self.host_fault = Some(fault);
            message
        })
    }

    /// A session for one run of the `prepared` call under `owner`'s lease.
    pub(crate) fn new(
        shared: Arc<Shared>,
        heartbeats: Arc<Heartbeats>,
        prepared: &Prepared,
        owner: &str,
        lease_ms: i64,
        start: RunStart,
    ) -> Self {
        let ends_at_ms = shared
            .clock
            .now_ms()
            .saturating_add(crate::clock::millis(prepared.tool.limits.wall_clock));
        Self {
            shared,
            heartbeats,
            invocation: prepared.key.clone(),
            tool: prepared.tool.name.to_string(),
            principal: prepared.principal.clone(),
            owner: owner.to_string(),
            lease_ms,
            entropy: start.entropy,
            next_seq: 0,
            unjournaled: start.unjournaled,
            resumed: start.resumed,
            interrupted: None,
            host_fault: None,
            read_only: start.read_only,
            wall_clock: prepared.tool.limits.wall_clock,
            ends_at_ms,
            deferred: Vec::new(),
            attempts: 0,
            tool_probe: None,
            probe_only: false,
        }
    }

    /// Guards one `perform` call from the guest. `Err` is a host fault (the journal
    /// failed): the guest traps and the run's outcome is not saved.
    fn guard(
        &mut self,
        provider_name: &str,
        operation: &str,
        payload: &str,
        caller: Caller,
    ) -> Result<Result<String, EffectFailure>, Error> {
        // 1. Checks that need no journal.
        if self.interrupted.is_some() {
            return Ok(Err(after_interruption()));
        }
        if self.handed_over() {
            return Ok(Err(lease_lost()));
        }
        let payload: Value = match serde_json::from_str(payload) {
            Ok(payload) => payload,
            Err(e) => {
                // A refused call takes a position like an effect, so a resumed call
                // that is refused the same way sees the same positions.
                self.next_seq += 1;
                return Ok(Err(EffectFailure::Denied(format!(
                    "payload is not valid JSON: {e}"
                ))));
            }
        };
        // An upstream's provider carries the operator's credentials to any of its
        // tools: a guest asking for it is refused as if it were not configured (it
        // is not, for a component), and learns nothing of the upstreams.
        let is_upstream = |name: &str| name.starts_with(crate::upstream::PROVIDER_PREFIX);
        if caller == Caller::Guest && provider_name == ask::PROVIDER {
            // The user is asked through `input.ask` only, which journals the
            // questions as such. A refusal of the tool's own doing takes a position.
            self.next_seq += 1;
            return Ok(Err(EffectFailure::Denied(format!(
                "the provider `{}` is reserved: a tool asks the user through `input.ask`",
                ask::PROVIDER
            ))));
        }
        let provider = match caller {
            Caller::Guest if is_upstream(provider_name) => None,
            _ => self.shared.providers.get(provider_name).cloned(),
        };
        let Some(provider) = provider else {
            // The host's configuration, not the tool: nothing is saved, and the call
            // succeeds once the provider is configured.
            let known: Vec<&str> = self
                .shared
                .providers
                .keys()
                .map(String::as_str)
                .filter(|name| caller == Caller::Gateway || !is_upstream(name))
                .collect();
            let reason = format!(
                "no provider named `{provider_name}` is configured; this host has: {}",
                known.join(", ")
            );
            let seq = self.next_seq;
            self.next_seq += 1;
            return Ok(Err(self.not_performed(seq, provider_name, reason)));
        };
        if provider.unjournaled_read(operation, &payload)
            && !self.journaled_at_next(provider_name, operation, &payload)?
        {
            return self.read(provider.as_ref(), provider_name, operation, &payload);
        }
        if self.read_only {
            return Ok(Err(EffectFailure::ReadOnly(format!(
                "the tool `{}` is marked read-only but asked for the effect {provider_name}.{operation}: \
                 a read-only tool's calls are not journaled, so it may only read (an HTTP GET); \
                 remove its read-only mark to perform effects",
                self.tool
            ))));
        }
        let counters = self.shared.metrics.effect(
            provider_name,
            &crate::metrics::service_of(provider_name, &payload),
            &self.tool,
        );
        let answer = self.journaled(provider.as_ref(), provider_name, operation, &payload);
        counters.effect_ended(effect_result(&answer));
        answer
    }

    /// Steps 2 to 5 for an effect that is journaled.
    fn journaled(
        &mut self,
        provider: &dyn Provider,
        provider_name: &str,
        operation: &str,
        payload: &Value,
    ) -> Result<Result<String, EffectFailure>, Error> {
        let seq = self.next_seq;
        self.next_seq += 1;
        let fingerprint = match keys::effect_fingerprint(provider_name, operation, payload) {
            Ok(f) => f,
            Err(e) => return Ok(Err(EffectFailure::Denied(format!("payload: {e}")))),
        };

        // 2. Only a resumed run can find its effects journaled already.
        let existing = if self.resumed && !mutants::on(Mutant::ForgetJournaled) {
            self.shared.journal.effect(&self.invocation, seq)?
        } else {
            None
        };
        if let Some(record) = &existing {
            if record.fingerprint != fingerprint {
                return Ok(Err(self.diverged(record, seq, provider_name, operation)));
            }
            if record.state == EffectState::Done {
                return Ok(answer_to_guest(Answer::from_stored(
                    record.response.as_deref().unwrap_or(""),
                )));
            }
        }

        // A cancelled call replays what it journaled as done (above), finishes one it
        // journaled as pending (under its key), and claims nothing new: the refusal
        // takes this position, as a performed effect would.
        if existing.is_none() && self.refused_by_a_cancel() {
            return Ok(Err(cancelled()));
        }

        let class = self.class_of(
            (seq, existing.as_ref()),
            provider,
            provider_name,
            operation,
            payload,
        )?;
        let key = keys::effect_key(&self.invocation, self.entropy.seed.generation(), seq);
        let _span = spans::effect(&self.invocation, &key, seq, provider_name, operation).entered();
        let invocation = self.invocation.clone();
        // Decided once, here: what `journal --unresolved` says can end it.
        let ends_by = (class == ProviderClass::Unkeyed)
            .then(|| self.unkeyed_ends_by_journaled(provider, operation, payload));
        let new = NewEffect {
            key: &key,
            invocation: &invocation,
            seq,
            provider: provider_name,
            class: class.as_str(),
            operation,
            fingerprint: &fingerprint,
            ends_by: ends_by.as_deref(),
            now: self.shared.clock.now_ms(),
        };

        // A sweep's run performs nothing: it stops here unless this is the pending
        // unkeyed effect its probe may decide.
        let probe_here = existing.as_ref().is_some_and(|record| {
            class == ProviderClass::Unkeyed && record.resolution != Some(Resolution::NotPerformed)
        });
        if self.probe_only && !probe_here {
            return Ok(Err(self.swept(
                seq,
                provider_name,
                "nothing to probe: the sweep's run reached an effect it may not perform".into(),
            )));
        }

        // 3. Transactional: claimed and performed in one journal transaction.
        if class == ProviderClass::Transactional {
            return self.transactional(provider, &new, operation, payload);
        }

        // 4. A pending unkeyed effect may have happened; repeating it could do it
        // twice. Fail closed until a person (or its probe) resolves it, unless its
        // provider has learned its answer since (it came after the attempt was given
        // up): then that answer is the effect's, saved as an answer in time would
        // have been. Its probe, if it has one, may say whether it happened (`probing`).
        let mut resumes = false;
        if let Some(record) = &existing
            && class == ProviderClass::Unkeyed
            && record.resolution != Some(Resolution::NotPerformed)
        {
            let earlier = provider.earlier_attempt(&record.key);
            // One waiting upstream on the person's answer to what it asked is taken
            // up, never sent anew (`client_requests`): it goes on below.
            resumes = matches!(earlier, Some(EarlierAttempt::Asking));
            let late = match &earlier {
                // No answer after all (one over the cap, not JSON-RPC): still unknown.
                Some(EarlierAttempt::Answered(answer)) => super::late::answer_of(answer),
                _ => None,
            };
            if let Some(answer) = late {
                tracing::info!(
                    tool = %self.tool,
                    key = %self.invocation,
                    effect = %record.key,
                    seq,
                    provider = provider_name,
                    "effect #{seq} ({provider_name}) was answered after its attempt was given up: its answer is saved, nothing is sent again"
                );
                return self.save_answer(&record.key, answer, class);
            }
            // Named by its call, not its effect key: what the agent reads never holds
            // an effect key (operators read it in the journal).
            if resumes {
                // A sweep takes up nobody's parked request: the person answers it.
                if self.probe_only {
                    let reason = "not probed: its upstream waits for the person's answer to its question, and the call made again with it goes on";
                    return Ok(Err(self.swept(seq, provider_name, reason.into())));
                }
            } else if let Some(EarlierAttempt::Running) = earlier {
                let reason = format!(
                    "an earlier attempt of this unkeyed effect is still running on {provider_name}, which has not answered it yet; \
                     it is not sent again: retrying the same tool call once it answered returns its answer"
                );
                return Ok(Err(self.unknown(seq, provider_name, reason, EndsBy::Retry)));
            } else {
                let mut probing = self.probe_pending(provider, record, seq, operation, payload)?;
                if !self.probe_only
                    && let Probing::Unknown { reason, ends_by } = probing
                {
                    // No probe decided: the person, where the tool opts in.
                    let pending = asking_person::Pending {
                        record,
                        seq,
                        provider_name,
                        operation,
                        payload,
                    };
                    probing = match self.ask_person_pending(provider, &pending, reason, ends_by)? {
                        Ok(probing) => probing,
                        Err(stopped) => return Ok(Err(stopped)),
                    };
                }
                match probing {
                    Probing::Answered(_) if self.probe_only => {
                        let reason = "its probe found it performed (journaled): the call's next retry goes on from it";
                        return Ok(Err(self.swept(seq, provider_name, reason.into())));
                    }
                    Probing::Resend if self.probe_only => {
                        let reason = "its probe found it not performed (journaled): the call's next retry sends it again under its key";
                        return Ok(Err(self.swept(seq, provider_name, reason.into())));
                    }
                    Probing::Unknown { reason, .. } if self.probe_only => {
                        let reason = format!("still unknown: {reason}");
                        return Ok(Err(self.swept(seq, provider_name, reason)));
                    }
                    Probing::Answered(answer) => return Ok(answer),
                    Probing::Resend => {}
                    Probing::Unknown { reason, ends_by } => {
                        return Ok(Err(self.unknown(seq, provider_name, reason, ends_by)));
                    }
                }
            }
        }

        // 5. Keyed or unkeyed: claim, perform, retry under the same key.
        self.keyed_or_unkeyed(provider, (class, resumes), &new, payload)
    }

    /// Whether the effect asked for now, which its provider calls a read, is the one
    /// the journal holds at the next position: a resumed run whose earlier run
    /// journaled it (while its provider did not call it a read) goes on from that
    /// record, never re-sends it as a read with no key. A read takes no position, so
    /// another effect at that position (another fingerprint) leaves it a read.
    fn journaled_at_next(
        &self,
        provider_name: &str,
        operation: &str,
        payload: &Value,
    ) -> Result<bool, Error> {
        if !self.resumed || mutants::on(Mutant::ReadOnlyFromCatalog) {
            return Ok(false);
        }
        let Ok(fingerprint) = keys::effect_fingerprint(provider_name, operation, payload) else {
            return Ok(false);
        };
        Ok(self
            .shared
            .journal
            .effect(&self.invocation, self.next_seq)?
            .is_some_and(|record| record.fingerprint == fingerprint))
    }

    /// The class of the effect at hand: the one its record holds, decided when it
    /// was first claimed, or for a new effect the one its provider says now. A
    /// provider that now says otherwise (an upstream tool's annotations changed, a
    /// configuration was edited) is logged and noted in the journal (shown by
    /// `justonce journal` and the console), and the record wins.
    fn class_of(
        &self,
        (seq, existing): (u32, Option<&crate::journal::EffectRecord>),
        provider: &dyn Provider,
        provider_name: &str,
        operation: &str,
        payload: &Value,
    ) -> Result<ProviderClass, Error> {
        let now = provider.class_of(operation, payload);
        let (Some(record), Some(recorded)) = (existing, existing.and_then(|record| record.class))
        else {
            return Ok(now);
        };
        // What the catalog says now, a read included, when it is not the record's.
        let says = match provider.unjournaled_read(operation, payload) {
            true => "read",
            false => now.as_str(),
        };
        let differs = (says != recorded.as_str()).then_some(says);
        if record.catalog_class.as_deref() != differs {
            self.shared
                .journal
                .note_catalog(&self.invocation, seq, differs)?;
        }
        if recorded != now {
            tracing::warn!(
                tool = %self.tool,
                key = %self.invocation,
                provider = provider_name,
                operation,
                recorded = recorded.as_str(),
                configured = now.as_str(),
                "the effect's record says it is {}, its provider says {} now; the record wins",
                recorded.as_str(),
                now.as_str()
            );
            if mutants::on(Mutant::ClassFromCatalog) {
                return Ok(now);
            }
        }
        Ok(recorded)
    }

    /// The guest asked at `seq` for another effect than the journal's `record`: a
    /// divergence, which stops the run's effects and leaves the call to a person.
    fn diverged(
        &mut self,
        record: &crate::journal::EffectRecord,
        seq: u32,
        provider_name: &str,
        operation: &str,
    ) -> EffectFailure {
        let detail = format!(
            "the journal holds {}.{} at this position, the guest asked for {provider_name}.{operation} with another payload",
            record.provider, record.operation
        );
        tracing::warn!(
            tool = %self.tool,
            key = %self.invocation,
            seq,
            "divergence: {detail}; nothing is performed under the old key, the call stays open for a person"
        );
        self.interrupted = Some(Interruption::Divergence {
            seq,
            detail: detail.clone(),
        });
        EffectFailure::Divergence(detail)
    }

    /// After the guest finished: the first position and number of journaled effects
    /// this run never asked for, if any (a resumed guest that stopped short).
    pub(crate) fn skipped_journaled_effects(&self) -> Result<Option<(u32, u32)>, Error> {
        if !self.resumed {
            return Ok(None);
        }
        // An upstream's questions follow its call: one resent under its key that its
        // upstream answered without asking them again (it deduplicates the key)
        // skipped none of the tool's effects.
        let mut from = self.next_seq;
        while let Some(record) = self.shared.journal.effect(&self.invocation, from)?
            && record.provider == ask::PROVIDER
            && record.operation == ask::UPSTREAM_OPERATION
        {
            from += 1;
        }
        let journaled = self.shared.journal.effects_from(&self.invocation, from)?;
        Ok((journaled > 0).then_some((from, journaled)))
    }

    /// The one retry loop: makes attempts, pausing before each under the retry policy
    /// (honouring the downstream's `Retry-After`), until one is definitive or `budget`
    /// attempts were made. `Err((reason, made))` when the budget ran out.
    fn retrying<T>(
        &mut self,
        budget: u32,
        mut attempt: impl FnMut(&mut Self, u32) -> Result<Attempt<T>, Error>,
    ) -> Result<Result<T, (String, u32)>, Error> {
        let shared = Arc::clone(&self.shared);
        let mut retry_after = None;
        let mut made = 0;
        let mut last_reason = None;
        loop {
            made += 1;
            let pause = shared.retry.pause_before(made, retry_after);
            // The effect's retries live inside the call's wall-clock cap.
            if let Some(reason) = last_reason.take()
                && shared
                    .clock
                    .now_ms()
                    .saturating_add(crate::clock::millis(pause))
                    >= self.ends_at_ms
            {
                let reason = format!(
                    "{reason}; the call's wall-clock cap of {} ms leaves no time for another attempt",
                    self.wall_clock.as_millis()
                );
                return Ok(Err((reason, made - 1)));
            }
            if !pause.is_zero() {
                shared.clock.sleep(pause);
            }
            match attempt(self, made)? {
                Attempt::Done(done) => return Ok(Ok(done)),
                Attempt::Unknown {
                    reason,
                    retry_after: hint,
                } => {
                    if made >= budget {
                        return Ok(Err((reason, made)));
                    }
                    retry_after = hint;
                    last_reason = Some(reason);
                }
            }
        }
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
    ) -> Result<Result<String, EffectFailure>, Error> {
        let budget = self.shared.retry.max_attempts;
        let read = self.retrying(budget, |session, made| {
            let (tool, invocation, seq) = (
                session.tool.clone(),
                session.invocation.clone(),
                session.next_seq,
            );
            let client = CallsClient::new(session, seq, None);
            let request = ReadRequest {
                tool: &tool,
                invocation: &invocation,
                seq,
                attempt: made,
                operation,
                payload,
                client: Some(&client),
            };
            let read = provider.read(&request);
            let session = client.finish();
            session.next_seq = seq;
            // Its upstream asked the client, which answers with a later request: the
            // read's answer is not the call's; it is sent again with that answer.
            if let Some(Interruption::AwaitingInput { .. }) = session.interrupted {
                return Ok(Attempt::Done(Err(EffectFailure::Stopped(
                    "the call stopped to wait for its client's answer".into(),
                ))));
            }
            Ok(match read {
                Ok(response) => Attempt::Done(Ok(response.to_string())),
                Err(ProviderError::Rejected(answer)) => {
                    Attempt::Done(Err(EffectFailure::Rejected(answer.to_string())))
                }
                Err(ProviderError::Invalid(reason)) => Attempt::Done(Err(EffectFailure::Denied(
                    format!("{provider_name} refused the request: {reason}"),
                ))),
                Err(ProviderError::NotPerformed {
                    reason,
                    retry: true,
                }) => Attempt::Unknown {
                    reason,
                    retry_after: None,
                },
                Err(ProviderError::NotPerformed {
                    reason,
                    retry: false,
                }) => Attempt::Done(Err(session.not_performed(
                    session.next_seq,
                    provider_name,
                    reason,
                ))),
                Err(ProviderError::Unknown(reason)) => Attempt::Unknown {
                    reason,
                    retry_after: None,
                },
                Err(
                    ProviderError::Throttled {
                        reason,
                        retry_after,
                    }
                    | ProviderError::Conflict {
                        reason,
                        retry_after,
                    },
                ) => Attempt::Unknown {
                    reason,
                    retry_after,
                },
            })
        })?;
        Ok(match read {
            Ok(answer) => answer,
            Err((reason, made)) => {
                // A read has no position of its own: name the effect it came before.
                let reason = format!(
                    "a read (not journaled, before effect #{}) failed {made} time(s): {reason}",
                    self.next_seq
                );
                Err(self.unknown(self.next_seq, provider_name, reason, EndsBy::Retry))
            }
        })
    }

    /// A keyed or unkeyed effect: claimed before every attempt (the key read back from
    /// the journal, never recomputed, and only while this run holds the lease),
    /// performed, and retried under the same key while its outcome is unknown; an
    /// unkeyed one is attempted once.
    fn keyed_or_unkeyed(
        &mut self,
        provider: &dyn Provider,
        (class, resumes): (ProviderClass, bool),
        new: &NewEffect<'_>,
        payload: &Value,
    ) -> Result<Result<String, EffectFailure>, Error> {
        let budget = if class == ProviderClass::Unkeyed && !mutants::on(Mutant::RetryUnkeyed) {
            1
        } else {
            self.shared.retry.max_attempts
        };
        let mut last_not_performed = false;
        let counters = self.shared.metrics.effect(
            new.provider,
            &crate::metrics::service_of(new.provider, payload),
            &self.tool,
        );
        // The previous attempt's result, and what it got, when this run made it.
        let mut previous = None;
        let mut previous_reason = String::new();
        let performed = self.retrying(budget, |session, _made| {
            let span = spans::attempt(&session.invocation).entered();
            if session.handed_over() {
                spans::attempt_ended(&span, "refused");
                return Ok(Attempt::Done(Err(lease_lost())));
            }
            let now = session.shared.clock.now_ms();
            let lease = session.lease();
            let leased_until = lease.until;
            let claimed = session.shared.journal.claim_attempt(
                &NewEffect { now, ..*new },
                &lease,
                session.unjournaled.as_ref(),
                &session.deferred,
            )?;
            // Saved with the claim, refused or not.
            session.deferred.clear();
            let (key, attempt) = match claimed {
                Ok(claimed) => claimed,
                Err(refusal) => {
                    spans::attempt_ended(&span, "refused");
                    counters.attempt_ended("refused");
                    return Ok(Attempt::Done(Err(session.refused(
                        refusal,
                        new.seq,
                        new.provider,
                    ))));
                }
            };
            session.unjournaled = None;
            last_not_performed = false;
            let key = if mutants::on(Mutant::FreshEffectKey) {
                let generation = session.entropy.seed.generation();
                keys::effect_key(
                    &session.invocation,
                    generation + u64::from(attempt),
                    new.seq,
                )
            } else {
                key
            };
            spans::attempt_claimed(&span, &key, attempt);
            session.attempts += 1;
            if attempt > 1 {
                counters.retried(previous.unwrap_or("earlier_run"));
                let after = previous.unwrap_or("earlier_run");
                tracing::warn!(
                    tool = %session.tool,
                    key = %session.invocation,
                    effect = %key,
                    seq = new.seq,
                    provider = new.provider,
                    attempt,
                    after,
                    "retrying effect #{} under the same key (attempt {attempt}) after {}",
                    new.seq,
                    match previous {
                        Some(_) => format!("the last attempt got: {previous_reason}"),
                        None => "an earlier run's attempt (resumed or taken over)".to_owned(),
                    }
                );
                crate::runtime::log_listener::host_says(&session.tool, || {
                    format!(
                        "retrying effect #{} ({}) under the same key, attempt {attempt}",
                        new.seq, new.provider
                    )
                });
            }
            fault::point(FaultPoint::BeforeEffect);
            if !session.still_holds_lease(leased_until)? {
                spans::attempt_ended(&span, "refused");
                counters.attempt_ended("refused");
                return Ok(Attempt::Done(Err(session.refused(
                    Refusal::LeaseLost,
                    new.seq,
                    new.provider,
                ))));
            }
            let (tool, invocation, principal) = (
                session.tool.clone(),
                session.invocation.clone(),
                session.principal.clone(),
            );
            let heartbeats = Arc::clone(&session.heartbeats);
            let beat = heartbeats.beat(&invocation, &session.owner);
            // What the downstream asks of the call's client meanwhile (an upstream's
            // questions, sampling, roots) is answered through the session.
            let client = CallsClient::new(session, new.seq, Some(key.clone()))
                .resuming(resumes && previous.is_none());
            let request = EffectRequest {
                tool: &tool,
                principal: principal.as_deref(),
                key: &key,
                invocation: &invocation,
                seq: new.seq,
                attempt,
                operation: new.operation,
                payload,
                client: Some(&client),
            };
            let answer = provider.perform(&request);
            let session = client.finish();
            drop(beat);
            // The call stopped for the person's answer to what the downstream asked:
            // the effect stays pending (its request waits upstream), nothing saved.
            if let Some(Interruption::AwaitingInput { .. }) = session.interrupted {
                spans::attempt_ended(&span, "awaiting_input");
                return Ok(Attempt::Done(Err(EffectFailure::Stopped(
                    "the call stopped to wait for the user's answers".into(),
                ))));
            }
            fault::point(FaultPoint::AfterProvider);
            spans::attempt_ended(&span, attempt_result(&answer));
            counters.attempt_ended(attempt_result(&answer));
            previous = Some(attempt_result(&answer));
            previous_reason = match &answer {
                Ok(_) => String::new(),
                Err(e) => e.to_string(),
            };
            let answer = match answer {
                Ok(response) => Answer::Ok(response),
                Err(ProviderError::Rejected(answer)) => Answer::Rejected(answer),
                // Refused before doing anything: the record is finished as a refusal
                // so a retry does not ask again and the journal says what happened.
                Err(ProviderError::Invalid(reason)) => {
                    Answer::Denied(format!("{} refused the request: {reason}", new.provider))
                }
                Err(ProviderError::NotPerformed { reason, retry }) => {
                    session.mark_not_performed(&key, &reason)?;
                    if retry {
                        last_not_performed = true;
                        return Ok(Attempt::Unknown {
                            reason,
                            retry_after: None,
                        });
                    }
                    return Ok(Attempt::Done(Err(session.not_performed(
                        new.seq,
                        new.provider,
                        reason,
                    ))));
                }
                Err(ProviderError::Unknown(reason)) => {
                    session.note_unknown(&key, &reason)?;
                    return Ok(Attempt::Unknown {
                        reason,
                        retry_after: None,
                    });
                }
                Err(
                    ProviderError::Throttled {
                        reason,
                        retry_after,
                    }
                    | ProviderError::Conflict {
                        reason,
                        retry_after,
                    },
                ) => {
                    session.note_unknown(&key, &reason)?;
                    return Ok(Attempt::Unknown {
                        reason,
                        retry_after,
                    });
                }
            };
            Ok(Attempt::Done(session.save_answer(&key, answer, class)?))
        })?;
        Ok(match performed {
            Ok(answer) => answer,
            Err((reason, made)) if last_not_performed => {
                let reason = format!(
                    "{reason} (after {made} attempt{}; nothing was sent)",
                    if made == 1 { "" } else { "s" }
                );
                Err(self.not_performed(new.seq, new.provider, reason))
            }
            Err((reason, made)) => {
                // The agent reads this: it names the call, never the effect key
                // (`journal` shows it to operators).
                let mut reason = format!(
                    "{reason} (after {made} attempt{} under one key)",
                    if made == 1 { "" } else { "s" }
                );
                let ends_by = if class == ProviderClass::Unkeyed {
                    reason.push_str("; this unkeyed effect is not sent again");
                    self.unkeyed_ends_by(provider, new.operation, payload)
                } else {
                    EndsBy::Retry
                };
                Err(self.unknown(new.seq, new.provider, reason, ends_by))
            }
        })
    }

    /// Saves an effect's definitive answer and hands the guest the one the journal
    /// holds: its own, or the first recorded when another hand answered the effect
    /// meanwhile (what every resumed run will replay, so the tool sees one answer).
    /// A run that lost its lease still saves it (the journal keeps the first answer:
    /// it only moves from pending to done), so the run that took over finds the true
    /// outcome; the fenced run is told it lost the lease and performs nothing more.
    ///
    /// A keyed effect's answer is saved with the run's next commit instead (see
    /// [`DeferredAnswer`]): until then the effect is pending, and a run that resumes
    /// it asks the downstream again under the same key, which answers with the same
    /// meaning but not always the same bytes (a `Date`, Stripe's
    /// `Idempotent-Replayed`). A lost lease then shows at that commit: the next claim
    /// is refused, or the outcome is not saved, and the answer is not saved either.
    /// Only the lease holder saves a deferred answer, so the answer on record is the
    /// one handed to the tool whose outcome is saved (DESIGN.md, "What the tool saw
    /// is what the journal holds"): a run that paused past its lease cannot land its
    /// answer over the one the run that took over handed its own tool.
    fn save_answer(
        &mut self,
        key: &EffectKey,
        answer: Answer,
        class: ProviderClass,
    ) -> Result<Result<String, EffectFailure>, Error> {
        let now = self.shared.clock.now_ms();
        if class == ProviderClass::Keyed {
            self.deferred.push(DeferredAnswer {
                key: key.clone(),
                answer: answer.clone(),
                at: now,
            });
            return Ok(answer_to_guest(answer));
        }
        if self.handed_over() {
            return Ok(Err(lease_lost()));
        }
        let lease = self.lease();
        let Some(recorded) =
            self.shared
                .journal
                .finish_effect(key, &answer, &lease, &self.invocation, now)?
        else {
            self.interrupted = Some(Interruption::LeaseLost);
            return Ok(Err(lease_lost()));
        };
        Ok(answer_to_guest(recorded))
    }

    /// Saves the deferred answers of keyed effects now, in a commit of their own:
    /// before a write that does not carry them. Fenced like every deferred save: a
    /// run that lost its lease saves none of them (the write that follows is refused
    /// the same way). `false` when the run no longer holds its lease (nothing saved,
    /// the run is interrupted); the saved answers are durable as the journal
    /// promises before it returns, so what follows may leave the host.
    fn save_deferred(&mut self) -> Result<bool, Error> {
        if self.handed_over() {
            return Ok(false);
        }
        if self.deferred.is_empty() {
            return Ok(true);
        }
        let deferred = std::mem::take(&mut self.deferred);
        let lease = self.lease();
        let held = self
            .shared
            .journal
            .save_deferred(&self.invocation, &lease, &deferred)?;
        if !held {
            self.interrupted = Some(Interruption::LeaseLost);
        }
        Ok(held)
    }

    /// Records an attempt known not performed, fenced by the run's lease.
    fn mark_not_performed(&mut self, key: &EffectKey, reason: &str) -> Result<(), Error> {
        if self.handed_over() {
            return Ok(());
        }
        let now = self.shared.clock.now_ms();
        let lease = self.lease();
        self.shared
            .journal
            .not_performed(key, reason, &lease, &self.invocation, now)?;
        Ok(())
    }

    /// Records an attempt whose outcome is unknown, fenced by the run's lease.
    fn note_unknown(&mut self, key: &EffectKey, reason: &str) -> Result<(), Error> {
        if self.handed_over() {
            return Ok(());
        }
        let now = self.shared.clock.now_ms();
        let lease = self.lease();
        self.shared
            .journal
            .note_attempt_error(key, reason, &lease, &self.invocation, now)?;
        Ok(())
    }

    /// A transactional effect: claimed and performed in the journal's transaction.
    fn transactional(
        &mut self,
        provider: &dyn Provider,
        new: &NewEffect<'_>,
        operation: &str,
        payload: &Value,
    ) -> Result<Result<String, EffectFailure>, Error> {
        self.save_deferred()?;
        if self.handed_over() {
            return Ok(Err(lease_lost()));
        }
        let request = TransactionalRequest {
            tool: &self.tool,
            principal: self.principal.as_deref(),
            operation,
            payload,
        };
        // One attempt, in the journal's transaction: its key is the one computed here.
        let span = spans::attempt(&self.invocation).entered();
        spans::attempt_claimed(&span, new.key, 1);
        self.attempts += 1;
        let performed = self.shared.journal.perform_transactional(
            new,
            &self.lease(),
            self.unjournaled.as_ref(),
            provider,
            &request,
        )?;
        let counters = self.shared.metrics.effect(
            new.provider,
            &crate::metrics::service_of(new.provider, payload),
            &self.tool,
        );
        Ok(match performed {
            Ok(answer) => {
                spans::attempt_ended(&span, answer_kind(&answer));
                counters.attempt_ended(answer_kind(&answer));
                self.unjournaled = None;
                answer_to_guest(answer)
            }
            Err(refusal) => {
                spans::attempt_ended(&span, "refused");
                counters.attempt_ended("refused");
                Err(self.refused(refusal, new.seq, new.provider))
            }
        })
    }

    fn unknown(
        &mut self,
        seq: u32,
        provider: &str,
        reason: String,
        ends_by: EndsBy,
    ) -> EffectFailure {
        tracing::warn!(
            tool = %self.tool,
            key = %self.invocation,
            seq,
            provider,
            ends_by = ends_by.as_str(),
            "outcome unknown: effect #{seq} ({provider}): {reason}; the call stays open and the same call retried resumes it{}",
            if ends_by.retry_helps() { "" } else { " once a person resolves it (`justonce journal --unresolved`)" }
        );
        self.interrupted = Some(Interruption::OutcomeUnknown {
            seq,
            provider: provider.to_string(),
            reason: reason.clone(),
            ends_by,
        });
        let then = if ends_by.retry_helps() {
            "retrying the same tool call is safe"
        } else {
            "only a person can resolve it; retrying the same tool call changes nothing until then"
        };
        EffectFailure::OutcomeUnknown(format!("{reason}; {then}"))
    }

    /// Where a sweep's run stops: the call stays open (nothing of this run is saved
    /// as its outcome), and its next retry goes on.
    fn swept(&mut self, seq: u32, provider: &str, reason: String) -> EffectFailure {
        tracing::debug!(tool = %self.tool, key = %self.invocation, seq, provider, "a sweep's run stops at effect #{seq}: {reason}");
        self.interrupted = Some(Interruption::OutcomeUnknown {
            seq,
            provider: provider.to_string(),
            reason: reason.clone(),
            ends_by: EndsBy::Retry,
        });
        EffectFailure::OutcomeUnknown(reason)
    }

    fn not_performed(&mut self, seq: u32, provider: &str, reason: String) -> EffectFailure {
        self.interrupted = Some(Interruption::NotPerformed {
            seq,
            provider: provider.to_string(),
            reason: reason.clone(),
        });
        EffectFailure::Denied(format!(
            "not performed: {reason}; retrying the same tool call is safe"
        ))
    }

    fn refused(&mut self, refusal: Refusal, seq: u32, provider: &str) -> EffectFailure {
        match refusal {
            Refusal::LeaseLost => {
                self.interrupted = Some(Interruption::LeaseLost);
                lease_lost()
            }
            Refusal::NotPerformed(reason) => self.not_performed(seq, provider, reason),
            // Journaled by any host: the refusal is this position's answer, as the
            // one this host's memory gives (`refused_by_a_cancel`).
            Refusal::Cancelled => cancelled(),
            Refusal::Superseded => {
                self.interrupted = Some(Interruption::Superseded);
                EffectFailure::Denied(
                    "another run of this call started meanwhile; this run performed nothing and gives way to it"
                        .into(),
                )
            }
        }
    }

    /// Whether this run may still call a provider under the lease its last write
    /// extended to `until`: by the clock now, or else after a renewal, which is
    /// fenced (`false` once another run took the call over). The write may return
    /// after that lease ran out, as it waits for its commit (behind other callers'
    /// writes, the write lock, an fsync): a run that went on regardless would send
    /// beside the run that took over.
    fn still_holds_lease(&self, mut until: i64) -> Result<bool, Error> {
        if self.shared.runs.handed_over() {
            return Ok(false);
        }
        for _ in 0..LEASE_CHECKS {
            if self.shared.clock.now_ms() < until {
                return Ok(true);
            }
            let lease = self.lease();
            if !self.shared.journal.renew(&self.invocation, &lease)? {
                return Ok(false);
            }
            until = lease.until;
        }
        // The clock outruns every renewal: give up the attempt as a lost lease.
        Ok(false)
    }

    /// Whether this host handed its runs over (see `handover.rs`): the run then
    /// writes nothing more to the journal and ends as after a lost lease.
    pub(crate) fn handed_over(&mut self) -> bool {
        if !self.shared.runs.handed_over() {
            return false;
        }
        self.interrupted = Some(Interruption::LeaseLost);
        true
    }

    /// How long this run's lease lasts from each write that renews it (ms).
    pub(crate) fn lease_ms(&self) -> i64 {
        self.lease_ms
    }

    /// The lease this run must still hold, extended from now.
    pub(crate) fn lease(&self) -> Lease<'_> {
        Lease {
            owner: &self.owner,
            until: self.shared.clock.now_ms().saturating_add(self.lease_ms),
            ms: self.lease_ms,
        }
    }
}

impl EffectSession {
    /// What can end an unknown outcome of an unkeyed effect: its probe, where its
    /// provider has one for it or its tool exports `reconcile`; else the person
    /// behind the agent, asked at the retry, where the tool opts in; else only a
    /// person resolving it.
    fn unkeyed_ends_by(&self, provider: &dyn Provider, operation: &str, payload: &Value) -> EndsBy {
        if self.probe_name(provider, operation, payload).is_some() {
            EndsBy::Probe
        } else if self.person_question(provider, operation, payload).is_some() {
            EndsBy::AskPerson
        } else {
            EndsBy::Person
        }
    }

    /// The probe a retry asks about an unkeyed effect whose outcome is unknown: its
    /// provider's (`ledger.recorded`, `http SERVICE status`), else its tool's own
    /// (`TOOL.reconcile`).
    fn probe_name(
        &self,
        provider: &dyn Provider,
        operation: &str,
        payload: &Value,
    ) -> Option<String> {
        provider.probe_of(operation, payload).or_else(|| {
            self.tool_probe
                .as_ref()
                .map(|_| format!("{}.reconcile", self.tool))
        })
    }

    /// [`Self::unkeyed_ends_by`] as the journal keeps it at the claim
    /// ([`NewEffect::ends_by`]): `probe NAME`, `ask_person` or `person`.
    fn unkeyed_ends_by_journaled(
        &self,
        provider: &dyn Provider,
        operation: &str,
        payload: &Value,
    ) -> String {
        match self.probe_name(provider, operation, payload) {
            Some(probe) => format!("probe {probe}"),
            None => self
                .unkeyed_ends_by(provider, operation, payload)
                .as_str()
                .to_owned(),
        }
    }
}

/// What a guest is told of an effect it asks for after its run was interrupted.
fn after_interruption() -> EffectFailure {
    EffectFailure::Denied(
        "an earlier effect of this call is unresolved; no further effects are performed".into(),
    )
}

/// What a guest is told of a new effect its cancelled call asks for.
fn cancelled() -> EffectFailure {
    EffectFailure::Denied(
        "the call was cancelled by its client (tasks/cancel): no further effects are performed"
            .into(),
    )
}

impl EffectSession {
    /// Whether this run's new effects are refused: its client cancelled this
    /// generation of the call on this host (a cancel of another generation of the
    /// same key refuses nothing). A cancel another host took is read from the
    /// journal by the claim itself ([`Refusal::Cancelled`]).
    fn refused_by_a_cancel(&self) -> bool {
        let generation = self.entropy.seed.generation();
        self.shared
            .tasks
            .refuses_effects(self.invocation.as_str(), generation)
    }
}

/// What the guest of a run that lost its lease is told.
fn lease_lost() -> EffectFailure {
    EffectFailure::Denied(
        "another host took this call over (this run's lease expired); nothing more is performed"
            .into(),
    )
}

/// An effect's (or an ask's) result as its metrics name it.
fn effect_result<T>(answer: &Result<Result<T, EffectFailure>, Error>) -> &'static str {
    match answer {
        Ok(Ok(_)) => "ok",
        Ok(Err(failure)) => failure.kind(),
        Err(_) => "host_failed",
    }
}

/// An attempt's result as its span names it.
fn attempt_result(answer: &Result<Value, ProviderError>) -> &'static str {
    match answer {
        Ok(_) => "ok",
        Err(ProviderError::Rejected(_)) => "rejected",
        Err(ProviderError::Invalid(_)) => "denied",
        Err(ProviderError::NotPerformed { .. }) => "not_performed",
        Err(ProviderError::Unknown(_)) => "unknown",
        Err(ProviderError::Throttled { .. }) => "throttled",
        Err(ProviderError::Conflict { .. }) => "conflict",
    }
}

/// A definitive answer's kind as an attempt's span names it.
fn answer_kind(answer: &Answer) -> &'static str {
    match answer {
        Answer::Ok(_) => "ok",
        Answer::Rejected(_) => "rejected",
        Answer::Denied(_) => "denied",
    }
}

/// What the guest is told of a definitive answer.
fn answer_to_guest(answer: Answer) -> Result<String, EffectFailure> {
    match answer {
        Answer::Ok(response) => Ok(response.to_string()),
        Answer::Rejected(answer) => Err(EffectFailure::Rejected(answer.to_string())),
        Answer::Denied(message) => Err(EffectFailure::Denied(message)),
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
