//! The guard's runner for a host with upstream MCP servers: a component's tool runs
//! in the wasm runtime; an upstream tool's "guest" asks for exactly one effect, the
//! upstream `tools/call` (on the provider `mcp:NAME`), and its answer is the call's
//! outcome. The same effect guard journals it before it is sent, keys it and saves
//! its answer: one path for both kinds of tool.

use std::sync::Arc;

use serde_json::{Value, json};

use super::runner::{Runner, ToolSpec, WasmRunner};
use crate::runtime::{EffectFailure, EffectHandler, GuestOutcome, GuestToolError, TrapReason};
use crate::upstream::{Lookup, Upstreams};

/// The code of the tool error an upstream tool's call answers when the host refused
/// its upstream call before sending it (a `tasks/cancel`).
const DENIED: &str = "upstream_call_denied";

/// Components first, then the upstreams' tools.
pub(crate) struct GatewayRunner {
    pub wasm: WasmRunner,
    pub upstreams: Arc<Upstreams>,
}

impl Runner for GatewayRunner {
    fn tool(&self, name: &str) -> Option<ToolSpec> {
        if let Some(tool) = self.wasm.tool(name) {
            return Some(tool);
        }
        // A tool it listed, whatever its upstream's state now: a retry of a call
        // answered before is replayed from the journal while the upstream is down,
        // and one that is to be sent is refused by its provider, nothing sent.
        let (upstream, tool) = self.upstreams.known(name)?;
        let mut limits = self.wasm.limits.for_tool(name).clone();
        if tool.read_only {
            // Passed through, not saved: its upstream's cap, not a saved answer's.
            limits.max_result_bytes = upstream.max_read_bytes();
        }
        Some(ToolSpec {
            name: Arc::from(tool.name.as_str()),
            input_schema: Arc::clone(&tool.input_schema),
            schema: Arc::clone(&tool.schema),
            limits,
            read_only: tool.read_only,
            component: None,
            loaded: None,
        })
    }

    fn tool_probe(&self, tool: &ToolSpec) -> Option<Arc<dyn super::runner::ToolProbe>> {
        self.wasm.tool_probe(tool)
    }

    fn unavailable(&self, name: &str) -> Option<String> {
        if self.wasm.tool(name).is_some() {
            return None;
        }
        // A name no upstream listed that one which never listed may offer.
        match self.upstreams.find(name) {
            Lookup::Down(upstream, state) => Some(state.describe(upstream.name())),
            Lookup::Ready(..) | Lookup::Unknown => None,
        }
    }

    fn names(&self) -> String {
        let mut names = self.wasm.names();
        for tool in self.upstreams.tools() {
            if !names.is_empty() {
                names.push_str(", ");
            }
            names.push_str(&tool.name);
        }
        names
    }

    fn run(
        &self,
        tool: &ToolSpec,
        args: &str,
        mut handler: Box<dyn EffectHandler>,
    ) -> (GuestOutcome, Box<dyn EffectHandler>) {
        if tool.loaded.is_some() {
            return self.wasm.run(tool, args, handler);
        }
        // Whatever its state now: a call that went down meanwhile is refused by its
        // provider, nothing sent, and the guard answers it.
        let Some((upstream, found)) = self.upstreams.known(&tool.name) else {
            let outcome = GuestOutcome::Trapped {
                reason: TrapReason::HostFailure,
                message: format!("the upstream tool `{}` is no longer offered", tool.name),
            };
            return (outcome, handler);
        };
        let arguments: Value =
            serde_json::from_str(args).unwrap_or_else(|_| Value::Object(Default::default()));
        let payload = json!({ "arguments": arguments }).to_string();
        let answer =
            handler.perform_upstream(&upstream.provider_name(), &found.upstream_name, &payload);
        (outcome_of(answer), handler)
    }
}

/// The call's outcome from the guard's answer to its one effect.
fn outcome_of(answer: Result<Result<String, EffectFailure>, String>) -> GuestOutcome {
    match answer {
        Ok(Ok(result)) => upstream_outcome(&result),
        Ok(Err(EffectFailure::Rejected(error))) => refused(&error),
        Ok(Err(EffectFailure::ReadOnly(message))) => GuestOutcome::Trapped {
            reason: TrapReason::ReadOnlyEffect,
            message,
        },
        // Refused before it was sent (the call was cancelled by its client, or its
        // payload is unusable): what a guest would be told, saved as the call's
        // outcome like a guest's answer to it, so a retry replays it. One the guard
        // stopped for its own reasons (not performed, a lost lease) it answers from
        // its record, not from this.
        Ok(Err(EffectFailure::Denied(reason))) => GuestOutcome::Returned(
            Err(GuestToolError {
                code: DENIED.into(),
                message: reason,
                details: None,
            }),
            None,
        ),
        // The guard knows why (an unknown outcome, a divergence): it answers the call
        // from its own record of the effect, not from this.
        Ok(Err(failure)) => GuestOutcome::Trapped {
            reason: TrapReason::HostFailure,
            message: format!("the upstream call failed: {}", failure.kind()),
        },
        Err(fault) => GuestOutcome::Trapped {
            reason: TrapReason::HostFailure,
            message: fault,
        },
    }
}

/// A `CallToolResult` as the call's outcome: its content blocks as they came and its
/// `structuredContent` as the result; with `isError`, a tool error `upstream_error`
/// whose details hold both.
fn upstream_outcome(text: &str) -> GuestOutcome {
    let result: Value = match serde_json::from_str(text) {
        Ok(result) => result,
        Err(e) => {
            return GuestOutcome::Trapped {
                reason: TrapReason::InvalidOutput,
                message: format!("the upstream's result is not JSON: {e}"),
            };
        }
    };
    let (content, structured) = match result.get("content") {
        Some(Value::Array(content)) => (
            content.clone(),
            result
                .get("structuredContent")
                .cloned()
                .unwrap_or(Value::Null),
        ),
        // No `content`, which an MCP result always has: an answer the journal
        // recorded for the effect (a resolution, perhaps without the upstream's own
        // answer), told as its text and kept whole as the structured result, so the
        // agent reads what was recorded rather than an empty result.
        _ => (
            vec![json!({ "type": "text", "text": recorded_text(&result) })],
            result.clone(),
        ),
    };
    if result.get("isError") == Some(&Value::Bool(true)) {
        let message = content
            .iter()
            .filter_map(|c| c.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n");
        let details = json!({ "content": content, "structuredContent": structured });
        return GuestOutcome::Returned(
            Err(GuestToolError {
                code: crate::upstream::UPSTREAM_ERROR.into(),
                message: if message.is_empty() {
                    "the upstream tool reported an error".into()
                } else {
                    message
                },
                details: Some(details.to_string()),
            }),
            None,
        );
    }
    GuestOutcome::Returned(Ok(structured.to_string()), Some(content))
}

/// The text of an answer recorded without the upstream's result: its `message`
/// where it has one (`journal::operate::performed_without_answer`), else its JSON.
fn recorded_text(recorded: &Value) -> String {
    match recorded.get("message") {
        Some(Value::String(message)) => message.clone(),
        _ => recorded.to_string(),
    }
}

/// A JSON-RPC error the upstream answered `tools/call` with, as a tool error.
fn refused(error: &str) -> GuestOutcome {
    let parsed: Value = serde_json::from_str(error).unwrap_or(Value::String(error.to_owned()));
    let message = parsed
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or(error)
        .to_owned();
    GuestOutcome::Returned(
        Err(GuestToolError {
            code: "upstream_refused".into(),
            message,
            details: Some(parsed.to_string()),
        }),
        None,
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_result_is_its_content_and_structured_content_and_is_error_a_tool_error() {
        let result = json!({
            "content": [{ "type": "text", "text": "done" }],
            "structuredContent": { "id": 7 },
        });
        match upstream_outcome(&result.to_string()) {
            GuestOutcome::Returned(Ok(structured), Some(content)) => {
                assert_eq!(structured, r#"{"id":7}"#);
                assert_eq!(content, [json!({ "type": "text", "text": "done" })]);
            }
            _ => panic!("another outcome"),
        }
        let failed = json!({
            "content": [{ "type": "text", "text": "card declined" }, { "type": "text", "text": "try later" }],
            "isError": true,
        });
        match upstream_outcome(&failed.to_string()) {
            GuestOutcome::Returned(Err(error), None) => {
                assert_eq!(error.code, crate::upstream::UPSTREAM_ERROR);
                assert_eq!(error.message, "card declined\ntry later");
                let details: Value =
                    serde_json::from_str(error.details.as_deref().unwrap()).unwrap();
                assert_eq!(details["content"], failed["content"]);
                assert_eq!(details["structuredContent"], Value::Null);
            }
            _ => panic!("another outcome"),
        }
        // An empty content list is the upstream's answer, not a failure.
        match upstream_outcome(r#"{"content":[]}"#) {
            GuestOutcome::Returned(Ok(structured), Some(content)) => {
                assert_eq!(structured, "null");
                assert!(content.is_empty());
            }
            _ => panic!("another outcome"),
        }
        // No content at all is an answer the journal recorded (a resolution): told
        // as its message, and kept whole as the structured result.
        let recorded = json!({ "performed": true, "message": "ada (operator) recorded it" });
        match upstream_outcome(&recorded.to_string()) {
            GuestOutcome::Returned(Ok(structured), Some(content)) => {
                assert_eq!(structured, recorded.to_string());
                assert_eq!(
                    content,
                    [json!({ "type": "text", "text": "ada (operator) recorded it" })]
                );
            }
            _ => panic!("another outcome"),
        }
        match upstream_outcome("{}") {
            GuestOutcome::Returned(Ok(_), Some(content)) => {
                assert_eq!(content, [json!({ "type": "text", "text": "{}" })]);
            }
            _ => panic!("another outcome"),
        }
        assert!(matches!(
            upstream_outcome("not json"),
            GuestOutcome::Trapped {
                reason: TrapReason::InvalidOutput,
                ..
            }
        ));
    }

    #[test]
    fn a_call_refused_before_it_is_sent_is_a_tool_error_saved_and_an_unknown_one_is_not() {
        let cancelled = "the call was cancelled by its client (tasks/cancel)";
        match outcome_of(Ok(Err(EffectFailure::Denied(cancelled.into())))) {
            GuestOutcome::Returned(Err(e), None) => {
                assert_eq!(e.code, DENIED);
                assert_eq!(e.message, cancelled, "the agent is told why");
            }
            _ => panic!("another outcome"),
        }
        // The opposite case: an unknown outcome is the guard's to answer (resumable).
        let unknown = outcome_of(Ok(Err(EffectFailure::OutcomeUnknown("timeout".into()))));
        assert!(matches!(
            unknown,
            GuestOutcome::Trapped {
                reason: TrapReason::HostFailure,
                ..
            }
        ));
    }

    #[test]
    fn a_json_rpc_refusal_is_a_tool_error_with_its_message() {
        let error = json!({ "code": -32602, "message": "Unknown tool: nope" }).to_string();
        match refused(&error) {
            GuestOutcome::Returned(Err(e), None) => {
                assert_eq!(e.code, "upstream_refused");
                assert_eq!(e.message, "Unknown tool: nope");
            }
            _ => panic!("another outcome"),
        }
    }
}
