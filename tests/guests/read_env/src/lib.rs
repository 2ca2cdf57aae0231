//! Test guest: returns its environment and arguments, to test that both are empty.

use justonce_guest::{Tool, ToolError, export_tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, JsonSchema)]
struct Args {}

#[derive(Serialize)]
struct Output {
    vars: Vec<(String, String)>,
    args: Vec<String>,
}

struct ReadEnv;

impl Tool for ReadEnv {
    type Args = Args;
    type Output = Output;
    const NAME: &'static str = "read_env";
    const DESCRIPTION: &'static str =
        "Returns the environment variables and the program arguments it sees.";

    fn call(_: Args) -> Result<Output, ToolError> {
        Ok(Output {
            vars: std::env::vars().collect(),
            args: std::env::args().collect(),
        })
    }
}

export_tool!(ReadEnv);
