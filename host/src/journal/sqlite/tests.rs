//! The SQLite journal's durable points as several processes see them, and what a
//! failed fsync leaves.

use super::*;
use crate::determinism::Seed;
use crate::clock::Clock;
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
    assert!(matches!(first, BeginOutcome::Run { resumed: false, .. }), "{first:?}");
    // A duplicate reads the clock at 200 000, then waits for the lock...
    clock.set(200_000);
    let stale = begin("late", clock.now_ms());
    // ...while the clock steps back 50 s and another run takes the call over, with
    // a lease until 180 000.
    clock.set(150_000);
    let taken = journal.decide(&begin("second", clock.now_ms())).unwrap();
    assert!(matches!(taken, BeginOutcome::Run { resumed: true, .. }), "{taken:?}");
    // The duplicate decides now: the second run's lease is live at 150 000.
    assert_eq!(journal.decide(&stale).unwrap(), BeginOutcome::Wait);
    // The opposite: once that lease has run out, the duplicate takes over.
    clock.set(180_001);
    let resumed = journal.decide(&stale).unwrap();
    assert!(matches!(resumed, BeginOutcome::Run { resumed: true, .. }), "{resumed:?}");
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
