//! `justonce key`: print the invocation key a call would run under; runs nothing.

use clap::Args;

use super::{Cli, exit};
use crate::call::CallRequest;
use crate::error::Error;

/// Print the invocation key of a call without running it.
#[derive(Debug, Args)]
pub struct Key {
    /// The tool's name.
    tool: String,
    /// The arguments, a JSON object.
    #[arg(long, value_name = "JSON")]
    args: String,
    /// The conversation.
    #[arg(long, value_name = "ID")]
    conversation: Option<String>,
}

impl Key {
    pub(super) fn run(&self, cli: &Cli) -> Result<u8, Error> {
        let host = cli.host().build()?;
        let mut request = CallRequest::new(&self.tool, self.args.clone());
        request.conversation = self.conversation.clone();
        println!("{}", host.key_for(&request)?);
        Ok(exit::SUCCESS)
    }
}
