//! Test guest: performs kv puts until one fails, to test the per-invocation effect cap.

use justonce_guest::{Tool, ToolError, effects, export_tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, JsonSchema)]
struct Args {}

#[derive(Serialize)]
struct Output {
    /// How many puts succeeded before the first failure.
    succeeded: u64,
    /// The first failure's text, if any put failed.
    first_error: Option<String>,
}

const ATTEMPTS: u64 = 100_000;

struct EffectFlood;

impl Tool for EffectFlood {
    type Args = Args;
    type Output = Output;
    const NAME: &'static str = "effect_flood";
    const DESCRIPTION: &'static str =
        "Performs up to 100000 kv puts and reports where they stopped.";

    fn call(_: Args) -> Result<Output, ToolError> {
        for i in 0..ATTEMPTS {
            let payload = serde_json::json!({ "key": i.to_string(), "value": i });
            if let Err(e) = effects::perform_json("kv", "put", &payload) {
                return Ok(Output {
                    succeeded: i,
                    first_error: Some(e.to_string()),
                });
            }
        }
        Ok(Output {
            succeeded: ATTEMPTS,
            first_error: None,
        })
    }
}

export_tool!(EffectFlood);
