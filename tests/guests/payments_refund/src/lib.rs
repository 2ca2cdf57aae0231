//! Test guest: a refund as one effect on an in-process `payments` provider, which
//! tests register with fault injection (the example `refund` tool speaks HTTP).

use justonce_guest::effects::{self, EffectError};
use justonce_guest::{Tool, ToolError, export_tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Forwarded to the provider as the payload.
#[derive(Deserialize, Serialize, JsonSchema)]
struct Args {
    order_id: u64,
    amount_cents: u64,
}

struct PaymentsRefund;

impl Tool for PaymentsRefund {
    type Args = Args;
    /// The provider's answer.
    type Output = Value;
    const NAME: &'static str = "payments_refund";
    const DESCRIPTION: &'static str = "Refunds an order through the in-process payments provider.";

    fn call(args: Args) -> Result<Value, ToolError> {
        effects::perform("payments", "refund", &args).map_err(|e| match e {
            EffectError::Rejected(answer) => {
                ToolError::new("refund_rejected", "The payments provider refused.")
                    .with_details(answer)
            }
            other => other.into(),
        })
    }
}

export_tool!(PaymentsRefund);
