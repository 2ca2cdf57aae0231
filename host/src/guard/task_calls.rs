//! The calls of MCP tasks this host knows of from its own memory: those running
//! here (a task is known before its call journals anything), and those their
//! client cancelled (`tasks/cancel`).
//!
//! A cancelled call performs no new effect: an effect already started is never cut
//! short, one the journal holds replays (or is finished under its key), and the
//! next new one is refused before it starts; the tool's answer to that refusal is
//! the call's outcome, saved and replayed like any other.
//!
//! A cancel belongs to one generation of its call (the invocation's, as its record
//! holds it: see [`effect_key`](crate::keys::effect_key)), and ends with it wherever
//! it ends: the same call made again once that record is gone (forgotten by any
//! host, or expired), after another host completed it, is a new generation, never
//! refused by the old cancel. A cancel taken before the call journaled anything is
//! bound to the generation of the first run here that asks for a new effect (the
//! run it cancels). Once its outcome is saved the cancel refuses nothing more; the
//! task reads `cancelled` while its record is that generation's. Kept per host, in
//! memory: another host, or this one after a restart, knows of a cancel through the
//! journal only (`Journal::cancel`, which keeps one taken before the call had a
//! record for the key's first record, whichever host makes it).

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

/// A cancel: the generation of the call it belongs to, and where that call stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cancel {
    /// The generation cancelled; `None` until a run of the call asks for a new
    /// effect (a cancel taken before the call journaled anything).
    generation: Option<u64>,
    /// Its outcome is saved: nothing left to refuse; the task reads `cancelled`.
    ended: bool,
}

impl Cancel {
    /// Whether the cancel is of `generation` (or not bound to one yet).
    fn of(&self, generation: Option<u64>) -> bool {
        self.generation.is_none()
            || self.generation == generation
            || crate::mutants::on(crate::mutants::Mutant::CancelOutlivesGeneration)
    }
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
    /// Cancels the generation `generation` of the call of invocation key `key` (its
    /// record's; `None`: the call has no record yet): its next new effect is
    /// refused. A cancel of that generation whose call ended already stays ended.
    pub(crate) fn cancel(&self, key: &str, generation: Option<u64>) {
        let mut cancels = locked(&self.cancels);
        let ended = cancels
            .get(key)
            .is_some_and(|c| c.ended && generation.is_some() && c.generation == generation);
        if !ended {
            let cancel = Cancel {
                generation,
                ended: false,
            };
            cancels.insert(key.to_owned(), cancel);
        }
        self.any_cancel.store(true, Ordering::Release);
    }

    /// Whether a new effect of the run of `key` at `generation` is refused: that
    /// generation was cancelled (a cancel bound to none yet is bound to it now) and
    /// its outcome is not saved yet. Another generation's cancel refuses nothing.
    pub(crate) fn refuses_effects(&self, key: &str, generation: u64) -> bool {
        if !self.any_cancel.load(Ordering::Acquire) {
            return false;
        }
        let mut cancels = locked(&self.cancels);
        let Some(cancel) = cancels.get_mut(key).filter(|c| !c.ended) else {
            return false;
        };
        let refused = cancel.of(Some(generation));
        if refused {
            cancel.generation = Some(generation);
        }
        refused
    }

    /// Whether the call of `key` whose record is of `generation` (`None`: no
    /// record, or one without a seed) was cancelled here: its task reads
    /// `cancelled`. A cancel bound to a generation whose record is gone is not.
    pub(crate) fn is_cancelled(&self, key: &str, generation: Option<u64>) -> bool {
        self.any_cancel.load(Ordering::Acquire)
            && locked(&self.cancels)
                .get(key)
                .is_some_and(|c| c.of(generation))
    }

    /// The run of `key` at `generation` saved its outcome: a cancel of it refuses
    /// nothing more; one of another generation (gone, since this one has a record)
    /// is forgotten.
    pub(crate) fn completed(&self, key: &str, generation: u64) {
        if !self.any_cancel.load(Ordering::Acquire) {
            return;
        }
        let mut cancels = locked(&self.cancels);
        match cancels.get_mut(key) {
            Some(cancel) if cancel.of(Some(generation)) => {
                cancel.generation = Some(generation);
                cancel.ended = true;
            }
            Some(_) => {
                cancels.remove(key);
            }
            None => {}
        }
    }

    /// The record of `key` is gone (forgotten, expired) or a fresh run of it
    /// starts: a cancel of the call that was is forgotten.
    pub(crate) fn forget(&self, key: &str) {
        if self.any_cancel.load(Ordering::Acquire) {
            locked(&self.cancels).remove(key);
        }
    }

    /// A fresh run of `key` starts (no record, or its record expired: a new
    /// generation): a cancel of a generation that had a record is forgotten, ended
    /// or not (it ended with that record, wherever it ended). One bound to no
    /// generation yet is kept: it may be of this very run, cancelled before it
    /// reached the journal.
    pub(crate) fn fresh_run(&self, key: &str) {
        if !self.any_cancel.load(Ordering::Acquire)
            || crate::mutants::on(crate::mutants::Mutant::CancelOutlivesGeneration)
        {
            return;
        }
        let mut cancels = locked(&self.cancels);
        if cancels
            .get(key)
            .is_some_and(|c| c.ended || c.generation.is_some())
        {
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
        calls.cancel("a", Some(1));
        assert!(calls.refuses_effects("a", 1));
        assert!(
            !calls.refuses_effects("b", 1),
            "another call is not cancelled"
        );
        assert!(!calls.is_cancelled("b", Some(1)));

        calls.completed("a", 1);
        assert!(!calls.refuses_effects("a", 1));
        assert!(
            calls.is_cancelled("a", Some(1)),
            "its task still reads cancelled"
        );

        calls.forget("a");
        assert!(!calls.is_cancelled("a", Some(1)));
    }

    #[test]
    fn a_cancel_belongs_to_its_generation_and_ends_with_it() {
        let calls = TaskCalls::default();
        calls.cancel("a", Some(1));
        assert!(
            !calls.refuses_effects("a", 2),
            "a new generation of the same key is not cancelled"
        );
        assert!(!calls.is_cancelled("a", Some(2)));
        assert!(!calls.is_cancelled("a", None), "its record is gone");
        assert!(calls.refuses_effects("a", 1), "the cancelled generation is");

        // The new generation completes here: the old cancel is gone.
        calls.completed("a", 2);
        assert!(!calls.is_cancelled("a", Some(1)));
        assert!(!calls.refuses_effects("a", 1));

        // Taken before any record: bound by the first run that asks for an effect.
        calls.cancel("b", None);
        assert!(calls.is_cancelled("b", None));
        assert!(calls.refuses_effects("b", 7));
        assert!(!calls.refuses_effects("b", 8), "bound to 7");
        assert!(calls.is_cancelled("b", Some(7)));
        assert!(!calls.is_cancelled("b", Some(8)));
    }

    #[test]
    fn a_fresh_run_forgets_a_cancel_of_a_journaled_generation_and_keeps_an_unbound_one() {
        let calls = TaskCalls::default();
        calls.cancel("done", Some(1));
        calls.completed("done", 1);
        calls.cancel("elsewhere", Some(2));
        calls.cancel("running", None);

        calls.fresh_run("done");
        calls.fresh_run("elsewhere");
        calls.fresh_run("running");

        assert!(
            !calls.is_cancelled("done", None),
            "a new call under that key"
        );
        assert!(
            !calls.is_cancelled("elsewhere", None),
            "its generation ended with its record, on another host"
        );
        assert!(
            calls.refuses_effects("running", 3),
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
        one.cancel("a", Some(1));
        let run = one.started("a", task.clone());
        assert!(one.refuses_effects("a", 1));
        assert_eq!(one.running("a"), Some(task));
        assert!(!other.is_cancelled("a", Some(1)));
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
