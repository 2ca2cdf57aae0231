//! `justonce tools`: list the loaded tools, and the components that were refused.

use clap::Args;
use serde_json::json;

use super::{Cli, exit, print_json};
use crate::error::Error;

/// List the loaded tools with description and argument schema, and the components
/// that were refused with the reason.
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
        // A refused component does not hide the others: it is listed with its reason
        // (on stderr next to JSON, so stdout stays one JSON value).
        for refused in runtime.refused() {
            let line = format!("refused {}\n  {}", refused.source.display(), refused.reason);
            if self.json {
                eprintln!("{line}");
            } else {
                println!("{line}");
            }
        }
        Ok(exit::SUCCESS)
    }
}
