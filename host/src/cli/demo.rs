//! `justonce demo`: the seed's story on the example tools — a lost response, a retry
//! that does not send a second email, and a different call that does.

use std::sync::{Arc, Mutex};

use clap::Args;
use serde_json::{Value, json};

use super::{Cli, exit};
use crate::clock::SystemClock;
use crate::error::Error;
use crate::host::{CallRequest, CallResponse};
use crate::provider::{EffectRequest, Provider, ProviderClass, ProviderError};
use crate::providers::MailProvider;

/// Play the seed's story: a lost email response, the agent's retry, a second order.
#[derive(Debug, Args)]
pub struct Demo {
    /// The conversation to play it in (default: a new one each run).
    #[arg(long, value_name = "ID")]
    conversation: Option<String>,
}

/// An in-process payments API that deduplicates by key and loses its first response.
#[derive(Default)]
struct DemoPayments {
    refunds: Mutex<Vec<(String, Value)>>,
    attempts: Mutex<u32>,
}

impl Provider for DemoPayments {
    fn class(&self) -> ProviderClass {
        ProviderClass::Keyed
    }

    fn perform(&self, request: &EffectRequest<'_>) -> Result<Value, ProviderError> {
        let mut refunds = self.refunds.lock().unwrap_or_else(|p| p.into_inner());
        let key = request.key.to_string();
        let index = match refunds.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                refunds.push((key, request.payload.clone()));
                refunds.len() - 1
            }
        };
        let mut attempts = self.attempts.lock().unwrap_or_else(|p| p.into_inner());
        *attempts += 1;
        if *attempts == 1 {
            return Err(ProviderError::Unknown(
                "payments API timed out after applying the refund".into(),
            ));
        }
        Ok(json!({ "refund_id": format!("re_{:04}", index + 1), "status": "succeeded" }))
    }
}

impl Demo {
    pub(super) fn run(&self, cli: &Cli) -> Result<u8, Error> {
        let conversation = self.conversation.clone().unwrap_or_else(|| {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis())
                .unwrap_or(0);
            format!("demo-{now}")
        });
        let clock = Arc::new(SystemClock);
        let mail = Arc::new(
            MailProvider::open(Some(&cli.db), clock.clone(), std::time::Duration::from_secs(86_400))?
                .lose_first_responses(1),
        );
        let payments = Arc::new(DemoPayments::default());
        let host = cli
            .host()
            .clock(clock)
            .retry_policy(crate::RetryPolicy::immediate(3))
            .provider("mail", mail.clone())
            .provider("payments", payments.clone())
            .build()?;
        let sent_before = mail.sent().map(|s| s.len()).unwrap_or(0);

        println!("justonce demo: an agent's retries on the example tools");
        println!("  journal: {}   conversation: {conversation}\n", cli.db.display());

        let receipt = |call_id: &str, args: &str| {
            CallRequest::new("send_receipt", args)
                .conversation(&conversation)
                .tool_call_id(call_id)
        };
        let args_4417 = r#"{"orders":[{"order_id":4417,"email":"ada@example.com","amount_cents":1299}]}"#;
        let args_4417_again = r#"{"orders":[{"amount_cents":1299,"email":"ada@example.com","order_id":4417.0}]}"#;
        let args_4418 = r#"{"orders":[{"order_id":4418,"email":"grace@example.com","amount_cents":4500}]}"#;

        println!("1. The agent calls send_receipt for order 4417 (tool-call id call_1).");
        println!("   The mail server records the email, but its response is lost.");
        let seen = mail.attempts().len();
        let first = host.call(&receipt("call_1", args_4417))?;
        for (i, key) in mail.attempts()[seen..].iter().enumerate() {
            println!("   attempt {}  effect key {key}", i + 1);
        }
        tell(&first);

        println!("\n2. The agent timed out as well and retries: a new tool-call id (call_2),");
        println!("   the same arguments written differently: {args_4417_again}");
        let seen = mail.attempts().len();
        let retry = host.call(&receipt("call_2", args_4417_again))?;
        println!(
            "   same invocation key: {}; the mail server was called {} more time(s)",
            retry.key == first.key,
            mail.attempts().len() - seen
        );
        tell(&retry);

        println!("\n3. A different order, 4418: a genuinely new call (its response is lost too).");
        let seen = mail.attempts().len();
        let other = host.call(&receipt("call_3", args_4418))?;
        for (i, key) in mail.attempts()[seen..].iter().enumerate() {
            println!("   attempt {}  effect key {key}", i + 1);
        }
        tell(&other);

        println!("\n4. The agent refunds order 4417; the payments API applies it, then times out.");
        let refund = CallRequest::new("refund", r#"{"order_id":4417,"amount_cents":1299,"reason":"damaged"}"#)
            .conversation(&conversation)
            .tool_call_id("call_4");
        let first_refund = host.call(&refund)?;
        tell(&first_refund);
        println!("\n5. The agent retries the refund.");
        let again = host.call(&refund.clone().tool_call_id("call_5"))?;
        tell(&again);

        let emails = mail.sent().map(|s| s.len()).unwrap_or(0) - sent_before;
        let refunds = payments.refunds.lock().map(|r| r.len()).unwrap_or(0);
        println!(
            "\nResult: {emails} email(s) sent for 2 orders, {refunds} refund(s) for 1 refund request,"
        );
        println!(
            "        {} mail attempt(s) and {} payments attempt(s) in all.",
            mail.attempts().len(),
            payments.attempts.lock().map(|a| *a).unwrap_or(0)
        );
        println!("See it all with: justonce journal --conversation {conversation}");
        Ok(exit::SUCCESS)
    }
}

fn tell(response: &CallResponse) {
    println!(
        "   agent is told (replayed={}): {}",
        response.replayed,
        response.outcome.to_agent_json()
    );
}
