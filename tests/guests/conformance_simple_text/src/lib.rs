//! Test guest: `test_simple_text` of the MCP conformance suite's `tools-call-*` scenarios
//! (tests/tests/mcp_conformance.rs), written with the SDK like any tool.

use justonce_guest::{Content, Rich, Tool, ToolError, export_tool};
use schemars::JsonSchema;
use serde::Deserialize;

/// No arguments.
#[derive(Deserialize, JsonSchema)]
struct Args {}

struct Conformance;

impl Tool for Conformance {
    type Args = Args;
    type Output = Rich;
    const NAME: &'static str = "test_simple_text";
    const DESCRIPTION: &'static str = "Returns simple text.";

    fn call(_: Args) -> Result<Rich, ToolError> {
        Ok(Content::text("This is a simple text response for testing.").into())
    }
}

export_tool!(Conformance);
