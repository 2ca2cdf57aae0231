//! `justonce gc`: delete records past their own windows.

use std::time::Duration;

use clap::Args;

use super::{Cli, exit};
use crate::clock::{Clock, SystemClock, millis};
use crate::error::Error;

/// Delete expired records and say how many. Each call's record is kept for the
/// window it was journaled with (its conversation's, the unscoped one, or its tool's
/// own), never less: a retry within it must still be deduplicated, so `gc` cannot
/// shorten it. To drop one call's record now, `justonce forget KEY`.
#[derive(Debug, Args)]
pub struct Gc {
    /// The window, in hours, of what carries none of its own: records journaled
    /// before records carried their window, delivered (or given-up) outbox messages
    /// and mailbox rows [default: the configuration's `retention_hours`, else 24]. It
    /// does not shorten any call's own window; 0 is refused for that reason.
    #[arg(long, value_name = "HOURS", value_parser = hours)]
    retention_hours: Option<u64>,
}

/// `gc --retention-hours 0`: what an operator means by it (remove everything now) is
/// not what it could do, so it is refused, saying what does.
const ZERO_REFUSED: &str = "--retention-hours 0 would not remove the calls kept for their own \
     windows (each record is kept for the window it was journaled with, so a retry within it is \
     still deduplicated); it sets the window only of records older than windows, of delivered \
     outbox messages and of mailbox rows. To remove one call's record now: `justonce forget KEY` \
     (see `justonce journal`); to keep calls for less, lower `retention_hours` (or a tool's) in the \
     configuration: new calls get the shorter window";

/// `--retention-hours`: a whole number of hours, not 0 ([`ZERO_REFUSED`]).
fn hours(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(0) => Err(ZERO_REFUSED.into()),
        Ok(hours) => Ok(hours),
        Err(e) => Err(format!("a whole number of hours: {e}")),
    }
}

impl Gc {
    pub(super) fn run(&self, cli: &Cli) -> Result<u8, Error> {
        let store = cli.journal()?;
        let retention = match self.retention_hours {
            Some(hours) => Duration::from_secs(hours.saturating_mul(3600)),
            None => cli.retention(),
        };
        let retention = millis(retention);
        let report = store.gc(SystemClock.now_ms(), retention)?;
        println!(
            "removed {} expired invocation(s), {} effect(s), {} tool-call alias(es), {} delivered outbox message(s), {} mailbox row(s), \
             {} cancel(s) of calls that never came; every other completed call is kept until its own window ends",
            report.invocations,
            report.effects,
            report.aliases,
            report.outbox,
            report.mailbox,
            report.early_cancels
        );
        Ok(exit::SUCCESS)
    }
}
