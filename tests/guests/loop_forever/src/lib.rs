//! Test guest: never returns, to test the deadline.

use justonce_guest::{Tool, ToolError, export_tool};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Deserialize, JsonSchema)]
struct Args {}

struct LoopForever;

impl Tool for LoopForever {
    type Args = Args;
    type Output = ();
    const NAME: &'static str = "loop_forever";
    const DESCRIPTION: &'static str = "Spins forever.";

    fn call(_: Args) -> Result<(), ToolError> {
        let mut i = 0u64;
        loop {
            i = std::hint::black_box(i.wrapping_add(1));
        }
    }
}

export_tool!(LoopForever);
