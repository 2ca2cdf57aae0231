//! Test guest: one kv put effect per entry.

use justonce_guest::{Tool, ToolError, effects, export_tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Deserialize, JsonSchema)]
struct Args {
    /// Stored in order, one effect each.
    entries: Vec<Entry>,
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct Entry {
    key: String,
    value: Value,
}

struct KvPut;

impl Tool for KvPut {
    type Args = Args;
    /// The provider's response to each put, in order.
    type Output = Vec<Value>;
    const NAME: &'static str = "kv_put";
    const DESCRIPTION: &'static str = "Stores each entry in the key-value provider.";

    fn call(args: Args) -> Result<Vec<Value>, ToolError> {
        args.entries
            .iter()
            .map(|entry| effects::perform("kv", "put", entry).map_err(ToolError::from))
            .collect()
    }
}

export_tool!(KvPut);
