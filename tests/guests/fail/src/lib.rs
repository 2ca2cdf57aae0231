//! Test guest: always returns the tool error `always_fails`.

use justonce_guest::{Tool, ToolError, export_tool};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Deserialize, JsonSchema)]
struct Args {}

struct Fail;

impl Tool for Fail {
    type Args = Args;
    type Output = ();
    const NAME: &'static str = "fail";
    const DESCRIPTION: &'static str = "Always fails.";

    fn call(_: Args) -> Result<(), ToolError> {
        Err(ToolError::new("always_fails", "This tool always fails.")
            .with_details(serde_json::json!({ "deliberate": true })))
    }
}

export_tool!(Fail);
