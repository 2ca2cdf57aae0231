//! Test guest: the effect it asks for depends on its arguments, to test divergence detection.

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

struct Diverge;

impl Tool for Diverge {
    type Args = Args;
    /// The mail provider's response.
    type Output = Value;
    const NAME: &'static str = "diverge";
    const DESCRIPTION: &'static str = "Sends a mail that depends on the variant argument.";

    fn call(args: Args) -> Result<Value, ToolError> {
        let mail = Mail {
            to: format!("{}@example.com", args.variant),
            subject: format!("variant {}", args.variant),
            body: format!("This mail was sent by variant {}.", args.variant),
        };
        Ok(effects::perform("mail", "send", &mail)?)
    }
}

export_tool!(Diverge);
