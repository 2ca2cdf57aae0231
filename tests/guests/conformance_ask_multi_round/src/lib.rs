//! Test guest: `test_input_required_result_multi_round` of the MCP conformance
//! suite (tests/tests/mcp_conformance_next.rs): two questions one after the other
//! (`step1`, then `step2`), so over the stateless wire the call takes three rounds:
//! each answer is journaled, and the next round resumes past it to the next question.

use justonce_guest::{Answer, Content, Rich, Tool, ToolError, export_tool};
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
    const NAME: &'static str = "test_input_required_result_multi_round";
    const DESCRIPTION: &'static str =
        "Asks the user's name, then their favourite colour, one question at a time.";

    fn call(_: Args) -> Result<Rich, ToolError> {
        let name = text(
            common::ask_one("step1", "Step 1: What is your name?", "name", "string")?,
            "name",
        );
        let color = text(
            common::ask_one(
                "step2",
                "Step 2: What is your favorite color?",
                "color",
                "string",
            )?,
            "color",
        );
        Ok(Content::text(format!("{name}'s favorite color is {color}.")).into())
    }
}

/// The answer's text `field`, or what the person did instead.
fn text(answer: Answer, field: &str) -> String {
    match answer.get(field).and_then(|v| v.as_str()) {
        Some(text) => text.to_owned(),
        None => format!("({})", answer.action()),
    }
}

export_tool!(Conformance);
