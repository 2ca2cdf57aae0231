//! The HTTP server layer under every endpoint this host answers (inbound HTTP; the
//! outbound client is [`crate::http`]): hyper's HTTP/1.1 on tokio, and what every
//! endpoint gets from it alike. MCP's Streamable HTTP (`crate::mcp::http`), the
//! console (`crate::console`) and `/metrics` sit on top of it.
//!
//! - [`HttpServer`]: the accept loop, each connection and its requests, the origin
//!   and caller checks, the body read in time, and what is served: `/metrics`,
//!   [`Routes`], and one endpoint of a layer above (MCP's `/mcp`) through the
//!   `Endpoint` trait.
//! - [`wire`]: a request head as the endpoints read it, and a response to send (JSON,
//!   an SSE stream, text, or a body of its own type).
//! - [`connections`]: the open connections, and the cap on those that have not yet
//!   sent an authenticated request.
//! - [`deadline`]: the time a client gets to send a request, on the socket itself.
//! - [`admission`]: the per-principal cap on calls in flight (the `429`s).
//! - [`checks`]: `Origin` and `Host` against DNS rebinding, and who is calling (a
//!   bearer token of the tokens file, or an OAuth access token).
//! - [`Routes`]: pages served whole beside the MCP endpoint, or alone (the console).
//! - [`sse`]: server-sent event streams: one per key for a server's own messages,
//!   and a resumable record of a session's streams (`Last-Event-ID`).
//! - [`scrape`]: `GET /metrics` in Prometheus' text format, on the MCP server's
//!   listener or one of its own ([`MetricsServer`]).
//! - [`health`]: `/healthz`, `/livez` and `/readyz` for probes, unauthenticated, on
//!   both of those listeners.
//! - [`starting`]: the probes' answers on those listeners while `serve` waits for its
//!   journal at start, before any server runs.

pub(crate) mod admission;
pub(crate) mod checks;
pub(crate) mod connections;
pub(crate) mod deadline;
pub(crate) mod health;
mod routes;
pub(crate) mod scrape;
mod server;
pub(crate) mod sse;
pub(crate) mod starting;
pub(crate) mod wire;

pub use checks::OAuth;
pub use routes::{PlainRequest, PlainResponse, Routes};
pub use scrape::{METRICS_PATH, MetricsRunning, MetricsServer};
pub(crate) use server::{Answer, Endpoint};
pub use server::{HttpServer, Running, ServerOptions};
