//! MCP's Streamable HTTP transport on one endpoint, `/mcp`, for the same
//! [`Server`](crate::mcp::Server) that speaks stdio: one protocol implementation,
//! two transports.
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
//! - `GET /metrics` serves the host's counters in Prometheus' text format
//!   (`crate::serving::scrape`), to any valid token.
//! - Every request needs `Authorization: Bearer <token>` from the tokens file
//!   ([`crate::auth::tokens`]), or, with [`HttpServer::with_oauth`], an OAuth access
//!   token of the configured issuer ([`crate::auth::oauth`]); the token names the
//!   principal, and the principal is part of the scope of every key its calls run
//!   under. Missing or refused: `401` with `WWW-Authenticate` (naming the Protected
//!   Resource Metadata under OAuth; `403` for a missing scope), and nothing runs.
//! - Safe by default: `Origin` and (on a loopback listener) `Host` are checked
//!   against DNS rebinding, heads and bodies are capped, a client gets a bounded time
//!   to send its request head and body, each principal a bounded number of calls in
//!   flight and of sessions (`429` with `Retry-After` past them), connections that
//!   have not yet sent an authenticated request a small cap of their own (the oldest
//!   is closed past it), and the server a bounded number of connections (`503` past
//!   it). TLS is left to a reverse proxy (see the README).
//! - HTTP/1.1 is hyper's, on a tokio runtime of a few threads: a connection waiting
//!   for its client costs no thread, and a tool call runs on a blocking thread
//!   (`block_in_place`), never stalling the others.
//! - A failure of the host itself (the journal unreachable, say) is told to the
//!   client by kind with an error id, never with its detail (a database URL, a
//!   driver's message); the log has the detail under the same id.
//! - A client that hangs up mid-call does not cancel the call: it runs to its
//!   outcome and keeps its record, and the retry gets that outcome.
//! - Other [`Routes`] (the console) may be served beside `/mcp`, or alone
//!   ([`HttpServer::routes_only`]), behind the same origin checks, caps and deadlines.

mod exchange;
mod replay;
mod sessions;
mod streams;

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use hyper::service::service_fn;
use tokio::sync::watch;

pub use exchange::TOO_MANY_CALLS;
pub use replay::ReplayCaps;

use self::exchange::{Admitted, refusal};
use self::sessions::Sessions;
use self::streams::Streams;
use super::Server;
use super::protocol::INVALID_REQUEST;
use crate::auth::oauth;
use crate::auth::tokens::Tokens;
use crate::serving::admission::Admission;
use crate::serving::checks::{OAuth, Origins};
use crate::serving::connections::Connections;
use crate::serving::deadline::{Bounds, Deadlined, Phase};
use crate::serving::scrape;
use crate::serving::wire::{self, Head, Payload};
use crate::serving::{PlainRequest, Routes};

/// The path of the MCP endpoint.
pub const ENDPOINT: &str = "/mcp";

/// The most header lines a request may have (431 past it).
const MAX_HEADERS: usize = 64;

/// The limits and choices of the HTTP transport.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpOptions {
    /// Browser origins allowed besides loopback ones (`https://app.example.com`).
    pub allowed_origins: Vec<String>,
    /// The largest request head (request line and headers), in bytes.
    pub max_header_bytes: usize,
    /// The largest request body, in bytes.
    pub max_body_bytes: usize,
    /// Tool calls one principal may have in flight; more are refused with 429.
    pub max_calls_per_principal: usize,
    /// Connections open at once; past it, the oldest one without an authenticated
    /// request is closed, and when there is none the newcomer gets 503.
    pub max_connections: usize,
    /// Connections open at once that have not yet sent an authenticated request;
    /// one more closes the one that has waited longest.
    pub max_unauthenticated_connections: usize,
    /// Sessions kept open in all; past it, `initialize` gets 503.
    pub max_sessions: usize,
    /// Sessions one principal may keep open; past it, its `initialize` gets 429.
    pub max_sessions_per_principal: usize,
    /// How long a session may go unused before it expires.
    pub session_idle_timeout: Duration,
    /// How long a kept-alive connection may sit idle between requests.
    pub idle_timeout: Duration,
    /// How long a client may take to send a request head once it began it.
    pub head_timeout: Duration,
    /// How long a client may take to send a whole request once it began it.
    pub request_timeout: Duration,
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
            allowed_origins: Vec::new(),
            max_header_bytes: 16 * 1024,
            max_body_bytes: 4 << 20,
            max_calls_per_principal: 8,
            max_connections: 1024,
            max_unauthenticated_connections: 64,
            max_sessions: 4096,
            max_sessions_per_principal: 64,
            session_idle_timeout: Duration::from_secs(3600),
            idle_timeout: Duration::from_secs(60),
            head_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            prefer_sse: false,
            stream_hold: None,
            replay: ReplayCaps::default(),
        }
    }
}

/// An MCP server on HTTP. Build it with [`HttpServer::new`]; run it with
/// [`HttpServer::serve`] (blocking) or [`HttpServer::spawn`].
pub struct HttpServer {
    /// The MCP server behind `/mcp`; `None`: only `routes` are served.
    server: Option<Server>,
    routes: Option<Arc<dyn Routes>>,
    tokens: Tokens,
    /// OAuth access tokens accepted beside `tokens`, when configured.
    oauth: Option<OAuth>,
    options: HttpOptions,
    sessions: Sessions,
    admission: Admission,
    connections: Connections,
    origins: OnceLock<Origins>,
    stop: watch::Sender<bool>,
    streams: Arc<Streams>,
    /// The catalog listener that feeds `streams` (none without MCP).
    listener: Option<u64>,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        if let (Some(server), Some(listener)) = (&self.server, self.listener) {
            server.catalog().unlisten(listener);
        }
    }
}

impl std::fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServer")
            .field("server", &self.server)
            .field("routes", &self.routes)
            .field("tokens", &self.tokens.path())
            .field("oauth", &self.oauth)
            .field("options", &self.options)
            .finish()
    }
}

impl HttpServer {
    /// Serves `server`'s tools to the holders of `tokens`.
    pub fn new(server: Server, tokens: Tokens, options: HttpOptions) -> Self {
        Self::build(Some(server), tokens, options)
    }

    /// Serves only `routes` (`/mcp` is 404): the console of a host that serves MCP
    /// over stdio, or not at all.
    pub fn routes_only(routes: Arc<dyn Routes>, tokens: Tokens, options: HttpOptions) -> Self {
        Self::build(None, tokens, options).with_routes(routes)
    }

    /// Serves `routes` beside `/mcp`.
    pub fn with_routes(mut self, routes: Arc<dyn Routes>) -> Self {
        self.routes = Some(routes);
        self
    }

    /// Also accepts OAuth 2.1 access tokens: `oauth`'s validator checks them, and
    /// `/.well-known/oauth-protected-resource` (alone, or followed by the resource's
    /// path) serves the metadata clients discover the authorization server from.
    pub fn with_oauth(mut self, oauth: OAuth) -> Self {
        self.oauth = Some(oauth);
        self
    }

    fn build(server: Option<Server>, tokens: Tokens, options: HttpOptions) -> Self {
        // Clients with a stream open hear when the tools change.
        let streams = Arc::new(Streams::default());
        let notified = Arc::clone(&streams);
        let listener = server.as_ref().map(|server| {
            server.catalog().listen(Box::new(move || {
                notified.send(&super::catalog::list_changed());
            }))
        });
        Self {
            routes: None,
            streams,
            listener,
            sessions: Sessions::new(
                options.max_sessions,
                options.max_sessions_per_principal,
                options.session_idle_timeout,
                options.replay,
            ),
            admission: Admission::new(options.max_calls_per_principal),
            connections: Connections::new(
                options.max_connections,
                options.max_unauthenticated_connections,
            ),
            server,
            tokens,
            oauth: None,
            options,
            origins: OnceLock::new(),
            stop: watch::Sender::new(false),
        }
    }

    fn origins(&self) -> &Origins {
        self.origins
            .get_or_init(|| Origins::new(&self.options.allowed_origins, true))
    }

    /// Serves connections from `listener` until [`Running::stop`] (or forever).
    pub fn serve(self, listener: TcpListener) -> io::Result<()> {
        Arc::new(self).run(listener)
    }

    /// Serves `listener` on a thread of its own.
    pub fn spawn(self, listener: TcpListener) -> io::Result<Running> {
        let addr = listener.local_addr()?;
        let server = Arc::new(self);
        let serving = Arc::clone(&server);
        let handle = std::thread::Builder::new()
            .name("justonce-http".into())
            .spawn(move || serving.run(listener))?;
        Ok(Running {
            addr,
            server,
            handle: Some(handle),
        })
    }

    /// Runs the server on a runtime of its own until stopped; returns once every
    /// connection is closed and every call under way has finished.
    fn run(self: Arc<Self>, listener: TcpListener) -> io::Result<()> {
        let loopback = listener.local_addr()?.ip().is_loopback();
        let _ = self
            .origins
            .set(Origins::new(&self.options.allowed_origins, loopback));
        listener.set_nonblocking(true)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("justonce-http")
            .enable_all()
            .build()?;
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener)?;
            let mut stop = self.stop.subscribe();
            let mut tasks = tokio::task::JoinSet::new();
            loop {
                let accepted = tokio::select! {
                    accepted = listener.accept() => accepted,
                    _ = stop.wait_for(|s| *s) => break,
                };
                let (stream, _) = match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        tracing::warn!("accepting a connection: {e}");
                        continue;
                    }
                };
                let server = Arc::clone(&self);
                tasks.spawn(async move { server.connection(stream).await });
                while tasks.try_join_next().is_some() {}
            }
            drop(listener);
            self.connections.close_anonymous();
            while tasks.join_next().await.is_some() {}
            Ok(())
        })
    }

    /// Serves one connection: its requests in order, until it closes, idles out,
    /// errs, is evicted, or the server stops (between requests).
    async fn connection(self: Arc<Self>, stream: tokio::net::TcpStream) {
        let _ = stream.set_nodelay(true);
        let Some(slot) = self.connections.admit() else {
            tracing::warn!("every connection place is held; answering 503");
            let busy =
                refusal(503, None, INVALID_REQUEST, "the server is busy").with("retry-after", "1");
            let _ = stream.try_write(&busy.to_closing_bytes());
            return;
        };
        let o = &self.options;
        let late = refusal(
            408,
            None,
            INVALID_REQUEST,
            "the request was not sent in time",
        );
        let bounds = Arc::new(Bounds {
            idle: o.idle_timeout,
            head: o.head_timeout.min(o.request_timeout),
            late: late.to_closing_bytes(),
        });
        let phase = Arc::new(Phase::default());
        let io = hyper_util::rt::TokioIo::new(Deadlined::new(stream, Arc::clone(&phase), bounds));
        let slot = &slot;
        let service = service_fn(|request| {
            let server = Arc::clone(&self);
            let phase = Arc::clone(&phase);
            async move {
                let began = phase.request_began();
                let mut response = server
                    .exchange(request, began, || slot.authenticated())
                    .await;
                if response.body().is_event_stream() {
                    // The request lasts as long as its stream.
                    response.body_mut().end_with(phase);
                } else {
                    phase.request_ended();
                }
                Ok::<_, std::convert::Infallible>(response)
            }
        });
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .max_headers(MAX_HEADERS)
            .max_header_size(o.max_header_bytes)
            .timer(hyper_util::rt::TokioTimer::new())
            .header_read_timeout(None);
        let connection = builder.serve_connection(io, service);
        tokio::pin!(connection);
        let mut stop = self.stop.subscribe();
        let mut stopping = false;
        loop {
            tokio::select! {
                ended = connection.as_mut() => {
                    if let Err(e) = ended {
                        tracing::debug!("connection ended: {e}");
                    }
                    return;
                }
                () = slot.close.notified() => return,
                _ = stop.wait_for(|s| *s), if !stopping => {
                    stopping = true;
                    connection.as_mut().graceful_shutdown();
                }
            }
        }
    }

    /// One request, from its head to its response.
    async fn exchange(
        &self,
        request: hyper::Request<Incoming>,
        began: tokio::time::Instant,
        authenticated: impl FnOnce(),
    ) -> hyper::Response<Payload> {
        let head = Head::of(&request);
        if let Some(oauth) = &self.oauth
            && self.server.is_some()
            && oauth::is_metadata_path(&head.path, oauth.validator.settings())
        {
            return resource_metadata(&head, oauth).into_hyper(false);
        }
        if scrape::is_metrics(&head.path) {
            let response = self.scrape(&head);
            if response.status == 200 {
                authenticated();
            }
            return response.into_hyper(false);
        }
        if let Some(routes) = &self.routes
            && routes.serves(head.path.split('?').next().unwrap_or(""))
        {
            return self.routed(routes, request, head, began).await;
        }
        let response = match self.admit(&head) {
            // The body, if any, is left unread: the connection cannot go on.
            Err(refused) => return refused.into_hyper(true),
            Ok(Admitted::Delete { principal }) => {
                authenticated();
                self.delete(&head, &principal)
            }
            Ok(Admitted::Get { principal }) => {
                authenticated();
                match self.open_stream(&head, &principal) {
                    Ok(stream) => return stream,
                    Err(refused) => refused,
                }
            }
            Ok(Admitted::Post { principal, length }) => {
                authenticated();
                match self.body(request, length, began).await {
                    Err(refused) => return refused.into_hyper(true),
                    Ok(body) => self.post(&head, &principal, &body),
                }
            }
        };
        response.into_hyper(false)
    }

    /// `/metrics`, for any valid bearer token (and the same `Origin` and `Host`
    /// checks as `/mcp`); 404 on a server without MCP (the console alone).
    fn scrape(&self, head: &Head) -> wire::Response {
        if let Some((status, why)) = self.origins().check(head) {
            tracing::warn!(status, "{why}");
            return refusal(status, None, INVALID_REQUEST, &why);
        }
        let Some(server) = &self.server else {
            return wire::Response::plain(
                404,
                "text/plain; charset=utf-8",
                b"no such path".to_vec(),
            );
        };
        scrape::answer(server.host(), head, Some(&self.tokens))
    }

    /// Reads a body of `length` bytes (at most) within the request's time; `Err` is
    /// the answer to close the connection with.
    async fn body(
        &self,
        request: hyper::Request<Incoming>,
        length: usize,
        began: tokio::time::Instant,
    ) -> Result<bytes::Bytes, wire::Response> {
        let deadline = began + self.options.request_timeout;
        let body = http_body_util::Limited::new(request.into_body(), length.max(1));
        match tokio::time::timeout_at(deadline, body.collect()).await {
            Err(_) => {
                tracing::info!("a client was too slow sending its request; closing");
                Err(refusal(
                    408,
                    None,
                    INVALID_REQUEST,
                    "the request was not sent in time",
                ))
            }
            Ok(Err(e)) => {
                tracing::debug!("reading a request body: {e}");
                Err(refusal(
                    400,
                    None,
                    INVALID_REQUEST,
                    "the body could not be read",
                ))
            }
            Ok(Ok(body)) => Ok(body.to_bytes()),
        }
    }

    /// A request to one of the other `routes`: the origin checked, the body capped
    /// and read in time, then answered on a blocking thread.
    async fn routed(
        &self,
        routes: &Arc<dyn Routes>,
        request: hyper::Request<Incoming>,
        head: Head,
        began: tokio::time::Instant,
    ) -> hyper::Response<Payload> {
        let plain = |status: u16, why: &str| {
            wire::Response::plain(status, "text/plain; charset=utf-8", why.as_bytes().to_vec())
        };
        if let Some((status, why)) = self.origins().check(&head) {
            tracing::warn!(status, "{why}");
            return plain(status, &why).into_hyper(true);
        }
        let length = match head
            .header("content-length")
            .map(|l| l.trim().parse::<usize>())
        {
            None => 0,
            Some(Ok(length)) if length <= self.options.max_body_bytes => length,
            Some(Ok(_)) => return plain(413, "the body is too large").into_hyper(true),
            Some(Err(_)) => {
                return plain(400, "the Content-Length is not a number").into_hyper(true);
            }
        };
        if head.header("transfer-encoding").is_some() {
            return plain(501, "send the body with a Content-Length").into_hyper(true);
        }
        let body = if length == 0 {
            Vec::new()
        } else {
            match self.body(request, length, began).await {
                Err(refused) => return refused.into_hyper(true),
                Ok(body) => body.to_vec(),
            }
        };
        let request = PlainRequest {
            method: head.method,
            target: head.path,
            headers: head.headers,
            body,
        };
        let answer = tokio::task::block_in_place(|| routes.respond(&request));
        let mut response = wire::Response::plain(answer.status, "", answer.body);
        response.headers = answer
            .headers
            .into_iter()
            .map(|(name, value)| (name.into(), value))
            .collect();
        response.into_hyper(false)
    }

    /// Stops accepting, and ends every connection between requests (a call under
    /// way finishes and keeps its record).
    fn stop(&self) {
        self.stop.send_replace(true);
        // A session's stream lasts until it is ended: end them all.
        self.streams.close_all();
    }
}

/// Protected Resource Metadata (RFC 9728): public, read by clients before they have
/// a token, so no token nor `Origin` check (it says nothing secret).
fn resource_metadata(head: &Head, oauth: &OAuth) -> wire::Response {
    if head.method != "GET" {
        return refusal(405, None, INVALID_REQUEST, "GET the metadata").with("allow", "GET");
    }
    let doc = oauth::protected_resource_metadata(oauth.validator.settings());
    wire::Response::message(200, wire::Kind::Json, &doc)
        .with("cache-control", "max-age=3600")
        .with("access-control-allow-origin", "*")
}

/// A server running on its own thread; dropping it stops it.
#[derive(Debug)]
pub struct Running {
    addr: SocketAddr,
    server: Arc<HttpServer>,
    handle: Option<JoinHandle<io::Result<()>>>,
}

impl Running {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The endpoint's URL.
    pub fn url(&self) -> String {
        format!("http://{}{ENDPOINT}", self.addr)
    }

    /// Stops it and waits until its connections are closed.
    pub fn stop(mut self) -> io::Result<()> {
        self.finish()
    }

    fn finish(&mut self) -> io::Result<()> {
        let Some(handle) = self.handle.take() else {
            return Ok(());
        };
        self.server.stop();
        handle
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the HTTP server panicked")))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}
