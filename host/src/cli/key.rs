//! `justonce key`: print the invocation key a call would run under; runs nothing.

use clap::Args;

use super::{Cli, exit};
use crate::call::CallRequest;
use crate::error::Error;

/// Print the invocation key of a call without running it.
#[derive(Debug, Args)]
pub struct Key {
    /// The tool's name, or the path of a component (one that ends in `.wasm` or holds
    /// a `/`).
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
        let (host, tool) = super::target::host_for(cli, &self.tool)?;
        let mut request = CallRequest::new(tool, self.args.clone());
        request.conversation = self.conversation.clone();
        println!("{}", host.key_for(&request)?);
        Ok(exit::SUCCESS)
    }
}
