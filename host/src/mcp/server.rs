//! The stdio loop: one reader that answers protocol requests in order, and a bounded
//! pool of workers that run tool calls concurrently, so two identical calls in
//! flight meet in the invocation guard and run once.

use std::collections::HashMap;
use std::io::{self, BufRead, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, MutexGuard};

use crossbeam_channel::{Receiver, Sender, unbounded};
use serde_json::Value;

use super::ServerConfig;
use super::protocol::{
    self, INTERNAL_ERROR, INVALID_REQUEST, Incoming, Params, RequestId, RpcError,
};
use super::session::{Dispatch, Session, stateless_result};
use super::tools;
use crate::host::{CallRequest, Host};

// Workers share one host; a change that made `Host` unshareable must fail here.
const _: () = {
    const fn shareable<T: Send + Sync>() {}
    shareable::<Host>();
};

/// An MCP server over one pair of streams. Build it with [`Server::new`] and run it
/// with [`Server::serve`].
pub struct Server {
    host: Arc<Host>,
    config: ServerConfig,
    tools: Vec<Value>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("host", &self.host)
            .field("config", &self.config)
            .finish()
    }
}

/// A tool call waiting for a worker.
struct Job {
    id: RequestId,
    request: CallRequest,
    stateless: bool,
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

    fn reply(&self, id: &RequestId, reply: Result<Value, RpcError>) {
        self.send(&match reply {
            Ok(result) => protocol::response(id, result),
            Err(error) => protocol::error_response(Some(id), &error),
        });
    }
}

impl Server {
    /// A server for `host`'s tools.
    pub fn new(host: Arc<Host>, config: ServerConfig) -> Self {
        let tools = tools::descriptors(host.runtime());
        Self {
            host,
            config,
            tools,
        }
    }

    /// Serves one client: reads newline-delimited JSON-RPC from `input` and writes
    /// only protocol messages to `output`, until `input` ends. Tool calls still
    /// running then are finished (and journaled) before this returns.
    pub fn serve<R: BufRead, W: Write + Send>(&self, mut input: R, output: W) -> io::Result<()> {
        let outbox = Outbox(Mutex::new(output));
        let in_flight = InFlight::default();
        let (jobs, queue) = unbounded::<Job>();
        let workers = self.config.max_concurrent_calls.max(1);
        std::thread::scope(|scope| {
            for n in 0..workers {
                std::thread::Builder::new()
                    .name(format!("justonce-mcp-{n}"))
                    .spawn_scoped(scope, || self.work(&queue, &in_flight, &outbox))?;
            }
            let mut session = Session::new(&self.tools, self.config.conversation.as_deref());
            let mut line = Vec::new();
            let result = loop {
                line.clear();
                match input.read_until(b'\n', &mut line) {
                    Ok(0) => break Ok(()),
                    Ok(_) => self.handle(&line, &mut session, &jobs, &in_flight, &outbox),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => break Err(e),
                }
            };
            drop(jobs);
            result
        })
    }

    fn handle<W: Write>(
        &self,
        line: &[u8],
        session: &mut Session<'_>,
        jobs: &Sender<Job>,
        in_flight: &InFlight,
        outbox: &Outbox<W>,
    ) {
        let Ok(text) = std::str::from_utf8(line) else {
            let error = RpcError::new(protocol::PARSE_ERROR, "the line is not valid UTF-8");
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
            Ok(Incoming::Response) => {
                tracing::debug!("ignoring a response: this server sends no requests")
            }
            Ok(Incoming::Notification { method, params }) => {
                self.notification(&method, &params, in_flight)
            }
            Ok(Incoming::Request { id, method, params }) => {
                tracing::debug!(%id, method, "request");
                match session.request(&method, &params) {
                    Dispatch::Reply(reply) => outbox.reply(&id, reply),
                    Dispatch::Call { request, stateless } => {
                        if !in_flight.admit(&id) {
                            let error = RpcError::new(
                                INVALID_REQUEST,
                                format!("request id {id} is already in use by a call in flight"),
                            );
                            return outbox.reply(&id, Err(error));
                        }
                        // The workers live as long as this loop, so the queue is open.
                        let _ = jobs.send(Job {
                            id,
                            request,
                            stateless,
                        });
                    }
                }
            }
        }
    }

    fn notification(&self, method: &str, params: &Params, in_flight: &InFlight) {
        match method {
            "notifications/cancelled" => {
                let Some(id) = params
                    .get("requestId")
                    .and_then(|v| RequestId::try_from(v).ok())
                else {
                    tracing::warn!("notifications/cancelled without a usable requestId");
                    return;
                };
                let reason = params
                    .get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or("none given");
                if in_flight.cancel(&id) {
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
    /// same for every transport.
    pub(crate) fn run_call(
        &self,
        request: &CallRequest,
        stateless: bool,
    ) -> Result<Value, RpcError> {
        let result = catch_unwind(AssertUnwindSafe(|| self.host.call(request)));
        let reply = match result {
            Ok(result) => tools::call_result(result, stateless),
            Err(_) => Err(RpcError::new(
                INTERNAL_ERROR,
                "the host panicked while running the call",
            )),
        };
        if stateless {
            reply.map(stateless_result)
        } else {
            reply
        }
    }

    /// The `tools/list` entries.
    pub(crate) fn tools(&self) -> &[Value] {
        &self.tools
    }

    /// How the server runs calls.
    pub(crate) fn config(&self) -> &ServerConfig {
        &self.config
    }

    fn work<W: Write>(&self, queue: &Receiver<Job>, in_flight: &InFlight, outbox: &Outbox<W>) {
        loop {
            let Ok(job) = queue.recv() else { return };
            if in_flight.is_cancelled(&job.id) {
                in_flight.finish(&job.id);
                tracing::info!(id = %job.id, "call cancelled before it started; not run");
                continue;
            }
            let reply = self.run_call(&job.request, job.stateless);
            if in_flight.finish(&job.id) {
                tracing::info!(id = %job.id, "cancelled call finished; its response is withheld");
                continue;
            }
            outbox.reply(&job.id, reply);
        }
    }
}
