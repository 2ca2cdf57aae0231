//! `justonce token`: the bearer tokens of `serve --http`, each naming a principal.

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, Subcommand};

use super::{Cli, exit, print_json};
use crate::auth::tokens::{self, Role, TokenError};
use crate::error::Error;
use crate::journal::Journal;
use crate::journal::postgres::is_postgres_url;

/// Issue, list and revoke the bearer tokens of `serve --http`.
///
/// The file keeps only each token's SHA-256; `add` shows the token once. On a
/// PostgreSQL journal the journal keeps them for every host, so one `revoke` is seen
/// by all of them at their next request; `import` brings a tokens file's over once.
#[derive(Debug, Args)]
pub struct Token {
    /// The tokens file [default: the configuration's `tokens_file`, else tokens.json
    /// next to the database].
    #[arg(long, global = true, value_name = "FILE")]
    tokens: Option<PathBuf>,
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, Subcommand)]
enum Action {
    /// Issue a token for principal NAME and print it (the only time it is shown).
    Add {
        /// The principal: 1 to 64 of A-Z a-z 0-9 . _ -
        name: String,
        /// What its holder may do: `agent` calls tools over MCP, `viewer` reads the
        /// console, `operator` reads it and resolves, forgets and abandons calls.
        #[arg(long, value_name = "ROLE", default_value = "agent")]
        role: Role,
    },
    /// List the principals that have a token.
    List {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Revoke the token of principal NAME; a running server refuses it at once
    /// (on PostgreSQL: every host of the journal).
    Revoke {
        /// The principal.
        name: String,
    },
    /// PostgreSQL: add the tokens of the tokens file (--tokens, else the default) to
    /// the journal's, as they are (their holders keep using them); a name the
    /// journal has already keeps the journal's token.
    Import,
}

impl Token {
    pub(super) fn run(&self, cli: &Cli) -> Result<u8, Error> {
        let path = cli.tokens_file(self.tokens.as_ref());
        // A PostgreSQL journal keeps the tokens once `import` ran on it; until then
        // its hosts read their files, and so do these commands (but `import`).
        if is_postgres_url(&cli.db.to_string_lossy()) {
            let journal = cli.journal()?;
            if matches!(self.action, Action::Import) || journal_keeps_tokens(cli, &journal)? {
                return self.in_journal(cli, &journal, &path);
            }
        }
        let failed = |e: TokenError| Error::Config {
            path: path.clone(),
            reason: e.to_string(),
        };
        match &self.action {
            Action::Add { name, role } => {
                let token = tokens::add_with_role(&path, name, *role).map_err(failed)?;
                println!("{token}");
                eprintln!(
                    "{role} token for {name} (shown once; {} keeps only its SHA-256)",
                    path.display()
                );
            }
            Action::List { json } => {
                let list = tokens::list(&path).map_err(failed)?;
                print_list(&list, *json, &path.display().to_string());
            }
            Action::Revoke { name } => {
                tokens::revoke(&path, name).map_err(failed)?;
                eprintln!("revoked the token of {name}");
            }
            Action::Import => {
                return Err(failed(TokenError::Journal(
                    "import is for a PostgreSQL journal, which keeps the tokens for every host; \
                     a SQLite journal's hosts read this file itself"
                        .into(),
                )));
            }
        }
        Ok(exit::SUCCESS)
    }

    /// The same actions on the tokens a PostgreSQL journal keeps.
    fn in_journal(
        &self,
        cli: &Cli,
        journal: &Arc<dyn Journal>,
        file: &std::path::Path,
    ) -> Result<u8, Error> {
        let failed = |e: TokenError| Error::Config {
            path: cli.db.clone(),
            reason: e.to_string(),
        };
        let table = journal
            .tokens()
            .ok_or_else(|| failed(TokenError::Journal("this journal keeps no tokens".into())))?;
        match &self.action {
            Action::Add { name, role } => {
                let token = tokens::add_in(table, name, *role).map_err(failed)?;
                println!("{token}");
                eprintln!(
                    "{role} token for {name} (shown once; the journal keeps only its SHA-256, for every host)"
                );
            }
            Action::List { json } => {
                print_list(
                    &tokens::list_in(table).map_err(failed)?,
                    *json,
                    "the journal",
                );
            }
            Action::Revoke { name } => {
                tokens::revoke_in(table, name).map_err(failed)?;
                eprintln!("revoked the token of {name} on every host of the journal");
            }
            Action::Import => {
                let imported = tokens::import_into(table, file).map_err(|e| Error::Config {
                    path: file.to_owned(),
                    reason: e.to_string(),
                })?;
                println!(
                    "imported {} token(s) from {} into the journal: {}",
                    imported.added.len(),
                    file.display(),
                    imported.added.join(", ")
                );
                if !imported.kept.is_empty() {
                    println!(
                        "kept the journal's own token of {} (the file's entry was not imported)",
                        imported.kept.join(", ")
                    );
                }
            }
        }
        Ok(exit::SUCCESS)
    }
}

/// Prints `list` (the tokens of `source`) as text or JSON.
fn print_list(list: &[tokens::TokenRecord], json: bool, source: &str) {
    if json {
        print_json(&serde_json::to_value(list).unwrap_or_default());
    } else if list.is_empty() {
        println!("(no tokens in {source})");
    } else {
        for t in list {
            println!(
                "{}  role={}  sha256={}…  created {}",
                t.name,
                t.role,
                &t.sha256[..12],
                crate::clock::rfc3339(i64::try_from(t.created_at_ms).unwrap_or(i64::MAX))
            );
        }
    }
}

/// Whether `journal` (of `cli`) keeps the tokens of its hosts (`token import` ran
/// on it).
fn journal_keeps_tokens(cli: &Cli, journal: &Arc<dyn Journal>) -> Result<bool, Error> {
    let Some(table) = journal.tokens() else {
        return Ok(false);
    };
    table.keeps_tokens().map_err(|e| Error::Config {
        path: cli.db.clone(),
        reason: e.to_string(),
    })
}
