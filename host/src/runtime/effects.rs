//! The callback through which a guest's `perform`, clocks and random reach whoever
//! runs it. The runtime defines it and knows nothing of who implements it (the guard
//! does, with its effect guard; tests with scripted ones).

use std::any::Any;

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
}

impl EffectFailure {
    /// Its kind in one word (`rejected`, `outcome_unknown`, `denied`, `divergence`,
    /// `read_only`).
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Self::Rejected(_) => "rejected",
            Self::OutcomeUnknown(_) => "outcome_unknown",
            Self::Denied(_) => "denied",
            Self::Divergence(_) => "divergence",
            Self::ReadOnly(_) => "read_only",
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

    /// The clock start and random seed this call's guest sees.
    fn entropy(&self) -> &GuestEntropy;

    /// The handler back as its own type, after the call.
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
}
