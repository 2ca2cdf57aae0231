//! Test guest: `test_elicitation` of the MCP conformance suite's `tools-call-elicitation`
//! scenario (tests/tests/mcp_conformance*.rs): asks the user for a username and an
//! email, and says what came back.

use justonce_guest::{Content, Rich, Tool, ToolError, ask, export_tool};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize, JsonSchema)]
struct Args {
    /// The message to show the user.
    message: String,
}

struct Conformance;

impl Tool for Conformance {
    type Args = Args;
    type Output = Rich;
    const NAME: &'static str = "test_elicitation";
    const DESCRIPTION: &'static str = "Asks the user for a username and an email.";

    fn call(args: Args) -> Result<Rich, ToolError> {
        let schema = json!({
            "type": "object",
            "properties": {
                "username": { "type": "string", "description": "User's response" },
                "email": { "type": "string", "description": "User's email address" },
            },
            "required": ["username", "email"],
        });
        let answer = ask(&args.message, &schema)?;
        Ok(Content::text(format!(
            "User response: <action: {}, content: {}>",
            answer.action(),
            answer.content()
        ))
        .into())
    }
}

export_tool!(Conformance);
