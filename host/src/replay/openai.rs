//! OpenAI chat completions: an assistant message with `tool_calls[]`, each
//! `{id, type: "function", function: {name, arguments}}` where `arguments` is JSON
//! text; results are `role: "tool"` messages with `tool_call_id`.

use serde_json::{Value, json};

use super::{Format, RecordedCall, TranscriptError, field_str};
use crate::mcp::protocol::type_name;

/// Whether `message` looks like an OpenAI message or completion.
pub(super) fn detect(message: &Value) -> bool {
    message.get("tool_calls").is_some() || message.get("choices").is_some()
}

/// The tool calls of an assistant message, or of the first choice of a completion.
pub(super) fn calls(message: &Value) -> Result<Vec<RecordedCall>, TranscriptError> {
    let malformed = |detail: String| TranscriptError::Malformed {
        format: Format::OpenAi,
        detail,
    };
    let message = match message.get("choices") {
        Some(choices) => choices
            .get(0)
            .and_then(|c| c.get("message"))
            .ok_or_else(|| malformed("choices[0].message is missing".into()))?,
        None => message,
    };
    let tool_calls = match message.get("tool_calls") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(calls)) => calls,
        Some(other) => {
            return Err(malformed(format!(
                "tool_calls must be an array, not {}",
                type_name(other)
            )));
        }
    };
    tool_calls
        .iter()
        .enumerate()
        .map(|(i, call)| {
            let at = |field: &str| format!("tool_calls[{i}].{field}");
            let id = field_str(call, "id").map_err(|e| malformed(format!("{} {e}", at("id"))))?;
            let function = call
                .get("function")
                .ok_or_else(|| malformed(format!("{} is missing", at("function"))))?;
            let name = field_str(function, "name")
                .map_err(|e| malformed(format!("{} {e}", at("function.name"))))?;
            // Models emit arguments as JSON text; some recorders store it parsed.
            let arguments = match function.get("arguments") {
                Some(Value::String(text)) => Ok(text.clone()),
                Some(object @ Value::Object(_)) => Ok(object.to_string()),
                Some(other) => Err(format!(
                    "function.arguments must be a JSON string, not {}",
                    type_name(other)
                )),
                None => Err("function.arguments is missing".to_owned()),
            };
            Ok(RecordedCall {
                id,
                name,
                arguments,
            })
        })
        .collect()
}

/// One `role: "tool"` message per call, in the order of the calls.
pub(super) fn render(results: &[(&RecordedCall, Value)]) -> Value {
    Value::Array(
        results
            .iter()
            .map(|(call, content)| {
                json!({
                    "role": "tool",
                    "tool_call_id": call.id,
                    "content": content.to_string(),
                })
            })
            .collect(),
    )
}
