//! One tool call as an agent makes it, and the answer it gets.

use serde_json::Value;

use crate::keys::InvocationKey;
use crate::outcome::Outcome;

/// The scope used when a caller names no conversation.
pub const DEFAULT_SCOPE: &str = "default";

/// One tool call as an agent (or its client) makes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallRequest {
    /// The tool's name.
    pub tool: String,
    /// The arguments, JSON text (an object).
    pub arguments: String,
    /// The window in which a repeat is a duplicate, usually the conversation id.
    /// [`DEFAULT_SCOPE`] when absent.
    pub conversation: Option<String>,
    /// The provider's tool-call id, an alias of the invocation key.
    pub tool_call_id: Option<String>,
    /// A caller-chosen idempotency key that replaces the derived one.
    pub key: Option<String>,
    /// The authenticated caller (MCP over HTTP). When set, the scope of the call's
    /// key is [`principal_scope`] of it and the conversation, explicit keys included.
    pub principal: Option<String>,
}

/// The scope recorded for a call of `principal` in `conversation`: the JSON array
/// `["principal","conversation"]`, unambiguous for any two strings.
pub fn principal_scope(principal: &str, conversation: &str) -> String {
    serde_json::to_string(&[principal, conversation]).unwrap_or_default()
}

/// What every scope of `principal`'s calls starts with ([`principal_scope`] is the
/// JSON array `[principal, conversation]`): the journal's filter for one principal.
pub(crate) fn principal_prefix(principal: &str) -> String {
    let mut prefix = principal_scope(principal, "");
    // Drops the empty conversation and the bracket: `""]`.
    prefix.truncate(prefix.len() - r#"""]"#.len());
    prefix
}

impl CallRequest {
    /// A call of `tool` with `arguments` (JSON text).
    pub fn new(tool: impl Into<String>, arguments: impl Into<String>) -> Self {
        Self {
            tool: tool.into(),
            arguments: arguments.into(),
            conversation: None,
            tool_call_id: None,
            key: None,
            principal: None,
        }
    }

    /// Sets the authenticated caller.
    pub fn principal(mut self, principal: impl Into<String>) -> Self {
        self.principal = Some(principal.into());
        self
    }

    /// Sets the conversation scope.
    pub fn conversation(mut self, conversation: impl Into<String>) -> Self {
        self.conversation = Some(conversation.into());
        self
    }

    /// Sets the provider's tool-call id.
    pub fn tool_call_id(mut self, id: impl Into<String>) -> Self {
        self.tool_call_id = Some(id.into());
        self
    }

    /// Sets an explicit idempotency key.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Whether the call names its window: a conversation, or an explicit key (a
    /// caller that chose the key chose what a repeat is). A call that does neither
    /// is deduplicated within the short unscoped window.
    pub(crate) fn is_scoped(&self) -> bool {
        self.conversation.is_some() || self.key.is_some()
    }

    /// The window of the call's key: the conversation, and the principal with it
    /// when there is one.
    pub(crate) fn scope(&self) -> std::borrow::Cow<'_, str> {
        let conversation = self.conversation.as_deref().unwrap_or(DEFAULT_SCOPE);
        match &self.principal {
            None => conversation.into(),
            Some(principal) => principal_scope(principal, conversation).into(),
        }
    }
}

/// The answer to a call: the outcome, and whether it was replayed.
#[derive(Debug, Clone, PartialEq)]
pub struct CallResponse {
    /// The invocation key the call ran (or was found) under.
    pub key: InvocationKey,
    /// `true` when the outcome was saved by an earlier attempt and nothing ran now.
    pub replayed: bool,
    /// How the tool call ended.
    pub outcome: Outcome,
}

impl CallResponse {
    /// The JSON the CLI prints: the outcome's fields plus `replayed` and `key`.
    pub fn to_json(&self) -> Value {
        let mut v = self.outcome.to_agent_json();
        v["replayed"] = Value::Bool(self.replayed);
        v["key"] = Value::String(self.key.to_string());
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_principals_prefix_starts_its_scopes_and_no_other_principals() {
        let prefix = principal_prefix("alice");
        assert_eq!(prefix, r#"["alice","#);
        assert!(principal_scope("alice", "conv-1").starts_with(&prefix));
        assert!(!principal_scope("alice2", "conv-1").starts_with(&prefix));
        assert!(!principal_scope("bob", "alice").starts_with(&prefix));
    }
}
