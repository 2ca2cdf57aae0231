//! MCP's Streamable HTTP transport on one endpoint, `/mcp`, for the same
//! [`Server`](crate::mcp::Server) that speaks stdio: one protocol implementation,
//! two transports.
//!
//! - `POST /mcp` carries one JSON-RPC message. A request is answered as
//!   `application/json`, or as a one-event `text/event-stream` when the client
//!   accepts only that (or [`HttpOptions::prefer_sse`]); a notification or response
//!   gets `202`. `GET` is `405`: this server sends no messages of its own.
//! - `initialize` (revisions 2024-11-05 to 2025-11-25) opens a session whose id comes
//!   back in `Mcp-Session-Id` and must come with every later request; `DELETE` ends
//!   it. A request carrying the 2026-07-28 `_meta` envelope is stateless and must
//!   repeat its version, method and tool in `MCP-Protocol-Version`, `Mcp-Method` and
//!   `Mcp-Name`.
//! - Every request needs `Authorization: Bearer <token>` from the tokens file
//!   ([`crate::mcp::tokens`]); the token names the principal, and the principal is
//!   part of the scope of every key its calls run under. Missing or unknown: `401`
//!   with `WWW-Authenticate`, and nothing runs.
//! - Safe by default: `Origin` and (on a loopback listener) `Host` are checked
//!   against DNS rebinding, heads and bodies are capped, a client gets a bounded time
//!   to send its request, each principal a bounded number of calls in flight (`429`
//!   with `Retry-After` past it), and the server a bounded number of connections
//!   (`503` past it). TLS is left to a reverse proxy (see the README).
//! - A client that hangs up mid-call does not cancel the call: it runs to its
//!   outcome and keeps its record, and the retry gets that outcome.

mod admission;
mod checks;
mod exchange;
mod sessions;
mod wire;

use std::collections::HashMap;
use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{TrySendError, bounded};

pub use exchange::TOO_MANY_CALLS;

use self::admission::Admission;
use self::checks::Origins;
use self::exchange::{Admitted, refusal};
use self::sessions::Sessions;
use self::wire::{Conn, ReadError, Response};
use super::Server;
use super::protocol::INVALID_REQUEST;
use super::tokens::Tokens;

/// The path of the MCP endpoint.
pub const ENDPOINT: &str = "/mcp";

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
    /// Connections served at once; more wait, and past as many again get 503.
    pub max_connections: usize,
    /// Sessions kept open; one more forgets the least recently used.
    pub max_sessions: usize,
    /// How long a kept-alive connection may sit idle between requests.
    pub idle_timeout: Duration,
    /// How long a client may take to send a request once it began.
    pub request_timeout: Duration,
    /// How long writing a response may block on a client that does not read.
    pub write_timeout: Duration,
    /// Answer requests as an SSE stream whenever the client accepts one.
    pub prefer_sse: bool,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            allowed_origins: Vec::new(),
            max_header_bytes: 16 * 1024,
            max_body_bytes: 4 << 20,
            max_calls_per_principal: 8,
            max_connections: 64,
            max_sessions: 4096,
            idle_timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(30),
            prefer_sse: false,
        }
    }
}

/// An MCP server on HTTP. Build it with [`HttpServer::new`]; run it with
/// [`HttpServer::serve`] (blocking) or [`HttpServer::spawn`].
pub struct HttpServer {
    server: Server,
    tokens: Tokens,
    options: HttpOptions,
    sessions: Sessions,
    admission: Admission,
    origins: OnceLock<Origins>,
    stopping: AtomicBool,
    open: Mutex<HashMap<u64, TcpStream>>,
    next_conn: AtomicU64,
}

impl std::fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServer")
            .field("server", &self.server)
            .field("tokens", &self.tokens.path())
            .field("options", &self.options)
            .finish()
    }
}

impl HttpServer {
    /// Serves `server`'s tools to the holders of `tokens`.
    pub fn new(server: Server, tokens: Tokens, options: HttpOptions) -> Self {
        Self {
            sessions: Sessions::new(options.max_sessions),
            admission: Admission::new(options.max_calls_per_principal),
            server,
            tokens,
            options,
            origins: OnceLock::new(),
            stopping: AtomicBool::new(false),
            open: Mutex::new(HashMap::new()),
            next_conn: AtomicU64::new(0),
        }
    }

    fn origins(&self) -> &Origins {
        self.origins
            .get_or_init(|| Origins::new(&self.options.allowed_origins, true))
    }

    /// Serves connections from `listener` until [`Running::stop`] (or forever).
    pub fn serve(&self, listener: TcpListener) -> io::Result<()> {
        let loopback = listener.local_addr()?.ip().is_loopback();
        let _ = self
            .origins
            .set(Origins::new(&self.options.allowed_origins, loopback));
        let workers = self.options.max_connections.max(1);
        let (waiting, queue) = bounded::<TcpStream>(workers);
        std::thread::scope(|scope| {
            for n in 0..workers {
                let queue = queue.clone();
                std::thread::Builder::new()
                    .name(format!("justonce-http-{n}"))
                    .spawn_scoped(scope, move || {
                        while let Ok(stream) = queue.recv() {
                            self.connection(stream);
                        }
                    })?;
            }
            for stream in listener.incoming() {
                if self.stopping.load(Ordering::Acquire) {
                    break;
                }
                let stream = match stream {
                    Ok(stream) => stream,
                    Err(e) => {
                        tracing::warn!("accepting a connection: {e}");
                        continue;
                    }
                };
                if let Err(TrySendError::Full(stream)) = waiting.try_send(stream) {
                    tracing::warn!("every connection slot is busy; answering 503");
                    let busy = refusal(503, None, INVALID_REQUEST, "the server is busy")
                        .with("retry-after", "1");
                    if let Ok(mut conn) = Conn::new(stream, self.options.write_timeout) {
                        let _ = conn.write(&busy, false);
                    }
                }
            }
            drop(waiting);
            Ok(())
        })
    }

    /// Serves `listener` on a thread of its own.
    pub fn spawn(self, listener: TcpListener) -> io::Result<Running> {
        let addr = listener.local_addr()?;
        let server = Arc::new(self);
        let serving = Arc::clone(&server);
        let handle = std::thread::Builder::new()
            .name("justonce-http-accept".into())
            .spawn(move || serving.serve(listener))?;
        Ok(Running {
            addr,
            server,
            handle: Some(handle),
        })
    }

    /// Serves one connection: its requests in order, until it closes, idles out or
    /// errs.
    fn connection(&self, stream: TcpStream) {
        let id = self.next_conn.fetch_add(1, Ordering::Relaxed);
        let Ok(mut conn) = Conn::new(stream, self.options.write_timeout) else {
            return;
        };
        if let Ok(handle) = conn.try_clone_stream() {
            self.lock_open().insert(id, handle);
        }
        self.requests(&mut conn);
        self.lock_open().remove(&id);
    }

    fn lock_open(&self) -> std::sync::MutexGuard<'_, HashMap<u64, TcpStream>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn requests(&self, conn: &mut Conn) {
        let o = &self.options;
        loop {
            if self.stopping.load(Ordering::Acquire) {
                return;
            }
            let (head, deadline) =
                match conn.read_head(o.idle_timeout, o.request_timeout, o.max_header_bytes) {
                    Ok(read) => read,
                    Err(e) => return self.unreadable(conn, e),
                };
            let keep_alive = head.keep_alive();
            let response = match self.admit(&head) {
                // The body, if any, is left unread: the connection cannot go on.
                Err(refused) => {
                    let _ = conn.write(&refused, false);
                    return;
                }
                Ok(Admitted::Delete { principal }) => self.delete(&head, &principal),
                Ok(Admitted::Post { principal, length }) => {
                    let expects = head
                        .header("expect")
                        .is_some_and(|e| e.eq_ignore_ascii_case("100-continue"));
                    if expects && conn.go_ahead().is_err() {
                        return;
                    }
                    match conn.read_body(length, deadline) {
                        Ok(body) => self.post(&head, &principal, &body),
                        Err(e) => return self.unreadable(conn, e),
                    }
                }
            };
            if conn.write(&response, keep_alive).is_err() {
                tracing::info!(
                    "the client left before its response; the call kept its outcome for a retry"
                );
                return;
            }
            if !keep_alive {
                return;
            }
        }
    }

    /// Answers a request that could not be read, where an answer helps, and ends the
    /// connection.
    fn unreadable(&self, conn: &mut Conn, error: ReadError) {
        let response: Response = match error {
            ReadError::Idle => return,
            ReadError::Io(e) => {
                tracing::debug!("reading a request: {e}");
                return;
            }
            ReadError::TimedOut => {
                tracing::info!("a client was too slow sending its request; closing");
                refusal(
                    408,
                    None,
                    INVALID_REQUEST,
                    "the request was not sent in time",
                )
            }
            ReadError::HeadTooLarge => refusal(
                431,
                None,
                INVALID_REQUEST,
                &format!(
                    "the request head is larger than {} bytes",
                    self.options.max_header_bytes
                ),
            ),
            ReadError::Malformed(why) => refusal(400, None, INVALID_REQUEST, &why),
        };
        let _ = conn.write(&response, false);
    }

    /// Stops accepting, and ends every connection between requests (a call under
    /// way finishes and keeps its record).
    fn stop(&self, addr: SocketAddr) {
        self.stopping.store(true, Ordering::Release);
        for stream in self.lock_open().values() {
            let _ = stream.shutdown(Shutdown::Read);
        }
        // Wakes the accept loop so it sees the flag.
        let _ = TcpStream::connect_timeout(&addr, Duration::from_secs(1));
    }
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
        self.server.stop(self.addr);
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
