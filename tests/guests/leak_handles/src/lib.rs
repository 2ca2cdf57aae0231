//! Test guest: asks the host for WASI handles (clock pollables) and never drops
//! them, to test that a tool leaking handles runs into a cap that is its own trap.

use justonce_guest::{Tool, ToolError, export_tool};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Deserialize, JsonSchema)]
struct Args {
    /// How many handles to take and keep.
    handles: u32,
}

struct LeakHandles;

impl Tool for LeakHandles {
    type Args = Args;
    type Output = u32;
    const NAME: &'static str = "leak_handles";
    const DESCRIPTION: &'static str = "Takes handles and never gives them back.";

    fn call(args: Args) -> Result<u32, ToolError> {
        for _ in 0..args.handles {
            let pollable = wasip2::clocks::monotonic_clock::subscribe_duration(u64::MAX);
            std::mem::forget(pollable);
        }
        Ok(args.handles)
    }
}

export_tool!(LeakHandles);
