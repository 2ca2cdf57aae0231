//! Test guest: the `diverge` tool after an upgrade that changed the mail it sends (and
//! sends none for the variant `none`). A call journaled by `diverge` and resumed by
//! this build diverges at effect #0.

use justonce_guest::{Tool, ToolError, effects, export_tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Deserialize, JsonSchema)]
struct Args {
    /// Chooses the mail sent at position 0.
    variant: String,
}

#[derive(Serialize)]
struct Mail {
    to: String,
    subject: String,
    body: String,
}

struct DivergeV2;

impl Tool for DivergeV2 {
    type Args = Args;
    /// The mail provider's response.
    type Output = Value;
    // The same name as `diverge`: a new build of the same tool.
    const NAME: &'static str = "diverge";
    const DESCRIPTION: &'static str = "Sends a mail that depends on the variant argument (v2).";

    fn call(args: Args) -> Result<Value, ToolError> {
        // Version 2 sends nothing for `none`, where version 1 sent a mail.
        if args.variant == "none" {
            return Ok(Value::Null);
        }
        let mail = Mail {
            to: format!("{}@example.com", args.variant),
            subject: format!("variant {} (v2)", args.variant),
            body: format!("This mail was sent by variant {}, version 2.", args.variant),
        };
        Ok(effects::perform("mail", "send", &mail)?)
    }
}

export_tool!(DivergeV2);
