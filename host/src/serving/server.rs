//! The HTTP server every endpoint of the host is served by: hyper's HTTP/1.1 on a
//! tokio runtime of a few threads, where a connection waiting for its client costs no
//! thread and a blocking answer (a tool call, a journal query) runs on a blocking
//! thread (`block_in_place`), never stalling the others.
//!
//! What it serves, in this order:
//!
//! - `GET /.well-known/oauth-protected-resource` (alone, or followed by the
//!   resource's path), with [`HttpServer::with_oauth`] and an endpoint: the Protected
//!   Resource Metadata clients discover the authorization server from.
//! - `GET /metrics`: the host's counters in Prometheus' text format ([`scrape`]), to
//!   any valid token, with [`HttpServer::with_metrics`] (404 without).
//! - `/healthz`, `/livez` and `/readyz` ([`health`]), to anyone, with
//!   [`HttpServer::with_metrics`] (404 without).
//! - [`Routes`] (the console), with [`HttpServer::with_routes`]: whole requests in,
//!   whole responses out.
//! - One [`Endpoint`] (MCP's `/mcp`, `crate::mcp::http`): the server checks the
//!   request's origin and caller, reads its body, and hands it over.
//!
//! Safe by default: `Origin` and (on a loopback listener) `Host` are checked against
//! DNS rebinding, heads and bodies are capped, a client gets a bounded time to send
//! its request head and body ([`deadline`](super::deadline)), connections that have
//! not yet sent an authenticated request a small cap of their own (the oldest is
//! closed past it), and the server a bounded number of connections (`503` past it).
//! Every request to the endpoint needs `Authorization: Bearer <token>` from the
//! tokens file ([`crate::auth::tokens`]), or, with [`HttpServer::with_oauth`], an
//! OAuth access token of the configured issuer ([`crate::auth::oauth`]); missing or
//! refused: `401` with `WWW-Authenticate` (naming the Protected Resource Metadata
//! under OAuth; `403` for a missing scope), and nothing runs. TLS is left to a
//! reverse proxy (see docs/agent-builders.md).

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use hyper::service::service_fn;
use tokio::sync::watch;

use super::checks::{Caller, OAuth, Origins, caller};
use super::connections::Connections;
use super::deadline::{Bounds, Deadlined, Phase};
use super::health::{self, Probe};
use super::scrape;
use super::wire::{self, Head, Payload, Response};
use super::{PlainRequest, Routes};
use crate::auth::oauth::{self, TokenRefused};
use crate::auth::tokens::{Role, Tokens};
use crate::host::Host;

/// The most header lines a request may have (431 past it).
const MAX_HEADERS: usize = 64;

/// The realm named in `WWW-Authenticate`.
const REALM: &str = "justonce";

/// What a request for a path nothing serves is told (the path a client most likely
/// meant: the host's one endpoint).
const NOT_FOUND: &str = "the MCP endpoint is /mcp";

/// Headers a request to the endpoint may carry at most once, whatever the endpoint.
const SINGLE_HEADERS: &[&str] = &["authorization", "content-length"];

/// The limits of the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerOptions {
    /// Browser origins allowed besides loopback ones (`https://app.example.com`).
    pub allowed_origins: Vec<String>,
    /// The largest request head (request line and headers), in bytes.
    pub max_header_bytes: usize,
    /// The largest request body, in bytes.
    pub max_body_bytes: usize,
    /// Connections open at once; past it, the oldest one without an authenticated
    /// request is closed, and when there is none the newcomer gets 503.
    pub max_connections: usize,
    /// Connections open at once that have not yet sent an authenticated request;
    /// one more closes the one that has waited longest.
    pub max_unauthenticated_connections: usize,
    /// How long a kept-alive connection may sit idle between requests.
    pub idle_timeout: Duration,
    /// How long a client may take to send a request head once it began it.
    pub head_timeout: Duration,
    /// How long a client may take to send a whole request once it began it.
    pub request_timeout: Duration,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            allowed_origins: Vec::new(),
            max_header_bytes: 16 * 1024,
            max_body_bytes: 4 << 20,
            max_connections: 1024,
            max_unauthenticated_connections: 64,
            idle_timeout: Duration::from_secs(60),
            head_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// The one endpoint a server answers besides its routes (MCP's `/mcp`). The server
/// has checked a request's origin and caller before the endpoint sees it, and reads
/// the body the endpoint asks for within the request's time.
pub(crate) trait Endpoint: Send + Sync + std::fmt::Debug {
    /// Its path (`/mcp`).
    fn path(&self) -> &str;

    /// Headers a request to it may carry at most once (400 otherwise), besides
    /// `authorization` and `content-length`.
    fn single_headers(&self) -> &[&str];

    /// What a caller is told (403) whose token's role does not call the endpoint.
    fn role_refused(&self, role: Role) -> String;

    /// Checks the head of an authenticated request: the length of the body to read
    /// (`None`: none), or the answer (the body is left unread, and the connection
    /// closed).
    fn admit(&self, head: &Head) -> Result<Option<usize>, Response>;

    /// The answer to an admitted request and its body. It runs on the runtime's
    /// thread and must not block: work that does (a tool call, a journal query) is
    /// handed back as [`Answer::Blocking`].
    fn respond(&self, head: &Head, principal: &str, body: Bytes) -> Answer;

    /// The server is stopping: end the responses that would last until the client
    /// hangs up (a session's stream).
    fn stop(&self);
}

/// An [`Endpoint`]'s answer to a request (`R`: the response, hyper's by default).
pub(crate) enum Answer<R = hyper::Response<Payload>> {
    /// The response, ready.
    Ready(R),
    /// Work that blocks and then gives the response: the server runs it on this
    /// connection's thread once it has handed the runtime's other connections to
    /// another thread (`block_in_place`), so none waits behind it. It runs to its end
    /// even if the client hangs up; a panic in it is answered `500`.
    Blocking(Box<dyn FnOnce() -> R + Send>),
}

impl<R: 'static> Answer<R> {
    /// The same answer with its response turned by `f` (once the work has run, for
    /// work that blocks).
    pub(crate) fn map<S>(self, f: impl FnOnce(R) -> S + Send + 'static) -> Answer<S> {
        match self {
            Answer::Ready(response) => Answer::Ready(f(response)),
            Answer::Blocking(work) => Answer::Blocking(Box::new(move || f(work()))),
        }
    }
}

/// An HTTP server for the holders of a tokens file. Build it with
/// [`HttpServer::new`] and what it serves (`with_…`); run it with
/// [`HttpServer::serve`] (blocking) or [`HttpServer::spawn`].
pub struct HttpServer {
    /// The endpoint; `None`: only `routes` (and `/metrics`) are served.
    endpoint: Option<Arc<dyn Endpoint>>,
    routes: Option<Arc<dyn Routes>>,
    /// The host whose counters `/metrics` serves and whose readiness `/readyz`
    /// says; `None`: 404.
    metrics: Option<Arc<Host>>,
    tokens: Arc<Tokens>,
    /// OAuth access tokens accepted beside `tokens`, when configured.
    oauth: Option<OAuth>,
    options: ServerOptions,
    connections: Connections,
    origins: OnceLock<Origins>,
    stop: watch::Sender<bool>,
}

impl std::fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServer")
            .field("endpoint", &self.endpoint)
            .field("routes", &self.routes)
            .field("tokens", &self.tokens.path())
            .field("oauth", &self.oauth)
            .field("options", &self.options)
            .finish()
    }
}

impl HttpServer {
    /// A server for the holders of `tokens` that serves nothing yet (404). One
    /// `Arc<Tokens>` may be shared with the console, so the file is read once.
    pub fn new(tokens: impl Into<Arc<Tokens>>, options: ServerOptions) -> Self {
        Self {
            endpoint: None,
            routes: None,
            metrics: None,
            connections: Connections::new(
                options.max_connections,
                options.max_unauthenticated_connections,
            ),
            tokens: tokens.into(),
            oauth: None,
            options,
            origins: OnceLock::new(),
            stop: watch::Sender::new(false),
        }
    }

    /// Serves `endpoint` at its path.
    pub(crate) fn with_endpoint(mut self, endpoint: Arc<dyn Endpoint>) -> Self {
        self.endpoint = Some(endpoint);
        self
    }

    /// Serves `routes` (beside the endpoint, if any).
    pub fn with_routes(mut self, routes: Arc<dyn Routes>) -> Self {
        self.routes = Some(routes);
        self
    }

    /// Serves `host`'s counters at `/metrics` to any valid bearer token, and its
    /// health at `/healthz`, `/livez` and `/readyz` to anyone.
    pub fn with_metrics(mut self, host: Arc<Host>) -> Self {
        self.metrics = Some(host);
        self
    }

    /// Also accepts OAuth 2.1 access tokens: `oauth`'s validator checks them, and
    /// `/.well-known/oauth-protected-resource` (alone, or followed by the resource's
    /// path) serves the metadata clients discover the authorization server from.
    pub fn with_oauth(mut self, oauth: OAuth) -> Self {
        self.oauth = Some(oauth);
        self
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
        // One worker: it reads every connection's requests, answers what answers at
        // once (a ping, a replay from memory) and hands each call that blocks to a
        // thread of its own (`block_in_place`), so no connection waits behind a call.
        // A second worker only woke to look for work at every request (bench (8) on
        // 2 cores, four runs each: a replay over HTTP 100–115 µs with two, 44–70 µs
        // with one; fresh calls alike).
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
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
            let busy = Response::refusal(503, "the server is busy").with("retry-after", "1");
            let _ = stream.try_write(&busy.to_closing_bytes());
            return;
        };
        let o = &self.options;
        let late = Response::refusal(408, "the request was not sent in time");
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
            && self.endpoint.is_some()
            && oauth::is_metadata_path(&head.path, oauth.validator.settings())
        {
            return resource_metadata(&head, oauth).into_hyper(false);
        }
        if let Some(probe) = Probe::of(&head.path) {
            return self.probe(probe, &head).into_hyper(false);
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
        let (endpoint, principal, length) = match self.admit(&head) {
            // The body, if any, is left unread: the connection cannot go on.
            Err(refused) => return refused.into_hyper(true),
            Ok(admitted) => admitted,
        };
        authenticated();
        let body = match length {
            None => Bytes::new(),
            Some(length) => match self.body(request, length, began).await {
                Err(refused) => return refused.into_hyper(true),
                Ok(body) => body,
            },
        };
        match endpoint.respond(&head, &principal, body) {
            Answer::Ready(response) => response,
            // On this thread, which first hands the runtime's other connections to
            // another (see `run`). Awaiting the work on a blocking pool instead costs
            // two more thread hand-offs a call: measured, a fresh call over HTTP took
            // 40–80 µs longer.
            Answer::Blocking(work) => {
                match tokio::task::block_in_place(|| catch_unwind(AssertUnwindSafe(work))) {
                    Ok(response) => response,
                    Err(_) => {
                        tracing::error!("answering a request to {} panicked", head.path);
                        Response::refusal(500, "the server failed answering this request")
                            .into_hyper(true)
                    }
                }
            }
        }
    }

    /// The `WWW-Authenticate` value of a 401 (or 403 for a scope): with the
    /// resource metadata's URL when the server takes OAuth access tokens, else the
    /// realm.
    fn challenge(&self, refused: Option<&TokenRefused>) -> String {
        match &self.oauth {
            Some(oauth) => oauth.validator.challenge(refused),
            None => format!("Bearer realm=\"{REALM}\""),
        }
    }

    /// Checks the head of a request to the endpoint: path, origin, headers and
    /// caller, then the endpoint's own checks; `Ok` has the endpoint, the principal
    /// and the length of the body to read. A refusal is answered without reading the
    /// body, and nothing runs.
    fn admit(&self, head: &Head) -> Result<(&dyn Endpoint, String, Option<usize>), Response> {
        let path = head.path.split('?').next().unwrap_or("");
        let Some(endpoint) = self.endpoint.as_deref().filter(|e| e.path() == path) else {
            return Err(Response::refusal(404, NOT_FOUND));
        };
        if let Some((status, why)) = self.origins().check(head) {
            tracing::warn!(status, "{why}");
            return Err(Response::refusal(status, &why));
        }
        for name in SINGLE_HEADERS.iter().chain(endpoint.single_headers()) {
            if head.count(name) > 1 {
                return Err(Response::refusal(
                    400,
                    &format!("the {name} header appears more than once"),
                ));
            }
        }
        let principal = match caller(head, &self.tokens, self.oauth.as_ref()) {
            Caller::Principal(principal) => principal,
            Caller::Anonymous => {
                return Err(Response::refusal(401, "a bearer token is required")
                    .with("www-authenticate", self.challenge(None)));
            }
            Caller::Unknown => {
                tracing::warn!("a request with an unknown bearer token was refused");
                return Err(
                    Response::refusal(401, "the bearer token is not valid").with(
                        "www-authenticate",
                        format!("Bearer realm=\"{REALM}\", error=\"invalid_token\""),
                    ),
                );
            }
            Caller::Refused(refused) => {
                tracing::warn!("an OAuth access token was refused: {refused}");
                let status = refused.status();
                let mut answer = Response::refusal(status, &refused.to_string());
                if status == 503 {
                    answer = answer.with("retry-after", "5");
                } else {
                    answer = answer.with("www-authenticate", self.challenge(Some(&refused)));
                }
                return Err(answer);
            }
            Caller::NotAgent(role) => {
                tracing::warn!(%role, "a console token was refused at {path}");
                return Err(Response::refusal(403, &endpoint.role_refused(role)));
            }
        };
        let length = endpoint.admit(head)?;
        Ok((endpoint, principal, length))
    }

    /// `/metrics`, for any valid bearer token (and the same `Origin` and `Host`
    /// checks as the endpoint); 404 on a server without a host's metrics (the console
    /// alone).
    fn scrape(&self, head: &Head) -> Response {
        let Some(host) = &self.metrics else {
            return no_such_path();
        };
        scrape::answer(host, head, self.origins(), Some(&self.tokens))
    }

    /// A health probe, for anyone; 404 on a server without a host (the console
    /// alone).
    fn probe(&self, probe: Probe, head: &Head) -> Response {
        let Some(host) = &self.metrics else {
            return no_such_path();
        };
        // `/readyz` reads the journal (a round trip to PostgreSQL).
        tokio::task::block_in_place(|| health::answer(host, probe, head))
    }

    /// Reads a body of `length` bytes (at most) within the request's time; `Err` is
    /// the answer to close the connection with.
    async fn body(
        &self,
        request: hyper::Request<Incoming>,
        length: usize,
        began: tokio::time::Instant,
    ) -> Result<Bytes, Response> {
        let deadline = began + self.options.request_timeout;
        let body = http_body_util::Limited::new(request.into_body(), length.max(1));
        match tokio::time::timeout_at(deadline, body.collect()).await {
            Err(_) => {
                tracing::info!("a client was too slow sending its request; closing");
                Err(Response::refusal(408, "the request was not sent in time"))
            }
            Ok(Err(e)) => {
                tracing::debug!("reading a request body: {e}");
                Err(Response::refusal(400, "the body could not be read"))
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
            Response::plain(status, "text/plain; charset=utf-8", why.as_bytes().to_vec())
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
        let mut response = Response::plain(answer.status, "", answer.body);
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
        if let Some(endpoint) = &self.endpoint {
            endpoint.stop();
        }
    }
}

/// What a request for `/metrics` or a probe is told by a server without a host.
fn no_such_path() -> Response {
    Response::plain(404, "text/plain; charset=utf-8", b"no such path".to_vec())
}

/// Protected Resource Metadata (RFC 9728): public, read by clients before they have
/// a token, so no token nor `Origin` check (it says nothing secret).
fn resource_metadata(head: &Head, oauth: &OAuth) -> Response {
    if head.method != "GET" {
        return Response::refusal(405, "GET the metadata").with("allow", "GET");
    }
    let doc = oauth::protected_resource_metadata(oauth.validator.settings());
    Response::message(200, wire::Kind::Json, &doc)
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

    /// The endpoint's URL (the server's root without one).
    pub fn url(&self) -> String {
        let path = self.server.endpoint.as_ref().map_or("", |e| e.path());
        format!("http://{}{path}", self.addr)
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
