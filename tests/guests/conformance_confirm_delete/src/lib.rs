//! Test guest: `confirm_delete` of the MCP conformance suite's `tasks-mrtr-input`
//! and `tasks-dispatch-and-envelope` scenarios (tests/tests/mcp_conformance_next.rs):
//! looks the file up for a second (so its call outlives the server's bound and is a
//! task), then asks the user whether to delete it, and says what it did. It deletes
//! nothing: the question is what the scenarios test.

use justonce_guest::{Content, Question, Rich, Tool, ToolError, ask_all, export_tool};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

/// The file to delete.
#[derive(Deserialize, JsonSchema)]
struct Args {
    /// Its name.
    filename: String,
}

struct Conformance;

impl Tool for Conformance {
    type Args = Args;
    type Output = Rich;
    const NAME: &'static str = "confirm_delete";
    const DESCRIPTION: &'static str =
        "Asks the user whether to delete FILENAME, then says what it did.";

    fn call(args: Args) -> Result<Rich, ToolError> {
        std::thread::sleep(std::time::Duration::from_secs(1));
        let question = Question::new(
            "confirm",
            format!("Delete {}?", args.filename),
            json!({
                "type": "object",
                "properties": { "confirm": { "type": "boolean", "description": "Delete it" } },
                "required": ["confirm"],
            }),
        );
        let answer = ask_all(&[question])?.remove(0);
        let confirmed = answer.accepted() && answer.get("confirm") == Some(&json!(true));
        let said = if confirmed {
            format!("Deleted {}.", args.filename)
        } else {
            format!("Kept {}.", args.filename)
        };
        Ok(Content::text(said).into())
    }
}

export_tool!(Conformance);
