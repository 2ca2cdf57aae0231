//! Guests without wasm, for the guard's own tests: a tool is a closure that asks for
//! effects through the same handler a wasm guest's `perform` reaches, then returns,
//! fails or traps. With an in-memory journal, fake providers and the manual clock,
//! every row of the contract runs in milliseconds.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::Value;

use super::runner::{Runner, ToolSpec};
use crate::runtime::{EffectFailure, EffectHandler, GuestOutcome, InputSchema, Limits, TrapReason};

/// What a scripted guest reaches instead of the `effects` import.
pub(crate) struct Effects<'a> {
    handler: &'a mut dyn EffectHandler,
    /// Set when the host itself failed: the guest traps, as a wasm guest would.
    fault: Option<String>,
    /// Set when a read-only tool asked for an effect: the guest traps.
    read_only: Option<String>,
    /// Set when the run stops at a question (its answers come later, or cannot
    /// come): the guest traps, as a wasm guest would.
    stopped: Option<String>,
}

/// A guest's view of the JSON text the guard answers: the value, or the text itself
/// when it is not JSON.
fn parsed(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

impl Effects<'_> {
    /// `effects.perform(provider, operation, payload)`.
    pub(crate) fn perform(
        &mut self,
        provider: &str,
        operation: &str,
        payload: Value,
    ) -> Result<Value, EffectFailure> {
        let answer = self
            .handler
            .perform(provider, operation, &payload.to_string());
        self.answered(answer).map(|text| parsed(&text))
    }

    /// `input.ask(questions)`: the answers, each an `ElicitResult` object.
    pub(crate) fn ask(
        &mut self,
        questions: &[crate::ask::Question],
    ) -> Result<Vec<Value>, EffectFailure> {
        let answer = self.handler.ask(questions);
        self.answered(answer)
            .map(|answers| answers.iter().map(|text| parsed(text)).collect())
    }

    /// What the script gets of the guard's answer to an effect or an ask, as a wasm
    /// guest would (`runtime::host_imports`): a read-only effect, a run that stops
    /// here and a host fault are remembered, since a wasm guest traps on them, and
    /// this one does when it returns.
    fn answered<T>(
        &mut self,
        answer: Result<Result<T, EffectFailure>, String>,
    ) -> Result<T, EffectFailure> {
        match answer {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(EffectFailure::ReadOnly(message))) => {
                self.read_only = Some(message.clone());
                Err(EffectFailure::ReadOnly(message))
            }
            Ok(Err(EffectFailure::Stopped(message))) => {
                self.stopped = Some(message.clone());
                Err(EffectFailure::Stopped(message))
            }
            Ok(Err(failure)) => Err(failure),
            Err(fault) => {
                self.fault = Some(fault.clone());
                Err(EffectFailure::Denied(fault))
            }
        }
    }

    /// What the gateway's runner asks for an upstream tool's call (never a guest).
    #[cfg(test)]
    pub(crate) fn perform_upstream(
        &mut self,
        provider: &str,
        operation: &str,
        payload: Value,
    ) -> Result<Value, EffectFailure> {
        match self
            .handler
            .perform_upstream(provider, operation, &payload.to_string())
        {
            Ok(Ok(text)) => Ok(parsed(&text)),
            Ok(Err(failure)) => Err(failure),
            Err(fault) => {
                self.fault = Some(fault.clone());
                Err(EffectFailure::Denied(fault))
            }
        }
    }

    /// The guest's random seed's generation, to tell runs of one invocation apart.
    pub(crate) fn started_ms(&self) -> i64 {
        self.handler.entropy().started_ms
    }

    /// The invocation's generation (its effect keys include it): the same for every
    /// run of one invocation, new once its record expired.
    pub(crate) fn generation(&self) -> u64 {
        self.handler.entropy().seed.generation()
    }
}

/// A scripted guest: arguments and effects in, how it ended out.
pub(crate) type Guest = dyn Fn(&Value, &mut Effects<'_>) -> GuestOutcome + Send + Sync;

/// A guest that returns `value` as its JSON result.
pub(crate) fn returned(value: Value) -> GuestOutcome {
    GuestOutcome::Returned(Ok(value.to_string()), None)
}

/// A guest that traps as a panic would.
pub(crate) fn panicked(message: &str) -> GuestOutcome {
    GuestOutcome::Trapped {
        reason: TrapReason::Panic,
        message: message.to_string(),
    }
}

/// Tools made of closures, each counting its runs.
#[derive(Default)]
pub(crate) struct ScriptedRunner {
    tools: BTreeMap<String, (ToolSpec, Arc<Guest>, Arc<AtomicU32>)>,
}

impl ScriptedRunner {
    /// Adds the tool `name` with `schema`; returns its run counter.
    pub(crate) fn tool(
        &mut self,
        name: &str,
        schema: Value,
        guest: impl Fn(&Value, &mut Effects<'_>) -> GuestOutcome + Send + Sync + 'static,
    ) -> Arc<AtomicU32> {
        let runs = Arc::new(AtomicU32::new(0));
        let spec = ToolSpec {
            name: Arc::from(name),
            schema: Arc::new(InputSchema::compile(&schema).expect("a valid schema")),
            input_schema: Arc::new(schema),
            limits: Limits::default(),
            read_only: false,
            component: None,
            loaded: None,
        };
        self.tools
            .insert(name.to_string(), (spec, Arc::new(guest), Arc::clone(&runs)));
        runs
    }

    /// Marks the tool called `name` read-only, as the SDKs do.
    #[cfg(test)]
    pub(crate) fn read_only(&mut self, name: &str) {
        if let Some((spec, _, _)) = self.tools.get_mut(name) {
            spec.read_only = true;
        }
    }

    /// Says the tool called `name` runs the component `digest`, as a loaded one would.
    #[cfg(test)]
    pub(crate) fn component(&mut self, name: &str, digest: &str) {
        if let Some((spec, _, _)) = self.tools.get_mut(name) {
            spec.component = Some(digest.into());
        }
    }

    /// An object schema with the given properties, none required.
    #[cfg(test)]
    pub(crate) fn open_schema() -> Value {
        serde_json::json!({"type": "object"})
    }
}

impl Runner for ScriptedRunner {
    fn tool(&self, name: &str) -> Option<ToolSpec> {
        self.tools.get(name).map(|(spec, _, _)| spec.clone())
    }

    fn names(&self) -> String {
        self.tools.keys().cloned().collect::<Vec<_>>().join(", ")
    }

    fn run(
        &self,
        tool: &ToolSpec,
        args: &str,
        mut handler: Box<dyn EffectHandler>,
    ) -> (GuestOutcome, Box<dyn EffectHandler>) {
        let (_, guest, runs) = &self.tools[&*tool.name];
        runs.fetch_add(1, Ordering::SeqCst);
        let args: Value = serde_json::from_str(args).expect("the guard passes JSON");
        let mut effects = Effects {
            handler: &mut *handler,
            fault: None,
            read_only: None,
            stopped: None,
        };
        let outcome = guest(&args, &mut effects);
        let stopped = effects.fault.take().or(effects.stopped.take());
        let outcome = match (stopped, effects.read_only.take()) {
            (Some(fault), _) => GuestOutcome::Trapped {
                reason: TrapReason::HostFailure,
                message: fault,
            },
            (None, Some(message)) => GuestOutcome::Trapped {
                reason: TrapReason::ReadOnlyEffect,
                message,
            },
            (None, None) => outcome,
        };
        (outcome, handler)
    }
}

/// A guest that fails with a tool error of its own.
pub(crate) fn tool_error(code: &str, message: &str) -> GuestOutcome {
    GuestOutcome::Returned(
        Err(crate::runtime::GuestToolError {
            code: code.to_string(),
            message: message.to_string(),
            details: None,
        }),
        None,
    )
}
