//! `justonce journal`: show invocations and their effects, or one call's whole story.
//!
//! Text and `--json` use the same field names (`conversation`, `tool_call_ids`,
//! `last_error`, …); times are RFC 3339 in UTC in both.

use clap::Args;

use super::{Cli, exit, print_json};
use crate::call::split_scope;
use crate::clock::{Clock, SystemClock, rfc3339};
use crate::error::Error;
use crate::journal::{
    self as journal_store, CallStory, JournalEffect, JournalEntry, JournalOperation, Selection,
};
use crate::keys::InvocationKey;

/// Show invocations and their effects, with keys, states and attempts; with a KEY,
/// that call's whole story.
#[derive(Debug, Args)]
pub struct Journal {
    /// One call's whole story: its arguments, every effect with the key sent
    /// downstream, attempts, answers, last errors and resolutions, its outcome, and
    /// what operators did to it (kept after `justonce forget`).
    #[arg(value_name = "KEY", conflicts_with_all = ["conversation", "unresolved"])]
    key: Option<String>,
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
    /// What needs someone: pending unkeyed effects that wait for a person
    /// (`justonce resolve`), and calls stuck on a keyed effect whose outcome is
    /// unknown (the next retry of the same call resumes them; `justonce abandon`
    /// closes one).
    #[arg(long)]
    unresolved: bool,
    /// Only calls in this state: running (a live lease), stopped (its host stopped,
    /// its lease ended), incomplete, awaiting (its tool asked the user; the same call
    /// made again with the answers resumes it), completed, replayed, unknown (an
    /// effect's outcome is unknown), failed, abandoned, expired (past its retention
    /// window, not yet collected by gc). Filters the newest --limit calls.
    #[arg(long, value_name = "STATE", value_parser = clap::builder::PossibleValuesParser::new(
        journal_store::CALL_STATES.iter().map(|(state, _)| *state)
    ))]
    state: Option<String>,
}

impl Journal {
    pub(super) fn run(&self, cli: &Cli) -> Result<u8, Error> {
        let key = self
            .key
            .as_deref()
            .map(|k| InvocationKey::parse(k).map_err(|e| Error::InvalidKey(e.to_string())))
            .transpose()?;
        let store = cli.journal()?;
        if self.unresolved {
            return self.unresolved(&*store, cli);
        }
        if let Some(key) = key {
            return self.story(&store.story(&key)?.judged_at(SystemClock.now_ms()));
        }
        let now = SystemClock.now_ms();
        let mut entries: Vec<JournalEntry> = self
            .selection()
            .entries(&*store, self.limit)?
            .into_iter()
            .map(|e| e.judged_at(now))
            .collect();
        if let Some(state) = &self.state {
            entries.retain(|e| e.states(now).contains(&state.as_str()));
        }
        if self.json {
            print_json(&serde_json::to_value(&entries).unwrap_or_default());
            return Ok(exit::SUCCESS);
        }
        if entries.is_empty() {
            println!("(no invocations)");
        }
        for e in &entries {
            print_entry(e, false);
        }
        if !entries.is_empty() {
            // How many were listed, and whether --limit cut the list short.
            let more = if entries.len() as u64 >= u64::from(self.limit) && self.state.is_none() {
                format!(" (the newest {}; --limit shows more)", self.limit)
            } else {
                String::new()
            };
            println!("{} call(s){more}", entries.len());
        }
        Ok(exit::SUCCESS)
    }

    fn selection(&self) -> Selection<'_> {
        Selection {
            principal: self.principal.as_deref(),
            conversation: self.conversation.as_deref(),
        }
    }

    fn story(&self, story: &CallStory) -> Result<u8, Error> {
        if self.json {
            print_json(&serde_json::to_value(story).unwrap_or_default());
            return Ok(exit::SUCCESS);
        }
        match &story.entry {
            Some(entry) => print_entry(entry, true),
            None => println!(
                "{}  (no record: never made, expired, or forgotten)",
                story.key
            ),
        }
        if !story.operations.is_empty() {
            println!("  operations:");
        }
        for o in &story.operations {
            print_operation(o);
        }
        Ok(exit::SUCCESS)
    }

    fn unresolved(&self, store: &dyn journal_store::Journal, cli: &Cli) -> Result<u8, Error> {
        let now = SystemClock.now_ms();
        let mut effects = self.selection().unresolved(store, now)?;
        for effect in effects.iter_mut().filter(|e| e.class == "unkeyed") {
            effect.pending = Some(crate::config::pending_of(cli.settings.as_ref(), effect));
        }
        let person = effects.iter().filter(|e| e.class == "unkeyed").count();
        if self.json {
            print_json(&serde_json::to_value(&effects).unwrap_or_default());
            return Ok(exit::SUCCESS);
        }
        if effects.is_empty() {
            println!("(no unresolved effects and no stuck calls)");
        }
        if person > 0 {
            println!("waiting for a person (unkeyed: the host will not send them again):");
        }
        for (i, e) in effects.iter().enumerate() {
            if i == person {
                println!(
                    "stuck with an unknown outcome (keyed: the next retry of the same call resumes it under the same key; `justonce abandon KEY` closes it):"
                );
            }
            println!(
                "{}  #{} {}.{}  invocation={}  tool={}  {}  attempts={}  updated_at={}{}{}",
                e.key,
                e.seq,
                e.provider,
                e.operation,
                e.invocation,
                e.tool,
                scope_fields(&e.conversation),
                e.attempts,
                rfc3339(e.updated_at),
                e.pending
                    .as_deref()
                    .map(|p| format!("  pending={p}"))
                    .unwrap_or_default(),
                e.last_error
                    .as_deref()
                    .map(|err| format!("  last_error={err}"))
                    .unwrap_or_default()
            );
        }
        if person > 0 {
            println!(
                "resolve each with: justonce resolve EFFECT_KEY --performed [--response JSON] | --not-performed"
            );
        }
        Ok(exit::SUCCESS)
    }
}

/// A recorded scope as the text's fields: `conversation=ID`, and `principal=NAME`
/// for a call made over `serve --http` (as in `--json` and the call's log line).
fn scope_fields(scope: &str) -> String {
    match split_scope(scope) {
        (Some(principal), conversation) => {
            format!("conversation={conversation}  principal={principal}")
        }
        (None, conversation) => format!("conversation={conversation}"),
    }
}

/// One invocation: a header line, its arguments, its effects, its outcome. `full`
/// adds every effect's answer (the story of one call).
fn print_entry(e: &JournalEntry, full: bool) {
    let mut head = format!(
        "{}  {:<10} {}  {}  runs={}  replays={}  created_at={}",
        e.key,
        e.states(e.judged).join(","),
        e.tool,
        scope_fields(&e.conversation),
        e.runs,
        e.replays,
        rfc3339(e.created_at)
    );
    if let Some(at) = e.completed_at {
        head.push_str(&format!("  completed_at={}", rfc3339(at)));
    }
    if let Some(at) = e.expires_at {
        head.push_str(&format!("  expires_at={}", rfc3339(at)));
    }
    if !e.tool_call_ids.is_empty() {
        head.push_str(&format!("  tool_call_ids={}", e.tool_call_ids.join(",")));
    }
    println!("{head}");
    if !e.holding.is_empty() {
        println!("  lease: {}", e.holding);
    }
    if let Some(arguments) = &e.arguments {
        println!("  arguments: {arguments}");
    }
    if let Some(component) = &e.component {
        println!("  component: {component}");
    }
    for f in &e.effects {
        print_effect(f, full);
    }
    if let Some(summary) = &e.summary {
        println!("  outcome: {summary}");
    }
}

fn print_effect(f: &JournalEffect, full: bool) {
    for line in effect_lines(f, full) {
        println!("{line}");
    }
}

/// The lines `justonce journal` prints for one effect.
fn effect_lines(f: &JournalEffect, full: bool) -> Vec<String> {
    let mut line = format!(
        "  #{} {}  {:<7} {}.{} ({})  attempts={}",
        f.seq, f.key, f.state, f.provider, f.operation, f.class, f.attempts
    );
    if let Some(r) = &f.resolution {
        line.push_str(&format!("  resolution={r}"));
    }
    if let Some(err) = &f.last_error {
        line.push_str(&format!("  last_error={err}"));
    }
    if full {
        line.push_str(&format!(
            "  created_at={}  updated_at={}",
            rfc3339(f.created_at),
            rfc3339(f.updated_at)
        ));
    }
    let mut lines = vec![line];
    if let Some(disagreement) = f.catalog_disagreement() {
        lines.push(format!("     class: {disagreement}"));
    }
    if full && let Some(response) = &f.response {
        lines.push(format!("     response: {response}"));
    }
    lines
}

fn print_operation(o: &JournalOperation) {
    println!(
        "    {}  {}  by={}  detail: {}",
        rfc3339(o.at),
        o.action.as_str(),
        o.by,
        o.detail
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 54: an effect whose catalog now disagrees with its record says so,
    /// and which one wins; one that agrees prints as before.
    #[test]
    fn an_effect_the_catalog_disagrees_with_says_so_under_its_line() {
        let lines = effect_lines(&JournalEffect::pending_unkeyed(Some("keyed")), false);
        assert_eq!(
            lines[1],
            "     class: journaled as unkeyed; the catalog now says keyed (idempotent); the record wins"
        );
        assert_eq!(
            effect_lines(&JournalEffect::pending_unkeyed(None), false).len(),
            1
        );
    }
}
