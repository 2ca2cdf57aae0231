//! Emails a receipt for each distinct order.

use justonce_guest::{Tool, ToolError, effects, export_tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The arguments of `send_receipt`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The orders to send receipts for. An entry repeated verbatim gets one receipt.
    #[schemars(length(min = 1, max = 50))]
    orders: Vec<Order>,
}

/// One paid order.
#[derive(Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
struct Order {
    /// The order's number.
    order_id: u64,
    /// Where to send the receipt.
    email: String,
    /// The amount paid, in cents.
    amount_cents: u64,
}

#[derive(Serialize)]
struct Mail<'a> {
    to: &'a str,
    subject: String,
    body: String,
}

#[derive(Deserialize)]
struct Sent {
    message_id: String,
}

#[derive(Serialize)]
struct Output {
    sent: Vec<Receipt>,
}

#[derive(Serialize)]
struct Receipt {
    order_id: u64,
    message_id: String,
}

struct SendReceipt;

impl Tool for SendReceipt {
    type Args = Args;
    type Output = Output;
    const NAME: &'static str = "send_receipt";
    const DESCRIPTION: &'static str = "Emails a receipt for each order in the list (1 to 50 orders). \
        Sending the same order again, in this call or a retry of it, does not send a second email.";

    fn call(args: Args) -> Result<Output, ToolError> {
        if !(1..=50).contains(&args.orders.len()) {
            return Err(ToolError::new(
                "invalid_arguments",
                "Pass between 1 and 50 orders.",
            ));
        }
        // An agent that lists an order twice in one call means it once.
        let mut orders: Vec<&Order> = Vec::with_capacity(args.orders.len());
        for order in &args.orders {
            if !orders.contains(&order) {
                orders.push(order);
            }
        }
        let mut sent = Vec::with_capacity(orders.len());
        for order in orders {
            let mail = Mail {
                to: &order.email,
                subject: format!("Receipt for order {}", order.order_id),
                body: format!(
                    "Thank you for your order {}. Amount paid: {}.{:02}.",
                    order.order_id,
                    order.amount_cents / 100,
                    order.amount_cents % 100
                ),
            };
            let reply: Sent = effects::perform("mail", "send", &mail)?;
            sent.push(Receipt {
                order_id: order.order_id,
                message_id: reply.message_id,
            });
        }
        Ok(Output { sent })
    }
}

export_tool!(SendReceipt);
