//! Providers perform effects on the host's behalf; the guard owns keys, retries and
//! the journal.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::keys::{EffectKey, InvocationKey};

/// How a provider's downstream copes with a repeated request. The class decides what
/// the guard may do when it does not know whether an attempt took effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProviderClass {
    /// The effect is local state written in the same transaction as its journal
    /// record (SQLite or PostgreSQL): exactly once, never unknown.
    Transactional,
    /// The downstream takes the key and deduplicates: an unknown attempt is retried with
    /// the same key until a definitive answer or the retry budget runs out.
    Keyed,
    /// The downstream cannot deduplicate: performed at most once; an attempt whose
    /// outcome is unknown is never repeated and needs a person to resolve it.
    Unkeyed,
}

impl ProviderClass {
    /// The lowercase name used in the journal and the CLI.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Transactional => "transactional",
            Self::Keyed => "keyed",
            Self::Unkeyed => "unkeyed",
        }
    }

    /// The class named `name` as [`ProviderClass::as_str`] writes it.
    pub fn parse(name: &str) -> Option<Self> {
        [Self::Transactional, Self::Keyed, Self::Unkeyed]
            .into_iter()
            .find(|class| class.as_str() == name)
    }
}

/// One attempt at one effect, as the guard hands it to a provider.
#[derive(Debug, Clone, Copy)]
pub struct EffectRequest<'a> {
    /// The tool whose call this effect belongs to; a provider may allow or refuse
    /// per tool (the `http` provider's allowlist does).
    pub tool: &'a str,
    /// The authenticated principal the call came from (over MCP HTTP), if any; a
    /// provider that keeps state keeps each principal's apart (`kv` does).
    pub principal: Option<&'a str>,
    /// The idempotency key of this effect, read from the journal. A keyed provider
    /// passes it downstream (for example as an `Idempotency-Key` header).
    pub key: &'a EffectKey,
    /// The invocation this effect belongs to.
    pub invocation: &'a InvocationKey,
    /// The effect's position in the invocation, from 0.
    pub seq: u32,
    /// Which attempt this is, from 1.
    pub attempt: u32,
    /// The operation the tool asked for, such as `send`.
    pub operation: &'a str,
    /// The tool's payload.
    pub payload: &'a Value,
    /// Who answers what the downstream asks of the call's client while it performs
    /// the effect (an upstream MCP server's `elicitation/create`,
    /// `sampling/createMessage`, `roots/list`); `None` where nobody can.
    pub client: Option<&'a dyn ClientRequests>,
}

/// What a downstream asks of the client of the call whose effect it performs, and
/// who answers it: the guard, which journals a question to the person as the call's
/// own and forwards the rest to the call's client where it declared them.
pub trait ClientRequests {
    /// The reply to the downstream's request `method` with `params`. `can_wait`: the
    /// downstream's request may stay unanswered until the client answers with a
    /// later request ([`ClientReply::Later`]), the effect left running meanwhile.
    fn request(&self, method: &str, params: &Value, can_wait: bool) -> ClientReply;

    /// Whether this attempt only takes up the earlier one under its key, left
    /// waiting on [`ClientReply::Later`]: it must never be sent anew.
    fn resumes(&self) -> bool {
        false
    }

    /// How many of the downstream's questions to the person this attempt has
    /// answered (or refused) so far, counting those of the earlier attempt it took
    /// up; one it answers later ([`ClientReply::Later`]) is not counted, since the
    /// attempt that takes it up is handed it again. A transport keeps this with a
    /// request its attempt gave up, for the attempt that takes the request up
    /// ([`ClientRequests::taking_up`]).
    fn questions(&self) -> u32 {
        0
    }

    /// This attempt takes up, sending nothing anew, an earlier attempt's request on
    /// which the downstream asked `questions` questions already (that attempt's
    /// [`ClientRequests::questions`]): its next question is the one after them, not
    /// the first again.
    fn taking_up(&self, questions: u32) {
        let _ = questions;
    }
}

impl std::fmt::Debug for dyn ClientRequests + '_ {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientRequests")
    }
}

/// The reply to a downstream's request of the client ([`ClientRequests`]).
#[derive(Debug, Clone, PartialEq)]
pub enum ClientReply {
    /// Its JSON-RPC result.
    Result(Value),
    /// A JSON-RPC error: its code and message (the downstream reads why).
    Error {
        /// The JSON-RPC error code (`-32021` for a capability the client lacks).
        code: i64,
        /// What the downstream reads.
        message: String,
    },
    /// The client answers with a later request (the call stopped, awaiting the
    /// person): the downstream's request is kept unanswered, its effect running,
    /// until the call is made again and [`ClientRequests::resumes`] it.
    Later,
}

impl ClientReply {
    /// The JSON-RPC response to request `id` that carries this reply.
    pub fn response(&self, id: &Value) -> Value {
        match self {
            Self::Result(result) => {
                serde_json::json!({ "jsonrpc": "2.0", "id": id, "result": result })
            }
            Self::Error { code, message } => serde_json::json!({
                "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message },
            }),
            Self::Later => serde_json::json!({
                "jsonrpc": "2.0", "id": id, "error": { "code": -32603, "message": "the client answers later, and this request cannot wait for it" },
            }),
        }
    }
}

/// A read that changes nothing downstream, performed without a journal record or a
/// key (see [`Provider::unjournaled_read`]).
#[derive(Debug, Clone, Copy)]
pub struct ReadRequest<'a> {
    /// The tool whose call asked for it.
    pub tool: &'a str,
    /// The invocation it belongs to.
    pub invocation: &'a InvocationKey,
    /// The position the invocation's next journaled effect takes: a read takes
    /// none of its own, it stands before that one.
    pub seq: u32,
    /// Which attempt this is, from 1.
    pub attempt: u32,
    /// The operation, such as `request`.
    pub operation: &'a str,
    /// The tool's payload.
    pub payload: &'a Value,
    /// Who answers what the downstream asks of the call's client meanwhile (as
    /// [`EffectRequest::client`]); a read journals no question.
    pub client: Option<&'a dyn ClientRequests>,
}

/// Why a provider did not return a response.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProviderError {
    /// The downstream answered definitively with a refusal. It is saved and replayed.
    #[error("rejected by the downstream: {0}")]
    Rejected(Value),
    /// The attempt may or may not have taken effect (a timeout, a lost response).
    #[error("outcome unknown: {0}")]
    Unknown(String),
    /// The downstream asked to be tried again later (an HTTP 429 or 503). The guard
    /// treats it as [`ProviderError::Unknown`], retrying with the same key, and
    /// waits at least `retry_after` first, up to the retry policy's
    /// [`max_retry_after`](crate::RetryPolicy::max_retry_after).
    #[error("outcome unknown, the downstream asked to retry later: {reason}")]
    Throttled {
        /// What the downstream answered.
        reason: String,
        /// How long it asked to wait, when it said.
        retry_after: Option<Duration>,
    },
    /// The downstream says the key's first request is still being processed (HTTP
    /// 409 under the IETF Idempotency-Key draft and Stripe): not an answer. Retried
    /// with the same key like [`ProviderError::Throttled`], and counted apart
    /// (`conflict`), since it says the downstream is slow on this key, not busy.
    #[error("outcome unknown, the downstream is still processing this key: {reason}")]
    Conflict {
        /// What the downstream answered.
        reason: String,
        /// How long it asked to wait, when it said.
        retry_after: Option<Duration>,
    },
    /// Known not performed, for a reason outside the tool: the host's configuration
    /// refuses it (not on the allowlist, no such service) or the downstream refused
    /// the connection before anything was sent. Nothing is saved as the effect's
    /// answer: the call ends `not_performed`, resumable, and the same call succeeds
    /// once the configuration is fixed or the downstream is back. With `retry`, the
    /// guard first retries it within its budget (a refused connection); without, it
    /// stops at once (a configuration refusal).
    #[error("not performed: {reason}")]
    NotPerformed {
        /// Why.
        reason: String,
        /// Whether trying again soon may help.
        retry: bool,
    },
    /// The provider refused the request before doing anything (an unknown operation,
    /// a payload of the wrong shape). Nothing happened; the refusal is saved as the
    /// effect's answer, so a retry of the call is refused the same way.
    #[error("{0}")]
    Invalid(String),
}

/// What became of an earlier attempt whose outcome was unknown, as its provider
/// learned since (see [`Provider::earlier_attempt`]).
#[derive(Debug, Clone, PartialEq)]
pub enum EarlierAttempt {
    /// Its answer came after the attempt was given up: the effect's answer (a
    /// response, or [`ProviderError::Rejected`]).
    Answered(Result<Value, ProviderError>),
    /// It is still running downstream: its answer may yet come.
    Running,
    /// It is still running downstream, waiting for the client's answer to what it
    /// asked ([`ClientReply::Later`]): the call made again takes it up, sending
    /// nothing anew.
    Asking,
}

/// Where a provider hands an answer that came after its attempt was given up, as it
/// comes (see [`Provider::hand_late_answers_to`]): the effect's key and its answer
/// (a response, or [`ProviderError::Rejected`]; anything else is no answer).
/// Whether it was journaled as the effect's answer: the provider then forgets it.
pub type LateAnswerSink =
    Arc<dyn Fn(&EffectKey, &Result<Value, ProviderError>) -> bool + Send + Sync>;

/// What a probe found out about an unkeyed effect whose outcome was unknown.
#[derive(Debug, Clone, PartialEq)]
pub enum Probed {
    /// It happened: the value is saved as the effect's answer, and the call goes on
    /// with it.
    Performed(Value),
    /// It happened, and this is the downstream's own account of it, in the shape of
    /// the effect's answer (an HTTP status request that returns the resource the
    /// lost request made): saved as the effect's answer as it is, so the tool reads
    /// it as it would have read the lost one.
    Found(Value),
    /// It did not happen: the call sends it again, under the same key.
    NotPerformed,
    /// The downstream's answer says neither: the effect stays unknown. Why.
    Unknown(String),
}

/// Performs effects of one kind. Register implementations with
/// [`HostBuilder::provider`](crate::HostBuilder::provider).
pub trait Provider: Send + Sync + 'static {
    /// Which class of downstream this is.
    fn class(&self) -> ProviderClass;

    /// The class of one effect, when a provider's downstream copes with some
    /// operations differently than others (an upstream MCP server: a tool annotated
    /// `idempotentHint` is keyed, another unkeyed). Journaled with the effect; the
    /// guard decides what an unknown outcome allows by it. [`Provider::class`] unless
    /// overridden.
    fn class_of(&self, operation: &str, payload: &Value) -> ProviderClass {
        let _ = (operation, payload);
        self.class()
    }

    /// Performs one attempt of a keyed or unkeyed effect.
    fn perform(&self, request: &EffectRequest<'_>) -> Result<Value, ProviderError>;

    /// What became of the earlier attempt under `key` whose outcome was unknown,
    /// when the provider learned it since: its answer came late (taken: the guard
    /// saves it as the effect's answer), or it still runs. Asked before an unkeyed
    /// effect pending in the journal fails closed. `None` (the default): nothing
    /// learned.
    fn earlier_attempt(&self, key: &EffectKey) -> Option<EarlierAttempt> {
        let _ = key;
        None
    }

    /// Hands every answer that comes after its attempt was given up, from now on, to
    /// `sink` as it comes (the guard journals it when no run holds its call), besides
    /// keeping it for [`Provider::earlier_attempt`]. Nothing (the default) for a
    /// provider that learns nothing late.
    fn hand_late_answers_to(&self, sink: LateAnswerSink) {
        let _ = sink;
    }

    /// Performs a transactional effect inside the journal's open transaction; whatever
    /// it writes through `tx` commits together with the effect record, or not at all.
    /// Only called for providers whose class is [`ProviderClass::Transactional`].
    fn perform_in_transaction(
        &self,
        tx: &rusqlite::Connection,
        request: &EffectRequest<'_>,
    ) -> Result<Value, ProviderError> {
        let _ = (tx, request);
        Err(ProviderError::Invalid(
            "this provider does not perform effects inside a transaction".into(),
        ))
    }

    /// Performs a transactional effect inside a PostgreSQL journal's open transaction
    /// (a savepoint of it): whatever it writes through `tx` commits together with the
    /// effect record, or not at all. A provider that does not implement it is known
    /// not performed on a PostgreSQL journal, so the call stays resumable.
    fn perform_in_postgres(
        &self,
        tx: &mut postgres::Transaction<'_>,
        request: &EffectRequest<'_>,
    ) -> Result<Value, ProviderError> {
        let _ = (tx, request);
        Err(ProviderError::NotPerformed {
            reason: "this provider does not support a PostgreSQL journal".into(),
            retry: false,
        })
    }

    /// Whether this request only reads and changes nothing downstream (an HTTP `GET`
    /// the tool did not ask to record). The guard then calls [`Provider::read`]
    /// without a journal record or a key: a retry or a resumed call reads again.
    /// Reads count against the per-call effect budget like effects do.
    fn unjournaled_read(&self, operation: &str, payload: &Value) -> bool {
        let _ = (operation, payload);
        false
    }

    /// Performs a read that [`Provider::unjournaled_read`] accepted. An `Unknown`
    /// answer is retried under the retry policy (a read is safe to repeat).
    fn read(&self, request: &ReadRequest<'_>) -> Result<Value, ProviderError> {
        let _ = request;
        Err(ProviderError::Invalid(
            "this provider has no unjournaled reads".into(),
        ))
    }

    /// The name of the probe that can ask the downstream whether an unkeyed effect
    /// of `operation` with `payload` happened (see [`Provider::probe`]), if one is
    /// configured: journaled as who decided. `None` unless overridden.
    fn probe_of(&self, operation: &str, payload: &Value) -> Option<String> {
        let _ = (operation, payload);
        None
    }

    /// Asks the downstream once, within the probe's own bounds, whether the unkeyed
    /// effect of `request` happened. Called only where [`Provider::probe_of`] names a
    /// probe, for an effect whose outcome is unknown, at the agent's retry. `Err`
    /// when the probe itself failed (no answer, a timeout): the effect stays unknown.
    fn probe(&self, request: &EffectRequest<'_>) -> Result<Probed, String> {
        let _ = request;
        Err("this provider has no probes".into())
    }

    /// The question the person behind the agent is asked about an unkeyed effect of
    /// `operation` with `payload` whose outcome is unknown and that no probe decides,
    /// where the configuration opts it in (a template, `crate::ask_person`): asked at
    /// the agent's retry through the client's elicitation. `None` unless overridden;
    /// the guard also asks where the tool itself opts in (`[tools.NAME]
    /// ask_person`).
    fn person_question_of(&self, operation: &str, payload: &Value) -> Option<String> {
        let _ = (operation, payload);
        None
    }

    /// Prepares the journal database for a transactional provider (creates its tables).
    /// Called once when the host opens the store.
    fn prepare(&self, db: &rusqlite::Connection) -> rusqlite::Result<()> {
        let _ = db;
        Ok(())
    }

    /// Prepares a PostgreSQL journal for a transactional provider (creates its
    /// tables), in a transaction that hosts starting together take one at a time.
    fn prepare_postgres(&self, tx: &mut postgres::Transaction<'_>) -> Result<(), postgres::Error> {
        let _ = tx;
        Ok(())
    }
}
