//! The stdio loop: one reader that answers protocol requests in order, and a bounded
//! pool of workers that run tool calls concurrently, so two identical calls in
//! flight meet in the invocation guard and run once.

use std::collections::HashMap;
use std::io::{self, BufRead, Read, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use rmcp::model::{
    CancelledNotificationParam, ProgressNotification, ProgressNotificationParam, ProgressToken,
};
#[allow(deprecated)] // SEP-2577 deprecates logging; revisions up to 2025-11-25 have it.
use rmcp::model::{LoggingLevel, LoggingMessageNotification, LoggingMessageNotificationParam};
use serde_json::Value;

use super::ServerConfig;
use super::catalog::{self, Catalog};
use super::elicit::{Pending, session_asker};
use super::job_queue::JobQueue;
use super::listen::{self, Listens};
use super::mrtr;
use super::protocol::{self, ErrorData, Incoming, Params, RequestId, SERVER_BUSY, TOO_MANY};
use super::session::{Dispatch, Era, Session, severity, stateless_result};
use super::surface::{self, Relay, Subscribed};
use super::task_input::TaskInputs;
use super::tools;
use crate::call::CallRequest;
use crate::host::Host;
use crate::runtime::log_listener::{GuestNote, LogLevel, with_log_listener};
use crate::upstream;

// Workers share one host; a change that made `Host` unshareable must fail here.
const _: () = {
    const fn shareable<T: Send + Sync>() {}
    shareable::<Host>();
};

/// An MCP server over one pair of streams. Build it with [`Server::new`] and run it
/// with [`Server::serve`]. A clone serves the same host, catalog and shutdown.
#[derive(Clone)]
pub struct Server {
    host: Arc<Host>,
    config: ServerConfig,
    catalog: Arc<Catalog>,
    shutdown: Arc<Shutdown>,
    /// Its tasks waiting for their client's input (`mcp::task_input`).
    task_inputs: Arc<TaskInputs>,
    /// What the upstreams say about their resources and prompts, for the clients.
    relay: Arc<Relay>,
}

/// Stops a server gracefully: no new call starts, and [`Shutdown::wait_idle`]
/// returns once the calls already running have finished (and saved their outcome).
/// A server's shutdown is its host's drain ([`Host::drain`]): stopping one drains
/// the other, and a host drained by other means stops the server as well.
#[derive(Debug, Default)]
pub struct Shutdown {
    state: Mutex<Calls>,
    idle: std::sync::Condvar,
    /// The host whose drain this is (none in unit tests).
    host: Option<Arc<Host>>,
}

/// The calls a [`Shutdown`] counts.
#[derive(Debug, Default)]
struct Calls {
    stopping: bool,
    running: usize,
    /// Threads in [`Shutdown::wait_idle`]: only they need a wake-up (a notify is a
    /// system call even when no one waits, and `finish` runs once a call).
    waiting: usize,
}

impl Shutdown {
    fn lock(&self) -> MutexGuard<'_, Calls> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The shutdown of a server on `host`.
    fn of(host: Arc<Host>) -> Self {
        Self {
            host: Some(host),
            ..Self::default()
        }
    }

    /// Lets no new call start, and drains the host.
    pub fn stop(&self) {
        let mut state = self.lock();
        state.stopping = true;
        if let Some(host) = &self.host {
            host.drain();
        }
    }

    /// Whether [`Shutdown::stop`] was called, or the host drained.
    pub fn stopping(&self) -> bool {
        self.is_stopping(&self.lock())
    }

    /// Whether stopping, read under the lock that [`Shutdown::start`] counts under.
    fn is_stopping(&self, state: &Calls) -> bool {
        state.stopping || self.host.as_ref().is_some_and(|host| host.draining())
    }

    /// How many calls are running now.
    pub fn running(&self) -> usize {
        self.lock().running
    }

    /// Counts a call as running; `false` (not counted) once stopping.
    pub(crate) fn start(&self) -> bool {
        let mut state = self.lock();
        if self.is_stopping(&state) {
            return false;
        }
        state.running += 1;
        true
    }

    /// Counts a call [`Shutdown::start`] counted as finished.
    pub(crate) fn finish(&self) {
        let mut state = self.lock();
        state.running -= 1;
        if state.running == 0 && state.waiting > 0 {
            self.idle.notify_all();
        }
    }

    /// Waits until no call is running.
    pub fn wait_idle(&self) {
        let mut state = self.lock();
        state.waiting += 1;
        let mut state = self
            .idle
            .wait_while(state, |s| s.running > 0)
            .unwrap_or_else(|p| p.into_inner());
        state.waiting -= 1;
    }

    /// Waits until no call is running, or `timeout` passed: whether none is.
    pub fn wait_idle_for(&self, timeout: std::time::Duration) -> bool {
        let mut state = self.lock();
        state.waiting += 1;
        let (mut state, _) = self
            .idle
            .wait_timeout_while(state, timeout, |s| s.running > 0)
            .unwrap_or_else(|p| p.into_inner());
        state.waiting -= 1;
        state.running == 0
    }
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("host", &self.host)
            .field("config", &self.config)
            .finish()
    }
}

/// How many requests passed on to upstreams (reads of resources, prompts) are
/// answered at once, over every stdio connection.
pub const MAX_SURFACE_READS: usize = 64;

/// The longest request line the server reads (bytes, without its newline); a longer
/// one is refused with a JSON-RPC error instead of being buffered.
pub const MAX_LINE_BYTES: usize = 4 << 20;

/// How far the host's own progress reports (waiting for a duplicate, retrying an
/// effect) move the progress past the last report.
const HOST_STEP: f64 = 0.001;

/// How many notifications of the upstreams' changed lists and updated resources may
/// wait for a stdio client at once; past that, a flood's further ones are dropped
/// (a tools change has a queue of its own).
const MAX_QUEUED_NOTES: usize = 256;

/// How many tool calls wait for a worker at most; a call that finds the queue full
/// is answered with a retryable `busy` error and not run.
pub const MAX_QUEUED_CALLS: usize = 256;

/// A tool call waiting for a worker.
#[allow(deprecated)]
struct Job {
    id: RequestId,
    request: CallRequest,
    stateless: bool,
    log_level: Option<LoggingLevel>,
    progress_token: Option<ProgressToken>,
    /// What the client declared (`elicitation`, `sampling`, `roots`) that the tool
    /// and its upstream may ask of it.
    declared: super::elicit::Declared,
    /// A stateless call's answers and request state (`mcp::mrtr`).
    input: Option<mrtr::Input>,
}

/// The tool calls that were received and not yet answered, and which of them the
/// client cancelled.
#[derive(Default)]
struct InFlight(Mutex<HashMap<RequestId, bool>>);

impl InFlight {
    fn lock(&self) -> MutexGuard<'_, HashMap<RequestId, bool>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a call; `false` if a call with this id is already in flight.
    fn admit(&self, id: &RequestId) -> bool {
        let mut calls = self.lock();
        if calls.contains_key(id) {
            return false;
        }
        calls.insert(id.clone(), false);
        true
    }

    /// Marks a call cancelled; `false` if no call with this id is in flight.
    fn cancel(&self, id: &RequestId) -> bool {
        self.lock().get_mut(id).map(|c| *c = true).is_some()
    }

    fn is_cancelled(&self, id: &RequestId) -> bool {
        self.lock().get(id).copied().unwrap_or(false)
    }

    /// Forgets a call; whether it was cancelled.
    fn finish(&self, id: &RequestId) -> bool {
        self.lock().remove(id).unwrap_or(false)
    }
}

/// The output stream, one whole message per line, shared by the reader and workers.
struct Outbox<W>(Mutex<W>);

impl<W: Write> Outbox<W> {
    fn send(&self, message: &Value) {
        let mut line = message.to_string();
        line.push('\n');
        let mut out = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = out.write_all(line.as_bytes()).and_then(|()| out.flush()) {
            tracing::warn!("cannot write to the client: {e}");
        }
    }

    fn reply(&self, id: &RequestId, reply: Result<Value, ErrorData>) {
        self.send(&protocol::reply(id, reply));
    }
}

impl Server {
    /// A server for `host`'s tools.
    pub fn new(host: Arc<Host>, config: ServerConfig) -> Self {
        // Off the request path: `initialize` and `tools/list` answer from what is
        // known, each upstream's tools come with `list_changed` once it is ready.
        host.start_upstreams();
        Self {
            relay: Relay::of(&host),
            catalog: Arc::new(Catalog::new(Arc::clone(&host))),
            shutdown: Arc::new(Shutdown::of(Arc::clone(&host))),
            host,
            config,
            task_inputs: Arc::default(),
        }
    }

    /// The tools this server offers; [`Catalog::refresh`] after a reload tells its
    /// clients when they changed.
    pub fn catalog(&self) -> Arc<Catalog> {
        Arc::clone(&self.catalog)
    }

    /// The handle that stops this server gracefully (see [`Shutdown`]).
    pub fn shutdown(&self) -> Arc<Shutdown> {
        Arc::clone(&self.shutdown)
    }

    /// Serves one client: reads newline-delimited JSON-RPC from `input` and writes
    /// only protocol messages to `output`, until `input` ends. Tool calls still
    /// running then are finished (and journaled) before this returns. Once the
    /// client initialized, a change of the tools is told to it as
    /// `notifications/tools/list_changed`.
    pub fn serve<R: BufRead, W: Write + Send + 'static>(
        &self,
        mut input: R,
        output: W,
    ) -> io::Result<()> {
        // Shared with the calls' listeners, which write what a tool says as it runs.
        let outbox = Arc::new(Outbox(Mutex::new(output)));
        let in_flight = InFlight::default();
        // The server's questions to the client, waiting for its answers.
        let pending = Arc::new(Pending::default());
        let queue = JobQueue::<Job>::new(MAX_QUEUED_CALLS);
        let workers = self.config.max_concurrent_calls.max(1);
        // Bounded queues: a flood of changes is not queued without end, and no send
        // blocks the thread that reports one. A tools change waiting covers every
        // later one (the client lists the tools again, once, and sees them all), so
        // its queue holds one, and a flood of resource news never crowds it out.
        let (tools_changed, tools_changes) = crossbeam_channel::bounded::<()>(1);
        let listener = self.catalog.listen(Box::new(move || {
            let _ = tools_changed.try_send(());
        }));
        let (changed, changes) = crossbeam_channel::bounded::<Value>(MAX_QUEUED_NOTES);
        // What the upstreams say of their resources and prompts: a list changed to
        // every client, an updated resource to the one that subscribed to it.
        let subscribed = Arc::new(Subscribed::default());
        // Its stateless client's `subscriptions/listen` streams.
        let listens = Arc::new(Listens::default());
        let holds = Arc::clone(&subscribed);
        let relayed = self.relay.listen(Arc::new(move |news| {
            let note = match news {
                upstream::SurfaceNews::Updated(uri) if holds.holds(uri) => surface::updated(uri),
                news => match surface::list_changed(news) {
                    Some(note) => note,
                    None => return,
                },
            };
            let _ = changed.try_send(note);
        }));
        let initialized = AtomicBool::new(false);
        let served = std::thread::scope(|scope| {
            // However this closure ends, the workers then drain the queue and return.
            let closing = queue.closing();
            for n in 0..workers {
                std::thread::Builder::new()
                    .name(format!("justonce-mcp-{n}"))
                    .spawn_scoped(scope, || self.work(&queue, &in_flight, &outbox, &pending))?;
            }
            // Ends when the listener is dropped, after the loop below.
            let notifier = std::thread::Builder::new()
                .name("justonce-mcp-notify".into())
                .spawn_scoped(scope, || {
                    let (never_tools, never_notes) = (
                        crossbeam_channel::never::<()>(),
                        crossbeam_channel::never::<Value>(),
                    );
                    let (mut tools_open, mut notes_open) = (true, true);
                    while tools_open || notes_open {
                        let tools = if tools_open {
                            &tools_changes
                        } else {
                            &never_tools
                        };
                        let notes = if notes_open { &changes } else { &never_notes };
                        let note = crossbeam_channel::select! {
                            recv(tools) -> got => match got {
                                Ok(()) => catalog::list_changed(),
                                Err(_) => {
                                    tools_open = false;
                                    continue;
                                }
                            },
                            recv(notes) -> got => match got {
                                Ok(note) => note,
                                Err(_) => {
                                    notes_open = false;
                                    continue;
                                }
                            },
                        };
                        if initialized.load(Ordering::Acquire) {
                            outbox.send(&note);
                        }
                    }
                })?;
            let result = self.read_loop(
                &mut input,
                (&queue, &in_flight, &pending),
                (&outbox, &subscribed, &listens),
                &initialized,
            );
            // No answer comes any more: a call waiting for one ends without it.
            pending.close();
            drop(closing);
            self.catalog.unlisten(listener);
            self.relay.unlisten(relayed);
            subscribed.end(&self.host);
            listens.end_all();
            let _ = notifier.join();
            result
        });
        self.catalog.unlisten(listener);
        self.relay.unlisten(relayed);
        served
    }

    /// Reads and handles the client's messages until its input ends (or the server
    /// stops); `initialized` is set once it speaks through `initialize`.
    fn read_loop<R: BufRead, W: Write + Send + 'static>(
        &self,
        input: &mut R,
        calls: (&JobQueue<Job>, &InFlight, &Pending),
        (outbox, subscribed, listens): (&Arc<Outbox<W>>, &Arc<Subscribed>, &Arc<Listens>),
        initialized: &AtomicBool,
    ) -> io::Result<()> {
        let mut session = Session::new(self.catalog.listing(), self.config.scoping())
            .over_stdio()
            .passing(&self.host)
            .with_upstreams(self.catalog.upstreams());
        let mut line = Vec::new();
        loop {
            if self.shutdown.stopping() {
                break Ok(());
            }
            line.clear();
            match read_line(input, &mut line) {
                Ok(Line::End) => break Ok(()),
                Ok(Line::Read) => {
                    session.offer(self.catalog.listing());
                    session.offer_upstreams(self.catalog.upstreams());
                    self.handle(&line, &mut session, calls, (outbox, subscribed, listens));
                    if matches!(session.era(), Era::Handshake(_)) {
                        initialized.store(true, Ordering::Release);
                    }
                }
                Ok(Line::TooLong) => {
                    let error = ErrorData::invalid_request(
                        format!("the request line exceeds {MAX_LINE_BYTES} bytes; it was not read"),
                        None,
                    );
                    outbox.send(&protocol::error_response(None, &error));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        }
    }

    fn handle<W: Write + Send + 'static>(
        &self,
        line: &[u8],
        session: &mut Session<'_>,
        (jobs, in_flight, pending): (&JobQueue<Job>, &InFlight, &Pending),
        (outbox, subscribed, listens): (&Arc<Outbox<W>>, &Arc<Subscribed>, &Arc<Listens>),
    ) {
        let Ok(text) = std::str::from_utf8(line) else {
            let error = ErrorData::parse_error("the line is not valid UTF-8", None);
            return outbox.send(&protocol::error_response(None, &error));
        };
        let text = text.trim();
        if text.is_empty() {
            return;
        }
        match protocol::parse(text) {
            Err(malformed) => {
                tracing::debug!(error = %malformed.error.message, "malformed message");
                outbox.send(&protocol::error_response(
                    malformed.id.as_ref(),
                    &malformed.error,
                ));
            }
            Ok(Incoming::Response { id, outcome }) => {
                if !pending.respond(&id, outcome) {
                    tracing::debug!(%id, "a response to no question waiting for one; ignored");
                }
            }
            Ok(Incoming::Notification { method, params }) => {
                self.notification(&method, &params, (in_flight, pending, listens))
            }
            Ok(Incoming::Request { id, method, params }) => {
                tracing::debug!(%id, method, "request");
                match session.request(&method, &params) {
                    Dispatch::Reply(reply) => outbox.reply(&id, reply),
                    Dispatch::Surface {
                        method,
                        params,
                        stateless,
                    } => self.pass_on(id, (method, params, stateless), outbox, subscribed),
                    Dispatch::Listen(params) => self.listen(id, params, outbox, listens),
                    Dispatch::Call {
                        request,
                        stateless,
                        log_level,
                        progress_token,
                        input,
                    } => {
                        if !in_flight.admit(&id) {
                            let error = ErrorData::invalid_request(
                                format!("request id {id} is already in use by a call in flight"),
                                None,
                            );
                            return outbox.reply(&id, Err(error));
                        }
                        // A replay answered from memory goes out at once; any other
                        // call waits for a worker (one with a request state too: its
                        // check reads the journal, on the worker).
                        if !input.as_ref().is_some_and(mrtr::Input::has_state)
                            && self.shutdown.start()
                        {
                            let replayed = self.replay_from_memory(&request, stateless, false);
                            self.shutdown.finish();
                            if let Some(reply) = replayed {
                                in_flight.finish(&id);
                                return outbox.reply(&id, reply);
                            }
                        }
                        let job = Job {
                            id,
                            request,
                            stateless,
                            log_level,
                            progress_token,
                            declared: session.declared(),
                            input,
                        };
                        // The workers live as long as this loop, so the queue is open;
                        // a full one answers at once instead of growing.
                        if let Err((_, job)) = jobs.try_push(job) {
                            in_flight.finish(&job.id);
                            let busy = ErrorData::new(
                                SERVER_BUSY,
                                format!(
                                    "the server is busy: {MAX_QUEUED_CALLS} calls are waiting; nothing was run, retry the same call later"
                                ),
                                Some(serde_json::json!({
                                    "kind": "busy",
                                    "retry_safe": true,
                                })),
                            );
                            outbox.reply(&job.id, Err(busy));
                        }
                    }
                }
            }
        }
    }

    /// Answers a request passed on to an upstream on a thread of its own, so that a
    /// slow upstream holds up neither the connection's reader nor the tool calls; at
    /// most [`MAX_SURFACE_READS`] at once, a request past them refused as busy.
    fn pass_on<W: Write + Send + 'static>(
        &self,
        id: RequestId,
        (method, params, stateless): (String, Params, bool),
        outbox: &Arc<Outbox<W>>,
        subscribed: &Arc<Subscribed>,
    ) {
        static READING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        if READING.fetch_add(1, Ordering::SeqCst) >= MAX_SURFACE_READS {
            READING.fetch_sub(1, Ordering::SeqCst);
            let busy = ErrorData::new(
                SERVER_BUSY,
                format!(
                    "the server is busy: {MAX_SURFACE_READS} requests to upstreams are under way; retry later"
                ),
                Some(serde_json::json!({ "kind": "busy", "retry_safe": true })),
            );
            return outbox.reply(&id, Err(busy));
        }
        let (host, outbox, subscribed) = (
            Arc::clone(&self.host),
            Arc::clone(outbox),
            Arc::clone(subscribed),
        );
        let spawned = std::thread::Builder::new()
            .name("justonce-mcp-upstream-read".into())
            .spawn(move || {
                let reply = surface::answer(&host, &method, &params, Some(&subscribed));
                READING.fetch_sub(1, Ordering::SeqCst);
                outbox.reply(&id, super::session::passed_on(&method, reply, stateless));
            });
        if let Err(e) = spawned {
            READING.fetch_sub(1, Ordering::SeqCst);
            tracing::warn!("no thread for a request to an upstream: {e}");
        }
    }

    /// Opens a `subscriptions/listen` stream on a thread of its own (it subscribes
    /// upstream): its messages go out on `outbox` until its client cancels it or
    /// the connection ends.
    fn listen<W: Write + Send + 'static>(
        &self,
        id: RequestId,
        params: Params,
        outbox: &Arc<Outbox<W>>,
        listens: &Arc<Listens>,
    ) {
        let (host, relay, catalog) = (
            Arc::clone(&self.host),
            Arc::clone(&self.relay),
            Arc::clone(&self.catalog),
        );
        let (outbox, listens) = (Arc::clone(outbox), Arc::clone(listens));
        if !listens.opening(id.clone()) {
            let busy = ErrorData::new(
                TOO_MANY,
                listen::too_many_listens(),
                Some(serde_json::json!({ "kind": "busy", "retry_safe": true })),
            );
            outbox.reply(&id, Err(busy));
            return;
        }
        let forget = (Arc::clone(&listens), Arc::clone(&outbox), id.clone());
        let spawned = std::thread::Builder::new()
            .name("justonce-mcp-listen".into())
            .spawn(move || {
                let to = Arc::clone(&outbox);
                let sink: listen::Sink = Arc::new(move |note: &Value| to.send(note));
                match listen::open((&host, &relay, &catalog), &id, &params, sink) {
                    Ok(listening) => listens.keep(id, listening),
                    Err(refused) => {
                        listens.end(&id);
                        outbox.reply(&id, Err(refused));
                    }
                }
            });
        if let Err(e) = spawned {
            let (listens, outbox, id) = forget;
            listens.end(&id);
            tracing::warn!("no thread for a subscriptions/listen stream: {e}");
            let busy = ErrorData::new(
                SERVER_BUSY,
                "the server could not open the stream now; retry later",
                Some(serde_json::json!({ "kind": "busy", "retry_safe": true })),
            );
            outbox.reply(&id, Err(busy));
        }
    }

    fn notification(&self, method: &str, params: &Params, calls: (&InFlight, &Pending, &Listens)) {
        let (in_flight, pending, listens) = calls;
        match method {
            "notifications/cancelled" => {
                let cancelled =
                    serde_json::from_value::<CancelledNotificationParam>(params.clone().into());
                // rmcp's id is an `i64` or a string; the call's, the id as sent.
                let Some((id, reason)) = cancelled.ok().and_then(|c| {
                    let id = RequestId::try_from(&c.request_id?.into_json_value()).ok()?;
                    Some((id, c.reason))
                }) else {
                    tracing::warn!("notifications/cancelled without a usable requestId");
                    return;
                };
                let reason = reason.as_deref().unwrap_or("none given");
                if listens.end(&id) {
                    // Cancelling its request is how a client ends a listen stream.
                    tracing::debug!(%id, "a subscriptions/listen stream ended by its client");
                } else if in_flight.cancel(&id) {
                    // A question it waits on is not answered now: the call ends
                    // without it (resumable), and does not hold its worker.
                    if pending.cancel_call(&id) {
                        tracing::info!(%id, "call cancelled while it was asked; it ends unanswered");
                    }
                    // Stopping a guest between an effect and its journal record is the
                    // very ambiguity justonce removes, so the call runs to its outcome,
                    // keeps its record, and a retry gets that outcome. Only the
                    // response is withheld, as the protocol asks.
                    tracing::info!(%id, reason, "call cancelled by the client; it runs to its outcome, its response is withheld");
                } else {
                    tracing::debug!(%id, "cancellation of a request that is not in flight");
                }
            }
            "notifications/initialized" => tracing::debug!("client initialized"),
            other => tracing::debug!(method = other, "ignoring notification"),
        }
    }

    /// Runs one tool call to its answer, shaped for the connection's revision; the
    /// same for every transport. A `remote` caller is told of a failure of the host
    /// itself without its detail (see [`tools::call_result`]). A tool kept from MCP
    /// is answered as an unknown one, and does not run.
    pub(crate) fn run_call(
        &self,
        request: &CallRequest,
        stateless: bool,
        remote: bool,
    ) -> Result<Value, ErrorData> {
        let result = catch_unwind(AssertUnwindSafe(|| {
            if self.host.exposed_over_mcp(&request.tool) {
                self.host.call(request)
            } else {
                Err(tools::hidden_tool(&self.host, &request.tool))
            }
        }));
        shaped(result, request, stateless, remote)
    }

    /// [`Server::run_call`] of a call that replayed lately, answered from memory
    /// alone: no I/O, nothing run, so it never blocks (see
    /// [`Host::replay_from_memory`]); the same reply, or `None` when the call is not
    /// remembered, and then `run_call` (or [`Server::run_call_logged`]: a replay
    /// hears nothing) answers it. The caller counts it for [`Shutdown`] as a call.
    pub(crate) fn replay_from_memory(
        &self,
        request: &CallRequest,
        stateless: bool,
        remote: bool,
    ) -> Option<Result<Value, ErrorData>> {
        let result = catch_unwind(AssertUnwindSafe(|| {
            self.host
                .exposed_over_mcp(&request.tool)
                .then(|| self.host.replay_from_memory(request))
                .flatten()
        }));
        match result {
            Ok(None) => None,
            Ok(Some(answer)) => Some(shaped(Ok(answer), request, stateless, remote)),
            Err(panic) => Some(shaped(Err(panic), request, stateless, remote)),
        }
    }

    /// [`Server::run_call`], handing `deliver` the tool's log lines at `log_level` or
    /// more severe as `notifications/message`, and its progress reports to
    /// `progress_token` as `notifications/progress` (each `progress` larger than the
    /// last; others are dropped), as the tool says them, before the answer; the
    /// host's own (waiting for a duplicate, retrying an effect) go to the token too.
    /// Nothing is heard without a level or a token, nor for a replayed call (its
    /// tool does not run).
    #[allow(deprecated)] // `LoggingLevel`, see the imports.
    pub(crate) fn run_call_logged(
        &self,
        request: &CallRequest,
        stateless: bool,
        remote: bool,
        (log_level, progress_token): (Option<LoggingLevel>, Option<ProgressToken>),
        deliver: impl Fn(Value) + 'static,
    ) -> Result<Value, ErrorData> {
        if log_level.is_none() && progress_token.is_none() {
            return self.run_call(request, stateless, remote);
        }
        let last_progress = std::cell::Cell::new(f64::NEG_INFINITY);
        let progress = move |progress: ProgressNotificationParam| {
            let note: ProgressNotification = rmcp::model::Notification::new(progress);
            protocol::notification(note)
        };
        let listener = Box::new(move |tool: &str, note: GuestNote<'_>| match note {
            GuestNote::Log(level, message) => {
                let level = match level {
                    LogLevel::Trace | LogLevel::Debug => LoggingLevel::Debug,
                    LogLevel::Info => LoggingLevel::Info,
                    LogLevel::Warn => LoggingLevel::Warning,
                    LogLevel::Error => LoggingLevel::Error,
                };
                if log_level.is_some_and(|least| severity(level) >= severity(least)) {
                    let line = LoggingMessageNotificationParam::new(level, Value::from(message))
                        .with_logger(tool);
                    let note: LoggingMessageNotification = rmcp::model::Notification::new(line);
                    deliver(protocol::notification(note));
                }
            }
            // No scale of its own: a step past the last report, so progress still
            // increases and the guest's next report still counts.
            GuestNote::Host(message) => {
                let Some(token) = &progress_token else { return };
                let last = last_progress.get();
                let done = if last.is_finite() {
                    last + HOST_STEP
                } else {
                    0.0
                };
                last_progress.set(done);
                deliver(progress(
                    ProgressNotificationParam::new(token.clone(), done).with_message(message),
                ));
            }
            GuestNote::Progress {
                done,
                total,
                message,
            } => {
                let Some(token) = &progress_token else { return };
                // MCP: progress increases with each notification.
                if !done.is_finite() || done <= last_progress.get() {
                    return;
                }
                last_progress.set(done);
                let mut report = ProgressNotificationParam::new(token.clone(), done);
                report.total = total.filter(|t| t.is_finite());
                report.message = message.map(str::to_owned);
                deliver(progress(report));
            }
        });
        with_log_listener(listener, || self.run_call(request, stateless, remote))
    }

    /// What the upstreams say about their resources and prompts.
    pub(crate) fn relay(&self) -> &Arc<Relay> {
        &self.relay
    }

    /// The host the server calls tools on.
    pub(crate) fn host(&self) -> &Arc<Host> {
        &self.host
    }

    /// Its tasks waiting for their client's input.
    pub(crate) fn task_inputs(&self) -> &Arc<TaskInputs> {
        &self.task_inputs
    }

    /// The `tools/list` entries now.
    pub(crate) fn tools(&self) -> Arc<Vec<rmcp::model::Tool>> {
        self.catalog.listing()
    }

    /// Where each upstream MCP server stands now, as `tools/list` tells it.
    pub(crate) fn upstreams(&self) -> Arc<serde_json::Value> {
        self.catalog.upstreams()
    }

    /// How the server runs calls.
    pub(crate) fn config(&self) -> &ServerConfig {
        &self.config
    }

    fn work<W: Write + Send + 'static>(
        &self,
        queue: &JobQueue<Job>,
        in_flight: &InFlight,
        outbox: &Arc<Outbox<W>>,
        pending: &Arc<Pending>,
    ) {
        loop {
            let Some(job) = queue.pop() else { return };
            if in_flight.is_cancelled(&job.id) {
                in_flight.finish(&job.id);
                tracing::info!(id = %job.id, "call cancelled before it started; not run");
                continue;
            }
            if !self.shutdown.start() {
                // Stopping: a call that has not started is not run (nothing of it is
                // stored; the client's retry is safe).
                in_flight.finish(&job.id);
                continue;
            }
            // What the tool says goes out as it says it, before the answer.
            let out = Arc::clone(outbox);
            let run = || {
                self.run_call_logged(
                    &job.request,
                    job.stateless,
                    false,
                    (job.log_level, job.progress_token),
                    move |note| out.send(&note),
                )
            };
            // A session's client is asked on this connection, if it said it can be.
            let reply = if job.stateless {
                // Asked through its result (`input_required`), answered by its retry.
                match job.input {
                    Some(input) => mrtr::run(input, &self.host, &job.request, run),
                    None => run(),
                }
            } else {
                let out = Arc::clone(outbox);
                let asker = session_asker(
                    (job.declared, job.id.clone()),
                    Arc::clone(pending),
                    move |request| out.send(request),
                    self.config.ask_timeout,
                );
                crate::ask::with_asker(asker, run)
            };
            if in_flight.finish(&job.id) {
                tracing::info!(id = %job.id, "cancelled call finished; its response is withheld");
            } else {
                outbox.reply(&job.id, reply);
            }
            self.shutdown.finish();
        }
    }
}

/// A call's answer (or its panic) as a reply for the connection's revision; a
/// replay's note speaks of a conversation only where `request` named one.
fn shaped(
    result: std::thread::Result<crate::error::Result<crate::call::CallResponse>>,
    request: &CallRequest,
    stateless: bool,
    remote: bool,
) -> Result<Value, ErrorData> {
    let reply = match result {
        Ok(result) => tools::call_result(result, stateless, remote).map(|mut reply| {
            if request.conversation.is_none() {
                tools::no_conversation_named(&mut reply);
            }
            reply
        }),
        Err(_) => Err(ErrorData::internal_error(
            "the host panicked while running the call",
            None,
        )),
    };
    if stateless {
        reply.map(stateless_result)
    } else {
        reply
    }
}

/// What [`read_line`] read.
enum Line {
    /// A whole line (or the last bytes before the end) is in the buffer.
    Read,
    /// The line was longer than [`MAX_LINE_BYTES`]; it was skipped to its end.
    TooLong,
    /// The input ended.
    End,
}

/// Reads one line into `line`, at most [`MAX_LINE_BYTES`] of it: a longer line is
/// skipped to its newline without being buffered.
fn read_line<R: BufRead>(input: &mut R, line: &mut Vec<u8>) -> io::Result<Line> {
    let cap = MAX_LINE_BYTES as u64 + 1;
    let n = Read::take(&mut *input, cap).read_until(b'\n', line)?;
    if n == 0 {
        return Ok(Line::End);
    }
    if line.len() as u64 <= MAX_LINE_BYTES as u64 || line.ends_with(b"\n") {
        return Ok(Line::Read);
    }
    // Skip the rest of the line, a buffer at a time.
    loop {
        let buffer = input.fill_buf()?;
        if buffer.is_empty() {
            return Ok(Line::TooLong);
        }
        match buffer.iter().position(|&b| b == b'\n') {
            Some(at) => {
                input.consume(at + 1);
                return Ok(Line::TooLong);
            }
            None => {
                let all = buffer.len();
                input.consume(all);
            }
        }
    }
}

#[cfg(test)]
mod shutdown_tests {
    use super::*;

    /// `wait_idle` returns at once when no call runs, and otherwise once the last
    /// running call finishes (the wake-up is not lost for being skipped when no one
    /// waits); once stopping, no new call is counted.
    #[test]
    fn wait_idle_returns_once_the_last_running_call_finishes() {
        let shutdown = Arc::new(Shutdown::default());
        shutdown.wait_idle();
        assert!(shutdown.start() && shutdown.start());
        shutdown.finish();
        assert!(
            shutdown.start(),
            "finished with no one waiting: still counts"
        );
        shutdown.stop();
        assert!(!shutdown.start(), "no new call once stopping");
        let waiter = {
            let shutdown = Arc::clone(&shutdown);
            std::thread::spawn(move || shutdown.wait_idle())
        };
        while shutdown.lock().waiting == 0 {
            std::thread::yield_now();
        }
        shutdown.finish();
        assert!(!waiter.is_finished(), "one call still runs");
        shutdown.finish();
        waiter.join().unwrap();
        assert_eq!(shutdown.lock().running, 0);
        assert_eq!(shutdown.lock().waiting, 0);
    }
}
