//! The sweeper (issue 56): unknown outcomes that a probe can decide are asked about
//! in the background too, not only at the agent's retry.
//!
//! A sweep takes the journal's turn first (`journal_meta` row `sweep`: one host of
//! the journal per interval, on the journal's clock), then picks at most `max`
//! pending unkeyed effects that wait (no run holds their call's lease, nobody
//! resolved them), oldest first, whose probe exists: their provider's, or their
//! tool's own `reconcile`. Each is asked through the call's own path, as the agent's
//! retry would (the same tool, arguments, conversation and principal, under the
//! call's lease), except that the run stops once the probe decided and performs
//! nothing new (`Guard::probe_call`): what the probe decides is journaled as the
//! effect's resolution (`decided_by: probe`), and the agent's next retry goes on
//! from it. Each probe runs within its own bounds (an upstream's timeout, the tool's
//! probe timeout).

use std::time::Duration;

use serde::Serialize;

use crate::call::{CallRequest, split_scope};
use crate::error::Result;
use crate::host::Host;
use crate::journal::{Turn, UnresolvedEffect};
use crate::keys::InvocationKey;

/// What one sweep did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SweepReport {
    /// Effects its probes found performed (journaled).
    pub performed: u32,
    /// Effects its probes found not performed (journaled): the next retry sends
    /// them again under their key.
    pub not_performed: u32,
    /// Effects still unknown: the probe could not tell or failed, or the call moved
    /// on meanwhile.
    pub undecided: u32,
    /// Effects whose sweep run failed (the call cannot be made again here: its
    /// arguments are not on record, its tool is gone, an explicit key).
    pub failed: u32,
}

impl SweepReport {
    /// How many effects it asked about.
    pub fn probed(&self) -> u32 {
        self.performed + self.not_performed + self.undecided + self.failed
    }
}

/// What [`Host::sweep_if_due`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "sweep", rename_all = "snake_case")]
pub enum ScheduledSweep {
    /// This host swept.
    Ran(SweepReport),
    /// Not its turn: the last sweep was at `last`, by `by`.
    NotDue {
        /// When (ms since the epoch, on the journal's clock).
        last: i64,
        /// The host that swept.
        by: String,
    },
}

impl Host {
    /// Sweeps (see the [module](self)) if the journal's last sweep, by any host, was
    /// `every` or more ago on the journal's clock, asking at most `max` probes.
    pub fn sweep_if_due(&self, every: Duration, max: u32) -> Result<ScheduledSweep> {
        let now = self.clock().now_ms();
        let turn = self.shared().journal.take_turn(
            crate::journal::schedule::SWEEP_ROW,
            now,
            crate::clock::millis(every),
            &self.identity().name,
        )?;
        match turn {
            Turn::NotDue { last, by } => Ok(ScheduledSweep::NotDue { last, by }),
            Turn::Taken { .. } => Ok(ScheduledSweep::Ran(self.sweep(max)?)),
        }
    }

    /// Asks the probes of at most `max` waiting unknown outcomes now, oldest first,
    /// whatever the schedule (see the [module](self)); each decision is journaled,
    /// logged and counted (`justonce_sweep_probes_total`).
    pub fn sweep(&self, max: u32) -> Result<SweepReport> {
        let now = self.clock().now_ms();
        let waiting: Vec<UnresolvedEffect> = self
            .shared()
            .journal
            .unresolved(now)?
            .into_iter()
            .filter(|e| e.class == "unkeyed")
            .filter(|e| self.guard().has_probe(&e.tool, &e.provider, &e.operation))
            .take(max as usize)
            .collect();
        let mut report = SweepReport::default();
        for effect in &waiting {
            let result = self.sweep_one(effect);
            let counted = match &result {
                Ok(Some(resolution)) => resolution.as_str(),
                Ok(None) => "undecided",
                Err(_) => "failed",
            };
            match counted {
                "performed" => report.performed += 1,
                "not_performed" => report.not_performed += 1,
                "undecided" => report.undecided += 1,
                _ => report.failed += 1,
            }
            self.shared().metrics.swept(counted);
            match result {
                Err(why) => tracing::warn!(
                    tool = %effect.tool,
                    key = %effect.invocation,
                    effect = %effect.key,
                    seq = effect.seq,
                    "the sweep could not probe effect #{} ({}.{}): {why}",
                    effect.seq,
                    effect.provider,
                    effect.operation
                ),
                Ok(decided) => tracing::info!(
                    tool = %effect.tool,
                    key = %effect.invocation,
                    effect = %effect.key,
                    seq = effect.seq,
                    result = counted,
                    "the sweep probed effect #{} ({}.{}): {}",
                    effect.seq,
                    effect.provider,
                    effect.operation,
                    match decided {
                        Some(_) => "decided, journaled; the call's next retry goes on from it",
                        None => "still unknown",
                    }
                ),
            }
        }
        if report.probed() > 0 {
            tracing::info!(
                performed = report.performed,
                not_performed = report.not_performed,
                undecided = report.undecided,
                failed = report.failed,
                "the sweep probed {} unknown outcome(s)",
                report.probed()
            );
        }
        Ok(report)
    }

    /// Probes `effect` through a sweep's run of its call: the resolution its probe
    /// journaled (`None`: still unknown), or why the call cannot be made again here.
    fn sweep_one(
        &self,
        effect: &UnresolvedEffect,
    ) -> std::result::Result<Option<crate::journal::Resolution>, String> {
        let key = InvocationKey::parse(&effect.invocation).map_err(|e| e.to_string())?;
        let story = self.story(&key).map_err(|e| e.to_string())?;
        let entry = story.entry.ok_or("the journal no longer holds its call")?;
        let arguments = entry
            .arguments
            .ok_or("the journal does not hold its call's arguments")?;
        let (principal, conversation) = split_scope(&entry.conversation);
        let mut request =
            CallRequest::new(entry.tool.clone(), arguments.to_string()).conversation(conversation);
        if let Some(principal) = principal {
            request = request.principal(principal);
        }
        match self.key_for(&request) {
            Ok(derived) if derived == key => {}
            Ok(_) => return Err("its call was made under its caller's own key (or the tool's schema changed): only the agent's retry can go on with it".into()),
            Err(e) => return Err(format!("its call cannot be made again here: {e}")),
        }
        // The run ends short of an outcome by design: what counts is the journal.
        let _ = self.guard().probe_call(&request);
        let story = self.story(&key).map_err(|e| e.to_string())?;
        let resolved = story
            .entry
            .and_then(|entry| entry.effects.into_iter().find(|e| e.key == effect.key))
            .and_then(|e| match (e.state.as_str(), e.resolution.as_deref()) {
                (_, Some("not_performed")) => Some(crate::journal::Resolution::NotPerformed),
                ("done", _) => Some(crate::journal::Resolution::Performed),
                _ => None,
            });
        Ok(resolved)
    }
}
