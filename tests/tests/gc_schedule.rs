//! `serve`'s gc on a schedule, through the library: the journal decides when, on its
//! own clock (here the tests' manual clock, also PostgreSQL's), and one host of a
//! journal runs it at a time; a run is counted in the host's metrics. On SQLite (a
//! file two hosts share) and on PostgreSQL.

use std::time::Duration;

use justonce::__private::postgres_testing::cluster;
use justonce::{CallRequest, Clock as _, HostIdentity, ManualClock, ScheduledGc};
use serde_json::json;

use crate::support::{TestHost, test_host};

const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(24 * 3600);

/// A host named `name` on the journal `url` (a SQLite file or a PostgreSQL URL),
/// reading `clock` (on PostgreSQL, the database's clock too).
fn host(url: &str, name: &str, clock: &ManualClock) -> TestHost {
    let clock = std::sync::Arc::new(clock.clone());
    test_host(|b| {
        let b = b
            .database(url)
            .clock(clock)
            .identity(HostIdentity::named(name).unwrap());
        match url.starts_with("postgres") {
            true => b.database_clock_is_host_clock(),
            false => b,
        }
    })
}

fn ran(outcome: &ScheduledGc) -> u64 {
    match outcome {
        ScheduledGc::Ran(report) => report.invocations,
        other => panic!("expected a run, got {other:?}"),
    }
}

/// Two hosts on `url`: the first check runs gc (and removes the expired call); the
/// other host's check within the interval does not; once the interval has passed on
/// the journal's clock, exactly one of them runs it again.
fn one_gc_per_interval_by_one_host(url: &str, clock: &ManualClock) -> TestHost {
    let a = host(url, "web-a", clock);
    let b = host(url, "web-b", clock);
    a.host
        .call(&CallRequest::new("echo", json!({"message": "old"}).to_string()).conversation("c"))
        .unwrap();
    clock.advance(DAY + Duration::from_millis(1));
    let mark = a.host.journal_mark().unwrap();
    assert_eq!(mark.newest_call_at, clock.now_ms() - 24 * 3600 * 1000 - 1);

    assert_eq!(ran(&a.host.gc_if_due(HOUR).unwrap()), 1, "the expired call");
    assert_eq!(
        b.host.journal_mark().unwrap(),
        mark,
        "gc removed the newest call, not the journal's mark (nor its identity)"
    );
    let metrics = a.host.metrics_text();
    assert!(
        metrics.contains("justonce_gc_removed_total{record=\"invocations\"} 1")
            && metrics.contains("justonce_gc_runs_total 1"),
        "{metrics}"
    );
    let now = clock.now_ms();
    assert_eq!(
        b.host.gc_if_due(HOUR).unwrap(),
        ScheduledGc::NotDue {
            last: now,
            by: "web-a".into()
        }
    );
    clock.advance(HOUR - Duration::from_millis(1));
    assert!(matches!(
        b.host.gc_if_due(HOUR).unwrap(),
        ScheduledGc::NotDue { .. }
    ));
    assert!(
        b.host.metrics_text().contains("justonce_gc_runs_total 0"),
        "web-b ran nothing"
    );
    clock.advance(Duration::from_millis(1));
    assert_eq!(ran(&b.host.gc_if_due(HOUR).unwrap()), 0);
    assert_eq!(
        a.host.gc_if_due(HOUR).unwrap(),
        ScheduledGc::NotDue {
            last: clock.now_ms(),
            by: "web-b".into()
        },
        "web-b's run counts for web-a too"
    );
    b
}

#[test]
fn gc_runs_once_per_interval_by_one_host_of_a_sqlite_journal() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("journal.db");
    one_gc_per_interval_by_one_host(db.to_str().unwrap(), &ManualClock::default());
}

#[test]
fn gc_runs_once_per_interval_by_one_host_of_a_postgres_journal_and_never_beside_another() {
    let test =
        "gc_runs_once_per_interval_by_one_host_of_a_postgres_journal_and_never_beside_another";
    let Some(cluster) = cluster(test) else {
        return;
    };
    let url = cluster.database();
    let clock = ManualClock::default();
    let b = one_gc_per_interval_by_one_host(&url, &clock);

    // A host in the middle of a run holds the schedule's row; another that checks
    // meanwhile skips it rather than collecting beside it.
    clock.advance(HOUR);
    let mut holder = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let mut running = holder.transaction().unwrap();
    running
        .execute(
            "SELECT 1 FROM journal_meta WHERE name = 'gc' FOR UPDATE",
            &[],
        )
        .unwrap();
    assert_eq!(b.host.gc_if_due(HOUR).unwrap(), ScheduledGc::Busy);
    running.rollback().unwrap();
    assert_eq!(ran(&b.host.gc_if_due(HOUR).unwrap()), 0, "free again");
}
