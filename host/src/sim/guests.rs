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

/// A runner with every tool of [`TOOLS`].
pub(crate) fn runner() -> ScriptedRunner {
    let mut runner = ScriptedRunner::default();
    let schema = ScriptedRunner::open_schema();
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
