//! Group commit: the call path's writes of concurrent callers share one SQLite
//! transaction, made by one thread, and each caller returns only after the commit
//! that holds its write.
//!
//! A caller queues its write and, unless another caller leads already, leads: it
//! takes the connection, makes every queued write in one transaction (each in a
//! savepoint of its own, so a refusal or an error undoes only that write), commits
//! once, and hands each caller its result. Callers that queued meanwhile sleep
//! until theirs is handed to them; the leader serves them in its next round, until
//! the round that holds its own write. Then it hands the lead to the first caller
//! still queued *before* it wakes the callers of that round: on 2 cores a wake-up
//! often preempts the thread that makes it, and the next round must not wait for
//! the old leader to run again (a profile showed a third of all context switches
//! were such preemptions when the leader woke callers before serving the queue).
//!
//! Why one thread makes the writes: with each caller making its own (the design
//! before this one), the connection passed from thread to thread behind its mutex,
//! and on 2 cores each pass waited for the next thread to be scheduled: 8 callers
//! made fewer calls per second than one. Now a write takes the connection once per
//! round, not once per caller, and a caller sleeps once, until its commit.
//!
//! No transaction stays open once the leader lets the connection go: any other use
//! of the connection finds every grouped write committed (or undone).
//!
//! Why this is the contract's order: a caller's claim or outcome is committed before
//! the caller goes on (calls the provider, answers), only later than it would be
//! alone, by the writes of the callers that came meanwhile. Under
//! `Durability::Full` the fsync that follows is shared as before (`durable`).
//!
//! Durable rounds: a write that will need a durable point says so (`durable`), and
//! the leader, once it has handed the lead on, makes its last round durable
//! ([`Rounds::settle`]) *before* it wakes that round's callers. They wake once, with
//! their commit on disk, instead of waking to commit and sleeping again for the
//! fsync (a profile of 8 callers under `Full` showed a fifth of the CPU in futex
//! waits and wake-ups; settled rounds took a third of the context switches away).
//! The next leader commits meanwhile: the fsync holds no lock a writer needs. Every
//! write of such a round waits for the fsync, durable or not (a refused claim, an
//! effect's answer): a round is settled or not as a whole. Each write learns the
//! mark of its round's commit, so its caller's own durable point waits for that
//! commit and no later one.

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::Thread;
use std::time::{Duration, Instant};

use rusqlite::Connection;

/// The most writes one transaction takes, so a steady stream of callers still gets
/// commits.
const MAX_WRITES: usize = 64;

/// What a write's caller gets: its result, or the panic of its write.
type Outcome<R> = std::thread::Result<rusqlite::Result<R>>;

/// What the journal does around the commits of a group's rounds.
pub(crate) trait Rounds {
    /// Runs after each `COMMIT` of a round (one that failed too), with the
    /// connection still locked; returns the commit's mark, a number that grows with
    /// every commit of the connection.
    fn committed(&self) -> u64;
    /// Runs on a leader that has handed the lead on, before it wakes the callers of
    /// its last round, when a write of that round is `durable`: makes every commit
    /// up to `mark` durable. A failure is each caller's to find at its own durable
    /// point.
    fn settle(&self, mark: u64);
    /// Runs at the start of each round's transaction, before its writes, with the
    /// WAL's write lock held (`BEGIN IMMEDIATE`): no other connection appends to the
    /// log until the round commits.
    fn write_locked(&self) {}
}

/// A write's result and the mark of its round's commit (0 when the round committed
/// nothing; a refused write in a round that committed others gets that round's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Written<R> {
    /// What the write returned.
    pub(crate) value: R,
    /// The commit's mark, from [`Rounds::committed`].
    pub(crate) mark: u64,
}

/// How a queued write went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ran {
    /// Written, to be committed.
    Kept,
    /// Refused or failed: to be undone.
    Undone,
    /// It panicked: the transaction goes.
    Panicked,
}

/// One caller's write, as the leader makes it.
trait Queued: Send {
    /// Makes the write on the leader's connection.
    fn run(&mut self, conn: &Connection) -> Ran;
    /// The write's own error, if it failed.
    fn error(&self) -> Option<rusqlite::Error>;
    /// The transaction that held the write is lost: its caller gets `error` (unless
    /// the write panicked: then the panic).
    fn lost(&mut self, error: rusqlite::Error);
    /// Whether the caller will need the write durable.
    fn durable(&self) -> bool;
    /// Hands the caller its outcome, final, with the mark of the commit that settled
    /// it, and wakes it.
    fn deliver(self: Box<Self>, mark: u64);
    /// The caller's thread.
    fn caller(&self) -> &Thread;
    /// Whether this is the write whose ticket is `ticket`.
    fn is(&self, ticket: *const ()) -> bool;
}

/// Where a caller finds its outcome, and the mark of the commit that settled it.
struct Ticket<R> {
    outcome: Mutex<Option<(Outcome<R>, u64)>>,
    caller: Thread,
}

impl<R> Ticket<R> {
    fn take(&self) -> Option<(Outcome<R>, u64)> {
        self.outcome
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }
}

/// A queued write `f` and, once made, its result.
struct Pending<R, F> {
    f: Option<F>,
    result: Option<Outcome<R>>,
    /// Whether `result` is final (the transaction settled).
    delivered: bool,
    /// The mark of the commit that settled it.
    mark: u64,
    durable: bool,
    ticket: Arc<Ticket<R>>,
}

impl<R, F> Queued for Pending<R, F>
where
    R: Send,
    F: FnOnce(&Connection) -> rusqlite::Result<(R, bool)> + Send,
{
    fn run(&mut self, conn: &Connection) -> Ran {
        let Some(f) = self.f.take() else {
            return Ran::Undone;
        };
        let (result, ran) = match std::panic::catch_unwind(AssertUnwindSafe(|| f(conn))) {
            Ok(Ok((r, true))) => (Ok(Ok(r)), Ran::Kept),
            Ok(Ok((r, false))) => (Ok(Ok(r)), Ran::Undone),
            Ok(Err(e)) => (Ok(Err(e)), Ran::Undone),
            Err(panic) => (Err(panic), Ran::Panicked),
        };
        self.result = Some(result);
        ran
    }

    fn error(&self) -> Option<rusqlite::Error> {
        match &self.result {
            Some(Ok(Err(e))) => Some(copy(e)),
            _ => None,
        }
    }

    fn lost(&mut self, error: rusqlite::Error) {
        if !matches!(self.result, Some(Err(_))) {
            self.result = Some(Ok(Err(error)));
        }
    }

    fn durable(&self) -> bool {
        self.durable
    }

    fn deliver(mut self: Box<Self>, mark: u64) {
        // Dropping hands it over.
        self.delivered = true;
        self.mark = mark;
    }

    fn caller(&self) -> &Thread {
        &self.ticket.caller
    }

    fn is(&self, ticket: *const ()) -> bool {
        std::ptr::eq(Arc::as_ptr(&self.ticket).cast(), ticket)
    }
}

impl<R, F> Drop for Pending<R, F> {
    fn drop(&mut self) {
        let outcome = match (self.delivered, self.result.take()) {
            (true, Some(outcome)) => outcome,
            // The leader stopped (it panicked) before this write's transaction
            // settled: the caller cannot count it committed.
            _ => Ok(Err(abort(
                "the journal's writer stopped before this write was committed",
            ))),
        };
        *self
            .ticket
            .outcome
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some((outcome, self.mark));
        self.ticket.caller.unpark();
    }
}

#[derive(Default)]
struct State {
    /// Writes waiting for a leader's next round, in arrival order.
    queue: VecDeque<Box<dyn Queued>>,
    /// A caller leads: it will take the queued writes.
    leading: bool,
}

/// The group-commit state of one connection.
#[derive(Default)]
pub(crate) struct GroupCommit {
    state: Mutex<State>,
    /// Nanoseconds leaders held the connection making and committing rounds.
    busy: AtomicU64,
}

impl std::fmt::Debug for GroupCommit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state();
        f.debug_struct("GroupCommit")
            .field("queued", &state.queue.len())
            .field("leading", &state.leading)
            .finish()
    }
}

/// The lead, given up when dropped (also by a leader that panics): the first
/// waiting caller is woken to take it.
struct Leading<'a>(&'a GroupCommit);

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        let mut state = self.0.state();
        state.leading = false;
        if let Some(next) = state.queue.front() {
            next.caller().unpark();
        }
    }
}

impl GroupCommit {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How long leaders have held the connection making and committing rounds so
    /// far: the serial part of the writes, which no number of callers shortens.
    pub(crate) fn busy(&self) -> Duration {
        Duration::from_nanos(self.busy.load(Ordering::Relaxed))
    }

    /// Makes the write `f` in a transaction shared with concurrent callers, on
    /// `conn`, and returns once that transaction is committed (and settled, when a
    /// write of its round is `durable` and the round was its leader's last: see the
    /// module). `f` may run on another caller's thread (the leader's), and says
    /// whether its write is kept (`true`) or undone (a refusal). `rounds` is called
    /// around the commits this caller makes as leader.
    pub(crate) fn write<R, F>(
        &self,
        conn: &Mutex<Connection>,
        f: F,
        durable: bool,
        rounds: &dyn Rounds,
    ) -> rusqlite::Result<Written<R>>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<(R, bool)> + Send + 'static,
    {
        let ticket = Arc::new(Ticket {
            outcome: Mutex::new(None),
            caller: std::thread::current(),
        });
        let mut state = self.state();
        state.queue.push_back(Box::new(Pending {
            f: Some(f),
            result: None,
            delivered: false,
            mark: 0,
            durable,
            ticket: Arc::clone(&ticket),
        }));
        loop {
            if let Some((outcome, mark)) = ticket.take() {
                drop(state);
                let value = outcome.unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
                return Ok(Written { value, mark });
            }
            let own = Arc::as_ptr(&ticket).cast::<()>();
            // A write not queued and not delivered is in a round under way: its
            // leader wakes the caller once it is settled.
            if !state.leading && state.queue.iter().any(|w| w.is(own)) {
                state.leading = true;
                drop(state);
                self.lead(conn, own, rounds);
            } else {
                drop(state);
                std::thread::park();
            }
            state = self.state();
        }
    }

    /// Makes the queued writes, round after round, until the round that settles the
    /// write `own` (queued when this is called); hands the lead on, and settles that
    /// round when it holds a durable write, before it wakes that round's callers.
    fn lead(&self, conn: &Mutex<Connection>, own: *const (), rounds: &dyn Rounds) {
        let mut leading = Some(Leading(self));
        while leading.is_some() {
            let batch: Vec<Box<dyn Queued>> = {
                let mut state = self.state();
                let n = state.queue.len().min(MAX_WRITES);
                state.queue.drain(..n).collect()
            };
            let (settled, mark) = {
                let conn = conn.lock().unwrap_or_else(|p| p.into_inner());
                let started = Instant::now();
                let settled = commit_round(&conn, batch, rounds);
                let took = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
                self.busy.fetch_add(took, Ordering::Relaxed);
                settled
            };
            if settled.iter().any(|w| w.is(own)) {
                drop(leading.take());
                if let Some(mark) = mark
                    && settled.iter().any(|w| w.durable())
                {
                    rounds.settle(mark);
                }
            }
            let mark = mark.unwrap_or(0);
            for write in settled {
                write.deliver(mark);
            }
        }
    }
}

/// Makes `batch`'s writes in one transaction (a new one after a write that ends it)
/// and commits; returns the writes, settled, to deliver, and the commit's mark (none
/// when nothing was committed).
fn commit_round(
    conn: &Connection,
    batch: Vec<Box<dyn Queued>>,
    rounds: &dyn Rounds,
) -> (Vec<Box<dyn Queued>>, Option<u64>) {
    // The writes of the open transaction, and those settled already.
    let mut open: Vec<Box<dyn Queued>> = Vec::with_capacity(batch.len());
    let mut settled: Vec<Box<dyn Queued>> = Vec::new();
    for mut write in batch {
        // The first write of a transaction needs no savepoint: undoing it is rolling
        // the transaction back, before anyone else joined it.
        let first = open.is_empty();
        let opened = if first {
            conn.prepare_cached("BEGIN IMMEDIATE")
                .and_then(|mut s| s.execute([]))
                .map(|_| rounds.write_locked())
        } else {
            conn.prepare_cached("SAVEPOINT grouped_write")
                .and_then(|mut s| s.execute([]))
                .map(drop)
        };
        if let Err(e) = opened {
            lose(conn, &mut open, &e);
            write.lost(e);
            settled.append(&mut open);
            settled.push(write);
            continue;
        }
        let ran = write.run(conn);
        if ran == Ran::Panicked {
            // Half a write must never be committed: the transaction goes, and the
            // writes in it are lost.
            let panicked = abort("a write of the journal's transaction panicked");
            lose(conn, &mut open, &panicked);
            write.lost(panicked);
            settled.append(&mut open);
            settled.push(write);
            continue;
        }
        let kept = ran == Ran::Kept;
        if first && !kept && !conn.is_autocommit() {
            // Refused (or failed) alone: nothing of it stays. A rollback that fails
            // leaves half a write: it must never be committed.
            if let Err(e) = conn.execute_batch("ROLLBACK") {
                lose(conn, &mut open, &e);
                write.lost(e);
            }
            settled.push(write);
            continue;
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
            // write in it is lost.
            let error = ended
                .err()
                .or_else(|| write.error())
                .unwrap_or_else(|| abort("the journal's transaction ended before its commit"));
            lose(conn, &mut open, &error);
            write.lost(error);
            settled.append(&mut open);
            settled.push(write);
            continue;
        }
        open.push(write);
    }
    let mut mark = None;
    if !open.is_empty() {
        let committed = conn
            .prepare_cached("COMMIT")
            .and_then(|mut s| s.execute([]))
            .map(drop);
        let committed_as = rounds.committed();
        match committed {
            Ok(()) => mark = Some(committed_as),
            Err(e) => lose(conn, &mut open, &e),
        }
    }
    settled.append(&mut open);
    (settled, mark)
}

/// Rolls the open transaction back, if SQLite has not, and tells each of its
/// writes it is lost with `error`.
fn lose(conn: &Connection, open: &mut [Box<dyn Queued>], error: &rusqlite::Error) {
    if !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    for write in open {
        write.lost(copy(error));
    }
}

/// A failure that SQLite did not report itself.
fn abort(message: &str) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ABORT),
        Some(message.into()),
    )
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
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::thread::JoinHandle;

    use super::*;

    /// A connection with its group, and a count of its commits.
    struct Fixture {
        conn: Mutex<Connection>,
        group: GroupCommit,
        commits: Arc<AtomicU64>,
        marks: Marks,
        _dir: tempfile::TempDir,
    }

    /// Rounds that number the commits and note what leaders settled.
    #[derive(Default)]
    struct Marks {
        committed: AtomicU64,
        /// The highest mark settled.
        settled: AtomicU64,
        settles: AtomicU64,
        /// Settles wait while it is set (a test holds them).
        hold: std::sync::atomic::AtomicBool,
    }

    impl Rounds for Marks {
        fn committed(&self) -> u64 {
            self.committed.fetch_add(1, Ordering::SeqCst) + 1
        }

        fn settle(&self, mark: u64) {
            assert!(mark <= self.committed.load(Ordering::SeqCst));
            self.settles.fetch_add(1, Ordering::SeqCst);
            while self.hold.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            self.settled.fetch_max(mark, Ordering::SeqCst);
        }
    }

    fn fixture() -> Arc<Fixture> {
        let dir = tempfile::tempdir().unwrap();
        let conn = Connection::open(dir.path().join("g.db")).unwrap();
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
        let commits = Arc::new(AtomicU64::new(0));
        let hooked = Arc::clone(&commits);
        conn.commit_hook(Some(move || {
            hooked.fetch_add(1, Ordering::SeqCst);
            false
        }));
        Arc::new(Fixture {
            conn: Mutex::new(conn),
            group: GroupCommit::default(),
            commits,
            marks: Marks::default(),
            _dir: dir,
        })
    }

    impl Fixture {
        fn write(&self, sql: &'static str, x: i64, keep: bool) -> rusqlite::Result<usize> {
            let write = move |c: &Connection| Ok((c.execute(sql, [x])?, keep));
            Ok(self
                .group
                .write(&self.conn, write, false, &self.marks)?
                .value)
        }

        /// A caller writing on a thread of its own.
        fn spawn(
            self: &Arc<Self>,
            sql: &'static str,
            x: i64,
            keep: bool,
        ) -> JoinHandle<rusqlite::Result<usize>> {
            let me = Arc::clone(self);
            std::thread::spawn(move || me.write(sql, x, keep))
        }

        fn until(&self, ready: impl Fn(&State) -> bool) {
            while !ready(&self.group.state()) {
                std::thread::yield_now();
            }
        }

        fn commits(&self) -> u64 {
            self.commits.load(Ordering::SeqCst)
        }

        fn rows(&self) -> Vec<i64> {
            let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
            assert!(conn.is_autocommit(), "no transaction left open");
            conn.prepare("SELECT x FROM t ORDER BY x")
                .unwrap()
                .query_map([], |r| r.get(0))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
        }

        /// A leader (writing `x`) that took its own write and waits for the
        /// connection the test holds, and `queued` more callers queued behind it.
        fn behind(
            self: &Arc<Self>,
            held: &MutexGuard<'_, Connection>,
            x: i64,
            queued: &[(&'static str, i64, bool)],
        ) -> (
            JoinHandle<rusqlite::Result<usize>>,
            Vec<JoinHandle<rusqlite::Result<usize>>>,
        ) {
            let _ = held;
            let leader = self.spawn(INSERT, x, true);
            self.until(|s| s.leading && s.queue.is_empty());
            // One at a time: queued in this order.
            let behind = (queued.iter().enumerate())
                .map(|(n, &(sql, x, keep))| {
                    let caller = self.spawn(sql, x, keep);
                    self.until(|s| s.queue.len() == n + 1);
                    caller
                })
                .collect();
            (leader, behind)
        }
    }

    const INSERT: &str = "INSERT INTO t VALUES (?1)";
    const DOOM: &str = "INSERT INTO doom VALUES (?1)";

    #[test]
    fn a_writer_alone_commits_at_once_and_a_refusal_undoes_only_its_write() {
        let g = fixture();
        assert_eq!(g.write(INSERT, 1, true).unwrap(), 1);
        assert_eq!(g.commits(), 1);
        assert_eq!(
            g.write(INSERT, 2, false).unwrap(),
            1,
            "the refused write ran"
        );
        let err = g.write(INSERT, 1, true).unwrap_err();
        assert!(err.to_string().contains("UNIQUE"), "{err}");
        assert_eq!(g.rows(), vec![1], "only the kept write stays");
        assert_eq!(
            g.commits(),
            1,
            "a write undone alone is rolled back, not committed"
        );
    }

    #[test]
    fn writes_queued_behind_a_round_share_the_next_commit() {
        let g = fixture();
        let held = g.conn.lock().unwrap();
        let (leader, behind) = g.behind(&held, 1, &[(INSERT, 2, true), (INSERT, 3, true)]);
        assert!(!leader.is_finished() && behind.iter().all(|b| !b.is_finished()));
        assert_eq!(g.commits(), 0);
        drop(held);
        assert_eq!(leader.join().unwrap().unwrap(), 1);
        for b in behind {
            assert_eq!(b.join().unwrap().unwrap(), 1);
        }
        assert_eq!(
            g.commits(),
            2,
            "the leader's own write, then both queued behind it in one"
        );
        assert_eq!(g.rows(), vec![1, 2, 3]);
    }

    #[test]
    fn a_transaction_that_ends_under_a_write_fails_every_write_in_it() {
        let g = fixture();
        let held = g.conn.lock().unwrap();
        let (leader, behind) = g.behind(&held, 1, &[(INSERT, 2, true), (DOOM, 3, true)]);
        drop(held);
        leader.join().unwrap().unwrap();
        for b in behind {
            let err = b.join().unwrap().unwrap_err();
            assert!(
                err.to_string().contains("ends here"),
                "told its write is lost: {err}"
            );
        }
        assert_eq!(g.rows(), vec![1], "nothing of the lost transaction stays");
        assert_eq!(g.commits(), 1);
    }

    #[test]
    fn a_refusal_in_a_shared_transaction_undoes_only_its_own_write() {
        let g = fixture();
        let held = g.conn.lock().unwrap();
        let (leader, behind) = g.behind(
            &held,
            1,
            &[(INSERT, 2, true), (INSERT, 3, false), (INSERT, 4, true)],
        );
        drop(held);
        leader.join().unwrap().unwrap();
        for b in behind {
            assert_eq!(b.join().unwrap().unwrap(), 1, "each write ran");
        }
        assert_eq!(
            g.rows(),
            vec![1, 2, 4],
            "committed, without the refused write"
        );
        assert_eq!(g.commits(), 2);
    }

    #[test]
    fn a_panic_in_a_shared_transaction_fails_its_writes_and_reaches_its_own_caller() {
        let g = fixture();
        let held = g.conn.lock().unwrap();
        let leader = g.spawn(INSERT, 1, true);
        g.until(|s| s.leading && s.queue.is_empty());
        let first = g.spawn(INSERT, 2, true);
        g.until(|s| s.queue.len() == 1);
        let panicking = {
            let me = Arc::clone(&g);
            std::thread::spawn(move || {
                me.group.write(
                    &me.conn,
                    |c| -> rusqlite::Result<(usize, bool)> {
                        c.execute(INSERT, [3])?;
                        panic!("half a write")
                    },
                    false,
                    &me.marks,
                )
            })
        };
        g.until(|s| s.queue.len() == 2);
        drop(held);
        leader.join().unwrap().unwrap();
        let panic = panicking.join().unwrap_err();
        assert_eq!(panic.downcast_ref::<&str>(), Some(&"half a write"));
        let err = first.join().unwrap().unwrap_err();
        assert!(err.to_string().contains("panicked"), "{err}");
        assert_eq!(g.rows(), vec![1]);
        assert_eq!(g.commits(), 1);
        // The group still works.
        g.write(INSERT, 5, true).unwrap();
        assert_eq!(g.rows(), vec![1, 5]);
    }

    #[test]
    fn many_callers_each_return_after_a_commit_that_holds_their_write() {
        let g = fixture();
        let callers: Vec<_> = (0..8)
            .map(|t| {
                let g = Arc::clone(&g);
                std::thread::spawn(move || {
                    for i in 0..50 {
                        let x = t * 100 + i;
                        g.write(INSERT, x, true).unwrap();
                        // Committed: another connection sees it.
                        let other = Connection::open(g._dir.path().join("g.db")).unwrap();
                        let n: i64 = other
                            .query_row("SELECT count(*) FROM t WHERE x = ?1", [x], |r| r.get(0))
                            .unwrap();
                        assert_eq!(n, 1, "{x} returned before its commit");
                    }
                })
            })
            .collect();
        for c in callers {
            c.join().unwrap();
        }
        assert_eq!(g.rows().len(), 400);
        assert!(g.commits() <= 400);
    }

    /// The writer's busy time is the rounds' time on the connection: a write that
    /// takes long counts whole, a leader's wait for the connection does not.
    #[test]
    fn the_writer_is_busy_while_it_writes_not_while_it_waits_for_the_connection() {
        let f = fixture();
        assert_eq!(f.group.busy(), Duration::ZERO, "nothing written yet");
        let slow = Duration::from_millis(30);
        f.group
            .write(
                &f.conn,
                move |c| {
                    let started = Instant::now();
                    while started.elapsed() < slow {
                        std::hint::spin_loop();
                    }
                    Ok((c.execute(INSERT, [1])?, true))
                },
                false,
                &f.marks,
            )
            .unwrap();
        let after_slow = f.group.busy();
        assert!(
            after_slow >= slow,
            "{after_slow:?}: the slow write counts whole"
        );

        let held_for = Duration::from_millis(300);
        let waiter = {
            let held = f.conn.lock().unwrap();
            let waiter = f.spawn(INSERT, 2, true);
            f.until(|s| s.leading && s.queue.is_empty());
            let held_since = Instant::now();
            while held_since.elapsed() < held_for {
                std::thread::yield_now();
            }
            drop(held);
            waiter
        };
        waiter.join().unwrap().unwrap();
        let waited_write = f.group.busy() - after_slow;
        assert!(
            waited_write > Duration::ZERO && waited_write < held_for,
            "{waited_write:?}: the round counts, not the {held_for:?} its leader waited"
        );
        assert_eq!(f.rows(), vec![1, 2]);
    }

    /// A durable write's caller wakes after its leader settled the commit that holds
    /// it (once, not to commit and then again for the fsync), and learns that
    /// commit's mark; writes that need no durable point are never settled.
    #[test]
    fn a_round_of_durable_writes_is_settled_before_its_callers_wake() {
        let g = fixture();
        g.marks.hold.store(true, Ordering::SeqCst);
        let held = g.conn.lock().unwrap();
        let durable = |me: &Arc<Fixture>, x: i64| {
            let me = Arc::clone(me);
            std::thread::spawn(move || {
                let write = move |c: &Connection| Ok((c.execute(INSERT, [x])?, true));
                let written = me.group.write(&me.conn, write, true, &me.marks).unwrap();
                (written.mark, me.marks.settled.load(Ordering::SeqCst))
            })
        };
        // The leader's own round is its write alone; the two behind it share the
        // second, led by the first of them.
        let leader = durable(&g, 1);
        g.until(|s| s.leading && s.queue.is_empty());
        let first = durable(&g, 2);
        g.until(|s| s.queue.len() == 1);
        let second = durable(&g, 3);
        g.until(|s| s.queue.len() == 2);
        drop(held);
        // Both leaders are in their settle, which waits for the test.
        while g.marks.settles.load(Ordering::SeqCst) < 2 {
            std::thread::yield_now();
        }
        // Had the second round's caller been woken before the settle, it would be
        // done by now: give it every chance to run.
        for _ in 0..10_000 {
            if second.is_finished() {
                break;
            }
            std::thread::yield_now();
        }
        assert!(!second.is_finished(), "woken before its round was settled");
        g.marks.hold.store(false, Ordering::SeqCst);
        let (mark, saw) = leader.join().unwrap();
        assert_eq!(mark, 1, "the leader's own round");
        assert!(saw >= mark, "returned before its commit was settled");
        for caller in [first, second] {
            let (mark, saw) = caller.join().unwrap();
            assert_eq!(mark, 2, "both queued writes share the second commit");
            assert!(saw >= mark, "returned before its commit was settled");
        }
        assert_eq!(
            g.marks.settles.load(Ordering::SeqCst),
            2,
            "one settle a round"
        );

        // Writes that need no durable point are committed, and never settled.
        g.write(INSERT, 9, true).unwrap();
        assert_eq!(g.marks.settles.load(Ordering::SeqCst), 2);
        assert_eq!(g.rows(), vec![1, 2, 3, 9]);
    }
}
