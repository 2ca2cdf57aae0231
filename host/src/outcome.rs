//! The saved outcome of an invocation: what the agent is told, first time and on
//! every replay.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How a tool call ended. Saved once and replayed byte for byte.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    /// The tool returned a result.
    Success {
        /// The tool's result, JSON: with `content`, its structured result besides
        /// the parts (`null` for none).
        result: Value,
        /// The parts the tool returned (MCP content blocks: text, image, audio,
        /// resource link, embedded resource), in order; `None` for a plain JSON
        /// result, which is then the agent's text.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<Vec<Value>>,
    },
    /// The tool reported a failure of its own.
    ToolError {
        /// The tool's machine-readable code.
        code: String,
        /// The tool's message.
        message: String,
        /// Optional structured details.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        details: Option<Value>,
    },
    /// The guest trapped (a panic, a limit of the sandbox, invalid output).
    Trap {
        /// A short machine-readable reason, such as `panic` or `deadline_exceeded`.
        reason: String,
        /// What the runtime said.
        message: String,
    },
}

impl Outcome {
    /// Its kind in one word: `success`, `tool_error` or `trap`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Success { .. } => "success",
            Self::ToolError { .. } => "tool_error",
            Self::Trap { .. } => "trap",
        }
    }

    /// Whether the tool succeeded.
    pub fn is_success(&self) -> bool {
        matches!(self, Self::Success { .. })
    }

    /// The agent-facing JSON: `{"ok": true, "result": …}` (and `"content": […]`
    /// for a result with parts) or `{"ok": false, "error": {"kind": …, …}}`.
    pub fn to_agent_json(&self) -> Value {
        match self {
            Self::Success {
                result,
                content: None,
            } => serde_json::json!({ "ok": true, "result": result }),
            Self::Success {
                result,
                content: Some(content),
            } => serde_json::json!({ "ok": true, "result": result, "content": content }),
            Self::ToolError {
                code,
                message,
                details,
            } => {
                let mut error = serde_json::json!({
                    "kind": "tool_error",
                    "code": code,
                    "message": message,
                });
                if let Some(details) = details {
                    error["details"] = details.clone();
                }
                serde_json::json!({ "ok": false, "error": error })
            }
            Self::Trap { reason, message } => serde_json::json!({
                "ok": false,
                "error": { "kind": "trap", "code": reason, "message": message },
            }),
        }
    }

    pub(crate) fn to_stored(&self) -> String {
        serde_json::to_string(self).expect("an outcome always serializes")
    }

    /// Reads a saved outcome back. Every replay reads one, and serde reads an
    /// internally tagged enum by buffering the whole object first: the shapes
    /// [`to_stored`](Self::to_stored) writes are taken from the parsed value
    /// instead, and anything else is read the derived way (with its errors).
    pub(crate) fn from_stored(text: &str) -> Result<Self, serde_json::Error> {
        match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => match Self::from_stored_fields(map) {
                Some(outcome) => Ok(outcome),
                None => serde_json::from_str(text),
            },
            _ => serde_json::from_str(text),
        }
    }

    /// The outcome these fields of a saved one describe, if their shape is one
    /// `to_stored` writes.
    fn from_stored_fields(mut map: serde_json::Map<String, Value>) -> Option<Self> {
        let mut text = |name: &str| match map.remove(name) {
            Some(Value::String(s)) => Some(s),
            _ => None,
        };
        match text("status")?.as_str() {
            "success" => {
                let content = match map.remove("content") {
                    None | Some(Value::Null) => None,
                    Some(Value::Array(parts)) => Some(parts),
                    Some(_) => return None,
                };
                Some(Self::Success {
                    result: map.remove("result")?,
                    content,
                })
            }
            "tool_error" => {
                let (code, message) = (text("code")?, text("message")?);
                let details = map.remove("details").filter(|d| !d.is_null());
                Some(Self::ToolError {
                    code,
                    message,
                    details,
                })
            }
            "trap" => {
                let (reason, message) = (text("reason")?, text("message")?);
                Some(Self::Trap { reason, message })
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod stored_tests {
    use serde_json::json;

    use super::*;

    /// The fast reading of a saved outcome agrees with the derived one on every
    /// shape, and on what it refuses.
    #[test]
    fn a_saved_outcome_reads_back_as_the_derived_reader_reads_it() {
        let outcomes = [
            Outcome::Success {
                result: json!({"id": 1}),
                content: None,
            },
            Outcome::Success {
                result: Value::Null,
                content: Some(vec![json!({"type": "text"})]),
            },
            Outcome::ToolError {
                code: "c".into(),
                message: "m".into(),
                details: None,
            },
            Outcome::ToolError {
                code: "c".into(),
                message: "m".into(),
                details: Some(json!([1])),
            },
            Outcome::Trap {
                reason: "panic".into(),
                message: "boom".into(),
            },
        ];
        for outcome in outcomes {
            let stored = outcome.to_stored();
            assert_eq!(Outcome::from_stored(&stored).unwrap(), outcome, "{stored}");
        }
        for text in [
            r#"{"status":"success","result":1,"content":null,"extra":true}"#,
            r#"{"status":"tool_error","code":"c","message":"m","details":null}"#,
            r#"{"status":"success"}"#,
            r#"{"status":"success","result":1,"content":"no"}"#,
            r#"{"status":"trap","reason":"r"}"#,
            r#"{"status":"done","result":1}"#,
            r#"{"status":1}"#,
            "[]",
            "not json",
        ] {
            let derived = serde_json::from_str::<Outcome>(text).map_err(|e| e.to_string());
            let read = Outcome::from_stored(text).map_err(|e| e.to_string());
            assert_eq!(read, derived, "{text}");
        }
    }
}
