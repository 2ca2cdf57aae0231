//! The journal's schema and its migrations, versioned with `PRAGMA user_version`.

use rusqlite::Connection;

/// Each entry migrates from version `index` to `index + 1`. Append only: a released
/// migration is never edited.
pub(super) const MIGRATIONS: &[&str] = &[
    // 0 -> 1: invocations, tool-call-id aliases and effects.
    r#"
    CREATE TABLE invocations (
        key              TEXT PRIMARY KEY,
        scope            TEXT NOT NULL,
        tool             TEXT NOT NULL,
        fingerprint      TEXT NOT NULL,
        explicit_key     INTEGER NOT NULL DEFAULT 0,
        state            TEXT NOT NULL CHECK (state IN ('running', 'incomplete', 'completed')),
        outcome          TEXT,
        runs             INTEGER NOT NULL DEFAULT 0,
        created_at       INTEGER NOT NULL,
        updated_at       INTEGER NOT NULL,
        completed_at     INTEGER,
        lease_owner      TEXT,
        lease_expires_at INTEGER
    ) STRICT;
    CREATE INDEX invocations_by_scope ON invocations (scope, created_at);
    CREATE INDEX invocations_by_age ON invocations (created_at);

    CREATE TABLE aliases (
        scope          TEXT NOT NULL,
        tool_call_id   TEXT NOT NULL,
        invocation_key TEXT NOT NULL REFERENCES invocations (key) ON DELETE CASCADE,
        created_at     INTEGER NOT NULL,
        PRIMARY KEY (scope, tool_call_id)
    ) STRICT;
    CREATE INDEX aliases_by_invocation ON aliases (invocation_key);

    CREATE TABLE effects (
        key            TEXT PRIMARY KEY,
        invocation_key TEXT NOT NULL REFERENCES invocations (key) ON DELETE CASCADE,
        seq            INTEGER NOT NULL,
        provider       TEXT NOT NULL,
        class          TEXT NOT NULL,
        operation      TEXT NOT NULL,
        fingerprint    TEXT NOT NULL,
        state          TEXT NOT NULL CHECK (state IN ('pending', 'done')),
        attempts       INTEGER NOT NULL DEFAULT 0,
        response       TEXT,
        last_error     TEXT,
        created_at     INTEGER NOT NULL,
        updated_at     INTEGER NOT NULL,
        UNIQUE (invocation_key, seq)
    ) STRICT;
    "#,
    // 1 -> 2: deterministic replay and person-resolved effects.
    // `entropy` is the hex seed the guest's random values are derived from (its clocks
    // start at `created_at`); a resumed run reads it back and sees the same values.
    // `resolution` is what a person decided about a pending unkeyed effect.
    r#"
    ALTER TABLE invocations ADD COLUMN entropy TEXT;

    ALTER TABLE effects ADD COLUMN resolution TEXT
        CHECK (resolution IN ('performed', 'not_performed'));
    ALTER TABLE effects ADD COLUMN resolved_at INTEGER;
    CREATE INDEX effects_by_state ON effects (state, class);
    "#,
    // 2 -> 3: fewer pages per commit. Every index is one more page each commit writes
    // to the WAL, so the call path keeps only what a query needs: `journal` and `gc`
    // use `invocations_by_age` (a scope filter reads it in order); unresolved effects
    // are a partial index that only pending unkeyed effects enter.
    r#"
    DROP INDEX invocations_by_scope;
    DROP INDEX effects_by_state;
    CREATE INDEX effects_unresolved ON effects (updated_at)
        WHERE state = 'pending' AND class = 'unkeyed' AND resolution IS NULL;
    "#,
    // 3 -> 4: a journal a person can read, and what operators did to it.
    // `arguments` are the canonical arguments the guest got (records written before
    // this version have none). `replays` counts the retries the journal answered with
    // the saved outcome (not those a process answered from its memory of recent
    // outcomes). `operations` is the audit trail of `justonce forget` and `abandon`:
    // it outlives the records it names (a forgotten call's record is gone).
    r#"
    ALTER TABLE invocations ADD COLUMN arguments TEXT;
    ALTER TABLE invocations ADD COLUMN replays INTEGER NOT NULL DEFAULT 0;

    CREATE TABLE operations (
        id             INTEGER PRIMARY KEY,
        invocation_key TEXT NOT NULL,
        action         TEXT NOT NULL CHECK (action IN ('forget', 'abandon')),
        who            TEXT NOT NULL,
        at             INTEGER NOT NULL,
        detail         TEXT NOT NULL
    ) STRICT;
    CREATE INDEX operations_by_key ON operations (invocation_key, at);
    "#,
    // 4 -> 5: each record's own window (ms from completion), fixed when it is first
    // journaled: a call without a conversation keeps its record minutes, one in a
    // conversation hours, a tool may set its own. Records written before this
    // version have none and keep the host's retention.
    r#"
    ALTER TABLE invocations ADD COLUMN retention_ms INTEGER;
    "#,
    // 5 -> 6: `justonce resolve` is in the audit trail too. SQLite cannot change a
    // CHECK, so the table is made again with its rows.
    r#"
    CREATE TABLE operations_v6 (
        id             INTEGER PRIMARY KEY,
        invocation_key TEXT NOT NULL,
        action         TEXT NOT NULL CHECK (action IN ('forget', 'abandon', 'resolve')),
        who            TEXT NOT NULL,
        at             INTEGER NOT NULL,
        detail         TEXT NOT NULL
    ) STRICT;
    INSERT INTO operations_v6 (id, invocation_key, action, who, at, detail)
        SELECT id, invocation_key, action, who, at, detail FROM operations;
    DROP TABLE operations;
    ALTER TABLE operations_v6 RENAME TO operations;
    CREATE INDEX operations_by_key ON operations (invocation_key, at);
    "#,
    // 6 -> 7: the digest of the component of the call's latest run (tools pinned by
    // digest, a roll-out shows which build ran each call).
    r#"
    ALTER TABLE invocations ADD COLUMN component TEXT;
    "#,
    // 7 -> 8: fewer pages per commit again (see `pages_per_commit` in the tests of
    // `journal::sqlite`): the call path's writes touch only B-trees a call needs.
    // `invocations_by_age` goes: a record is appended to the table in the order it
    // was created already, `gc` reads every record anyway (each has its own window)
    // and `journal` lists the newest after one pass over the table, off the call
    // path. Effects are kept in the order of their primary key, their invocation
    // and position, without a rowid: one B-tree instead of three (the table, its key
    // and its position). An effect is found by its invocation and key (a few rows);
    // only an operator's `resolve`, which names the effect key alone, reads the table.
    r#"
    DROP INDEX invocations_by_age;

    CREATE TABLE effects_v8 (
        key            TEXT NOT NULL,
        invocation_key TEXT NOT NULL REFERENCES invocations (key) ON DELETE CASCADE,
        seq            INTEGER NOT NULL,
        provider       TEXT NOT NULL,
        class          TEXT NOT NULL,
        operation      TEXT NOT NULL,
        fingerprint    TEXT NOT NULL,
        state          TEXT NOT NULL CHECK (state IN ('pending', 'done')),
        attempts       INTEGER NOT NULL DEFAULT 0,
        response       TEXT,
        last_error     TEXT,
        created_at     INTEGER NOT NULL,
        updated_at     INTEGER NOT NULL,
        resolution     TEXT CHECK (resolution IN ('performed', 'not_performed')),
        resolved_at    INTEGER,
        PRIMARY KEY (invocation_key, seq)
    ) STRICT, WITHOUT ROWID;
    INSERT INTO effects_v8 (key, invocation_key, seq, provider, class, operation,
                            fingerprint, state, attempts, response, last_error,
                            created_at, updated_at, resolution, resolved_at)
        SELECT key, invocation_key, seq, provider, class, operation, fingerprint, state,
               attempts, response, last_error, created_at, updated_at, resolution,
               resolved_at
          FROM effects;
    DROP TABLE effects;
    ALTER TABLE effects_v8 RENAME TO effects;
    CREATE INDEX effects_unresolved ON effects (updated_at)
        WHERE state = 'pending' AND class = 'unkeyed' AND resolution IS NULL;
    "#,
    // 8 -> 9: the console's "resume now" is in the audit trail too (who had a stopped
    // call run again, on which host, and whose lease had ended). SQLite cannot
    // change a CHECK, so the table is made again with its rows.
    r#"
    CREATE TABLE operations_v9 (
        id             INTEGER PRIMARY KEY,
        invocation_key TEXT NOT NULL,
        action         TEXT NOT NULL CHECK (action IN ('forget', 'abandon', 'resolve', 'resume')),
        who            TEXT NOT NULL,
        at             INTEGER NOT NULL,
        detail         TEXT NOT NULL
    ) STRICT;
    INSERT INTO operations_v9 (id, invocation_key, action, who, at, detail)
        SELECT id, invocation_key, action, who, at, detail FROM operations;
    DROP TABLE operations;
    ALTER TABLE operations_v9 RENAME TO operations;
    CREATE INDEX operations_by_key ON operations (invocation_key, at);
    "#,
    // 9 -> 10: the server's secrets that key request states (`ask::StateKeys`):
    // the newest is current, one rotated out is honoured for a window after
    // `rotated_at`.
    r#"
    CREATE TABLE state_secrets (
        id          INTEGER PRIMARY KEY,
        secret      TEXT NOT NULL,
        created_at  INTEGER NOT NULL,
        rotated_at  INTEGER
    );
    "#,
    // 10 -> 11: a client's cancel (`tasks/cancel`) in the journal, so every host
    // honours it: the seed (`entropy`) of the generation it was taken against. The
    // call is cancelled while the two are equal; a new generation of the key (a new
    // record) is not.
    r#"
    ALTER TABLE invocations ADD COLUMN cancelled_entropy TEXT;
    "#,
    // 11 -> 12: what an effect's provider called it the last time a run met it,
    // when that differs from the class journaled when it was claimed (`keyed`,
    // `unkeyed`, `transactional`, or `read`): shown beside the record, which wins.
    r#"
    ALTER TABLE effects ADD COLUMN catalog_class TEXT;
    "#,
    // 12 -> 13: what the journal knows about itself, one row per name: its
    // identity (`id`, random, made here so that every backup carries it), when the
    // last scheduled gc ran and which host ran it (`gc`), its newest call
    // (`newest_call`, see `journal/mark.rs`). Additive: a host of version 10 never
    // reads it.
    r#"
    CREATE TABLE journal_meta (
        name   TEXT PRIMARY KEY,
        value  TEXT NOT NULL,
        at     INTEGER
    );
    INSERT INTO journal_meta (name, value) VALUES ('id', lower(hex(randomblob(16))));
    "#,
    // 13 -> 14: a client's cancel taken before its call had a record (the run
    // had journaled nothing yet), so that every host honours it too: kept by key
    // until the key's first record is made, by any host and any path, which the
    // trigger marks cancelled (`cancelled_entropy`, its own generation) as it
    // consumes the row. Additive: a host of version 10 never reads it (its inserts
    // fire the trigger all the same).
    r#"
    CREATE TABLE early_cancels (
        key  TEXT PRIMARY KEY
    );
    CREATE TRIGGER early_cancel_binds AFTER INSERT ON invocations
      WHEN EXISTS (SELECT 1 FROM early_cancels WHERE key = NEW.key)
    BEGIN
      UPDATE invocations SET cancelled_entropy = NEW.entropy WHERE key = NEW.key;
      DELETE FROM early_cancels WHERE key = NEW.key;
    END;
    "#,
    // 14 -> 15: what can end an unkeyed effect's unknown outcome (`probe NAME`,
    // `ask_person`, `person`), decided by the guard at the claim, so that `journal
    // --unresolved` and the console say it without loading the tool. Additive: a
    // host of version 10 never reads it (its effects show as before).
    r#"
    ALTER TABLE effects ADD COLUMN ends_by TEXT;
    "#,
    // 15 -> 16: the upstreams an operator disabled (who, when), so that a disable
    // outlives the process that took it and holds on every host of the journal
    // until an operator enables the upstream. Additive: a host of version 10 never
    // reads it (it starts every upstream, as before).
    r#"
    CREATE TABLE upstream_disables (
        upstream     TEXT PRIMARY KEY,
        disabled_by  TEXT NOT NULL,
        disabled_at  INTEGER NOT NULL
    ) STRICT;
    "#,
];

/// The schema version this build writes.
pub const CURRENT_VERSION: i64 = MIGRATIONS.len() as i64;

/// The schema version the previous release wrote: every migration after it only
/// adds, so that release's hosts go on serving a journal a newer host migrated
/// (docs/operators.md, "Rolling upgrades"). Moved up at each release.
pub const PREVIOUS_RELEASE: i64 = 10;

/// Tests of upgrades only: makes the schema of `version` (an empty database) as
/// that release's hosts made it, by its migrations (a released one is never edited).
pub fn migrate_to(conn: &mut Connection, version: i64) -> rusqlite::Result<()> {
    for step in &MIGRATIONS[..usize::try_from(version).unwrap_or(0)] {
        conn.execute_batch(step)?;
    }
    conn.pragma_update(None, "user_version", version)
}

/// What [`migrate`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Migration {
    /// The file is at the current version (perhaps after migrating).
    Current,
    /// The file was written by a newer build.
    Newer(i64),
}

/// Brings the database up to [`CURRENT_VERSION`], one migration per transaction.
pub(crate) fn migrate(conn: &mut Connection) -> rusqlite::Result<Migration> {
    loop {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let version: i64 = tx.query_row("PRAGMA user_version", [], |row| row.get(0))?;
        if version > CURRENT_VERSION {
            return Ok(Migration::Newer(version));
        }
        if version == CURRENT_VERSION {
            return Ok(Migration::Current);
        }
        let step = MIGRATIONS[usize::try_from(version).unwrap_or(0)];
        tx.execute_batch(step)?;
        tx.pragma_update(None, "user_version", version + 1)?;
        tx.commit()?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A journal an older build wrote (version 5) keeps its audit trail when it is
    /// migrated, and records a `resolve` after.
    #[test]
    fn the_audit_trail_survives_the_migration_that_admits_resolve() {
        let mut conn = Connection::open_in_memory().unwrap();
        for step in &MIGRATIONS[..5] {
            conn.execute_batch(step).unwrap();
        }
        conn.pragma_update(None, "user_version", 5).unwrap();
        let insert = "INSERT INTO operations (invocation_key, action, who, at, detail)
                      VALUES ('k', ?1, 'ada', 7, '{}')";
        conn.execute(insert, ["forget"]).unwrap();
        assert!(
            conn.execute(insert, ["resolve"]).is_err(),
            "version 5 knows no resolve"
        );

        assert_eq!(migrate(&mut conn).unwrap(), Migration::Current);
        conn.execute(insert, ["resolve"]).unwrap();
        conn.execute(insert, ["resume"]).unwrap();
        assert!(conn.execute(insert, ["erase"]).is_err(), "still checked");
        let kept: Vec<(i64, String, String)> = conn
            .prepare("SELECT id, action, who FROM operations ORDER BY id")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            kept,
            [
                (1, "forget".to_string(), "ada".to_string()),
                (2, "resolve".to_string(), "ada".to_string()),
                (3, "resume".to_string(), "ada".to_string())
            ]
        );
    }
}
