//! How the console reads a journal entry: who made it and in which conversation,
//! the states a person filters by, and the filters of the calls page.

use std::collections::HashMap;

use super::html::{badge, relative};
use crate::journal::{JournalEntry, LeaseStatus};

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

/// The state of `entry` as badges a person reads at a glance: one for where the call
/// stands (`running`, `stopped`, `incomplete`, or how it ended: `completed`,
/// `failed`, `abandoned`), one for an unknown outcome, one for a question awaiting
/// the user, one for a record past its window (`expired`), and a plain count of the
/// retries that got the saved outcome (`replayed 2×`) — so a failure that was
/// replayed reads `failed` `replayed 1×`, never "completed replayed failed".
pub fn badges(entry: &JournalEntry) -> String {
    let s = states(entry);
    let meaning = |state: &str| {
        STATES
            .iter()
            .find(|(name, _)| *name == state)
            .map_or("", |(_, meaning)| *meaning)
    };
    let main = match s.first().copied().unwrap_or("completed") {
        "completed" if s.contains(&"abandoned") => ("abandoned", "abandoned"),
        "completed" if s.contains(&"failed") => ("failed", "failed"),
        other => (other, other),
    };
    let mut out = match main.0 {
        "failed" => badge(
            "failed",
            "failed",
            "completed with a tool error or a trap: that failure is the saved outcome every retry gets",
        ),
        "stopped" if handed_over(entry) => badge("stopped", "handed over", &entry.holding),
        "stopped" => badge("stopped", "stopped", &entry.holding),
        "running" => badge("running", "running", &entry.holding),
        class => badge(class, main.1, meaning(class)),
    };
    if s.contains(&"unknown") {
        out.push(' ');
        out.push_str(&badge("unknown", "unknown outcome", meaning("unknown")));
    }
    if s.contains(&"awaiting") {
        out.push(' ');
        out.push_str(&badge("awaiting", "awaiting the user", meaning("awaiting")));
    }
    if s.contains(&"expired") {
        out.push(' ');
        out.push_str(&badge("expired", "expired", meaning("expired")));
    }
    if entry.replays > 0 {
        out.push(' ');
        out.push_str(&badge(
            "replayed",
            &format!("replayed {}×", entry.replays),
            &format!(
                "{} retr{} got the saved outcome instead of a new run",
                entry.replays,
                if entry.replays == 1 { "y" } else { "ies" }
            ),
        ));
    }
    out
}

/// Whether `entry`'s host handed it over as it drained (its lease ended under a
/// handed-over owner) rather than stopping with it.
fn handed_over(entry: &JournalEntry) -> bool {
    matches!(
        entry.lease_status(entry.judged),
        LeaseStatus::Ended { holder: Some(h), .. } if h.handed_over
    )
}

/// Why `entry` needs a person now, in one sentence, if it does: a host stopped
/// holding it, an effect's outcome is unknown, or it stopped on a divergence.
pub fn attention(entry: &JournalEntry) -> Option<String> {
    let s = states(entry);
    if s.contains(&"stopped") {
        let (who, when) = match entry.lease_status(entry.judged) {
            LeaseStatus::Ended { holder, at } => (
                holder.map_or_else(|| "its host".into(), |h| h.label()),
                at.map(|at| format!(" {}", relative(at, entry.judged)))
                    .unwrap_or_default(),
            ),
            _ => ("its host".into(), String::new()),
        };
        if handed_over(entry) {
            return Some(format!(
                "Handed over: {who} drained and released it unfinished{when}; nobody runs it. \
                 Resume it now, or the agent's next retry will."
            ));
        }
        return Some(format!(
            "Its host stopped: {who}'s lease ended{when} and nobody runs it. Resume it now, \
             or the agent's next retry will."
        ));
    }
    if s.contains(&"unknown") {
        let unkeyed = entry.effects.iter().any(|e| {
            e.state == "pending" && e.resolution.is_none() && e.attempts > 0 && e.class == "unkeyed"
        });
        return Some(if unkeyed {
            "An unkeyed effect's outcome is unknown: say whether it happened (resolve), then \
             retry the call."
                .into()
        } else {
            "An effect's outcome is unknown: resuming the call sends it again under the same \
             idempotency key, which the downstream deduplicates."
                .into()
        });
    }
    if s.contains(&"incomplete")
        && entry
            .effects
            .iter()
            .any(|e| e.state == "pending" && e.resolution.is_some())
    {
        return Some(
            "An operator resolved its effect: resume it now, or the agent's next retry \
             finishes it."
                .into(),
        );
    }
    if s.contains(&"awaiting") {
        // It waits for the user, not for an operator: the client's next call with
        // the answers resumes it.
        return None;
    }
    if s.contains(&"incomplete") {
        return Some(
            "Suspended (a divergence or an unknown outcome): its story says which; a retry \
             resumes it."
                .into(),
        );
    }
    None
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

    fn entry(state: &str, summary: Option<&str>, replays: u32) -> JournalEntry {
        JournalEntry {
            key: "k".into(),
            conversation: "c".into(),
            tool: "t".into(),
            state: state.into(),
            arguments: None,
            runs: 1,
            replays,
            tool_call_ids: Vec::new(),
            outcome: None,
            summary: summary.map(str::to_owned),
            created_at: 0,
            completed_at: None,
            expires_at: None,
            effects: Vec::new(),
            component: None,
            lease_owner: Some("web-a@41-n/0".into()),
            lease_expires_at: Some(1000),
            holding: String::new(),
            judged: 0,
            generation: None,
            cancelled: false,
        }
    }

    #[test]
    fn a_replayed_failure_reads_failed_and_replayed_not_completed() {
        let failed = badges(&entry("completed", Some("tool_error x: y"), 2));
        assert!(failed.contains(">failed</span>"), "{failed}");
        assert!(failed.contains(">replayed 2×</span>"), "{failed}");
        assert!(!failed.contains(">completed<"), "{failed}");
        let done = badges(&entry("completed", Some("success"), 0));
        assert!(
            done.contains("b-completed") && !done.contains("replayed"),
            "{done}"
        );
    }

    #[test]
    fn a_call_past_its_window_reads_expired_from_that_moment_on() {
        let mut done = entry("completed", Some("success"), 0);
        done.completed_at = Some(100);
        done.expires_at = Some(1_100);
        assert_eq!(done.states(1_099), ["completed"]);
        assert_eq!(done.states(1_100), ["completed", "expired"]);
        assert!(!badges(&done.clone().judged_at(1_099)).contains(">expired<"));
        let shown = badges(&done.judged_at(1_100));
        assert!(shown.contains("b-completed"), "{shown}");
        assert!(shown.contains(">expired</span>"), "{shown}");
    }

    #[test]
    fn a_call_whose_hosts_lease_ended_needs_attention_naming_the_host() {
        let running = entry("running", None, 0).judged_at(500);
        assert_eq!(attention(&running), None, "its lease is live");
        assert!(badges(&running).contains(">running<"));
        let stopped = entry("running", None, 0).judged_at(3000);
        let why = attention(&stopped).expect("stopped");
        assert!(
            why.contains("web-a (pid 41)'s lease ended 2 s ago"),
            "{why}"
        );
        assert!(badges(&stopped).contains(">stopped<"));
        assert!(!why.contains("Handed over"), "{why}");
    }

    #[test]
    fn a_call_its_host_handed_over_reads_handed_over_not_stopped() {
        let mut handed = entry("running", None, 0).judged_at(3000);
        handed.lease_owner = Some("web-a@41-n/0!handed-over".into());
        let why = attention(&handed).expect("handed over");
        assert!(
            why.starts_with(
                "Handed over: web-a (pid 41) drained and released it unfinished 2 s ago"
            ),
            "{why}"
        );
        let shown = badges(&handed);
        assert!(shown.contains(">handed over<"), "{shown}");
        assert!(!shown.contains(">stopped<"), "{shown}");
    }

    #[test]
    fn a_call_awaiting_the_users_answer_says_so_and_needs_no_operator() {
        let mut waiting = entry("incomplete", None, 0);
        waiting.lease_owner = None;
        waiting.effects.push(crate::journal::JournalEffect {
            seq: 0,
            key: "e".into(),
            provider: "user".into(),
            class: "keyed".into(),
            operation: "elicit".into(),
            state: "pending".into(),
            attempts: 1,
            response: None,
            last_error: Some("awaiting the user's answer".into()),
            resolution: None,
            created_at: 0,
            updated_at: 0,
            catalog_class: None,
        });
        assert_eq!(waiting.states(0), ["incomplete", "awaiting"]);
        assert_eq!(attention(&waiting), None);
        let shown = badges(&waiting);
        assert!(shown.contains(">awaiting the user<"), "{shown}");
        assert!(!shown.contains(">unknown outcome<"), "{shown}");

        // The opposite: the same pending effect to a downstream is an unknown outcome.
        waiting.effects[0].provider = "payments".into();
        assert_eq!(waiting.states(0), ["incomplete", "unknown"]);
        assert!(attention(&waiting).is_some());
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
