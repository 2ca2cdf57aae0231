//! Test guest: `test_embedded_resource` of the MCP conformance suite's `tools-call-*` scenarios
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
    const NAME: &'static str = "test_embedded_resource";
    const DESCRIPTION: &'static str = "Returns an embedded resource.";

    fn call(_: Args) -> Result<Rich, ToolError> {
        Ok(Content::resource_text(
            "test://embedded-resource",
            "text/plain",
            "This is an embedded resource content.",
        )
        .into())
    }
}

export_tool!(Conformance);
