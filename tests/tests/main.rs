//! justonce's integration tests: one binary, real components end to end.

mod support;

mod bad_input;
mod cli;
mod cli_outbound;
mod concurrency;
mod config_file;
mod contract;
mod fast_path;
mod first_record;
// Needs the fault-injection points, which release builds have only with the feature.
#[cfg(any(debug_assertions, feature = "fault-injection"))]
mod crash;
mod determinism;
mod http;
mod lease;
mod loading;
mod mcp_calls;
mod mcp_http;
mod mcp_http_cli;
mod mcp_protocol;
mod mcp_python;
mod outbox;
mod replay;
mod resolve;
mod retry;
mod sandbox;
