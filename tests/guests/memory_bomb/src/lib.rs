//! Test guest: allocates without bound, to test the memory cap.

use justonce_guest::{Tool, ToolError, export_tool};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Deserialize, JsonSchema)]
struct Args {}

struct MemoryBomb;

impl Tool for MemoryBomb {
    type Args = Args;
    type Output = ();
    const NAME: &'static str = "memory_bomb";
    const DESCRIPTION: &'static str = "Allocates memory until something stops it.";

    fn call(_: Args) -> Result<(), ToolError> {
        let mut chunks: Vec<Vec<u8>> = Vec::new();
        loop {
            // Touch every chunk so no allocator trick can leave the pages unclaimed.
            chunks.push(vec![1u8; 1 << 20]);
            std::hint::black_box(&mut chunks);
        }
    }
}

export_tool!(MemoryBomb);
