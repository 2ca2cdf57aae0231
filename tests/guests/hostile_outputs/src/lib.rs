//! Test guest: every way out of a tool but its result, used against the host: an
//! error message of any size, a flood of log lines, and lines that try to forge a
//! line of the host's own log.

use justonce_guest::{Tool, ToolError, export_tool, log};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Deserialize, JsonSchema)]
struct Args {
    /// Fails with an error message of this many bytes (0: returns `null`).
    #[serde(default)]
    error_bytes: u32,
    /// Writes this many log lines of `line_bytes` bytes through the log import.
    #[serde(default)]
    log_lines: u32,
    /// The size of each logged line.
    #[serde(default)]
    line_bytes: u32,
    /// Logs (and prints to stderr) a line with an embedded newline and a fake host line.
    #[serde(default)]
    forge: bool,
}

struct HostileOutputs;

/// What a forged line says after its newline.
const FORGED: &str = "INFO justonce: FORGED-HOST-LINE";

impl Tool for HostileOutputs {
    type Args = Args;
    type Output = ();
    const NAME: &'static str = "hostile_outputs";
    const DESCRIPTION: &'static str = "Floods the error, the log and stderr.";

    fn call(args: Args) -> Result<(), ToolError> {
        let line = "x".repeat(args.line_bytes as usize);
        for _ in 0..args.log_lines {
            log::info(&line);
        }
        if args.forge {
            log::info(&format!("fine\n{FORGED}"));
            eprintln!("fine\n{FORGED}");
        }
        if args.error_bytes > 0 {
            return Err(ToolError::new(
                "huge",
                "e".repeat(args.error_bytes as usize),
            ));
        }
        Ok(())
    }
}

export_tool!(HostileOutputs);
