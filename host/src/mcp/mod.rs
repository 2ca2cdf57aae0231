//! An MCP server for the host's tools, with the guard on every call.
//!
//! Two transports over one protocol implementation: JSON-RPC 2.0 over stdio, one
//! message per line (only protocol messages go to the output, logs go to stderr), and
//! Streamable HTTP with bearer tokens ([`http`], on [`crate::serving`], with
//! [`crate::auth::tokens`]). It speaks the `initialize` handshake (revisions
//! 2024-11-05 to 2025-11-25; a client asking for another gets 2025-11-25) and the
//! stateless revision 2026-07-28 (`server/discover`, the version in every request's
//! `_meta`), whichever the client opens with.
//!
//! - `tools/list`: name, description, `inputSchema` from the tool's `describe`, and
//!   `annotations.idempotentHint: true`; not the tools kept from MCP
//!   (`[tools.NAME] mcp = false`), whose calls are answered as of unknown tools.
//!   After a reload changed the tools ([`Catalog::refresh`]), clients get
//!   `notifications/tools/list_changed` (`initialize` advertises `listChanged`).
//! - `tools/call`: the conversation is `_meta["dev.justonce/conversation"]`, else the
//!   server's [`ServerConfig::conversation`], else [`crate::host::DEFAULT_SCOPE`]; an
//!   explicit key may come as `params.idempotencyKey` (SEP-3182) or
//!   `_meta["dev.justonce/idempotency-key"]`. Over HTTP the principal is part of
//!   every key's scope, explicit keys included. The result has
//!   the JSON as text and as `structuredContent`, and `_meta["dev.justonce/replayed"]`
//!   and `_meta["dev.justonce/key"]`. See [`tools`] for how errors map.
//! - A tool that asks the person behind the agent (issue 43): on the stateless wire
//!   the call answers `resultType: "input_required"` with the questions and a
//!   `requestState`, and the same call made again with `inputResponses` and that
//!   state resumes it (`mrtr`); a session's client is asked with `elicitation/create`
//!   while the call runs (`elicit`).
//! - The resources, resource templates, prompts and completion of upstream MCP
//!   servers pass through (`surface`): reads, never journaled, under
//!   `justonce://UPSTREAM/URI` and the upstream's `prefix`, with their `list_changed`
//!   and a subscription's `updated` relayed: to a session that subscribed, or to a
//!   stateless client's `subscriptions/listen` stream (`listen`).
//! - Calls run concurrently on up to [`ServerConfig::max_concurrent_calls`] workers,
//!   so two identical calls in flight coalesce in the invocation guard.
//! - `notifications/cancelled` withholds the response but lets the call run to its
//!   outcome and keep its record, so a retry gets that outcome. A call cancelled
//!   before a worker picked it up is not run at all.
//!
//! ```no_run
//! use std::sync::Arc;
//! use justonce::Host;
//! use justonce::__private::{Server, ServerConfig};
//!
//! # fn main() -> anyhow::Result<()> {
//! let host = Arc::new(Host::builder().database(".justonce/state.db").example_tools().build()?);
//! let server = Server::new(host, ServerConfig::default());
//! server.serve(std::io::stdin().lock(), std::io::stdout())?;
//! # Ok(())
//! # }
//! ```

mod catalog;
mod elicit;
pub mod http;
mod job_queue;
mod listen;
mod mrtr;
pub mod protocol;
mod server;
mod session;
mod surface;
mod task_input;
pub mod tasks;
pub mod tools;
mod upstream_tools;

pub use catalog::{Catalog, LIST_CHANGED};
pub use elicit::DEFAULT_ASK_TIMEOUT;
pub use http::{HttpOptions, server as http_server};
pub use server::{MAX_QUEUED_CALLS, Server, Shutdown};

use crate::retention::Unscoped;

/// How long `justonce serve` lets a duplicate wait for the first call of its key
/// before answering it `in_progress` (retry-safe), unless configured: below the
/// shortest common client timeout (the OpenAI Agents SDK's 5 s), so the client reads
/// an answer that says to retry instead of timing out on its own.
pub const DEFAULT_ANSWER_WITHIN: std::time::Duration = std::time::Duration::from_secs(4);

/// How the server runs calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// The conversation a call runs in when its request names none.
    pub conversation: Option<String>,
    /// How many tool calls run at once; more wait in a queue.
    pub max_concurrent_calls: usize,
    /// What a call that names no conversation and no key gets (with no
    /// [`ServerConfig::conversation`] either).
    pub unscoped: Unscoped,
    /// When a call is answered with a task (the Tasks extension, [`tasks`]).
    pub tasks: tasks::TaskSettings,
    /// How long a call of a session's client waits for the answer to each question
    /// its tool asks (`elicitation/create`); past it the call ends without an answer
    /// (`input_unavailable`, resumable).
    pub ask_timeout: std::time::Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            conversation: None,
            max_concurrent_calls: 16,
            unscoped: Unscoped::Window,
            tasks: tasks::TaskSettings::default(),
            ask_timeout: DEFAULT_ASK_TIMEOUT,
        }
    }
}

impl ServerConfig {
    /// How a call finds its scope on a connection without headers (stdio).
    pub(crate) fn scoping(&self) -> tools::Scoping<'_> {
        tools::Scoping {
            conversation: self.conversation.as_deref(),
            headers: None,
            unscoped: self.unscoped,
            session: None,
        }
    }
}
