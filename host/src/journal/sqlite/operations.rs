//! What operators do to one call (`justonce forget`, `justonce abandon`), each
//! recorded in the `operations` audit table with who and when, in the transaction
//! that does it.

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::{Value, json};

use super::journal::{effects_of, summary};
use crate::clock::rfc3339;
use crate::journal::{Action, JournalEffect, JournalOperation, Operated, Operator};
use crate::outcome::Outcome;

/// The trap reason of the outcome `abandon` saves.
const ABANDONED: &str = "abandoned";

/// What is known of whether an effect reached the world: `performed` (answered, or a
/// person said so), `refused` (the host refused it before sending), `not_performed`
/// (known not to have happened), or `unknown`.
fn performed(effect: &JournalEffect) -> &'static str {
    match (effect.state.as_str(), effect.resolution.as_deref()) {
        ("done", _) => "performed",
        ("refused", _) => "refused",
        (_, Some("not_performed")) => "not_performed",
        _ => "unknown",
    }
}

/// The effects as an operation's detail records them.
fn effects_detail(effects: &[JournalEffect]) -> Value {
    effects
        .iter()
        .map(|e| {
            json!({
                "seq": e.seq,
                "key": e.key,
                "provider": e.provider,
                "operation": e.operation,
                "performed": performed(e),
            })
        })
        .collect()
}

/// An invocation as an operation sees it.
struct Found {
    state: String,
    lease_expires_at: Option<i64>,
    outcome: Option<String>,
}

/// The invocation `key`, if the journal holds it.
fn find(conn: &Connection, key: &str) -> rusqlite::Result<Option<Found>> {
    conn.query_row(
        "SELECT state, lease_expires_at, outcome FROM invocations WHERE key = ?1",
        params![key],
        |r| {
            Ok(Found {
                state: r.get(0)?,
                lease_expires_at: r.get(1)?,
                outcome: r.get(2)?,
            })
        },
    )
    .optional()
}

/// Why an operation is refused on a call whose run holds a live lease, if it does.
fn running(found: &Found, op: &Operator<'_>) -> Option<String> {
    let until = found
        .lease_expires_at
        .filter(|&t| found.state == "running" && t > op.now && !op.force)?;
    Some(format!(
        "it is running right now (its lease is held until {}); wait for it to stop, or use \
         --force (the run's later writes are then refused)",
        rfc3339(until)
    ))
}

fn record(
    conn: &Connection,
    key: &str,
    action: Action,
    op: &Operator<'_>,
    detail: Value,
) -> rusqlite::Result<JournalOperation> {
    conn.execute(
        "INSERT INTO operations (invocation_key, action, who, at, detail)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![key, action.as_str(), op.by, op.now, detail.to_string()],
    )?;
    Ok(JournalOperation {
        key: key.to_string(),
        action,
        by: op.by.to_string(),
        at: op.now,
        detail,
    })
}

/// The id of the newest operation on the journal (0 when there is none): a change
/// tells a long-lived host that records it remembers may be gone.
pub(super) fn latest_id(conn: &Connection) -> rusqlite::Result<i64> {
    conn.prepare_cached("SELECT coalesce(max(id), 0) FROM operations")?
        .query_row([], |r| r.get(0))
}

/// The operations on `key`, oldest first.
pub(super) fn operations_of(
    conn: &Connection,
    key: &str,
) -> rusqlite::Result<Vec<JournalOperation>> {
    conn.prepare_cached(
        "SELECT action, who, at, detail FROM operations WHERE invocation_key = ?1 ORDER BY at, id",
    )?
    .query_map(params![key], |r| {
        let action: String = r.get(0)?;
        let detail: String = r.get(3)?;
        Ok(JournalOperation {
            key: key.to_string(),
            // The table's CHECK admits only the actions this build knows.
            action: Action::parse(&action).unwrap_or(Action::Forget),
            by: r.get(1)?,
            at: r.get(2)?,
            detail: serde_json::from_str(&detail).unwrap_or(Value::String(detail)),
        })
    })?
    .collect()
}

/// The latest `action` on `key`, if any.
fn last(
    conn: &Connection,
    key: &str,
    action: Action,
) -> rusqlite::Result<Option<JournalOperation>> {
    Ok(operations_of(conn, key)?
        .into_iter()
        .rev()
        .find(|o| o.action == action))
}

/// Removes the record of `key` (its effects and tool-call ids with it) so the same
/// call runs again, and records the operation with what was removed. `Err` names why
/// it is refused: no record, a live run, or an effect whose outcome is unknown (a
/// rerun would send it again under a new key), the last two unless forced.
pub(super) fn forget_in(
    tx: &Connection,
    key: &str,
    op: &Operator<'_>,
) -> rusqlite::Result<Result<Operated, String>> {
    let Some(found) = find(tx, key)? else {
        return Ok(match last(tx, key, Action::Forget)? {
            Some(earlier) => Ok(Operated::AlreadyDone(earlier)),
            None => {
                Err("the journal holds no call with this key (never made, or removed by gc)".into())
            }
        });
    };
    if let Some(reason) = running(&found, op) {
        return Ok(Err(reason));
    }
    let effects = effects_of(tx, key)?;
    if !op.force
        && let Some(e) = effects.iter().find(|e| performed(e) == "unknown")
    {
        return Ok(Err(format!(
            "effect #{} ({}.{}, key {}) may have been performed and its outcome is unknown; \
             a rerun would send it again under a new key. Retry the call to finish it, \
             resolve it (justonce resolve) if it is unkeyed, or use --force",
            e.seq, e.provider, e.operation, e.key
        )));
    }
    let detail = json!({
        "state": found.state,
        "forced": op.force,
        "outcome": found.outcome.as_deref().map(summary),
        "effects": effects_detail(&effects),
    });
    tx.execute(
        "DELETE FROM effects WHERE invocation_key = ?1",
        params![key],
    )?;
    tx.execute(
        "DELETE FROM aliases WHERE invocation_key = ?1",
        params![key],
    )?;
    tx.execute("DELETE FROM invocations WHERE key = ?1", params![key])?;
    Ok(Ok(Operated::Done(record(
        tx,
        key,
        Action::Forget,
        op,
        detail,
    )?)))
}

/// Closes `key` with a saved `abandoned` outcome (a trap whose message lists the
/// effects already performed and those whose outcome is unknown), releasing any
/// lease, and records the operation. A call abandoned already is left as it is;
/// `Err` names why it is refused: no record, an outcome of its own, or a live run
/// (unless forced).
pub(super) fn abandon_in(
    tx: &Connection,
    key: &str,
    op: &Operator<'_>,
) -> rusqlite::Result<Result<Operated, String>> {
    let Some(found) = find(tx, key)? else {
        return Ok(Err(
            "the journal holds no call with this key (never made, expired, or forgotten)".into(),
        ));
    };
    if found.state == "completed" {
        let abandoned = found
            .outcome
            .as_deref()
            .and_then(|o| Outcome::from_stored(o).ok())
            .is_some_and(|o| matches!(o, Outcome::Trap { reason, .. } if reason == ABANDONED));
        if abandoned && let Some(earlier) = last(tx, key, Action::Abandon)? {
            return Ok(Ok(Operated::AlreadyDone(earlier)));
        }
        return Ok(Err(
            "it completed with an outcome of its own, which every retry replays; there is nothing \
             to abandon (justonce forget lets it run again)"
                .into(),
        ));
    }
    if let Some(reason) = running(&found, op) {
        return Ok(Err(reason));
    }
    let effects = effects_of(tx, key)?;
    let list = |kind: &str| -> Vec<String> {
        effects
            .iter()
            .filter(|e| performed(e) == kind)
            .map(|e| format!("#{} {}.{} (key {})", e.seq, e.provider, e.operation, e.key))
            .collect()
    };
    let (done, unknown) = (list("performed"), list("unknown"));
    let mut message = format!("abandoned by {} at {}", op.by, rfc3339(op.now));
    if done.is_empty() && unknown.is_empty() {
        message.push_str("; no effect was performed");
    }
    if !done.is_empty() {
        message.push_str(&format!("; effects performed: {}", done.join(", ")));
    }
    if !unknown.is_empty() {
        message.push_str(&format!(
            "; effects whose outcome is unknown (they may have been performed): {}",
            unknown.join(", ")
        ));
    }
    let outcome = Outcome::Trap {
        reason: ABANDONED.into(),
        message,
    };
    tx.execute(
        "UPDATE invocations SET state = 'completed', outcome = ?2, completed_at = ?3,
                updated_at = ?3, lease_owner = NULL, lease_expires_at = NULL
          WHERE key = ?1",
        params![key, outcome.to_stored(), op.now],
    )?;
    let detail = json!({
        "state": found.state,
        "forced": op.force,
        "effects": effects_detail(&effects),
    });
    Ok(Ok(Operated::Done(record(
        tx,
        key,
        Action::Abandon,
        op,
        detail,
    )?)))
}
