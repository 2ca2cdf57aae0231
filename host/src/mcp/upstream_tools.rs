//! The `tools/list` entries of upstream MCP servers' tools (`[upstreams.NAME]`): the
//! upstream's own entry, its schemas and annotations as it gave them, under the name
//! the host offers it by, with the window a repeat of its call is deduplicated in
//! (`_meta["dev.justonce/retention"]`) unless it runs every time (read-only).

use rmcp::model::Tool;
use serde_json::{Value, json};

use super::tools::RETENTION_META_KEY;
use crate::host::Host;

/// The entries of every upstream tool `host` offers over MCP.
pub(crate) fn descriptors(host: &Host) -> Vec<Tool> {
    let retention = host.retention();
    host.upstream_tools()
        .into_iter()
        .filter(|tool| host.exposed_over_mcp(&tool.name))
        .filter(|tool| host.runtime().current(&tool.name).is_none())
        .filter_map(|tool| {
            let mut entry = tool.entry.clone();
            entry["name"] = Value::String(tool.name.clone());
            if !tool.read_only {
                let meta = entry
                    .as_object_mut()?
                    .entry("_meta")
                    .or_insert_with(|| json!({}));
                if let Some(meta) = meta.as_object_mut() {
                    meta.insert(
                        RETENTION_META_KEY.into(),
                        retention.of_tool(&tool.name).to_json(),
                    );
                }
            }
            match serde_json::from_value::<Tool>(entry) {
                Ok(listed) => Some(listed),
                Err(e) => {
                    tracing::warn!(upstream = %tool.upstream, tool = %tool.name, "left out of tools/list: its entry is not a valid MCP tool: {e}");
                    None
                }
            }
        })
        .collect()
}
