//! Test guest: sleeps `before` seconds, sends one email (an effect, so the call is
//! journaled from then on), then sleeps `seconds` before answering: a call that outlives the server's bound
//! and becomes an MCP task (tests/tests/mcp_tasks.rs). With `confirm` it asks the user
//! whether to send before it does (a task that asks), and sends nothing unless told
//! to.

use justonce_guest::{Question, Tool, ToolError, ask_all, effects, export_tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Whom to write to, and how long to take afterwards.
#[derive(Deserialize, JsonSchema)]
struct Args {
    /// The recipient.
    to: String,
    /// Seconds to sleep after sending.
    seconds: u32,
    /// Seconds to sleep before sending (none by default).
    #[serde(default)]
    before: u32,
    /// Whether to ask the user before sending.
    #[serde(default)]
    confirm: bool,
}

#[derive(Serialize)]
struct Mail<'a> {
    to: &'a str,
    subject: &'a str,
    body: &'a str,
}

#[derive(Deserialize)]
struct Sent {
    message_id: String,
}

/// The message id the mail provider gave the email.
#[derive(Serialize)]
struct Output {
    message_id: String,
}

struct SlowMail;

impl Tool for SlowMail {
    type Args = Args;
    type Output = Output;
    const NAME: &'static str = "slow_mail";
    const DESCRIPTION: &'static str = "Sleeps BEFORE, sends one email to TO, then sleeps SECONDS.";

    fn call(args: Args) -> Result<Output, ToolError> {
        let mail = Mail {
            to: &args.to,
            subject: "Your report",
            body: "It is ready.",
        };
        std::thread::sleep(std::time::Duration::from_secs(args.before.into()));
        if args.confirm {
            let question = Question::new(
                "send",
                format!("Send the report to {}?", args.to),
                serde_json::json!({ "type": "object", "properties": { "send": { "type": "boolean" } } }),
            );
            let answer = ask_all(&[question])?.remove(0);
            let yes = answer.accepted() && answer.get("send") == Some(&serde_json::json!(true));
            if !yes {
                return Err(ToolError::new(
                    "not_sent",
                    format!("the user did not want the report sent to {}", args.to),
                ));
            }
        }
        let sent: Sent = effects::perform("mail", "send", &mail)?;
        std::thread::sleep(std::time::Duration::from_secs(args.seconds.into()));
        Ok(Output {
            message_id: sent.message_id,
        })
    }
}

export_tool!(SlowMail);
