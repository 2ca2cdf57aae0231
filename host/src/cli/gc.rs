//! `justonce gc`: delete records past their own windows.

use std::time::Duration;

use clap::Args;

use super::{Cli, exit};
use crate::clock::{Clock, SystemClock, millis};
use crate::error::Error;

/// Delete expired records and say how many. Each record is kept for the window it
/// was journaled with (its conversation's, the unscoped one, or its tool's own), never
/// less.
#[derive(Debug, Args)]
pub struct Gc {
    /// How long records journaled before records carried their own window, and
    /// delivered outbox messages, are kept, in hours [default: the configuration's
    /// `retention_hours`, else 24].
    #[arg(long)]
    retention_hours: Option<u64>,
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
            "removed {} expired invocation(s), {} effect(s), {} tool-call alias(es), {} delivered outbox message(s), {} mailbox row(s)",
            report.invocations, report.effects, report.aliases, report.outbox, report.mailbox
        );
        Ok(exit::SUCCESS)
    }
}
