//! How the console reads a journal entry: who made it and in which conversation,
//! the states a person filters by, and the filters of the calls page.

use std::collections::HashMap;

use crate::journal::JournalEntry;

/// The most calls a page lists or a search scans.
pub const MAX_LIMIT: u32 = 1000;

/// The calls page's default length.
pub const DEFAULT_LIMIT: u32 = 100;

/// The states the calls page filters by, with what each means (the same as
/// `justonce journal --state`).
pub const STATES: &[(&str, &str)] = crate::journal::CALL_STATES;

/// The principal (calls over `serve --http`) and the conversation of a scope: the
/// JSON array `["principal","conversation"]`, or a bare conversation (see
/// `crate::call::bare_scope`).
pub fn principal_and_conversation(scope: &str) -> (Option<String>, String) {
    crate::call::split_scope(scope)
}

/// The states of `entry` a person filters by (see [`STATES`]), as judged when it was
/// read ([`JournalEntry::judged_at`]: a running call whose lease ended is `stopped`).
pub fn states(entry: &JournalEntry) -> Vec<&'static str> {
    entry.states(entry.judged)
}

/// The filters of the calls page, from its query string.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Filters {
    /// Only this tool.
    pub tool: Option<String>,
    /// Only calls in this state (see [`STATES`]).
    pub state: Option<String>,
    /// Only this principal's calls.
    pub principal: Option<String>,
    /// Only this conversation.
    pub conversation: Option<String>,
    /// An invocation key, effect key (the `Idempotency-Key` sent downstream) or
    /// tool-call id.
    pub search: Option<String>,
    /// At most this many calls.
    pub limit: u32,
}

impl Filters {
    /// The filters of `query` (empty values are no filter).
    pub fn parse(query: &HashMap<String, String>) -> Self {
        let given = |name: &str| {
            query
                .get(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        Self {
            tool: given("tool"),
            state: given("state"),
            principal: given("principal"),
            conversation: given("conversation"),
            search: given("q"),
            limit: given("limit")
                .and_then(|l| l.parse().ok())
                .unwrap_or(DEFAULT_LIMIT)
                .clamp(1, MAX_LIMIT),
        }
    }

    /// Whether `entry` passes the tool, state and search filters (principal and
    /// conversation select what the journal reads).
    pub fn keeps(&self, entry: &JournalEntry) -> bool {
        self.tool.as_ref().is_none_or(|t| &entry.tool == t)
            && self
                .state
                .as_ref()
                .is_none_or(|s| states(entry).contains(&s.as_str()))
            && self.search.as_ref().is_none_or(|q| {
                &entry.key == q
                    || entry.tool_call_ids.iter().any(|id| id == q)
                    || entry.effects.iter().any(|e| &e.key == q)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_principals_scope_is_split_and_a_bare_conversation_kept() {
        let scope = crate::call::principal_scope("alice", "c[1]");
        assert_eq!(
            principal_and_conversation(&scope),
            (Some("alice".into()), "c[1]".into())
        );
        assert_eq!(principal_and_conversation("[x"), (None, "[x".into()));
        assert_eq!(
            principal_and_conversation("default"),
            (None, "default".into())
        );
    }

    #[test]
    fn filters_ignore_empty_values_and_bound_the_limit() {
        let query: HashMap<String, String> =
            [("tool", " "), ("state", "running"), ("limit", "99999")]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
        let filters = Filters::parse(&query);
        assert_eq!(filters.tool, None);
        assert_eq!(filters.state.as_deref(), Some("running"));
        assert_eq!(filters.limit, MAX_LIMIT);
    }
}
