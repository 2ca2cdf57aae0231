//! Test guest: prints `lines` lines to stdout and to stderr, to test that output past
//! the cap is dropped instead of failing the guest, and never reaches the result.

use std::io::Write;

use justonce_guest::{Tool, ToolError, export_tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, JsonSchema)]
struct Args {
    /// How many lines to print to each stream.
    lines: u32,
}

#[derive(Serialize)]
struct Output {
    /// Bytes written to each stream.
    printed: u64,
}

const LINE: &str = "chatty: the quick brown fox jumps over the lazy dog\n";

struct Chatty;

impl Tool for Chatty {
    type Args = Args;
    type Output = Output;
    const NAME: &'static str = "chatty";
    const DESCRIPTION: &'static str = "Prints many lines to stdout and stderr.";

    fn call(args: Args) -> Result<Output, ToolError> {
        let (mut out, mut err) = (std::io::stdout(), std::io::stderr());
        for _ in 0..args.lines {
            // `write_all` + `expect`, as `println!` does: a failed write would panic.
            out.write_all(LINE.as_bytes())
                .expect("stdout accepts the write");
            err.write_all(LINE.as_bytes())
                .expect("stderr accepts the write");
        }
        out.flush().expect("stdout flushes");
        Ok(Output {
            printed: u64::from(args.lines) * LINE.len() as u64,
        })
    }
}

export_tool!(Chatty);
