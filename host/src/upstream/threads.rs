//! Threads kept for reuse: an HTTP upstream's request under an effect key is read on
//! a thread of its own (so that it can be followed past its requester's timeout),
//! and starting one for each call cost 30–60 µs on this project's 2-core machine (a
//! `clone`, a stack mapped and unmapped) on the way of every call. A thread that
//! ran its job waits [`KEPT_FOR`] for the next one, then ends.

use std::sync::mpsc::{RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

/// How long a thread waits for another job before it ends.
pub(super) const KEPT_FOR: Duration = Duration::from_secs(30);

/// Work for a thread.
pub(super) type Job = Box<dyn FnOnce() + Send>;

/// The threads waiting for a job, each by its number and where its job goes.
type Idle = Mutex<Vec<(u64, Sender<Job>)>>;

/// Threads named alike, kept between jobs.
pub(super) struct Threads {
    name: String,
    idle: Arc<Idle>,
    started: std::sync::atomic::AtomicU64,
}

impl Threads {
    /// No thread yet; each one started is named `name`.
    pub(super) fn new(name: String) -> Self {
        Self {
            name,
            idle: Arc::default(),
            started: Default::default(),
        }
    }

    /// Runs `job` on a thread waiting for one, or on a new one.
    pub(super) fn run(&self, mut job: Job) -> std::io::Result<()> {
        while let Some((_, thread)) = lock(&self.idle).pop() {
            match thread.send(job) {
                Ok(()) => return Ok(()),
                // It ended meanwhile: the job comes back.
                Err(unsent) => job = unsent.0,
            }
        }
        let number = self
            .started
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let idle = Arc::downgrade(&self.idle);
        std::thread::Builder::new()
            .name(self.name.clone())
            .spawn(move || serve(job, &idle, number))
            .map(drop)
    }
}

fn lock(idle: &Idle) -> MutexGuard<'_, Vec<(u64, Sender<Job>)>> {
    idle.lock().unwrap_or_else(|p| p.into_inner())
}

/// A thread's life: `job`, then each job it is handed, until none comes for
/// [`KEPT_FOR`] or its [`Threads`] is dropped.
fn serve(mut job: Job, idle: &Weak<Idle>, number: u64) {
    loop {
        job();
        let (to, jobs) = channel();
        match idle.upgrade() {
            Some(idle) => lock(&idle).push((number, to)),
            None => return,
        }
        job = match jobs.recv_timeout(KEPT_FOR) {
            Ok(job) => job,
            Err(RecvTimeoutError::Disconnected) => return,
            Err(RecvTimeoutError::Timeout) => {
                let Some(idle) = idle.upgrade() else {
                    return;
                };
                let mut waiting = lock(&idle);
                match waiting.iter().position(|(n, _)| *n == number) {
                    Some(at) => {
                        waiting.remove(at);
                        return;
                    }
                    // Taken just now: its job is on the way.
                    None => {
                        drop(waiting);
                        match jobs.recv() {
                            Ok(job) => job,
                            Err(_) => return,
                        }
                    }
                }
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_that_ran_a_job_runs_the_next_one() {
        let threads = Threads::new("t".into());
        let (done, finished) = channel();
        let mut ran_on = Vec::new();
        for _ in 0..3 {
            let done = done.clone();
            threads
                .run(Box::new(move || {
                    done.send(std::thread::current().id()).unwrap();
                }))
                .unwrap();
            ran_on.push(finished.recv().unwrap());
            // Polled with a deadline: until the thread is back among the idle ones.
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while lock(&threads.idle).is_empty() {
                assert!(std::time::Instant::now() < deadline, "never idle");
                std::thread::yield_now();
            }
        }
        assert!(ran_on.iter().all(|id| *id == ran_on[0]), "{ran_on:?}");
        assert_eq!(
            threads.started.load(std::sync::atomic::Ordering::Relaxed),
            1,
            "one thread ran the three jobs"
        );
    }
}
