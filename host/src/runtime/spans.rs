//! The tracing spans that put a call's keys on every log line written inside it:
//! one place, so the text and JSON logs (`JUSTONCE_LOG_FORMAT=json`) name the same
//! fields wherever a call or an effect is entered.

use tracing::Span;

use crate::keys::{EffectKey, InvocationKey};

/// The span of one tool call: `call{tool, invocation}`. Enter it around everything
/// done for the call, so that each log line of it carries the invocation key.
pub fn call(tool: &str, invocation: &InvocationKey) -> Span {
    tracing::info_span!("call", tool, invocation = %invocation)
}

/// The span of one guarded effect, inside its call's span:
/// `effect{effect, seq, provider}`.
pub fn effect(key: &EffectKey, seq: u32, provider: &str) -> Span {
    tracing::info_span!("effect", effect = %key, seq, provider)
}
