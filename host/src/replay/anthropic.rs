//! Anthropic Messages: an assistant message whose `content[]` holds `tool_use`
//! blocks `{id, name, input}`; results are one user message of `tool_result` blocks
//! with `tool_use_id` and `is_error`.

use serde_json::{Value, json};

use super::{Format, RecordedCall, TranscriptError, field_str};
use crate::mcp::protocol::type_name;

/// Whether `message` looks like an Anthropic message.
pub(super) fn detect(message: &Value) -> bool {
    message.get("content").is_some_and(Value::is_array)
}

/// The `tool_use` blocks of the message.
pub(super) fn calls(message: &Value) -> Result<Vec<RecordedCall>, TranscriptError> {
    let malformed = |detail: String| TranscriptError::Malformed {
        format: Format::Anthropic,
        detail,
    };
    let blocks = match message.get("content") {
        Some(Value::Array(blocks)) => blocks,
        Some(other) => {
            return Err(malformed(format!(
                "content must be an array, not {}",
                type_name(other)
            )));
        }
        None => return Err(malformed("content is missing".into())),
    };
    blocks
        .iter()
        .enumerate()
        .filter(|(_, block)| block.get("type").and_then(Value::as_str) == Some("tool_use"))
        .map(|(i, block)| {
            let at = |field: &str| format!("content[{i}].{field}");
            let id = field_str(block, "id").map_err(|e| malformed(format!("{} {e}", at("id"))))?;
            let name =
                field_str(block, "name").map_err(|e| malformed(format!("{} {e}", at("name"))))?;
            let arguments = match block.get("input") {
                Some(input @ Value::Object(_)) => Ok(input.to_string()),
                Some(other) => Err(format!("input must be an object, not {}", type_name(other))),
                None => Err("input is missing".to_owned()),
            };
            Ok(RecordedCall {
                id,
                name,
                arguments,
            })
        })
        .collect()
}

/// One user message with a `tool_result` block per call, in the order of the calls.
pub(super) fn render(results: &[(&RecordedCall, Value)]) -> Value {
    let blocks: Vec<Value> = results
        .iter()
        .map(|(call, content)| {
            json!({
                "type": "tool_result",
                "tool_use_id": call.id,
                "content": content.to_string(),
                "is_error": content["ok"] != true,
            })
        })
        .collect();
    json!({ "role": "user", "content": blocks })
}
