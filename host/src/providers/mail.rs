//! `mail`: a local mailbox that deduplicates by idempotency key, like a mail API that
//! takes an `Idempotency-Key` header.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::clock::{Clock, millis};
use crate::error::{Error, Result};
use crate::provider::{EffectRequest, Provider, ProviderClass, ProviderError};

/// One email in the mailbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SentMail {
    /// The idempotency key it was sent under.
    pub key: String,
    /// The recipient.
    pub to: String,
    /// The subject line.
    pub subject: String,
    /// The body.
    pub body: String,
    /// The id the mailbox gave it.
    pub message_id: String,
    /// When it was accepted (ms since the epoch).
    pub sent_at: i64,
}

impl SentMail {
    /// The email of a row that starts `key, recipient, subject, body, message_id,
    /// sent_at`.
    fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            key: r.get(0)?,
            to: r.get(1)?,
            subject: r.get(2)?,
            body: r.get(3)?,
            message_id: r.get(4)?,
            sent_at: r.get(5)?,
        })
    }
}

/// An email in the mailbox, and how many requests under its key the mailbox
/// received (a retry under the same key is a request that sent nothing).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Received {
    /// The email.
    #[serde(flatten)]
    pub mail: SentMail,
    /// The requests under its key, the one that sent it included.
    pub requests: u64,
}

/// The file that holds the built-in mailbox of the journal `db`: the journal's own
/// SQLite file (its `mailbox` table), or, with a PostgreSQL journal,
/// `.justonce/mailbox.db` in the working directory (hosts started there share it, as
/// the downstream of a test would be shared).
pub fn mailbox_file(db: &Path) -> std::path::PathBuf {
    if crate::journal::postgres::is_postgres_url(&db.to_string_lossy()) {
        std::path::PathBuf::from(".justonce/mailbox.db")
    } else {
        db.to_path_buf()
    }
}

/// Every email in the mailbox in the file at `path`, oldest first, read without
/// writing anything: none when there is no such file or it holds no mailbox.
pub fn read_mailbox(path: &Path) -> Result<Vec<Received>> {
    if !path.is_file() {
        return Ok(Vec::new());
    }
    let read = || -> rusqlite::Result<Vec<Received>> {
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(Duration::from_secs(30))?;
        let tables: i64 = conn.query_row(
            "SELECT COUNT(*) FROM sqlite_master
              WHERE type = 'table' AND name IN ('mailbox', 'mailbox_requests')",
            [],
            |r| r.get(0),
        )?;
        if tables < 2 {
            return Ok(Vec::new());
        }
        let mut stmt = conn.prepare(
            "SELECT key, recipient, subject, body, message_id, sent_at,
                    (SELECT COUNT(*) FROM mailbox_requests r WHERE r.key = m.key)
               FROM mailbox m ORDER BY id",
        )?;
        stmt.query_map([], |r| {
            Ok(Received {
                mail: SentMail::from_row(r)?,
                requests: r.get::<_, i64>(6)?.max(0) as u64,
            })
        })?
        .collect()
    };
    read().map_err(|e| Error::store(path, e))
}

/// At most this many attempts and counted keys stay in memory; the mailbox's
/// tables keep everything.
const MEMORY_CAP: usize = 10_000;

/// A keyed mail downstream backed by a `mailbox` table. A repeated key within the
/// retention window returns the first message id and sends nothing; it can be told
/// to lose the first responses for each key, after recording the email, as a timeout
/// would.
///
/// Operation `send` with `{"to": string, "subject": string, "body": string}` (only
/// `to` is required; any other field, such as `cc`, is refused rather than dropped)
/// answers `{"message_id": string}`.
pub struct MailProvider {
    conn: Mutex<Connection>,
    clock: Arc<dyn Clock>,
    dedupe_window_ms: i64,
    lose_first: u32,
    attempts: Mutex<Vec<String>>,
    answered: Mutex<HashMap<String, u32>>,
}

impl std::fmt::Debug for MailProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MailProvider")
            .field("lose_first", &self.lose_first)
            .finish()
    }
}

impl MailProvider {
    /// A mailbox in the database file at `path` (its own connection, its own
    /// transactions: it stands for a downstream service), or in memory. Keys are
    /// remembered for `dedupe_window`, as a real API forgets keys after a day.
    pub fn open(
        path: Option<&Path>,
        clock: Arc<dyn Clock>,
        dedupe_window: Duration,
    ) -> Result<Self> {
        let label = path.unwrap_or(Path::new(":memory:"));
        let conn = match path {
            Some(p) => crate::journal::sqlite::open_file(p)?,
            None => Connection::open_in_memory().map_err(|e| Error::store(label, e))?,
        };
        let setup = || -> rusqlite::Result<Connection> {
            conn.busy_timeout(Duration::from_secs(30))?;
            conn.execute_batch(
                "CREATE TABLE IF NOT EXISTS mailbox (
                     id         INTEGER PRIMARY KEY,
                     key        TEXT NOT NULL,
                     recipient  TEXT NOT NULL,
                     subject    TEXT NOT NULL,
                     body       TEXT NOT NULL,
                     message_id TEXT NOT NULL,
                     sent_at    INTEGER NOT NULL
                 ) STRICT;
                 CREATE INDEX IF NOT EXISTS mailbox_by_key ON mailbox (key, sent_at);
                 -- Every request the mailbox received, duplicates included: the
                 -- transport's log, which outlives the process that sent them.
                 CREATE TABLE IF NOT EXISTS mailbox_requests (
                     id          INTEGER PRIMARY KEY,
                     key         TEXT NOT NULL,
                     received_at INTEGER NOT NULL
                 ) STRICT;",
            )?;
            Ok(conn)
        };
        let conn = setup().map_err(|e| Error::store(label, e))?;
        Ok(Self {
            conn: Mutex::new(conn),
            clock,
            dedupe_window_ms: millis(dedupe_window),
            lose_first: 0,
            attempts: Mutex::new(Vec::new()),
            answered: Mutex::new(HashMap::new()),
        })
    }

    /// Loses the response of the first `n` attempts for each key, after the email is
    /// recorded: the sender cannot tell whether it was sent.
    pub fn lose_first_responses(mut self, n: u32) -> Self {
        self.lose_first = n;
        self
    }

    /// The key of every attempt this provider saw, in order (the transport's log).
    pub fn attempts(&self) -> Vec<String> {
        self.attempts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Every email in the mailbox, oldest first.
    pub fn sent(&self) -> rusqlite::Result<Vec<SentMail>> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let mut stmt = conn.prepare(
            "SELECT key, recipient, subject, body, message_id, sent_at FROM mailbox ORDER BY id",
        )?;
        stmt.query_map([], SentMail::from_row)?.collect()
    }

    /// The key of every request the mailbox received, oldest first, across every
    /// process that used this mailbox (unlike [`MailProvider::attempts`]).
    pub fn requests(&self) -> rusqlite::Result<Vec<String>> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let mut stmt = conn.prepare("SELECT key FROM mailbox_requests ORDER BY id")?;
        stmt.query_map([], |r| r.get(0))?.collect()
    }

    fn deliver(&self, key: &str, to: &str, subject: &str, body: &str) -> rusqlite::Result<String> {
        let now = self.clock.now_ms();
        let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        tx.execute(
            "INSERT INTO mailbox_requests (key, received_at) VALUES (?1, ?2)",
            params![key, now],
        )?;
        let existing: Option<String> = tx
            .query_row(
                "SELECT message_id FROM mailbox WHERE key = ?1 AND sent_at > ?2
                  ORDER BY id DESC LIMIT 1",
                params![key, now.saturating_sub(self.dedupe_window_ms)],
                |r| r.get(0),
            )
            .optional()?;
        if let Some(message_id) = existing {
            tx.commit()?;
            return Ok(message_id);
        }
        let next: i64 = tx.query_row("SELECT COALESCE(MAX(id), 0) + 1 FROM mailbox", [], |r| {
            r.get(0)
        })?;
        let message_id = format!("msg-{next:06}");
        tx.execute(
            "INSERT INTO mailbox (id, key, recipient, subject, body, message_id, sent_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![next, key, to, subject, body, message_id, now],
        )?;
        tx.commit()?;
        Ok(message_id)
    }
}

/// The payload of `send`. Unknown fields are refused: a `cc` or `attachments` the
/// mailbox would silently drop is a tool's mistake to hear about.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MailPayload {
    to: String,
    #[serde(default)]
    subject: String,
    #[serde(default)]
    body: String,
}

impl MailPayload {
    fn parse(payload: &Value) -> Result<Self, ProviderError> {
        Self::deserialize(payload).map_err(|e| {
            ProviderError::Invalid(format!(
                "the mail payload is not valid: {e} (mail `send` takes `to`, and optionally `subject` and `body`, all strings)"
            ))
        })
    }
}

impl Provider for MailProvider {
    fn class(&self) -> ProviderClass {
        ProviderClass::Keyed
    }

    fn perform(&self, request: &EffectRequest<'_>) -> Result<Value, ProviderError> {
        let key = request.key.as_str().to_string();
        {
            let mut attempts = self.attempts.lock().unwrap_or_else(|p| p.into_inner());
            if attempts.len() >= MEMORY_CAP {
                // The table `mailbox_requests` keeps the whole log; memory keeps the
                // latest half.
                attempts.drain(..MEMORY_CAP / 2);
            }
            attempts.push(key.clone());
        }
        if request.operation != "send" {
            return Err(ProviderError::Invalid(format!(
                "mail has no operation `{}` (it has `send`)",
                request.operation
            )));
        }
        let mail = MailPayload::parse(request.payload)?;
        let to = mail.to.as_str();
        if !to.contains('@') {
            return Err(ProviderError::Rejected(json!({
                "error": "invalid_recipient",
                "message": format!("`{to}` is not an email address"),
            })));
        }
        let message_id = self
            .deliver(&key, to, &mail.subject, &mail.body)
            .map_err(|e| ProviderError::Unknown(format!("mailbox failed: {e}")))?;
        if self.lose_first == 0 {
            return Ok(json!({ "message_id": message_id }));
        }
        let mut answered = self.answered.lock().unwrap_or_else(|p| p.into_inner());
        if answered.len() >= MEMORY_CAP {
            // Keys whose lost responses are all spent need no counting any more.
            let lose_first = self.lose_first;
            answered.retain(|_, seen| *seen <= lose_first);
        }
        let seen = answered.entry(key).or_insert(0);
        *seen += 1;
        if *seen <= self.lose_first {
            return Err(ProviderError::Unknown(
                "the mail server accepted the request but the response was lost (timeout)".into(),
            ));
        }
        Ok(json!({ "message_id": message_id }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mail_payload_with_an_unknown_field_is_refused_with_the_field_named() {
        let err =
            MailPayload::parse(&json!({"to": "a@b.example", "cc": "c@d.example"})).unwrap_err();
        let ProviderError::Invalid(message) = err else {
            panic!("{err:?}");
        };
        assert!(
            message.contains("unknown field `cc`") && message.contains("`subject`"),
            "{message}"
        );
        let err = MailPayload::parse(&json!({"subject": "x"})).unwrap_err();
        assert!(err.to_string().contains("missing field `to`"), "{err}");
        let mail = MailPayload::parse(&json!({"to": "a@b.example", "subject": "s"})).unwrap();
        assert_eq!(
            (mail.to.as_str(), mail.subject.as_str(), mail.body.as_str()),
            ("a@b.example", "s", "")
        );
    }
}
