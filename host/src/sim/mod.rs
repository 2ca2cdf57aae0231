//! The simulator: seeded random histories of agents calling tools through several
//! hosts that share one journal, with injected faults, checked against the contract
//! (DESIGN.md, "The contract" and "Nothing the agent was told is lost").
//!
//! - `history`: runs one history from its seed; every fault is counted and written
//!   into the history's schedule;
//! - `world`: the fake downstreams and the fault switchboard;
//! - `guests`: the scripted tools the agents call;
//! - `check`: the invariant checker;
//! - [`run`]: histories one after another, from a seed, for a time; the `simulate`
//!   binary of `justonce-tests` prints its [`Report`].
//!
//! Nothing below this layer imports it.

mod check;
mod clock;
mod guests;
mod history;
mod rng;
mod world;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

pub use world::FaultKind;

/// What to simulate.
#[derive(Debug, Clone)]
pub struct Options {
    /// The first history's seed; history `n` runs seed `seed + n`.
    pub seed: u64,
    /// Keep starting histories until this much (wall-clock) time has passed; `None`
    /// runs exactly one history (a replay of `seed`).
    pub duration: Option<Duration>,
    /// Stop at the first history that breaks an invariant.
    pub stop_at_violation: bool,
    /// Hosts sharing the journal in each history.
    pub hosts: usize,
    /// Agents calling concurrently in each history.
    pub agents: usize,
    /// Steps each agent takes.
    pub steps: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            seed: 1,
            duration: None,
            stop_at_violation: true,
            hosts: 3,
            agents: 4,
            steps: 25,
        }
    }
}

/// One history that broke an invariant.
#[derive(Debug, Clone)]
pub struct Failure {
    /// Its seed: `simulate --seed S` replays it.
    pub seed: u64,
    /// What it broke.
    pub violations: Vec<String>,
    /// The faults it injected, in order.
    pub schedule: Vec<String>,
    /// When it was found, from the start of the run.
    pub after: Duration,
}

/// What a run found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Histories run.
    pub histories: u64,
    /// Calls made, over all histories.
    pub calls: u64,
    /// How the calls ended: `answered`, `replayed`, `crashed` or an error's kind.
    pub endings: BTreeMap<String, u64>,
    /// Faults injected, per kind.
    pub faults: BTreeMap<FaultKind, u64>,
    /// Histories that broke an invariant.
    pub failures: Vec<Failure>,
}

impl Report {
    /// Faults injected, all kinds.
    pub fn fault_total(&self) -> u64 {
        self.faults.values().sum()
    }

    /// Violations found, over all histories.
    pub fn violations(&self) -> usize {
        self.failures.iter().map(|f| f.violations.len()).sum()
    }
}

/// Runs histories from `options.seed` on, and reports what they found.
pub fn run(options: &Options) -> Report {
    let started = Instant::now();
    let size = history::Size {
        hosts: options.hosts.max(1),
        agents: options.agents.max(1),
        steps: options.steps,
    };
    let mut report = Report::default();
    let mut seed = options.seed;
    loop {
        let outcomes = history::run(seed, size);
        report.histories += 1;
        report.calls += outcomes.calls as u64;
        for (ending, n) in outcomes.endings {
            *report.endings.entry(ending).or_default() += n;
        }
        for (kind, n) in outcomes.faults {
            *report.faults.entry(kind).or_default() += n;
        }
        if !outcomes.violations.is_empty() {
            report.failures.push(Failure {
                seed,
                violations: outcomes.violations,
                schedule: outcomes.schedule,
                after: started.elapsed(),
            });
            if options.stop_at_violation {
                break;
            }
        }
        seed = seed.wrapping_add(1);
        match options.duration {
            Some(d) if started.elapsed() < d => {}
            _ => break,
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A short seeded batch: every invariant holds over a few small histories.
    #[test]
    fn seeded_histories_keep_every_promise() {
        for seed in [1, 2, 3, 4] {
            let report = run(&Options {
                seed,
                hosts: 3,
                agents: 3,
                steps: 12,
                ..Options::default()
            });
            assert_eq!(report.histories, 1);
            assert!(report.calls > 0);
            if let Some(failure) = report.failures.first() {
                panic!(
                    "seed {seed} broke {} invariant(s):\n{}\nfault schedule:\n{}",
                    failure.violations.len(),
                    failure.violations.join("\n"),
                    failure.schedule.join("\n")
                );
            }
        }
    }
}
