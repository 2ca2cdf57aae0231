//! Why a guest stopped without returning: a short code agents and tests match on.

/// The reason a guest trapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TrapReason {
    /// The guest panicked (or reached `unreachable`).
    Panic,
    /// It ran past its deadline.
    DeadlineExceeded,
    /// It overflowed its stack.
    StackOverflow,
    /// It used up its fuel.
    FuelExhausted,
    /// It asked for more memory or table space than its limit.
    MemoryLimit,
    /// It asked for more effects than its budget.
    EffectBudgetExceeded,
    /// It sent an effect payload over the cap.
    PayloadTooLarge,
    /// It held more handles (WASI resources) at once than the cap.
    HandleLimit,
    /// It is marked read-only and asked for an effect.
    ReadOnlyEffect,
    /// It called `exit`.
    Exited,
    /// Another wasm trap.
    Trap,
    /// The runtime failed around the guest: not the guest's doing, never saved.
    HostFailure,
    /// It returned a result that is not JSON, or cannot be saved and read back.
    InvalidOutput,
    /// It returned a result over the cap.
    ResultTooLarge,
}

impl TrapReason {
    /// The code saved in the outcome (`panic`, `deadline_exceeded`, …).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Panic => "panic",
            Self::DeadlineExceeded => "deadline_exceeded",
            Self::StackOverflow => "stack_overflow",
            Self::FuelExhausted => "fuel_exhausted",
            Self::MemoryLimit => "memory_limit",
            Self::EffectBudgetExceeded => "effect_budget_exceeded",
            Self::ReadOnlyEffect => "read_only_effect",
            Self::PayloadTooLarge => "payload_too_large",
            Self::HandleLimit => "handle_limit",
            Self::Exited => "exited",
            Self::Trap => "trap",
            Self::HostFailure => "host_failure",
            Self::InvalidOutput => "invalid_output",
            Self::ResultTooLarge => "result_too_large",
        }
    }
}
