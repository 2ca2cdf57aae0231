//! Test guest: `test_error_handling` of the MCP conformance suite's `tools-call-*` scenarios
//! (tests/tests/mcp_conformance.rs), written with the SDK like any tool.

use justonce_guest::{Rich, Tool, ToolError, export_tool};
use schemars::JsonSchema;
use serde::Deserialize;

/// No arguments.
#[derive(Deserialize, JsonSchema)]
struct Args {}

struct Conformance;

impl Tool for Conformance {
    type Args = Args;
    type Output = Rich;
    const NAME: &'static str = "test_error_handling";
    const DESCRIPTION: &'static str = "Always fails.";

    fn call(_: Args) -> Result<Rich, ToolError> {
        Err(ToolError::new(
            "intentional",
            "This tool intentionally returns an error for testing",
        ))
    }
}

export_tool!(Conformance);
