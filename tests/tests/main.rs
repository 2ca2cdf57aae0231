//! justonce's integration tests: one binary, real components end to end.

mod support;

mod cli;
mod contract;
mod mcp_calls;
mod mcp_protocol;
mod mcp_python;
mod replay;
mod retry;
