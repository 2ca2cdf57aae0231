//! A tool's own probe: the `reconcile` export of the `reconciling-tool` world, run in
//! a fresh store of its own, under bounds of its own, with a handler that lets it
//! read and nothing else (the guard's, see `guard::effect::reconciling`).
//!
//! Optional: a component of the `tool` world has none and loads as before. One that
//! exports a `reconcile` the world does not declare is refused at load, with the
//! export named, rather than never asked.

use std::sync::Arc;

use serde_json::Value;
use wasmtime::component::{Component, InstancePre};

use super::bindings::reconciling::ReconcilingToolPre;
use super::bindings::{self, PendingEffect};
use super::host_imports::GuestState;
use super::{EffectHandler, Limits, LoadedTool, Runtime, TrapReason, classify_trap};

/// The export's name.
const EXPORT: &str = "reconcile";

/// One pending effect of the tool, as `reconcile` is asked about it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReconcileRequest<'a> {
    /// The provider the tool named.
    pub provider: &'a str,
    /// The operation.
    pub operation: &'a str,
    /// The payload the tool passed.
    pub payload: &'a Value,
    /// The effect's idempotency key.
    pub key: &'a str,
}

/// What the tool's `reconcile` answered.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Reconciled {
    /// The effect happened: the response to save (JSON).
    Performed(Value),
    /// It did not happen.
    NotPerformed,
    /// The tool cannot tell, and says why.
    Unknown(String),
}

/// The component's `reconcile`, bound, if it exports one; `Err` when it exports a
/// `reconcile` that is not the world's.
pub(super) fn pre(
    component: &Component,
    pre: &InstancePre<GuestState>,
) -> Result<Option<ReconcilingToolPre<GuestState>>, String> {
    if component.get_export_index(None, EXPORT).is_none() {
        return Ok(None);
    }
    ReconcilingToolPre::new(pre.clone()).map(Some).map_err(|e| {
        format!(
            "exports `{EXPORT}`, but not as the justonce `reconciling-tool` world declares it \
             (`reconcile: func(effect: pending-effect) -> reconciled`): {e:#}"
        )
    })
}

impl LoadedTool {
    /// Whether the tool exports `reconcile`, its own probe of its effects.
    pub fn reconciles(&self) -> bool {
        self.reconciling.is_some()
    }
}

impl Runtime {
    /// Runs `reconcile(effect)` of `tool` in a fresh store under `limits` (a probe's
    /// bounds), its `perform`s going to `handler` (which lets it read, nothing more).
    /// `Err` says why it gave no answer: no such export, no call slot, a trap (an
    /// effect it asked for, its deadline, its memory), a response that is not JSON.
    pub(crate) fn reconcile(
        &self,
        tool: &LoadedTool,
        effect: ReconcileRequest<'_>,
        handler: Box<dyn EffectHandler>,
        limits: &Limits,
    ) -> Result<Reconciled, String> {
        let Some(reconciling) = &tool.reconciling else {
            return Err(format!("the tool `{}` exports no `{EXPORT}`", tool.name));
        };
        let Some(_slot) = self.permits.acquire_within(limits.deadline) else {
            return Err(format!(
                "every call slot stayed taken for {} ms",
                limits.deadline.as_millis()
            ));
        };
        let mut store = self.store(Arc::from(tool.name.as_str()), Some(handler), limits);
        let asked = PendingEffect {
            provider: effect.provider.to_owned(),
            operation: effect.operation.to_owned(),
            payload: effect.payload.to_string(),
            key: effect.key.to_owned(),
        };
        let answered = reconciling
            .instantiate(&mut store)
            .and_then(|bindings| bindings.call_reconcile(&mut store, &asked));
        store.data().flush_output();
        match answered {
            Ok(bindings::Reconciled::Performed(response)) => serde_json::from_str(&response)
                .map(Reconciled::Performed)
                .map_err(|e| {
                    format!("`{EXPORT}` answered performed with a response that is not JSON: {e}")
                }),
            Ok(bindings::Reconciled::NotPerformed) => Ok(Reconciled::NotPerformed),
            Ok(bindings::Reconciled::Unknown(why)) => Ok(Reconciled::Unknown(why)),
            Err(error) => {
                let hit = store.data().limit_hit();
                let reason = classify_trap(&error, hit.as_ref());
                let message = match (hit, reason) {
                    (Some(hit), _) => hit.to_string(),
                    (None, TrapReason::DeadlineExceeded) => format!(
                        "it ran past its deadline of {} ms",
                        limits.deadline.min(limits.wall_clock).as_millis()
                    ),
                    _ => format!("{error:#}"),
                };
                Err(format!(
                    "`{EXPORT}` trapped ({}): {message}",
                    reason.as_str()
                ))
            }
        }
    }
}
