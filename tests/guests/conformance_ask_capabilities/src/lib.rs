//! Test guest: `test_input_required_result_capabilities` of the MCP conformance
//! suite (tests/tests/mcp_conformance_next.rs): asks the person behind the agent
//! for their name (elicitation, the only kind of question a tool asks). A client
//! that did not declare `elicitation` is not asked: its call is refused with
//! -32021 naming the capability, and nothing of the question is journaled.

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
    const NAME: &'static str = "test_input_required_result_capabilities";
    const DESCRIPTION: &'static str =
        "Asks the user for their name; a client that cannot be asked is told so.";

    fn call(_: Args) -> Result<Rich, ToolError> {
        let answer = common::ask_one("user_name", "What is your name?", "name", "string")?;
        Ok(Content::text(format!("Answered: {}.", answer.action())).into())
    }
}

export_tool!(Conformance);
