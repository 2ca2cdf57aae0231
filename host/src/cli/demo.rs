//! `justonce demo`: a lost response and its retry on the example tools — a lost response, a retry
//! that does not send a second email, and a different call that does — then a refund
//! over HTTP against a payments API on 127.0.0.1 whose response is lost, and a
//! webhook delivered once from the outbox.

use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::shell::shell_word;
use super::{Cli, exit};
use crate::call::{CallRequest, CallResponse};
use crate::clock::SystemClock;
use crate::delivery::{Deliverer, DeliveryPolicy};
use crate::error::Error;
use crate::http::local_api::{Behaviour, LocalApi};
use crate::http::{DEFAULT_IDEMPOTENCY_HEADER, HttpConfig};
use crate::providers::MailProvider;

/// Watch a lost response and the agent's retry end to end: one email per order, one
/// refund, one webhook, on the example tools.
#[derive(Debug, Args)]
pub struct Demo {
    /// The conversation to play it in (default: a new one each run).
    #[arg(long, value_name = "ID")]
    conversation: Option<String>,
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
            MailProvider::open(
                Some(&cli.db),
                clock.clone(),
                std::time::Duration::from_secs(86_400),
            )?
            .lose_first_responses(1),
        );
        let local = |what: &str| {
            LocalApi::start()
                .map_err(|e| Error::Host(anyhow::anyhow!("cannot start the local {what}: {e}")))
        };
        // Both downstreams live on 127.0.0.1 for the length of the demo.
        let payments = local("payments API")?;
        let receiver = local("webhook receiver")?;
        let http = HttpConfig::default()
            .service("payments", payments.url())
            .allow("refund", payments.url())
            .service("webhooks", receiver.url())
            .allow("notify", receiver.url());
        let host = cli
            .host()
            .clock(clock)
            .retry_policy(crate::RetryPolicy::immediate(3))
            .provider("mail", mail.clone())
            .http(http)
            .build()?;
        let sent_before = mail.sent().map(|s| s.len()).unwrap_or(0);

        println!("justonce demo: an agent's retries on the example tools");
        println!(
            "  journal: {}   conversation: {conversation}\n",
            cli.db.display()
        );

        let receipt = |call_id: &str, args: &str| {
            CallRequest::new("send_receipt", args)
                .conversation(&conversation)
                .tool_call_id(call_id)
        };
        let args_4417 =
            r#"{"orders":[{"order_id":4417,"email":"ada@example.com","amount_cents":1299}]}"#;
        let args_4417_again =
            r#"{"orders":[{"amount_cents":1299,"email":"ada@example.com","order_id":4417.0}]}"#;
        let args_4418 =
            r#"{"orders":[{"order_id":4418,"email":"grace@example.com","amount_cents":4500}]}"#;

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

        println!(
            "\n4. The agent refunds order 4417: POST {}/v1/refunds, a payments API on this machine.",
            payments.url()
        );
        println!("   The API applies the refund, then the connection drops before it answers.");
        payments.script([Behaviour::ApplyThenDrop]);
        let refund = CallRequest::new(
            "refund",
            r#"{"order_id":4417,"amount_cents":1299,"reason":"damaged"}"#,
        )
        .conversation(&conversation)
        .tool_call_id("call_4");
        let first_refund = host.call(&refund)?;
        for (i, request) in payments.requests().iter().enumerate() {
            println!(
                "   attempt {}  {DEFAULT_IDEMPOTENCY_HEADER}: {}",
                i + 1,
                request.key.as_deref().unwrap_or("(none)")
            );
        }
        println!("   The API recognised the key on the retry and answered with the first refund.");
        tell(&first_refund);
        println!("\n5. The agent retries the refund.");
        let seen = payments.requests().len();
        let again = host.call(&refund.clone().tool_call_id("call_5"))?;
        println!(
            "   the payments API was called {} more time(s)",
            payments.requests().len() - seen
        );
        tell(&again);

        println!("\n6. The agent notifies the shop: the webhook is queued in the outbox, in the");
        println!("   same transaction as its journal record; a retry queues nothing new.");
        let notify = CallRequest::new(
            "notify",
            r#"{"event":"refund.issued","data":{"order_id":4417}}"#,
        )
        .conversation(&conversation)
        .tool_call_id("call_6");
        let queued = host.call(&notify)?;
        tell(&queued);
        let retried = host.call(&notify.clone().tool_call_id("call_7"))?;
        tell(&retried);
        let message_id = queued
            .outcome
            .to_agent_json()
            .pointer("/result/message_id")
            .and_then(serde_json::Value::as_i64);
        println!("   Delivery: the receiver records the webhook, then its response is lost.");
        receiver.script([Behaviour::ApplyThenDrop]);
        let deliverer = Deliverer::new(&host)?.policy(DeliveryPolicy {
            initial_backoff: Duration::ZERO,
            max_backoff: Duration::ZERO,
            ..DeliveryPolicy::default()
        });
        for pass in 1..=2 {
            let report = deliverer.run_once()?;
            for attempt in report
                .attempts
                .iter()
                .filter(|a| Some(a.message_id) == message_id)
            {
                println!(
                    "   pass {pass}: attempt {}  {DEFAULT_IDEMPOTENCY_HEADER}: {}  -> {:?}{}",
                    attempt.attempt,
                    attempt.key,
                    attempt.outcome,
                    attempt
                        .error
                        .as_deref()
                        .map(|e| format!(" ({e})"))
                        .unwrap_or_default()
                );
            }
        }

        let emails = mail.sent().map(|s| s.len()).unwrap_or(0) - sent_before;
        println!(
            "\nResult: {emails} email(s) sent for 2 orders, {} refund(s) for 1 refund request,",
            payments.applied().len()
        );
        println!(
            "        {} webhook(s) received for 1 notification; {} mail, {} payments and {} webhook attempt(s) in all.",
            receiver.applied().len(),
            mail.attempts().len(),
            payments.requests().len(),
            receiver.requests().len()
        );
        // The program as it was started (`target/release/justonce` from the
        // checkout, `justonce` once installed), so the line runs as printed.
        let program = std::env::args().next().unwrap_or_else(|| "justonce".into());
        println!(
            "See it all with: {} --db {} journal --conversation {}",
            shell_word(&program),
            shell_word(&cli.db.display().to_string()),
            shell_word(&conversation)
        );
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
