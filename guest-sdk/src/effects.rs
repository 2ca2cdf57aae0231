//! The one guarded path from a tool to the world.
//!
//! Every call to [`perform`] is one side effect. The host keys it by the invocation
//! and the call's position in it, journals it before the provider runs, and replays
//! the first outcome to any retry, so a tool written as straight-line code is safe to
//! retry. Keep the sequence of effects a function of the arguments (and of earlier
//! responses): a resumed invocation that asks for a different effect at a position
//! the journal already holds fails with [`EffectError::Divergence`].

use std::fmt;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::__bindings::justonce::tool::effects as wit;

/// Why an effect did not produce a usable response.
///
/// `?` turns it into a [`ToolError`](crate::ToolError) with a stable code; see the
/// `From` impl there.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum EffectError {
    /// The downstream answered definitively with a refusal, such as a declined card.
    /// Holds the downstream's answer. Retrying is pointless; the refusal is saved and
    /// replayed.
    Rejected(serde_json::Value),
    /// The host still does not know whether the effect happened after retrying it
    /// with the same key. The invocation stays open and retrying the same tool call
    /// later is safe.
    OutcomeUnknown(String),
    /// The host refused the effect before performing it: an unknown provider or
    /// operation, or a limit of the sandbox.
    Denied(String),
    /// A resumed invocation asked for a different effect where the journal already
    /// holds one. Nothing was performed.
    Divergence(String),
    /// The effect happened, but its response did not deserialize into the type the
    /// tool asked for.
    BadResponse(String),
    /// The payload could not be serialized to JSON, so nothing was sent.
    BadPayload(String),
}

impl fmt::Display for EffectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Rejected(answer) => write!(f, "effect rejected: {}", readable(answer)),
            Self::OutcomeUnknown(msg) => write!(f, "effect outcome unknown: {msg}"),
            Self::Denied(msg) => write!(f, "effect denied: {msg}"),
            Self::Divergence(msg) => write!(f, "effect diverged from the journal: {msg}"),
            Self::BadResponse(msg) => write!(f, "unexpected effect response: {msg}"),
            Self::BadPayload(msg) => write!(f, "effect payload is not serializable: {msg}"),
        }
    }
}

impl std::error::Error for EffectError {}

/// A downstream's answer as a person reads it, in a message: the text of a string;
/// for an object with a `message`, that message after its `error` or `code`
/// (`invalid_recipient: ...`); else its JSON. The whole answer stays in the error's
/// details.
fn readable(answer: &serde_json::Value) -> String {
    if let Some(text) = answer.as_str() {
        return text.to_owned();
    }
    let Some(message) = answer.get("message").and_then(|m| m.as_str()) else {
        return answer.to_string();
    };
    let code = ["error", "code"]
        .iter()
        .find_map(|field| match answer.get(field) {
            Some(serde_json::Value::String(code)) => Some(code.clone()),
            Some(code @ serde_json::Value::Number(_)) => Some(code.to_string()),
            _ => None,
        });
    match code {
        Some(code) => format!("{code}: {message}"),
        None => message.to_owned(),
    }
}

impl From<wit::EffectError> for EffectError {
    fn from(err: wit::EffectError) -> Self {
        match err {
            // The host sends JSON; keep a non-JSON answer rather than lose it.
            wit::EffectError::Rejected(text) => Self::Rejected(
                serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)),
            ),
            wit::EffectError::OutcomeUnknown(msg) => Self::OutcomeUnknown(msg),
            wit::EffectError::Denied(msg) => Self::Denied(msg),
            wit::EffectError::Divergence(msg) => Self::Divergence(msg),
        }
    }
}

/// Performs one side effect through `provider` and deserializes its response.
///
/// ```no_run
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize)]
/// struct Put<'a> { key: &'a str, value: u32 }
/// #[derive(Deserialize)]
/// struct Stored { version: u64 }
///
/// let stored: Stored = justonce_guest::effects::perform("kv", "put", &Put { key: "a", value: 1 })?;
/// # let _ = stored.version;
/// # Ok::<(), justonce_guest::effects::EffectError>(())
/// ```
pub fn perform<Req, Resp>(
    provider: &str,
    operation: &str,
    payload: &Req,
) -> Result<Resp, EffectError>
where
    Req: Serialize + ?Sized,
    Resp: DeserializeOwned,
{
    let payload =
        serde_json::to_string(payload).map_err(|e| EffectError::BadPayload(e.to_string()))?;
    let response = perform_text(provider, operation, &payload)?;
    serde_json::from_str(&response).map_err(|e| EffectError::BadResponse(e.to_string()))
}

/// Performs one side effect with an untyped JSON payload and response.
pub fn perform_json(
    provider: &str,
    operation: &str,
    payload: &serde_json::Value,
) -> Result<serde_json::Value, EffectError> {
    perform(provider, operation, payload)
}

fn perform_text(provider: &str, operation: &str, payload: &str) -> Result<String, EffectError> {
    wit::perform(provider, operation, payload).map_err(EffectError::from)
}
