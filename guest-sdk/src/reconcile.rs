//! A tool's own probe: whether one of its effects happened, after the host lost the
//! effect's answer.
//!
//! An unkeyed effect (one whose downstream cannot deduplicate by the key) whose
//! answer was lost may or may not have happened, so the host does not send it again.
//! A tool that knows how to ask its downstream implements [`Reconcile`] and exports
//! it with `export_tool!(MyTool, reconcile)`: at the agent's retry of the call (and
//! from `serve`'s sweeper), the host asks [`Reconcile::reconcile`] about the effect
//! before it fails closed, journals what it answers (`decided_by: probe`), and the
//! call goes on from it. [`Reconciled::Performed`]: its response is the effect's
//! answer, which [`perform`](crate::effects::perform) returns to the retried call;
//! [`Reconciled::NotPerformed`]: the effect is sent again under the same key;
//! [`Reconciled::Unknown`]: it stays unknown.
//!
//! `reconcile` runs with reads only: [`http::get`](crate::http) and any other read
//! a provider offers. Asking for an effect or asking the user stops it with a
//! `read_only_effect` trap (the effect stays unknown), and so does running past the
//! host's probe timeout (10 s by default).
//!
//! ```
//! use justonce_guest::{PendingEffect, Reconcile, Reconciled, Tool, ToolError, effects, export_tool};
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct Args {
//!     /// Who gets the mail.
//!     to: String,
//! }
//!
//! struct Notify;
//!
//! impl Tool for Notify {
//!     type Args = Args;
//!     type Output = serde_json::Value;
//!     const NAME: &'static str = "notify";
//!     const DESCRIPTION: &'static str = "Mails a notice.";
//!
//!     fn call(args: Args) -> Result<serde_json::Value, ToolError> {
//!         Ok(effects::perform("smtp", "send", &serde_json::json!({ "to": args.to }))?)
//!     }
//! }
//!
//! impl Reconcile for Notify {
//!     fn reconcile(effect: PendingEffect) -> Reconciled {
//!         // Ask the mail server's log for a message under the effect's key (a read).
//!         let found: Result<Option<serde_json::Value>, _> =
//!             effects::perform("smtp", "find", &serde_json::json!({ "key": effect.key }));
//!         match found {
//!             Ok(Some(message)) => Reconciled::Performed(message),
//!             Ok(None) => Reconciled::NotPerformed,
//!             Err(e) => Reconciled::Unknown(e.to_string()),
//!         }
//!     }
//! }
//!
//! export_tool!(Notify, reconcile);
//! # fn main() {}
//! ```

use serde_json::Value;

use crate::__bindings::justonce::tool::types as wit;
use crate::Tool;

/// One of the tool's own effects whose outcome is unknown.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingEffect {
    /// The provider the tool named to `perform`.
    pub provider: String,
    /// The operation.
    pub operation: String,
    /// The payload the tool passed.
    pub payload: Value,
    /// The idempotency key the provider got with the effect.
    pub key: String,
}

/// What [`Reconcile::reconcile`] found out.
#[derive(Debug, Clone, PartialEq)]
pub enum Reconciled {
    /// It happened: the response to save as the effect's answer, which the retried
    /// call gets from `perform`.
    Performed(Value),
    /// It did not happen: the host sends it again under the same key.
    NotPerformed,
    /// It cannot tell (why, for the operator): the effect stays unknown.
    Unknown(String),
}

/// A tool's own probe of its effects. Export it with
/// `export_tool!(MyTool, reconcile)` (see the [module](self)).
pub trait Reconcile: Tool {
    /// Whether `effect`, one of this tool's effects whose answer was lost, happened.
    /// It may only read; the host never asks it about a keyed effect.
    fn reconcile(effect: PendingEffect) -> Reconciled;
}

/// The body of the exported `reconcile`.
#[doc(hidden)]
pub fn __reconcile<T: Reconcile>(effect: wit::PendingEffect) -> wit::Reconciled {
    let payload = match serde_json::from_str(&effect.payload) {
        Ok(payload) => payload,
        Err(e) => return wit::Reconciled::Unknown(format!("the payload is not JSON: {e}")),
    };
    let effect = PendingEffect {
        provider: effect.provider,
        operation: effect.operation,
        payload,
        key: effect.key,
    };
    match T::reconcile(effect) {
        Reconciled::Performed(response) => wit::Reconciled::Performed(response.to_string()),
        Reconciled::NotPerformed => wit::Reconciled::NotPerformed,
        Reconciled::Unknown(why) => wit::Reconciled::Unknown(why),
    }
}
