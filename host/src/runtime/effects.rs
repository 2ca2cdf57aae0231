//! The callback through which a guest's `perform`, clocks and random reach whoever
//! runs it. The runtime defines it and knows nothing of who implements it (the guard
//! does, with its effect guard; tests with scripted ones).

use std::any::Any;

use crate::ask::Question;
use crate::determinism::GuestEntropy;

/// Why `perform` returned no response; each maps to a WIT `effect-error` case.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum EffectFailure {
    /// The downstream refused, definitively.
    Rejected(String),
    /// The outcome is unknown; retrying the same call is safe.
    OutcomeUnknown(String),
    /// Refused before anything happened.
    Denied(String),
    /// The guest asked for another effect than its journal holds.
    Divergence(String),
    /// A tool marked read-only asked for an effect: the guest traps
    /// (`read_only_effect`), since nothing of a read-only call is journaled.
    ReadOnly(String),
    /// The run ends here (the tool asked the user, whose answers come later, or who
    /// cannot be asked): the guest traps with nothing to act on, and the guard's
    /// interruption says what the call returns. Never saved.
    Stopped(String),
}

impl EffectFailure {
    /// Its kind in one word (`rejected`, `outcome_unknown`, `denied`, `divergence`,
    /// `read_only`, `stopped`).
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Self::Rejected(_) => "rejected",
            Self::OutcomeUnknown(_) => "outcome_unknown",
            Self::Denied(_) => "denied",
            Self::Divergence(_) => "divergence",
            Self::ReadOnly(_) => "read_only",
            Self::Stopped(_) => "stopped",
        }
    }
}

/// What a guest's host imports call back into for one call.
pub(crate) trait EffectHandler: Send + 'static {
    /// Performs one effect the guest asked for. `Err` is a fault of the host itself
    /// (its journal failed): the guest traps with that message, and nothing is saved.
    fn perform(
        &mut self,
        provider: &str,
        operation: &str,
        payload: &str,
    ) -> Result<Result<String, EffectFailure>, String>;

    /// Performs the one effect of an upstream MCP tool's call (the provider
    /// `mcp:NAME`), which the gateway's runner asks for on that call's behalf. A
    /// guest's `perform` never reaches it: only this may use an `mcp:` provider.
    fn perform_upstream(
        &mut self,
        provider: &str,
        operation: &str,
        payload: &str,
    ) -> Result<Result<String, EffectFailure>, String>;

    /// Asks the person behind the call `questions` (the asking effect, provider
    /// `user`): their answers, one `ElicitResult` JSON text per question, in order.
    /// `Err` is a fault of the host itself, as for [`EffectHandler::perform`].
    fn ask(&mut self, questions: &[Question])
    -> Result<Result<Vec<String>, EffectFailure>, String>;

    /// The clock start and random seed this call's guest sees.
    fn entropy(&self) -> &GuestEntropy;

    /// The handler back as its own type, after the call.
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
}
