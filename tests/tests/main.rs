//! justonce's integration tests: one binary, real components end to end.

mod support;

mod cli;
mod cli_outbound;
mod concurrency;
mod contract;
// Needs the fault-injection points, which release builds have only with the feature.
#[cfg(any(debug_assertions, feature = "fault-injection"))]
mod crash;
mod determinism;
mod http;
mod lease;
mod outbox;
mod mcp_calls;
mod mcp_protocol;
mod mcp_python;
mod replay;
mod resolve;
mod retry;
