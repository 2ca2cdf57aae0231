//! The sandbox's limits for one call, and the table of limits per tool.

use std::collections::BTreeMap;
use std::time::Duration;

/// Limits applied to every call of a tool. The defaults are safe for untrusted tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// The guest's own running time a call may take before it is interrupted
    /// (`deadline_exceeded`); time inside effects does not count here.
    pub deadline: Duration,
    /// Wall-clock time a whole call may take, time inside effects (providers, their
    /// retries and backoff) included: past it the guest is interrupted
    /// (`deadline_exceeded`), and an effect still retrying stops (its outcome
    /// unknown, the call resumable).
    pub wall_clock: Duration,
    /// Linear memory a guest may grow to, in bytes (`memory_limit`).
    pub memory_bytes: usize,
    /// Fuel (roughly, WebAssembly instructions) a call may burn before it is stopped
    /// (`fuel_exhausted`); `None` leaves only the deadline to bound CPU.
    pub fuel: Option<u64>,
    /// Largest accepted argument JSON, in bytes (`invalid_arguments`, nothing runs).
    pub max_args_bytes: usize,
    /// Largest accepted effect payload JSON, in bytes (`payload_too_large`).
    pub max_payload_bytes: usize,
    /// Largest accepted result JSON, in bytes (`result_too_large`).
    pub max_result_bytes: usize,
    /// Effects one invocation may perform (`effect_budget_exceeded`).
    pub max_effects: u32,
    /// Bytes of guest stdout, of stderr and of lines written through the `log`
    /// import kept for the host's log per call, each; the rest is counted and
    /// dropped, never an error for the guest.
    pub max_output_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            deadline: Duration::from_secs(10),
            wall_clock: Duration::from_secs(60),
            memory_bytes: 64 << 20,
            fuel: None,
            max_args_bytes: 1 << 20,
            max_payload_bytes: 1 << 20,
            max_result_bytes: 1 << 20,
            max_effects: 100,
            max_output_bytes: 64 << 10,
        }
    }
}

/// The limits of every tool: defaults, and overrides for tools by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolLimits {
    /// The limits of a tool without an entry in `tools`.
    pub defaults: Limits,
    /// Complete limits for single tools, by tool name.
    pub tools: BTreeMap<String, Limits>,
}

impl ToolLimits {
    /// The same `defaults` for every tool.
    pub fn uniform(defaults: Limits) -> Self {
        Self {
            defaults,
            tools: BTreeMap::new(),
        }
    }

    /// The limits a call of `tool` runs under.
    pub fn for_tool(&self, tool: &str) -> &Limits {
        self.tools.get(tool).unwrap_or(&self.defaults)
    }
}
