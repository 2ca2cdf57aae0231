//! The provider whose one operation per tool is an upstream `tools/call`. Its class
//! is decided per tool: keyed where an unknown outcome may be sent again under the
//! same key (`idempotentHint`, the configuration), unkeyed otherwise (an unknown
//! outcome waits for a person). A read-only tool's call is an unjournaled read.

use std::sync::Arc;

use serde_json::Value;

use super::Upstream;
use super::client::ClientError;
use crate::keys::EffectKey;
use crate::provider::{
    EarlierAttempt, EffectRequest, Provider, ProviderClass, ProviderError, ReadRequest,
};

/// Performs the `tools/call`s of one upstream. The operation is the tool's name
/// upstream; the payload is `{"arguments": {…}}`, normalized against its schema.
#[derive(Debug)]
pub struct UpstreamProvider {
    upstream: Arc<Upstream>,
}

impl UpstreamProvider {
    /// The provider of `upstream`'s calls.
    pub fn new(upstream: Arc<Upstream>) -> Self {
        Self { upstream }
    }

    /// Sends one attempt. The first is refused at once when the upstream is not
    /// ready; a later one (the first's answer was lost, or it was not sent) waits up
    /// to the upstream's `timeout` for its supervisor to start it again.
    fn send(
        &self,
        tool: &str,
        operation: &str,
        payload: &Value,
        key: Option<&str>,
        attempt: u32,
    ) -> Result<Value, ProviderError> {
        // Only a tool the host offers of this upstream: never one the configuration
        // leaves out (`exclude`), nor one it never listed.
        if self.upstream.tool(operation).is_none() {
            return Err(ProviderError::NotPerformed {
                reason: format!(
                    "`{operation}` is not a tool the host offers of the upstream `{}`",
                    self.upstream.name()
                ),
                retry: false,
            });
        }
        let arguments = payload
            .get("arguments")
            .cloned()
            .unwrap_or_else(|| Value::Object(Default::default()));
        let wait = (attempt > 1).then_some(self.upstream.config.timeout);
        provider_error(
            self.upstream
                .call_tool(operation, tool, &arguments, key, wait),
        )
    }
}

/// A client's answer as the guard reads it.
fn provider_error(answer: Result<Value, ClientError>) -> Result<Value, ProviderError> {
    match answer {
        Ok(result) => Ok(result),
        Err(ClientError::NotSent(reason)) => Err(ProviderError::NotPerformed {
            reason,
            retry: true,
        }),
        // Its upstream is down: refused at once, not retried within the call
        // (its supervisor, not this call, starts it again); the call is left
        // resumable, and goes through once the upstream is ready.
        Err(ClientError::Down(reason)) => Err(ProviderError::NotPerformed {
            reason,
            retry: false,
        }),
        Err(ClientError::Lost(reason)) => Err(ProviderError::Unknown(reason)),
        // The host's configuration, not the call: nothing saved, the call resumable.
        Err(ClientError::Misconfigured(reason)) => Err(ProviderError::NotPerformed {
            reason,
            retry: false,
        }),
        // A JSON-RPC error: the upstream refused the call (an unknown tool, invalid
        // arguments); a definitive answer, saved and replayed.
        Err(ClientError::Refused(error)) => Err(ProviderError::Rejected(error)),
    }
}

impl Provider for UpstreamProvider {
    fn class(&self) -> ProviderClass {
        if self.upstream.config.dedupes_by_key {
            ProviderClass::Keyed
        } else {
            ProviderClass::Unkeyed
        }
    }

    fn class_of(&self, operation: &str, _payload: &Value) -> ProviderClass {
        match self.upstream.tool(operation) {
            Some(tool) if tool.keyed => ProviderClass::Keyed,
            Some(_) => ProviderClass::Unkeyed,
            None => self.class(),
        }
    }

    fn perform(&self, request: &EffectRequest<'_>) -> Result<Value, ProviderError> {
        self.send(
            request.tool,
            request.operation,
            request.payload,
            Some(request.key.as_str()),
            request.attempt,
        )
    }

    /// Over stdio, a `tools/call` past its timeout stays registered on its
    /// connection: its answer, come since, or that it still runs.
    fn earlier_attempt(&self, key: &EffectKey) -> Option<EarlierAttempt> {
        if let Some(answer) = self.upstream.late_answer(Some(key.as_str())) {
            return Some(EarlierAttempt::Answered(provider_error(answer)));
        }
        self.upstream
            .still_running(key.as_str())
            .then_some(EarlierAttempt::Running)
    }

    fn unjournaled_read(&self, operation: &str, _payload: &Value) -> bool {
        self.upstream.tool(operation).is_some_and(|t| t.read_only)
    }

    fn read(&self, request: &ReadRequest<'_>) -> Result<Value, ProviderError> {
        self.send(
            request.tool,
            request.operation,
            request.payload,
            None,
            request.attempt,
        )
    }
}
