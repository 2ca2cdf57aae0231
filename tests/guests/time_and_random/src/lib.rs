//! Test guest: mails the clock and a random number, to test that both are journaled.

use std::time::{SystemTime, UNIX_EPOCH};

use justonce_guest::{Tool, ToolError, effects, export_tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, JsonSchema)]
struct Args {}

#[derive(Serialize)]
struct Mail {
    to: &'static str,
    subject: &'static str,
    body: String,
}

#[derive(Deserialize)]
struct Sent {
    message_id: String,
}

#[derive(Serialize)]
struct Output {
    now_nanos: u64,
    random: u64,
    message_id: String,
}

struct TimeAndRandom;

impl Tool for TimeAndRandom {
    type Args = Args;
    type Output = Output;
    const NAME: &'static str = "time_and_random";
    const DESCRIPTION: &'static str = "Mails the current time and a random number.";

    fn call(_: Args) -> Result<Output, ToolError> {
        // wasi:clocks/wall-clock and wasi:random/random, both of which the host journals.
        let now_nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        let random =
            getrandom::u64().map_err(|e| ToolError::new("no_randomness", e.to_string()))?;
        let mail = Mail {
            to: "clock@example.com",
            subject: "time and random",
            body: format!("now_nanos={now_nanos} random={random}"),
        };
        let sent: Sent = effects::perform("mail", "send", &mail)?;
        Ok(Output {
            now_nanos,
            random,
            message_id: sent.message_id,
        })
    }
}

export_tool!(TimeAndRandom);
