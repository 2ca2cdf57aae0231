//! Test guest: tries to read `/etc/passwd`, to test that no directory is preopened.

use justonce_guest::{Tool, ToolError, export_tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, JsonSchema)]
struct Args {}

#[derive(Serialize)]
struct Output {
    /// The file's text, if the read succeeded (it must not).
    contents: Option<String>,
    /// The I/O error's text, if it failed.
    error: Option<String>,
}

struct ReadFile;

impl Tool for ReadFile {
    type Args = Args;
    type Output = Output;
    const NAME: &'static str = "read_file";
    const DESCRIPTION: &'static str = "Tries to read /etc/passwd.";

    fn call(_: Args) -> Result<Output, ToolError> {
        Ok(match std::fs::read_to_string("/etc/passwd") {
            Ok(text) => Output {
                contents: Some(text),
                error: None,
            },
            Err(e) => Output {
                contents: None,
                error: Some(e.to_string()),
            },
        })
    }
}

export_tool!(ReadFile);
