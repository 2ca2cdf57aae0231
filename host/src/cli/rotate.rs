//! `justonce rotate-state-secret`: a new secret for the request states of tools that
//! ask.

use clap::Args;

use super::{Cli, exit};
use crate::ask::{ROTATED_SECRET_KEPT_MS, StateKeys};
use crate::clock::{Clock, SystemClock};
use crate::error::Error;

/// Rotate the journal's secret that keys request states (what a client brings back
/// with the answers to a tool's question). Every host of the journal makes new states
/// under the new secret at once; the states made under the one before are honoured
/// for 24 hours. Run it when a secret may have leaked (a copy of the journal left the
/// building), or on a schedule.
#[derive(Debug, Args)]
pub struct RotateStateSecret {}

impl RotateStateSecret {
    pub(super) fn run(&self, cli: &Cli) -> Result<u8, Error> {
        let journal = cli.journal()?;
        let secret = StateKeys::new_secret().map_err(|e| Error::Host(e.into()))?;
        journal.rotate_state_secret(SystemClock.now_ms(), &secret)?;
        println!(
            "rotated the request-state secret: new states are made under the new one; \
             states made before are honoured for {} hours",
            ROTATED_SECRET_KEPT_MS / 3_600_000
        );
        Ok(exit::SUCCESS)
    }
}
