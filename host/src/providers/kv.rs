//! `kv`: a transactional key-value store that lives in the journal database.

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::{Value, json};

use crate::provider::{EffectRequest, Provider, ProviderClass, ProviderError};

/// Key-value writes that commit in the same SQLite transaction as their effect record,
/// so each happens exactly once however often a tool is retried.
///
/// Each tool has its own keys, and over MCP HTTP each authenticated principal its own
/// within them: a tool never reads (through `put`'s `previous`) nor overwrites another
/// tool's or another tenant's keys. The row is stored under [`KvProvider::stored_key`].
///
/// Operations: `put` with `{"key": string, "value": any}` answers `{"key", "previous"}`;
/// `delete` with `{"key": string}` answers `{"key", "deleted": bool}`.
#[derive(Debug, Default, Clone, Copy)]
pub struct KvProvider;

impl KvProvider {
    /// The row key of `tool`'s `key` for `principal` (none for a local call): the JSON
    /// array `[tool, principal, key]`, unambiguous for any three strings.
    pub fn stored_key(tool: &str, principal: Option<&str>, key: &str) -> String {
        json!([tool, principal, key]).to_string()
    }

    /// Reads the value stored under `stored_key` (see [`KvProvider::stored_key`]); not
    /// an effect: reads change nothing.
    pub fn get(conn: &Connection, stored_key: &str) -> rusqlite::Result<Option<Value>> {
        let key = stored_key;
        let text: Option<String> = conn
            .query_row("SELECT value FROM kv WHERE key = ?1", params![key], |r| {
                r.get(0)
            })
            .optional()?;
        Ok(text.map(|t| serde_json::from_str(&t).unwrap_or(Value::String(t))))
    }
}

/// The tool's key in the payload, and the row it names for this call's tool and
/// principal.
fn key_of<'a>(request: &EffectRequest<'a>) -> Result<(&'a str, String), ProviderError> {
    let key = request
        .payload
        .get("key")
        .and_then(Value::as_str)
        .ok_or_else(|| ProviderError::Invalid("payload needs a string field `key`".into()))?;
    Ok((
        key,
        KvProvider::stored_key(request.tool, request.principal, key),
    ))
}

impl Provider for KvProvider {
    fn class(&self) -> ProviderClass {
        ProviderClass::Transactional
    }

    fn perform(&self, _request: &EffectRequest<'_>) -> Result<Value, ProviderError> {
        Err(ProviderError::Invalid(
            "kv effects run only inside the journal transaction".into(),
        ))
    }

    fn prepare(&self, db: &Connection) -> rusqlite::Result<()> {
        db.execute_batch(
            "CREATE TABLE IF NOT EXISTS kv (
                 key        TEXT PRIMARY KEY,
                 value      TEXT NOT NULL,
                 effect_key TEXT NOT NULL
             ) STRICT;",
        )
    }

    fn prepare_postgres(&self, tx: &mut postgres::Transaction<'_>) -> Result<(), postgres::Error> {
        tx.batch_execute(
            "CREATE TABLE IF NOT EXISTS kv (
                 key        TEXT PRIMARY KEY,
                 value      TEXT NOT NULL,
                 effect_key TEXT NOT NULL
             );",
        )
    }

    fn perform_in_postgres(
        &self,
        tx: &mut postgres::Transaction<'_>,
        request: &EffectRequest<'_>,
    ) -> Result<Value, ProviderError> {
        let db = |e: postgres::Error| ProviderError::Invalid(format!("kv table: {e}"));
        match request.operation {
            "put" => {
                let (key, row) = key_of(request)?;
                let value = request.payload.get("value").ok_or_else(|| {
                    ProviderError::Invalid("payload needs a field `value`".into())
                })?;
                // Locks the row, so two calls putting one key serialize.
                let previous = tx
                    .query_opt("SELECT value FROM kv WHERE key = $1 FOR UPDATE", &[&row])
                    .map_err(db)?
                    .map(|r| {
                        let text: String = r.get(0);
                        serde_json::from_str(&text).unwrap_or(Value::String(text))
                    });
                tx.execute(
                    "INSERT INTO kv (key, value, effect_key) VALUES ($1, $2, $3)
                     ON CONFLICT (key) DO UPDATE SET value = excluded.value, effect_key = excluded.effect_key",
                    &[&row, &value.to_string(), &request.key.as_str()],
                )
                .map_err(db)?;
                Ok(json!({ "key": key, "previous": previous }))
            }
            "delete" => {
                let (key, row) = key_of(request)?;
                let n = tx
                    .execute("DELETE FROM kv WHERE key = $1", &[&row])
                    .map_err(db)?;
                Ok(json!({ "key": key, "deleted": n > 0 }))
            }
            other => Err(ProviderError::Invalid(format!(
                "kv has no operation `{other}` (it has `put` and `delete`)"
            ))),
        }
    }

    fn perform_in_transaction(
        &self,
        tx: &Connection,
        request: &EffectRequest<'_>,
    ) -> Result<Value, ProviderError> {
        let db = |e: rusqlite::Error| ProviderError::Invalid(format!("kv table: {e}"));
        match request.operation {
            "put" => {
                let (key, row) = key_of(request)?;
                let value = request.payload.get("value").ok_or_else(|| {
                    ProviderError::Invalid("payload needs a field `value`".into())
                })?;
                let previous = Self::get(tx, &row).map_err(db)?;
                tx.execute(
                    "INSERT INTO kv (key, value, effect_key) VALUES (?1, ?2, ?3)
                     ON CONFLICT (key) DO UPDATE SET value = excluded.value, effect_key = excluded.effect_key",
                    params![row, value.to_string(), request.key.as_str()],
                )
                .map_err(db)?;
                Ok(json!({ "key": key, "previous": previous }))
            }
            "delete" => {
                let (key, row) = key_of(request)?;
                let n = tx
                    .execute("DELETE FROM kv WHERE key = ?1", params![row])
                    .map_err(db)?;
                Ok(json!({ "key": key, "deleted": n > 0 }))
            }
            other => Err(ProviderError::Invalid(format!(
                "kv has no operation `{other}` (it has `put` and `delete`)"
            ))),
        }
    }
}
