//! `GET /metrics`: the host's counters in Prometheus' text format
//! ([`Host::metrics_text`]). Served by the MCP server to any valid bearer token, and
//! by a listener of its own ([`MetricsServer`], `serve --metrics ADDR:PORT`), which
//! serves nothing else but the health probes ([`health`]): the metrics open on a
//! loopback address, behind the tokens file's bearer tokens on any other. Both check `Host` and `Origin` as every endpoint does
//! ([`Origins`]): on loopback, a page that rebound its own name to 127.0.0.1 must not
//! read the figures (tool names included).

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use hyper::service::service_fn;
use tokio::sync::{Semaphore, watch};

use super::checks::{Caller, Origins, caller};
use super::health::{self, Probe};
use super::wire::{Head, Kind, Response};
use crate::auth::tokens::Tokens;
use crate::host::Host;
use crate::metrics::text::CONTENT_TYPE;

/// The path the metrics are served at.
pub const METRICS_PATH: &str = "/metrics";

/// How long a scraper may take to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections a metrics listener serves at once; more wait to be accepted.
const MAX_CONNECTIONS: usize = 16;

/// Whether `path` (with any query) is the metrics path.
pub(crate) fn is_metrics(path: &str) -> bool {
    path.split('?').next() == Some(METRICS_PATH)
}

/// Answers a request for the metrics: from a `Host` and `Origin` that `origins`
/// accept (421 or 403 otherwise), `GET` only, and, when `tokens` are given, only with
/// a bearer token from them (401 otherwise, as for `/mcp`).
pub(crate) fn answer(
    host: &Host,
    head: &Head,
    origins: &Origins,
    tokens: Option<&Tokens>,
) -> Response {
    if let Some((status, why)) = origins.check(head) {
        tracing::warn!(status, "a scrape of /metrics was refused: {why}");
        return Response::refusal(status, &why);
    }
    if let Some(tokens) = tokens {
        match caller(head, tokens, None) {
            // Any role may read the figures (a viewer's token is the one to give
            // Prometheus).
            Caller::Principal(_) | Caller::NotAgent(_) => {}
            Caller::Anonymous => {
                return Response::refusal(401, "a bearer token is required")
                    .with("www-authenticate", "Bearer realm=\"justonce\"");
            }
            // An OAuth access token does not read the figures: a token of the file does.
            Caller::Unknown | Caller::Refused(_) => {
                tracing::warn!("a scrape of /metrics with an unknown bearer token was refused");
                return Response::refusal(401, "the bearer token is not valid").with(
                    "www-authenticate",
                    "Bearer realm=\"justonce\", error=\"invalid_token\"",
                );
            }
        }
    }
    if head.method != "GET" {
        return Response::refusal(405, "GET /metrics").with("allow", "GET");
    }
    // The gauges read the journal (a query, or a round trip to PostgreSQL).
    let text = tokio::task::block_in_place(|| host.metrics_text());
    Response {
        status: 200,
        headers: vec![("cache-control".into(), "no-store".into())],
        kind: Kind::Text(CONTENT_TYPE),
        body: text.into_bytes(),
        notes: Vec::new(),
        live: None,
    }
}

/// A listener that serves only `/metrics` (`serve --metrics`), and the health probes
/// ([`health`]: `/healthz`, `/livez`, `/readyz`, to anyone). Build it with
/// [`MetricsServer::new`], run it with [`MetricsServer::spawn`].
#[derive(Debug)]
pub struct MetricsServer {
    host: Arc<Host>,
    tokens: Option<Tokens>,
    /// Browser origins allowed besides loopback ones.
    allowed_origins: Vec<String>,
}

impl MetricsServer {
    /// Serves `host`'s metrics; with `tokens`, only to their bearers.
    pub fn new(host: Arc<Host>, tokens: Option<Tokens>) -> Self {
        Self {
            host,
            tokens,
            allowed_origins: Vec::new(),
        }
    }

    /// Also answers pages of these browser origins (`https://dashboard.example.com`),
    /// as `ServerOptions::allowed_origins` does for the HTTP server.
    pub fn with_allowed_origins(mut self, origins: Vec<String>) -> Self {
        self.allowed_origins = origins;
        self
    }

    /// Serves `listener` on a thread of its own until the returned handle is dropped.
    pub fn spawn(self, listener: TcpListener) -> io::Result<MetricsRunning> {
        let addr = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        let (stop, stopped) = watch::channel(false);
        let server = Arc::new(self);
        let handle = std::thread::Builder::new()
            .name("justonce-metrics".into())
            .spawn(move || server.run(listener, stopped))?;
        Ok(MetricsRunning {
            addr,
            stop,
            handle: Some(handle),
        })
    }

    fn run(
        self: Arc<Self>,
        listener: TcpListener,
        mut stopped: watch::Receiver<bool>,
    ) -> io::Result<()> {
        // Multi-threaded, if small: a scrape blocks its thread on the journal.
        // Loopback or not, as the HTTP server decides it: from the address bound.
        let origins = Arc::new(Origins::new(
            &self.allowed_origins,
            listener.local_addr()?.ip().is_loopback(),
        ));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("justonce-metrics")
            .enable_all()
            .build()?;
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener)?;
            let places = Arc::new(Semaphore::new(MAX_CONNECTIONS));
            loop {
                let Ok(place) = Arc::clone(&places).acquire_owned().await else {
                    return Ok(());
                };
                let accepted = tokio::select! {
                    accepted = listener.accept() => accepted,
                    _ = stopped.wait_for(|s| *s) => return Ok(()),
                };
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        tracing::warn!("metrics: accepting a connection: {e}");
                        continue;
                    }
                };
                let server = Arc::clone(&self);
                let origins = Arc::clone(&origins);
                tokio::spawn(async move {
                    let service = service_fn(|request: hyper::Request<hyper::body::Incoming>| {
                        let server = Arc::clone(&server);
                        let origins = Arc::clone(&origins);
                        async move {
                            let head = Head::of(&request);
                            let response = if is_metrics(&head.path) {
                                answer(&server.host, &head, &origins, server.tokens.as_ref())
                            } else if let Some(probe) = Probe::of(&head.path) {
                                tokio::task::block_in_place(|| {
                                    health::answer(&server.host, probe, &head)
                                })
                            } else {
                                Response::refusal(
                                    404,
                                    "this listener serves /metrics and the health probes only",
                                )
                            };
                            Ok::<_, std::convert::Infallible>(response.into_hyper(false))
                        }
                    });
                    let served = hyper::server::conn::http1::Builder::new()
                        .timer(hyper_util::rt::TokioTimer::new())
                        .header_read_timeout(HEAD_TIMEOUT)
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                    if let Err(e) = served {
                        tracing::debug!("metrics: connection ended: {e}");
                    }
                    drop(place);
                });
            }
        })
    }
}

/// A metrics listener running on its own thread; dropping it stops it.
#[derive(Debug)]
pub struct MetricsRunning {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    handle: Option<JoinHandle<io::Result<()>>>,
}

impl MetricsRunning {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The URL of the metrics.
    pub fn url(&self) -> String {
        format!("http://{}{METRICS_PATH}", self.addr)
    }
}

impl Drop for MetricsRunning {
    fn drop(&mut self) {
        self.stop.send_replace(true);
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}
