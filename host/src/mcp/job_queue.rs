//! The queue between stdio's reader and its workers: bounded, and handing each job
//! to the worker that went idle last.
//!
//! Why not a channel: `crossbeam_channel`'s `recv` spins and then calls
//! `sched_yield` several times before it parks, and every worker that finished a
//! call went through that on its way back to the queue. On 2 cores each yield
//! switched to another runnable thread: a profile of `serve` under a stream of
//! fresh calls put 14 % of the server's CPU in those yields and their context
//! switches (about 3 a call). Here an idle worker parks at once.
//!
//! Why the last idle worker: a channel woke its waiting workers in turn, so
//! consecutive calls ran on 16 different threads, each with cold caches and its
//! own allocator arena. The worker that just finished is the one whose stack,
//! caches and arena are warm.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};
use std::thread::Thread;

/// A bounded queue of jobs for a pool of worker threads.
pub(crate) struct JobQueue<T> {
    state: Mutex<State<T>>,
    capacity: usize,
}

struct State<T> {
    jobs: VecDeque<T>,
    /// Workers parked waiting for a job, the last to go idle at the end.
    idle: Vec<Thread>,
    /// No job comes any more: a worker that finds the queue empty returns.
    closed: bool,
}

/// Why [`JobQueue::try_push`] gave a job back.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// `capacity` jobs wait already.
    Full,
    /// The queue was closed.
    Closed,
}

impl<T> JobQueue<T> {
    /// A queue that holds at most `capacity` jobs waiting for a worker.
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            state: Mutex::new(State {
                jobs: VecDeque::with_capacity(capacity.min(64)),
                idle: Vec::new(),
                closed: false,
            }),
            capacity,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `job` and wakes the worker that went idle last, if one is idle; gives
    /// the job back when the queue is full or closed.
    pub(crate) fn try_push(&self, job: T) -> Result<(), (Refused, T)> {
        let mut state = self.lock();
        if state.closed {
            return Err((Refused::Closed, job));
        }
        if state.jobs.len() >= self.capacity {
            return Err((Refused::Full, job));
        }
        state.jobs.push_back(job);
        let wake = state.idle.pop();
        drop(state);
        if let Some(worker) = wake {
            worker.unpark();
        }
        Ok(())
    }

    /// The next job, waiting (parked) for one; `None` once the queue is closed and
    /// empty.
    pub(crate) fn pop(&self) -> Option<T> {
        let mut state = self.lock();
        loop {
            if let Some(job) = state.jobs.pop_front() {
                return Some(job);
            }
            if state.closed {
                return None;
            }
            let me = std::thread::current();
            state.idle.push(me.clone());
            drop(state);
            // An unpark between the push above and this park is kept as the
            // thread's token: the park then returns at once.
            std::thread::park();
            state = self.lock();
            // Woken by a push (which took it off the list) or spuriously (still on
            // it): either way it looks at the queue again, listed once at most.
            if let Some(at) = state.idle.iter().position(|t| t.id() == me.id()) {
                state.idle.remove(at);
            }
        }
    }

    /// A guard that closes the queue when dropped, however the scope that feeds it
    /// ends (an early return too: the workers must not wait for jobs forever).
    pub(crate) fn closing(&self) -> Closing<'_, T> {
        Closing(self)
    }

    /// No job comes any more: every worker returns once the queue is empty.
    pub(crate) fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        let idle = std::mem::take(&mut state.idle);
        drop(state);
        for worker in idle {
            worker.unpark();
        }
    }
}

/// Closes its queue when dropped (see [`JobQueue::closing`]).
pub(crate) struct Closing<'a, T>(&'a JobQueue<T>);

impl<T> Drop for Closing<'_, T> {
    fn drop(&mut self) {
        self.0.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Every job pushed is popped exactly once by some worker, and the workers
    /// return once the queue is closed and drained.
    #[test]
    fn every_job_is_taken_once_and_workers_return_when_closed() {
        let queue = Arc::new(JobQueue::new(1 << 16));
        let taken = Arc::new(AtomicUsize::new(0));
        let sum = Arc::new(AtomicUsize::new(0));
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let (queue, taken, sum) = (queue.clone(), taken.clone(), sum.clone());
                std::thread::spawn(move || {
                    while let Some(job) = queue.pop() {
                        taken.fetch_add(1, Ordering::SeqCst);
                        sum.fetch_add(job, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for job in 1..=10_000usize {
            queue.try_push(job).unwrap();
            if job % 100 == 0 {
                std::thread::yield_now();
            }
        }
        queue.close();
        for worker in workers {
            worker.join().unwrap();
        }
        assert_eq!(taken.load(Ordering::SeqCst), 10_000);
        assert_eq!(sum.load(Ordering::SeqCst), 10_000 * 10_001 / 2);
        assert_eq!(queue.try_push(1), Err((Refused::Closed, 1)));
    }

    /// A full queue gives the job back, and takes one again once a job left.
    #[test]
    fn a_full_queue_gives_the_job_back() {
        let queue = JobQueue::new(2);
        queue.try_push(1).unwrap();
        queue.try_push(2).unwrap();
        assert_eq!(queue.try_push(3), Err((Refused::Full, 3)));
        assert_eq!(queue.pop(), Some(1));
        queue.try_push(3).unwrap();
        queue.close();
        assert_eq!(queue.pop(), Some(2));
        assert_eq!(queue.pop(), Some(3));
        assert_eq!(queue.pop(), None);
    }

    /// The worker that went idle last is the one woken.
    #[test]
    fn the_last_idle_worker_takes_the_next_job() {
        let queue = Arc::new(JobQueue::<&'static str>::new(8));
        let spawn = |name: &'static str| {
            let queue = queue.clone();
            std::thread::Builder::new()
                .name(name.into())
                .spawn(move || {
                    let job = queue.pop();
                    (std::thread::current().name().unwrap().to_owned(), job)
                })
                .unwrap()
        };
        let first = spawn("first");
        while queue.lock().idle.is_empty() {
            std::thread::yield_now();
        }
        let second = spawn("second");
        while queue.lock().idle.len() < 2 {
            std::thread::yield_now();
        }
        queue.try_push("job").unwrap();
        let woken = second.join().unwrap();
        assert_eq!(woken, ("second".to_owned(), Some("job")));
        queue.close();
        assert_eq!(first.join().unwrap(), ("first".to_owned(), None));
    }
}
