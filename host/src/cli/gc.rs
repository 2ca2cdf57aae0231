//! `justonce gc`: delete records older than the retention window.

use std::time::Duration;

use clap::Args;

use super::{Cli, exit};
use crate::clock::{Clock, SystemClock, millis};
use crate::error::Error;
use crate::store::{Durability, Store};

/// Delete expired records and say how many.
#[derive(Debug, Args)]
pub struct Gc {
    /// How long records are kept, in hours.
    #[arg(long, default_value_t = 24)]
    retention_hours: u64,
}

impl Gc {
    pub(super) fn run(&self, cli: &Cli) -> Result<u8, Error> {
        let store = Store::open(&cli.db, Durability::default())?;
        let retention = millis(Duration::from_secs(self.retention_hours * 3600));
        let report = store.gc(SystemClock.now_ms(), retention)?;
        println!(
            "removed {} expired invocation(s), {} effect(s), {} tool-call alias(es)",
            report.invocations, report.effects, report.aliases
        );
        Ok(exit::SUCCESS)
    }
}
