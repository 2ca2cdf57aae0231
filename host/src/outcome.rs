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

    pub(crate) fn from_stored(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }
}
