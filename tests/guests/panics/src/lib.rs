//! Test guest: panics at once, to test that a panic is a saved `panic` trap.

use justonce_guest::{Tool, ToolError, export_tool};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Deserialize, JsonSchema)]
struct Args {}

struct Panics;

impl Tool for Panics {
    type Args = Args;
    type Output = ();
    const NAME: &'static str = "panics";
    const DESCRIPTION: &'static str = "Panics.";

    fn call(_: Args) -> Result<(), ToolError> {
        panic!("panics: deliberate panic");
    }
}

export_tool!(Panics);
