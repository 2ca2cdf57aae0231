//! `outbox` (transactional): a message to send later, written in the same SQLite
//! transaction as its effect record, so it exists exactly once however often the
//! tool is retried. [`Deliverer`](crate::delivery::Deliverer) sends it.

use std::sync::Arc;

use rusqlite::{Connection, params};
use serde::Serialize;
use serde_json::{Value, json};

use crate::clock::Clock;
use crate::http::{CheckError, HttpConfig, RequestSpec, is_safe};
use crate::provider::{EffectRequest, Provider, ProviderClass, ProviderError};

/// The `outbox` table: one row per enqueued message, keyed by its effect key.
pub(crate) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS outbox (
    id              INTEGER PRIMARY KEY,
    effect_key      TEXT NOT NULL UNIQUE,
    tool            TEXT NOT NULL,
    method          TEXT NOT NULL,
    url             TEXT NOT NULL,
    headers         TEXT NOT NULL,
    body            BLOB NOT NULL,
    state           TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    last_status     INTEGER,
    last_error      TEXT,
    response        TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    delivered_at    INTEGER
) STRICT;
CREATE INDEX IF NOT EXISTS outbox_due ON outbox (state, next_attempt_at);
";

/// Queues outgoing webhooks. Operation `enqueue` takes the same request payload as
/// the `http` provider (`method` defaults to `POST`; a safe method is refused) and
/// answers `{"message_id": n, "state": "pending"}`. The target must be on the tool's
/// allowlist when it is enqueued; the message is then sent by `justonce deliver` or
/// the delivery loop of `justonce serve`, with its effect key as the idempotency key.
pub struct OutboxProvider {
    config: Arc<HttpConfig>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for OutboxProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutboxProvider").finish()
    }
}

/// One message in the outbox, as [`OutboxProvider::messages`] reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OutboxMessage {
    /// The message's id.
    pub id: i64,
    /// The effect key it was enqueued under, sent as its idempotency key.
    pub effect_key: String,
    /// The tool that enqueued it.
    pub tool: String,
    /// The HTTP method.
    pub method: String,
    /// Where it goes.
    pub url: String,
    /// `pending`, `delivered` or `failed`.
    pub state: String,
    /// Delivery attempts so far.
    pub attempts: u32,
    /// The status of the last answer, if there was one.
    pub last_status: Option<u16>,
    /// Why the last attempt failed, if it did.
    pub last_error: Option<String>,
}

impl OutboxProvider {
    /// An outbox that checks targets against `config` and stamps times from `clock`.
    pub fn new(config: Arc<HttpConfig>, clock: Arc<dyn Clock>) -> Self {
        Self { config, clock }
    }

    /// Every message in the outbox, oldest first.
    pub fn messages(conn: &Connection) -> rusqlite::Result<Vec<OutboxMessage>> {
        let mut stmt = conn.prepare(
            "SELECT id, effect_key, tool, method, url, state, attempts, last_status, last_error
               FROM outbox ORDER BY id",
        )?;
        stmt.query_map([], |r| {
            Ok(OutboxMessage {
                id: r.get(0)?,
                effect_key: r.get(1)?,
                tool: r.get(2)?,
                method: r.get(3)?,
                url: r.get(4)?,
                state: r.get(5)?,
                attempts: r.get(6)?,
                last_status: r.get(7)?,
                last_error: r.get(8)?,
            })
        })?
        .collect()
    }
}

impl Provider for OutboxProvider {
    fn class(&self) -> ProviderClass {
        ProviderClass::Transactional
    }

    fn perform(&self, _request: &EffectRequest<'_>) -> Result<Value, ProviderError> {
        Err(ProviderError::Invalid(
            "outbox messages are written only inside the journal transaction".into(),
        ))
    }

    fn prepare(&self, db: &Connection) -> rusqlite::Result<()> {
        db.execute_batch(SCHEMA)
    }

    fn perform_in_transaction(
        &self,
        tx: &Connection,
        request: &EffectRequest<'_>,
    ) -> Result<Value, ProviderError> {
        if request.operation != "enqueue" {
            return Err(ProviderError::Invalid(format!(
                "outbox has no operation `{}` (it has `enqueue`)",
                request.operation
            )));
        }
        let spec = RequestSpec::parse(request.payload).map_err(ProviderError::Invalid)?;
        if spec.record {
            return Err(ProviderError::Invalid(
                "`record` is for http reads; an outbox message is always recorded".into(),
            ));
        }
        let method = spec.method(Some("POST")).map_err(ProviderError::Invalid)?;
        if is_safe(&method) {
            return Err(ProviderError::Invalid(format!(
                "an outbox message changes something; {method} does not (use the http provider to read)"
            )));
        }
        let message = spec
            .check(&self.config, request.tool, method)
            .map_err(|e| match e {
                CheckError::Tool(reason) => ProviderError::Invalid(reason),
                // Not queued, and not saved: the call may succeed once the
                // configuration allows it.
                CheckError::Config(reason) => ProviderError::NotPerformed {
                    reason,
                    retry: false,
                },
            })?;
        let headers = serde_json::to_string(&message.headers).expect("headers serialize");
        let now = self.clock.now_ms();
        let db = |e: rusqlite::Error| ProviderError::Invalid(format!("outbox table: {e}"));
        // The same effect key again is the same effect (keys carry the invocation's
        // generation, so a call made again after its record expired has new ones):
        // the message queued first stands, delivered or not, and is never reset.
        let (id, state): (i64, String) = tx
            .query_row(
                "INSERT INTO outbox (effect_key, tool, method, url, headers, body, state,
                                     next_attempt_at, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending', ?7, ?7, ?7)
                 ON CONFLICT (effect_key) DO UPDATE SET effect_key = excluded.effect_key
                 RETURNING id, state",
                params![
                    request.key.as_str(),
                    request.tool,
                    message.method,
                    message.url,
                    headers,
                    message.body,
                    now
                ],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(db)?;
        Ok(json!({ "message_id": id, "state": state }))
    }
}
