//! Test guest: `test_streaming_elicitation`, the diagnostic tool of the MCP
//! conformance suite's `server-stateless` scenario (tests/tests/mcp_conformance_next.rs):
//! a tool that asks while it runs. On the stateless wire its question is never a
//! request of the server's on the response stream, only the call's
//! `input_required` result.

use justonce_guest::{Content, Rich, Tool, ToolError, export_tool};
use schemars::JsonSchema;
use serde::Deserialize;

#[path = "../../conformance_ask_common.rs"]
mod common;

/// No arguments.
#[derive(Deserialize, JsonSchema)]
struct Args {}

struct Conformance;

impl Tool for Conformance {
    type Args = Args;
    type Output = Rich;
    const NAME: &'static str = "test_streaming_elicitation";
    const DESCRIPTION: &'static str = "Asks the user a question while it runs.";

    fn call(_: Args) -> Result<Rich, ToolError> {
        let answer = common::ask_one("confirm", "Go on?", "ok", "boolean")?;
        Ok(Content::text(format!("Answered: {}.", answer.action())).into())
    }
}

export_tool!(Conformance);
