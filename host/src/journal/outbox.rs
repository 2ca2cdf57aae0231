//! The outbox as the journal keeps it: the table the `outbox` provider writes in the
//! journal's own transaction, and the queue delivery takes messages from
//! ([`OutboxQueue`]), on either backend.
//!
//! A message is taken by counting its attempt before it is sent (a sender that dies
//! mid-request leaves the attempt on record) and settled after: delivered, retried
//! later, or failed. On PostgreSQL, several hosts deliver at once: each message is
//! taken with `SELECT … FOR UPDATE SKIP LOCKED` and hidden from the other deliverers
//! until its hold ends, so none sends it while another does. On SQLite one pass runs
//! at a time under a lock file next to the database, and a taken message is not
//! hidden: a deliverer restarted after a crash resends it at once.

use std::path::PathBuf;

use serde::Serialize;

use crate::error::Result;
pub(crate) use crate::metrics::OutboxDepth;

/// The `outbox` table on SQLite: one row per enqueued message, keyed by its effect key.
pub(crate) const SQLITE_SCHEMA: &str = "
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

/// The same table on PostgreSQL.
pub(crate) const POSTGRES_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS outbox (
    id              BIGSERIAL PRIMARY KEY,
    effect_key      TEXT NOT NULL UNIQUE,
    tool            TEXT NOT NULL,
    method          TEXT NOT NULL,
    url             TEXT NOT NULL,
    headers         TEXT NOT NULL,
    body            BYTEA NOT NULL,
    state           TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at BIGINT NOT NULL,
    last_status     INTEGER,
    last_error      TEXT,
    response        TEXT,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    delivered_at    BIGINT
);
CREATE INDEX IF NOT EXISTS outbox_due ON outbox (state, next_attempt_at);
";

/// The columns of [`OutboxMessage`], in its order, for both backends.
pub(crate) const MESSAGE_COLUMNS: &str =
    "id, effect_key, tool, method, url, state, attempts, last_status, last_error";

/// One message in the outbox, as people and tests read it.
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

/// A message taken for one delivery attempt.
#[derive(Debug, Clone)]
pub(crate) struct Taken {
    pub id: i64,
    pub effect_key: String,
    pub method: String,
    pub url: String,
    /// The stored headers, or why they cannot be read (the message is then given up,
    /// never sent without them).
    pub headers: std::result::Result<Vec<(String, String)>, String>,
    pub body: Vec<u8>,
    /// The attempt's number, from 1, counted when it was taken.
    pub attempt: u32,
    /// The tool that queued it, whose allowlist delivery checks again.
    pub tool: String,
}

/// Reads the stored headers of a message.
pub(crate) fn parse_headers(text: &str) -> std::result::Result<Vec<(String, String)>, String> {
    serde_json::from_str(text)
        .map_err(|e| format!("the queued message's headers are unreadable: {e}"))
}

/// How many messages are undelivered, by state, on both backends (see
/// [`OutboxDepth`]): a pending message that has failed an attempt has a last error.
pub(crate) const DEPTH_SQL: &str = "
SELECT COALESCE(SUM(CASE WHEN state = 'pending' AND last_error IS NULL THEN 1 ELSE 0 END), 0),
       COALESCE(SUM(CASE WHEN state = 'pending' AND last_error IS NOT NULL THEN 1 ELSE 0 END), 0),
       COALESCE(SUM(CASE WHEN state = 'failed' THEN 1 ELSE 0 END), 0)
  FROM outbox";

/// What became of a taken message.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Settle<'a> {
    /// The receiver answered 2xx with `response`.
    Delivered { status: u16, response: &'a str },
    /// Not delivered yet: due again `retry_in_ms` after it is settled, on the
    /// journal's clock (the database's, on PostgreSQL).
    RetryLater {
        status: Option<u16>,
        error: &'a str,
        retry_in_ms: i64,
    },
    /// Given up.
    Failed { status: Option<u16>, error: &'a str },
}

/// The columns a [`Settle`] writes, the same on both backends: `state`,
/// `last_status`, `last_error`, `response` (kept when `None`) and the wait before
/// the next attempt (`next_attempt_at` kept when `None`); `delivered_at` is the
/// settling time when delivered.
pub(crate) struct Settled<'a> {
    pub state: &'static str,
    pub status: Option<i32>,
    pub error: Option<&'a str>,
    pub response: Option<&'a str>,
    pub retry_in_ms: Option<i64>,
}

/// The one `UPDATE` that settles a message, with numbered parameters (`?N` on
/// SQLite, `$N` on PostgreSQL): 1 id, 2 state, 3 status, 4 error, 5 response,
/// 6 the wait before the next attempt, 7 the taker's attempt; the time is `now`,
/// an SQL expression (the caller's `?8` on SQLite, the database's clock on
/// PostgreSQL). A delivery is recorded whoever sent it; a retry or a failure only
/// by the deliverer whose attempt is the message's last (one whose hold ended and
/// whose message another took since changes nothing).
pub(crate) fn settle_sql(mark: char, now: &str) -> String {
    "UPDATE outbox SET state = #2, last_status = #3, last_error = #4,
            response = COALESCE(#5, response),
            next_attempt_at = COALESCE(NOW + #6, next_attempt_at),
            delivered_at = CASE WHEN #2 = 'delivered' THEN NOW END,
            updated_at = NOW
      WHERE id = #1 AND state = 'pending' AND (#2 = 'delivered' OR attempts = #7)"
        .replace("NOW", now)
        .replace('#', &mark.to_string())
}

impl<'a> Settle<'a> {
    /// The columns it writes.
    pub(crate) fn columns(&self) -> Settled<'a> {
        match *self {
            Settle::Delivered { status, response } => Settled {
                state: "delivered",
                status: Some(i32::from(status)),
                error: None,
                response: Some(response),
                retry_in_ms: None,
            },
            Settle::RetryLater {
                status,
                error,
                retry_in_ms,
            } => Settled {
                state: "pending",
                status: status.map(i32::from),
                error: Some(error),
                response: None,
                retry_in_ms: Some(retry_in_ms),
            },
            Settle::Failed { status, error } => Settled {
                state: "failed",
                status: status.map(i32::from),
                error: Some(error),
                response: None,
                retry_in_ms: None,
            },
        }
    }
}

/// The outbox queue a journal provides to delivery.
pub(crate) trait OutboxQueue {
    /// Creates the outbox table if it does not exist (a deliverer may start before
    /// any host enqueued a message).
    fn prepare_outbox(&self) -> Result<()>;

    /// The file a delivery pass must lock first, when the backend needs one to keep
    /// two deliverers from sending one message at once (SQLite); `None` otherwise.
    fn pass_lock_file(&self) -> Option<PathBuf>;

    /// Takes the oldest pending message due now whose id is not in `skip` (the ones
    /// this pass took already), counting its attempt. A backend shared by hosts
    /// hides it from other deliverers for `hold_ms`, and judges "now" and the hold
    /// on the database's clock, not the caller's `now` (hosts' clocks may differ: a
    /// host whose clock is ahead must not take a message another is sending). A
    /// message is returned only once the commit that enqueued it is as durable as
    /// the journal promises (`Full`: synced), since the caller sends it next.
    fn take_message(&self, now: i64, hold_ms: i64, skip: &[i64]) -> Result<Option<Taken>>;

    /// Records what became of a taken message (see [`settle_sql`]), at `now` on a
    /// backend of one host, on the database's clock on one shared by hosts.
    fn settle_message(&self, taken: &Taken, settle: Settle<'_>, now: i64) -> Result<()>;

    /// Every message, oldest first.
    fn outbox_messages(&self) -> Result<Vec<OutboxMessage>>;

    /// How many messages wait to be delivered, and how many were given up on (all
    /// zero when no outbox was ever created).
    fn outbox_depth(&self) -> Result<OutboxDepth>;
}
