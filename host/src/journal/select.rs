//! Which calls a person asked to see, the same for `justonce journal` and the
//! console: all of them, one conversation's, one principal's, or one principal's
//! conversation (calls made over `serve --http` are scoped by their principal).

use super::{Journal, JournalEntry, UnresolvedEffect};
use crate::call::{bare_scope, principal_prefix, principal_scope};
use crate::error::Result;

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
            (None, conversation) => store.entries(conversation.map(bare_scope).as_deref(), limit),
            (Some(principal), Some(conversation)) => {
                store.entries(Some(&principal_scope(principal, conversation)), limit)
            }
            (Some(principal), None) => store.entries_by_prefix(&principal_prefix(principal), limit),
        }
    }

    /// The unresolved effects (see [`Journal::unresolved`]) of the calls selected.
    pub fn unresolved(&self, store: &dyn Journal, now: i64) -> Result<Vec<UnresolvedEffect>> {
        let mut effects = store.unresolved(now)?;
        match (self.principal, self.conversation) {
            (None, None) => {}
            (principal, Some(conversation)) => {
                let scope = match principal {
                    Some(principal) => principal_scope(principal, conversation),
                    None => bare_scope(conversation).into_owned(),
                };
                effects.retain(|e| e.conversation == scope);
            }
            (Some(principal), None) => {
                let prefix = principal_prefix(principal);
                effects.retain(|e| e.conversation.starts_with(&prefix));
            }
        }
        Ok(effects)
    }
}
