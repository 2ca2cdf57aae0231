//! Test guest: `test_input_required_result_tampered_state` of the MCP conformance
//! suite (tests/tests/mcp_conformance_next.rs): asks the person behind the agent to
//! confirm (`confirm`); the host refuses an answer whose request state it did not
//! make (-32602), and the tool never sees it.

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
    const NAME: &'static str = "test_input_required_result_tampered_state";
    const DESCRIPTION: &'static str = "Asks the user to confirm; an answer that comes back with a request state the server did not give is refused.";

    fn call(_: Args) -> Result<Rich, ToolError> {
        let answer = common::ask_one("confirm", "Please confirm", "ok", "boolean")?;
        Ok(Content::text(format!("Confirmed: {}.", answer.action())).into())
    }
}

export_tool!(Conformance);
