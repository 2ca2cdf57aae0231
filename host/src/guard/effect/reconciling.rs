//! The tool's own probe (issue 56): its component's `reconcile`, asked about one of
//! its pending unkeyed effects, runs in a store of its own with reads only. A read
//! (an HTTP GET, an upstream's read-only tool: what a provider calls an unjournaled
//! read) goes to its provider once, unjournaled; anything else, an effect or a
//! question to the user, stops it with a `read_only_effect` trap that says so, and
//! nothing is performed.

use std::any::Any;
use std::sync::Arc;

use serde_json::Value;

use super::EffectSession;
use crate::ask::{self, Question};
use crate::determinism::GuestEntropy;
use crate::guard::{Shared, ToolProbe};
use crate::journal::EffectRecord;
use crate::keys::InvocationKey;
use crate::provider::{Probed, ProviderError, ReadRequest};
use crate::runtime::{EffectFailure, EffectHandler, ReconcileRequest, Reconciled};

impl EffectSession {
    /// Asks the tool's `probe` whether the pending unkeyed effect `record` (at
    /// `seq`, with `payload`) happened. `Err` says why it gave no answer.
    pub(super) fn reconcile(
        &self,
        probe: &dyn ToolProbe,
        record: &EffectRecord,
        seq: u32,
        payload: &Value,
    ) -> Result<Probed, String> {
        let reads = ReadsOnly {
            shared: Arc::clone(&self.shared),
            tool: self.tool.clone(),
            invocation: self.invocation.clone(),
            seq,
            entropy: GuestEntropy::describe(),
        };
        let effect = ReconcileRequest {
            provider: &record.provider,
            operation: &record.operation,
            payload,
            key: record.key.as_str(),
        };
        Ok(match probe.reconcile(effect, Box::new(reads))? {
            Reconciled::Performed(response) => Probed::Performed(response),
            Reconciled::NotPerformed => Probed::NotPerformed,
            Reconciled::Unknown(why) => Probed::Unknown(why),
        })
    }
}

/// What a tool's `reconcile` may do through its imports: read.
struct ReadsOnly {
    shared: Arc<Shared>,
    tool: String,
    invocation: InvocationKey,
    /// The position of the effect asked about (a read stands before it).
    seq: u32,
    entropy: GuestEntropy,
}

impl ReadsOnly {
    /// The trap of a `reconcile` that asked for `what`.
    fn refused(&self, what: &str) -> EffectFailure {
        EffectFailure::ReadOnly(format!(
            "the tool `{}`'s `reconcile` asked for {what}: a tool's probe may only read (an \
             HTTP GET, an upstream's read-only tool), so nothing was performed and the \
             effect it was asked about stays unknown",
            self.tool
        ))
    }
}

impl EffectHandler for ReadsOnly {
    fn perform(
        &mut self,
        provider_name: &str,
        operation: &str,
        payload: &str,
    ) -> Result<Result<String, EffectFailure>, String> {
        let Ok(payload) = serde_json::from_str::<Value>(payload) else {
            return Ok(Err(EffectFailure::Denied(
                "payload is not valid JSON".into(),
            )));
        };
        let provider = (!provider_name.starts_with(crate::upstream::PROVIDER_PREFIX)
            && provider_name != ask::PROVIDER)
            .then(|| self.shared.providers.get(provider_name))
            .flatten();
        let Some(provider) = provider else {
            return Ok(Err(EffectFailure::Denied(format!(
                "no provider named `{provider_name}` is configured"
            ))));
        };
        if !provider.unjournaled_read(operation, &payload) {
            return Ok(Err(
                self.refused(&format!("the effect {provider_name}.{operation}"))
            ));
        }
        let request = ReadRequest {
            tool: &self.tool,
            invocation: &self.invocation,
            seq: self.seq,
            attempt: 1,
            operation,
            payload: &payload,
            // A probe asks nobody: the downstream's questions are refused.
            client: None,
        };
        Ok(match provider.read(&request) {
            Ok(response) => Ok(response.to_string()),
            Err(ProviderError::Rejected(answer)) => {
                Err(EffectFailure::Rejected(answer.to_string()))
            }
            Err(ProviderError::Invalid(reason)) => Err(EffectFailure::Denied(format!(
                "{provider_name} refused the request: {reason}"
            ))),
            Err(other) => Err(EffectFailure::OutcomeUnknown(other.to_string())),
        })
    }

    fn perform_upstream(
        &mut self,
        provider: &str,
        operation: &str,
        _payload: &str,
    ) -> Result<Result<String, EffectFailure>, String> {
        Ok(Err(
            self.refused(&format!("the effect {provider}.{operation}"))
        ))
    }

    fn ask(
        &mut self,
        _questions: &[Question],
    ) -> Result<Result<Vec<String>, EffectFailure>, String> {
        Ok(Err(self.refused("the user's answers (`input.ask`)")))
    }

    fn entropy(&self) -> &GuestEntropy {
        &self.entropy
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}
