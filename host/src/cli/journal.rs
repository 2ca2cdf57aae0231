//! `justonce journal`: show invocations and their effects.

use clap::Args;

use super::{Cli, exit, print_json};
use crate::call::principal_scope;
use crate::clock::{Clock, SystemClock};
use crate::error::Error;
use crate::journal::{self as journal_store, Durability};

/// What every scope of `principal`'s calls starts with: [`principal_scope`] is the
/// JSON array `[principal, conversation]`.
fn principal_prefix(principal: &str) -> String {
    let mut prefix = principal_scope(principal, "");
    // Drops the empty conversation and the bracket: `""]`.
    prefix.truncate(prefix.len() - r#"""]"#.len());
    prefix
}

/// `principal=P conversation=C` for a call made over HTTP, else `conversation=C`.
fn scope_text(scope: &str) -> String {
    match serde_json::from_str::<[String; 2]>(scope) {
        Ok([principal, conversation]) if scope.starts_with('[') => {
            format!("principal={principal}  conversation={conversation}")
        }
        _ => format!("conversation={scope}"),
    }
}

/// Show invocations and their effects, with keys, states and attempts.
#[derive(Debug, Args)]
pub struct Journal {
    /// Only this conversation.
    #[arg(long, value_name = "ID")]
    conversation: Option<String>,
    /// Only the calls of this principal (made over `serve --http` with its token).
    #[arg(long, value_name = "NAME")]
    principal: Option<String>,
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
        let entries = match (&self.principal, &self.conversation) {
            (None, conversation) => store.entries(conversation.as_deref(), self.limit)?,
            (Some(principal), Some(conversation)) => {
                store.entries(Some(&principal_scope(principal, conversation)), self.limit)?
            }
            (Some(principal), None) => {
                store.entries_by_prefix(&principal_prefix(principal), self.limit)?
            }
        };
        if self.json {
            print_json(&serde_json::to_value(&entries).unwrap_or_default());
            return Ok(exit::SUCCESS);
        }
        if entries.is_empty() {
            println!("(no invocations)");
        }
        for e in &entries {
            println!(
                "{}  {:<10} {}  {}  runs={}{}",
                e.key,
                e.state,
                e.tool,
                scope_text(&e.scope),
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
        if let Some(conversation) = &self.conversation {
            let scope = match &self.principal {
                Some(principal) => principal_scope(principal, conversation),
                None => conversation.clone(),
            };
            effects.retain(|e| e.scope == scope);
        } else if let Some(principal) = &self.principal {
            let prefix = principal_prefix(principal);
            effects.retain(|e| e.scope.starts_with(&prefix));
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
                "{}  #{} {}.{}  call {} ({}, {})  attempts={}{}",
                e.key,
                e.seq,
                e.provider,
                e.operation,
                e.invocation,
                e.tool,
                scope_text(&e.scope),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_principals_prefix_starts_its_scopes_and_no_other_principals() {
        let prefix = principal_prefix("alice");
        assert_eq!(prefix, r#"["alice","#);
        assert!(principal_scope("alice", "conv-1").starts_with(&prefix));
        assert!(!principal_scope("alice2", "conv-1").starts_with(&prefix));
        assert!(!principal_scope("bob", "alice").starts_with(&prefix));
        assert_eq!(
            scope_text(&principal_scope("alice", "c")),
            "principal=alice  conversation=c"
        );
        assert_eq!(scope_text("conv-9"), "conversation=conv-9");
    }
}
