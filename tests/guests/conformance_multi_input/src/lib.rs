//! Test guest: `multi_input` of the MCP conformance suite's `tasks-mrtr-input`
//! scenario (tests/tests/mcp_conformance_next.rs): after a second (so its call is a
//! task), asks two questions at once, so two are pending together and its client
//! may answer them one at a time; then says what it was told.

use justonce_guest::{Content, Question, Rich, Tool, ToolError, ask_all, export_tool};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

/// No arguments.
#[derive(Deserialize, JsonSchema)]
struct Args {}

struct Conformance;

impl Tool for Conformance {
    type Args = Args;
    type Output = Rich;
    const NAME: &'static str = "multi_input";
    const DESCRIPTION: &'static str = "Asks for a name and a confirmation at once, then says both.";

    fn call(_: Args) -> Result<Rich, ToolError> {
        std::thread::sleep(std::time::Duration::from_secs(1));
        let name = Question::new(
            "name",
            "What name should it use?",
            json!({ "type": "object", "properties": { "name": { "type": "string" } } }),
        );
        let confirm = Question::new(
            "confirm",
            "Go ahead?",
            json!({ "type": "object", "properties": { "confirm": { "type": "boolean" } } }),
        );
        let answers = ask_all(&[name, confirm])?;
        let said: Vec<String> = answers
            .iter()
            .map(|a| match a.accepted() {
                true => a.content().to_string(),
                false => a.action().to_string(),
            })
            .collect();
        Ok(Content::text(format!("Told {}.", said.join(" and "))).into())
    }
}

export_tool!(Conformance);
