//! Test guest: sends one email through the `smtp` provider (an unkeyed mailer in the
//! tests) and answers its message id. Its own probe (`reconcile`) asks the mailer
//! for a message sent under the effect's key (`find`, a read): found, the effect was
//! performed and its answer is that message's id; none, it was not. With the subject
//! `misbehave`, `reconcile` tries to send instead, which the host stops with a trap.

use justonce_guest::{PendingEffect, Reconcile, Reconciled, Tool, ToolError, effects, export_tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Whom to write to, and about what.
#[derive(Deserialize, JsonSchema)]
struct Args {
    /// The recipient.
    to: String,
    /// The subject line.
    subject: String,
}

#[derive(Deserialize)]
struct Sent {
    message_id: String,
}

/// The message id the mailer gave the email.
#[derive(Serialize)]
struct Output {
    message_id: String,
    /// What the tool did after the mail went out: it goes on from the answer.
    then: String,
}

struct ReconcileMail;

impl Tool for ReconcileMail {
    type Args = Args;
    type Output = Output;
    const NAME: &'static str = "reconcile_mail";
    const DESCRIPTION: &'static str = "Sends one email to TO with SUBJECT.";

    fn call(args: Args) -> Result<Output, ToolError> {
        let sent: Sent = effects::perform(
            "smtp",
            "send",
            &json!({ "to": args.to, "subject": args.subject }),
        )?;
        Ok(Output {
            then: format!("told the caller about {}", sent.message_id),
            message_id: sent.message_id,
        })
    }
}

impl Reconcile for ReconcileMail {
    fn reconcile(effect: PendingEffect) -> Reconciled {
        if effect.payload["subject"] == "misbehave" {
            let sent: Result<Value, _> = effects::perform("smtp", "send", &effect.payload);
            return Reconciled::Unknown(format!("sent again: {sent:?}"));
        }
        let found: Result<Value, _> =
            effects::perform("smtp", "find", &json!({ "key": effect.key }));
        match found {
            Ok(Value::Null) => Reconciled::NotPerformed,
            Ok(message) => Reconciled::Performed(json!({ "message_id": message["message_id"] })),
            Err(e) => Reconciled::Unknown(format!("the mailer's log did not answer: {e}")),
        }
    }
}

export_tool!(ReconcileMail, reconcile);
