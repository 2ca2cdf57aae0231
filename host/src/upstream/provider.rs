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
    EarlierAttempt, EffectRequest, LateAnswerSink, Probed, Provider, ProviderClass, ProviderError,
    ReadRequest,
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
        (key, attempt): (Option<&str>, u32),
        asks: Option<&dyn crate::provider::ClientRequests>,
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
            self.upstream.name(),
            self.upstream
                .call_tool_asking(operation, tool, &arguments, (key, wait), asks),
        )
    }
}

/// A client's answer as the guard reads it (`upstream` names its upstream).
fn provider_error(
    upstream: &str,
    answer: Result<Value, ClientError>,
) -> Result<Value, ProviderError> {
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
        // One of JSON-RPC's own errors (parse error, invalid request, method not
        // found, invalid params, internal error): the request never reached the
        // tool, so nothing was performed. Not saved as the call's outcome: the
        // same call goes through once the upstream (or its configuration) is fixed.
        Err(ClientError::Refused(error)) if is_protocol_error(&error) => {
            Err(ProviderError::NotPerformed {
                reason: format!(
                    "upstream `{upstream}` refused the request with a JSON-RPC protocol error before its tool ran: {error}"
                ),
                retry: false,
            })
        }
        // Another JSON-RPC error: the upstream's own refusal of the call; a
        // definitive answer, saved and replayed.
        Err(ClientError::Refused(error)) => Err(ProviderError::Rejected(error)),
    }
}

/// Whether a JSON-RPC error is one of the protocol's own (-32700, -32600 to -32603),
/// which a server answers before any tool runs.
fn is_protocol_error(error: &Value) -> bool {
    matches!(
        error.get("code").and_then(Value::as_i64),
        Some(-32700 | -32603..=-32600)
    )
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
            (Some(request.key.as_str()), request.attempt),
            request.client,
        )
    }

    /// Over stdio, a `tools/call` past its timeout stays registered on its
    /// connection: its answer, come since, or that it still runs.
    fn earlier_attempt(&self, key: &EffectKey) -> Option<EarlierAttempt> {
        if let Some(answer) = self.upstream.late_answer(Some(key.as_str())) {
            return Some(EarlierAttempt::Answered(provider_error(
                self.upstream.name(),
                answer,
            )));
        }
        if self.upstream.asking(key.as_str()) {
            return Some(EarlierAttempt::Asking);
        }
        self.upstream
            .still_running(key.as_str())
            .then_some(EarlierAttempt::Running)
    }

    /// Each answer an upstream gives after its request was given up is handed to
    /// `sink` as it comes (over either transport), read as [`Self::perform`] reads
    /// an answer in time; one the sink journals is no longer kept here.
    fn hand_late_answers_to(&self, sink: LateAnswerSink) {
        let upstream = Arc::clone(&self.upstream);
        let weak = Arc::downgrade(&upstream);
        upstream
            .late
            .journal_with(Arc::new(move |key: &str, message: &Value| {
                let Some(upstream) = weak.upgrade() else {
                    return false;
                };
                let answer = upstream.read_late(message.clone());
                let answer = provider_error(upstream.name(), answer);
                sink(&EffectKey::from_stored(key.to_owned()), &answer)
            }));
    }

    fn probe_of(&self, operation: &str, _payload: &Value) -> Option<String> {
        let probe = self.upstream.config.probes.get(operation)?;
        Some(format!("{}.{}", self.upstream.name(), probe.tool))
    }

    fn probe(&self, request: &EffectRequest<'_>) -> Result<Probed, String> {
        let probe = self
            .upstream
            .config
            .probes
            .get(request.operation)
            .ok_or_else(|| {
                format!(
                    "the upstream `{}` has no probe for `{}`",
                    self.upstream.name(),
                    request.operation
                )
            })?;
        probe.ask(&self.upstream, request)
    }

    fn person_question_of(&self, operation: &str, _payload: &Value) -> Option<String> {
        self.upstream.config.ask_person.get(operation).cloned()
    }

    fn unjournaled_read(&self, operation: &str, _payload: &Value) -> bool {
        self.upstream.tool(operation).is_some_and(|t| t.read_only)
    }

    fn read(&self, request: &ReadRequest<'_>) -> Result<Value, ProviderError> {
        self.send(
            request.tool,
            request.operation,
            request.payload,
            (None, request.attempt),
            request.client,
        )
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_the_protocols_own_errors_mean_the_tool_did_not_run() {
        for code in [-32700, -32600, -32601, -32602, -32603] {
            assert!(
                is_protocol_error(&json!({ "code": code, "message": "m" })),
                "{code}"
            );
        }
        for code in [-32604, -32000, -32099, -1, 0, 429] {
            assert!(!is_protocol_error(&json!({ "code": code })), "{code}");
        }
        assert!(!is_protocol_error(&json!({ "message": "no code" })));
        assert!(!is_protocol_error(&json!({ "code": "-32601" })));
    }
}
