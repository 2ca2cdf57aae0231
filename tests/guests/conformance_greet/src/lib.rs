//! Test guest: `greet` of the MCP conformance suite's `tasks-*` scenarios
//! (tests/tests/mcp_conformance_next.rs): a call that ends at once, so it is answered
//! with its result, never a task.

use justonce_guest::{Content, Rich, Tool, ToolError, export_tool};
use schemars::JsonSchema;
use serde::Deserialize;

/// Whom to greet.
#[derive(Deserialize, JsonSchema)]
struct Args {
    /// Their name.
    name: String,
}

struct Conformance;

impl Tool for Conformance {
    type Args = Args;
    type Output = Rich;
    const NAME: &'static str = "greet";
    const DESCRIPTION: &'static str = "Says hello to NAME.";

    fn call(args: Args) -> Result<Rich, ToolError> {
        Ok(Content::text(format!("Hello, {}!", args.name)).into())
    }
}

export_tool!(Conformance);
