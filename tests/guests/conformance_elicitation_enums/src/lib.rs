//! Test guest: `test_elicitation_sep1330_enums` of the MCP conformance suite's
//! `elicitation-sep1330-enums` scenario (tests/tests/mcp_conformance*.rs): asks with
//! the five kinds of enum (untitled, titled, legacy `enumNames`, and two multi-selects).

use justonce_guest::{Content, Rich, Tool, ToolError, ask, export_tool};
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
    const NAME: &'static str = "test_elicitation_sep1330_enums";
    const DESCRIPTION: &'static str = "Asks the user to pick from five kinds of enum.";

    fn call(_: Args) -> Result<Rich, ToolError> {
        let titled = |values: [(&str, &str); 3]| {
            values
                .map(|(value, title)| json!({ "const": value, "title": title }))
                .to_vec()
        };
        let schema = json!({
            "type": "object",
            "properties": {
                "untitledSingle": { "type": "string", "enum": ["option1", "option2", "option3"] },
                "titledSingle": {
                    "type": "string",
                    "oneOf": titled([
                        ("value1", "First Option"),
                        ("value2", "Second Option"),
                        ("value3", "Third Option"),
                    ]),
                },
                "legacyEnum": {
                    "type": "string",
                    "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"],
                },
                "untitledMulti": {
                    "type": "array",
                    "items": { "type": "string", "enum": ["option1", "option2", "option3"] },
                },
                "titledMulti": {
                    "type": "array",
                    "items": {
                        "anyOf": titled([
                            ("value1", "First Choice"),
                            ("value2", "Second Choice"),
                            ("value3", "Third Choice"),
                        ]),
                    },
                },
            },
        });
        let answer = ask("Pick your options.", &schema)?;
        Ok(Content::text(format!(
            "Elicitation completed: action={}, content={}",
            answer.action(),
            answer.content()
        ))
        .into())
    }
}

export_tool!(Conformance);
