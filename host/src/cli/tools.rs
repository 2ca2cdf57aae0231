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
    /// digest, policy, retention}`: `source` is the file or `oci://` reference the
    /// component came from, `digest` the component's `sha256:…`, `policy` the
    /// effective limits, HTTP allowlist and MCP exposure, `retention`
    /// `{conversation_seconds, unscoped_seconds}` (`null` for a read-only tool).
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
        let upstream = host.upstream_tools();
        if self.json {
            let mut tools: Vec<_> = runtime
                .tools()
                .map(|t| {
                    json!({
                        "name": t.name,
                        "description": t.description,
                        "inputSchema": portable_schema(&t.input_schema),
                        "outputSchema": t.output_schema.as_ref().map(portable_schema),
                        "readOnly": t.read_only,
                        "source": t.source.display().to_string(),
                        "digest": t.digest,
                        "policy": policy(&host, &t.name),
                        "retention": (!t.read_only)
                            .then(|| host.retention().of_tool(&t.name).to_json()),
                    })
                })
                .collect();
            tools.extend(upstream.iter().map(|t| {
                json!({
                    "name": t.name,
                    "description": t.entry.get("description"),
                    "inputSchema": portable_schema(&t.input_schema),
                    "outputSchema": t.entry.get("outputSchema").map(portable_schema),
                    "annotations": t.entry.get("annotations"),
                    "readOnly": t.read_only,
                    "upstream": t.upstream,
                    "upstreamName": t.upstream_name,
                    "keyed": t.keyed,
                    "retention": (!t.read_only)
                        .then(|| host.retention().of_tool(&t.name).to_json()),
                })
            }));
            print_json(&serde_json::Value::Array(tools));
        } else {
            for tool in runtime.tools() {
                println!("{}\n  {}", tool.name, tool.description);
                println!("  component {} from {}", tool.digest, tool.source.display());
                println!("  policy: {}", describe_policy(&policy(&host, &tool.name)));
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
            for tool in &upstream {
                let description = tool.entry.get("description").and_then(|d| d.as_str());
                println!("{}\n  {}", tool.name, description.unwrap_or(""));
                println!(
                    "  upstream MCP server `{}`, its tool `{}`",
                    tool.upstream, tool.upstream_name
                );
                if tool.read_only {
                    println!("  (read-only: every call runs, nothing is saved)");
                } else {
                    println!(
                        "  ({}; an unknown outcome {})",
                        host.retention().of_tool(&tool.name).describe(),
                        if tool.keyed {
                            "is sent again under the same key"
                        } else {
                            "waits for a person (`justonce resolve`)"
                        }
                    );
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
        if runtime.tools().next().is_none() && upstream.is_empty() {
            eprintln!("justonce: {}", nothing_loaded(cli, runtime));
            return Ok(exit::BAD_INPUT);
        }
        Ok(exit::SUCCESS)
    }
}

/// The effective policy of `tool`: its limits (`[tools.NAME]` over `[limits]`), the
/// origins it may reach over HTTP, and whether `serve` offers it over MCP.
fn policy(host: &crate::host::Host, tool: &str) -> serde_json::Value {
    let limits = host.limits().for_tool(tool);
    json!({
        "deadline_ms": limits.deadline.as_millis() as u64,
        "memory_mib": limits.memory_bytes >> 20,
        "fuel": limits.fuel,
        "max_effects": limits.max_effects,
        "max_args_bytes": limits.max_args_bytes,
        "max_payload_bytes": limits.max_payload_bytes,
        "max_result_bytes": limits.max_result_bytes,
        "max_output_bytes": limits.max_output_bytes,
        "allow": host.http_config().allow.get(tool).cloned().unwrap_or_default(),
        "mcp": host.exposed_over_mcp(tool),
    })
}

/// [`policy`] in one line.
fn describe_policy(policy: &serde_json::Value) -> String {
    let allow = policy["allow"].as_array().map_or(Vec::new(), |a| {
        a.iter()
            .filter_map(|o| o.as_str().map(str::to_owned))
            .collect()
    });
    format!(
        "deadline {} ms, memory {} MiB, fuel {}, at most {} effects; reaches {}; {}",
        policy["deadline_ms"],
        policy["memory_mib"],
        policy["fuel"]
            .as_u64()
            .map_or("unlimited".to_owned(), |f| f.to_string()),
        policy["max_effects"],
        if allow.is_empty() {
            "no HTTP origin".to_owned()
        } else {
            allow.join(", ")
        },
        if policy["mcp"] == true {
            "offered over MCP"
        } else {
            "not offered over MCP"
        },
    )
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
