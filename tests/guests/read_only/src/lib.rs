//! Test guest: a tool marked read-only. It returns a fresh random number (so two
//! runs tell apart), and asks for a kv `put` effect when `write` is true, which the
//! host must stop with a trap.

use justonce_guest::{Tool, ToolError, effects, export_tool};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize, JsonSchema)]
struct Args {
    /// The account to look at.
    account: String,
    /// Ask for an effect, which a read-only tool may not.
    #[serde(default)]
    write: bool,
}

struct ReadOnly;

impl Tool for ReadOnly {
    type Args = Args;
    type Output = Value;
    const NAME: &'static str = "read_only";
    const DESCRIPTION: &'static str = "Looks up an account's balance; changes nothing.";
    const READ_ONLY: bool = true;

    fn call(args: Args) -> Result<Value, ToolError> {
        if args.write {
            let _: Value =
                effects::perform("kv", "put", &json!({ "key": args.account, "value": 1 }))?;
        }
        let nonce = getrandom::u64().map_err(|e| ToolError::new("no_randomness", e.to_string()))?;
        Ok(json!({ "account": args.account, "nonce": nonce }))
    }
}

export_tool!(ReadOnly);
