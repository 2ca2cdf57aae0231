//! The sandbox's limits for one call.

use std::time::Duration;

/// Limits applied to every call of a tool. The defaults are safe for untrusted tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock time a call may run before it is interrupted.
    pub deadline: Duration,
    /// Linear memory a guest may grow to, in bytes.
    pub memory_bytes: usize,
    /// Largest accepted argument JSON, in bytes.
    pub max_args_bytes: usize,
    /// Largest accepted effect payload JSON, in bytes.
    pub max_payload_bytes: usize,
    /// Largest accepted result JSON, in bytes.
    pub max_result_bytes: usize,
    /// Effects one invocation may perform.
    pub max_effects: u32,
    /// Bytes of guest stdout and of stderr kept for the host's log, each.
    pub max_output_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            deadline: Duration::from_secs(10),
            memory_bytes: 64 << 20,
            max_args_bytes: 1 << 20,
            max_payload_bytes: 1 << 20,
            max_result_bytes: 1 << 20,
            max_effects: 100,
            max_output_bytes: 64 << 10,
        }
    }
}
