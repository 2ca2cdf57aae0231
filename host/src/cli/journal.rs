//! `justonce journal`: show invocations and their effects.

use clap::Args;

use super::{Cli, exit, print_json};
use crate::clock::{Clock, SystemClock};
use crate::error::Error;
use crate::journal::{self as journal_store, Durability};

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
    /// Only pending unkeyed effects that wait for a person (`justonce resolve`).
    #[arg(long)]
    unresolved: bool,
}

impl Journal {
    pub(super) fn run(&self, cli: &Cli) -> Result<u8, Error> {
        let store = journal_store::open(&cli.db, Durability::default())?;
        if self.unresolved {
            return self.unresolved(&*store);
        }
        let entries = store.entries(self.conversation.as_deref(), self.limit)?;
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
                    "  #{} {}  {:<7} {}.{} ({})  attempts={}{}{}",
                    f.seq,
                    f.key,
                    f.state,
                    f.provider,
                    f.operation,
                    f.class,
                    f.attempts,
                    f.resolution
                        .as_deref()
                        .map(|r| format!("  resolved: {r}"))
                        .unwrap_or_default(),
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

    fn unresolved(&self, store: &dyn journal_store::Journal) -> Result<u8, Error> {
        let mut effects = store.unresolved(SystemClock.now_ms())?;
        if let Some(scope) = &self.conversation {
            effects.retain(|e| &e.scope == scope);
        }
        if self.json {
            print_json(&serde_json::to_value(&effects).unwrap_or_default());
            return Ok(exit::SUCCESS);
        }
        if effects.is_empty() {
            println!("(no unresolved effects)");
        }
        for e in &effects {
            println!(
                "{}  #{} {}.{}  call {} ({}, conversation={})  attempts={}{}",
                e.key,
                e.seq,
                e.provider,
                e.operation,
                e.invocation,
                e.tool,
                e.scope,
                e.attempts,
                e.last_error
                    .as_deref()
                    .map(|err| format!("  last-error: {err}"))
                    .unwrap_or_default()
            );
        }
        if !effects.is_empty() {
            println!(
                "resolve each with: justonce resolve EFFECT_KEY --performed [--response JSON] | --not-performed"
            );
        }
        Ok(exit::SUCCESS)
    }
}
