//! Step 4's way out (issue 56): an unkeyed effect whose outcome is unknown, found
//! pending by the call's retry, is asked about by its probe, if its provider has one
//! for it (`Provider::probe_of`) or its tool exports `reconcile`, before the run
//! fails closed.
//!
//! The probe is the provider's, or else the tool's own (`reconciling`). It runs
//! once per retry, within its own bounds (the provider's timeout; the tool's probe
//! timeout), while this run holds the call's lease (renewed meanwhile). What it
//! decides is journaled as the effect's resolution with who decided (`probe`), in
//! the audit trail as a `resolve` by `probe NAME`, fenced by the lease, and the call
//! goes on from it: performed, the effect is done with an answer (the provider's
//! probe: one that says so, quoting the probe's answer; the tool's: the response it
//! gave) and the tool gets it; not performed, the effect is sent again under its
//! key. A probe that fails leaves the effect unknown, a retry asks again; one whose
//! answer says neither leaves it to a person. Never a keyed effect: a resend under
//! its key is the cheaper question.

use serde_json::Value;

use super::{EffectSession, answer_to_guest};
use crate::error::{EndsBy, Error};
use crate::journal::{
    Answer, DecidedBy, EffectRecord, ProbeRun, Resolution, performed_without_answer,
};
use crate::provider::{EffectRequest, Probed, Provider};
use crate::runtime::EffectFailure;

/// What a pending unkeyed effect's retry makes of it.
pub(super) enum Probing {
    /// Its probe found it performed (journaled): the tool gets this answer.
    Answered(Result<String, EffectFailure>),
    /// Its probe found it not performed (journaled): it is sent again, under its
    /// key.
    Resend,
    /// Still unknown: why, and what can end it.
    Unknown { reason: String, ends_by: EndsBy },
}

/// Why a pending unkeyed effect fails closed.
const MAY_HAVE_HAPPENED: &str = "an earlier attempt of this unkeyed effect may have taken effect";

impl EffectSession {
    /// Asks the probe of the pending unkeyed effect `record` (at `seq`, of
    /// `operation` with `payload`) whether it happened, and journals what it says.
    /// `Err` is a host fault (the journal failed).
    pub(super) fn probe_pending(
        &mut self,
        provider: &dyn Provider,
        record: &EffectRecord,
        seq: u32,
        operation: &str,
        payload: &Value,
    ) -> Result<Probing, Error> {
        let request = EffectRequest {
            tool: &self.tool,
            principal: self.principal.as_deref(),
            key: &record.key,
            invocation: &self.invocation,
            seq,
            attempt: record.attempts,
            operation,
            payload,
            client: None,
        };
        // The provider's probe (configured by whoever runs the downstream), else the
        // tool's own (`reconcile`): both answer performed, not performed or neither.
        let beat = self.heartbeats.beat(&self.invocation, &self.owner);
        let (probe, probed) = match (provider.probe_of(operation, payload), &self.tool_probe) {
            (Some(probe), _) => {
                let probed = provider.probe(&request).map(|probed| match probed {
                    Probed::Performed(seen) => Probed::Performed(performed_by_probe(&probe, seen)),
                    other => other,
                });
                (probe, probed)
            }
            (None, Some(tool_probe)) => {
                let probe = format!("{}.reconcile", self.tool);
                let probed = self.reconcile(tool_probe.as_ref(), record, seq, payload);
                (probe, probed)
            }
            (None, None) => {
                return Ok(Probing::Unknown {
                    reason: MAY_HAVE_HAPPENED.into(),
                    ends_by: EndsBy::Person,
                });
            }
        };
        drop(beat);
        let (resolution, answer) = match probed {
            Ok(Probed::Performed(answer)) => (Resolution::Performed, answer),
            Ok(Probed::Found(answer)) => (Resolution::Performed, answer),
            Ok(Probed::NotPerformed) => (Resolution::NotPerformed, Value::Null),
            Ok(Probed::Unknown(why)) => {
                return Ok(Probing::Unknown {
                    reason: format!(
                        "{MAY_HAVE_HAPPENED}, and its probe `{probe}` cannot tell: {why}"
                    ),
                    ends_by: EndsBy::Person,
                });
            }
            Err(why) => {
                return Ok(Probing::Unknown {
                    reason: format!("{MAY_HAVE_HAPPENED}, and its probe `{probe}` failed: {why}"),
                    ends_by: EndsBy::Probe,
                });
            }
        };
        // Keyed answers this run holds back go first, as before any write of its own.
        self.save_deferred()?;
        let run = ProbeRun {
            decided_by: DecidedBy::Probe,
            by: &probe,
            owner: &self.owner,
            now: self.shared.clock.now_ms(),
            sweep: self.probe_only,
        };
        match self
            .shared
            .journal
            .resolve_by_probe(record.key.as_str(), resolution, &answer, &run)
        {
            Ok(_) => {}
            Err(Error::CannotResolve { reason, .. }) => {
                return Ok(Probing::Unknown {
                    reason: format!(
                        "{MAY_HAVE_HAPPENED}; its probe `{probe}` said {}, which was not journaled: {reason}",
                        resolution.as_str()
                    ),
                    ends_by: EndsBy::Probe,
                });
            }
            Err(fault) => return Err(fault),
        }
        self.shared.metrics.resolved(DecidedBy::Probe.as_str());
        tracing::info!(
            tool = %self.tool,
            key = %self.invocation,
            seq,
            probe,
            resolution = resolution.as_str(),
            "effect #{seq} resolved by its probe `{probe}` as {}; the call goes on from it",
            resolution.as_str()
        );
        Ok(match resolution {
            Resolution::Performed
                if crate::mutants::on(crate::mutants::Mutant::ProbePerformedResends) =>
            {
                Probing::Resend
            }
            Resolution::Performed => Probing::Answered(answer_to_guest(Answer::Ok(answer))),
            Resolution::NotPerformed => Probing::Resend,
        })
    }
}

/// The answer saved for an effect its probe found performed: what was recorded (who
/// decided, which probe) and the probe's own answer, since the downstream's answer
/// to the effect itself was lost.
fn performed_by_probe(probe: &str, seen: Value) -> Value {
    let mut answer = performed_without_answer(DecidedBy::Probe, probe);
    answer["probe_answer"] = seen;
    answer
}
