//! Refunds an order by posting to the payments API over HTTP. The host adds the
//! effect key as the `Idempotency-Key` header, so a retry after a lost response
//! is recognised by the API and refunds once.

use justonce_guest::http::Request;
use justonce_guest::{Tool, ToolError, export_tool};
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
    const NAME: &'static str = "refund";
    const DESCRIPTION: &'static str = "Refunds an amount of an order to the customer. \
        Retrying the same call returns the first refund instead of refunding twice.";

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
        // `payments` is a service the host's config names; the tool never knows
        // where the API lives, and the host allows this tool to reach only it.
        let response = Request::post_to("payments", "/v1/refunds")
            .json(&request)
            .send()?;
        if !response.is_success() {
            let body = serde_json::from_str(&response.body)
                .unwrap_or(serde_json::Value::String(response.body.clone()));
            return Err(ToolError::new(
                "refund_rejected",
                format!(
                    "The payments API refused the refund (status {}).",
                    response.status
                ),
            )
            .with_details(serde_json::json!({ "status": response.status, "body": body })));
        }
        let reply: RefundReply = response.json()?;
        Ok(Output {
            order_id: args.order_id,
            refund_id: reply.refund_id,
            status: reply.status,
        })
    }
}

export_tool!(Refund);
