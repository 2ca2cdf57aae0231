//! Each host's memory of recent outcomes on a shared PostgreSQL journal, kept true
//! across hosts.
//!
//! A host answers a retry of an outcome it read lately from memory (`journal/recent.rs`,
//! the memory the SQLite journal keeps too), without a round trip. Another host's
//! `forget` (or `abandon`, `resolve`, or a `gc` that deleted records) deletes what this
//! memory may hold, so every such write also sends a notification (`pg_notify`, on the
//! journal's channel: `channel!`) in its transaction, which PostgreSQL delivers to every listening session when, and only
//! if, it commits. Each host keeps one connection of its own that `LISTEN`s, on a
//! thread of its own, and drops everything remembered on each notification. The
//! window is the notification's delivery (the time a commit takes to reach another
//! host's socket, well under a millisecond on one network), where SQLite hosts look
//! for operations once a second.
//!
//! While that connection is not listening (not yet, lost, reconnecting) a
//! notification could be missed, so the memory is dropped and not used: every call
//! reads the journal. The listener says it is alive at least every [`HEARTBEAT`]
//! (an empty query when nothing came); the memory is used only while it did within
//! [`LIVE_FOR`], so a listener cut off without its socket closing stops serving
//! replays within seconds.
//!
//! The listener connects as the journal does: with a URL of several hosts, to the one
//! that takes writes (`LISTEN` is refused on a standby). When the primary fails over,
//! its session ends, the memory is dropped, and the listener finds the new primary
//! and listens there; until then every call reads the journal.
//!
//! Expiry is judged on the database's clock, never the host's: an entry keeps the
//! time its record's window ends as the host's monotonic time (the time before the
//! read that found it, plus what remained of the window on the database's clock at
//! the read, less a margin for the clocks' rates: [`local_deadline`]), so a host whose
//! clock is set wrong, or jumps, never replays past retention.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use postgres::fallible_iterator::FallibleIterator;

use super::PostgresTarget;
use super::prepared::{Db, Statements};
use crate::journal::recent::Recent;

/// How often the listener says it is alive when no notification comes.
pub(super) const HEARTBEAT: Duration = Duration::from_millis(500);

/// How long after the listener last said it was alive the memory may still be used.
const LIVE_FOR: Duration = Duration::from_secs(2);

/// The longest wait before connecting the listener again.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// A clock may run this much faster than another (1 ms per second): far more than two
/// NTP-disciplined clocks drift apart.
const RATE_MARGIN: i64 = 1_000;

/// When, on the host's clock for the memory (`anchor` taken before the read), a
/// record whose window ends at `expires_at` on the database's clock, read when that
/// clock said `db_now`, is surely still within it: the window that remained, less
/// one part in [`RATE_MARGIN`] and a millisecond.
pub(super) fn local_deadline(anchor: i64, db_now: i64, expires_at: i64) -> i64 {
    let left = expires_at.saturating_sub(db_now);
    if left <= 0 {
        return anchor;
    }
    anchor.saturating_add(left - left / RATE_MARGIN - 1)
}

/// What the journal and its listener thread share.
#[derive(Debug)]
pub(super) struct Shared {
    /// The outcomes remembered.
    pub(super) recent: Recent,
    /// When the listener last said it was alive (ms since `epoch`); `-1`: it is not
    /// listening.
    heard: AtomicI64,
    epoch: Instant,
    /// Notifications handled (tests wait for one).
    notices: AtomicU64,
    /// Sessions that began listening (tests wait for a new one).
    sessions: AtomicU64,
    /// Set when the journal is dropped: the thread ends.
    stop: AtomicBool,
}

impl Shared {
    fn new() -> Self {
        Self {
            recent: Recent::default(),
            heard: AtomicI64::new(-1),
            epoch: Instant::now(),
            notices: AtomicU64::new(0),
            sessions: AtomicU64::new(0),
            stop: AtomicBool::new(false),
        }
    }

    fn since_epoch(&self) -> i64 {
        i64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(i64::MAX)
    }

    /// The host's monotonic clock for the memory (ms).
    pub(super) fn monotonic_ms(&self) -> i64 {
        self.since_epoch()
    }

    /// Whether the memory may be used: the listener listens, and said so lately.
    pub(super) fn live(&self) -> bool {
        let heard = self.heard.load(Ordering::Acquire);
        heard >= 0 && self.since_epoch().saturating_sub(heard) < LIVE_FOR.as_millis() as i64
    }

    fn heard_now(&self) {
        self.heard.store(self.since_epoch(), Ordering::Release);
    }

    /// Not listening: nothing remembered may be used, and nothing is.
    fn deaf(&self) {
        self.heard.store(-1, Ordering::Release);
        self.recent.clear();
    }

    /// Notifications handled so far.
    #[cfg(test)]
    pub(super) fn notices(&self) -> u64 {
        self.notices.load(Ordering::Acquire)
    }

    /// Sessions that began listening so far.
    #[cfg(test)]
    pub(super) fn sessions(&self) -> u64 {
        self.sessions.load(Ordering::Acquire)
    }

    /// Ends the listener thread (within a [`HEARTBEAT`]).
    pub(super) fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.deaf();
    }
}

/// Starts the listener thread of a journal on `target`; what it shares with the
/// journal.
pub(super) fn start(target: &PostgresTarget) -> Arc<Shared> {
    let shared = Arc::new(Shared::new());
    let mut target = target.clone();
    let config = &mut target.config;
    let app = format!(
        "{}-listener",
        config.get_application_name().unwrap_or("justonce")
    );
    config.application_name(&app);
    let thread_shared = Arc::clone(&shared);
    let spawned = std::thread::Builder::new()
        .name("justonce-pg-listen".into())
        .spawn(move || listen(&target, &thread_shared));
    if let Err(e) = spawned {
        tracing::warn!("cannot start the journal's listener, replays read the journal: {e}");
    }
    shared
}

/// The listener thread: connects, listens, and drops the memory on every
/// notification, until the journal is dropped; connects again after any failure.
fn listen(target: &PostgresTarget, shared: &Shared) {
    let shown = &target.shown;
    let mut backoff = Duration::from_millis(50);
    while !shared.stop.load(Ordering::Acquire) {
        let sessions = shared.sessions.load(Ordering::Acquire);
        match listen_once(target, shared) {
            Ok(()) => return,
            Err(e) => {
                shared.deaf();
                // A session that listened before it was lost (the primary failed
                // over, the server restarted) starts the waits over: the next
                // server is looked for at once, not after the last outage's wait.
                if shared.sessions.load(Ordering::Acquire) > sessions {
                    backoff = Duration::from_millis(50);
                }
                if shared.stop.load(Ordering::Acquire) {
                    return;
                }
                tracing::debug!(target = %shown, "the journal's listener lost its connection: {e}");
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// One connection's life: `Ok` when the journal was dropped.
fn listen_once(target: &PostgresTarget, shared: &Shared) -> Result<(), postgres::Error> {
    let mut client = target.connect()?;
    let channel: String = client
        .query_one(concat!("SELECT ", channel!()), &[])?
        // NULL while the journal's schema does not exist (dropped under it): an
        // error like a lost session, retried after the backoff, never a panic of
        // this thread (a soak found it: the listener thread died).
        .try_get(0)?;
    client.batch_execute(&format!("LISTEN \"{}\"", channel.replace('"', "\"\"")))?;
    // Listening from here on: whatever was remembered before may predate a deletion
    // this session did not hear of.
    shared.recent.clear();
    shared.heard_now();
    shared.sessions.fetch_add(1, Ordering::AcqRel);
    let trips = AtomicU64::new(0);
    let mut statements = Statements::default();
    loop {
        if shared.stop.load(Ordering::Acquire) {
            return Ok(());
        }
        let heard = client
            .notifications()
            .timeout_iter(HEARTBEAT)
            .next()?
            .is_some();
        if heard {
            shared.recent.clear();
            shared.notices.fetch_add(1, Ordering::AcqRel);
            shared.heard_now();
            continue;
        }
        // Nothing came: say it is alive (a closed connection fails here), and add the
        // replays answered from memory meanwhile to the journal's counts.
        client.simple_query("")?;
        shared.heard_now();
        let counts = shared.recent.take_uncounted();
        if !counts.is_empty() {
            let mut db = Db::new(&mut client, &mut statements, &trips);
            super::ops::add_replays(&mut db, &counts)?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::latency::{begin, key, one_effect};
    use super::super::{PostgresJournal, PostgresTarget, testing};
    use super::*;
    use crate::clock::ManualClock;
    use crate::determinism::Seed;
    use crate::journal::{Durability, Journal, Lookup, NewInvocation, Operator};
    use crate::keys::{Fingerprint, InvocationKey};

    /// Waits (for an event, up to 20 s) until `done`.
    fn until(what: &str, done: impl Fn() -> bool) {
        let start = Instant::now();
        while !done() {
            assert!(start.elapsed() < Duration::from_secs(20), "never: {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// A journal on `config` whose listener listens.
    fn listening(config: &postgres::Config) -> PostgresJournal {
        let j = PostgresJournal::open(
            PostgresTarget::from_config(config.clone()),
            Durability::Full,
        )
        .unwrap();
        until("the listener listens", || j.memory.live());
        j
    }

    /// What `j` answers a retry of `k` with, and how many round trips it took.
    fn retry(j: &PostgresJournal, k: &InvocationKey, fp: &Fingerprint) -> (Lookup, u64) {
        let seed = Seed::random().unwrap();
        let before = j.round_trips();
        let found = j.lookup(&begin(k, fp, &seed, "o", 5)).unwrap();
        (found, j.round_trips() - before)
    }

    fn replayed(found: &Lookup) -> bool {
        matches!(found, Lookup::Replay { .. })
    }

    /// Two hosts on one database: a replay the first host remembers costs it no round
    /// trip, and once the second host forgets the call, the first runs it again
    /// instead of replaying what it remembered.
    #[test]
    fn a_forget_on_another_host_ends_the_replays_the_first_remembers() {
        let Some(cluster) =
            testing::cluster("a_forget_on_another_host_ends_the_replays_the_first_remembers")
        else {
            return;
        };
        let config = cluster.schema();
        let (a, b) = (listening(&config), listening(&config));
        let fp = Fingerprint::from_stored("f".repeat(64));
        let k = key("forgot", 0);
        one_effect(&a, &k, "o", &fp);
        let (found, trips) = retry(&a, &k, &fp);
        assert!(
            replayed(&found) && trips > 0,
            "read from the journal: {found:?}"
        );
        let (found, trips) = retry(&a, &k, &fp);
        assert!(replayed(&found), "{found:?}");
        assert_eq!(trips, 0, "a replay from memory makes no round trip");
        let before = a.round_trips();
        let remembered = a.replay_from_memory(&k, &fp, 0);
        assert_eq!(remembered.as_deref(), Some("{}"), "from memory alone");
        assert_eq!(a.round_trips(), before);

        let heard = a.memory.notices();
        let by = Operator {
            by: "ada",
            force: false,
            now: 9,
        };
        b.forget(&k, &by).unwrap();
        until("the first host hears of the forget", || {
            a.memory.notices() > heard
        });
        assert_eq!(a.replay_from_memory(&k, &fp, 0), None, "forgotten");
        let (found, trips) = retry(&a, &k, &fp);
        assert_eq!(found, Lookup::Absent, "no stale replay after the forget");
        assert!(trips > 0);

        // The replays answered from memory reach the journal's count.
        let k2 = key("counted", 0);
        one_effect(&a, &k2, "o", &fp);
        for _ in 0..3 {
            assert!(replayed(&retry(&a, &k2, &fp).0));
        }
        let entry = b.story(&k2).unwrap().entry.unwrap();
        until("the listener adds the replays to the journal", || {
            b.story(&k2).unwrap().entry.unwrap().replays == 3
        });
        assert!(entry.replays <= 3);
    }

    /// A host whose listener lost its connection might have missed a notification: it
    /// drops what it remembers, and reads the journal until it listens again.
    #[test]
    fn a_host_whose_listener_lost_its_session_forgets_what_it_remembered() {
        let Some(cluster) =
            testing::cluster("a_host_whose_listener_lost_its_session_forgets_what_it_remembered")
        else {
            return;
        };
        let app = format!("mem-deaf-{}", std::process::id());
        let mut config = cluster.schema();
        config.application_name(&app);
        let a = listening(&config);
        let fp = Fingerprint::from_stored("f".repeat(64));
        let k = key("deaf", 0);
        one_effect(&a, &k, "o", &fp);
        retry(&a, &k, &fp);
        assert_eq!(retry(&a, &k, &fp).1, 0, "remembered");

        let sessions = a.memory.sessions();
        let mut admin = postgres::Client::connect(&cluster.admin_url(), postgres::NoTls).unwrap();
        let ended: i64 = admin
            .query_one(
                "WITH named AS MATERIALIZED (
                    SELECT pid FROM pg_stat_activity WHERE application_name = $1)
                 SELECT count(*) FROM named WHERE pg_terminate_backend(pid, 10000)",
                &[&format!("{app}-listener")],
            )
            .unwrap()
            .get(0);
        assert_eq!(ended, 1);
        until("the listener listens again", || {
            a.memory.sessions() > sessions && a.memory.live()
        });
        let (found, trips) = retry(&a, &k, &fp);
        assert!(replayed(&found), "{found:?}");
        assert!(trips > 0, "forgotten when the listener lost its session");
        assert_eq!(retry(&a, &k, &fp).1, 0, "remembered again");
    }

    /// What is remembered is not replayed from memory alone while the listener is
    /// not listening (it may have missed a deletion).
    #[test]
    fn a_replay_from_memory_needs_a_listening_listener() {
        let Some(cluster) = testing::cluster("a_replay_from_memory_needs_a_listening_listener")
        else {
            return;
        };
        let mut a = listening(&cluster.schema());
        // A memory of its own, whose listener never listened.
        let deaf = Arc::new(Shared::new());
        std::mem::replace(&mut a.memory, Arc::clone(&deaf)).stop();
        let fp = Fingerprint::from_stored("f".repeat(64));
        let k = key("unheard", 0);
        let generation = deaf.recent.generation();
        deaf.recent.remember(&k, &fp, i64::MAX, "out", generation);
        assert_eq!(a.replay_from_memory(&k, &fp, 0), None, "not listening");
        // The opposite: the same memory, listening.
        deaf.heard_now();
        assert_eq!(a.replay_from_memory(&k, &fp, 0).as_deref(), Some("out"));
    }

    #[test]
    fn memory_is_used_only_while_the_listener_listens() {
        let shared = Shared::new();
        assert!(!shared.live(), "not yet listening");
        shared.heard_now();
        assert!(shared.live());
        let fp = Fingerprint::from_stored("f".repeat(64));
        let k = key("live", 0);
        let generation = shared.recent.generation();
        shared.recent.remember(&k, &fp, 10, "out", generation);
        shared.deaf();
        assert!(!shared.live(), "lost");
        assert_eq!(
            shared.recent.recall(&k, &fp, 1),
            crate::journal::recent::Recall::Unknown,
            "and forgotten"
        );
    }

    /// A remembered outcome is replayed from memory only within its record's window
    /// on the database's clock (pinned here): at its end, the journal decides.
    #[test]
    fn a_remembered_outcome_is_not_replayed_past_its_window() {
        let Some(cluster) =
            testing::cluster("a_remembered_outcome_is_not_replayed_past_its_window")
        else {
            return;
        };
        let config = cluster.schema();
        let start = 1_000_000;
        let clock = Arc::new(ManualClock::new(start));
        let a = listening(&config).with_database_clock(clock.clone());
        let fp = Fingerprint::from_stored("f".repeat(64));
        let k = key("window", 0);
        let record = NewInvocation {
            arguments: "{}".into(),
            key: k.clone(),
            scope: "s".into(),
            tool: "t".into(),
            fingerprint: fp.clone(),
            explicit_key: false,
            created_at: start,
            retention_ms: 1_000,
            seed: Seed::random().unwrap(),
            component: None,
        };
        assert!(a.complete_new(&record, "{}", start).unwrap());
        assert!(replayed(&retry(&a, &k, &fp).0));
        clock.set(start + 900);
        let (found, trips) = retry(&a, &k, &fp);
        assert!(replayed(&found), "{found:?}");
        assert_eq!(trips, 0, "within the window: from memory");
        assert!(a.replay_from_memory(&k, &fp, 0).is_some());
        clock.set(start + 1_000);
        assert_eq!(a.replay_from_memory(&k, &fp, 0), None, "past the window");
        let (found, trips) = retry(&a, &k, &fp);
        assert_eq!(
            found,
            Lookup::Decide,
            "past the window: the journal decides"
        );
        assert!(trips > 0);
    }

    #[test]
    fn a_remembered_window_never_outlasts_the_databases() {
        // Read at 1 000 on the database's clock, 100 on the host's: 9 000 ms left.
        let deadline = local_deadline(100, 1_000, 10_000);
        assert!(deadline < 100 + 9_000, "{deadline}");
        assert!(deadline >= 100 + 9_000 - 9 - 1, "{deadline}");
        // Nothing left (or a window already past): no replay from memory at all.
        assert_eq!(local_deadline(100, 10_000, 10_000), 100);
        assert_eq!(local_deadline(100, 20_000, 10_000), 100);
        // A window of centuries does not overflow: it saturates at the end of time.
        assert_eq!(local_deadline(i64::MAX - 5, 0, i64::MAX), i64::MAX);
    }
}
