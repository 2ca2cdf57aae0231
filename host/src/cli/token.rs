//! `justonce token`: the bearer tokens of `serve --http`, each naming a principal.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::{Cli, exit, print_json};
use crate::auth::tokens::{self, Role, TokenError};
use crate::error::Error;

/// Issue, list and revoke the bearer tokens of `serve --http`.
///
/// The file keeps only each token's SHA-256; `add` shows the token once.
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
    /// Revoke the token of principal NAME; a running server refuses it at once.
    Revoke {
        /// The principal.
        name: String,
    },
}

impl Token {
    pub(super) fn run(&self, cli: &Cli) -> Result<u8, Error> {
        let path = cli.tokens_file(self.tokens.as_ref());
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
                if *json {
                    print_json(&serde_json::to_value(&list).unwrap_or_default());
                } else if list.is_empty() {
                    println!("(no tokens in {})", path.display());
                } else {
                    for t in &list {
                        println!(
                            "{}  role={}  sha256={}…  created {}",
                            t.name,
                            t.role,
                            &t.sha256[..12],
                            crate::clock::rfc3339(
                                i64::try_from(t.created_at_ms).unwrap_or(i64::MAX)
                            )
                        );
                    }
                }
            }
            Action::Revoke { name } => {
                tokens::revoke(&path, name).map_err(failed)?;
                eprintln!("revoked the token of {name}");
            }
        }
        Ok(exit::SUCCESS)
    }
}
