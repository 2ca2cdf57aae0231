//! Group commit: the call path's writes of concurrent callers share one SQLite
//! transaction, and each caller returns only after the commit that holds its write.
//!
//! A caller announces itself, takes the connection, opens a transaction unless one is
//! open already, and makes its write inside a savepoint of its own (a refusal or an
//! error undoes only its own write). Then, if other callers wait for the connection,
//! it leaves the transaction open for them and waits for its commit; the caller that
//! nobody waits behind commits for everyone in it. Any other use of the connection
//! commits an open transaction first ([`GroupCommit::settle_open`]), so nothing reads
//! or writes beside a write that is not committed yet. Under `Durability::Full` the
//! fsync that follows is shared as before (`durable`).
//!
//! Why this is the contract's order: a caller's claim or outcome is committed before
//! the caller goes on (calls the provider, answers), only later than it would be
//! alone, by the writes of the callers that came meanwhile.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};

use rusqlite::Connection;

/// The most writes one transaction takes before it is committed anyway, so a steady
/// stream of callers still gets commits.
const MAX_WRITES: usize = 64;

/// Failed commits remembered for the callers who wait on them.
const FAILURES_KEPT: usize = 64;

#[derive(Debug, Default)]
struct State {
    /// Callers that announced they are about to take the connection.
    waiting: usize,
    /// The open transaction's number and how many writes it holds.
    open: Option<(u64, usize)>,
    /// The number of the last transaction opened.
    opened: u64,
    /// Every transaction up to this number is settled (committed or failed).
    settled: u64,
    /// Transactions that failed, with SQLite's error code and message.
    failed: VecDeque<(u64, rusqlite::ffi::Error, String)>,
}

/// The group-commit state of one connection.
#[derive(Debug, Default)]
pub(crate) struct GroupCommit {
    state: Mutex<State>,
    settled: Condvar,
}

/// A caller counted as waiting for the connection until it has it.
pub(crate) struct Announced<'a>(&'a GroupCommit);

impl Drop for Announced<'_> {
    fn drop(&mut self) {
        self.0.state().waiting -= 1;
    }
}

impl GroupCommit {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts the caller as waiting for the connection; drop the result once the
    /// connection is locked. A writer that finds a caller waiting leaves its
    /// transaction open for it.
    pub(crate) fn announce(&self) -> Announced<'_> {
        self.state().waiting += 1;
        Announced(self)
    }

    /// Commits the open transaction, if any, for the writers that wait on it. Call
    /// with the connection locked, before any other use of it.
    pub(crate) fn settle_open(&self, conn: &Connection, after_commit: impl FnOnce()) {
        let open = self.state().open.take();
        if let Some((number, _)) = open {
            let committed = conn.execute_batch("COMMIT");
            after_commit();
            self.settle(conn, number, committed.err());
        }
    }

    /// Whether a transaction is open for writers that wait on its commit (the
    /// connection must then not be read from: it holds writes not committed yet).
    pub(crate) fn is_open(&self) -> bool {
        self.state().open.is_some()
    }

    /// Runs the write `f` in the shared transaction (`conn` is the locked
    /// connection), and returns once it is committed. `f` says whether its write is
    /// kept (`true`) or undone (a refusal). `after_commit` runs after each commit, with
    /// the connection still locked.
    pub(crate) fn write<R>(
        &self,
        conn: MutexGuard<'_, Connection>,
        f: impl FnOnce(&Connection) -> rusqlite::Result<(R, bool)>,
        after_commit: impl FnOnce(),
    ) -> rusqlite::Result<R> {
        let open = self.state().open;
        // The first write of a transaction needs no savepoint: undoing it is
        // rolling the transaction back, before anyone else joined it.
        let first = open.is_none();
        let number = match open {
            Some((number, _)) => number,
            None => {
                conn.execute_batch("BEGIN IMMEDIATE")?;
                let mut state = self.state();
                state.opened += 1;
                state.open = Some((state.opened, 0));
                state.opened
            }
        };
        let run = || {
            if first {
                f(&conn)
            } else {
                conn.prepare_cached("SAVEPOINT grouped_write")
                    .and_then(|mut s| s.execute([]))
                    .and_then(|_| f(&conn))
            }
        };
        let written = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)) {
            Ok(written) => written,
            Err(panic) => {
                // Half a write must never be committed by the next caller: the
                // transaction goes, and the callers waiting on it are told it failed.
                let _ = conn.execute_batch("ROLLBACK");
                self.state().open = None;
                let failure = rusqlite::Error::SqliteFailure(
                    rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ABORT),
                    Some("a write of the journal's transaction panicked".into()),
                );
                self.settle(&conn, number, Some(failure));
                std::panic::resume_unwind(panic);
            }
        };
        let kept = matches!(written, Ok((_, true)));
        if first && !kept && !conn.is_autocommit() {
            // Refused (or failed) alone: nothing of it stays, nobody waits on it. A
            // rollback that fails leaves half a write: it must never be committed.
            let undone = conn.execute_batch("ROLLBACK");
            self.state().open = None;
            return match undone {
                Ok(()) => {
                    self.settle(&conn, number, None);
                    written.map(|(r, _)| r)
                }
                Err(e) => {
                    self.settle(&conn, number, Some(copy(&e)));
                    Err(e)
                }
            };
        }
        let ended = if conn.is_autocommit() || first {
            Ok(())
        } else if kept {
            conn.prepare_cached("RELEASE grouped_write")
                .and_then(|mut s| s.execute([]))
                .map(drop)
        } else {
            conn.execute_batch("ROLLBACK TO grouped_write; RELEASE grouped_write")
        };
        if conn.is_autocommit() || ended.is_err() {
            // SQLite ended the transaction itself (an I/O error, a full disk): every
            // write in it is lost, those of the callers that wait on it too.
            let error = match (&written, &ended) {
                (_, Err(e)) | (Err(e), _) => copy(e),
                _ => copy(&rusqlite::Error::SqliteFailure(
                    rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ABORT),
                    Some("the journal's transaction ended before its commit".into()),
                )),
            };
            self.state().open = None;
            self.settle(&conn, number, Some(copy(&error)));
            return Err(error);
        }
        let mut state = self.state();
        let writes = state.open.map_or(1, |(_, n)| n + 1);
        if state.waiting > 0 && writes < MAX_WRITES {
            // Someone comes next: it commits for both (or passes the transaction on).
            state.open = Some((number, writes));
            drop(conn);
            while state.settled < number {
                state = self.settled.wait(state).unwrap_or_else(|p| p.into_inner());
            }
            if let Some((_, code, message)) = state.failed.iter().find(|(n, ..)| *n == number) {
                return Err(rusqlite::Error::SqliteFailure(*code, Some(message.clone())));
            }
            return written.map(|(r, _)| r);
        }
        state.open = None;
        drop(state);
        let committed = conn.execute_batch("COMMIT");
        after_commit();
        let failure = committed.err();
        let result = match &failure {
            Some(e) => Err(copy(e)),
            None => written.map(|(r, _)| r),
        };
        self.settle(&conn, number, failure);
        result
    }

    /// Marks transaction `number` settled, failed with `failure` if any, and wakes
    /// the writers that wait on it.
    fn settle(&self, conn: &Connection, number: u64, failure: Option<rusqlite::Error>) {
        if failure.is_some() && !conn.is_autocommit() {
            let _ = conn.execute_batch("ROLLBACK");
        }
        let mut state = self.state();
        if let Some(e) = failure {
            let (code, message) = parts(&e);
            state.failed.push_back((number, code, message));
            if state.failed.len() > FAILURES_KEPT {
                state.failed.pop_front();
            }
        }
        state.settled = state.settled.max(number);
        drop(state);
        self.settled.notify_all();
    }
}

/// SQLite's error code and message of `e`.
fn parts(e: &rusqlite::Error) -> (rusqlite::ffi::Error, String) {
    match e {
        rusqlite::Error::SqliteFailure(code, message) => {
            (*code, message.clone().unwrap_or_else(|| code.to_string()))
        }
        other => (
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ERROR),
            other.to_string(),
        ),
    }
}

/// The same failure for another caller (a SQLite error is not `Clone`).
fn copy(e: &rusqlite::Error) -> rusqlite::Error {
    let (code, message) = parts(e);
    rusqlite::Error::SqliteFailure(code, Some(message))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn table(dir: &std::path::Path) -> Connection {
        let conn = Connection::open(dir.join("g.db")).unwrap();
        conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0))
            .unwrap();
        // A write into `doom` ends the whole transaction, as SQLite does itself on
        // some errors (a full disk, an I/O error): every write in it is lost.
        conn.execute_batch(
            "CREATE TABLE t (x INTEGER PRIMARY KEY);
             CREATE TABLE doom (x INTEGER);
             CREATE TRIGGER doom_all AFTER INSERT ON doom
               BEGIN SELECT RAISE(ROLLBACK, 'the transaction ends here'); END;",
        )
        .unwrap();
        conn
    }

    fn rows(conn: &Connection) -> Vec<i64> {
        conn.prepare("SELECT x FROM t ORDER BY x")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    fn commits(conn: &Connection) -> Arc<std::sync::atomic::AtomicU64> {
        let n = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let hooked = Arc::clone(&n);
        conn.commit_hook(Some(move || {
            hooked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            false
        }));
        n
    }

    #[test]
    fn a_writer_nobody_waits_behind_commits_at_once_and_a_refusal_undoes_only_its_write() {
        let dir = tempfile::tempdir().unwrap();
        let conn = Mutex::new(table(dir.path()));
        let count = commits(&conn.lock().unwrap());
        let group = GroupCommit::default();
        let insert = |x: i64, keep: bool| {
            group.write(
                conn.lock().unwrap(),
                |c| Ok((c.execute("INSERT INTO t VALUES (?1)", [x])?, keep)),
                || {},
            )
        };
        assert_eq!(insert(1, true).unwrap(), 1);
        assert_eq!(insert(2, false).unwrap(), 1, "the refused write ran");
        let err = insert(1, true).unwrap_err();
        assert!(err.to_string().contains("UNIQUE"), "{err}");
        let c = conn.lock().unwrap();
        assert!(c.is_autocommit(), "nothing left open");
        let rows: Vec<i64> = c
            .prepare("SELECT x FROM t")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(rows, vec![1], "only the kept write stays");
        assert_eq!(
            count.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "a write undone alone is rolled back, not committed"
        );
    }

    /// A writer whose transaction is left open because a caller announced itself
    /// behind it (and still waits for the connection), and the commit count.
    struct Behind {
        conn: Arc<Mutex<Connection>>,
        group: Arc<GroupCommit>,
        first: std::thread::JoinHandle<rusqlite::Result<usize>>,
        commits: Arc<std::sync::atomic::AtomicU64>,
    }

    impl Behind {
        fn open(dir: &std::path::Path) -> Self {
            let conn = Arc::new(Mutex::new(table(dir)));
            let commits = commits(&conn.lock().unwrap());
            let group = Arc::new(GroupCommit::default());
            // The caller behind, as one blocked on the connection is counted.
            group.state().waiting += 1;
            let first = {
                let (conn, group) = (Arc::clone(&conn), Arc::clone(&group));
                std::thread::spawn(move || {
                    group.write(
                        conn.lock().unwrap(),
                        |c| Ok((c.execute("INSERT INTO t VALUES (1)", [])?, true)),
                        || {},
                    )
                })
            };
            // The first write is in and its transaction open, not committed.
            while !group.is_open() {
                std::thread::yield_now();
            }
            Self {
                conn,
                group,
                first,
                commits,
            }
        }

        /// The caller behind gets the connection.
        fn take(&self) -> MutexGuard<'_, Connection> {
            let locked = self.conn.lock().unwrap();
            self.group.state().waiting -= 1;
            locked
        }

        fn commits(&self) -> u64 {
            self.commits.load(std::sync::atomic::Ordering::SeqCst)
        }
    }

    #[test]
    fn a_writer_with_a_caller_behind_it_waits_for_the_commit_that_caller_makes() {
        let dir = tempfile::tempdir().unwrap();
        let behind = Behind::open(dir.path());
        assert!(
            !behind.first.is_finished(),
            "the first writer waits for the commit"
        );
        assert_eq!(behind.commits(), 0);
        let locked = behind.take();
        behind
            .group
            .write(
                locked,
                |c| Ok((c.execute("INSERT INTO t VALUES (2)", [])?, true)),
                || {},
            )
            .unwrap();
        assert_eq!(behind.commits(), 1, "two writes, one commit");
        let Behind { conn, first, .. } = behind;
        first.join().unwrap().unwrap();
        let n: i64 = conn
            .lock()
            .unwrap()
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 2);
    }

    #[test]
    fn another_use_of_the_connection_commits_the_open_transaction_first() {
        let dir = tempfile::tempdir().unwrap();
        let behind = Behind::open(dir.path());
        let locked = behind.take();
        behind.group.settle_open(&locked, || {});
        assert!(locked.is_autocommit());
        assert_eq!(behind.commits(), 1);
        drop(locked);
        behind.first.join().unwrap().unwrap();
        let other = Connection::open(dir.path().join("g.db")).unwrap();
        let n: i64 = other
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1, "committed, visible to another connection");
    }

    #[test]
    fn a_transaction_that_ends_under_the_writer_behind_fails_the_writer_waiting_on_it() {
        let dir = tempfile::tempdir().unwrap();
        let behind = Behind::open(dir.path());
        let locked = behind.take();
        let err = behind
            .group
            .write(
                locked,
                |c| Ok((c.execute("INSERT INTO doom VALUES (1)", [])?, true)),
                || {},
            )
            .unwrap_err();
        assert!(err.to_string().contains("ends here"), "{err}");
        let Behind {
            conn,
            first,
            commits,
            ..
        } = behind;
        let err = first.join().unwrap().unwrap_err();
        assert!(
            err.to_string().contains("ends here"),
            "the first writer is told its write is lost: {err}"
        );
        let c = conn.lock().unwrap();
        assert!(c.is_autocommit());
        assert_eq!(
            rows(&c),
            Vec::<i64>::new(),
            "nothing of the transaction stays"
        );
        assert_eq!(commits.load(std::sync::atomic::Ordering::SeqCst), 0);
    }

    #[test]
    fn a_refusal_behind_undoes_only_its_own_write_and_the_first_is_committed() {
        let dir = tempfile::tempdir().unwrap();
        let behind = Behind::open(dir.path());
        let locked = behind.take();
        let inserted = behind
            .group
            .write(
                locked,
                |c| Ok((c.execute("INSERT INTO t VALUES (2)", [])?, false)),
                || {},
            )
            .unwrap();
        assert_eq!(inserted, 1, "the refused write ran before it was undone");
        assert_eq!(behind.commits(), 1);
        let Behind { conn, first, .. } = behind;
        first.join().unwrap().unwrap();
        let other = Connection::open(dir.path().join("g.db")).unwrap();
        assert_eq!(
            rows(&other),
            vec![1],
            "committed, without the refused write"
        );
        drop(conn);
    }

    #[test]
    fn a_panic_behind_rolls_the_transaction_back_and_fails_the_writer_waiting_on_it() {
        let dir = tempfile::tempdir().unwrap();
        let behind = Behind::open(dir.path());
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let locked = behind.take();
            behind.group.write(
                locked,
                |c| -> rusqlite::Result<(usize, bool)> {
                    c.execute("INSERT INTO t VALUES (2)", [])?;
                    panic!("half a write")
                },
                || {},
            )
        }));
        assert!(panicked.is_err());
        assert_eq!(behind.commits(), 0);
        let Behind { conn, first, .. } = behind;
        assert!(first.join().unwrap().is_err(), "told its write is lost");
        let c = conn.lock().unwrap_or_else(|p| p.into_inner());
        assert!(c.is_autocommit());
        assert_eq!(rows(&c), Vec::<i64>::new());
    }
}
