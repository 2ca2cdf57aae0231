//! Test guest: `test_tool_with_progress` of the MCP conformance suite's `tools-call-*`
//! scenarios (tests/tests/mcp_conformance.rs), written with the SDK like any tool;
//! tests/tests/mcp_progress.rs calls it too.

use justonce_guest::{Content, Rich, Tool, ToolError, export_tool, progress};
use schemars::JsonSchema;
use serde::Deserialize;

/// No arguments.
#[derive(Deserialize, JsonSchema)]
struct Args {}

struct Conformance;

impl Tool for Conformance {
    type Args = Args;
    type Output = Rich;
    const NAME: &'static str = "test_tool_with_progress";
    const DESCRIPTION: &'static str = "Reports progress 0, 50 and 100 of 100.";

    fn call(_: Args) -> Result<Rich, ToolError> {
        progress(0.0, Some(100.0), None);
        progress(50.0, Some(100.0), Some("halfway"));
        // Not larger than the last: the host drops it.
        progress(50.0, Some(100.0), Some("again"));
        progress(100.0, Some(100.0), None);
        Ok(Content::text("Reported progress.").into())
    }
}

export_tool!(Conformance);
