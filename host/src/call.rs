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

/// The scope recorded for a call in `conversation` that no principal made (`run`,
/// MCP over stdio): the conversation as it is, unless it could be mistaken for an
/// authenticated principal's scope or for another bare one. A conversation that
/// starts with `[` (the shape of [`principal_scope`]) or `"` is written as a JSON
/// string, so no conversation a local caller names can be an authenticated
/// principal's scope and share its keys. Every other conversation keeps its scope,
/// so the keys of existing calls do not change. Unambiguous: a scope starting with
/// `"` is an escaped conversation, one starting with `[` a principal's, any other the
/// conversation itself.
pub(crate) fn bare_scope(conversation: &str) -> std::borrow::Cow<'_, str> {
    if conversation.starts_with(['[', '"']) {
        serde_json::to_string(conversation)
            .unwrap_or_default()
            .into()
    } else {
        conversation.into()
    }
}

/// The principal and the conversation of a recorded scope: the inverse of
/// [`principal_scope`] and [`bare_scope`].
pub(crate) fn split_scope(scope: &str) -> (Option<String>, String) {
    if scope.starts_with('[')
        && let Ok([principal, conversation]) = serde_json::from_str::<[String; 2]>(scope)
    {
        return (Some(principal), conversation);
    }
    if scope.starts_with('"')
        && let Ok(conversation) = serde_json::from_str::<String>(scope)
    {
        return (None, conversation);
    }
    (None, scope.to_owned())
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

    /// The window of the call's key: the conversation ([`bare_scope`]), or the
    /// principal with it when there is one ([`principal_scope`]).
    pub(crate) fn scope(&self) -> std::borrow::Cow<'_, str> {
        let conversation = self.conversation.as_deref().unwrap_or(DEFAULT_SCOPE);
        match &self.principal {
            None => bare_scope(conversation),
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

    #[test]
    fn no_bare_conversation_has_the_scope_of_a_principals() {
        let alices = principal_scope("alice", "conv-a");
        let local = CallRequest::new("t", "{}").conversation(alices.clone());
        assert_ne!(
            local.scope(),
            alices,
            "a local caller naming alice's scope as its conversation is not alice"
        );
        assert_ne!(
            local.scope(),
            CallRequest::new("t", "{}")
                .conversation(local.scope())
                .scope()
        );
        // Conversations of any other shape keep their scope, and with it their keys.
        for plain in ["conv-a", "default", "a[b]", " [x"] {
            assert_eq!(bare_scope(plain), plain);
        }
        for conversation in [alices.as_str(), "[x", "\"x\"", "plain", ""] {
            assert_eq!(
                split_scope(&bare_scope(conversation)),
                (None, conversation.to_owned())
            );
        }
        assert_eq!(
            split_scope(&alices),
            (Some("alice".to_owned()), "conv-a".to_owned())
        );
    }
}
