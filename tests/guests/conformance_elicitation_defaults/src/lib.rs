//! Test guest: `test_elicitation_sep1034_defaults` of the MCP conformance suite's
//! `elicitation-sep1034-defaults` scenario (tests/tests/mcp_conformance*.rs): asks
//! with a default for every primitive type.

use justonce_guest::{Content, Rich, Tool, ToolError, ask, export_tool};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

/// No arguments.
#[derive(Deserialize, JsonSchema)]
struct Args {}

struct Conformance;

impl Tool for Conformance {
    type Args = Args;
    type Output = Rich;
    const NAME: &'static str = "test_elicitation_sep1034_defaults";
    const DESCRIPTION: &'static str = "Asks the user, with a default for every field.";

    fn call(_: Args) -> Result<Rich, ToolError> {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": { "type": "string", "default": "John Doe" },
                "age": { "type": "integer", "default": 30 },
                "score": { "type": "number", "default": 95.5 },
                "status": {
                    "type": "string",
                    "enum": ["active", "inactive", "pending"],
                    "default": "active",
                },
                "verified": { "type": "boolean", "default": true },
            },
        });
        let answer = ask("Confirm your details.", &schema)?;
        Ok(Content::text(format!(
            "Elicitation completed: action={}, content={}",
            answer.action(),
            answer.content()
        ))
        .into())
    }
}

export_tool!(Conformance);
