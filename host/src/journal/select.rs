//! Which calls a person asked to see, the same for `justonce journal` and the
//! console: all of them, one conversation's (whoever made them), one principal's, or
//! one principal's conversation (calls made over `serve --http` are scoped by their
//! principal).

use super::{Journal, JournalEntry, LeaseStatus, UnresolvedEffect};
use crate::call::{bare_scope, principal_prefix, principal_scope, split_scope};
use crate::error::Result;

/// How many recent calls [`Selection::unresolved`] looks through for calls stuck on a
/// keyed effect (as many as the console's longest page).
pub(crate) const STUCK_SCAN: u32 = 1000;

/// Which scopes a read of the journal's calls takes, as the backends' SQL filters
/// them: every scope that is `exactly`, or (with a `suffix`) a principal's scope
/// ending with it, and that starts with `prefix`; `None` filters nothing.
#[derive(Debug, Clone, Default)]
pub(crate) struct Scopes {
    /// This scope (with `suffix`: or a principal's scope ending with it).
    pub exactly: Option<String>,
    /// Scopes starting with this (one principal's calls).
    pub prefix: Option<String>,
    /// Principal scopes ending with this (`,"conversation"]`: one conversation's
    /// calls whoever made them).
    pub suffix: Option<String>,
}

impl Scopes {
    /// One scope (`None`: every scope).
    pub fn exactly(scope: Option<&str>) -> Self {
        Self {
            exactly: scope.map(str::to_owned),
            ..Self::default()
        }
    }

    /// The scopes of one principal's calls, whose scopes start with `prefix`.
    pub fn prefix(prefix: &str) -> Self {
        Self {
            prefix: Some(prefix.to_owned()),
            ..Self::default()
        }
    }

    /// The scopes of one conversation's calls whoever made them: its bare scope,
    /// and each principal's scope `[principal, conversation]`. A principal's scope
    /// ends with `,` and the conversation as a JSON string only when it is that
    /// conversation: a quote inside a JSON string is escaped, so the `,"` that opens
    /// the suffix can only be the one before the conversation.
    pub fn conversation(conversation: &str) -> Self {
        let quoted = serde_json::to_string(conversation).unwrap_or_default();
        Self {
            exactly: Some(bare_scope(conversation).into_owned()),
            prefix: None,
            suffix: Some(format!(",{quoted}]")),
        }
    }
}

/// A person's filter on the journal by who called and in which conversation.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Selection<'a> {
    /// Only the calls of this principal.
    pub principal: Option<&'a str>,
    /// Only this conversation (of `principal`, when one is given).
    pub conversation: Option<&'a str>,
}

impl Selection<'_> {
    /// The invocations selected, newest first, at most `limit`.
    pub fn entries(&self, store: &dyn Journal, limit: u32) -> Result<Vec<JournalEntry>> {
        match (self.principal, self.conversation) {
            (None, None) => store.entries(None, limit),
            (None, Some(conversation)) => store.entries_in_conversation(conversation, limit),
            (Some(principal), Some(conversation)) => {
                store.entries(Some(&principal_scope(principal, conversation)), limit)
            }
            (Some(principal), None) => store.entries_by_prefix(&principal_prefix(principal), limit),
        }
    }

    /// What needs someone among the calls selected, for `justonce journal
    /// --unresolved` and the console alike: first the pending unkeyed effects that
    /// wait for a person ([`Journal::unresolved`], class `unkeyed`), then the keyed
    /// effects that calls are stuck on (outcome unknown, no live lease, class
    /// `keyed`; the next retry of the same call resumes them) among the newest
    /// [`STUCK_SCAN`] calls.
    pub fn unresolved(&self, store: &dyn Journal, now: i64) -> Result<Vec<UnresolvedEffect>> {
        let mut effects = store.unresolved(now)?;
        match (self.principal, self.conversation) {
            (None, None) => {}
            (Some(principal), Some(conversation)) => {
                let scope = principal_scope(principal, conversation);
                effects.retain(|e| e.conversation == scope);
            }
            (None, Some(conversation)) => {
                effects.retain(|e| split_scope(&e.conversation).1 == conversation);
            }
            (Some(principal), None) => {
                let prefix = principal_prefix(principal);
                effects.retain(|e| e.conversation.starts_with(&prefix));
            }
        }
        effects.extend(stuck_keyed(&self.entries(store, STUCK_SCAN)?, now));
        Ok(effects)
    }
}

/// The keyed effects that calls in `entries` are stuck on (outcome unknown, no live
/// lease), listed beside the unkeyed ones.
fn stuck_keyed(entries: &[JournalEntry], now: i64) -> Vec<UnresolvedEffect> {
    entries
        .iter()
        .filter(|e| {
            e.has_unknown_effect() && !matches!(e.lease_status(now), LeaseStatus::Live { .. })
        })
        .flat_map(|e| {
            e.effects
                .iter()
                .filter(|f| {
                    f.class == "keyed"
                        && f.state == "pending"
                        && f.resolution.is_none()
                        && f.attempts > 0
                })
                .map(|f| UnresolvedEffect {
                    key: f.key.clone(),
                    invocation: e.key.clone(),
                    conversation: e.conversation.clone(),
                    tool: e.tool.clone(),
                    seq: f.seq,
                    provider: f.provider.clone(),
                    operation: f.operation.clone(),
                    attempts: f.attempts,
                    last_error: f.last_error.clone(),
                    updated_at: f.updated_at,
                    class: "keyed".into(),
                    ends_by: None,
                    pending: None,
                })
        })
        .collect()
}
