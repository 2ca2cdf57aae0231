//! Test guest: `protocol_error_job` of the MCP conformance suite's `tasks-*`
//! scenarios (tests/tests/mcp_conformance_next.rs): panics, a trap, which a task
//! reports as `failed` with an error (a tool error is `completed` with `isError`).

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
    const NAME: &'static str = "protocol_error_job";
    const DESCRIPTION: &'static str = "Panics after a second.";

    fn call(_: Args) -> Result<Rich, ToolError> {
        std::thread::sleep(std::time::Duration::from_secs(1));
        panic!("protocol_error_job panics, as it always does")
    }
}

export_tool!(Conformance);
