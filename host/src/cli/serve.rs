//! `justonce serve`: an MCP server for the loaded tools, on stdio or on Streamable
//! HTTP.

use std::io::Write as _;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::{Cli, exit, watch};
use crate::auth::tokens::Tokens;
use crate::console::{Console, DEFAULT_TTL_MS as CONSOLE_SESSION_TTL_MS};
use crate::delivery::Deliverer;
use crate::error::Error;
use crate::host::Host;
use crate::journal::Journal;
use crate::maintenance::{JournalMarks, Maintenance, marks::MARKS_FILE};
use crate::mcp::{HttpOptions, Server, ServerConfig, Shutdown};
use crate::serving::admission::Admission;
use crate::serving::starting::Starting;
use crate::serving::{MetricsRunning, MetricsServer, ServerOptions};

/// Serve the tools over MCP: on stdin/stdout, or with --http on Streamable HTTP.
///
/// On stdio: newline-delimited JSON-RPC on stdout. On HTTP: the endpoint's URL is
/// the first line on stdout; every request needs a bearer token (`justonce token
/// add NAME`), or with --oauth-issuer (or [oauth] in justonce.toml) an OAuth 2.1
/// access token of that issuer. The web console is at /console on the same server (a viewer's or
/// operator's token opens it). The health probes /healthz, /livez and /readyz are open
/// to anyone, on that server and the --metrics listener. SIGTERM drains: /readyz says
/// 503, no new call or session starts, the calls in flight finish (within
/// --drain-timeout-ms; those still running then are handed over to the next host
/// that gets their retry), then serve exits 0.
/// Logs go to stderr (JUSTONCE_LOG=info shows more of them).
#[derive(Debug, Args)]
pub struct Serve {
    /// The conversation of calls whose request sends none in
    /// `_meta["dev.justonce/conversation"]` (default: "default").
    #[arg(long, value_name = "ID")]
    conversation: Option<String>,
    /// What a call that names no conversation (in `_meta`, the
    /// `Justonce-Conversation` header or --conversation) and no key gets: "window",
    /// deduplicated within unscoped_retention_minutes, "refuse", refused with the
    /// lines that name one from each framework, "session", in the conversation of
    /// its MCP session (the connection on stdio; a stateless client, which has none,
    /// is refused), or "session-or-window", the same but a stateless client's call
    /// gets the window (logged) [default: the configuration's
    /// `[mcp] unscoped`, else window].
    #[arg(long, value_name = "POLICY")]
    unscoped: Option<crate::retention::Unscoped>,
    /// How long a duplicate of a call still running waits for the first one before
    /// it is answered `in_progress` (retry-safe), in milliseconds: below your
    /// client's timeout [default: the configuration's `[mcp] answer_within_ms`,
    /// else 4000].
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    answer_within_ms: Option<u64>,
    /// Inject a fault, to test an agent loop (repeatable; never in production):
    /// `lose-response:TARGET[:ATTEMPTS]`, the effect lands and its response is lost
    /// for the first ATTEMPTS (3) attempts of each key, so the first call ends
    /// `outcome_unknown` and the agent's retry is answered; `hang:TARGET:MS`, the
    /// effect lands and its answer waits MS, once per key. TARGET: a provider
    /// (`mail`, `http`, `mcp:NAME` for the upstream NAME, …) or a tool.
    #[arg(long, value_name = "FAULT")]
    fault: Vec<crate::providers::InjectedFault>,
    /// How many tool calls run at once; more wait in a queue (stdio).
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..))]
    max_concurrent_calls: u16,
    /// How often the outbox's due webhooks are delivered in the background, in
    /// milliseconds; 0 leaves delivery to `justonce deliver`.
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    deliver_every_ms: u64,
    /// How often gc runs while serving, in minutes: records past their windows are
    /// removed by one host of the journal at a time (the others skip it), logged,
    /// and counted in `justonce_gc_removed_total`; 0: never (run `justonce gc`
    /// yourself) [default: the configuration's `gc_every_minutes`, else 60].
    #[arg(long, value_name = "MINUTES")]
    gc_every_minutes: Option<u64>,
    /// Serve a journal even though its newest call is older than one this host saw
    /// in it (journal-marks.json beside the host's state): it was restored from an
    /// older backup, and the retries of the calls it lost run again under new keys.
    /// Without it serve refuses such a journal, naming the problem.
    #[arg(long)]
    accept_restored_journal: bool,
    /// Serve Streamable HTTP at ADDR:PORT (or PORT, on 127.0.0.1) instead of stdio;
    /// port 0 picks a free one. Plain HTTP: put TLS in a reverse proxy.
    #[arg(long, value_name = "ADDR:PORT")]
    http: Option<String>,
    /// The tokens file [default: the configuration's `tokens_file`, else tokens.json
    /// next to the database]; used with --http, and with --metrics on an address
    /// other than loopback.
    #[arg(long, value_name = "FILE")]
    tokens: Option<PathBuf>,
    /// Also serve Prometheus metrics at http://ADDR:PORT/metrics (or PORT, on
    /// 127.0.0.1), and the health probes beside them, on a listener of its own,
    /// whether MCP goes over stdio or HTTP.
    /// Open to anyone on a loopback address; on any other, every scrape needs a
    /// bearer token of the tokens file (`justonce token add prometheus --role viewer`), and serve
    /// refuses to start when that file holds none.
    #[arg(long, value_name = "ADDR:PORT")]
    metrics: Option<String>,
    /// A browser origin allowed to call besides loopback ones (repeatable), e.g.
    /// https://app.example.com.
    #[arg(long, value_name = "ORIGIN", requires = "http")]
    allow_origin: Vec<String>,
    /// Tool calls one principal may have in flight; more get 429 (HTTP).
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..))]
    max_calls_per_principal: u16,
    /// Connections open at once (HTTP); past it, the oldest one that has not sent an
    /// authenticated request is closed, and without one the newcomer gets 503.
    #[arg(long, value_name = "N", default_value_t = 1024, value_parser = clap::value_parser!(u16).range(1..))]
    max_connections: u16,
    /// The largest request body, in bytes (HTTP).
    #[arg(long, value_name = "BYTES", default_value_t = 4 << 20)]
    max_body_bytes: usize,
    /// Answer with an SSE stream whenever the client accepts one, not JSON (HTTP).
    #[arg(long, requires = "http")]
    sse: bool,
    /// End a call's event stream after MS milliseconds, and let the client fetch the
    /// rest with `Last-Event-ID` (SSE polling, for proxies that cut long responses;
    /// sessions at 2025-11-25 or later). Unset: a stream lasts until its answer.
    #[arg(long, value_name = "MS", requires = "http")]
    sse_hold_ms: Option<u64>,
    /// How often the tools directory, justonce.toml and its lock file are checked
    /// for changes, in milliseconds; a change reloads the tools while serving (so
    /// does SIGHUP). 0: only SIGHUP reloads.
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    watch_interval_ms: u64,
    /// On SIGTERM (or SIGINT), how long the calls in flight may take to finish, in
    /// milliseconds; those still running then are handed over: their leases end at
    /// once, journaled as handed over by this host, so the agent's retry on another
    /// host takes each over at once instead of waiting out its lease. Keep it below
    /// the grace period of whatever stops the host (Kubernetes'
    /// terminationGracePeriodSeconds, systemd's TimeoutStopSec) [default: the
    /// configuration's `[mcp] drain_timeout_ms`, else 20000].
    #[arg(long, value_name = "MS")]
    drain_timeout_ms: Option<u64>,
    /// How long to wait at start for a PostgreSQL journal that does not answer yet (a
    /// database starting, a failover under way), in milliseconds: serve tries again,
    /// backing off, and logs each try; its listeners answer /healthz meanwhile and
    /// /readyz 503. Past it, serve exits 5. A database that refuses the login or
    /// the settings is not waited for [default: the configuration's `[mcp]
    /// journal_wait_ms`, else 60000].
    #[arg(long, value_name = "MS")]
    journal_wait_ms: Option<u64>,
    #[command(flatten)]
    oauth: super::oauth::OAuthArgs,
}

/// `ADDR:PORT`, `:PORT` or `PORT`; a bare port binds 127.0.0.1.
pub(super) fn bind_address(text: &str) -> Result<SocketAddr, String> {
    let text = text.trim();
    let port_only = text.strip_prefix(':').unwrap_or(text);
    if let Ok(port) = port_only.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    text.parse()
        .map_err(|_| format!("{text:?}: expected ADDR:PORT (e.g. 127.0.0.1:8080) or PORT"))
}

/// The tokens file `flag` names (else the configuration's, else the default), read,
/// or the tokens `journal` keeps (PostgreSQL); none is allowed and said in the log.
pub(super) fn open_tokens(
    cli: &Cli,
    flag: Option<&PathBuf>,
    journal: &Arc<dyn Journal>,
) -> Result<(PathBuf, Tokens), Error> {
    let (path, tokens) = read_tokens(cli, flag, journal)?;
    warn_if_empty(&path, &tokens);
    Ok((path, tokens))
}

fn warn_if_empty(path: &std::path::Path, tokens: &Tokens) {
    if tokens.is_empty() {
        tracing::warn!(
            "{} holds no tokens: every request will be refused (justonce token add NAME)",
            path.display()
        );
    }
}

/// The tokens file `flag` names (else the configuration's, else the default), read;
/// on a journal that keeps the tokens for every host (PostgreSQL, once `justonce
/// token import` ran on it), its table, and a tokens file that is no longer read is
/// said in the log.
fn read_tokens(
    cli: &Cli,
    flag: Option<&PathBuf>,
    journal: &Arc<dyn Journal>,
) -> Result<(PathBuf, Tokens), Error> {
    let path = cli.tokens_file(flag);
    let table = journal.tokens();
    let keeps = match &table {
        Some(table) => table.keeps_tokens().map_err(|e| Error::Config {
            path: cli.db.clone(),
            reason: e.to_string(),
        })?,
        None => false,
    };
    if table.is_some() && !keeps {
        tracing::info!(
            "tokens from {} (this host's own file): `justonce token import` moves them into this PostgreSQL journal, for every host",
            path.display()
        );
    }
    if keeps {
        if path.is_file() {
            tracing::warn!(
                "{} is not read: this PostgreSQL journal keeps the tokens for every host (`justonce token import` brings a file's tokens over once; `justonce token list` shows the journal's)",
                path.display()
            );
        }
        let tokens = Tokens::in_journal(Arc::clone(journal)).map_err(|e| Error::Config {
            path: cli.db.clone(),
            reason: e.to_string(),
        })?;
        return Ok((tokens.path().to_owned(), tokens));
    }
    let tokens = Tokens::open(&path).map_err(|e| Error::Config {
        path: path.clone(),
        reason: e.to_string(),
    })?;
    Ok((path, tokens))
}

/// Listens on `text` (see [`bind_address`]), warning when beyond this machine.
pub(super) fn listen(flag: &str, text: &str) -> Result<(TcpListener, SocketAddr), Error> {
    let addr = bind_address(text).map_err(|e| Error::Host(anyhow::anyhow!("{flag} {e}")))?;
    let listener = TcpListener::bind(addr)
        .map_err(|e| Error::Host(anyhow::anyhow!("cannot listen on {addr}: {e}")))?;
    let bound = listener
        .local_addr()
        .map_err(|e| Error::Host(anyhow::anyhow!("{e}")))?;
    if !bound.ip().is_loopback() {
        tracing::warn!(%bound, "listening beyond this machine on plain HTTP: put TLS in front (see docs/agent-builders.md)");
    }
    Ok((listener, bound))
}

impl Serve {
    pub(super) fn run(&self, cli: &Cli) -> Result<u8, Error> {
        let sources = cli.watched();
        let since = sources.fingerprint();
        let settings = cli
            .settings
            .as_ref()
            .map(|c| c.mcp.clone())
            .unwrap_or_default();
        let answer_within = self
            .answer_within_ms
            .map(Duration::from_millis)
            .or(settings.answer_within)
            .unwrap_or(crate::mcp::DEFAULT_ANSWER_WITHIN);
        for fault in &self.fault {
            tracing::warn!(
                "FAULT INJECTION (serve --fault): {fault}; a test setup, never production"
            );
        }
        // Bound before the journal is waited for, so a prober sees a live process
        // that is not ready rather than a refused connection.
        let http_listener = match &self.http {
            Some(addr) => Some(listen("--http", addr)?),
            None => None,
        };
        let metrics_listener = match &self.metrics {
            Some(addr) => Some(listen("--metrics", addr)?),
            None => None,
        };
        let listeners: Vec<&TcpListener> = http_listener
            .iter()
            .chain(metrics_listener.iter())
            .map(|(listener, _)| listener)
            .collect();
        let journal_wait = self
            .journal_wait_ms
            .map(Duration::from_millis)
            .or(settings.journal_wait)
            .unwrap_or(DEFAULT_JOURNAL_WAIT);
        wait_for_journal(cli, journal_wait, &listeners)?;
        let host = Arc::new(
            cli.host()
                .wait_bound(answer_within)
                .inject_faults(self.fault.clone())
                .build()?,
        );
        for refused in host.runtime().refused() {
            tracing::warn!("refused {}: {}", refused.source.display(), refused.reason);
        }
        let gc_every = self
            .gc_every_minutes
            .map(|m| Duration::from_secs(m.saturating_mul(60)))
            .or(cli.settings.as_ref().and_then(|c| c.gc_every))
            .unwrap_or(crate::maintenance::DEFAULT_GC_EVERY);
        // Before anything is served: a journal restored behind what this host saw
        // of it is refused here, unless the operator says they know.
        let marks = JournalMarks::new(cli.marks_dir().join(MARKS_FILE), Arc::clone(&host));
        marks.check(self.accept_restored_journal)?;
        let sweep = cli
            .settings
            .as_ref()
            .map(|c| c.sweep.clone())
            .unwrap_or_default();
        let _maintenance = Maintenance::new(Arc::clone(&host), Some(gc_every), Some(marks))
            .sweep(
                sweep
                    .every
                    .unwrap_or(crate::maintenance::DEFAULT_SWEEP_EVERY),
                sweep
                    .max_probes
                    .unwrap_or(crate::maintenance::DEFAULT_SWEEP_MAX),
            )
            .spawn()?;
        // Webhooks queued by tool calls go out while the server runs; the loop stops
        // when serving ends (after the pass under way).
        let _delivery = match self.deliver_every_ms {
            0 => None,
            ms => Some(Arc::new(Deliverer::new(&host)?).spawn_loop(Duration::from_millis(ms))?),
        };
        let drain_timeout = self
            .drain_timeout_ms
            .map(Duration::from_millis)
            .or(settings.drain_timeout)
            .unwrap_or(DEFAULT_DRAIN_TIMEOUT);
        let config = ServerConfig {
            conversation: self.conversation.clone(),
            max_concurrent_calls: usize::from(self.max_concurrent_calls),
            unscoped: self.unscoped.or(settings.unscoped).unwrap_or_default(),
            tasks: crate::mcp::tasks::TaskSettings {
                after: settings
                    .task_after
                    .unwrap_or(crate::mcp::tasks::DEFAULT_TASK_AFTER),
                required: settings.task_required.clone(),
            },
            ask_timeout: settings
                .ask_timeout
                .unwrap_or(crate::mcp::DEFAULT_ASK_TIMEOUT),
        };
        let _metrics = match metrics_listener {
            Some(bound) => Some(self.serve_metrics(cli, &host, bound)?),
            None => None,
        };
        let server = Server::new(Arc::clone(&host), config);
        let interval =
            (self.watch_interval_ms > 0).then(|| Duration::from_millis(self.watch_interval_ms));
        watch::spawn(
            (sources, since),
            Arc::clone(&host),
            server.catalog(),
            interval,
            reload_on_hangup()?,
        )?;
        let Some((listener, bound)) = http_listener else {
            tracing::info!(tools = host.runtime().names(), db = %cli.db.display(), "serving MCP on stdio");
            stop_on_signals(server.shutdown(), Arc::clone(&host), drain_timeout)?;
            server
                .serve(std::io::stdin().lock(), std::io::stdout())
                .map_err(|e| {
                    Error::Host(anyhow::anyhow!("reading the MCP client's messages: {e}"))
                })?;
            return Ok(exit::SUCCESS);
        };
        let oauth = self
            .oauth
            .resource_server(cli, bound, Arc::new(crate::clock::SystemClock))?;
        // One reader of the file for the MCP endpoint and the console: a revoked
        // token is seen by both at once.
        let (path, tokens) = read_tokens(cli, self.tokens.as_ref(), host.journal_handle())?;
        let tokens = Arc::new(tokens);
        if oauth.is_none() {
            warn_if_empty(&path, &tokens);
        }
        let options = HttpOptions {
            server: ServerOptions {
                allowed_origins: self.allow_origin.clone(),
                max_connections: usize::from(self.max_connections),
                max_body_bytes: self.max_body_bytes,
                ..ServerOptions::default()
            },
            max_calls_per_principal: usize::from(self.max_calls_per_principal),
            prefer_sse: self.sse,
            stream_hold: self.sse_hold_ms.map(Duration::from_millis),
            ..HttpOptions::default()
        };
        let url = format!("http://{bound}{}", crate::mcp::http::ENDPOINT);
        tracing::info!(tools = host.runtime().names(), db = %cli.db.display(), tokens = %path.display(), "serving MCP on {url}");
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{url}").and_then(|()| out.flush());
        drop(out);
        stop_on_signals(server.shutdown(), Arc::clone(&host), drain_timeout)?;
        // One cap on each principal's calls in flight, for its own calls, its tasks
        // resumed by tasks/update and the calls an operator resumes.
        let admission = Admission::new(options.max_calls_per_principal);
        let console = Console::for_host(&host, Arc::clone(&tokens), CONSOLE_SESSION_TTL_MS)
            .configured(cli.settings.clone())
            .resuming_on(Arc::clone(&host))
            .admitting(admission.clone());
        let mut http = crate::mcp::http::admitting(server, tokens, options, admission);
        if let Some(oauth) = oauth {
            http = http.with_oauth(oauth);
        }
        http.with_routes(Arc::new(console))
            .serve(listener)
            .map_err(|e| Error::Host(anyhow::anyhow!("serving HTTP on {bound}: {e}")))?;
        Ok(exit::SUCCESS)
    }

    /// Starts the `--metrics` listener at `addr`: open on loopback, behind the
    /// tokens file's bearer tokens anywhere else.
    fn serve_metrics(
        &self,
        cli: &Cli,
        host: &Arc<Host>,
        (listener, bound): (TcpListener, SocketAddr),
    ) -> Result<MetricsRunning, Error> {
        let tokens = if bound.ip().is_loopback() {
            None
        } else {
            let (path, tokens) = open_tokens(cli, self.tokens.as_ref(), host.journal_handle())?;
            if tokens.is_empty() {
                return Err(Error::Config {
                    path,
                    reason: format!(
                        "--metrics {bound} is reachable beyond this machine, so every scrape needs a bearer token, \
                         and this tokens file holds none: add one (justonce token add prometheus --role viewer) or listen on 127.0.0.1"
                    ),
                });
            }
            Some(tokens)
        };
        let running = MetricsServer::new(Arc::clone(host), tokens)
            .with_allowed_origins(self.allow_origin.clone())
            .spawn(listener)
            .map_err(|e| Error::Host(anyhow::anyhow!("--metrics: serving on {bound}: {e}")))?;
        tracing::info!("serving Prometheus metrics on {}", running.url());
        Ok(running)
    }
}

/// How long `serve` waits at start for a journal that does not answer when neither
/// the flag nor the configuration says.
const DEFAULT_JOURNAL_WAIT: Duration = Duration::from_secs(60);

/// The first and the longest pause between two tries to reach the journal at start.
const JOURNAL_RETRY: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(5));

/// Waits, at most `max`, for a PostgreSQL journal that does not answer yet (its
/// error is retry-safe: a server not up, a failover under way), trying again with
/// backoff and logging each try (`warn`); `listeners` answer the probes meanwhile
/// ([`Starting`]). A refusal (a login or setting it will not take) is returned at
/// once; a journal still unreachable at `max` is a host failure (exit 5). A SQLite
/// file is not waited for.
fn wait_for_journal(cli: &Cli, max: Duration, listeners: &[&TcpListener]) -> Result<(), Error> {
    if !crate::journal::postgres::is_postgres_url(&cli.db.to_string_lossy()) {
        return Ok(());
    }
    let began = std::time::Instant::now();
    let mut starting = None;
    let mut pause = JOURNAL_RETRY.0;
    let mut tries = 1u32;
    let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let result = loop {
        let error = match cli.journal() {
            Ok(_) => break Ok(()),
            Err(e) if !e.retry_safe() => break Err(e),
            Err(e) => e,
        };
        let left = max.saturating_sub(began.elapsed());
        if left.is_zero() {
            break Err(Error::Host(anyhow::anyhow!(
                "the journal did not answer within {} ms (--journal-wait-ms; {tries} tries): {error}",
                ms(max)
            )));
        }
        if starting.is_none() {
            starting = Some(Starting::answer_on(listeners, error.kind()).map_err(|e| {
                Error::Host(anyhow::anyhow!(
                    "cannot answer probes while waiting for the journal: {e}"
                ))
            })?);
        }
        let wait = pause.min(left);
        tracing::warn!(
            tries,
            kind = error.kind(),
            "waiting for the journal: {error}; trying again in {} ms ({} ms left of --journal-wait-ms); /readyz says journal unreachable meanwhile",
            ms(wait),
            ms(left)
        );
        std::thread::sleep(wait);
        pause = (pause * 2).min(JOURNAL_RETRY.1);
        tries += 1;
    };
    if let Some(starting) = starting {
        starting.stop();
        if result.is_ok() {
            tracing::warn!(
                tries,
                waited_ms = ms(began.elapsed()),
                "the journal answers: starting"
            );
        }
    }
    result
}

/// Each SIGHUP, as a message on the channel returned.
fn reload_on_hangup() -> Result<crossbeam_channel::Receiver<()>, Error> {
    let mut signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGHUP])
        .map_err(|e| Error::Host(anyhow::anyhow!("cannot handle SIGHUP: {e}")))?;
    let (hangup, hangups) = crossbeam_channel::unbounded();
    std::thread::Builder::new()
        .name("justonce-sighup".into())
        .spawn(move || {
            for _ in signals.forever() {
                if hangup.send(()).is_err() {
                    return;
                }
            }
        })
        .map_err(|e| Error::Host(anyhow::anyhow!("cannot start the SIGHUP thread: {e}")))?;
    Ok(hangups)
}

/// How long a drain lets the calls in flight finish when neither the flag nor the
/// configuration says: below Kubernetes' default grace period of 30 s, with time left
/// for the hand-over and the exit.
const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(20);

/// On SIGTERM or SIGINT, drain: stop reading, let the calls in flight finish and save
/// their outcome (and answer) within `drain_timeout`, hand over those still running
/// then ([`Host::hand_over`]), send the traces not yet exported, then exit 0. Calls
/// still waiting for a worker (or, over HTTP, arriving meanwhile) are not run, no
/// session opens, and `/readyz` says `draining`. The drain's start and end, and each
/// call handed over, are logged at the default level (`warn`): an operator sees why a
/// host left and where its calls went.
fn stop_on_signals(
    shutdown: Arc<Shutdown>,
    host: Arc<Host>,
    drain_timeout: Duration,
) -> Result<(), Error> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT])
        .map_err(|e| Error::Host(anyhow::anyhow!("cannot handle SIGTERM and SIGINT: {e}")))?;
    std::thread::Builder::new()
        .name("justonce-signals".into())
        .spawn(move || {
            if let Some(signal) = signals.forever().next() {
                let began = std::time::Instant::now();
                shutdown.stop();
                let timeout_ms = u64::try_from(drain_timeout.as_millis()).unwrap_or(u64::MAX);
                tracing::warn!(
                    signal,
                    in_flight = shutdown.running(),
                    drain_timeout_ms = timeout_ms,
                    "draining: stopping; /readyz says draining, no new call or session starts, the calls in flight have {timeout_ms} ms to finish"
                );
                let idle = shutdown.wait_idle_for(drain_timeout);
                let took_ms = || u64::try_from(began.elapsed().as_millis()).unwrap_or(u64::MAX);
                if idle {
                    tracing::warn!(
                        took_ms = took_ms(),
                        "drained: the calls in flight finished; exiting"
                    );
                } else {
                    let report = host.hand_over();
                    tracing::warn!(
                        took_ms = took_ms(),
                        handed_over = report.handed_over.len(),
                        not_handed_over = report.failed.len(),
                        "drained: {} call(s) still running after {timeout_ms} ms handed over to the next host that gets their retry{}; exiting",
                        report.handed_over.len(),
                        match report.failed.len() {
                            0 => String::new(),
                            n => format!(", {n} not (the journal failed: a retry takes each over once its lease expires)"),
                        }
                    );
                }
                super::telemetry::shutdown();
                // The reader may be blocked on stdin; everything answered is written
                // and saved (and traced), so the process ends here.
                std::process::exit(i32::from(exit::SUCCESS));
            }
        })
        .map_err(|e| Error::Host(anyhow::anyhow!("cannot start the signal thread: {e}")))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_port_binds_loopback_and_an_address_is_taken_as_given() {
        for (given, bound) in [
            ("8080", "127.0.0.1:8080"),
            (":0", "127.0.0.1:0"),
            ("0.0.0.0:9", "0.0.0.0:9"),
            ("[::1]:9", "[::1]:9"),
        ] {
            assert_eq!(bind_address(given).unwrap().to_string(), bound);
        }
        let refused = bind_address("localhost").unwrap_err();
        assert!(refused.contains("expected ADDR:PORT"), "{refused}");
    }
}
