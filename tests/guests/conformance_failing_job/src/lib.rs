//! Test guest: `failing_job` of the MCP conformance suite's `tasks-*` scenarios
//! (tests/tests/mcp_conformance_next.rs): fails with a tool error after a second;
//! the server is configured to run it as a task only (`[mcp] task_required`).

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
    const NAME: &'static str = "failing_job";
    const DESCRIPTION: &'static str = "Fails with a tool error after a second.";

    fn call(_: Args) -> Result<Rich, ToolError> {
        std::thread::sleep(std::time::Duration::from_secs(1));
        Err(ToolError::new(
            "job_failed",
            "the job failed, as it always does",
        ))
    }
}

export_tool!(Conformance);
