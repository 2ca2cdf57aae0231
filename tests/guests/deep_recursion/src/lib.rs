//! Test guest: recurses without bound, to test stack exhaustion.

use std::hint::black_box;

use justonce_guest::{Tool, ToolError, export_tool};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Deserialize, JsonSchema)]
struct Args {}

/// Not a tail call, and `black_box` keeps the optimiser from turning it into a loop.
fn recurse(depth: u64) -> u64 {
    let frame = black_box([depth; 8]);
    if black_box(depth) == u64::MAX {
        return 0;
    }
    recurse(black_box(depth + 1)).wrapping_add(frame[7])
}

struct DeepRecursion;

impl Tool for DeepRecursion {
    type Args = Args;
    type Output = u64;
    const NAME: &'static str = "deep_recursion";
    const DESCRIPTION: &'static str = "Recurses until the stack runs out.";

    fn call(_: Args) -> Result<u64, ToolError> {
        Ok(recurse(0))
    }
}

export_tool!(DeepRecursion);
