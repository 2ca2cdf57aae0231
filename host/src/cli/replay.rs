//! `justonce replay`: run the tool calls of a recorded assistant message and print
//! the results in the same provider's form.

use std::path::PathBuf;

use clap::Args;

use super::{Cli, exit, exit_code, print_json};
use crate::error::Error;
use crate::replay::{Format, Transcript};

/// Run the tool calls of a recorded OpenAI or Anthropic assistant message.
///
/// All calls run concurrently under one conversation; the tool results are printed
/// as that provider expects them. Exits with the highest exit code among the calls.
#[derive(Debug, Args)]
pub struct Replay {
    /// The recorded message (JSON); `-` reads stdin.
    file: PathBuf,
    /// The message's form (default: detected).
    #[arg(long, value_enum)]
    format: Option<Format>,
    /// The conversation the calls run in (default: "default").
    #[arg(long, value_name = "ID")]
    conversation: Option<String>,
    /// How many calls run at once.
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..))]
    max_concurrent_calls: u16,
}

impl Replay {
    pub(super) fn run(&self, cli: &Cli) -> Result<u8, Error> {
        let text = if self.file.as_os_str() == "-" {
            std::io::read_to_string(std::io::stdin())
        } else {
            std::fs::read_to_string(&self.file)
        };
        let text = match text {
            Ok(text) => text,
            Err(e) => {
                eprintln!("justonce: cannot read {}: {e}", self.file.display());
                return Ok(exit::BAD_INPUT);
            }
        };
        let transcript = match Transcript::parse(&text, self.format) {
            Ok(transcript) => transcript,
            Err(e) => {
                eprintln!("justonce: {}: {e}", self.file.display());
                return Ok(exit::BAD_INPUT);
            }
        };
        let host = cli.host().build()?;
        let results = transcript.dispatch(
            &host,
            self.conversation.as_deref(),
            usize::from(self.max_concurrent_calls),
        );
        print_json(&transcript.render(&results));
        let code = results
            .iter()
            .map(|result| match result {
                Ok(response) if response.outcome.is_success() => exit::SUCCESS,
                Ok(_) => exit::TOOL_ERROR,
                Err(error) => exit_code(error),
            })
            .max()
            .unwrap_or(exit::SUCCESS);
        Ok(code)
    }
}
