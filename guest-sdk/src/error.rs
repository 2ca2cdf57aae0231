use std::fmt;

use crate::effects::EffectError;

/// A failure a tool reports to the agent.
///
/// It is an outcome like a success: the host saves it and replays it to any retry of
/// the same call. Return one for anything the agent should read and act on; panic
/// only for bugs.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolError {
    /// A short machine-readable code in `snake_case`, such as `payment_declined`.
    pub code: String,
    /// A sentence for the agent that says what went wrong.
    pub message: String,
    /// Optional structured details, sent to the agent as JSON.
    pub details: Option<serde_json::Value>,
}

impl ToolError {
    /// Creates an error with a code and a message and no details.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
            details: None,
        }
    }

    /// Attaches structured details, replacing any already attached.
    #[must_use]
    pub fn with_details(mut self, details: impl Into<serde_json::Value>) -> Self {
        self.details = Some(details.into());
        self
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for ToolError {}

/// Maps each effect failure to a stable code, so `?` on an effect does the right thing:
///
/// | [`EffectError`] | `code` | `details` |
/// | --- | --- | --- |
/// | `Rejected(answer)` | `effect_rejected` | the downstream's answer |
/// | `OutcomeUnknown` | `outcome_unknown` | — |
/// | `Denied` | `effect_denied` | — |
/// | `Divergence` | `divergence` | — |
/// | `BadResponse` | `bad_effect_response` | — |
/// | `BadPayload` | `bad_effect_payload` | — |
impl From<EffectError> for ToolError {
    fn from(err: EffectError) -> Self {
        let message = err.to_string();
        match err {
            EffectError::Rejected(answer) => {
                Self::new("effect_rejected", message).with_details(answer)
            }
            EffectError::OutcomeUnknown(_) => Self::new(
                "outcome_unknown",
                format!(
                    "{message}. Retrying the same call is safe: it will not repeat the effect."
                ),
            ),
            EffectError::Denied(_) => Self::new("effect_denied", message),
            EffectError::Divergence(_) => Self::new("divergence", message),
            EffectError::BadResponse(_) => Self::new("bad_effect_response", message),
            EffectError::BadPayload(_) => Self::new("bad_effect_payload", message),
        }
    }
}
