//! Test guest: asks the user "Refund N EUR to card …4242?" (a boolean `confirm`),
//! and on accept and confirm refunds through the in-process `payments` provider.
//! Returns what it did: the refund, or what the user answered instead.

use justonce_guest::effects;
use justonce_guest::{Tool, ToolError, ask, export_tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Forwarded to the provider as the payload.
#[derive(Deserialize, Serialize, JsonSchema)]
struct Args {
    order_id: u64,
    /// Whole euros.
    amount_eur: u64,
}

/// The answer's content the question asks for.
#[derive(Deserialize)]
struct Confirm {
    confirm: bool,
}

struct AsksRefund;

impl Tool for AsksRefund {
    type Args = Args;
    type Output = Value;
    const NAME: &'static str = "asks_refund";
    const DESCRIPTION: &'static str =
        "Asks the user to confirm, then refunds an order through the in-process payments provider.";

    fn call(args: Args) -> Result<Value, ToolError> {
        let schema = json!({
            "type": "object",
            "properties": { "confirm": { "type": "boolean", "description": "Yes, refund it." } },
            "required": ["confirm"],
        });
        let message = format!("Refund {} EUR to card …4242?", args.amount_eur);
        let answer = ask(&message, &schema)?;
        match answer.parse::<Confirm>()? {
            Some(Confirm { confirm: true }) => {
                let refund: Value = effects::perform("payments", "refund", &args)?;
                Ok(json!({ "refunded": true, "refund": refund }))
            }
            _ => Ok(json!({
                "refunded": false,
                "user": answer.action().as_str(),
                "content": answer.content(),
            })),
        }
    }
}

export_tool!(AsksRefund);
