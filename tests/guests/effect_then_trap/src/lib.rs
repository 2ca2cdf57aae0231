//! Test guest: sends one mail, then panics.

use justonce_guest::{Tool, ToolError, effects, export_tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, JsonSchema)]
struct Args {
    /// The mail's recipient.
    to: String,
}

#[derive(Serialize)]
struct Mail<'a> {
    to: &'a str,
    subject: &'a str,
    body: &'a str,
}

#[derive(Deserialize)]
struct Sent {}

struct EffectThenTrap;

impl Tool for EffectThenTrap {
    type Args = Args;
    type Output = ();
    const NAME: &'static str = "effect_then_trap";
    const DESCRIPTION: &'static str = "Sends one mail, then traps.";

    fn call(args: Args) -> Result<(), ToolError> {
        let mail = Mail {
            to: &args.to,
            subject: "before the trap",
            body: "sent, then the tool panics",
        };
        let _: Sent = effects::perform("mail", "send", &mail)?;
        panic!("effect_then_trap: deliberate panic after the effect");
    }
}

export_tool!(EffectThenTrap);
