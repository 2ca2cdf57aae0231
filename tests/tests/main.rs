//! justonce's integration tests: one binary, real components end to end.

mod support;

mod cli;
mod cli_outbound;
mod contract;
mod http;
mod outbox;
mod mcp_calls;
mod mcp_protocol;
mod mcp_python;
mod replay;
mod retry;
