//! The tracing spans of a call, its effects and their attempts: one place, so the text
//! and JSON logs (`JUSTONCE_LOG_FORMAT=json`) and the OpenTelemetry traces (exported
//! over OTLP when an endpoint is configured) name the same fields.
//!
//! Every span carries the invocation key, and an effect's spans its effect key too: a
//! trace backend does not inherit attributes from a parent, and a span found by either
//! key should say which call it belongs to. The fields hold keys, names, numbers and
//! one-word results only, never a payload, a response or a header (a service's
//! credentials must not reach a trace).

use tracing::Span;
use tracing::field::Empty;

use crate::keys::{EffectKey, InvocationKey};
use crate::outcome::Outcome;

/// The span of one tool call: `call{tool, invocation, outcome, replayed}`. Enter it
/// around everything done for the call, so that each log line of it carries the
/// invocation key; [`call_answered`] fills in how it ended.
pub fn call(tool: &str, invocation: &InvocationKey) -> Span {
    tracing::info_span!(
        "call",
        tool,
        invocation = %invocation,
        outcome = Empty,
        replayed = Empty
    )
}

/// Records on a [`call`] span how the call ended: the outcome's kind (`success`,
/// `tool_error`, `trap`) and whether it was replayed.
pub fn call_answered(span: &Span, outcome: &Outcome, replayed: bool) {
    span.record("outcome", outcome.kind());
    span.record("replayed", replayed);
}

/// Records on a [`call`] span that the call ended without an outcome, with the
/// error's kind (`mismatch`, `outcome_unknown`, `in_progress` …).
pub fn call_failed(span: &Span, kind: &str) {
    span.record("outcome", kind);
}

/// The span of one guarded effect, inside its call's span:
/// `effect{invocation, effect, seq, provider, operation}`.
pub fn effect(
    invocation: &InvocationKey,
    key: &EffectKey,
    seq: u32,
    provider: &str,
    operation: &str,
) -> Span {
    tracing::info_span!(
        "effect",
        invocation = %invocation,
        effect = %key,
        seq,
        provider,
        operation
    )
}

/// The span of one attempt at an effect, inside its effect's span:
/// `attempt{invocation, effect, attempt, result}`. The effect key and the attempt's
/// number are the ones the journal hands out when the attempt is claimed, so they are
/// filled in then ([`attempt_claimed`]), and the result once it is known
/// ([`attempt_ended`]).
pub fn attempt(invocation: &InvocationKey) -> Span {
    tracing::info_span!(
        "attempt",
        invocation = %invocation,
        effect = Empty,
        attempt = Empty,
        result = Empty
    )
}

/// Records on an [`attempt`] span the key it is sent under and its number (1 for the
/// first attempt of the effect, across runs).
pub fn attempt_claimed(span: &Span, key: &EffectKey, attempt: u32) {
    span.record("effect", tracing::field::display(key));
    span.record("attempt", attempt);
}

/// Records on an [`attempt`] span how it ended: `ok`, `rejected`, `denied`, `unknown`,
/// `throttled`, `not_performed` or `refused` (the journal refused the claim).
pub fn attempt_ended(span: &Span, result: &'static str) {
    span.record("result", result);
}
