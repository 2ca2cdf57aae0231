//! `justonce deliver`: send the outbox's pending webhooks, each with its effect key
//! as the idempotency key, and record what happened.

use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use serde_json::json;

use super::{Cli, exit, print_json};
use crate::delivery::{Deliverer, DeliveryOutcome, DeliveryReport};
use crate::error::Error;
use crate::runtime::{Limits, Runtime};

/// Send the pending outbox messages that are due, print one JSON report per pass.
/// A failed send is retried by a later pass, under the same key, after a backoff.
#[derive(Debug, Args)]
pub struct Deliver {
    /// Keep delivering, one pass every `--interval-ms`, until interrupted.
    #[arg(long)]
    watch: bool,
    /// The pause between passes with `--watch`.
    #[arg(long, value_name = "MS", default_value_t = 1000, requires = "watch")]
    interval_ms: u64,
}

impl Deliver {
    pub(super) fn run(&self, cli: &Cli) -> Result<u8, Error> {
        // Delivery runs no tools: an empty runtime spares compiling them.
        let host = cli
            .host()
            .runtime(Arc::new(Runtime::new(Limits::default())?))
            .build()?;
        let deliverer = Deliverer::new(&host)?;
        loop {
            let report = deliverer.run_once()?;
            if !self.watch {
                print_json(&report_json(&report));
                return Ok(exit::SUCCESS);
            }
            if !report.attempts.is_empty() {
                print_json(&report_json(&report));
            }
            std::thread::sleep(Duration::from_millis(self.interval_ms));
        }
    }
}

fn report_json(report: &DeliveryReport) -> serde_json::Value {
    json!({
        "delivered": report.count(DeliveryOutcome::Delivered),
        "retrying": report.count(DeliveryOutcome::Retrying),
        "failed": report.count(DeliveryOutcome::Failed),
        "attempts": report.attempts,
    })
}
