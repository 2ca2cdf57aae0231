//! Test guest: the refund tool as it was before it spoke HTTP — one effect on an
//! in-process `payments` provider, which tests register with fault injection.

use justonce_guest::{Tool, ToolError, effects, effects::EffectError, export_tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The arguments of `refund`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The order to refund.
    order_id: u64,
    /// How much to refund, in cents.
    #[schemars(range(min = 1))]
    amount_cents: u64,
    /// The ISO 4217 currency code of the amount.
    #[serde(default = "default_currency")]
    currency: String,
    /// Why the order is refunded, for the payment provider's records.
    reason: Option<String>,
}

fn default_currency() -> String {
    "EUR".to_owned()
}

#[derive(Serialize)]
struct RefundRequest<'a> {
    order_id: u64,
    amount_cents: u64,
    currency: &'a str,
    reason: Option<&'a str>,
}

#[derive(Deserialize)]
struct RefundReply {
    refund_id: String,
    status: String,
}

#[derive(Serialize)]
struct Output {
    order_id: u64,
    refund_id: String,
    status: String,
}

struct Refund;

impl Tool for Refund {
    type Args = Args;
    type Output = Output;
    const NAME: &'static str = "payments_refund";
    const DESCRIPTION: &'static str = "Refunds an order through the in-process payments provider.";

    fn call(args: Args) -> Result<Output, ToolError> {
        if args.amount_cents == 0 {
            return Err(ToolError::new(
                "invalid_arguments",
                "amount_cents must be at least 1.",
            ));
        }
        let request = RefundRequest {
            order_id: args.order_id,
            amount_cents: args.amount_cents,
            currency: &args.currency,
            reason: args.reason.as_deref(),
        };
        let reply: RefundReply =
            effects::perform("payments", "refund", &request).map_err(|e| match e {
                EffectError::Rejected(answer) => ToolError::new(
                    "refund_rejected",
                    "The payment provider refused the refund.",
                )
                .with_details(answer),
                other => other.into(),
            })?;
        Ok(Output {
            order_id: args.order_id,
            refund_id: reply.refund_id,
            status: reply.status,
        })
    }
}

export_tool!(Refund);
