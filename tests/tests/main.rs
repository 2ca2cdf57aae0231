//! justonce's integration tests: one binary, real components end to end.

mod support;

mod alerts;
mod ask;
mod author_mistakes;
mod bad_input;
mod cli;
mod cli_outbound;
mod concurrency;
mod console;
mod console_upstreams;
// A real Chromium driven by Playwright (skipped without them, but under CI=true).
mod config_file;
mod console_browser;
mod contract;
mod deploy_files;
mod fast_path;
mod first_record;
mod gateway_oauth;
mod gateway_questions;
mod gc_schedule;
mod guests;
mod handover;
mod health;
mod hostile;
// The Dockerfile's runtime stage built with buildah and run from its root filesystem
// (skipped without buildah or root, but under CI=true).
mod image;
// Needs the fault-injection points, which release builds have only with the feature.
#[cfg(any(debug_assertions, feature = "fault-injection"))]
mod crash;
mod determinism;
mod exact_numbers;
mod http;
// Python and JavaScript tools (builds them with the toolchains pinned in guest-sdk/).
mod lang;
mod lease;
mod loading;
mod logs;
mod mcp_ask;
mod mcp_calls;
mod mcp_conformance;
// The suite's 0.2 line (2026-07-28 and 2025-11-25).
mod mcp_conformance_next;
mod mcp_elicit;
mod mcp_elicit_python;
mod mcp_faults;
// pydantic-ai, the OpenAI Agents SDK and langchain-mcp-adapters (skipped without them, but under CI=true).
mod mcp_frameworks;
// MCP servers no one here wrote behind the host (skipped without node or the SDK, but under CI=true).
mod mcp_gateway;
// Resources, prompts, completion and logs of upstreams, side by side with the servers
// talked to directly (skipped without node or the SDK, but under CI=true).
mod gateway_subscriptions;
mod gateway_surface;
// An upstream that echoes the credentials it was handed (skipped without the SDK, but under CI=true).
mod mcp_gateway_credentials;
// An upstream that hangs beside a healthy one (skipped without the SDK, but under CI=true).
mod mcp_gateway_hung;
// An upstream that answers late and floods progress (skipped without the SDK, but under CI=true).
mod mcp_gateway_late;
// Probes of an upstream's write tools, on the tests' ledger (skipped without the SDK, but under CI=true).
mod mcp_ask_person;
mod mcp_gateway_probes;
// Upstreams over Streamable HTTP as they come and go (skipped without the SDK, but under CI=true).
mod mcp_gateway_http;
mod mcp_hidden;
mod mcp_http;
mod mcp_http_cli;
mod mcp_logging;
mod mcp_oauth;
mod mcp_progress;
mod mcp_protocol;
mod mcp_python;
mod mcp_resume;
mod mcp_scope;
mod mcp_tasks;
// The Python SDK's tasks client on a PostgreSQL pair (skipped without them, but under CI=true).
mod mcp_tasks_python;
mod mcp_told;
mod metrics;
mod new_tool;
mod operate;
// The invocation key against the parsed_echo guest's own view of its arguments.
mod oracle;
mod outbox;
mod read_only;
mod readme;
mod reconcile;
mod registry;
mod reload;
mod replay;
mod resolve;
mod restore;
mod retry;
mod rich;
mod rollout;
mod sandbox;
mod secrets;
mod several_hosts;
mod tokens_journal;
mod traces;
mod upgrade;
