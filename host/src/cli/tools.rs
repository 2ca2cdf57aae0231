//! `justonce tools`: list the loaded tools, and the components that were refused.

use clap::Args;
use serde_json::json;

use super::{Cli, exit, print_json};
use crate::error::Error;

/// List the loaded tools with description and argument schema.
#[derive(Debug, Args)]
pub struct Tools {
    /// Print a JSON array of `{name, description, inputSchema}`.
    #[arg(long)]
    json: bool,
}

impl Tools {
    pub(super) fn run(&self, cli: &Cli) -> Result<u8, Error> {
        let host = cli.host().build()?;
        let runtime = host.runtime();
        if self.json {
            let tools: Vec<_> = runtime
                .tools()
                .map(|t| {
                    json!({
                        "name": t.name,
                        "description": t.description,
                        "inputSchema": t.input_schema,
                    })
                })
                .collect();
            print_json(&serde_json::Value::Array(tools));
        } else {
            for tool in runtime.tools() {
                println!("{}\n  {}", tool.name, tool.description);
                let schema = serde_json::to_string_pretty(&tool.input_schema).unwrap_or_default();
                for line in schema.lines() {
                    println!("    {line}");
                }
            }
        }
        for refused in runtime.refused() {
            eprintln!("refused {}: {}", refused.source.display(), refused.reason);
        }
        Ok(exit::SUCCESS)
    }
}
