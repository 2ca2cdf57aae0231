//! One connection to an upstream, over either transport.

use std::time::Duration;

use serde_json::Value;

use super::client::{ClientError, StdioClient};
use super::http_client::HttpClient;
use crate::provider::ClientRequests;

/// A running stdio server, or a session with a Streamable HTTP one.
pub(crate) enum Connection {
    /// A child process on our pipes.
    Stdio(StdioClient),
    /// A server reached over HTTP.
    Http(HttpClient),
}

impl Connection {
    /// Whether it still answers (the process runs, the session stands).
    pub(crate) fn alive(&self) -> bool {
        match self {
            Self::Stdio(client) => client.alive(),
            Self::Http(client) => client.alive(),
        }
    }

    /// The `initialize` handshake.
    pub(crate) fn initialize(&self, timeout: Duration) -> Result<Value, ClientError> {
        match self {
            Self::Stdio(client) => client.initialize(timeout),
            Self::Http(client) => client.initialize(timeout),
        }
    }

    /// Request `method`, its effect key sent as `Idempotency-Key` over HTTP (the
    /// caller puts it in `_meta` for both); the upstream's progress reports are
    /// handed on, coalesced, as `progress_of`'s. A request under a key an earlier one
    /// still runs under waits for that one (see `StdioClient::request`,
    /// `HttpClient::request`). What the upstream asks of the client meanwhile is
    /// answered by `asks`.
    pub(crate) fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
        key_and_progress: (Option<&str>, Option<&str>),
        asks: Option<&dyn ClientRequests>,
    ) -> Result<Value, ClientError> {
        match self {
            Self::Stdio(client) => client.request(method, params, timeout, key_and_progress, asks),
            Self::Http(client) => client.request(method, params, timeout, key_and_progress, asks),
        }
    }

    /// Whether a request under `key` was sent on it and is not answered yet.
    pub(crate) fn running(&self, key: &str) -> bool {
        match self {
            Self::Stdio(client) => client.running(key),
            Self::Http(client) => client.running(key),
        }
    }

    /// Whether a request under `key` waits, parked, for the client's later answer
    /// to what the upstream asked (over stdio; a response stream cannot wait).
    pub(crate) fn asking(&self, key: &str) -> bool {
        match self {
            Self::Stdio(client) => client.asking(key),
            Self::Http(_) => false,
        }
    }
}
