//! The `tools/list` entries of upstream MCP servers' tools (`[upstreams.NAME]`): the
//! upstream's own entry, its schemas and annotations as it gave them, under the name
//! the host offers it by, with the window a repeat of its call is deduplicated in
//! (`_meta["dev.justonce/retention"]`) unless it runs every time (read-only); and
//! where each upstream stands, as an agent is told it.

use rmcp::model::Tool;
use serde_json::{Value, json};

use super::tools::RETENTION_META_KEY;
use crate::host::Host;
use crate::upstream::UpstreamState;

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

/// Where each upstream of `host` stands, as `tools/list` tells an agent
/// (`_meta["dev.justonce/upstreams"]`): `{"NAME": {"state": "starting"}}`, `ready`,
/// `failing` with its last `error` (stripped of its credentials) while it is
/// failing or started again after a failure, or `disabled` with the operator `by`; `null` without upstreams. What changes
/// every moment (a restart's count, its time) is left out, so the list changes
/// only when a state does.
pub(crate) fn states(host: &Host) -> Value {
    let states = host.upstream_states();
    if states.is_empty() {
        return Value::Null;
    }
    let told = states
        .into_iter()
        .map(|(name, state)| {
            let told = match state {
                UpstreamState::Ready => json!({ "state": "ready" }),
                UpstreamState::Starting {
                    last_error: None, ..
                } => json!({ "state": "starting" }),
                UpstreamState::Starting {
                    last_error: Some(error),
                    ..
                }
                | UpstreamState::Failing { error, .. } => {
                    json!({ "state": "failing", "error": error })
                }
                UpstreamState::Disabled { by } => json!({ "state": "disabled", "by": by }),
            };
            (name, told)
        })
        .collect();
    Value::Object(told)
}
