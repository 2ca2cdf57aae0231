//! `justonce tools`: list the loaded tools, and the components that were refused.

use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use super::{Cli, exit, print_json};
use crate::error::Error;
use crate::runtime::{Runtime, portable_schema};

/// List the loaded tools with description, how long a repeat is deduplicated (in a
/// conversation, and without one) and argument schema (in the form model APIs
/// accept: references inlined, integer formats as ranges), and the components that
/// were refused with the reason.
#[derive(Debug, Args)]
pub struct Tools {
    /// Print a JSON array of `{name, description, inputSchema, readOnly, source,
    /// digest, retention}` (`source`: the file or `oci://` reference the component
    /// came from; `digest`: the component's `sha256:…`)
    /// (`retention`: `{conversation_seconds, unscoped_seconds}`, `null` for a
    /// read-only tool).
    #[arg(long)]
    json: bool,
    /// A component file to describe instead of the tools directory.
    #[arg(value_name = "COMPONENT")]
    component: Option<PathBuf>,
}

impl Tools {
    pub(super) fn run(&self, cli: &Cli) -> Result<u8, Error> {
        let builder = match &self.component {
            Some(path) => cli.host_without_tools().component(path),
            None => cli.host(),
        };
        let host = builder.build()?;
        let runtime = host.runtime();
        if self.json {
            let tools: Vec<_> = runtime
                .tools()
                .map(|t| {
                    json!({
                        "name": t.name,
                        "description": t.description,
                        "inputSchema": portable_schema(&t.input_schema),
                        "readOnly": t.read_only,
                        "source": t.source.display().to_string(),
                        "digest": t.digest,
                        "retention": (!t.read_only)
                            .then(|| host.retention().of_tool(&t.name).to_json()),
                    })
                })
                .collect();
            print_json(&serde_json::Value::Array(tools));
        } else {
            for tool in runtime.tools() {
                println!("{}\n  {}", tool.name, tool.description);
                println!("  component {} from {}", tool.digest, tool.source.display());
                if tool.read_only {
                    println!("  (read-only: every call runs, nothing is saved, an effect traps)");
                } else {
                    println!("  ({})", host.retention().of_tool(&tool.name).describe());
                }
                let schema = serde_json::to_string_pretty(&portable_schema(&tool.input_schema))
                    .unwrap_or_default();
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
        if runtime.tools().next().is_none() {
            eprintln!("justonce: {}", nothing_loaded(cli, runtime));
            return Ok(exit::BAD_INPUT);
        }
        Ok(exit::SUCCESS)
    }
}

/// Why no tool is listed, and what to do.
fn nothing_loaded(cli: &Cli, runtime: &Runtime) -> String {
    let dir = cli
        .tools
        .clone()
        .or_else(|| cli.settings.as_ref().and_then(|c| c.tools_dir.clone()));
    let place = dir.map_or_else(
        || "the tools directory".to_owned(),
        |d| d.display().to_string(),
    );
    if runtime.refused().is_empty() {
        format!(
            "no tools: {place} holds no .wasm component. Build one (`justonce new NAME`, then \
             `cargo build --release --target wasm32-wasip2` in it) and copy its .wasm here, \
             or point --tools at the directory that holds your components"
        )
    } else {
        format!("no tools: every component in {place} was refused (the reasons are above)")
    }
}
