//! Test guest: `test_tool_with_task` of the MCP conformance suite's
//! `tasks-mrtr-composition` scenario (tests/tests/mcp_conformance_next.rs), a tool
//! that must run as a task (`task_required`): it asks the user's name at once, so
//! the question is its call's (`input_required`) before the call is a task; the
//! call made again with the answer becomes the task, whose result greets the name.

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
    const NAME: &'static str = "test_tool_with_task";
    const DESCRIPTION: &'static str = "Asks the user's name, then greets them (as a task).";

    fn call(_: Args) -> Result<Rich, ToolError> {
        let question = Question::new(
            "user_name",
            "What is your name?",
            json!({
                "type": "object",
                "properties": { "name": { "type": "string" } },
                "required": ["name"],
            }),
        );
        let answer = ask_all(&[question])?.remove(0);
        let name = answer
            .get("name")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("whoever you are")
            .to_owned();
        Ok(Content::text(format!("Hello, {name}!")).into())
    }
}

export_tool!(Conformance);
