//! Writing behind: commits a caller need not wait for, made by a writer thread.
//!
//! Some writes are not needed before the caller's next step, because losing them
//! cannot make an effect happen twice or tell an agent something false:
//!
//! - in both durability modes, the outcome of a call that performed no effect outside
//!   the journal (none, or only transactional ones, whose writes are committed with
//!   their records): lost, a retry runs again a call that did nothing;
//! - with [`Durability::Normal`](super::Durability::Normal), also the outcome of a call
//!   whose effects were keyed, and keyed answers: lost, a retry resumes the call and
//!   its keyed effects are retried with the keys the journal holds, which the
//!   downstream answers again instead of acting twice.
//!
//! The caller queues them and returns; a writer thread applies the queue in order, as
//! many jobs as are waiting in one transaction (one commit for a whole burst). An
//! outcome wakes the writer, which lets a burst gather for at most [`LINGER`]; a keyed
//! answer waits for its call's outcome (or any other write), so both land in one
//! commit. A queued write is lost only if the process dies before the writer commits
//! it. Everything else still reads its own writes: a call whose key has a queued write
//! waits for it before it looks at the journal ([`WriteBehind::flush_key`]), every read
//! through the store's public API flushes first, and dropping the store drains the
//! queue. Writes the contract needs first (an effect's record before its provider, the
//! outcome of a call that performed an effect outside the journal with `Full`, or an
//! unkeyed one with `Normal`) never go through here. What a call gives up by being
//! answered first: another process's run of the same key in the same millisecond is
//! not told apart (a different-arguments mismatch included); the journal's first
//! record stands, and this process forgets its own answer.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::Connection;

use super::invocations::NewInvocation;
use crate::keys::{EffectKey, InvocationKey};

/// How long the writer lets queued jobs gather before it commits them, unless a
/// caller waits for them: the longest a write stays only in memory.
const LINGER: Duration = Duration::from_millis(1);

/// The writer commits at once when this many jobs are queued.
const BATCH: usize = 256;

/// One queued write.
#[derive(Debug)]
pub(crate) enum Job {
    /// Saves the outcome of a run that never journaled its invocation.
    CompleteNew {
        record: NewInvocation,
        outcome: String,
        now: i64,
    },
    /// Saves the outcome of a run that holds the lease, and releases it.
    Complete {
        key: InvocationKey,
        owner: String,
        outcome: String,
        now: i64,
    },
    /// Saves a keyed effect's definitive answer.
    Finish {
        invocation: InvocationKey,
        key: EffectKey,
        response: String,
        now: i64,
    },
}

impl Job {
    fn is_outcome(&self) -> bool {
        !matches!(self, Job::Finish { .. })
    }

    fn invocation(&self) -> &InvocationKey {
        match self {
            Job::CompleteNew { record, .. } => &record.key,
            Job::Complete { key, .. } => key,
            Job::Finish { invocation, .. } => invocation,
        }
    }

    /// Applies the job; `false` when the journal had moved on (another run journaled
    /// the key, or took the lease over) and nothing was written.
    pub(crate) fn apply(&self, conn: &Connection) -> rusqlite::Result<bool> {
        match self {
            Job::CompleteNew {
                record,
                outcome,
                now,
            } => super::invocations::insert_completed_in(conn, record, outcome, *now),
            Job::Complete {
                key,
                owner,
                outcome,
                now,
            } => super::invocations::complete_in(conn, key, owner, outcome, *now),
            Job::Finish {
                key, response, now, ..
            } => {
                super::effects::finish(conn, key, response, *now)?;
                Ok(true)
            }
        }
    }
}

#[derive(Debug, Default)]
struct Queue {
    jobs: Vec<Job>,
    /// Jobs queued so far, and applied so far (in order).
    queued: u64,
    applied: u64,
    /// For each key with a queued job, the number of its last one.
    keys: HashMap<InvocationKey, u64>,
    /// Someone waits for the queue: commit without lingering.
    urgent: bool,
    /// The last failure to apply a job, reported by the next flush.
    failed: Option<Lost>,
    stop: bool,
}

/// A write made behind a call that the journal could not save.
#[derive(Debug)]
pub(crate) struct Lost {
    /// The call whose write was lost.
    pub key: InvocationKey,
    /// What SQLite said.
    pub error: rusqlite::Error,
}

#[derive(Debug, Default)]
struct Shared {
    queue: Mutex<Queue>,
    /// Signalled when jobs are queued or the store is dropped.
    work: Condvar,
    /// Signalled when jobs are applied.
    applied: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The write-behind queue of one store and its writer thread.
#[derive(Debug)]
pub(crate) struct WriteBehind {
    shared: Arc<Shared>,
    writer: Option<JoinHandle<()>>,
}

impl WriteBehind {
    /// Starts a writer that applies queued jobs on `conn` (the store's connection).
    /// `after` runs with the connection's lock held after each batch (the store
    /// counts its commits there); `failed` is told each call whose write was lost.
    pub(crate) fn start(
        conn: Arc<Mutex<Connection>>,
        after: impl Fn() + Send + 'static,
        failed: impl Fn(&InvocationKey) + Send + 'static,
    ) -> std::io::Result<Self> {
        let shared = Arc::new(Shared::default());
        let writer = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("justonce-writer".into())
                .spawn(move || write_loop(&shared, &conn, &after, &failed))?
        };
        Ok(Self {
            shared,
            writer: Some(writer),
        })
    }

    /// Queues `job`; the caller does not wait for it.
    pub(crate) fn push(&self, job: Job) {
        let mut queue = self.shared.lock();
        queue.queued += 1;
        let number = queue.queued;
        queue.keys.insert(job.invocation().clone(), number);
        let job_is_outcome = job.is_outcome();
        queue.jobs.push(job);
        // The first outcome of a batch (or a full batch) wakes the writer. A keyed
        // answer waits for its call's outcome, so both land in one commit.
        let outcomes = queue.jobs.iter().filter(|j| j.is_outcome()).count();
        let wake = (job_is_outcome && outcomes == 1) || queue.jobs.len() >= BATCH;
        drop(queue);
        if wake {
            self.shared.work.notify_one();
        }
    }

    /// Waits until every job queued for `key` is applied (at once if none is).
    pub(crate) fn flush_key(&self, key: &InvocationKey) {
        let queue = self.shared.lock();
        if let Some(number) = queue.keys.get(key).copied() {
            drop(self.wait_for(queue, number));
        }
    }

    /// Waits until every job queued so far is applied.
    pub(crate) fn wait_all(&self) {
        let queue = self.shared.lock();
        let number = queue.queued;
        drop(self.wait_for(queue, number));
    }

    /// Waits until every job queued so far is applied; the last failure to apply
    /// one, if any happened since the previous flush.
    pub(crate) fn flush(&self) -> Result<(), Lost> {
        let queue = self.shared.lock();
        let number = queue.queued;
        match self.wait_for(queue, number).failed.take() {
            Some(failure) => Err(failure),
            None => Ok(()),
        }
    }

    /// Wakes the writer if anything is queued (a keyed answer whose call ended
    /// without an outcome to carry it).
    pub(crate) fn nudge(&self) {
        if !self.shared.lock().jobs.is_empty() {
            self.shared.work.notify_one();
        }
    }

    /// The failure to apply a job since the last report, without waiting.
    pub(crate) fn take_failure(&self) -> Option<Lost> {
        self.shared.lock().failed.take()
    }

    fn wait_for<'a>(
        &'a self,
        mut queue: MutexGuard<'a, Queue>,
        number: u64,
    ) -> MutexGuard<'a, Queue> {
        if queue.applied < number {
            queue.urgent = true;
            self.shared.work.notify_one();
        }
        self.shared
            .applied
            .wait_while(queue, |q| q.applied < number)
            .unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for WriteBehind {
    /// Applies everything still queued, then stops the writer.
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.work.notify_one();
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

fn write_loop(
    shared: &Shared,
    conn: &Mutex<Connection>,
    after: &dyn Fn(),
    failed: &dyn Fn(&InvocationKey),
) {
    loop {
        let (jobs, last) = {
            let mut queue = shared
                .work
                .wait_while(shared.lock(), |q| q.jobs.is_empty() && !q.stop)
                .unwrap_or_else(|p| p.into_inner());
            if queue.jobs.is_empty() {
                return; // stopped, and nothing left
            }
            // Let a burst gather into one commit, unless someone waits for it.
            queue = shared
                .work
                .wait_timeout_while(queue, LINGER, |q| {
                    !q.urgent && !q.stop && q.jobs.len() < BATCH
                })
                .unwrap_or_else(|p| p.into_inner())
                .0;
            queue.urgent = false;
            let last = queue.applied + queue.jobs.len() as u64;
            (std::mem::take(&mut queue.jobs), last)
        };
        // A panic here must not leave callers waiting for jobs that never land.
        let results = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut conn = conn.lock().unwrap_or_else(|p| p.into_inner());
            let results = apply_all(&mut conn, &jobs);
            after();
            results
        }))
        .unwrap_or_else(|_| {
            jobs.iter()
                .map(|_| {
                    Err(rusqlite::Error::SqliteFailure(
                        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_INTERNAL),
                        Some(
                            "the journal writer failed while saving writes made behind calls"
                                .into(),
                        ),
                    ))
                })
                .collect()
        });
        let mut failure = None;
        for (job, result) in jobs.iter().zip(results) {
            let key = job.invocation();
            match result {
                Ok(true) => {}
                Ok(false) => {
                    // The journal's record stands; this process must not replay the
                    // outcome it answered from memory.
                    failed(key);
                    tracing::warn!(%key, "another run journaled this call meanwhile; the journal's outcome stands");
                }
                Err(error) => {
                    failed(key);
                    tracing::error!(%key, "the journal could not save a write made behind this call (a retry runs it again): {error}");
                    failure = Some(Lost {
                        key: key.clone(),
                        error,
                    });
                }
            }
        }
        let mut queue = shared.lock();
        queue.applied = last;
        queue.keys.retain(|_, number| *number > last);
        if let Some(failure) = failure {
            queue.failed = Some(failure);
        }
        drop(queue);
        shared.applied.notify_all();
    }
}

/// Applies `jobs` in one transaction; if that fails, each in its own, so one bad job
/// costs only itself. The result of each job, in order.
fn apply_all(conn: &mut Connection, jobs: &[Job]) -> Vec<rusqlite::Result<bool>> {
    let batch = (|| {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let applied = jobs
            .iter()
            .map(|job| job.apply(&tx))
            .collect::<rusqlite::Result<Vec<bool>>>()?;
        tx.commit()?;
        Ok::<_, rusqlite::Error>(applied)
    })();
    match batch {
        Ok(applied) => applied.into_iter().map(Ok).collect(),
        Err(_) => jobs
            .iter()
            .map(|job| {
                let tx =
                    conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
                let applied = job.apply(&tx)?;
                tx.commit()?;
                Ok(applied)
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::determinism::Seed;
    use crate::keys::Fingerprint;

    fn journal(dir: &std::path::Path) -> Arc<Mutex<Connection>> {
        let conn = Connection::open(dir.join("t.db")).unwrap();
        conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0))
            .unwrap();
        let mut conn = conn;
        crate::store::schema::migrate(&mut conn).unwrap();
        Arc::new(Mutex::new(conn))
    }

    fn new_call(n: u32) -> Job {
        Job::CompleteNew {
            record: NewInvocation {
                key: InvocationKey::from_stored(format!("{n:032x}")),
                scope: "c".into(),
                tool: "echo".into(),
                fingerprint: Fingerprint::from_stored("f".repeat(64)),
                explicit_key: false,
                created_at: 1,
                seed: Seed::random().unwrap(),
            },
            outcome: r#"{"ok":true,"result":1}"#.into(),
            now: 2,
        }
    }

    fn count(conn: &Mutex<Connection>) -> i64 {
        conn.lock()
            .unwrap()
            .query_row("SELECT COUNT(*) FROM invocations", [], |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn a_flush_sees_every_queued_write_and_dropping_drains_the_queue() {
        let dir = tempfile::tempdir().unwrap();
        let conn = journal(dir.path());
        let behind = WriteBehind::start(Arc::clone(&conn), || {}, |_| {}).unwrap();
        for n in 0..50 {
            behind.push(new_call(n));
        }
        behind.flush_key(&InvocationKey::from_stored(format!("{:032x}", 49)));
        assert_eq!(count(&conn), 50, "the key's job and every job before it");
        for n in 50..80 {
            behind.push(new_call(n));
        }
        drop(behind);
        assert_eq!(count(&conn), 80, "dropping applied what was queued");
    }

    #[test]
    fn a_write_that_fails_is_reported_by_the_next_flush_and_the_others_are_saved() {
        let dir = tempfile::tempdir().unwrap();
        let conn = journal(dir.path());
        let behind = WriteBehind::start(Arc::clone(&conn), || {}, |_| {}).unwrap();
        // The journal refuses one row (as a full disk or a constraint would).
        conn.lock()
            .unwrap()
            .execute_batch(&format!(
                "CREATE TEMP TRIGGER refuse BEFORE INSERT ON invocations
                  WHEN NEW.key = '{:032x}' BEGIN SELECT RAISE(ABORT, 'refused'); END;",
                2
            ))
            .unwrap();
        // Holding the connection keeps the writer from starting until all are queued.
        let held = conn.lock().unwrap();
        for n in 1..=3 {
            behind.push(new_call(n));
        }
        drop(held);
        let lost = behind.flush().unwrap_err();
        assert!(
            lost.error.to_string().contains("refused"),
            "{:?}",
            lost.error
        );
        assert_eq!(lost.key, InvocationKey::from_stored(format!("{:032x}", 2)));
        assert_eq!(count(&conn), 2, "the two good writes are saved");
        assert!(behind.flush().is_ok(), "reported once");
    }
}
