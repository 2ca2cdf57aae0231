//! Queues a webhook about an event through the outbox. The message is written in the
//! same transaction as its journal record, so a retried call queues nothing new, and
//! `justonce deliver` sends it with its effect key as the `Idempotency-Key`.

use justonce_guest::http::Request;
use justonce_guest::{Tool, ToolError, export_tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The arguments of `notify`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// What happened, such as `refund.issued`.
    #[schemars(length(min = 1, max = 100))]
    event: String,
    /// Details of the event for the receiver.
    #[serde(default)]
    data: serde_json::Map<String, serde_json::Value>,
}

#[derive(Serialize)]
struct Webhook<'a> {
    event: &'a str,
    data: &'a serde_json::Map<String, serde_json::Value>,
}

#[derive(Serialize)]
struct Output {
    message_id: i64,
    state: String,
}

struct Notify;

impl Tool for Notify {
    type Args = Args;
    type Output = Output;
    const NAME: &'static str = "notify";
    const DESCRIPTION: &'static str = "Sends a webhook about an event to the configured receiver. \
        It is queued and delivered once, however often the same call is retried.";

    fn call(args: Args) -> Result<Output, ToolError> {
        if args.event.is_empty() || args.event.len() > 100 {
            return Err(ToolError::new(
                "invalid_arguments",
                "event must be 1 to 100 characters.",
            ));
        }
        let webhook = Webhook {
            event: &args.event,
            data: &args.data,
        };
        let queued = Request::post_to("webhooks", "/events")
            .json(&webhook)
            .enqueue()?;
        Ok(Output {
            message_id: queued.message_id,
            state: queued.state,
        })
    }
}

export_tool!(Notify);
