//! The connections a host keeps to the PostgreSQL journal, and the one retry they
//! allow.
//!
//! A connection that sat idle may have been ended by the server meanwhile
//! (`pg_terminate_backend`, a restart, a reset socket); the client learns so only by
//! using it. So every use begins with a statement that writes nothing (the read
//! itself, `BEGIN`, or before a lone write an empty query), and when that statement
//! finds the session ended, the use starts over once, on a new connection. Any
//! later failure is the call's, retry-safe: a write whose session ended may or may
//! not have committed, and only the guard's resumption under the same keys may take
//! it up, never a blind second run here.
//!
//! A connection the server answered within [`FRESH`] is not probed before a lone
//! write (a call's write right after its own read, on the connection the read gave
//! back): a session ended in that window fails the one call that uses it next,
//! retry-safe, as one ended during its write does.

use std::sync::atomic::Ordering;

use postgres::{Client, Transaction};

use super::prepared::{Conn, Db};

/// How long after its last answer a connection is not probed before a lone write.
const FRESH: std::time::Duration = std::time::Duration::from_millis(10);
use super::{POOL_SIZE, PostgresJournal};
use crate::error::Result;

/// A statement's failure during one use of a connection, and whether the use had
/// written nothing yet (so it may start over on another connection).
pub(super) struct Failure {
    error: postgres::Error,
    before_writing: bool,
}

impl Failure {
    /// A failure of a statement that writes nothing.
    fn before(error: postgres::Error) -> Self {
        Self {
            error,
            before_writing: true,
        }
    }
}

impl From<postgres::Error> for Failure {
    /// A failure at or after a write: its outcome may be unknown.
    fn from(error: postgres::Error) -> Self {
        Self {
            error,
            before_writing: false,
        }
    }
}

/// Whether `error` says the server is no longer the primary: it refused a write as
/// read-only (`25006`, a standby, or a primary an operator made read-only). Nothing
/// of the transaction was written, but the session can write nothing either, so it
/// is dropped; the next connection finds the primary (a journal URL that names
/// several hosts connects only to one that takes writes: `target_session_attrs`).
pub(super) fn not_primary(error: &postgres::Error) -> bool {
    error
        .code()
        .is_some_and(|c| *c == postgres::error::SqlState::READ_ONLY_SQL_TRANSACTION)
}

/// Whether `error` says the session is gone (the server ended it: `57P01` and the
/// rest of class `57P`, a connection exception `08…`; the client saw the socket
/// close or break) rather than the server refusing one statement.
pub(super) fn session_ended(error: &postgres::Error) -> bool {
    error.is_closed()
        || error
            .code()
            .is_some_and(|c| c.code().starts_with("57P") || c.code().starts_with("08"))
        || std::error::Error::source(error).is_some_and(|s| s.is::<std::io::Error>())
}

impl PostgresJournal {
    /// An idle connection of the pool (`true`: it may have been ended while idle), or
    /// a new one.
    fn take(&self) -> Result<(Conn, bool)> {
        loop {
            let taken = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
            match taken {
                Some(conn) if conn.client.is_closed() => continue,
                Some(conn) => return Ok((conn, true)),
                None => return Ok((Conn::new(self.connect()?), false)),
            }
        }
    }

    /// Keeps `conn` for the next use, unless it is closed or the pool is full.
    pub(super) fn give_back(&self, conn: Conn) {
        if conn.client.is_closed() {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < POOL_SIZE {
            idle.push(conn);
        }
    }

    /// What runs first on a connection, writing nothing: the database clock pinned
    /// (tests), else, on a connection that sat idle and when `probe`, an empty query.
    /// (The client learns that the server ended a session only by reading from it,
    /// and reads only while it waits for an answer: without the empty query, a lone
    /// write could not tell a session ended while idle from one ended while it ran.)
    fn prelude(&self, conn: &mut Conn, reused: bool, probe: bool) -> Result<(), Failure> {
        let fresh = conn.answered_at.is_some_and(|at| at.elapsed() < FRESH);
        let client = &mut conn.client;
        match &self.database_clock {
            Some(clock) => {
                self.trips.fetch_add(1, Ordering::Relaxed);
                client
                    .simple_query(&format!(
                        "SELECT set_config('justonce.now_ms', '{}', false)",
                        clock.now_ms()
                    ))
                    .map(drop)
            }
            None if reused && probe && !fresh => {
                self.trips.fetch_add(1, Ordering::Relaxed);
                client.simple_query("").map(drop)
            }
            None => Ok(()),
        }
        .map_err(Failure::before)
    }

    /// Runs `attempt` on a connection of the pool (or a new one), after its
    /// [prelude](Self::prelude) (with an empty query on an idle connection when
    /// `probe`: the attempt's own first statement writes). When
    /// the session turns out to have ended before anything was written, `attempt`
    /// runs once more on a new connection.
    fn run<R>(
        &self,
        probe: bool,
        mut attempt: impl FnMut(&mut Conn) -> std::result::Result<R, Failure>,
    ) -> Result<R> {
        let (mut conn, mut reused) = self.take()?;
        loop {
            let result = self
                .prelude(&mut conn, reused, probe)
                .and_then(|()| attempt(&mut conn));
            match result {
                Err(failure)
                    if reused && failure.before_writing && session_ended(&failure.error) =>
                {
                    tracing::debug!(
                        target = %self.target,
                        "an idle connection was ended by the server, taking a new one: {}",
                        failure.error
                    );
                    conn = Conn::new(self.connect()?);
                    reused = false;
                }
                result => {
                    // A connection whose session ended is not given back, even before
                    // the client has seen its socket close; nor is one to a server
                    // that is no longer the primary (after a failover).
                    if result.is_ok() {
                        conn.answered_at = Some(std::time::Instant::now());
                    }
                    match &result {
                        Err(failure) if session_ended(&failure.error) => {}
                        Err(failure) if not_primary(&failure.error) => {
                            tracing::warn!(
                                target = %self.target,
                                "the journal's server refused a write as read-only (no longer the primary?); dropping its connections: {}",
                                failure.error
                            );
                            // Its siblings in the pool are sessions on the same server.
                            self.idle.lock().unwrap_or_else(|p| p.into_inner()).clear();
                        }
                        _ => self.give_back(conn),
                    }
                    return result.map_err(|failure| self.error(failure.error));
                }
            }
        }
    }

    /// Runs the read `f` (it writes nothing, so it may run twice) with a connection.
    pub(super) fn read<R>(
        &self,
        mut f: impl FnMut(&mut Db<'_, Client>) -> std::result::Result<R, postgres::Error>,
    ) -> Result<R> {
        self.run(false, |conn| {
            let mut db = Db::new(&mut conn.client, &mut conn.statements, &self.trips);
            f(&mut db).map_err(Failure::before)
        })
    }

    /// Runs `f` in one transaction, committed if it returns `Ok(Ok(_))` and rolled
    /// back otherwise. `BEGIN` finds a connection the server ended.
    pub(super) fn transaction<R, E>(
        &self,
        f: impl FnOnce(
            &mut Db<'_, Transaction<'_>>,
        ) -> std::result::Result<std::result::Result<R, E>, postgres::Error>,
    ) -> Result<std::result::Result<R, E>> {
        let mut body = Some(f);
        let started = std::time::Instant::now();
        let result = self.run(false, |conn| {
            self.trips.fetch_add(1, Ordering::Relaxed);
            let mut tx = conn.client.transaction().map_err(Failure::before)?;
            let f = body
                .take()
                .expect("a use starts over only before its body ran");
            let result = f(&mut Db::new(&mut tx, &mut conn.statements, &self.trips))?;
            // The commit, or the rollback when the transaction is dropped.
            self.trips.fetch_add(1, Ordering::Relaxed);
            if result.is_ok() {
                tx.commit()?;
            }
            Ok(result)
        })?;
        if result.is_ok() {
            self.commits.fetch_add(1, Ordering::Relaxed);
            self.metrics.committed(started.elapsed());
        }
        Ok(result)
    }

    /// Runs `f` in one transaction that nothing refuses: committed unless `f` fails.
    pub(super) fn commit<R>(
        &self,
        f: impl FnOnce(&mut Db<'_, Transaction<'_>>) -> std::result::Result<R, postgres::Error>,
    ) -> Result<R> {
        let Ok(done) = self.transaction(|tx| f(tx).map(Ok::<_, std::convert::Infallible>))?;
        Ok(done)
    }

    /// One write outside a transaction (it commits by itself), after an empty query
    /// on a connection that sat idle.
    pub(super) fn single<R>(
        &self,
        f: impl FnOnce(&mut Db<'_, Client>) -> std::result::Result<R, postgres::Error>,
    ) -> Result<R> {
        let mut body = Some(f);
        let started = std::time::Instant::now();
        let result = self.run(true, |conn| {
            let f = body
                .take()
                .expect("a use starts over only before its body ran");
            Ok(f(&mut Db::new(
                &mut conn.client,
                &mut conn.statements,
                &self.trips,
            ))?)
        })?;
        self.commits.fetch_add(1, Ordering::Relaxed);
        self.metrics.committed(started.elapsed());
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::mpsc;
    use std::time::Duration;

    use super::super::latency::{begin, key, one_effect};
    use super::super::*;
    use crate::determinism::Seed;
    use crate::journal::outbox::OutboxQueue;
    use crate::keys::Fingerprint;

    /// What each test starts from: the cluster, a journal of its own (no database
    /// clock: the production path) whose sessions carry the application name `app`
    /// (so that the test ends only them), its connection settings, and a fingerprint
    /// and a seed for its calls. `None` where there is no PostgreSQL.
    struct Setup {
        cluster: &'static testing::Cluster,
        app: String,
        j: Arc<PostgresJournal>,
        config: postgres::Config,
        fp: Fingerprint,
        seed: Seed,
    }

    fn setup(test: &str, app: &str) -> Option<Setup> {
        let cluster = testing::cluster(test)?;
        let app = format!("{app}-{}", std::process::id());
        let mut config = cluster.schema();
        config.application_name(&app);
        let j = PostgresJournal::open(
            PostgresTarget::from_config(config.clone()),
            Durability::Full,
        )
        .unwrap();
        Some(Setup {
            cluster,
            app,
            j: Arc::new(j),
            config,
            fp: Fingerprint::from_stored("f".repeat(64)),
            seed: Seed::random().unwrap(),
        })
    }

    /// The server ends every session named `app` (as `pg_terminate_backend` or a
    /// restart does) and waits until each is gone; how many there were.
    fn end_sessions(cluster: &testing::Cluster, app: &str) -> i64 {
        let mut admin = postgres::Client::connect(&cluster.admin_url(), postgres::NoTls).unwrap();
        admin
            .query_one(
                // Materialized first: never a session of another name, this one included.
                "WITH named AS MATERIALIZED (
                    SELECT pid FROM pg_stat_activity WHERE application_name = $1)
                 SELECT count(*) FROM named WHERE pg_terminate_backend(pid, 10000)",
                &[&app],
            )
            .unwrap()
            .get(0)
    }

    /// Fills the pool with `n` new idle connections, then has the server end them all.
    fn dead_pool(j: &PostgresJournal, cluster: &testing::Cluster, app: &str, n: usize) {
        j.idle.lock().unwrap().clear();
        for _ in 0..n {
            let client = j.connect().unwrap();
            j.give_back(super::super::prepared::Conn::new(client));
        }
        // At least these: a session dropped from the pool just before may still be
        // on its way out, and is ended (and counted) too.
        let ended = end_sessions(cluster, app);
        assert!(ended >= n as i64, "{ended} sessions ended, {n} expected");
    }

    /// Sessions the server ended while they sat idle in the pool cost no call: each
    /// kind of use (a read, a transaction, a single write) finds its connection dead
    /// before it wrote anything and goes on with a fresh one.
    #[test]
    fn calls_after_the_server_ended_every_idle_session_all_succeed() {
        let Some(Setup {
            cluster,
            app,
            j,
            fp,
            seed,
            ..
        }) = setup(
            "calls_after_the_server_ended_every_idle_session_all_succeed",
            "pool-ended",
        )
        else {
            return;
        };
        for i in 0..3 {
            one_effect(&j, &key("done", i), "o", &fp);
        }
        let done = key("done", 0);
        let lease = Lease {
            owner: "o",
            until: 60_000,
            ms: 60_000,
        };
        type Use<'a> = (&'a str, Box<dyn Fn(&PostgresJournal) -> Result<()> + 'a>);
        let uses: Vec<Use<'_>> = vec![
            (
                "lookup (a read)",
                Box::new(|j| {
                    let found = j.lookup(&begin(&done, &fp, &seed, "o", 5))?;
                    assert!(matches!(found, Lookup::Replay { .. }), "{found:?}");
                    Ok(())
                }),
            ),
            (
                "entries (a read)",
                Box::new(|j| {
                    assert_eq!(j.entries(None, 10)?.len(), 3);
                    Ok(())
                }),
            ),
            (
                "decide (a transaction)",
                Box::new(|j| {
                    let k = key("decided", 0);
                    let outcome = j.decide(&begin(&k, &fp, &seed, "o", 5))?;
                    assert!(matches!(outcome, BeginOutcome::Run { .. }), "{outcome:?}");
                    Ok(())
                }),
            ),
            (
                "renew (a single write)",
                Box::new(|j| {
                    assert!(j.renew(&key("decided", 0), &lease)?);
                    Ok(())
                }),
            ),
            (
                "complete (a single write)",
                Box::new(|j| {
                    assert!(j.complete(&key("decided", 0), "o", "{}", 9, &[])?);
                    Ok(())
                }),
            ),
            (
                "take_message (a single write)",
                Box::new(|j| {
                    assert!(j.take_message(1, 2, &[])?.is_none());
                    Ok(())
                }),
            ),
            (
                "gc (a transaction)",
                Box::new(|j| {
                    j.gc(1, 1 << 40)?;
                    Ok(())
                }),
            ),
        ];
        j.prepare_outbox().unwrap();
        for (what, call) in &uses {
            dead_pool(&j, cluster, &app, 1);
            if let Err(e) = call(&j) {
                panic!("{what} failed after the server ended idle sessions: {e}");
            }
        }

        // Calls at once, each taking a dead connection of its own.
        dead_pool(&j, cluster, &app, POOL_SIZE);
        let calls: Vec<_> = (0..POOL_SIZE)
            .map(|i| {
                let j = Arc::clone(&j);
                let fp = fp.clone();
                std::thread::spawn(move || one_effect(&j, &key("together", i), "o", &fp))
            })
            .collect();
        for call in calls {
            call.join()
                .expect("every call succeeds after the server ended idle sessions");
        }
    }

    /// A session on a server that no longer takes writes (a primary that became a
    /// standby; here a session made read-only) refuses the call's write: the call
    /// fails retry-safe, having written nothing, and the pool keeps none of that
    /// server's sessions, so the next call connects anew (to the primary, with a URL
    /// of several hosts) and goes through.
    #[test]
    fn a_write_refused_as_read_only_fails_retry_safe_and_empties_the_pool() {
        let Some(Setup { j, fp, seed, .. }) = setup(
            "a_write_refused_as_read_only_fails_retry_safe_and_empties_the_pool",
            "pool-read-only",
        ) else {
            return;
        };
        let spare = j.connect().unwrap();
        let (mut conn, _) = j.take().unwrap();
        conn.client
            .batch_execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
            .unwrap();
        j.idle.lock().unwrap().clear();
        j.give_back(super::super::prepared::Conn::new(spare));
        j.give_back(conn);
        let k = key("read-only", 0);
        let err = j
            .decide(&begin(&k, &fp, &seed, "o", 5))
            .expect_err("a read-only session cannot decide");
        assert_eq!(err.kind(), "store_unavailable", "{err}");
        assert!(err.retry_safe());
        assert!(
            j.idle.lock().unwrap().is_empty(),
            "the read-only server's sessions were dropped"
        );
        let outcome = j.decide(&begin(&k, &fp, &seed, "o", 5)).unwrap();
        assert!(matches!(outcome, BeginOutcome::Run { .. }), "{outcome:?}");
    }

    /// The opposite case: a session the server ends while a write waits in it leaves
    /// that write's outcome unknown to the host, so the call fails (retry-safe) and
    /// the write is not run again behind its back.
    #[test]
    fn a_session_ended_during_a_write_fails_that_call_and_is_not_retried() {
        let Some(Setup {
            cluster,
            app,
            j,
            config,
            fp,
            seed,
        }) = setup(
            "a_session_ended_during_a_write_fails_that_call_and_is_not_retried",
            "pool-mid",
        )
        else {
            return;
        };
        let k = key("mid", 0);
        assert!(matches!(
            j.decide(&begin(&k, &fp, &seed, "o", 5)).unwrap(),
            BeginOutcome::Run { .. }
        ));

        // Another session holds the invocation's row, so the write waits for it.
        let mut blocker_config = config.clone();
        blocker_config.application_name("pool-blocker");
        let mut blocker = blocker_config.connect(postgres::NoTls).unwrap();
        let mut held = blocker.transaction().unwrap();
        held.execute(
            "SELECT 1 FROM invocations WHERE key = $1 FOR UPDATE",
            &[&k.as_str()],
        )
        .unwrap();
        let (told, answer) = mpsc::channel();
        {
            let j = Arc::clone(&j);
            let k = k.clone();
            std::thread::spawn(move || {
                let _ = told.send(j.complete(&k, "o", "{\"ok\":1}", 9, &[]));
            });
        }
        let mut watcher = postgres::Client::connect(&cluster.admin_url(), postgres::NoTls).unwrap();
        let waiting = (0..1000).any(|_| {
            let n: i64 = watcher
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity
                      WHERE application_name = $1 AND wait_event_type = 'Lock'",
                    &[&app],
                )
                .unwrap()
                .get(0);
            n == 1 || {
                std::thread::sleep(Duration::from_millis(10));
                false
            }
        });
        assert!(waiting, "the write never waited for the row");
        let ended = end_sessions(cluster, &app);
        assert!(ended >= 1, "{ended} sessions ended");
        let result = answer
            .recv_timeout(Duration::from_secs(10))
            .expect("the write was run again on another connection (it waits for the row)");
        let err = result.expect_err("a write in an ended session cannot have answered");
        assert_eq!(err.kind(), "store_unavailable", "{err}");
        assert!(err.retry_safe());
        held.rollback().unwrap();
        let state: String = blocker
            .query_one(
                "SELECT state FROM invocations WHERE key = $1",
                &[&k.as_str()],
            )
            .unwrap()
            .get(0);
        assert_eq!(state, "running", "the ended write did not happen");
        // The call, made again, completes.
        assert!(j.complete(&k, "o", "{\"ok\":1}", 10, &[]).unwrap());
    }
}
