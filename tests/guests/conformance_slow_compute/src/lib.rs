//! Test guest: `slow_compute` of the MCP conformance suite's `tasks-*` scenarios
//! (tests/tests/mcp_conformance_next.rs, mcp_tasks.rs): sleeps `seconds`, then
//! answers, so a call that outlives the host's bound becomes a task.

use justonce_guest::{Content, Rich, Tool, ToolError, export_tool};
use schemars::JsonSchema;
use serde::Deserialize;

/// How long to compute.
#[derive(Deserialize, JsonSchema)]
struct Args {
    /// Seconds to sleep before answering.
    seconds: u32,
    /// A label, echoed in the answer (it also makes calls distinct).
    #[serde(default)]
    label: String,
}

struct Conformance;

impl Tool for Conformance {
    type Args = Args;
    type Output = Rich;
    const NAME: &'static str = "slow_compute";
    const DESCRIPTION: &'static str = "Sleeps SECONDS, then answers with LABEL.";

    fn call(args: Args) -> Result<Rich, ToolError> {
        std::thread::sleep(std::time::Duration::from_secs(args.seconds.into()));
        Ok(Content::text(format!("Computed {} after {} s.", args.label, args.seconds)).into())
    }
}

export_tool!(Conformance);
