//! Reading the journal for people (`justonce journal`) and expiring it (`justonce gc`).

use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::journal::read::{
    EFFECT_COLUMNS, ENTRY_COLUMNS, expires_at, generation_of, parse_json, shown_state, summary,
};
use crate::journal::{GcReport, JournalEffect, JournalEntry, Scopes};

fn entry_from(r: &Row<'_>) -> rusqlite::Result<JournalEntry> {
    let outcome: Option<String> = r.get(7)?;
    Ok(JournalEntry {
        key: r.get(0)?,
        conversation: r.get(1)?,
        tool: r.get(2)?,
        state: r.get(3)?,
        arguments: parse_json(r.get(4)?),
        runs: r.get(5)?,
        replays: r.get(6)?,
        tool_call_ids: Vec::new(),
        summary: outcome.as_deref().map(summary),
        outcome: parse_json(outcome),
        created_at: r.get(8)?,
        completed_at: r.get(9)?,
        expires_at: expires_at(r.get(9)?, r.get(13)?),
        effects: Vec::new(),
        component: r.get(10)?,
        lease_owner: r.get(11)?,
        lease_expires_at: r.get(12)?,
        holding: String::new(),
        judged: 0,
        generation: generation_of(r.get(14)?),
        cancelled: r.get(15)?,
    })
}

/// The effects of `invocation`, in order. An effect the host refused before anything
/// was sent (its saved answer is `{"denied": …}`) shows as `refused`, not `done`.
pub(super) fn effects_of(
    conn: &Connection,
    invocation: &str,
) -> rusqlite::Result<Vec<JournalEffect>> {
    conn.prepare_cached(&format!(
        "SELECT {EFFECT_COLUMNS} FROM effects WHERE invocation_key = ?1 ORDER BY seq"
    ))?
    .query_map(params![invocation], |r| {
        let response = parse_json(r.get(7)?);
        let state = shown_state(r.get(5)?, response.as_ref());
        Ok(JournalEffect {
            seq: r.get(0)?,
            key: r.get(1)?,
            provider: r.get(2)?,
            class: r.get(3)?,
            operation: r.get(4)?,
            state,
            attempts: r.get(6)?,
            response,
            last_error: r.get(8)?,
            resolution: r.get(9)?,
            created_at: r.get(10)?,
            updated_at: r.get(11)?,
            catalog_class: r.get(12)?,
        })
    })?
    .collect()
}

/// Fills in the tool-call ids and effects of `entry`.
fn complete_entry(conn: &Connection, entry: &mut JournalEntry) -> rusqlite::Result<()> {
    entry.tool_call_ids = conn
        .prepare_cached(
            "SELECT tool_call_id FROM aliases WHERE invocation_key = ?1 ORDER BY created_at, tool_call_id",
        )?
        .query_map(params![entry.key], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    entry.effects = effects_of(conn, &entry.key)?;
    Ok(())
}

/// Invocations (newest first), optionally of one scope, with their effects.
pub(super) fn entries_in(
    conn: &Connection,
    scopes: &Scopes,
    limit: u32,
) -> rusqlite::Result<Vec<JournalEntry>> {
    let mut entries = conn
        .prepare_cached(&format!(
            "SELECT {ENTRY_COLUMNS} FROM invocations
              WHERE (?1 IS NULL OR scope = ?1
                     OR (?4 IS NOT NULL AND substr(scope, 1, 1) = '['
                         AND substr(scope, -length(?4)) = ?4))
                AND (?3 IS NULL OR substr(scope, 1, length(?3)) = ?3)
              ORDER BY created_at DESC, key LIMIT ?2"
        ))?
        .query_map(
            params![
                scopes.exactly.as_deref(),
                limit,
                scopes.prefix.as_deref(),
                scopes.suffix.as_deref()
            ],
            entry_from,
        )?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    for entry in &mut entries {
        complete_entry(conn, entry)?;
    }
    Ok(entries)
}

/// The invocation `key` with its effects, if the journal holds it.
pub(super) fn entry_in(conn: &Connection, key: &str) -> rusqlite::Result<Option<JournalEntry>> {
    let entry = conn
        .prepare_cached(&format!(
            "SELECT {ENTRY_COLUMNS} FROM invocations WHERE key = ?1"
        ))?
        .query_row(params![key], entry_from)
        .optional()?;
    let Some(mut entry) = entry else {
        return Ok(None);
    };
    complete_entry(conn, &mut entry)?;
    Ok(Some(entry))
}

/// Deletes every completed record whose own window ended at or before `now` (one
/// journaled before records carried a window: `default_retention_ms`), and provider
/// rows and cancels whose call never made a record older than
/// `default_retention_ms`; a call that is running, suspended or waiting for a
/// person is never deleted.
pub(super) fn gc_in(
    tx: &Connection,
    now: i64,
    default_retention_ms: i64,
) -> rusqlite::Result<GcReport> {
    let cutoff = now.saturating_sub(default_retention_ms);
    // `now - window` rather than `completed_at + window`: no sum can overflow.
    let expired = if crate::mutants::on(crate::mutants::Mutant::GcRunning) {
        "coalesce(completed_at, created_at) <= ?1 - COALESCE(retention_ms, ?2)"
    } else {
        "state = 'completed' AND completed_at <= ?1 - COALESCE(retention_ms, ?2)"
    };
    let keys = format!("SELECT key FROM invocations WHERE {expired}");
    let effects = tx.execute(
        &format!("DELETE FROM effects WHERE invocation_key IN ({keys})"),
        params![now, default_retention_ms],
    )?;
    let aliases = tx.execute(
        &format!("DELETE FROM aliases WHERE invocation_key IN ({keys})"),
        params![now, default_retention_ms],
    )?;
    let invocations = tx.execute(
        &format!("DELETE FROM invocations WHERE {expired}"),
        params![now, default_retention_ms],
    )?;
    // Tables of providers that keep their rows in this file, if they exist: delivered
    // (or given up) outbox messages, and the built-in mailbox's rows.
    let has = |table: &str| -> rusqlite::Result<bool> {
        tx.query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1)",
            params![table],
            |r| r.get(0),
        )
    };
    let outbox = if has("outbox")? {
        tx.execute(
            "DELETE FROM outbox WHERE state IN ('delivered', 'failed') AND updated_at <= ?1",
            params![cutoff],
        )?
    } else {
        0
    };
    let mut mailbox = 0;
    if has("mailbox")? {
        mailbox += tx.execute("DELETE FROM mailbox WHERE sent_at <= ?1", params![cutoff])?;
    }
    if has("mailbox_requests")? {
        mailbox += tx.execute(
            "DELETE FROM mailbox_requests WHERE received_at <= ?1",
            params![cutoff],
        )?;
    }
    // Cancels whose call never made a record: one an older host took (no time) is
    // stamped now, and removed a retention later.
    tx.execute(
        "UPDATE early_cancels SET created_at = ?1 WHERE created_at IS NULL",
        params![now],
    )?;
    let early_cancels = tx.execute(
        "DELETE FROM early_cancels WHERE created_at <= ?1",
        params![cutoff],
    )?;
    Ok(GcReport {
        early_cancels: early_cancels as u64,
        invocations: invocations as u64,
        effects: effects as u64,
        aliases: aliases as u64,
        outbox: outbox as u64,
        mailbox: mailbox as u64,
    })
}
