//! Test guest: no effects; logs its message and echoes it back.

use justonce_guest::{Tool, ToolError, export_tool, log};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, JsonSchema)]
struct Args {
    /// Any text.
    message: String,
}

#[derive(Serialize)]
struct Output {
    echo: String,
}

struct Echo;

impl Tool for Echo {
    type Args = Args;
    type Output = Output;
    const NAME: &'static str = "echo";
    const DESCRIPTION: &'static str = "Returns its message.";

    fn call(args: Args) -> Result<Output, ToolError> {
        log::info(&args.message);
        Ok(Output { echo: args.message })
    }
}

export_tool!(Echo);
