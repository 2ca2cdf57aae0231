//! The errors a caller of the host can tell apart.
//!
//! Mismatch, in-progress, outcome-unknown and divergence mean different things to an
//! agent, so each is its own variant with its own exit code and JSON `kind`.

use std::path::PathBuf;

use crate::ask::Question;
use crate::keys::InvocationKey;

/// Whose fault a failed load is: the tool author's (a bad file, a bad path: exit code
/// 2) or the host's (exit code 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadFault {
    /// The file does not exist, is not a component, is built for the wrong target,
    /// imports a denied interface, or describes itself badly: fix the tool or the path.
    Input,
    /// The host could not read or prepare a component that may be fine.
    Host,
}

/// What can end an unknown outcome, and so what the agent is told to do about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndsBy {
    /// Retrying the same call: a keyed effect is sent again under its key (the
    /// downstream deduplicates), a read is made again.
    Retry,
    /// Retrying the same call runs the effect's probe (a read-only question to the
    /// downstream, see docs/gateway.md), which may say whether it happened: an
    /// unkeyed effect whose probe has not decided yet (it erred or timed out).
    Probe,
    /// Retrying the same call asks the person behind the agent (through the
    /// client's elicitation) whether it happened: an unkeyed effect no probe decides
    /// whose tool opts in (`ask_person`).
    AskPerson,
    /// Only a person: an unkeyed effect no probe can decide. A retry changes nothing
    /// until an operator resolves it (`justonce resolve`, the console).
    Person,
}

impl EndsBy {
    /// Its name in the agent's JSON (`ends_by`): `retry`, `probe`, `ask_person` or
    /// `person`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Retry => "retry",
            Self::Probe => "probe",
            Self::AskPerson => "ask_person",
            Self::Person => "person",
        }
    }

    /// Whether retrying the same call can change anything.
    pub fn retry_helps(self) -> bool {
        self != Self::Person
    }

    /// The end of an `outcome_unknown` message about call `key`: what ends it.
    fn what_ends_it(self, key: &InvocationKey) -> String {
        match self {
            Self::Retry => "retrying the same call is safe".into(),
            Self::Probe => "retrying the same call is safe: it first asks the downstream (the effect's probe) whether it happened".into(),
            Self::AskPerson => "retrying the same call is safe: it first asks the user (through the client's elicitation) whether it happened".into(),
            Self::Person => format!(
                "retrying the same call is safe but changes nothing until a person resolves it (`justonce journal {key}` shows the effect's key; then `justonce resolve EFFECT_KEY --performed` or `--not-performed`)"
            ),
        }
    }
}

/// Everything that can stop a tool call or the host itself.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No loaded tool has this name. Nothing was stored.
    #[error("unknown tool `{name}`; loaded tools: {available}")]
    UnknownTool {
        /// The name that was asked for.
        name: String,
        /// The names that are loaded, comma-separated.
        available: String,
    },

    /// The tool is one the host offers at times but cannot call now: an upstream MCP
    /// server's, while that server is starting or failing. Nothing was sent or
    /// stored; the same call may be retried (it goes through once the server is
    /// ready).
    #[error(
        "`{tool}` was not performed: {reason}; nothing was sent or saved, and the same call may be retried"
    )]
    Unavailable {
        /// The name that was asked for.
        tool: String,
        /// Why, naming the server and its state or last error.
        reason: String,
    },

    /// The arguments were rejected before the tool ran. Nothing was stored.
    #[error("invalid arguments for `{tool}`: {reason}")]
    InvalidArguments {
        /// The tool the arguments were for.
        tool: String,
        /// What is wrong with them.
        reason: String,
    },

    /// A caller-chosen idempotency key is not acceptable.
    #[error("invalid idempotency key: {0}")]
    InvalidKey(String),

    /// The key (or tool-call id) was used before with different arguments. Nothing ran
    /// and nothing was stored.
    #[error(
        "idempotency key {key} was used before with different arguments; nothing was run (use a new key or the original arguments)"
    )]
    Mismatch {
        /// The key in conflict.
        key: InvocationKey,
    },

    /// The same call is running elsewhere and did not finish within the wait bound.
    /// Retrying the same call later is safe.
    #[error("call {key} is still in progress elsewhere; retry the same call later")]
    InProgress {
        /// The invocation that is running.
        key: InvocationKey,
    },

    /// Every call slot of the runtime stayed taken (by calls running to their
    /// deadlines) while this call waited. Nothing ran; retrying the same call later is
    /// safe.
    #[error(
        "the host is busy: every call slot stayed taken for {} ms, so call {key} did not run; retry the same call later",
        waited.as_millis()
    )]
    Busy {
        /// The invocation that did not run.
        key: InvocationKey,
        /// How long it waited for a slot.
        waited: std::time::Duration,
    },

    /// An effect's outcome is still unknown after the retry budget. The invocation is
    /// kept open; retrying the same call resumes it under the same keys, and ends it
    /// where `ends_by` says a retry can.
    #[error(
        "the outcome of effect #{seq} ({provider}) of call {key} is unknown: {reason}; {}",
        ends_by.what_ends_it(key)
    )]
    OutcomeUnknown {
        /// The invocation that was left open.
        key: InvocationKey,
        /// The effect's position in the invocation.
        seq: u32,
        /// The provider the effect went to.
        provider: String,
        /// Why the outcome is unknown.
        reason: String,
        /// What can end it: a retry, a retry that runs the effect's probe, or only a
        /// person.
        ends_by: EndsBy,
    },

    /// An effect was known not to be performed: the host's configuration refuses it
    /// (the tool is not on the allowlist, no such service or provider) or the
    /// downstream refused the connection before anything was sent. Nothing is saved
    /// as the call's outcome; the same call may succeed later (once the configuration
    /// is fixed, or the downstream is back), resuming under the same keys.
    #[error(
        "effect #{seq} ({provider}) of call {key} was not performed: {reason}; nothing was saved, and the same call may be retried"
    )]
    NotPerformed {
        /// The invocation, left resumable.
        key: InvocationKey,
        /// The effect's position.
        seq: u32,
        /// The provider it went to.
        provider: String,
        /// Why it was not performed.
        reason: String,
    },

    /// A resumed invocation asked for a different effect than its journal holds at
    /// the same position. Nothing was performed.
    #[error("call {key} diverged from its journal at effect #{seq}: {detail}")]
    Divergence {
        /// The invocation that diverged.
        key: InvocationKey,
        /// The position at which it diverged.
        seq: u32,
        /// What differed.
        detail: String,
    },

    /// The tool asked the person behind the agent and the answers come with a later
    /// request: the run stopped at the question, nothing was saved as the call's
    /// outcome, and the invocation waits for the answers (it never expires). The same
    /// call made again with the answers (and `state`) resumes it.
    #[error(
        "call {key} waits for the user's answer to question #{seq}; call it again with the answers"
    )]
    InputRequired {
        /// The invocation, suspended.
        key: InvocationKey,
        /// The asking effect's position.
        seq: u32,
        /// What the tool asks.
        questions: Vec<Question>,
        /// What an upstream MCP server asked of the client besides questions
        /// (sampling, roots), answered with the same later request.
        requests: Vec<crate::ask::UpstreamRequest>,
        /// The request state a client returns with the answers; empty when there
        /// is none to return (an upstream's request during a read, which journals
        /// nothing to tie it to).
        state: String,
    },

    /// The tool asked the person behind the agent, and this caller cannot be asked.
    /// Nothing was saved as the call's outcome; the same call from a client that can
    /// answer resumes it.
    #[error("tool `{tool}` asks the user a question, and {reason}")]
    InputUnavailable {
        /// The tool that asked.
        tool: String,
        /// Why the caller cannot be asked.
        reason: String,
    },

    /// A request answered a question with a request state this host did not make (it
    /// was tampered with or forged). Nothing was saved.
    #[error("invalid request state: {0}")]
    InputStateInvalid(String),

    /// A component could not be loaded.
    #[error("cannot load tool component {}: {reason}", path.display())]
    Load {
        /// Where the component came from.
        path: PathBuf,
        /// Why it was refused.
        reason: String,
        /// Whether the component (or its path) is at fault, or the host.
        fault: LoadFault,
    },

    /// Two loaded components describe themselves with the same tool name.
    #[error("two components provide the tool `{name}`: {} and {}", first.display(), second.display())]
    DuplicateTool {
        /// The tool name.
        name: String,
        /// The component loaded first.
        first: PathBuf,
        /// The component loaded second.
        second: PathBuf,
    },

    /// The journal database failed. [`Error::kind`] tells a corrupt file, a full disk
    /// and a read-only one apart; in each case the failed transaction was rolled back.
    #[error("journal database {}{}: {source}", path.display(), store_problem(source))]
    Store {
        /// The database file.
        path: PathBuf,
        /// What SQLite said.
        #[source]
        source: rusqlite::Error,
    },

    /// The PostgreSQL journal failed: the database is unreachable, a statement timed
    /// out, or it refused a statement. The failed transaction was rolled back; a
    /// connection that broke is replaced on the next call. `target` never holds the
    /// password.
    #[error("journal database {target}: {}", postgres_problem(source))]
    Postgres {
        /// `postgres://user@host:port/db`, without the password.
        target: String,
        /// What the client or the server said.
        #[source]
        source: postgres::Error,
    },

    /// The journal database was written by a newer justonce.
    #[error(
        "journal database {} has schema version {found}, newer than this justonce supports ({supported}); upgrade justonce",
        path.display()
    )]
    NewerSchema {
        /// The database file.
        path: PathBuf,
        /// The version found in the file.
        found: i64,
        /// The newest version this build knows.
        supported: i64,
    },

    /// Another host took over this invocation while it was running here (its lease
    /// expired). This host's result was discarded; retrying the same call returns the
    /// outcome of the host that took over.
    #[error("call {key} was taken over by another host while running; retry the same call")]
    LeaseLost {
        /// The invocation.
        key: InvocationKey,
    },

    /// A person's resolution of a pending effect was refused (`justonce resolve`).
    #[error("cannot resolve effect {effect}: {reason}")]
    CannotResolve {
        /// The effect key given.
        effect: String,
        /// Why it cannot be resolved.
        reason: String,
    },

    /// An operator's `forget` or `abandon` of a call was refused; nothing changed.
    #[error("cannot {action} call {key}: {reason}")]
    CannotOperate {
        /// What was asked: `forget` or `abandon`.
        action: &'static str,
        /// The call.
        key: InvocationKey,
        /// Why it is refused.
        reason: String,
    },

    /// A provider was registered ([`crate::HostBuilder::provider`]) under a name the
    /// host keeps for its own effects. Nothing was opened.
    #[error(
        "the provider name `{name}` is reserved: {reason}; register the provider under another name"
    )]
    ReservedProvider {
        /// The name given.
        name: String,
        /// What the host keeps it for.
        reason: &'static str,
    },

    /// The configuration file is unreadable, or has an unknown key or a bad value.
    #[error("configuration {}: {reason}", path.display())]
    Config {
        /// The configuration file.
        path: PathBuf,
        /// What is wrong, naming the key.
        reason: String,
    },

    /// An fsync of the journal failed earlier in this process: what was written since
    /// the last one that succeeded may never reach the disk, and a later fsync that
    /// returns OK proves nothing (the kernel may have dropped the pages). Every later
    /// write is refused until the host restarts and reopens the journal.
    #[error(
        "journal {} refuses writes: an fsync of it failed ({reason}), so what it wrote since may be lost; restart the host once the disk is healthy",
        path.display()
    )]
    JournalPoisoned {
        /// The journal file.
        path: PathBuf,
        /// The failed fsync's error.
        reason: String,
    },

    /// A fault of the host itself (the WebAssembly runtime, I/O).
    #[error("host failure: {0:#}")]
    Host(#[from] anyhow::Error),
}

impl From<wasmtime::Error> for Error {
    fn from(e: wasmtime::Error) -> Self {
        Self::Host(anyhow::anyhow!("{e:#}"))
    }
}

impl Error {
    /// A short machine-readable name, used as `kind` in JSON output.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::UnknownTool { .. } => "unknown_tool",
            Self::InvalidArguments { .. } => "invalid_arguments",
            Self::InvalidKey(_) => "invalid_key",
            Self::Mismatch { .. } => "mismatch",
            Self::InProgress { .. } => "in_progress",
            Self::Busy { .. } => "busy",
            Self::OutcomeUnknown { .. } => "outcome_unknown",
            Self::NotPerformed { .. } | Self::Unavailable { .. } => "not_performed",
            Self::Divergence { .. } => "divergence",
            Self::InputRequired { .. } => "input_required",
            Self::InputUnavailable { .. } => "input_unavailable",
            Self::InputStateInvalid(_) => "input_state_invalid",
            Self::Load {
                fault: LoadFault::Input,
                ..
            } => "invalid_component",
            Self::Load { .. } => "load_failed",
            Self::DuplicateTool { .. } => "duplicate_tool",
            Self::Store { source, .. } => store_kind(source),
            Self::Postgres { source, .. } => postgres_kind(source),
            Self::NewerSchema { .. } => "newer_schema",
            Self::LeaseLost { .. } => "lease_lost",
            Self::CannotResolve { .. } => "cannot_resolve",
            Self::CannotOperate { .. } => "cannot_operate",
            Self::Config { .. } | Self::ReservedProvider { .. } => "invalid_config",
            Self::JournalPoisoned { .. } | Self::Host(_) => "host_failed",
        }
    }

    /// Whether retrying the very same call later is safe and may succeed.
    pub fn retry_safe(&self) -> bool {
        matches!(
            self,
            Self::InProgress { .. }
                | Self::Busy { .. }
                | Self::OutcomeUnknown { .. }
                | Self::NotPerformed { .. }
                | Self::Unavailable { .. }
                | Self::InputRequired { .. }
                | Self::InputUnavailable { .. }
                | Self::LeaseLost { .. }
        ) || matches!(self, Self::Postgres { source, .. } if postgres_kind(source) == "store_unavailable")
    }

    /// The invocation key the error is about, where there is one.
    pub fn key(&self) -> Option<&InvocationKey> {
        match self {
            Self::Mismatch { key }
            | Self::InProgress { key }
            | Self::Busy { key, .. }
            | Self::OutcomeUnknown { key, .. }
            | Self::NotPerformed { key, .. }
            | Self::Divergence { key, .. }
            | Self::InputRequired { key, .. }
            | Self::LeaseLost { key }
            | Self::CannotOperate { key, .. } => Some(key),
            _ => None,
        }
    }

    /// The JSON an agent gets for a call that produced no outcome:
    /// `{"ok": false, "error": {"kind", "message", "retry_safe"}, "replayed": false, "key"}`.
    ///
    /// An `outcome_unknown` error also says what can end it (`ends_by`: `retry`,
    /// `probe` or `person`).
    pub fn to_agent_json(&self) -> serde_json::Value {
        let mut json = serde_json::json!({
            "ok": false,
            "error": {
                "kind": self.kind(),
                "message": self.to_string(),
                "retry_safe": self.retry_safe(),
            },
            "replayed": false,
            "key": self.key().map(|k| k.to_string()),
        });
        if let Self::OutcomeUnknown { ends_by, .. } = self {
            json["error"]["ends_by"] = ends_by.as_str().into();
        }
        json
    }

    pub(crate) fn store(path: &std::path::Path, source: rusqlite::Error) -> Self {
        Self::Store {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// The `kind` of a journal failure, from SQLite's error code.
fn store_kind(source: &rusqlite::Error) -> &'static str {
    use rusqlite::ErrorCode as Code;
    match source.sqlite_error_code() {
        Some(Code::DatabaseCorrupt | Code::NotADatabase) => "store_corrupt",
        Some(Code::DiskFull) => "store_full",
        Some(Code::ReadOnly | Code::PermissionDenied) => "store_read_only",
        Some(Code::CannotOpen) => "store_unavailable",
        _ => "store_failed",
    }
}

/// What the failure means for the person who reads the message.
fn store_problem(source: &rusqlite::Error) -> &'static str {
    match store_kind(source) {
        "store_corrupt" => {
            " is corrupt or not a justonce database (it was not changed; restore it from a backup or move it away)"
        }
        "store_full" => " cannot grow: the disk is full (nothing of the failed step was stored)",
        "store_read_only" => " is read-only (nothing of the failed step was stored)",
        "store_unavailable" => " cannot be opened or created (check the path and its permissions)",
        _ => "",
    }
}

/// The `kind` of a PostgreSQL failure: an unreachable database (or a broken
/// connection, or a statement that timed out) is `store_unavailable`, and a call that
/// failed so is resumable under the same keys once it is back.
fn postgres_kind(source: &postgres::Error) -> &'static str {
    use postgres::error::SqlState;
    match source.code() {
        Some(code) if *code == SqlState::QUERY_CANCELED => "store_unavailable",
        // A server that became a standby (a failover): nothing was written, and the
        // primary is found again on the next connection.
        Some(code) if *code == SqlState::READ_ONLY_SQL_TRANSACTION => "store_unavailable",
        Some(code)
            if *code == SqlState::INVALID_PASSWORD
                || *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION =>
        {
            "store_denied"
        }
        Some(code) if code.code().starts_with("08") || code.code().starts_with("57P") => {
            "store_unavailable"
        }
        Some(_) => "store_failed",
        None => "store_unavailable",
    }
}

/// What PostgreSQL said, with its detail, never with the connection's password.
fn postgres_problem(source: &postgres::Error) -> String {
    match source.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => {
            let mut text = source.to_string();
            let mut cause = std::error::Error::source(source);
            while let Some(inner) = cause {
                text.push_str(": ");
                text.push_str(&inner.to_string());
                cause = inner.source();
            }
            text
        }
    }
}

/// Shorthand for results whose error is [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
