//! The population of scripted guests the agents call: no effect, one or several
//! effects, keyed, unkeyed and transactional providers, an outbox webhook, a read,
//! guests that use the clock and randomness their run was handed, and one that asks
//! the person behind the agent before it pays.
//!
//! Every guest folds what it was handed for each journaled effect into what it
//! returns (`"saw"`, the answers in the journal's stored form, in the order of the
//! effects' positions): the checker compares them with the answers the journal holds
//! for the saved outcome's invocation. And a run may pause past its lease between
//! its effects (see [`Chaos::pause_between_effects`]).

use std::sync::Arc;

use serde_json::{Value, json};

use super::world::Chaos;
use crate::ask::Question;
use crate::guard::scripted::{Effects, ScriptedRunner, panicked, returned, tool_error};
use crate::runtime::{EffectFailure, GuestOutcome};

/// The tools, and what each one's arguments look like.
pub(crate) const TOOLS: [&str; 9] = [
    "echo", "pay", "pay_many", "notify", "put", "audit", "stamp", "hook", "refund",
];

/// A payload for `provider` with the invocation's generation in it, so a downstream
/// can tell an effect's position (invocation, generation, seq) from another's.
fn payload(fx: &Effects<'_>, fields: Value) -> Value {
    let mut payload = fields;
    payload["gen"] = json!(fx.generation());
    payload
}

fn amount(args: &Value) -> u64 {
    args["amount"].as_u64().unwrap_or(1)
}

/// One run of a guest: its effects, and what it was handed for each journaled one.
struct Run<'a, 'b> {
    fx: &'a mut Effects<'b>,
    chaos: &'a Chaos,
    tool: &'static str,
    /// Each journaled effect's answer as the journal stores it (`{"ok": …}`,
    /// `{"rejected": …}`, `{"denied": …}`), in order.
    saw: Vec<Value>,
}

impl<'a, 'b> Run<'a, 'b> {
    fn new(fx: &'a mut Effects<'b>, chaos: &'a Chaos, tool: &'static str) -> Self {
        Self {
            fx,
            chaos,
            tool,
            saw: Vec::new(),
        }
    }

    /// Performs one journaled effect: the answer, or what the guest ends with.
    fn perform(
        &mut self,
        provider: &str,
        operation: &str,
        payload: Value,
    ) -> Result<Value, GuestOutcome> {
        self.pause();
        let answer = self.fx.perform(provider, operation, payload);
        match &answer {
            Ok(value) => self.saw.push(json!({ "ok": value })),
            Err(EffectFailure::Rejected(text)) => {
                let value = serde_json::from_str(text).unwrap_or(Value::String(text.clone()));
                self.saw.push(json!({ "rejected": value }));
            }
            Err(EffectFailure::Denied(message)) => self.saw.push(json!({ "denied": message })),
            Err(_) => {}
        }
        answer.map_err(|failure| self.failed(failure))
    }

    /// Asks the person one question (journaled at its position, as an effect is):
    /// the answers, or what the guest ends with. A run that stops here to wait for
    /// the answers ends, and the guard answers the call `input_required`.
    fn ask(&mut self, question: Question) -> Result<Vec<Value>, GuestOutcome> {
        self.pause();
        let answers = self.fx.ask(&[question]);
        match &answers {
            Ok(answers) => self.saw.push(json!({ "ok": answers })),
            Err(EffectFailure::Denied(message)) => self.saw.push(json!({ "denied": message })),
            Err(_) => {}
        }
        answers.map_err(|failure| self.failed(failure))
    }

    /// A read (not journaled, no position of its own).
    fn read(
        &mut self,
        provider: &str,
        operation: &str,
        payload: Value,
    ) -> Result<Value, GuestOutcome> {
        self.fx
            .perform(provider, operation, payload)
            .map_err(|failure| self.failed(failure))
    }

    /// Between two effects, or after the last one: the run may stop for longer than
    /// its lease here.
    fn pause(&self) {
        if !self.saw.is_empty() {
            let at = format!("{} after effect #{}", self.tool, self.saw.len() - 1);
            self.chaos.pause_between_effects(&at);
        }
    }

    /// Returns `value` with what the run saw folded in.
    fn returned(self, mut value: Value) -> GuestOutcome {
        self.pause();
        value["saw"] = Value::Array(self.saw);
        returned(value)
    }

    /// What a guest returns when an effect failed: the guard saves a tool error only
    /// for a definitive failure (the call is left resumable otherwise). Its message
    /// carries what the run saw.
    fn failed(&self, failure: EffectFailure) -> GuestOutcome {
        let saw = Value::Array(self.saw.clone());
        match failure {
            EffectFailure::Rejected(answer) => tool_error(
                "declined",
                &json!({ "declined": answer, "saw": saw }).to_string(),
            ),
            other => tool_error(
                "effect_failed",
                &json!({ "failure": format!("{other:?}"), "saw": saw }).to_string(),
            ),
        }
    }
}

/// Performs one journaled effect, or ends the guest with the failure.
macro_rules! perform {
    ($run:expr, $provider:expr, $op:expr, $payload:expr) => {
        match $run.perform($provider, $op, $payload) {
            Ok(answer) => answer,
            Err(outcome) => return outcome,
        }
    };
}

/// What the guest of a saved outcome was handed for each journaled effect, in the
/// journal's stored form and in the order of the effects' positions (see
/// [`Run`]); `None` when the outcome does not say (a trap).
pub(crate) fn saw(outcome: &crate::outcome::Outcome) -> Option<Vec<Value>> {
    use crate::outcome::Outcome;
    let folded = match outcome {
        Outcome::Success { result, .. } => result.get("saw").cloned(),
        Outcome::ToolError { message, .. } => serde_json::from_str::<Value>(message)
            .ok()
            .and_then(|m| m.get("saw").cloned()),
        Outcome::Trap { .. } => None,
    };
    match folded {
        Some(Value::Array(saw)) => Some(saw),
        _ => None,
    }
}

/// Integers the agents send as ids, in twins a double cannot tell apart (2^53 and
/// 2^53 + 1; u64::MAX and one less; the twin of `BIG_IDS[i]` is `BIG_IDS[i ^ 1]`),
/// so a key that rounds them makes two intents one.
pub(crate) const BIG_IDS: [u64; 4] = [
    9_007_199_254_740_992,
    9_007_199_254_740_993,
    u64::MAX - 1,
    u64::MAX,
];

/// Every tool's input schema: the shapes whose spellings must share one key and
/// whose meanings must not (DESIGN.md, "Two layers of keys"): 64-bit ids, an
/// internally tagged union with a defaulted field in one variant, optionals that may
/// be sent as `null`, and no undeclared properties.
pub(crate) fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "amount": { "type": "integer" },
            "to": { "type": "string" },
            "count": { "type": "integer" },
            "order": { "type": "integer", "minimum": 0 },
            "memo": { "type": ["string", "null"] },
            "action": { "oneOf": [
                {
                    "type": "object",
                    "properties": {
                        "kind": { "type": "string", "const": "cancel" },
                        "at": { "type": "string", "default": "now" }
                    },
                    "required": ["kind"],
                    "additionalProperties": false
                },
                {
                    "type": "object",
                    "properties": {
                        "kind": { "type": "string", "const": "ship" },
                        "carrier": { "type": "string" },
                        "note": { "type": ["string", "null"] }
                    },
                    "required": ["kind", "carrier"],
                    "additionalProperties": false
                }
            ] }
        },
        "required": ["amount", "to"],
        "additionalProperties": false
    })
}

/// A runner with every tool of [`TOOLS`]; `chaos` pauses their runs between
/// effects.
pub(crate) fn runner(chaos: Arc<Chaos>) -> ScriptedRunner {
    let mut runner = ScriptedRunner::default();
    let schema = schema();
    // No effect; traps for some arguments (a trap is saved and replayed too).
    runner.tool("echo", schema.clone(), |args, _| {
        if amount(args).is_multiple_of(11) {
            return panicked("the echo guest trapped");
        }
        returned(json!({ "echo": args }))
    });
    // One keyed effect.
    let c = Arc::clone(&chaos);
    runner.tool("pay", schema.clone(), move |args, fx| {
        let mut run = Run::new(fx, &c, "pay");
        let p = payload(run.fx, json!({ "amount": amount(args), "to": args["to"] }));
        let paid = perform!(run, "pay", "charge", p);
        run.returned(json!({ "paid": paid }))
    });
    // Several keyed effects, then an unkeyed notification.
    let c = Arc::clone(&chaos);
    runner.tool("pay_many", schema.clone(), move |args, fx| {
        let mut run = Run::new(fx, &c, "pay_many");
        let count = args["count"].as_u64().unwrap_or(2);
        let mut paid = Vec::new();
        for i in 0..count {
            let p = payload(run.fx, json!({ "amount": amount(args) + i, "part": i }));
            paid.push(perform!(run, "pay", "charge", p));
        }
        let p = payload(run.fx, json!({ "text": format!("{count} payments") }));
        let sent = perform!(run, "sms", "send", p);
        run.returned(json!({ "paid": paid, "sent": sent }))
    });
    // One unkeyed effect.
    let c = Arc::clone(&chaos);
    runner.tool("notify", schema.clone(), move |args, fx| {
        let mut run = Run::new(fx, &c, "notify");
        let p = payload(run.fx, json!({ "to": args["to"], "amount": amount(args) }));
        let sent = perform!(run, "sms", "send", p);
        run.returned(json!({ "sent": sent }))
    });
    // Two transactional effects: the built-in kv store and the ledger.
    let c = Arc::clone(&chaos);
    runner.tool("put", schema.clone(), move |args, fx| {
        let mut run = Run::new(fx, &c, "put");
        let slot = format!("k{}", amount(args) % 5);
        let put = perform!(
            run,
            "kv",
            "put",
            json!({ "key": slot, "value": amount(args) })
        );
        let p = payload(run.fx, json!({ "amount": amount(args) }));
        let row = perform!(run, "ledger", "record", p);
        run.returned(json!({ "put": put, "row": row }))
    });
    // A read (not journaled), then a keyed effect.
    let c = Arc::clone(&chaos);
    runner.tool("audit", schema.clone(), move |args, fx| {
        let mut run = Run::new(fx, &c, "audit");
        let seen = match run.read("pay", "balance", json!({})) {
            Ok(seen) => seen,
            Err(outcome) => return outcome,
        };
        let p = payload(run.fx, json!({ "amount": amount(args), "audit": true }));
        let paid = perform!(run, "pay", "charge", p);
        run.returned(json!({ "seen": seen, "paid": paid }))
    });
    // The clock and the generation the run was handed, in an effect and the result.
    let c = Arc::clone(&chaos);
    runner.tool("stamp", schema.clone(), move |args, fx| {
        let mut run = Run::new(fx, &c, "stamp");
        let (at, generation) = (run.fx.started_ms(), run.fx.generation());
        let p = payload(run.fx, json!({ "amount": amount(args), "at": at }));
        let row = perform!(run, "ledger", "record", p);
        run.returned(json!({ "at": at, "gen": generation, "row": row }))
    });
    // A webhook through the transactional outbox as its first (and only) journaled
    // effect: the enqueue commits with the invocation's first record, and delivery
    // sends it with its effect key as the idempotency key.
    let c = Arc::clone(&chaos);
    runner.tool("hook", schema.clone(), move |args, fx| {
        let mut run = Run::new(fx, &c, "hook");
        let event = json!({
            "event": "paid",
            "amount": amount(args),
            "to": args["to"],
            "gen": run.fx.generation(),
        });
        let message = perform!(
            run,
            "outbox",
            "enqueue",
            json!({ "service": "webhooks", "path": "/hook", "json": event })
        );
        run.returned(json!({ "queued": message }))
    });
    // Asks the person to confirm, then pays only if they accepted: the question
    // takes the first position, the payment the second.
    runner.tool("refund", schema, move |args, fx| {
        let mut run = Run::new(fx, &chaos, "refund");
        let answers = match run.ask(confirm(args)) {
            Ok(answers) => answers,
            Err(outcome) => return outcome,
        };
        if !accepted(&answers) {
            return run.returned(json!({ "refunded": false }));
        }
        let p = payload(
            run.fx,
            json!({ "amount": amount(args), "to": args["to"], "refund": true }),
        );
        let paid = perform!(run, "pay", "charge", p);
        run.returned(json!({ "refunded": true, "paid": paid }))
    });
    runner
}

/// The `refund` tool's question.
fn confirm(args: &Value) -> Question {
    Question {
        name: "confirm".into(),
        message: format!("Refund {} to {}?", amount(args), args["to"]),
        schema: json!({
            "type": "object",
            "properties": { "confirm": { "type": "boolean" } },
            "required": ["confirm"],
        }),
    }
}

/// A person's answer to [`confirm`]: an MCP elicitation result.
pub(crate) fn confirmed(accept: bool) -> Value {
    if accept {
        json!({ "action": "accept", "content": { "confirm": true } })
    } else {
        json!({ "action": "decline" })
    }
}

/// Whether `answers` (to [`confirm`]) accept.
fn accepted(answers: &[Value]) -> bool {
    answers
        .first()
        .is_some_and(|a| a["action"] == "accept" && a["content"]["confirm"] == true)
}
