//! The calls of MCP tasks this host knows of from its own memory: those running
//! here (a task is known before its call journals anything), and those their
//! client cancelled (`tasks/cancel`).
//!
//! A cancelled call performs no new effect: an effect already started is never cut
//! short, one the journal holds replays (or is finished under its key), and the
//! next new one is refused before it starts; the tool's answer to that refusal is
//! the call's outcome, saved and replayed like any other. Once that outcome is
//! saved the cancel refuses nothing more; the task still reads `cancelled` until
//! the call's record is gone: forgotten through the host, or a fresh run of the
//! same call (its record forgotten or expired) forgets the cancel. Kept per host, in memory: another host, another host in the
//! same process, or this one after a restart, knows nothing of it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// A task's call running on this host: what `tasks/get` answers before the call
/// has journaled anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunningTask {
    /// Who made the task; only they see it.
    pub principal: String,
    /// The tool called.
    pub tool: String,
    /// When the call started (ms since the epoch, the host's clock).
    pub created_at: i64,
}

/// Where a cancelled call stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cancel {
    /// Its outcome is not saved yet: a new effect is refused.
    Refusing,
    /// Its outcome is saved: nothing left to refuse; the task reads `cancelled`.
    Ended,
}

/// One host's running and cancelled task calls, by invocation key.
#[derive(Debug, Default)]
pub(crate) struct TaskCalls {
    /// Whether any call was ever cancelled here: the effect path reads only this
    /// until one is.
    any_cancel: AtomicBool,
    cancels: Mutex<HashMap<String, Cancel>>,
    /// Each with the run that noted it ([`TaskCalls::started`]).
    running: Mutex<HashMap<String, (u64, RunningTask)>>,
    /// The last run noted.
    runs: AtomicU64,
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl TaskCalls {
    /// Cancels the call of invocation key `key`: its next new effect is refused.
    pub(crate) fn cancel(&self, key: &str) {
        locked(&self.cancels).insert(key.to_owned(), Cancel::Refusing);
        self.any_cancel.store(true, Ordering::Release);
    }

    /// Whether a new effect of the call of `key` is refused (it was cancelled and
    /// its outcome is not saved yet).
    pub(crate) fn refuses_effects(&self, key: &str) -> bool {
        self.any_cancel.load(Ordering::Acquire)
            && locked(&self.cancels).get(key) == Some(&Cancel::Refusing)
    }

    /// Whether the call of `key` was cancelled here (its task reads `cancelled`).
    pub(crate) fn is_cancelled(&self, key: &str) -> bool {
        self.any_cancel.load(Ordering::Acquire) && locked(&self.cancels).contains_key(key)
    }

    /// The call of `key` saved its outcome: its cancel refuses nothing more.
    pub(crate) fn completed(&self, key: &str) {
        if !self.any_cancel.load(Ordering::Acquire) {
            return;
        }
        if let Some(cancel) = locked(&self.cancels).get_mut(key) {
            *cancel = Cancel::Ended;
        }
    }

    /// The record of `key` is gone (forgotten, expired) or a fresh run of it
    /// starts: a cancel of the call that was is forgotten.
    pub(crate) fn forget(&self, key: &str) {
        if self.any_cancel.load(Ordering::Acquire) {
            locked(&self.cancels).remove(key);
        }
    }

    /// A fresh run of `key` starts (no record, or its record expired): a cancel of
    /// the call that completed under this key is forgotten. One not completed is
    /// kept: it may be of this very run, cancelled before it reached the journal.
    pub(crate) fn fresh_run(&self, key: &str) {
        if !self.any_cancel.load(Ordering::Acquire) {
            return;
        }
        let mut cancels = locked(&self.cancels);
        if cancels.get(key) == Some(&Cancel::Ended) {
            cancels.remove(key);
        }
    }

    /// Notes that the task call of `key` runs here: the run's token, for
    /// [`TaskCalls::stopped`].
    pub(crate) fn started(&self, key: &str, task: RunningTask) -> u64 {
        let run = self.runs.fetch_add(1, Ordering::Relaxed) + 1;
        locked(&self.running).insert(key.to_owned(), (run, task));
        run
    }

    /// Notes that the run `run` of the task call of `key` stopped running here; a
    /// later run of it (resumed meanwhile) is still running.
    pub(crate) fn stopped(&self, key: &str, run: u64) {
        let mut running = locked(&self.running);
        if running.get(key).is_some_and(|(noted, _)| *noted == run) {
            running.remove(key);
        }
    }

    /// The task call of `key`, if it runs here.
    pub(crate) fn running(&self, key: &str) -> Option<RunningTask> {
        locked(&self.running).get(key).map(|(_, task)| task.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancel_refuses_until_its_call_completes_and_reads_cancelled_until_forgotten() {
        let calls = TaskCalls::default();
        calls.cancel("a");
        assert!(calls.refuses_effects("a"));
        assert!(!calls.refuses_effects("b"), "another call is not cancelled");
        assert!(!calls.is_cancelled("b"));

        calls.completed("a");
        assert!(!calls.refuses_effects("a"));
        assert!(calls.is_cancelled("a"), "its task still reads cancelled");

        calls.forget("a");
        assert!(!calls.is_cancelled("a"));
    }

    #[test]
    fn a_fresh_run_forgets_a_completed_calls_cancel_and_keeps_a_running_ones() {
        let calls = TaskCalls::default();
        calls.cancel("done");
        calls.completed("done");
        calls.cancel("running");

        calls.fresh_run("done");
        calls.fresh_run("running");

        assert!(!calls.is_cancelled("done"), "a new call under that key");
        assert!(
            calls.refuses_effects("running"),
            "cancelled before it reached the journal"
        );
    }

    #[test]
    fn two_hosts_know_only_their_own_cancels_and_running_tasks() {
        let (one, other) = (TaskCalls::default(), TaskCalls::default());
        let task = RunningTask {
            principal: "alice".into(),
            tool: "pay".into(),
            created_at: 1,
        };
        one.cancel("a");
        let run = one.started("a", task.clone());
        assert!(one.refuses_effects("a"));
        assert_eq!(one.running("a"), Some(task));
        assert!(!other.is_cancelled("a"));
        assert_eq!(other.running("a"), None);
        one.stopped("a", run);
        assert_eq!(one.running("a"), None);
    }

    #[test]
    fn a_run_that_stops_leaves_a_later_run_of_its_task_running() {
        let calls = TaskCalls::default();
        let task = RunningTask {
            principal: "alice".into(),
            tool: "pay".into(),
            created_at: 1,
        };
        let first = calls.started("a", task.clone());
        // Resumed before the first run's thread noted that it stopped.
        let resumed = calls.started("a", task.clone());
        calls.stopped("a", first);
        assert_eq!(calls.running("a"), Some(task), "the resumed run still runs");
        calls.stopped("a", resumed);
        assert_eq!(calls.running("a"), None);
    }
}
