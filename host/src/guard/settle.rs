//! After the guest: save the outcome before the caller is answered, or leave the
//! invocation resumable when there is nothing savable.
//!
//! In order: a host fault, an interruption (unknown outcome, divergence, lost lease,
//! superseded run, a question whose answers come later or cannot come), a resumed guest that skipped journaled effects and a runtime
//! failure around the guest are not outcomes: the call stays resumable and the agent
//! is told what happened. Everything else (a result, a tool error, a trap) is saved
//! first and then returned, so the answer a caller gets is always one a retry can get
//! again.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::Shared;
use super::effect::{EffectSession, Interruption};
use super::prepared::Prepared;
use crate::call::CallResponse;
use crate::error::{Error, Result};
use crate::fault::{self, FaultPoint};
use crate::keys::InvocationKey;
use crate::mutants::{self, Mutant};
use crate::outcome::Outcome;
use crate::runtime::{GuestOutcome, GuestToolError, Limits, TrapReason};

/// Settles one run. `None` when the run gave way to another run of the same key.
pub(super) fn settle(
    shared: &Arc<Shared>,
    prepared: &Prepared,
    owner: &str,
    guest: GuestOutcome,
    mut session: EffectSession,
) -> Result<Option<CallResponse>> {
    let key = &prepared.key;
    if shared.runs.handed_over() {
        // The host handed the call over (see `handover.rs`): another host's run is
        // the one that counts, and this one writes nothing more.
        return Err(Error::LeaseLost { key: key.clone() });
    }
    let journal = &shared.journal;
    let now = shared.clock.now_ms();
    // A run that never journaled its invocation (or of a read-only tool, which
    // journals nothing) has no record to leave resumable.
    let read_only = session.read_only;
    let journaled = session.unjournaled.is_none() && !read_only;
    // Keyed effects' answers the run has not written yet: saved with whatever this
    // run commits last.
    let deferred = std::mem::take(&mut session.deferred);
    let lease_ms = session.lease_ms();
    // Leaves the call resumable; `false` when another host took it over meanwhile.
    // When the journal fails (its connection cut by a failover), the lease is
    // released once it answers again, not left to expire.
    let suspend = || -> Result<bool> {
        if !journaled {
            return Ok(true);
        }
        journal
            .suspend(key, owner, now, &deferred)
            .inspect_err(|e| {
                release_when_back(shared, key, owner, now.saturating_add(lease_ms), e);
            })
    };

    if let Some(fault) = session.host_fault.take() {
        let _ = suspend();
        return Err(fault);
    }
    if let Some(interruption) = session.interrupted.take() {
        if interruption == Interruption::Superseded {
            return Ok(None);
        }
        if !suspend()? {
            // What this run learnt is in the journal; the other host's outcome is the
            // one that counts.
            return Err(Error::LeaseLost { key: key.clone() });
        }
        return Err(match interruption {
            Interruption::OutcomeUnknown {
                seq,
                provider,
                reason,
                ends_by,
            } => Error::OutcomeUnknown {
                key: key.clone(),
                seq,
                provider,
                reason,
                ends_by,
            },
            Interruption::NotPerformed {
                seq,
                provider,
                reason,
            } => Error::NotPerformed {
                key: key.clone(),
                seq,
                provider,
                reason,
            },
            Interruption::Divergence { seq, detail } => Error::Divergence {
                key: key.clone(),
                seq,
                detail,
            },
            Interruption::AwaitingInput {
                seq,
                questions,
                requests,
                state,
            } => Error::InputRequired {
                key: key.clone(),
                seq,
                questions,
                requests,
                state,
            },
            Interruption::InputUnavailable(reason) => Error::InputUnavailable {
                tool: prepared.tool.name.to_string(),
                reason,
            },
            Interruption::InputStateInvalid(why) => Error::InputStateInvalid(why),
            Interruption::LeaseLost | Interruption::Superseded => {
                Error::LeaseLost { key: key.clone() }
            }
        });
    }
    let skipped = match session.skipped_journaled_effects() {
        Ok(skipped) => skipped,
        Err(fault) => {
            let _ = suspend();
            return Err(fault);
        }
    };
    if let Some((seq, journaled)) = skipped {
        // The resumed guest finished without asking for effects an earlier run
        // journaled (and may have performed): its outcome would not match them.
        if !suspend()? {
            return Err(Error::LeaseLost { key: key.clone() });
        }
        return Err(Error::Divergence {
            key: key.clone(),
            seq,
            detail: format!(
                "the journal holds {journaled} effect(s) from position #{seq} on, but the guest finished without asking for them"
            ),
        });
    }
    if let GuestOutcome::Busy { waited } = guest {
        // Nothing ran: nothing to save, and the same call may be retried.
        let _ = suspend();
        return Err(Error::Busy {
            key: key.clone(),
            waited,
        });
    }
    if let GuestOutcome::Trapped {
        reason: TrapReason::HostFailure,
        message,
    } = &guest
    {
        // Not the guest's doing (the runtime failed around it): nothing to save; the
        // call stays resumable and a retry runs it again.
        let _ = suspend();
        return Err(Error::Host(anyhow::anyhow!("{message}")));
    }

    let (stored, answer) = savable(outcome_of(guest, &prepared.tool.limits));
    fault::point(FaultPoint::AfterRecord);
    // Saved first, then answered.
    let saved = match session.unjournaled.take() {
        _ if mutants::on(Mutant::AnswerBeforeSave) => Ok(true),
        // Nothing to deduplicate: a read-only call's outcome is not saved.
        _ if read_only => Ok(true),
        // No effect: the record is written once, complete.
        Some(record) => journal.complete_new(&record, &stored, now),
        None => journal.complete(key, owner, &stored, now, &deferred),
    };
    match saved {
        Ok(true) => {}
        // Another run journaled the key meanwhile and wins; this caller looks again.
        Ok(false) if !journaled => return Ok(None),
        Ok(false) if mutants::on(Mutant::UnfencedAnswer) => {}
        Ok(false) => return Err(Error::LeaseLost { key: key.clone() }),
        Err(e) => {
            // Release the lease so duplicates need not wait for it to expire.
            let _ = suspend();
            return Err(e);
        }
    }
    fault::point(FaultPoint::AfterOutcome);
    // A cancel of the call has nothing left to refuse.
    shared
        .tasks
        .completed(key.as_str(), session.entropy.seed.generation());
    Ok(Some(CallResponse {
        key: key.clone(),
        replayed: false,
        outcome: answer,
    }))
}

/// How long a run that could not release its lease waits before it tries again, at
/// first and at most.
const RELEASE_RETRY: (Duration, Duration) = (Duration::from_millis(50), Duration::from_secs(1));

/// A run that failed on its own host (its journal failed: a connection cut by a
/// failover, a database restarting) could not leave its call resumable as it ended,
/// so its lease would hold every retry off until it expires, and the host that takes
/// it over then would read it as a host that stopped. Instead, a thread tries the
/// release again, backing off, until the journal answers (the call is then
/// resumable at once, and resumed as a suspended call, not taken over), the run
/// turns out to have lost the lease, or the lease ran out anyway (`lease_ends`: it
/// was renewed at most a lease's length before the run ended).
fn release_when_back(
    shared: &Arc<Shared>,
    key: &InvocationKey,
    owner: &str,
    lease_ends: i64,
    error: &Error,
) {
    tracing::warn!(
        key = %key,
        "cannot release the lease of call {key} as its run ends: {error}; trying again until the journal answers"
    );
    let shown = key.clone();
    let (shared, key, owner) = (Arc::clone(shared), key.clone(), owner.to_owned());
    // On the host's clock, and in real time too (a test's clock may stand still).
    let give_up = std::time::Instant::now()
        + Duration::from_millis(u64::try_from(lease_ends - shared.clock.now_ms()).unwrap_or(0));
    let spawned = std::thread::Builder::new()
        .name("justonce-release".into())
        .spawn(move || {
            let mut wait = RELEASE_RETRY.0;
            loop {
                std::thread::sleep(wait);
                wait = (wait * 2).min(RELEASE_RETRY.1);
                let now = shared.clock.now_ms();
                if now >= lease_ends
                    || std::time::Instant::now() >= give_up
                    || shared.runs.handed_over()
                {
                    return;
                }
                match shared.journal.suspend(&key, &owner, now, &[]) {
                    Ok(true) => {
                        tracing::warn!(key = %key, "released the lease of call {key}: the journal answers again, and a retry resumes the call at once");
                        return;
                    }
                    // Another run took it over, or it ended: nothing to release.
                    Ok(false) => return,
                    Err(_) => {}
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(key = %shown, "cannot start a thread to release the lease of call {shown}: {e}; it ends when it expires");
    }
}

/// A tool error as the outcome: its code, message and details together fit under
/// the result cap, or the tool's own `result_too_large` trap is saved instead.
fn error_outcome(e: GuestToolError, limits: &Limits) -> Outcome {
    let size = e.code.len() + e.message.len() + e.details.as_ref().map_or(0, String::len);
    if let Some(trap) = too_large("error", size, limits) {
        return trap;
    }
    Outcome::ToolError {
        code: e.code,
        message: e.message,
        details: e
            .details
            .map(|d| serde_json::from_str(&d).unwrap_or(Value::String(d))),
    }
}

/// The `result_too_large` trap for a `what` (result, error) of `size` bytes over
/// the cap.
fn too_large(what: &str, size: usize, limits: &Limits) -> Option<Outcome> {
    let limit = limits.max_result_bytes;
    (size > limit).then(|| Outcome::Trap {
        reason: TrapReason::ResultTooLarge.as_str().into(),
        message: format!("the tool's {what} of {size} bytes exceeds the limit of {limit} bytes"),
    })
}

/// How the guest's ending reads as an outcome.
fn outcome_of(guest: GuestOutcome, limits: &Limits) -> Outcome {
    match guest {
        GuestOutcome::Returned(Ok(text), content) => result_outcome(&text, content, limits),
        // The parts of a failed call are dropped (see `content.add` in the WIT).
        GuestOutcome::Returned(Err(e), _) => error_outcome(e, limits),
        GuestOutcome::Trapped { reason, message } => Outcome::Trap {
            reason: reason.as_str().to_string(),
            message,
        },
        GuestOutcome::Busy { .. } => unreachable!("a busy call ran nothing and is not settled"),
    }
}

/// The stored text of `outcome` and the answer a retry will read back from it,
/// parsed from the same text. JSON nested past what the parser reads back (a hostile
/// guest) is saved as a trap instead, or every retry would fail to replay it.
fn savable(outcome: Outcome) -> (String, Outcome) {
    let stored = outcome.to_stored();
    match Outcome::from_stored(&stored) {
        Ok(answer) => (stored, answer),
        Err(e) => {
            let trap = Outcome::Trap {
                reason: TrapReason::InvalidOutput.as_str().into(),
                message: format!("the tool's output cannot be saved and read back: {e}"),
            };
            (trap.to_stored(), trap)
        }
    }
}

/// A returned result: JSON within the size limit (its parts, bounded as they were
/// added, included), or a trap that says why not. A text part that is the result
/// itself (MCP's advice to a tool with `structuredContent`: its JSON as text too) is
/// counted once: one answer, not twice its size.
fn result_outcome(text: &str, content: Option<Vec<Value>>, limits: &Limits) -> Outcome {
    let parsed = serde_json::from_str::<Value>(text);
    let result = parsed.as_ref().ok().filter(|r| !r.is_null());
    let parts = content.as_ref().map_or(0, |parts| {
        parts
            .iter()
            .filter(|part| !result.is_some_and(|result| repeats(part, result)))
            .map(|p| p.to_string().len() + 1)
            .sum()
    });
    if let Some(trap) = too_large("result", text.len() + parts, limits) {
        return trap;
    }
    match parsed {
        Ok(result) => Outcome::Success { result, content },
        Err(e) => Outcome::Trap {
            reason: TrapReason::InvalidOutput.as_str().into(),
            message: format!("the tool returned a result that is not JSON: {e}"),
        },
    }
}

/// Whether `part` is a text part whose text is `result`'s JSON.
fn repeats(part: &Value, result: &Value) -> bool {
    let Some(text) = part.get("text").and_then(Value::as_str) else {
        return false;
    };
    part.get("type").and_then(Value::as_str) == Some("text")
        && text.trim_start().starts_with(['{', '['])
        && serde_json::from_str::<Value>(text).is_ok_and(|text| text == *result)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn capped(bytes: usize) -> Limits {
        Limits {
            max_result_bytes: bytes,
            ..Limits::default()
        }
    }

    #[test]
    fn a_result_repeated_as_text_is_counted_once_against_the_cap() {
        let result = json!({ "text": "x".repeat(600) });
        let text = result.to_string();
        let repeated =
            vec![json!({ "type": "text", "text": serde_json::to_string_pretty(&result).unwrap() })];
        // 600-odd bytes of result, and as much again as text: within 1000 once.
        match result_outcome(&text, Some(repeated.clone()), &capped(1000)) {
            Outcome::Success { result: r, content } => {
                assert_eq!(r, result);
                assert_eq!(content, Some(repeated.clone()), "the text part is kept");
            }
            other => panic!("{other:?}"),
        }
        // The opposite: a text part that says something else counts.
        let other = vec![json!({ "type": "text", "text": "y".repeat(600) })];
        assert!(
            matches!(
                result_outcome(&text, Some(other), &capped(1000)),
                Outcome::Trap { reason, .. } if reason == TrapReason::ResultTooLarge.as_str()
            ),
            "another text counts"
        );
        // And a result over the cap on its own is still over it.
        assert!(matches!(
            result_outcome(&text, Some(repeated), &capped(500)),
            Outcome::Trap { .. }
        ));
    }
}
