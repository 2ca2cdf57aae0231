//! Test guest: implements the `tool` world on the raw bindings, without the SDK's
//! typed `Tool` trait, so that it can return text that is not JSON.

use justonce_guest::__bindings::{Guest, ToolError, ToolInfo};

struct RawOutput;

impl Guest for RawOutput {
    fn describe() -> ToolInfo {
        let schema = serde_json::json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": { "output": { "type": "string" } },
            "required": ["output"]
        });
        ToolInfo {
            name: "raw_output".into(),
            description: "Returns its `output` argument verbatim as the result text.".into(),
            input_schema: schema.to_string(),
        }
    }

    fn call(args: String) -> Result<String, ToolError> {
        let args: serde_json::Value = serde_json::from_str(&args).map_err(|e| ToolError {
            code: "invalid_arguments".into(),
            message: e.to_string(),
            details: None,
        })?;
        Ok(args["output"].as_str().unwrap_or_default().to_owned())
    }
}

justonce_guest::__bindings::__justonce_export_world!(RawOutput with_types_in justonce_guest::__bindings);
