//! The SQLite journal's durable points as several processes see them, and what a
//! failed fsync leaves.

use super::*;
use crate::clock::Clock;
use crate::determinism::Seed;
use crate::keys::Fingerprint;

fn key(i: u32) -> InvocationKey {
    InvocationKey::from_stored(format!("{i:032}"))
}

fn fingerprint() -> Fingerprint {
    Fingerprint::from_stored("f".repeat(64))
}

fn record(i: u32) -> NewInvocation {
    NewInvocation {
        key: key(i),
        scope: "s".into(),
        tool: "t".into(),
        fingerprint: fingerprint(),
        arguments: "{}".into(),
        explicit_key: false,
        created_at: 1,
        retention_ms: 1 << 40,
        seed: Seed::random().unwrap(),
        component: None,
    }
}

fn lookup(journal: &SqliteJournal, i: u32) -> Result<Lookup> {
    let (k, fp, seed) = (key(i), fingerprint(), Seed::random().unwrap());
    journal.lookup(&Begin {
        key: &k,
        scope: "s",
        tool: "t",
        fingerprint: &fp,
        arguments: "{}",
        explicit_key: false,
        tool_call_id: None,
        now: 2,
        clock: crate::journal::ClockRef(&crate::clock::ManualClock::new(2)),
        retention_ms: 1 << 40,
        default_retention_ms: 1 << 40,
        lease_ms: 60_000,
        owner: "o",
        seed: &seed,
        component: None,
    })
}

/// A duplicate in one process that finds, by its first look, an outcome another
/// process committed but has not synced yet syncs it before it answers: the answer
/// must survive a power cut whoever committed it.
#[test]
fn a_replay_another_process_committed_is_synced_before_it_is_answered() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.db");
    let duplicate = SqliteJournal::open(&path, Durability::Full).unwrap();
    // Its own commits (creating the schema) are on disk.
    duplicate.make_durable().unwrap();
    // Another process commits the outcome; its fsync has not run yet.
    let first = SqliteJournal::open(&path, Durability::Normal).unwrap();
    assert!(first.complete_new(&record(1), "{}", 1).unwrap());

    let before = duplicate.stats().syncs;
    assert!(matches!(
        lookup(&duplicate, 1).unwrap(),
        Lookup::Replay { .. }
    ));
    assert_eq!(
        duplicate.stats().syncs,
        before + 1,
        "one fsync of the journal before the replay is answered"
    );
    // The opposite: a replay this process answers from its memory was synced when it
    // was first answered, and needs no fsync of its own.
    assert!(matches!(
        lookup(&duplicate, 1).unwrap(),
        Lookup::Replay { .. }
    ));
    assert_eq!(duplicate.stats().syncs, before + 1);
}

/// After a failed fsync the pages it should have written may be gone while a later
/// fsync returns OK: the journal refuses every later write, saying why.
#[test]
fn after_a_failed_fsync_the_journal_refuses_every_write_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.db");
    let journal = SqliteJournal::open(&path, Durability::Full).unwrap();
    assert!(journal.complete_new(&record(1), "{}", 1).unwrap());

    journal.sync.fail_next_fsync();
    let failed = journal.complete_new(&record(2), "{}", 2).unwrap_err();
    assert!(
        failed.to_string().contains("Input/output error"),
        "{failed}"
    );

    let refused = journal.complete_new(&record(3), "{}", 3).unwrap_err();
    assert!(
        matches!(refused, Error::JournalPoisoned { .. }),
        "{refused:?}"
    );
    let said = refused.to_string();
    assert!(
        said.contains("fsync") && said.contains("Input/output error"),
        "{said}"
    );
    assert_eq!(refused.kind(), "host_failed");
    assert!(!refused.retry_safe());
    // Nothing written, and the other writes are refused too.
    assert!(matches!(lookup(&journal, 3).unwrap(), Lookup::Absent));
    let (k, fp) = (key(4), fingerprint());
    let effect_key = EffectKey::from_stored("e".repeat(32));
    let claimed = journal.claim_attempt(
        &NewEffect {
            key: &effect_key,
            invocation: &k,
            seq: 0,
            provider: "p",
            class: "keyed",
            operation: "op",
            fingerprint: &fp,
            ends_by: None,
            now: 4,
        },
        &Lease {
            owner: "o",
            until: 60_000,
            ms: 60_000,
        },
        Some(&record(4)),
        &[],
    );
    assert!(
        matches!(claimed, Err(Error::JournalPoisoned { .. })),
        "{claimed:?}"
    );
    // A replay is not answered as durable either.
    assert!(matches!(
        lookup(&journal, 1),
        Err(Error::JournalPoisoned { .. })
    ));
}

/// A caller that read the clock, then waited for the write lock while the clock
/// stepped back and another run took the call over, judges that run's lease by the
/// time it decides, not by the time it read before: the lease is live, it waits.
#[test]
fn a_decision_judges_a_lease_by_the_clock_under_the_lock_not_by_a_time_read_before() {
    let journal = SqliteJournal::in_memory().unwrap();
    let clock = crate::clock::ManualClock::new(100_000);
    let (k, fp, seed) = (key(7), fingerprint(), Seed::random().unwrap());
    let begin = |owner: &'static str, now: i64| Begin {
        key: &k,
        scope: "s",
        tool: "t",
        fingerprint: &fp,
        arguments: "{}",
        explicit_key: false,
        tool_call_id: None,
        now,
        clock: crate::journal::ClockRef(&clock),
        retention_ms: 1 << 40,
        default_retention_ms: 1 << 40,
        lease_ms: 30_000,
        owner,
        seed: &seed,
        component: None,
    };
    // A first run holds the call until 130 000, and dies.
    let first = journal.decide(&begin("first", clock.now_ms())).unwrap();
    assert!(
        matches!(first, BeginOutcome::Run { resumed: false, .. }),
        "{first:?}"
    );
    // A duplicate reads the clock at 200 000, then waits for the lock...
    clock.set(200_000);
    let stale = begin("late", clock.now_ms());
    // ...while the clock steps back 50 s and another run takes the call over, with
    // a lease until 180 000.
    clock.set(150_000);
    let taken = journal.decide(&begin("second", clock.now_ms())).unwrap();
    assert!(
        matches!(taken, BeginOutcome::Run { resumed: true, .. }),
        "{taken:?}"
    );
    // The duplicate decides now: the second run's lease is live at 150 000.
    assert_eq!(journal.decide(&stale).unwrap(), BeginOutcome::Wait);
    // The opposite: once that lease has run out, the duplicate takes over.
    clock.set(180_001);
    let resumed = journal.decide(&stale).unwrap();
    assert!(
        matches!(resumed, BeginOutcome::Run { resumed: true, .. }),
        "{resumed:?}"
    );
}

#[test]
fn every_commit_and_every_fsync_is_timed() {
    let dir = tempfile::tempdir().unwrap();
    let full = SqliteJournal::open(&dir.path().join("full.db"), Durability::Full).unwrap();
    let (commits, _) = full.metrics().counts();
    assert!(full.complete_new(&record(1), "{}", 1).unwrap());
    full.make_durable().unwrap();
    let (after, fsyncs) = full.metrics().counts();
    assert_eq!(after, commits + 1, "the outcome's commit");
    assert!(fsyncs >= 1);
    assert_eq!(fsyncs, full.stats().syncs, "each fsync made is timed");
    // The opposite: a journal that makes no fsyncs times none.
    let normal = SqliteJournal::open(&dir.path().join("normal.db"), Durability::Normal).unwrap();
    assert!(normal.complete_new(&record(1), "{}", 1).unwrap());
    normal.make_durable().unwrap();
    assert_eq!(normal.metrics().counts().1, 0);
    assert!(normal.metrics().counts().0 >= 1);
}

/// A journal written by the previous schema version (7: an age index, effects in a
/// rowid table with two indexes) opens, is migrated, and every record in it is still
/// read, replayed and finished as before.
#[test]
fn a_journal_of_the_previous_schema_is_migrated_and_replays_its_records() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        for step in &schema::MIGRATIONS[..7] {
            conn.execute_batch(step).unwrap();
        }
        conn.pragma_update(None, "user_version", 7).unwrap();
        let invocation = "INSERT INTO invocations (key, scope, tool, fingerprint, state, outcome,
                              runs, created_at, updated_at, completed_at, lease_owner,
                              lease_expires_at, arguments, retention_ms)
                          VALUES (?1, 's', 't', ?2, ?3, ?4, 1, 1, 1, ?5, ?6, ?7, '{}', ?8)";
        let fp = fingerprint();
        let done = r#"{"status":"success","result":{"sent":true}}"#;
        conn.execute(
            invocation,
            rusqlite::params![
                key(1).as_str(),
                fp.as_str(),
                "completed",
                done,
                1,
                None::<String>,
                None::<i64>,
                1_i64 << 40
            ],
        )
        .unwrap();
        // A run that holds its lease with an effect it has not finished.
        conn.execute(
            invocation,
            rusqlite::params![
                key(2).as_str(),
                fp.as_str(),
                "running",
                None::<String>,
                None::<i64>,
                "o",
                1_i64 << 40,
                1_i64 << 40
            ],
        )
        .unwrap();
        // A run that stopped on an unkeyed effect a person must resolve.
        conn.execute(
            invocation,
            rusqlite::params![
                key(3).as_str(),
                fp.as_str(),
                "incomplete",
                None::<String>,
                None::<i64>,
                None::<String>,
                None::<i64>,
                1_i64 << 40
            ],
        )
        .unwrap();
        let effect = "INSERT INTO effects (key, invocation_key, seq, provider, class, operation,
                          fingerprint, state, attempts, response, created_at, updated_at)
                      VALUES (?1, ?2, ?3, 'mail', ?4, 'send', ?5, ?6, 1, ?7, 1, 1)";
        for (k, inv, seq, class, state, response) in [
            ("e1", key(1), 1, "keyed", "done", Some(r#"{"id":2}"#)),
            ("e0", key(1), 0, "keyed", "done", Some(r#"{"id":1}"#)),
            ("e2", key(2), 0, "keyed", "pending", None),
            ("e3", key(3), 0, "unkeyed", "pending", None),
        ] {
            conn.execute(
                effect,
                rusqlite::params![
                    k.repeat(16),
                    inv.as_str(),
                    seq,
                    class,
                    fp.as_str(),
                    state,
                    response
                ],
            )
            .unwrap();
        }
    }

    let journal = SqliteJournal::open(&path, Durability::Normal).unwrap();
    let Lookup::Replay { outcome, .. } = lookup(&journal, 1).unwrap() else {
        panic!("the completed record replays");
    };
    assert_eq!(outcome, r#"{"status":"success","result":{"sent":true}}"#);
    let entries = journal.entries(None, 10).unwrap();
    assert_eq!(entries.len(), 3);
    let first = entries.iter().find(|e| e.key == key(1).as_str()).unwrap();
    let seqs: Vec<(u32, String)> = first
        .effects
        .iter()
        .map(|e| (e.seq, e.key.clone()))
        .collect();
    assert_eq!(seqs, [(0, "e0".repeat(16)), (1, "e1".repeat(16))]);
    let effect = journal.effect(&key(1), 1).unwrap().expect("effect 1 kept");
    assert_eq!(effect.response.as_deref(), Some(r#"{"id":2}"#));
    let unresolved = journal.unresolved(10).unwrap();
    assert_eq!(unresolved.len(), 1, "{unresolved:?}");
    assert_eq!(unresolved[0].key, "e3".repeat(16));
    // The running call's effect is finished by its key, under its lease.
    let lease = Lease {
        owner: "o",
        until: 1 << 41,
        ms: 60_000,
    };
    let answer = crate::journal::Answer::Ok(serde_json::json!({"id": 3}));
    let e2 = EffectKey::from_stored("e2".repeat(16));
    let saved = journal
        .finish_effect(&e2, &answer, &lease, &key(2), 5)
        .unwrap();
    assert!(saved.is_some(), "finished under its lease");
    let response = journal.effect(&key(2), 0).unwrap().unwrap().response;
    assert_eq!(response, Some(answer.to_stored()));
    // The new layout is in place.
    let effects_sql: String = journal
        .read(|c| {
            c.query_row(
                "SELECT sql FROM sqlite_master WHERE name = 'effects'",
                [],
                |r| r.get(0),
            )
        })
        .unwrap();
    assert!(effects_sql.contains("WITHOUT ROWID"), "{effects_sql}");
}

/// WAL frames (pages) the journal writes per commit of each kind, on a journal
/// that is never checkpointed, so the WAL only grows.
fn frames_per_commit(commit: impl Fn(&SqliteJournal, u32)) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.db");
    let journal = SqliteJournal::open_for_power_loss(&path, Durability::Normal).unwrap();
    let wal = dir.path().join("journal.db-wal");
    let frames = || {
        let page: u64 = journal
            .read(|c| c.query_row("PRAGMA page_size", [], |r| r.get(0)))
            .unwrap();
        (std::fs::metadata(&wal).unwrap().len().saturating_sub(32)) / (page + 24)
    };
    // Keys in no order, as hashes are, and enough of them for B-trees of a few levels.
    let spread = |i: u32| i.wrapping_mul(2_654_435_761) >> 8;
    for i in 0..2_000 {
        commit(&journal, spread(i));
    }
    let (before, commits) = (frames(), journal.stats().commits);
    for i in 2_000..2_500 {
        commit(&journal, spread(i));
    }
    let written = (frames() - before) as f64;
    written / (journal.stats().commits - commits) as f64
}

/// Each commit of a call touches few pages: a call without effects one insert into
/// the invocations table and its key, a claim that and one effect row, an outcome
/// the two rows it changes. (Schema 7 wrote ≈ 3.7, 6 and 2 pages.)
#[test]
fn pages_per_commit() {
    let outcome = r#"{"status":"success","result":{"message_id":"msg-1"}}"#;
    let no_effect = frames_per_commit(|j, i| {
        assert!(j.complete_new(&record(i), outcome, 1).unwrap());
    });
    let claim_then_outcome = |claim_only: bool| {
        frames_per_commit(move |j, i| {
            let (k, fp) = (key(i), fingerprint());
            let effect_key = EffectKey::from_stored(format!("{i:031}e"));
            let lease = Lease {
                owner: "o",
                until: 1 << 41,
                ms: 60_000,
            };
            let effect = NewEffect {
                key: &effect_key,
                invocation: &k,
                seq: 0,
                provider: "p",
                class: "keyed",
                operation: "op",
                fingerprint: &fp,
                ends_by: None,
                now: 1,
            };
            let claimed = j
                .claim_attempt(&effect, &lease, Some(&record(i)), &[])
                .unwrap();
            assert!(claimed.is_ok());
            if !claim_only {
                let answer = crate::journal::DeferredAnswer {
                    key: effect_key.clone(),
                    answer: crate::journal::Answer::Ok(serde_json::json!({"id": 1})),
                    at: 2,
                };
                assert!(j.complete(&k, "o", outcome, 2, &[answer]).unwrap());
            }
        })
    };
    let claim = claim_then_outcome(true);
    // Two commits a call: the mean of the claim's and the outcome's.
    let per_commit = claim_then_outcome(false);
    let outcome_commit = 2.0 * per_commit - claim;
    eprintln!(
        "WAL frames per commit: no effect {no_effect:.2}, claim {claim:.2}, outcome {outcome_commit:.2}"
    );
    assert!(no_effect < 2.8, "no effect: {no_effect:.2} pages a commit");
    assert!(claim < 4.5, "a claim: {claim:.2} pages");
    assert!(
        outcome_commit < 2.8,
        "an outcome: {outcome_commit:.2} pages"
    );
}

/// A `Full` journal writes its WAL ahead of the frames (a runway of zeros, see
/// `runway`), so its durable points' fsyncs overwrite blocks the file has, and
/// again once reopened (a clean close deletes the WAL). A `Normal` journal (no fsync
/// on the call path) and the power-loss model's (which reads what an fsync kept from
/// the WAL's length) leave the WAL as SQLite writes it. Either way, a crash image
/// (the files copied while the journal is open) holds every saved call.
#[test]
fn only_a_full_journal_writes_its_wal_ahead_of_the_frames() {
    let open = |path: &Path, durability, power_loss| match power_loss {
        true => SqliteJournal::open_for_power_loss(path, durability),
        false => SqliteJournal::open(path, durability),
    };
    for (durability, power_loss, ahead) in [
        (Durability::Full, false, true),
        (Durability::Normal, false, false),
        (Durability::Full, true, false),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.db");
        let wal = dir.path().join("journal.db-wal");
        let what = format!("{durability:?}, power loss {power_loss}");
        // Twice: a new journal, then the same one reopened.
        for (opening, calls) in [(0, 0..20), (1, 20..40)] {
            let journal = open(&path, durability, power_loss).unwrap();
            for i in calls {
                assert!(journal.complete_new(&record(i), "{}", 1).unwrap());
            }
            let page: u64 = journal
                .read(|c| c.query_row("PRAGMA page_size", [], |r| r.get(0)))
                .unwrap();
            // Read from the file, so a log the checkpointer let restart meanwhile
            // (stale frames at its end) still reads as having no runway.
            let short = runway::Runway::open(&wal, page)
                .unwrap()
                .is_short()
                .unwrap();
            assert_eq!(!short, ahead, "{what}, opening {opening}");

            let crashed = tempfile::tempdir().unwrap();
            for name in ["journal.db", "journal.db-wal"] {
                std::fs::copy(dir.path().join(name), crashed.path().join(name)).unwrap();
            }
            let image = rusqlite::Connection::open(crashed.path().join("journal.db")).unwrap();
            let saved: i64 = image
                .query_row("SELECT count(*) FROM invocations", [], |r| r.get(0))
                .unwrap();
            assert_eq!(saved, 20 * (opening + 1), "{what}, opening {opening}");
        }
    }
}

/// An outbox message enqueued by a commit that was not synced (a transactional
/// effect has no durable point of its own) is synced before delivery takes it: the
/// deliverer sends it next, and a power cut must not lose a message that left
/// (issue 38, 1). Nothing due, no fsync.
#[test]
fn an_outbox_message_is_durable_before_delivery_takes_it() {
    use crate::journal::outbox::{OutboxQueue, SQLITE_SCHEMA};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.db");
    let journal = SqliteJournal::open(&path, Durability::Full).unwrap();
    journal.prepare_outbox().unwrap();
    journal
        .with(|conn| conn.execute_batch(SQLITE_SCHEMA))
        .unwrap();
    journal.make_durable().unwrap();

    let before = journal.stats().syncs;
    assert!(journal.take_message(10, 0, &[]).unwrap().is_none());
    assert_eq!(
        journal.stats().syncs,
        before,
        "nothing taken, nothing synced"
    );

    // Enqueued as a transactional effect enqueues it: committed, not synced.
    journal
        .with(|conn| {
            conn.execute(
                "INSERT INTO outbox (effect_key, tool, method, url, headers, body, state,
                                     next_attempt_at, created_at, updated_at)
                 VALUES ('k1', 'hook', 'POST', 'http://127.0.0.1:9/', '{}', x'7b7d',
                         'pending', 0, 0, 0)",
                [],
            )
        })
        .unwrap();
    let taken = journal.take_message(10, 0, &[]).unwrap().expect("due");
    assert_eq!(taken.effect_key, "k1");
    assert_eq!(
        journal.stats().syncs,
        before + 1,
        "one fsync before the message is handed to the sender"
    );
}

/// A request-state secret is on disk before any state is made under it: a power cut
/// that took it back would make every state made under it a forgery. Found again, it
/// costs no fsync; a rotation is synced too.
#[test]
fn a_request_state_secret_is_durable_before_it_is_used() {
    let dir = tempfile::tempdir().unwrap();
    let journal = SqliteJournal::open(&dir.path().join("journal.db"), Durability::Full).unwrap();
    journal.make_durable().unwrap();
    let kept = 24 * 3600 * 1000;

    let before = journal.stats().syncs;
    let first = journal.state_secrets(0, kept, &"a".repeat(64)).unwrap();
    assert_eq!(first, ["a".repeat(64)]);
    assert_eq!(
        journal.stats().syncs,
        before + 1,
        "synced before it is used"
    );

    let again = journal.state_secrets(1, kept, &"b".repeat(64)).unwrap();
    assert_eq!(
        again, first,
        "the journal's one secret, not the one offered"
    );
    assert_eq!(journal.stats().syncs, before + 1, "found: nothing to sync");

    journal.rotate_state_secret(2, &"c".repeat(64)).unwrap();
    assert_eq!(journal.stats().syncs, before + 2, "a rotation is synced");
    let rotated = journal.state_secrets(3, kept, &"d".repeat(64)).unwrap();
    assert_eq!(rotated, ["c".repeat(64), "a".repeat(64)]);
}
