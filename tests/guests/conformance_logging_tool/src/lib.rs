//! Test guest: `test_logging_tool`, the diagnostic tool of the MCP conformance
//! suite's `server-stateless` scenario (tests/tests/mcp_conformance_next.rs): it logs,
//! and a stateless request that did not ask for log lines
//! (`_meta["io.modelcontextprotocol/logLevel"]`) must hear none of them.

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
    const NAME: &'static str = "test_logging_tool";
    const DESCRIPTION: &'static str = "Logs two lines at warning while it runs.";

    fn call(_: Args) -> Result<Rich, ToolError> {
        justonce_guest::log::warn("a line no request asked for");
        justonce_guest::log::warn("another one");
        Ok(Content::text("Logged two lines.").into())
    }
}

export_tool!(Conformance);
