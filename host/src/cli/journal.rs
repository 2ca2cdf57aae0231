//! `justonce journal`: show invocations and their effects.

use clap::Args;

use super::{Cli, exit, print_json};
use crate::error::Error;
use crate::store::{Durability, Store};

/// Show invocations and their effects, with keys, states and attempts.
#[derive(Debug, Args)]
pub struct Journal {
    /// Only this conversation.
    #[arg(long, value_name = "ID")]
    conversation: Option<String>,
    /// At most this many invocations, newest first.
    #[arg(long, default_value_t = 50)]
    limit: u32,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

impl Journal {
    pub(super) fn run(&self, cli: &Cli) -> Result<u8, Error> {
        let store = Store::open(&cli.db, Durability::default())?;
        let entries = store.journal(self.conversation.as_deref(), self.limit)?;
        if self.json {
            print_json(&serde_json::to_value(&entries).unwrap_or_default());
            return Ok(exit::SUCCESS);
        }
        if entries.is_empty() {
            println!("(no invocations)");
        }
        for e in &entries {
            println!(
                "{}  {:<10} {}  conversation={}  runs={}{}",
                e.key,
                e.state,
                e.tool,
                e.scope,
                e.runs,
                if e.tool_call_ids.is_empty() {
                    String::new()
                } else {
                    format!("  call-ids={}", e.tool_call_ids.join(","))
                }
            );
            for f in &e.effects {
                println!(
                    "  #{} {}  {:<7} {}.{} ({})  attempts={}{}",
                    f.seq,
                    f.key,
                    f.state,
                    f.provider,
                    f.operation,
                    f.class,
                    f.attempts,
                    f.last_error
                        .as_deref()
                        .map(|e| format!("  last-error: {e}"))
                        .unwrap_or_default()
                );
            }
            if let Some(outcome) = &e.outcome {
                println!("  outcome: {outcome}");
            }
        }
        Ok(exit::SUCCESS)
    }
}
