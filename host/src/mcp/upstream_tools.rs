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
            let mut entry = Value::clone(&tool.entry);
            entry["name"] = Value::String(tool.name.clone());
            if !tool.read_only {
                if let Some(schema) = entry.get_mut("outputSchema") {
                    *schema = admitting_records(schema.take());
                }
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

/// The `outputSchema` of an upstream write tool as the host lists it: the upstream's
/// own, or the answer the journal records for a call whose result was lost and whose
/// effect a probe, the person or an operator found performed
/// (`journal::operate::performed_without_answer`): that answer cannot be the
/// upstream's result, and a client that checks results against the schema (the
/// official SDKs do) would refuse it. The schema's `$defs` stay at its root, where
/// its references point.
fn admitting_records(schema: Value) -> Value {
    let Value::Object(mut own) = schema else {
        return schema;
    };
    let mut listed = serde_json::Map::new();
    listed.insert("type".into(), json!("object"));
    for defs in ["$defs", "definitions"] {
        if let Some(value) = own.remove(defs) {
            listed.insert(defs.into(), value);
        }
    }
    let record = json!({
        "type": "object",
        "description": "What the host recorded for a call whose result was lost: who found the effect performed, and a message saying so; the upstream's own result is not on record",
        "properties": {
            "performed": { "type": "boolean" },
            "decided_by": { "type": "string", "enum": ["probe", "person", "operator"] },
            "by": { "type": "string" },
            "message": { "type": "string" },
        },
        "required": ["performed", "decided_by", "message"],
    });
    listed.insert("anyOf".into(), json!([Value::Object(own), record]));
    Value::Object(listed)
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
                UpstreamState::Disabled { by, .. } => json!({ "state": "disabled", "by": by }),
            };
            (name, told)
        })
        .collect();
    Value::Object(told)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_tools_output_schema_also_admits_the_hosts_record_and_keeps_its_defs_at_the_root() {
        let own = json!({
            "type": "object",
            "properties": { "item": { "$ref": "#/$defs/item" } },
            "required": ["item"],
            "$defs": { "item": { "type": "string" } },
        });
        let listed = admitting_records(own);
        let validator = jsonschema::validator_for(&listed).unwrap();
        assert!(validator.is_valid(&json!({ "item": "x" })));
        assert!(
            !validator.is_valid(&json!({ "item": 3 })),
            "the refs still resolve"
        );
        let record =
            crate::journal::performed_without_answer(crate::journal::DecidedBy::Person, "alice");
        assert!(validator.is_valid(&record), "{listed}");
        assert!(!validator.is_valid(&json!({ "other": 1 })));
    }
}
