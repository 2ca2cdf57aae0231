//! Test guest: `test_tool_with_logging` of the MCP conformance suite's `tools-call-*` scenarios
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
    const NAME: &'static str = "test_tool_with_logging";
    const DESCRIPTION: &'static str = "Logs three lines at info while it runs.";

    fn call(_: Args) -> Result<Rich, ToolError> {
        justonce_guest::log::info("Tool execution started");
        justonce_guest::log::info("Tool processing data");
        justonce_guest::log::info("Tool execution completed");
        Ok(Content::text("Logged three lines.").into())
    }
}

export_tool!(Conformance);
