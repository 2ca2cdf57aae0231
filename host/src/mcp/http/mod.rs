//! MCP's Streamable HTTP transport on one endpoint, `/mcp`, for the same
//! [`Server`] that speaks stdio: one protocol implementation,
//! two transports. The HTTP server itself (connections, deadlines, caps, origin and
//! token checks, `/metrics`, the console's routes) is [`crate::serving`]'s
//! [`HttpServer`]; this module is the endpoint it hands `/mcp` to ([`server`] builds
//! the two together).
//!
//! - `POST /mcp` carries one JSON-RPC message. A request is answered as
//!   `application/json`, or as a one-event `text/event-stream` when the client
//!   accepts only that (or [`HttpOptions::prefer_sse`]); a notification or response
//!   gets `202`. `GET` with a session's `Mcp-Session-Id` opens that session's
//!   stream of the server's own messages (`notifications/tools/list_changed` when
//!   a reload changed the tools); without a session it is `405`.
//! - A session's `tools/call` answered as a stream (also when the call has a
//!   progress token or log level and the client accepts a stream) is answered at
//!   once: the call runs on a blocking thread and its progress, log lines and answer
//!   are events as they happen, each with an id and kept in the session's bounded
//!   record (`replay.rs`); a client whose stream broke `GET`s the rest with
//!   `Last-Event-ID`.
//! - `initialize` (revisions 2024-11-05 to 2025-11-25) opens a session whose id comes
//!   back in `Mcp-Session-Id` and must come with every later request; `DELETE` ends
//!   it. A request carrying the 2026-07-28 `_meta` envelope is stateless and must
//!   repeat its version, method and tool in `MCP-Protocol-Version`, `Mcp-Method` and
//!   `Mcp-Name`.
//! - Every request needs an agent's token (checked by the server); the token names
//!   the principal, and the principal is part of the scope of every key its calls run
//!   under. Each principal gets a bounded number of calls in flight and of sessions
//!   (`429` with `Retry-After` past them). A task resumed by the `tasks/update` that
//!   completed its answers is a call in flight too: past the cap, that update is
//!   answered the same way (its answers kept for the next one).
//! - A failure of the host itself (the journal unreachable, say) is told to the
//!   client by kind with an error id, never with its detail (a database URL, a
//!   driver's message); the log has the detail under the same id.
//! - A client that hangs up mid-call does not cancel the call: it runs to its
//!   outcome and keeps its record, and the retry gets that outcome.

mod exchange;
mod sessions;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use bytes::Bytes;

pub use super::protocol::TOO_MANY_CALLS;
pub use crate::serving::sse::ReplayCaps;

use self::exchange::refusal;
use self::sessions::Sessions;
use super::Server;
use super::protocol::INVALID_REQUEST;
use crate::auth::tokens::{Role, Tokens};
use crate::serving::admission::Admission;
use crate::serving::sse::Streams;
use crate::serving::wire::{Head, Response};
use crate::serving::{Answer, Endpoint, HttpServer, ServerOptions};

/// The path of the MCP endpoint.
pub const ENDPOINT: &str = "/mcp";

/// The limits and choices of the HTTP transport.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpOptions {
    /// The limits of the HTTP server: origins, caps on heads, bodies and
    /// connections, and the time a client gets.
    pub server: ServerOptions,
    /// Tool calls one principal may have in flight; more are refused with 429.
    pub max_calls_per_principal: usize,
    /// Sessions kept open in all; past it, `initialize` gets 503.
    pub max_sessions: usize,
    /// Sessions one principal may keep open; past it, its `initialize` gets 429.
    pub max_sessions_per_principal: usize,
    /// How long a session may go unused before it expires.
    pub session_idle_timeout: Duration,
    /// Answer requests as an SSE stream whenever the client accepts one.
    pub prefer_sse: bool,
    /// How long a call's event stream is held open before the server ends it and
    /// the client comes back with `Last-Event-ID` for the rest (SSE polling, for
    /// proxies that cut long responses); `None`: until the answer. Only streams
    /// that began with a priming event (sessions at 2025-11-25 or later) are ended.
    pub stream_hold: Option<Duration>,
    /// How many events, and bytes of them, each session keeps for clients that
    /// resume a stream.
    pub replay: ReplayCaps,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            server: ServerOptions::default(),
            max_calls_per_principal: 8,
            max_sessions: 4096,
            max_sessions_per_principal: 64,
            session_idle_timeout: Duration::from_secs(3600),
            prefer_sse: false,
            stream_hold: None,
            replay: ReplayCaps::default(),
        }
    }
}

/// An HTTP server with `server`'s tools at `/mcp` for the holders of `tokens`, and
/// its host's counters at `/metrics`. Add the console with
/// [`HttpServer::with_routes`] and OAuth with [`HttpServer::with_oauth`].
pub fn server(server: Server, tokens: impl Into<Arc<Tokens>>, options: HttpOptions) -> HttpServer {
    let admission = Admission::new(options.max_calls_per_principal);
    admitting(server, tokens, options, admission)
}

/// [`server`], counting each principal's calls in flight in `admission` (made for
/// `options.max_calls_per_principal`), which the console's "Resume now" shares
/// (`serve --http`): every run of a principal's call counts against one cap.
pub(crate) fn admitting(
    server: Server,
    tokens: impl Into<Arc<Tokens>>,
    options: HttpOptions,
    admission: Admission,
) -> HttpServer {
    let host = Arc::clone(server.host());
    HttpServer::new(tokens, options.server.clone())
        .with_metrics(host)
        .with_endpoint(Arc::new(McpEndpoint::new(server, options, admission)))
}

/// `/mcp`: the MCP server behind it, and what the transport keeps between requests.
struct McpEndpoint {
    server: Server,
    options: HttpOptions,
    sessions: Arc<Sessions>,
    admission: Admission,
    streams: Arc<Streams>,
    /// The open `subscriptions/listen` streams (stateless), each under a name of its
    /// own (`listen-N`): each is forgotten when its client hangs up or it is refused,
    /// and they all end when the server stops.
    listens: Arc<Streams>,
    /// The number of the next listen stream.
    next_listen: std::sync::atomic::AtomicU64,
    /// The listen streams open, by principal (at most `MAX_LISTENS` each): counted
    /// as calls in flight are, each permit held with its stream.
    listen_cap: Admission,
    /// When the sessions were last swept for the expired ones (ms, the host's
    /// clock).
    swept: Arc<AtomicI64>,
    /// The catalog listener that feeds `streams`.
    listener: u64,
    /// The listener of the upstreams' news of their resources and prompts.
    relayed: u64,
}

impl Drop for McpEndpoint {
    fn drop(&mut self) {
        self.server.catalog().unlisten(self.listener);
        self.server.relay().unlisten(self.relayed);
    }
}

impl std::fmt::Debug for McpEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpEndpoint")
            .field("server", &self.server)
            .field("options", &self.options)
            .finish()
    }
}

impl McpEndpoint {
    fn new(server: Server, options: HttpOptions, admission: Admission) -> Self {
        // Clients with a stream open hear when the tools change.
        let streams = Arc::new(Streams::default());
        let notified = Arc::clone(&streams);
        let listener = server.catalog().listen(Box::new(move || {
            notified.send(&super::catalog::list_changed());
        }));
        let sessions = Arc::new(Sessions::new(
            options.max_sessions,
            options.max_sessions_per_principal,
            options.session_idle_timeout,
            options.replay,
        ));
        // A list that changed goes to every open stream, an updated resource to
        // the streams of the sessions that subscribed to it.
        let (notified, subscribers) = (Arc::clone(&streams), Arc::downgrade(&sessions));
        let relayed = server.relay().listen(Arc::new(move |news| match news {
            crate::upstream::SurfaceNews::Updated(uri) => {
                let Some(sessions) = subscribers.upgrade() else {
                    return;
                };
                let note = super::surface::updated(uri);
                for session in sessions.subscribers(uri) {
                    notified.send_to(&session, &note);
                }
            }
            news => {
                if let Some(note) = super::surface::list_changed(news) {
                    notified.send(&note);
                }
            }
        }));
        let swept = Arc::new(AtomicI64::new(i64::MIN));
        sweep_while(
            Arc::downgrade(&sessions),
            Arc::clone(server.host()),
            Arc::clone(&swept),
        );
        Self {
            swept,
            streams,
            listens: Arc::default(),
            next_listen: Default::default(),
            listen_cap: Admission::new(crate::mcp::listen::MAX_LISTENS),
            listener,
            relayed,
            sessions,
            admission,
            server,
            options,
        }
    }
}

impl McpEndpoint {
    /// Now, on the host's clock (ms): sessions expire by it.
    fn now(&self) -> i64 {
        self.server.host().clock().now_ms()
    }

    /// Ends the subscriptions of the sessions that expired (at most once per
    /// [`SWEEP_EVERY`] of the host's clock), on a thread of its own: an upstream
    /// is told when a session that expired held its last subscription to a URI.
    fn end_expired(&self) {
        end_expired(&self.sessions, self.server.host(), &self.swept);
    }
}

/// How often, at most, the sessions are swept for the expired ones.
const SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// [`McpEndpoint::end_expired`], for the endpoint and its sweeper.
fn end_expired(sessions: &Sessions, host: &Arc<crate::host::Host>, swept: &AtomicI64) {
    let now = host.clock().now_ms();
    let last = swept.load(Ordering::Relaxed);
    if now.saturating_sub(last) < crate::clock::millis(SWEEP_EVERY)
        || swept
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
    {
        return;
    }
    let gone = sessions.sweep(now);
    if gone.is_empty() {
        return;
    }
    let host = Arc::clone(host);
    let _ = std::thread::Builder::new()
        .name("justonce-mcp-unsubscribe".into())
        .spawn(move || gone.iter().for_each(|subscribed| subscribed.end(&host)));
}

/// Sweeps `sessions` while they exist, every [`SWEEP_EVERY`] (an idle server
/// ends the subscriptions of its expired sessions too).
fn sweep_while(
    sessions: std::sync::Weak<Sessions>,
    host: Arc<crate::host::Host>,
    swept: Arc<AtomicI64>,
) {
    let _ = std::thread::Builder::new()
        .name("justonce-mcp-sessions".into())
        .spawn(move || {
            while let Some(sessions) = sessions.upgrade() {
                end_expired(&sessions, &host, &swept);
                drop(sessions);
                std::thread::sleep(SWEEP_EVERY);
            }
        });
}

impl Endpoint for McpEndpoint {
    fn path(&self) -> &str {
        ENDPOINT
    }

    fn single_headers(&self) -> &[&str] {
        &[
            "mcp-session-id",
            "mcp-protocol-version",
            "mcp-method",
            "mcp-name",
            // Two conversations or keys for one call: refused, never one picked.
            "justonce-conversation",
            "idempotency-key",
        ]
    }

    fn role_refused(&self, role: Role) -> String {
        format!(
            "a token with the role {role} opens the console at /console and calls no \
             tool; an agent's token does (justonce token add NAME --role agent)"
        )
    }

    fn admit(&self, head: &Head) -> Result<Option<usize>, Response> {
        match head.method.as_str() {
            "POST" => self.admit_post(head).map(Some),
            "DELETE" | "GET" => Ok(None),
            _ => Err(
                refusal(405, None, INVALID_REQUEST, "POST JSON-RPC messages to /mcp")
                    .with("allow", "GET, POST, DELETE"),
            ),
        }
    }

    fn respond(&self, head: &Head, principal: &str, body: Bytes) -> Answer {
        self.end_expired();
        let response = match head.method.as_str() {
            "DELETE" => self.delete(head, principal),
            "GET" => match self.open_stream(head, principal) {
                Ok(stream) => return Answer::Ready(stream),
                Err(refused) => refused,
            },
            _ => {
                return self
                    .post(head, principal, &body)
                    .map(|response| response.into_hyper(false));
            }
        };
        Answer::Ready(response.into_hyper(false))
    }

    fn stop(&self) {
        // A session's stream lasts until it is ended: end them all.
        self.streams.close_all();
        self.listens.close_all();
    }
}
