//! What the journal shows people (`justonce journal`, `gc`, `resolve`, `forget`,
//! `abandon`). Field names are the same in the CLI's text and its `--json`; times
//! are milliseconds since the epoch here and RFC 3339 (UTC) when serialized.

use serde::Serialize;

use crate::clock::{serialize_rfc3339, serialize_rfc3339_opt};
use crate::determinism::Seed;
use crate::outcome::Outcome;

/// A recorded scope as people read it: who made the call and in which conversation.
#[derive(Serialize)]
struct ScopeView {
    principal: Option<String>,
    conversation: String,
}

/// Serializes a recorded scope as its two fields, `principal` and `conversation`
/// (see [`crate::call::split_scope`]), never as the JSON text the scope is stored as.
fn serialize_scope<T: AsRef<str>, S: serde::Serializer>(
    scope: &T,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let (principal, conversation) = crate::call::split_scope(scope.as_ref());
    ScopeView {
        principal,
        conversation,
    }
    .serialize(serializer)
}

/// The columns of an invocation as [`JournalEntry`] shows it, the same on both
/// backends: key, scope, tool, state, arguments, runs, replays, outcome,
/// created_at, completed_at, component, lease_owner, lease_expires_at,
/// retention_ms (read into [`JournalEntry::expires_at`]), entropy (the seed, read
/// into [`JournalEntry::generation`] by [`generation_of`]), and whether that
/// generation was cancelled ([`JournalEntry::cancelled`]).
pub(crate) const ENTRY_COLUMNS: &str = "key, scope, tool, state, arguments, runs, replays, outcome, created_at, completed_at, component, lease_owner, lease_expires_at, retention_ms, entropy, coalesce(cancelled_entropy = entropy, FALSE)";

/// The columns of an effect as [`JournalEffect`] shows it, in its order but for
/// `response` (eighth) and `last_error`.
pub(crate) const EFFECT_COLUMNS: &str = "seq, key, provider, class, operation, state, attempts, \
     response, last_error, resolution, created_at, updated_at, catalog_class";

/// When a record that completed at `completed_at`, journaled with the retention
/// window `retention_ms` (if it carries one), expires: [`JournalEntry::expires_at`].
pub(crate) fn expires_at(completed_at: Option<i64>, retention_ms: Option<i64>) -> Option<i64> {
    Some(completed_at?.saturating_add(retention_ms?))
}

/// The generation of a record whose journaled seed is `entropy` (hex), if it holds
/// one: [`JournalEntry::generation`].
pub(crate) fn generation_of(entropy: Option<String>) -> Option<u64> {
    Seed::from_hex(&entropy?).map(|seed| seed.generation())
}

/// A saved outcome in one line: `success`, `tool_error CODE: message`, or `trap
/// REASON: the first line of its message` (a backtrace never reaches the journal's
/// reader).
pub(crate) fn summary(stored: &str) -> String {
    let first_line = |s: &str| s.lines().next().unwrap_or_default().to_string();
    match Outcome::from_stored(stored) {
        Ok(Outcome::Success { .. }) => "success".into(),
        Ok(Outcome::ToolError { code, message, .. }) => {
            format!("tool_error {code}: {}", first_line(&message))
        }
        Ok(Outcome::Trap { reason, message }) => format!("trap {reason}: {}", first_line(&message)),
        Err(e) => format!("unreadable outcome: {e}"),
    }
}

/// Stored JSON text as a value (text that is not JSON as a string).
pub(crate) fn parse_json(text: Option<String>) -> Option<serde_json::Value> {
    text.map(|t| serde_json::from_str(&t).unwrap_or(serde_json::Value::String(t)))
}

/// An effect's state as people see it: one the host refused before anything was
/// sent (its saved answer is `{"denied": …}`) shows as `refused`, not `done`.
pub(crate) fn shown_state(state: String, response: Option<&serde_json::Value>) -> String {
    if state == "done" && response.is_some_and(|v| v.get("denied").is_some()) {
        "refused".into()
    } else {
        state
    }
}

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

/// Who decided a resolution of an unkeyed effect whose outcome was unknown:
/// journaled with it (in the operation's detail, `decided_by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DecidedBy {
    /// An operator: `justonce resolve` or the console.
    Operator,
    /// The effect's probe, a read-only question to the downstream the host asked
    /// at the call's retry.
    Probe,
    /// The person behind the agent (the call's principal), asked at the call's
    /// retry through the client's elicitation, where the tool opts in.
    Person,
}

impl DecidedBy {
    /// The name journaled and shown: `operator`, `probe` or `person`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Operator => "operator",
            Self::Probe => "probe",
            Self::Person => "person",
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
    /// The invocation's scope: its conversation, and the principal that made it
    /// over `serve --http`. Shown as two fields, `principal` (`null` for a local
    /// call) and `conversation`, as the call's log line names them.
    #[serde(flatten, serialize_with = "serialize_scope")]
    pub conversation: String,
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
    #[serde(serialize_with = "serialize_rfc3339")]
    pub updated_at: i64,
    /// `unkeyed`: a person resolves it (`justonce resolve`); `keyed`: a call stuck
    /// on it, which the next retry of the same call resumes under the same key (or
    /// `justonce abandon` closes).
    pub class: String,
    /// What can end an unkeyed one, as the guard journaled it at the claim
    /// (`NewEffect::ends_by`); `None` for one claimed before it was journaled.
    #[serde(skip)]
    pub ends_by: Option<String>,
    /// What an unkeyed one waits for, where the configuration is known (`journal
    /// --unresolved`): `probe UPSTREAM.TOOL`, asked at its call's next retry, or
    /// `person`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending: Option<String>,
}

/// One invocation with its effects, as `justonce journal` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct JournalEntry {
    /// The invocation key.
    pub key: String,
    /// The scope in which a repeat is a duplicate: the conversation, and the
    /// principal that made the call over `serve --http`. Shown as two fields,
    /// `principal` (`null` for a local call) and `conversation`, as the call's log
    /// line names them.
    #[serde(flatten, serialize_with = "serialize_scope")]
    pub conversation: String,
    /// The tool.
    pub tool: String,
    /// `running`, `incomplete` or `completed`.
    pub state: String,
    /// The canonical arguments the guest got (`None` for a record written before
    /// justonce stored them). Never a secret: credentials live in the host's service
    /// headers.
    pub arguments: Option<serde_json::Value>,
    /// How many times the guest was run for it.
    pub runs: u32,
    /// How many retries the journal answered with the saved outcome. A retry that a
    /// host process answered from its memory of recent outcomes is not counted, so
    /// the replay path stays free of writes: this is a lower bound.
    pub replays: u32,
    /// The tool-call ids that map to it.
    pub tool_call_ids: Vec<String>,
    /// The saved outcome, when completed.
    pub outcome: Option<serde_json::Value>,
    /// The outcome in one line (`success`, `tool_error CODE: message`, `trap REASON:
    /// first line of the message`), when completed.
    pub summary: Option<String>,
    /// When it was created (ms since the epoch).
    #[serde(serialize_with = "serialize_rfc3339")]
    pub created_at: i64,
    /// When its outcome was saved (ms since the epoch).
    #[serde(serialize_with = "serialize_rfc3339_opt")]
    pub completed_at: Option<i64>,
    /// When its record expires (ms since the epoch): its outcome's time plus the
    /// retention window it was journaled with. From then on the same call is a new
    /// one (it runs again, under new effect keys), whether or not `gc` removed the
    /// record yet. `None` while the call is open, and for a record journaled before
    /// records carried their window (the host's default window applies to it).
    #[serde(serialize_with = "serialize_rfc3339_opt")]
    pub expires_at: Option<i64>,
    /// Its effects, in order.
    pub effects: Vec<JournalEffect>,
    /// The digest (`sha256:…`) of the component of its latest run (`None` for a
    /// record written before justonce stored it).
    pub component: Option<String>,
    /// The lease owner of its run while `running` (it names the host, see
    /// [`crate::journal::Holder`]); `None` once released.
    pub lease_owner: Option<String>,
    /// When that lease ends (ms since the epoch), unless the run renews it.
    #[serde(serialize_with = "serialize_rfc3339_opt")]
    pub lease_expires_at: Option<i64>,
    /// Where it stands with its lease at the time it was read, in words ("running
    /// on H (pid P), lease until T" or "stopped: H (pid P)'s lease ended at T; the
    /// next retry of the same call resumes it"); filled in by
    /// [`JournalEntry::judged_at`], empty until then and for a call no host holds.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub holding: String,
    /// When it was judged (ms since the epoch; 0 until [`JournalEntry::judged_at`]).
    #[serde(skip)]
    pub judged: i64,
    /// The generation of the call this record is (its effect keys include it, see
    /// [`effect_key`](crate::keys::effect_key)): fixed when the call was first
    /// journaled; the same call made again once the record is gone is a new
    /// generation. `None` for a record journaled before records carried their seed
    /// (until a run of it journals one).
    #[serde(skip)]
    pub generation: Option<u64>,
    /// Whether its client cancelled this generation of the call (`tasks/cancel`, on
    /// any host: the cancel is journaled with the generation it was taken against).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cancelled: bool,
}

impl JournalEntry {
    /// Where it stands with its lease at `now` (ms).
    pub fn lease_status(&self, now: i64) -> super::LeaseStatus {
        super::LeaseStatus::of(
            &self.state,
            self.lease_owner.as_deref(),
            self.lease_expires_at,
            now,
        )
    }

    /// Fills in [`JournalEntry::holding`] as of `now` (ms).
    pub fn judged_at(mut self, now: i64) -> Self {
        self.holding = self.lease_status(now).sentence();
        self.judged = now;
        self
    }

    /// Whether its record is past its retention window at `now` (ms): see
    /// [`JournalEntry::expires_at`].
    pub fn expired(&self, now: i64) -> bool {
        self.expires_at.is_some_and(|at| now >= at)
    }

    /// Whether a running call's host stopped and its lease ran out by `now`.
    pub fn lease_ended(&self, now: i64) -> bool {
        matches!(self.lease_status(now), super::LeaseStatus::Ended { .. })
    }
}

/// The states a person filters calls by (`justonce journal --state`, the console),
/// with what each means. A call may be in several (`completed replayed`).
pub const CALL_STATES: &[(&str, &str)] = &[
    ("running", "a host runs it now, under a live lease"),
    (
        "stopped",
        "its host stopped and its lease ended: the next retry resumes it",
    ),
    (
        "incomplete",
        "suspended on an unknown outcome, a divergence or a question: a retry resumes it",
    ),
    (
        "awaiting",
        "the tool asked the user a question: the same call made again with the answers resumes it",
    ),
    ("completed", "its outcome is saved"),
    ("replayed", "a retry got the saved outcome"),
    (
        "unknown",
        "an effect's outcome is unknown (abandoned calls excluded)",
    ),
    ("failed", "a tool error or a trap"),
    ("abandoned", "closed by an operator"),
    (
        "expired",
        "past its retention window: the same call now runs again as a new one (gc removes the record)",
    ),
];

impl JournalEntry {
    /// The states of this call (see [`CALL_STATES`]) at `now` (ms): `running` only
    /// while its lease is live, `stopped` once it ended.
    pub fn states(&self, now: i64) -> Vec<&'static str> {
        let mut states = vec![match self.state.as_str() {
            "running" if self.lease_ended(now) => "stopped",
            "running" => "running",
            "incomplete" => "incomplete",
            _ => "completed",
        }];
        if self.replays > 0 {
            states.push("replayed");
        }
        if self.has_unknown_effect() {
            states.push("unknown");
        }
        if self.awaits_input() {
            states.push("awaiting");
        }
        match self.summary.as_deref() {
            Some(s) if s.starts_with("trap abandoned") => states.push("abandoned"),
            Some(s) if s.starts_with("trap") || s.starts_with("tool_error") => {
                states.push("failed")
            }
            _ => {}
        }
        if self.expired(now) {
            states.push("expired");
        }
        states
    }

    /// Whether the call is open on an effect that was attempted and has no answer
    /// and no person's resolution: its outcome is unknown.
    pub fn has_unknown_effect(&self) -> bool {
        self.state != "completed"
            && self.effects.iter().any(|e| {
                e.state == "pending"
                    && e.resolution.is_none()
                    && e.attempts > 0
                    && e.provider != crate::ask::PROVIDER
            })
    }

    /// Whether the call is open on a question the tool asked the user (the effect
    /// `user.elicit`), whose answers have not come: not an unknown outcome, since
    /// nothing left the host but the question.
    pub fn awaits_input(&self) -> bool {
        self.state != "completed"
            && self
                .effects
                .iter()
                .any(|e| e.state == "pending" && e.provider == crate::ask::PROVIDER)
    }
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
    /// `pending` (no definitive answer yet), `done` (answered), or `refused` (the host
    /// refused it before anything was sent; the saved answer is `{"denied": …}`).
    pub state: String,
    /// Attempts made.
    pub attempts: u32,
    /// The saved answer, when done.
    pub response: Option<serde_json::Value>,
    /// Why the last attempt's outcome was unknown, if it was.
    pub last_error: Option<String>,
    /// What a person decided about it (`performed`, `not_performed`), if anything.
    pub resolution: Option<String>,
    /// When it was journaled, before its first attempt (ms since the epoch).
    #[serde(serialize_with = "serialize_rfc3339")]
    pub created_at: i64,
    /// When it was last touched (ms since the epoch).
    #[serde(serialize_with = "serialize_rfc3339")]
    pub updated_at: i64,
    /// What its provider (an upstream tool's catalog, the configuration) called it
    /// the last time a run met it, when that differs from `class`: `keyed`,
    /// `unkeyed`, `transactional` or `read`. The record wins (see
    /// [`JournalEffect::catalog_disagreement`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub catalog_class: Option<String>,
}

impl JournalEffect {
    /// The class its record holds and what its provider says now, in words, when
    /// they differ: "journaled as unkeyed; the catalog now says keyed; the record
    /// wins".
    pub fn catalog_disagreement(&self) -> Option<String> {
        let now = self.catalog_class.as_deref()?;
        Some(format!(
            "journaled as {}; the catalog now says {}; the record wins",
            self.class,
            class_in_words(now)
        ))
    }
}

#[cfg(test)]
impl JournalEffect {
    /// An unkeyed effect whose outcome is unknown, whose provider says
    /// `catalog_class` of it now, for the tests of what shows it.
    pub(crate) fn pending_unkeyed(catalog_class: Option<&str>) -> Self {
        Self {
            seq: 0,
            key: "e0".into(),
            provider: "sms".into(),
            class: "unkeyed".into(),
            operation: "send".into(),
            state: "pending".into(),
            attempts: 1,
            response: None,
            last_error: Some("timed out".into()),
            resolution: None,
            created_at: 0,
            updated_at: 0,
            catalog_class: catalog_class.map(str::to_owned),
        }
    }
}

/// What a provider's word for an effect's class means.
fn class_in_words(class: &str) -> &str {
    match class {
        "keyed" => "keyed (idempotent)",
        "read" => "read-only",
        other => other,
    }
}

/// What an operator did to a call (`justonce forget`, `abandon`, `resolve`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Removed the call's record, so the same call runs again (under new effect
    /// keys: the record's generation went with it).
    Forget,
    /// Closed the call with a saved `abandoned` outcome (a trap whose reason is
    /// `abandoned`), replayed to every retry.
    Abandon,
    /// Said whether one of the call's unkeyed effects whose outcome was unknown took
    /// effect (`justonce resolve`): the retry replays the answer given, or makes one
    /// more attempt under the same key.
    Resolve,
    /// Had a stopped call run again now, on a host of the person's choosing (the
    /// console's "resume now"): the host runs it under its own key, as the agent's
    /// retry would. Recorded before the run, with whose lease had ended.
    Resume,
}

impl Action {
    /// The name stored in the journal.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Forget => "forget",
            Self::Abandon => "abandon",
            Self::Resolve => "resolve",
            Self::Resume => "resume",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Self> {
        match s {
            "forget" => Some(Self::Forget),
            "abandon" => Some(Self::Abandon),
            "resolve" => Some(Self::Resolve),
            "resume" => Some(Self::Resume),
            _ => None,
        }
    }
}

/// Who asked for an operation, and whether they overrode its safety check.
#[derive(Debug, Clone, Copy)]
pub struct Operator<'a> {
    /// Who (`--by`, else `$USER`).
    pub by: &'a str,
    /// Also a call that is running, or one with an effect whose outcome is unknown.
    pub force: bool,
    /// When (ms since the epoch).
    pub now: i64,
}

/// One operation in the journal's audit trail.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JournalOperation {
    /// The invocation key it was about.
    pub key: String,
    /// What was done.
    pub action: Action,
    /// Who did it.
    pub by: String,
    /// When (ms since the epoch).
    #[serde(serialize_with = "serialize_rfc3339")]
    pub at: i64,
    /// What the call was when it was done: its state, whether it was forced, and
    /// its effects as they stood (for `resolve`: the effect, what the person said,
    /// and the answer they gave).
    pub detail: serde_json::Value,
}

/// What `forget`, `abandon` or `resolve` did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "result", content = "operation", rename_all = "snake_case")]
pub enum Operated {
    /// Done now, and recorded.
    Done(JournalOperation),
    /// Nothing to do: an earlier operation did it already (a second `abandon`, or a
    /// `forget` of a key whose record an earlier `forget` removed). Not recorded
    /// again.
    AlreadyDone(JournalOperation),
}

/// One call's whole story, as `justonce journal KEY` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct CallStory {
    /// The invocation key.
    pub key: String,
    /// The record, unless there is none (never made, expired, or forgotten).
    pub entry: Option<JournalEntry>,
    /// What operators did to it, oldest first (kept after a `forget`).
    pub operations: Vec<JournalOperation>,
}

impl CallStory {
    /// The story with its record judged at `now` (see [`JournalEntry::judged_at`]).
    pub fn judged_at(mut self, now: i64) -> Self {
        self.entry = self.entry.map(|e| e.judged_at(now));
        self
    }
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
    /// Cancels taken before their call had a record, whose call never made one,
    /// older than the cutoff.
    pub early_cancels: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_expires_its_window_after_its_outcome_and_an_open_one_never() {
        assert_eq!(expires_at(Some(5), Some(100)), Some(105));
        assert_eq!(expires_at(None, Some(100)), None, "open: no outcome yet");
        assert_eq!(
            expires_at(Some(5), None),
            None,
            "journaled without its window: the host's default decides"
        );
        assert_eq!(expires_at(Some(i64::MAX - 1), Some(100)), Some(i64::MAX));
    }
}
