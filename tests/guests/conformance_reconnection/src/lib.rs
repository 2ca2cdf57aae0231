//! Test guest: `test_reconnection` of the MCP conformance suite's `server-sse-polling`
//! scenario (tests/tests/mcp_conformance.rs). The tool itself is plain: the server
//! run with `--sse-hold-ms 0` ends the call's stream after its priming event, and
//! the suite fetches the answer with `Last-Event-ID`.

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
    const NAME: &'static str = "test_reconnection";
    const DESCRIPTION: &'static str =
        "Answers after its stream was closed, for a client that reconnects.";

    fn call(_: Args) -> Result<Rich, ToolError> {
        Ok(Content::text("Reconnected and received the answer.").into())
    }
}

export_tool!(Conformance);
