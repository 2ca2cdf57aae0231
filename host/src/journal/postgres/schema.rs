//! The PostgreSQL journal's schema and its migrations, versioned in `justonce_schema`.

use postgres::Client;

/// Each entry migrates from version `index` to `index + 1`. Append only: a released
/// migration is never edited. Version 1 is the SQLite journal's schema at its version 3.
const MIGRATIONS: &[&str] = &[
    // 0 -> 1: invocations, tool-call-id aliases and effects.
    r#"
    CREATE TABLE invocations (
        key              TEXT PRIMARY KEY,
        scope            TEXT NOT NULL,
        tool             TEXT NOT NULL,
        fingerprint      TEXT NOT NULL,
        explicit_key     BOOLEAN NOT NULL DEFAULT FALSE,
        state            TEXT NOT NULL CHECK (state IN ('running', 'incomplete', 'completed')),
        outcome          TEXT,
        runs             INTEGER NOT NULL DEFAULT 0,
        created_at       BIGINT NOT NULL,
        updated_at       BIGINT NOT NULL,
        completed_at     BIGINT,
        lease_owner      TEXT,
        lease_expires_at BIGINT,
        entropy          TEXT
    );
    CREATE INDEX invocations_by_age ON invocations (created_at);

    CREATE TABLE aliases (
        scope          TEXT NOT NULL,
        tool_call_id   TEXT NOT NULL,
        invocation_key TEXT NOT NULL REFERENCES invocations (key) ON DELETE CASCADE,
        created_at     BIGINT NOT NULL,
        PRIMARY KEY (scope, tool_call_id)
    );
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
        resolution     TEXT CHECK (resolution IN ('performed', 'not_performed')),
        resolved_at    BIGINT,
        created_at     BIGINT NOT NULL,
        updated_at     BIGINT NOT NULL,
        UNIQUE (invocation_key, seq)
    );
    CREATE INDEX effects_unresolved ON effects (updated_at)
        WHERE state = 'pending' AND class = 'unkeyed' AND resolution IS NULL;
    "#,
    // 1 -> 2: a journal a person can read, and what operators did to it (the SQLite
    // journal's version 4). `arguments` are the canonical arguments the guest got
    // (records written before this version have none); `replays` counts the retries
    // the journal answered with the saved outcome; `operations` is the audit trail of
    // `justonce forget` and `abandon`, which outlives the records it names.
    r#"
    ALTER TABLE invocations ADD COLUMN arguments TEXT;
    ALTER TABLE invocations ADD COLUMN replays INTEGER NOT NULL DEFAULT 0;

    CREATE TABLE operations (
        id             BIGSERIAL PRIMARY KEY,
        invocation_key TEXT NOT NULL,
        action         TEXT NOT NULL CHECK (action IN ('forget', 'abandon')),
        who            TEXT NOT NULL,
        at             BIGINT NOT NULL,
        detail         TEXT NOT NULL
    );
    CREATE INDEX operations_by_key ON operations (invocation_key, at);
    "#,
    // 2 -> 3: each record's own window (ms from completion), fixed when it is first
    // journaled (the SQLite journal's version 5). Records written before this
    // version have none and keep the host's retention.
    r#"
    ALTER TABLE invocations ADD COLUMN retention_ms BIGINT;
    "#,
    // 3 -> 4: `justonce resolve` is in the audit trail too (the SQLite journal's
    // version 6).
    r#"
    ALTER TABLE operations DROP CONSTRAINT operations_action_check;
    ALTER TABLE operations ADD CONSTRAINT operations_action_check
        CHECK (action IN ('forget', 'abandon', 'resolve'));
    "#,
    // 4 -> 5: the digest of the component of the call's latest run (the SQLite
    // journal's version 7).
    r#"
    ALTER TABLE invocations ADD COLUMN component TEXT;
    "#,
    // 5 -> 6: the console's "resume now" is in the audit trail too (the SQLite
    // journal's version 9).
    r#"
    ALTER TABLE operations DROP CONSTRAINT operations_action_check;
    ALTER TABLE operations ADD CONSTRAINT operations_action_check
        CHECK (action IN ('forget', 'abandon', 'resolve', 'resume'));
    "#,
    // 6 -> 7: the server's secrets that key request states (the SQLite journal's
    // version 10).
    r#"
    CREATE TABLE state_secrets (
        id          BIGINT PRIMARY KEY,
        secret      TEXT NOT NULL,
        created_at  BIGINT NOT NULL,
        rotated_at  BIGINT
    );
    "#,
    // 7 -> 8: a client's cancel in the journal (the SQLite journal's version 11).
    r#"
    ALTER TABLE invocations ADD COLUMN cancelled_entropy TEXT;
    "#,
    // 8 -> 9: what an effect's provider says of it now, when that differs from its
    // record (the SQLite journal's version 12).
    r#"
    ALTER TABLE effects ADD COLUMN catalog_class TEXT;
    "#,
    // 9 -> 10: what the journal knows about itself, one row per name: its identity
    // (`id`, random, made here so that every backup carries it), when the last
    // scheduled gc ran and which host ran it (`gc`), its newest call (`newest_call`,
    // see `journal/mark.rs`); the SQLite journal's version 13. Additive: a host of
    // version 7 never reads it.
    r#"
    CREATE TABLE journal_meta (
        name   TEXT PRIMARY KEY,
        value  TEXT NOT NULL,
        at     BIGINT
    );
    INSERT INTO journal_meta (name, value)
        VALUES ('id', md5(random()::TEXT || clock_timestamp()::TEXT));
    "#,
    // 10 -> 11: the bearer tokens of `serve --http`, the console and `/metrics`, kept
    // here for every host of the journal (a SQLite journal's hosts keep a tokens
    // file each): only each token's SHA-256, as the file keeps it. Additive.
    r#"
    CREATE TABLE tokens (
        name           TEXT PRIMARY KEY,
        sha256         TEXT NOT NULL UNIQUE,
        created_at_ms  BIGINT NOT NULL,
        role           TEXT NOT NULL CHECK (role IN ('agent', 'viewer', 'operator'))
    );
    "#,
    // 11 -> 12: a client's cancel taken before its call had a record (the SQLite
    // journal's version 14): kept by key until the key's first record is made,
    // which the trigger marks cancelled as it consumes the row. The trigger and
    // `ops::cancel_in` take one advisory lock per key, so a cancel and a first
    // record made at once never miss each other. Additive.
    r#"
    CREATE TABLE early_cancels (
        key  TEXT PRIMARY KEY
    );
    CREATE FUNCTION early_cancel_binds() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_advisory_xact_lock(hashtextextended(NEW.key, 54));
        DELETE FROM early_cancels WHERE key = NEW.key;
        IF FOUND THEN
            UPDATE invocations SET cancelled_entropy = entropy WHERE key = NEW.key;
        END IF;
        RETURN NULL;
    END
    $$;
    CREATE TRIGGER early_cancel_binds AFTER INSERT ON invocations
        FOR EACH ROW EXECUTE FUNCTION early_cancel_binds();
    "#,
    // 12 -> 13: what can end an unkeyed effect's unknown outcome, decided by the
    // guard at the claim (the SQLite journal's version 15). Additive.
    r#"
    ALTER TABLE effects ADD COLUMN ends_by TEXT;
    "#,
    // 13 -> 14: the upstreams an operator disabled (who, when), honoured by every
    // host of the journal until an operator enables it (the SQLite journal's
    // version 16). Additive.
    r#"
    CREATE TABLE upstream_disables (
        upstream     TEXT PRIMARY KEY,
        disabled_by  TEXT NOT NULL,
        disabled_at  BIGINT NOT NULL
    );
    "#,
];

/// The schema version this build writes.
pub const CURRENT_VERSION: i64 = MIGRATIONS.len() as i64;

/// The schema version the previous release wrote: every migration after it only
/// adds, so that release's hosts go on serving a journal a newer host migrated
/// (docs/operators.md, "Rolling upgrades"). Moved up at each release.
pub const PREVIOUS_RELEASE: i64 = 7;

/// Tests of upgrades only: makes the schema of `version` (an empty database) as
/// that release's hosts made it, by its migrations (a released one is never edited).
pub fn migrate_to(client: &mut Client, version: i64) -> Result<(), postgres::Error> {
    let mut tx = client.transaction()?;
    tx.batch_execute(
        "CREATE TABLE justonce_schema (
             only_row BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (only_row),
             version  BIGINT NOT NULL
         )",
    )?;
    for step in &MIGRATIONS[..usize::try_from(version).unwrap_or(0)] {
        tx.batch_execute(step)?;
    }
    tx.execute(
        "INSERT INTO justonce_schema (version) VALUES ($1)",
        &[&version],
    )?;
    tx.commit()
}

/// Any number, as long as it is the same in every justonce: hosts that start together
/// migrate one at a time.
const MIGRATION_LOCK: i64 = 0x6a75_7374_6f6e_6365;

/// Brings the database up to [`CURRENT_VERSION`], one migration per transaction.
/// `Ok(Some(found))`: the database was written by a newer build, and nothing was
/// changed.
pub(super) fn migrate(client: &mut Client) -> Result<Option<i64>, postgres::Error> {
    loop {
        let mut tx = client.transaction()?;
        lock(&mut tx)?;
        // `CREATE … IF NOT EXISTS` of a table that exists says so in a NOTICE, which
        // the client prints on stderr at every start; an operator reads it as a
        // problem. Only this transaction's notices are silenced; warnings still show.
        tx.batch_execute("SET LOCAL client_min_messages = warning")?;
        tx.batch_execute(
            "CREATE TABLE IF NOT EXISTS justonce_schema (
                 only_row BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (only_row),
                 version  BIGINT NOT NULL
             );
             INSERT INTO justonce_schema (version) VALUES (0) ON CONFLICT DO NOTHING;",
        )?;
        let version: i64 = tx
            .query_one("SELECT version FROM justonce_schema", &[])?
            .get(0);
        if version > CURRENT_VERSION {
            return Ok(Some(version));
        }
        if version == CURRENT_VERSION {
            tx.commit()?;
            return Ok(None);
        }
        let step = MIGRATIONS[usize::try_from(version).unwrap_or(0)];
        tx.batch_execute(step)?;
        tx.execute("UPDATE justonce_schema SET version = $1", &[&(version + 1)])?;
        tx.commit()?;
    }
}

/// Holds, until the transaction ends, the lock under which hosts change the schema.
pub(super) fn lock(tx: &mut postgres::Transaction<'_>) -> Result<(), postgres::Error> {
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A journal an older build wrote (version 3) keeps its audit trail when it is
    /// migrated, and records a `resolve` after.
    #[test]
    fn the_audit_trail_survives_the_migration_that_admits_resolve() {
        const NAME: &str = "the_audit_trail_survives_the_migration_that_admits_resolve";
        let Some(cluster) = super::super::testing::cluster(NAME) else {
            return;
        };
        let mut client = cluster.schema().connect(postgres::NoTls).unwrap();
        client
            .batch_execute(
                "CREATE TABLE justonce_schema (
                     only_row BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (only_row),
                     version  BIGINT NOT NULL);
                 INSERT INTO justonce_schema (version) VALUES (3);",
            )
            .unwrap();
        for step in &MIGRATIONS[..3] {
            client.batch_execute(step).unwrap();
        }
        let insert = "INSERT INTO operations (invocation_key, action, who, at, detail)
                      VALUES ('k', $1, 'ada', 7, '{}')";
        client.execute(insert, &[&"forget"]).unwrap();
        assert!(
            client.execute(insert, &[&"resolve"]).is_err(),
            "version 3 knows no resolve"
        );

        assert_eq!(migrate(&mut client).unwrap(), None);
        client.execute(insert, &[&"resolve"]).unwrap();
        client.execute(insert, &[&"resume"]).unwrap();
        assert!(
            client.execute(insert, &[&"erase"]).is_err(),
            "still checked"
        );
        let kept: Vec<String> = client
            .query("SELECT action FROM operations ORDER BY id", &[])
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(kept, ["forget", "resolve", "resume"]);
    }
}
