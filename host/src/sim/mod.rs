//! The simulator: seeded random histories of agents calling tools through several
//! hosts that share one journal (SQLite or PostgreSQL), with injected faults, checked against the contract
//! (DESIGN.md, "The contract" and "Nothing the agent was told is lost").
//!
//! - `history`: runs one history from its seed; every fault is counted and written
//!   into the history's schedule;
//! - `world`: the fake downstreams and the fault switchboard;
//! - `guests`: the scripted tools the agents call;
//! - `receiver`: the webhook receiver the outbox delivers to (127.0.0.1);
//! - `check`: the invariant checker;
//! - `store`: the history's journal, SQLite or PostgreSQL, and what differs;
//! - `clock`: the shared clock and each host's own;
//! - [`run`]: histories one after another, from a seed, for a time; the `simulate`
//!   binary of `justonce-tests` prints its [`Report`].
//!
//! Nothing below this layer imports it.

mod check;
mod clock;
mod guests;
mod history;
mod receiver;
mod rng;
mod store;
mod world;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

pub use store::{JournalKind, StoreError};
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
    /// Run at most this many histories (with `duration`, whichever ends first;
    /// without it, until this many have run).
    pub max_histories: Option<u64>,
    /// Hosts sharing the journal in each history.
    pub hosts: usize,
    /// Agents calling concurrently in each history.
    pub agents: usize,
    /// Steps each agent takes.
    pub steps: usize,
    /// The journal the hosts share.
    pub journal: JournalKind,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            seed: 1,
            duration: None,
            stop_at_violation: true,
            max_histories: None,
            hosts: 3,
            agents: 4,
            steps: 25,
            journal: JournalKind::Sqlite,
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
    /// Histories that injected at least one fault, per kind.
    pub histories_with: BTreeMap<FaultKind, u64>,
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

/// The journal a mutant's histories must run on for it to be caught: the host's clock
/// used for a lease is a bug only where the database's clock should decide.
#[cfg(test)]
fn journal_for(mutant: crate::mutants::Mutant) -> JournalKind {
    match mutant {
        crate::mutants::Mutant::HostClockLease => JournalKind::Postgres,
        _ => JournalKind::Sqlite,
    }
}

/// Runs histories from `options.seed` on, and reports what they found; `Err` when
/// no journal of the kind asked for can be made (no PostgreSQL).
pub fn run(options: &Options) -> Result<Report, StoreError> {
    let started = Instant::now();
    let size = history::Size {
        hosts: options.hosts.max(1),
        agents: options.agents.max(1),
        steps: options.steps,
    };
    let mut report = Report::default();
    let mut seed = options.seed;
    loop {
        let outcomes = history::run(seed, size, options.journal)?;
        report.histories += 1;
        report.calls += outcomes.calls as u64;
        for (ending, n) in outcomes.endings {
            *report.endings.entry(ending).or_default() += n;
        }
        for (kind, n) in outcomes.faults {
            *report.faults.entry(kind).or_default() += n;
            *report.histories_with.entry(kind).or_default() += u64::from(n > 0);
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
        if options
            .max_histories
            .is_some_and(|max| report.histories >= max)
        {
            break;
        }
        match options.duration {
            Some(d) if started.elapsed() < d => {}
            None if options.max_histories.is_some() => {}
            _ => break,
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mutants::Mutant;

    /// Names the mutant a child process of [`every_mutant_is_caught`] runs.
    const MUTANT_ENV: &str = "JUSTONCE_TEST_MUTANT";
    /// Histories within which each mutant must be caught.
    const MUTANT_BOUND: u64 = 1500;

    /// A checker that stops seeing fails here: every deliberate bug is caught within
    /// [`MUTANT_BOUND`] histories. A mutant is switched on for a whole process, so
    /// each runs in a child process of this test binary ([`one_mutant`]).
    #[test]
    fn every_mutant_is_caught() {
        let exe = std::env::current_exe().expect("the test binary");
        for mutant in Mutant::ALL {
            let out = std::process::Command::new(&exe)
                .args([
                    "--exact",
                    "sim::tests::one_mutant",
                    "--ignored",
                    "--nocapture",
                ])
                .env(MUTANT_ENV, mutant.name())
                .output()
                .expect("run the test binary");
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && stdout.contains("caught "),
                "mutant {} was not caught:\n{stdout}\n{}",
                mutant.name(),
                String::from_utf8_lossy(&out.stderr)
            );
            println!(
                "{}",
                stdout
                    .lines()
                    .find(|l| l.starts_with("caught "))
                    .unwrap_or("")
            );
        }
    }

    /// Runs histories with the mutant [`MUTANT_ENV`] names until one breaks an
    /// invariant; fails if none does within [`MUTANT_BOUND`].
    #[test]
    #[ignore = "run by every_mutant_is_caught, in a process of its own"]
    fn one_mutant() {
        let Ok(name) = std::env::var(MUTANT_ENV) else {
            return;
        };
        let mutant = Mutant::parse(&name).expect("a mutant's name");
        Mutant::activate(Some(mutant)).expect("mutants are compiled into unit tests");
        let report = run(&Options {
            max_histories: Some(MUTANT_BOUND),
            journal: journal_for(mutant),
            ..Options::default()
        })
        .expect("a journal to simulate on");
        assert!(
            !report.failures.is_empty(),
            "the mutant {name} survived {} histories",
            report.histories
        );
        let first = &report.failures[0];
        println!(
            "caught {name} after {} histories (seed {}): {}",
            report.histories, first.seed, first.violations[0]
        );
    }

    /// A short seeded batch: every invariant holds over a few small histories.
    #[test]
    fn seeded_histories_keep_every_promise() {
        seeded(JournalKind::Sqlite);
    }

    /// The same on PostgreSQL, whose hosts' clocks are skewed and jump.
    #[test]
    fn seeded_histories_keep_every_promise_on_postgres() {
        if crate::journal::postgres::testing::cluster(
            "seeded_histories_keep_every_promise_on_postgres",
        )
        .is_none()
        {
            return;
        }
        seeded(JournalKind::Postgres);
    }

    fn seeded(journal: JournalKind) {
        for seed in [1, 2, 3, 4] {
            let report = run(&Options {
                seed,
                hosts: 3,
                agents: 3,
                steps: 12,
                journal,
                ..Options::default()
            })
            .expect("a journal to simulate on");
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
