//! The population of scripted guests the agents call: no effect, one or several
//! effects, keyed, unkeyed and transactional providers, a read, and guests that use
//! the clock and randomness their run was handed.

use serde_json::{Value, json};

use crate::guard::scripted::{Effects, ScriptedRunner, panicked, returned, tool_error};
use crate::runtime::{EffectFailure, GuestOutcome};

/// The tools, and what each one's arguments look like.
pub(crate) const TOOLS: [&str; 7] = ["echo", "pay", "pay_many", "notify", "put", "audit", "stamp"];

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

/// What a guest returns when an effect failed: the guard saves a tool error only for a
/// definitive failure (the call is left resumable otherwise).
fn failed(failure: EffectFailure) -> GuestOutcome {
    match failure {
        EffectFailure::Rejected(answer) => tool_error("declined", &answer),
        other => tool_error("effect_failed", &format!("{other:?}")),
    }
}

/// Performs one effect, or ends the guest with the failure.
macro_rules! perform {
    ($fx:expr, $provider:expr, $op:expr, $payload:expr) => {
        match $fx.perform($provider, $op, $payload) {
            Ok(answer) => answer,
            Err(failure) => return failed(failure),
        }
    };
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

/// A runner with every tool of [`TOOLS`].
pub(crate) fn runner() -> ScriptedRunner {
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
    runner.tool("pay", schema.clone(), |args, fx| {
        let p = payload(fx, json!({ "amount": amount(args), "to": args["to"] }));
        let paid = perform!(fx, "pay", "charge", p);
        returned(json!({ "paid": paid }))
    });
    // Several keyed effects, then an unkeyed notification.
    runner.tool("pay_many", schema.clone(), |args, fx| {
        let count = args["count"].as_u64().unwrap_or(2);
        let mut paid = Vec::new();
        for i in 0..count {
            let p = payload(fx, json!({ "amount": amount(args) + i, "part": i }));
            paid.push(perform!(fx, "pay", "charge", p));
        }
        let p = payload(fx, json!({ "text": format!("{count} payments") }));
        let sent = perform!(fx, "sms", "send", p);
        returned(json!({ "paid": paid, "sent": sent }))
    });
    // One unkeyed effect.
    runner.tool("notify", schema.clone(), |args, fx| {
        let p = payload(fx, json!({ "to": args["to"], "amount": amount(args) }));
        let sent = perform!(fx, "sms", "send", p);
        returned(json!({ "sent": sent }))
    });
    // Two transactional effects: the built-in kv store and the ledger.
    runner.tool("put", schema.clone(), |args, fx| {
        let slot = format!("k{}", amount(args) % 5);
        let put = perform!(
            fx,
            "kv",
            "put",
            json!({ "key": slot, "value": amount(args) })
        );
        let p = payload(fx, json!({ "amount": amount(args) }));
        let row = perform!(fx, "ledger", "record", p);
        returned(json!({ "put": put, "row": row }))
    });
    // A read (not journaled), then a keyed effect.
    runner.tool("audit", schema.clone(), |args, fx| {
        let seen = perform!(fx, "pay", "balance", json!({}));
        let p = payload(fx, json!({ "amount": amount(args), "audit": true }));
        let paid = perform!(fx, "pay", "charge", p);
        returned(json!({ "seen": seen, "paid": paid }))
    });
    // The clock and the generation the run was handed, in an effect and the result.
    runner.tool("stamp", schema, |args, fx| {
        let at = fx.started_ms();
        let p = payload(fx, json!({ "amount": amount(args), "at": at }));
        let row = perform!(fx, "ledger", "record", p);
        returned(json!({ "at": at, "gen": fx.generation(), "row": row }))
    });
    runner
}
