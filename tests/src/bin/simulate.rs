//! The simulator's soak: seeded random histories with injected faults, checked
//! against the contract, for a while or for one seed.
//!
//! ```text
//! cargo run --release -p justonce-tests --bin simulate -- --seconds 600
//! cargo run --release -p justonce-tests --bin simulate -- --seconds 600 --journal postgres
//! cargo run --release -p justonce-tests --bin simulate -- --seed 1234      # replay one
//! cargo run --release -p justonce-tests --features mutants --bin simulate -- \
//!     --seconds 60 --mutant fresh_effect_key
//! ```
//!
//! Prints a count per fault kind (and how many histories injected it), every failing history with its seed and fault
//! schedule, and ends with `histories=H faults=F violations=V seed=S` (`S` is the
//! first failing seed, or the first seed when none failed); exits 1 when V > 0.

use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Parser;
use justonce::__private::{JournalKind, Mutant, Options, run};

/// Seeded random histories of agents, hosts and faults, checked against the contract.
#[derive(Parser)]
#[command(name = "simulate")]
struct Args {
    /// Keep running histories for this many seconds (without it, run one history).
    #[arg(long)]
    seconds: Option<u64>,
    /// The first history's seed (history n runs seed + n); defaults to the time.
    #[arg(long)]
    seed: Option<u64>,
    /// Run against a deliberate bug (needs `--features mutants`); an unknown name
    /// lists them.
    #[arg(long)]
    mutant: Option<String>,
    /// The journal the hosts share: `sqlite` (a file) or `postgres` (a throwaway
    /// cluster started for this process, as the tests start one; hosts' clocks are
    /// then skewed and jump, and the database's clock decides).
    #[arg(long, default_value = "sqlite")]
    journal: String,
    /// Keep going after a history breaks an invariant.
    #[arg(long)]
    keep_going: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let mutant = match args.mutant.as_deref().map(|name| {
        Mutant::parse(name).ok_or_else(|| {
            let names: Vec<&str> = Mutant::ALL.iter().map(|m| m.name()).collect();
            format!("no mutant `{name}`; there are: {}", names.join(", "))
        })
    }) {
        None => None,
        Some(Ok(m)) => Some(m),
        Some(Err(e)) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = Mutant::activate(mutant) {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let Some(journal) = JournalKind::parse(&args.journal) else {
        eprintln!(
            "error: no journal `{}`; there are: sqlite, postgres",
            args.journal
        );
        return ExitCode::from(2);
    };
    let seed = args.seed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_secs())
    });
    let options = Options {
        seed,
        duration: args.seconds.map(Duration::from_secs),
        stop_at_violation: !args.keep_going,
        journal,
        ..Options::default()
    };
    let report = match run(&options) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    for failure in &report.failures {
        println!(
            "\nseed {} broke {} invariant(s) after {:.1}s (replay: --seed {}):",
            failure.seed,
            failure.violations.len(),
            failure.after.as_secs_f64(),
            failure.seed
        );
        for violation in &failure.violations {
            println!("  violation: {violation}");
        }
        println!("  fault schedule:");
        for fault in &failure.schedule {
            println!("    {fault}");
        }
    }
    let endings: Vec<String> = report
        .endings
        .iter()
        .map(|(ending, n)| format!("{ending}={n}"))
        .collect();
    println!("calls={} ({})", report.calls, endings.join(" "));
    for (kind, n) in &report.faults {
        let histories = report.histories_with.get(kind).copied().unwrap_or(0);
        println!("{}={n} ({histories} histories)", kind.name());
    }
    let shown = report.failures.first().map_or(seed, |f| f.seed);
    println!(
        "histories={} faults={} violations={} seed={shown}",
        report.histories,
        report.fault_total(),
        report.violations()
    );
    if report.violations() > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
