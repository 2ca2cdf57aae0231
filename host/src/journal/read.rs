//! What the journal shows people (`justonce journal`, `gc`, `resolve`).

use serde::Serialize;

/// Counts of the journal's commits and fsyncs, for benchmarks and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JournalStats {
    /// Transactions committed.
    pub commits: u64,
    /// fsyncs made at durable points (one covers every caller waiting).
    pub syncs: u64,
}

/// What a person decided about a pending unkeyed effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Resolution {
    /// It happened: the effect is finished with the answer the person gave, and the
    /// resumed call replays that answer without calling the provider.
    Performed,
    /// It did not happen: the resumed call makes one more attempt under the same key.
    NotPerformed,
}

impl Resolution {
    /// The name stored in the journal.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Performed => "performed",
            Self::NotPerformed => "not_performed",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Self> {
        match s {
            "performed" => Some(Self::Performed),
            "not_performed" => Some(Self::NotPerformed),
            _ => None,
        }
    }
}

/// A pending unkeyed effect whose run has stopped: it waits for a person.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UnresolvedEffect {
    /// The effect key (what `justonce resolve` takes).
    pub key: String,
    /// The invocation it belongs to.
    pub invocation: String,
    /// The invocation's conversation scope.
    pub scope: String,
    /// The tool that asked for it.
    pub tool: String,
    /// Its position in the invocation.
    pub seq: u32,
    /// The provider.
    pub provider: String,
    /// The operation.
    pub operation: String,
    /// Attempts made.
    pub attempts: u32,
    /// Why the last attempt's outcome was unknown, if known.
    pub last_error: Option<String>,
    /// When it was last touched (ms since the epoch).
    pub updated_at: i64,
}

/// One invocation with its effects, as `justonce journal` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct JournalEntry {
    /// The invocation key.
    pub key: String,
    /// The conversation scope.
    pub scope: String,
    /// The tool.
    pub tool: String,
    /// `running`, `incomplete` or `completed`.
    pub state: String,
    /// How many times the guest was run for it.
    pub runs: u32,
    /// The tool-call ids that map to it.
    pub tool_call_ids: Vec<String>,
    /// The saved outcome, when completed.
    pub outcome: Option<serde_json::Value>,
    /// When it was created (ms since the epoch).
    pub created_at: i64,
    /// Its effects, in order.
    pub effects: Vec<JournalEffect>,
}

/// One effect, as `justonce journal` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct JournalEffect {
    /// Position in the invocation.
    pub seq: u32,
    /// The effect key.
    pub key: String,
    /// Provider name.
    pub provider: String,
    /// Provider class.
    pub class: String,
    /// Operation.
    pub operation: String,
    /// `pending` or `done`.
    pub state: String,
    /// Attempts made.
    pub attempts: u32,
    /// The saved answer, when done.
    pub response: Option<serde_json::Value>,
    /// Why the last attempt's outcome was unknown, if it was.
    pub last_error: Option<String>,
    /// What a person decided about it (`performed`, `not_performed`), if anything.
    pub resolution: Option<String>,
}

/// What `gc` removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct GcReport {
    /// Invocation records removed.
    pub invocations: u64,
    /// Effect records removed with them.
    pub effects: u64,
    /// Tool-call-id aliases removed with them.
    pub aliases: u64,
    /// Outbox messages delivered (or given up) before the cutoff.
    pub outbox: u64,
    /// Rows of the built-in test mailbox older than the cutoff.
    pub mailbox: u64,
}
