//! `outbox` (transactional): a message to send later, written in the journal's own
//! transaction with its effect record (SQLite or PostgreSQL), so it exists exactly
//! once however often the tool is retried. [`Deliverer`](crate::delivery::Deliverer) sends it.

use std::sync::Arc;

use rusqlite::{Connection, params};
use serde_json::{Value, json};

use crate::clock::Clock;
use crate::http::{CheckError, HttpConfig, RequestSpec, is_safe};
use crate::journal::outbox::{POSTGRES_SCHEMA, SQLITE_SCHEMA};
use crate::provider::{EffectRequest, Provider, ProviderClass, ProviderError};

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

impl OutboxProvider {
    /// An outbox that checks targets against `config` and stamps times from `clock`.
    pub fn new(config: Arc<HttpConfig>, clock: Arc<dyn Clock>) -> Self {
        Self { config, clock }
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
        db.execute_batch(SQLITE_SCHEMA)
    }

    fn perform_in_transaction(
        &self,
        tx: &Connection,
        request: &EffectRequest<'_>,
    ) -> Result<Value, ProviderError> {
        let m = self.message(request)?;
        // The same effect key again is the same effect (keys carry the invocation's
        // generation, so a call made again after its record expired has new ones):
        // the message queued first stands, delivered or not, and is never reset.
        let (id, state): (i64, String) = tx
            .query_row(
                &insert_sql('?'),
                params![
                    request.key.as_str(),
                    request.tool,
                    m.method,
                    m.url,
                    m.headers,
                    m.body,
                    m.now
                ],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(|e| table_error(&e))?;
        Ok(json!({ "message_id": id, "state": state }))
    }

    fn prepare_postgres(&self, tx: &mut postgres::Transaction<'_>) -> Result<(), postgres::Error> {
        tx.batch_execute(POSTGRES_SCHEMA)
    }

    fn perform_in_postgres(
        &self,
        tx: &mut postgres::Transaction<'_>,
        request: &EffectRequest<'_>,
    ) -> Result<Value, ProviderError> {
        let m = self.message(request)?;
        let row = tx
            .query_one(
                &insert_sql('$'),
                &[
                    &request.key.as_str(),
                    &request.tool,
                    &m.method,
                    &m.url,
                    &m.headers,
                    &m.body,
                    &m.now,
                ],
            )
            .map_err(|e| table_error(&e))?;
        let (id, state): (i64, String) = (row.get(0), row.get(1));
        Ok(json!({ "message_id": id, "state": state }))
    }
}

/// A message checked and ready to queue.
struct Checked {
    method: String,
    url: String,
    headers: String,
    body: Vec<u8>,
    now: i64,
}

/// The insert of a message under its effect key, with numbered parameters (`?N` on
/// SQLite, `$N` on PostgreSQL). A second insert under the same key returns the row
/// queued first, unchanged.
fn insert_sql(mark: char) -> String {
    "INSERT INTO outbox (effect_key, tool, method, url, headers, body, state,
                         next_attempt_at, created_at, updated_at)
     VALUES (#1, #2, #3, #4, #5, #6, 'pending', #7, #7, #7)
     ON CONFLICT (effect_key) DO UPDATE SET effect_key = excluded.effect_key
     RETURNING id, state"
        .replace('#', &mark.to_string())
}

fn table_error(e: &dyn std::fmt::Display) -> ProviderError {
    ProviderError::Invalid(format!("outbox table: {e}"))
}

impl OutboxProvider {
    /// Checks an `enqueue` request against the tool's allowlist: the message to
    /// queue, or why not (a refusal by the configuration is known not performed,
    /// so the call succeeds once the configuration allows it).
    fn message(&self, request: &EffectRequest<'_>) -> Result<Checked, ProviderError> {
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
                CheckError::Config(reason) => ProviderError::NotPerformed {
                    reason,
                    retry: false,
                },
            })?;
        Ok(Checked {
            headers: serde_json::to_string(&message.headers).expect("headers serialize"),
            method: message.method,
            url: message.url,
            body: message.body,
            now: self.clock.now_ms(),
        })
    }
}
