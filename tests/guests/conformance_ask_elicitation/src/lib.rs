//! Test guest: `test_input_required_result_elicitation` of the MCP conformance suite's
//! `input-required-result-*` scenarios (tests/tests/mcp_conformance_next.rs): asks
//! the person behind the agent for their name (`user_name`), then greets them. Over
//! the stateless wire the first call answers `input_required`, and the same call
//! with the answer completes.

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
    const NAME: &'static str = "test_input_required_result_elicitation";
    const DESCRIPTION: &'static str = "Asks the user's name, then greets them.";

    fn call(_: Args) -> Result<Rich, ToolError> {
        let answer = common::ask_one("user_name", "What is your name?", "name", "string")?;
        Ok(
            Content::text(match answer.get("name").and_then(|n| n.as_str()) {
                Some(name) => format!("Hello, {name}!"),
                None => format!("No name given ({}).", answer.action()),
            })
            .into(),
        )
    }
}

export_tool!(Conformance);
