//! A blocking MCP client over one child process's stdio: newline-delimited JSON-RPC,
//! a reader thread that hands each response to the request waiting for it, the
//! child's stderr into our log.
//!
//! Hand-written rather than rmcp's client: the surface it needs is a few requests
//! (`initialize`, `tools/list`, `tools/call`, the reads of `surface`) and the
//! notifications it hears, the guard
//! calls providers from blocking threads, and rmcp's client is async and brings its
//! child-process transport and a tokio process driver with it.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::credentials::Credentials;
use super::late::LateAnswers;
use super::log_field::{capped, field};
use super::progress;
use crate::provider::{ClientReply, ClientRequests};
use crate::runtime::log_listener;

/// The MCP revision this client asks for; an upstream may answer an older one.
pub(crate) const PROTOCOL_VERSION: &str = "2025-06-18";

/// The parameters of the `initialize` this client sends an upstream, over either
/// transport. It declares what the gateway passes on to the client of the call that
/// asks (elicitation, sampling, roots): an upstream offers the tools that use them
/// (`server-everything` lists `trigger-elicitation-request` only to a client that
/// declared `elicitation`), and a call whose client did not declare one is refused
/// it with `-32021` when its tool asks ([`crate::provider::ClientRequests`]).
pub(crate) fn initialize_params() -> Value {
    json!({
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": { "elicitation": {}, "sampling": {}, "roots": {} },
        "clientInfo": { "name": "justonce", "version": env!("CARGO_PKG_VERSION") },
    })
}

/// Why a request got no result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum ClientError {
    /// Nothing was sent: the process is gone or its input is closed.
    #[error("not sent: {0}")]
    NotSent(String),
    /// Nothing was sent: the upstream is not ready (starting, or failing until its
    /// supervisor starts it again); the text names it and its state.
    #[error("not sent: {0}")]
    Down(String),
    /// Sent, and no answer came (the process ended, or the timeout passed): the
    /// request may or may not have taken effect.
    #[error("no answer: {0}")]
    Lost(String),
    /// The upstream answered with a JSON-RPC error.
    #[error("the upstream answered an error: {0}")]
    Refused(Value),
    /// The upstream refused the host's configuration before processing anything
    /// (HTTP 401 or 403: its credentials; a redirect: its `url`): not performed,
    /// and the same call goes through once the configuration is fixed.
    #[error("not processed: {0}")]
    Misconfigured(String),
}

/// The only variables of the host's environment a stdio upstream is started with
/// (besides its configured `env`): enough to find programs and a home directory.
pub(crate) const INHERITED_ENV: &[&str] = &["PATH", "HOME", "LANG"];

/// The longest line read from an upstream's output: a longer one is dropped with a
/// warning (the answer it carried is lost), never held in memory whole.
pub(crate) const MAX_LINE_BYTES: usize = 17 << 20;

/// The most requests given up past their timeout that a connection still follows
/// (their answers kept when they come); past it, the oldest is forgotten.
pub(crate) const MAX_GIVEN_UP: usize = 1024;

/// The most of one line of an upstream's stderr the log keeps: a longer line is
/// cut there (the rest read and dropped), saying how long it was.
const MAX_STDERR_LINE_BYTES: usize = super::log_field::MAX_FIELD_BYTES;

/// One line of an upstream's output, read without holding more than a cap of it.
#[derive(Debug, PartialEq)]
pub(super) enum Line {
    /// A line (its newline taken off).
    Read(String),
    /// A line longer than the cap, read to its end: its first `max` bytes and its
    /// length.
    Overlong {
        /// Its first bytes, up to the cap.
        head: String,
        /// Its length in bytes.
        length: usize,
    },
    /// The output closed (or could not be read).
    End,
}

/// Reads the next line of `reader`, keeping at most `max` bytes of it.
pub(super) fn read_line(reader: &mut impl BufRead, max: usize) -> Line {
    let mut line = Vec::new();
    let mut length = 0usize;
    loop {
        let buffer = match reader.fill_buf() {
            Ok(buffer) => buffer,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return Line::End,
        };
        if buffer.is_empty() {
            // The output closed: a last line without its newline still counts.
            return match length {
                0 => Line::End,
                _ if length > max => Line::Overlong {
                    head: String::from_utf8_lossy(&line).into_owned(),
                    length,
                },
                _ => Line::Read(String::from_utf8_lossy(&line).into_owned()),
            };
        }
        let (chunk, done) = match buffer.iter().position(|&b| b == b'\n') {
            Some(at) => (&buffer[..at], Some(at + 1)),
            None => (buffer, None),
        };
        length = length.saturating_add(chunk.len());
        let room = max.saturating_sub(line.len());
        line.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let used = done.unwrap_or(chunk.len());
        reader.consume(used);
        if done.is_some() {
            if length > max {
                return Line::Overlong {
                    head: String::from_utf8_lossy(&line).into_owned(),
                    length,
                };
            }
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            return Line::Read(String::from_utf8_lossy(&line).into_owned());
        }
    }
}

/// A request sent and not answered yet.
struct Waiter {
    /// Where its answer and progress reports go, while someone waits for it; `None`
    /// once its requester gave up (past the timeout).
    to: Option<Sender<Value>>,
    /// Whether its requester hears the upstream's log messages (a `tools/call`
    /// whose client listens).
    hears: bool,
    /// The effect key it carries, if any: an answer that comes when nobody waits
    /// is kept under it ([`LateAnswers`]), and a later attempt under the same key
    /// waits for this request instead of sending another.
    key: Option<String>,
    /// Whether its requester answers what the upstream asks of the client meanwhile
    /// (a `tools/call` of a guarded call): such requests go to it.
    asks: bool,
    /// The upstream's request it waits on, kept unanswered for the client's later
    /// answer ([`ClientReply::Later`]): handed to the request that takes it up.
    parked: Option<Value>,
    /// The questions of the upstream's its requesters answered so far
    /// ([`ClientRequests::questions`]), handed to the one that takes it up.
    questions: u32,
    /// Who waits for it (or last did): its sender's request id, or the number a
    /// requester that took it up drew, so that one that gives up clears only its
    /// own place, never that of a later requester that took the request up
    /// meanwhile.
    waiter: u64,
}

type Pending = Arc<Mutex<HashMap<u64, Waiter>>>;

/// Where the numbers of the requesters that take a request up start: far from
/// any request's id (so a taker's number is never a sender's), which the
/// upstream sees numbered from 1 without a gap.
const TAKERS: u64 = 1 << 62;

/// What a request under an effect key waits for (over either transport).
pub(super) enum Waiting {
    /// The answer kept for the key, which came after an earlier request gave up.
    Kept(Value),
    /// The earlier request (by id) under the key, still running upstream, and the
    /// request of the upstream's it waits on, if it was parked.
    Earlier(u64, Option<Value>),
    /// An attempt that only takes up an earlier request found none (it ended).
    Gone,
    /// Nothing yet: a new request is sent.
    New,
}

/// Called (on the thread that reads the upstream) when it says its tools changed.
pub(crate) type ListChanged = Arc<dyn Fn() + Send + Sync>;

/// Called (on the thread that reads the upstream) with a notification about what it
/// offers besides its tools (`notifications/resources/list_changed`,
/// `notifications/resources/updated`, `notifications/prompts/list_changed`).
pub(crate) type Heard = Arc<dyn Fn(&Value) + Send + Sync>;

/// Whether `method` is a notification [`Heard`] is told.
pub(crate) fn is_surface_news(method: &str) -> bool {
    matches!(
        method,
        "notifications/resources/list_changed"
            | "notifications/resources/updated"
            | "notifications/prompts/list_changed"
    )
}

/// Called (on the thread that reads the upstream) when its output closed, before
/// the requests waiting on it learn that no answer comes: why.
pub(crate) type Ended = Box<dyn Fn(&str) + Send>;

/// What a stdio client tells its upstream's owner.
pub(crate) struct Hooks {
    /// It said its tools changed.
    pub(crate) changed: ListChanged,
    /// It said its resources or prompts changed, or a resource was updated.
    pub(crate) heard: Heard,
    /// It ended.
    pub(crate) ended: Ended,
    /// Where the answers that came after their requester gave up are kept.
    pub(crate) late: Arc<LateAnswers>,
}

/// One running upstream process and the requests waiting on it.
pub(crate) struct StdioClient {
    upstream: String,
    stdin: Arc<Mutex<ChildStdin>>,
    pending: Pending,
    next_id: AtomicU64,
    /// Numbers the requesters that take an earlier request up (from [`TAKERS`]).
    takers: AtomicU64,
    alive: Arc<AtomicBool>,
    child: Mutex<Child>,
    /// Set when the host stops the process itself: its end is then no news.
    closing: Arc<AtomicBool>,
    /// The answers that came after their requester gave up.
    late: Arc<LateAnswers>,
}

impl StdioClient {
    /// Starts `command` with an environment of its own: `PATH`, `HOME` and `LANG`
    /// of this process's (when set) and `env`, nothing else (the host's database URL
    /// and credentials are not an upstream's business). `upstream` names it in the
    /// log; `hooks` are called when it says its tools changed and when it ends. Each message it
    /// sends and each line of its stderr is stripped of `credentials` as it is read.
    pub(crate) fn spawn(
        upstream: &str,
        command: &[String],
        env: &[(String, String)],
        hooks: Hooks,
        credentials: Credentials,
    ) -> Result<Self, String> {
        let (program, args) = command
            .split_first()
            .ok_or_else(|| format!("upstream `{upstream}`: `command` is empty"))?;
        let inherited = INHERITED_ENV
            .iter()
            .filter_map(|name| Some((*name, std::env::var_os(name)?)));
        let mut child = Command::new(program)
            .args(args)
            .env_clear()
            .envs(inherited)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("upstream `{upstream}`: cannot start {program:?}: {e}"))?;
        let stdin = Arc::new(Mutex::new(child.stdin.take().expect("piped stdin")));
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        let pending: Pending = Arc::default();
        let alive = Arc::new(AtomicBool::new(true));
        let closing = Arc::new(AtomicBool::new(false));
        let name = upstream.to_owned();
        let stderr_credentials = credentials.clone();
        std::thread::Builder::new()
            .name(format!("upstream-{upstream}-stderr"))
            .spawn(move || log_stderr(&name, stderr, &stderr_credentials))
            .map_err(|e| e.to_string())?;
        let reader = Reader {
            upstream: upstream.to_owned(),
            pending: Arc::clone(&pending),
            alive: Arc::clone(&alive),
            stdin: Arc::clone(&stdin),
            list_changed: hooks.changed,
            heard: hooks.heard,
            ended: hooks.ended,
            closing: Arc::clone(&closing),
            credentials,
            late: Arc::clone(&hooks.late),
        };
        std::thread::Builder::new()
            .name(format!("upstream-{upstream}-stdout"))
            .spawn(move || reader.run(stdout))
            .map_err(|e| e.to_string())?;
        Ok(Self {
            upstream: upstream.to_owned(),
            stdin,
            pending,
            next_id: AtomicU64::new(1),
            takers: AtomicU64::new(0),
            alive,
            child: Mutex::new(child),
            closing,
            late: hooks.late,
        })
    }

    /// Whether the process still answers (its output is open).
    pub(crate) fn alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }

    /// `initialize` and `notifications/initialized`: the upstream's `initialize` result.
    pub(crate) fn initialize(&self, timeout: Duration) -> Result<Value, ClientError> {
        let result = self.request(
            "initialize",
            initialize_params(),
            timeout,
            (None, None),
            None,
        )?;
        self.send(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))?;
        Ok(result)
    }

    /// Sends request `method` and waits up to `timeout` for its result. With
    /// `progress_of` (a tool's name) and someone listening on this thread (an MCP
    /// client that asked for progress), the upstream is asked for progress and its
    /// reports are handed on, coalesced, as that tool's.
    ///
    /// A request carrying an effect `key` is never sent twice at once: past its
    /// timeout it stays registered (its answer, when it comes, is kept as a late
    /// answer), and a later request under the same key waits for that one's answer
    /// instead of sending another, or is answered at once with the answer kept.
    ///
    /// With `asks`, what the upstream asks of the client while this request runs
    /// (its `elicitation/create`, `sampling/createMessage`, `roots/list`) is answered
    /// by it; the time it takes (a person reading) does not count against `timeout`.
    /// Over stdio nothing in such a request names the request it belongs to: it goes
    /// to the one request in flight that takes them, and is refused while several are.
    pub(crate) fn request(
        &self,
        method: &str,
        mut params: Value,
        timeout: Duration,
        (key, progress_of): (Option<&str>, Option<&str>),
        asks: Option<&dyn ClientRequests>,
    ) -> Result<Value, ClientError> {
        let (tx, rx): (Sender<Value>, Receiver<Value>) = channel();
        let resumes = asks.is_some_and(|asks| asks.resumes());
        // This requester's number: its request's id when it sends one, else the
        // number it takes an earlier request up under.
        let taker = TAKERS + self.takers.fetch_add(1, Ordering::Relaxed);
        let (id, own) = match self.waiting_on(key, &tx, taker, (asks, resumes)) {
            Waiting::Kept(message) => return answer_of(&self.upstream, method, message),
            Waiting::Earlier(id, parked) => {
                tracing::info!(target: "justonce::upstream", upstream = %self.upstream, "a {method} under the same key is still running upstream: waiting for its answer rather than sending it again");
                if let Some(parked) = parked {
                    // Handed on first, as if it came now.
                    let _ = tx.send(parked);
                }
                (id, taker)
            }
            Waiting::Gone => {
                return Err(ClientError::Lost(format!(
                    "upstream `{}` no longer runs the {method} that waited for the client's answer (it ended or restarted): whether it took effect is unknown",
                    self.upstream
                )));
            }
            Waiting::New => {
                let id = self.next_id.fetch_add(1, Ordering::Relaxed);
                if progress_of.is_some()
                    && log_listener::listening()
                    && let Some(params) = params.as_object_mut()
                {
                    let meta = params.entry("_meta").or_insert_with(|| json!({}));
                    if let Some(meta) = meta.as_object_mut() {
                        meta.insert("progressToken".into(), json!(id));
                    }
                }
                self.lock_pending().insert(
                    id,
                    Waiter {
                        to: Some(tx),
                        hears: progress_of.is_some() && log_listener::listening(),
                        key: key.map(str::to_owned),
                        asks: asks.is_some(),
                        parked: None,
                        questions: 0,
                        waiter: id,
                    },
                );
                let sent = self.send(
                    &json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }),
                );
                if let Err(e) = sent {
                    self.forget(id);
                    return Err(e);
                }
                (id, id)
            }
        };
        let progress_of = progress_of.filter(|_| log_listener::listening());
        let mut reports = progress::of_tool(progress_of.unwrap_or_default());
        let mut logs = super::log_messages::CallLogs::new(&self.upstream);
        let mut deadline = Instant::now() + timeout;
        let mut parked = false;
        let answer = loop {
            let now = Instant::now();
            let until = reports.due().map_or(deadline, |due| due.min(deadline));
            match rx.recv_timeout(until.saturating_duration_since(now)) {
                Ok(message) if message.get("method").is_some() && message.get("id").is_some() => {
                    let asked = Instant::now();
                    let reply = answer_for_client(&self.upstream, asks, &message, key.is_some());
                    deadline += asked.elapsed();
                    match reply {
                        Some(reply) => {
                            // A reply that cannot be written: the upstream is gone,
                            // and the request learns that from the reader.
                            let _ = self.send(&reply);
                        }
                        None => {
                            parked = true;
                            let questions = asks.map_or(0, |asks| asks.questions());
                            break self.park((id, own), (message, questions), &rx);
                        }
                    }
                }
                Ok(message) if message.get("method").is_some() => match progress_of {
                    Some(tool) if super::log_messages::is_log(&message) => {
                        logs.hand_on(tool, &message);
                    }
                    Some(_) => reports.report(message, Instant::now()),
                    None => {}
                },
                Err(RecvTimeoutError::Timeout) if Instant::now() < deadline => {
                    reports.tick(Instant::now());
                }
                answer => break answer,
            }
        };
        reports.flush();
        let answer = match answer {
            Err(RecvTimeoutError::Timeout) => {
                let questions = asks.map_or(0, |asks| asks.questions());
                self.give_up((id, own), (key.is_some(), questions), &rx, None)
            }
            answer => answer,
        };
        match answer {
            Ok(message) => answer_of(&self.upstream, method, message),
            // Not cancelled upstream: a call that was sent is never abandoned halfway;
            // its outcome is unknown, and the guard decides what that allows. Its
            // answer, if it comes, is kept for the next attempt under its key.
            Err(RecvTimeoutError::Timeout) => Err(no_answer_within(
                &self.upstream,
                method,
                timeout,
                key.is_some(),
            )),
            Err(RecvTimeoutError::Disconnected) if parked => Err(ClientError::Lost(format!(
                "upstream `{}` waits for the client's answer to its request: the {method} stays running until the call is made again with it",
                self.upstream
            ))),
            Err(RecvTimeoutError::Disconnected) => Err(ClientError::Lost(format!(
                "upstream `{}` ended before answering {method}",
                self.upstream
            ))),
        }
    }

    /// Parks the upstream's `request` on request `id` (whose requester stops
    /// waiting, having answered `questions` of the upstream's before it): kept
    /// unanswered for the client's later answer, which the call made again brings
    /// ([`Waiting::Earlier`]). An answer that came meanwhile is taken.
    fn park(
        &self,
        (id, own): (u64, u64),
        (request, questions): (Value, u32),
        rx: &Receiver<Value>,
    ) -> Result<Value, RecvTimeoutError> {
        // Given up as a keyed request is (its answer kept if it comes) and parked,
        // under one lock; one answered in between is kept as a late answer, for the
        // same call.
        let answer = self.give_up((id, own), (true, questions), rx, Some(request));
        if answer.is_ok() {
            return answer;
        }
        tracing::info!(target: "justonce::upstream", upstream = %self.upstream, "its request to the client waits for the client's later answer; the call is suspended, its tools/call left running");
        Err(RecvTimeoutError::Disconnected)
    }

    /// Whether a request under `key` waits, parked, for the client's later answer.
    pub(crate) fn asking(&self, key: &str) -> bool {
        self.lock_pending()
            .values()
            .any(|waiter| waiter.key.as_deref() == Some(key) && waiter.parked.is_some())
    }

    /// Whether a request under `key` is sent and not answered yet.
    pub(crate) fn running(&self, key: &str) -> bool {
        self.lock_pending()
            .values()
            .any(|waiter| waiter.key.as_deref() == Some(key))
    }

    fn lock_pending(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Waiter>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What a request under `key` waits for: the answer kept for it, an earlier
    /// request under it still running (its answers now go to `to`, the requester
    /// numbered `own`), or a new one.
    fn waiting_on(
        &self,
        key: Option<&str>,
        to: &Sender<Value>,
        own: u64,
        (asks, resumes): (Option<&dyn ClientRequests>, bool),
    ) -> Waiting {
        let Some(key) = key else {
            return Waiting::New;
        };
        // Under the lock the reader holds while it hands an answer on or keeps it:
        // an answer is either kept already or comes to `to`.
        let mut pending = self.lock_pending();
        if let Some(message) = self.late.take(key) {
            return Waiting::Kept(message);
        }
        match pending
            .iter_mut()
            .find(|(_, waiter)| waiter.key.as_deref() == Some(key))
        {
            Some((id, waiter)) => {
                waiter.to = Some(to.clone());
                waiter.waiter = own;
                waiter.asks = asks.is_some();
                if let Some(asks) = asks {
                    asks.taking_up(waiter.questions);
                }
                Waiting::Earlier(*id, waiter.parked.take())
            }
            None if resumes => Waiting::Gone,
            None => Waiting::New,
        }
    }

    /// The requester `own` of `id` gives up waiting, having answered `questions`
    /// of the upstream's ([`ClientRequests::questions`]): a request with a key
    /// stays registered, its answer kept when it comes (and the count, for the
    /// requester that takes it up), unless another requester took it up since (it
    /// waits for it now); one without is forgotten. An answer that came meanwhile
    /// is taken instead. `parking`: the upstream's request the giver leaves
    /// unanswered, kept on the request for the call made again (or handed to the
    /// requester that took it up and waits).
    fn give_up(
        &self,
        (id, own): (u64, u64),
        (keyed, questions): (bool, u32),
        rx: &Receiver<Value>,
        parking: Option<Value>,
    ) -> Result<Value, RecvTimeoutError> {
        let mut pending = self.lock_pending();
        // Answered just now (the reader hands answers on under this lock).
        while let Ok(message) = rx.try_recv() {
            if message.get("method").is_none() {
                return Ok(message);
            }
        }
        match pending.get_mut(&id) {
            // Taken up by another requester since: it waits for it now, and the
            // upstream's question is its to answer (or keep, if it gave up too).
            Some(waiter) if waiter.waiter != own => {
                if let Some(question) = parking {
                    let unsent = match &waiter.to {
                        Some(to) => to.send(question).err().map(|unsent| unsent.0),
                        None => Some(question),
                    };
                    if unsent.is_some() {
                        waiter.parked = unsent;
                    }
                }
            }
            Some(waiter) if keyed => {
                waiter.to = None;
                waiter.questions = questions;
                if parking.is_some() {
                    waiter.parked = parking;
                }
            }
            Some(_) => {
                pending.remove(&id);
            }
            None => {}
        }
        // An upstream that never answers does not hold every request given up:
        // past the cap, the oldest is no longer followed (its answer is dropped).
        if keyed && pending.values().filter(|w| w.to.is_none()).count() > MAX_GIVEN_UP {
            let oldest = pending
                .iter()
                .filter(|(_, w)| w.to.is_none())
                .map(|(id, _)| *id)
                .min();
            if let Some(oldest) = oldest {
                pending.remove(&oldest);
                tracing::warn!(target: "justonce::upstream", upstream = %self.upstream, "more than {MAX_GIVEN_UP} requests given up are still unanswered: the oldest is no longer followed, its answer will be dropped");
            }
        }
        Err(RecvTimeoutError::Timeout)
    }

    fn forget(&self, id: u64) {
        self.lock_pending().remove(&id);
    }

    fn send(&self, message: &Value) -> Result<(), ClientError> {
        if !self.alive() {
            return Err(ClientError::NotSent(format!(
                "upstream `{}` is not running",
                self.upstream
            )));
        }
        let mut line = message.to_string();
        line.push('\n');
        let mut stdin = self.stdin.lock().unwrap_or_else(|p| p.into_inner());
        stdin
            .write_all(line.as_bytes())
            .and_then(|()| stdin.flush())
            .map_err(|e| ClientError::NotSent(format!("upstream `{}`: {e}", self.upstream)))
    }
}

impl Drop for StdioClient {
    fn drop(&mut self) {
        self.closing.store(true, Ordering::SeqCst);
        let mut child = self.child.lock().unwrap_or_else(|p| p.into_inner());
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// The thread that reads the upstream's output.
struct Reader {
    upstream: String,
    pending: Pending,
    alive: Arc<AtomicBool>,
    stdin: Arc<Mutex<ChildStdin>>,
    list_changed: ListChanged,
    heard: Heard,
    ended: Ended,
    closing: Arc<AtomicBool>,
    /// Stripped from every message before it is handed on or logged.
    credentials: Credentials,
    /// Where an answer is kept that comes when its requester gave up.
    late: Arc<LateAnswers>,
}

impl Reader {
    /// Hands the upstream's request `message` (of `method`) to the one call in
    /// flight that answers such requests ([`to_the_one_call`]).
    fn to_the_call(&self, method: &str, message: Value) -> Result<(), Value> {
        let pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        let calls = pending
            .values()
            .filter(|waiter| waiter.asks)
            .filter_map(|waiter| waiter.to.as_ref());
        to_the_one_call((&self.upstream, "stdio"), method, message, calls, |m| m)
    }

    fn run(self, stdout: impl std::io::Read) {
        let mut stdout = BufReader::new(stdout);
        loop {
            let line = match read_line(&mut stdout, MAX_LINE_BYTES) {
                Line::Read(line) => line,
                Line::Overlong { length, .. } => {
                    // Whatever it answered is lost: its request ends as no answer.
                    tracing::warn!(target: "justonce::upstream", upstream = %self.upstream, "a message of {length} bytes was dropped (the cap is {MAX_LINE_BYTES}); a request it answered gets no answer");
                    continue;
                }
                Line::End => break,
            };
            if line.trim().is_empty() {
                continue;
            }
            let mut message: Value = match serde_json::from_str(&line) {
                Ok(message) => message,
                Err(e) => {
                    let line = self.credentials.text(line);
                    tracing::warn!(target: "justonce::upstream", upstream = %self.upstream, "a line that is not JSON-RPC ({e}): {}", field(&line));
                    continue;
                }
            };
            // Before anything reads it: a result, an error, a progress report or a
            // log message reaches an agent, the journal or the log only stripped.
            self.credentials.json(&mut message);
            self.dispatch(message);
        }
        self.alive.store(false, Ordering::SeqCst);
        // Its state says so before any waiting request returns: the next call
        // finds it failing, not a connection that is gone.
        if !self.closing.load(Ordering::SeqCst) {
            (self.ended)("its output closed (it ended or crashed)");
        }
        // Every waiting request learns at once that no answer will come.
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        if !self.closing.load(Ordering::SeqCst) {
            tracing::warn!(target: "justonce::upstream", upstream = %self.upstream, "the upstream's output closed (it ended or crashed); it is started again after a backoff");
        }
    }

    fn dispatch(&self, message: Value) {
        let method = message.get("method").and_then(Value::as_str);
        match (method, message.get("id")) {
            // A response.
            (None, Some(id)) => {
                // Handed on, or kept, under the lock a requester giving up takes:
                // an answer is never dropped between the two.
                let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
                let Some(waiter) = id.as_u64().and_then(|id| pending.remove(&id)) else {
                    return;
                };
                let message = match waiter.to {
                    Some(to) => match to.send(message) {
                        Ok(()) => return,
                        Err(unsent) => unsent.0,
                    },
                    None => message,
                };
                if let Some(key) = waiter.key {
                    let kept = self.late.keep(&key, message);
                    drop(pending);
                    self.late.told(&self.upstream, &key, kept);
                }
            }
            // A request of the upstream's (roots, sampling, elicitation, ping): to
            // the call that answers them, or answered here.
            (Some(method), Some(_)) => {
                let reply = match self.to_the_call(method, message.clone()) {
                    Ok(()) => return,
                    Err(refused) => refused,
                };
                let mut line = reply.to_string();
                line.push('\n');
                let mut stdin = self.stdin.lock().unwrap_or_else(|p| p.into_inner());
                let _ = stdin
                    .write_all(line.as_bytes())
                    .and_then(|()| stdin.flush());
            }
            (Some("notifications/progress"), None) => {
                let token = message
                    .get("params")
                    .and_then(|p| p.get("progressToken"))
                    .and_then(Value::as_u64);
                // Only to a requester still waiting: a request given up hears none.
                let waiting = token.and_then(|token| {
                    self.pending
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .get(&token)
                        .and_then(|waiter| waiter.to.clone())
                });
                if let Some(waiting) = waiting {
                    let _ = waiting.send(message);
                }
            }
            (Some("notifications/tools/list_changed"), None) => {
                (self.list_changed)();
            }
            (Some(method), None) if is_surface_news(method) => (self.heard)(&message),
            (Some("notifications/message"), None) => {
                // To the one call waiting on it, if only one waits and hears (over
                // stdio a log message names no request); else to the log.
                let hearing = {
                    let pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
                    let mut hearing = pending
                        .values()
                        .filter_map(|w| w.hears.then_some(w.to.as_ref()).flatten());
                    match (hearing.next(), hearing.next()) {
                        (Some(one), None) => Some(one.clone()),
                        _ => None,
                    }
                };
                if let Some(call) = hearing
                    && call.send(message.clone()).is_ok()
                {
                    return;
                }
                super::log_messages::to_log(&self.upstream, &message);
            }
            _ => {}
        }
    }
}

/// Writes each line of the upstream `upstream`'s `stderr` to the log, stripped of
/// `credentials`, escaped, and cut at [`MAX_STDERR_LINE_BYTES`]; until it closes.
fn log_stderr(upstream: &str, stderr: impl std::io::Read, credentials: &Credentials) {
    let mut stderr = BufReader::new(stderr);
    loop {
        match read_line(&mut stderr, MAX_STDERR_LINE_BYTES) {
            Line::Read(line) => {
                let line = credentials.text(line);
                tracing::info!(target: "justonce::upstream", upstream = %upstream, "{}", field(&line));
            }
            Line::Overlong { head, length } => {
                // Cut, maybe inside a credential: its beginning at the end goes too.
                let head = credentials.text_maybe_cut(head);
                tracing::info!(target: "justonce::upstream", upstream = %upstream, "{}…[cut: a line of {length} bytes]", capped(&head, usize::MAX));
            }
            Line::End => break,
        }
    }
}

/// No answer to `method` within `timeout`: the request may still run upstream;
/// under an effect key (`keyed`) it is followed, and its answer answers the retry.
pub(crate) fn no_answer_within(
    upstream: &str,
    method: &str,
    timeout: Duration,
    keyed: bool,
) -> ClientError {
    ClientError::Lost(format!(
        "upstream `{upstream}` did not answer {method} within {} ms{}",
        timeout.as_millis(),
        if keyed {
            " (it may still be running it: its answer, if it comes, answers the retry)"
        } else {
            ""
        }
    ))
}

/// The result of a JSON-RPC response to `method`, or the error it carries. One with
/// neither breaks the protocol: no answer (not an empty success).
pub(crate) fn answer_of(
    upstream: &str,
    method: &str,
    mut message: Value,
) -> Result<Value, ClientError> {
    if let Some(error) = message.get("error") {
        return Err(ClientError::Refused(error.clone()));
    }
    match message.get_mut("result") {
        Some(result) => Ok(result.take()),
        None => Err(ClientError::Lost(format!(
            "upstream `{upstream}` answered {method} with neither a result nor an error (not JSON-RPC)"
        ))),
    }
}

/// Hands the upstream's request `message` (of `method`), which came on `over` (its
/// stdio, an HTTP session's standalone stream) and so names no request of ours, to
/// the one call in flight that answers such requests (each of `calls` where one's
/// go, `wrap` making what it reads); `Err` with the reply when there is none
/// (refused as outside any call), several (refused: `over` names none of them), or
/// for a `ping` (answered).
pub(super) fn to_the_one_call<'a, T: 'a>(
    (upstream, over): (&str, &str),
    method: &str,
    message: Value,
    mut calls: impl Iterator<Item = &'a Sender<T>>,
    wrap: impl FnOnce(Value) -> T,
) -> Result<(), Value> {
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    if method == "ping" {
        return Err(reply_to_request(method, &id));
    }
    let (first, more) = (calls.next(), calls.next());
    match (first, more) {
        (Some(call), None) => call
            .send(wrap(message))
            .map_err(|_| reply_to_request(method, &id)),
        (Some(_), Some(_)) => {
            let calls = 2 + calls.count();
            tracing::warn!(target: "justonce::upstream", upstream = %upstream, "its {method} came while {calls} calls were in flight, on {over}, which says not which one asks: refused");
            Err(ClientReply::Error {
                code: -32603,
                message: format!(
                    "justonce cannot tell which of the {calls} calls in flight this {method} belongs to ({over} names none); it passes a request of an upstream to the client of the one call that makes it"
                ),
            }
            .response(&id))
        }
        (None, _) => Err(reply_to_request(method, &id)),
    }
}

/// The gateway's reply to a request an upstream sends it (`id` its id) outside any
/// call that answers it: `ping` is answered; anything else (roots, sampling,
/// elicitation) belongs to the client of a call, and none is asking.
pub(super) fn reply_to_request(method: &str, id: &Value) -> Value {
    if method == "ping" {
        json!({ "jsonrpc": "2.0", "id": id, "result": {} })
    } else {
        json!({ "jsonrpc": "2.0", "id": id, "error": {
            "code": -32601,
            "message": format!("justonce passes {method} to the client of the tool call that sends it, and no call of this upstream is running"),
        } })
    }
}

/// The reply to the upstream's request `message` made during a call: what `asks`
/// (the call's) answers, or, for a request without one, [`reply_to_request`];
/// `None` when the client answers later and the request (`can_wait`) waits for it.
pub(super) fn answer_for_client(
    upstream: &str,
    asks: Option<&dyn ClientRequests>,
    message: &Value,
    can_wait: bool,
) -> Option<Value> {
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let method = message.get("method").and_then(Value::as_str).unwrap_or("");
    let Some(asks) = asks else {
        return Some(reply_to_request(method, &id));
    };
    if method == "ping" {
        return Some(reply_to_request(method, &id));
    }
    let params = message.get("params").cloned().unwrap_or(Value::Null);
    let reply = asks.request(method, &params, can_wait);
    match &reply {
        ClientReply::Later if can_wait => return None,
        ClientReply::Error { code, message } => {
            tracing::info!(target: "justonce::upstream", upstream = %upstream, "its {method} was refused ({code}): {message}");
        }
        _ => {}
    }
    Some(reply.response(&id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_over_the_cap_is_dropped_and_the_next_one_read() {
        let text = format!("short\r\n{}\nnext\nlast", "x".repeat(100));
        let mut reader = std::io::BufReader::with_capacity(8, text.as_bytes());
        assert_eq!(read_line(&mut reader, 10), Line::Read("short".into()));
        assert_eq!(
            read_line(&mut reader, 10),
            Line::Overlong {
                head: "x".repeat(10),
                length: 100
            }
        );
        assert_eq!(read_line(&mut reader, 10), Line::Read("next".into()));
        assert_eq!(read_line(&mut reader, 10), Line::Read("last".into()));
        assert_eq!(read_line(&mut reader, 10), Line::End);
    }

    #[test]
    fn its_stderr_is_logged_stripped_escaped_and_cut_a_line_each() {
        let credentials = Credentials::new(&["tok_5e2a9c77".to_owned()]);
        let long = format!("{}tok_5e2a9c77", "y".repeat(MAX_STDERR_LINE_BYTES - 4));
        let stderr = format!(
            "starting\n{long}{}\nhanded tok_5e2a9c77 \x1b[2K\rINFO forged\n",
            "z".repeat(17 << 20)
        );
        let ((), lines) =
            crate::test_log::logged(|| log_stderr("u", stderr.as_bytes(), &credentials));
        let logged = crate::test_log::messages(&lines);
        assert_eq!(logged.len(), 3, "one line each: {logged:?}");
        assert_eq!(logged[0], "starting");
        // Cut at the cap, inside the credential: its beginning goes too.
        let cut = logged[1];
        assert!(cut.len() < MAX_STDERR_LINE_BYTES + 100, "{}", cut.len());
        assert!(
            cut.ends_with(&format!(
                "…[cut: a line of {} bytes]",
                long.len() + (17 << 20)
            )),
            "{}",
            &cut[cut.len() - 60..]
        );
        assert!(!cut.contains("tok_"), "{}", &cut[cut.len() - 60..]);
        assert_eq!(logged[2], "handed [redacted] \\u{1b}[2K\\rINFO forged");
    }

    /// A reader of an upstream whose input is a process it may answer on (`cat`,
    /// which answers nothing), and that process.
    fn reader() -> (Reader, std::process::Child) {
        let mut sink = std::process::Command::new("cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let reader = Reader {
            upstream: "u".into(),
            pending: Pending::default(),
            alive: Arc::new(AtomicBool::new(true)),
            stdin: Arc::new(Mutex::new(sink.stdin.take().unwrap())),
            list_changed: Arc::new(|| {}),
            heard: Arc::new(|_| {}),
            ended: Box::new(|_| {}),
            closing: Arc::new(AtomicBool::new(true)),
            credentials: Credentials::default(),
            late: Arc::default(),
        };
        (reader, sink)
    }

    #[test]
    fn a_long_line_that_is_not_json_rpc_is_logged_cut_not_whole() {
        let (reader, mut sink) = reader();
        let output = format!("not json {}\n", "x".repeat(16 << 20));
        let ((), lines) = crate::test_log::logged(|| reader.run(output.as_bytes()));
        let logged = crate::test_log::messages(&lines);
        assert_eq!(logged.len(), 1, "{}", lines.len());
        assert!(
            logged[0].starts_with("a line that is not JSON-RPC"),
            "{}",
            &logged[0][..80]
        );
        assert!(logged[0].len() < 5000, "{} bytes logged", logged[0].len());
        let _ = sink.kill();
        let _ = sink.wait();
    }

    /// What the upstream asks of the client goes to the one call in flight that
    /// answers such requests: with none it is refused (-32601), with several too
    /// (-32603: stdio names no call), and a ping is answered here.
    #[test]
    fn an_upstreams_request_goes_to_the_one_call_that_asks_and_is_refused_otherwise() {
        let (reader, mut sink) = reader();
        let question =
            json!({ "jsonrpc": "2.0", "id": 9, "method": "elicitation/create", "params": {} });
        let code = |reply: Result<(), Value>| reply.unwrap_err()["error"]["code"].clone();
        assert_eq!(
            code(reader.to_the_call("elicitation/create", question.clone())),
            -32601
        );
        let waiter = |asks: bool| {
            let (to, from) = channel();
            let waiter = Waiter {
                to: Some(to),
                hears: false,
                key: None,
                asks,
                parked: None,
                questions: 0,
                waiter: 0,
            };
            (waiter, from)
        };
        let (listing, listed) = waiter(false);
        let (call, asked) = waiter(true);
        reader.pending.lock().unwrap().insert(1, listing);
        reader.pending.lock().unwrap().insert(2, call);
        assert_eq!(
            reader.to_the_call("elicitation/create", question.clone()),
            Ok(())
        );
        assert_eq!(asked.try_recv().unwrap(), question, "to the call that asks");
        assert!(listed.try_recv().is_err(), "not to tools/list");
        let ping = reader.to_the_call("ping", json!({ "id": 3, "method": "ping" }));
        assert_eq!(ping.unwrap_err()["result"], json!({}));
        let (other, _other) = waiter(true);
        reader.pending.lock().unwrap().insert(3, other);
        let several = reader.to_the_call("sampling/createMessage", question);
        let several = several.unwrap_err();
        assert_eq!(several["error"]["code"], -32603);
        assert!(
            several["error"]["message"]
                .as_str()
                .unwrap()
                .contains("2 calls in flight"),
            "{several}"
        );
        let _ = sink.kill();
        let _ = sink.wait();
    }

    /// An upstream (an `sh` script) that answers request 1 once it reads a second
    /// line; request 1 sent under the key `k` by a first requester, and taken up
    /// by a second one while the first still waits: the client, the answers kept
    /// late, the first's receiver and the second's, the id and the second's number.
    #[allow(clippy::type_complexity)]
    fn taken_up_while_waited_for() -> (
        StdioClient,
        Arc<LateAnswers>,
        Receiver<Value>,
        Receiver<Value>,
        (u64, u64),
    ) {
        let script =
            r#"read request; read go; echo '{"jsonrpc":"2.0","id":1,"result":{"n":1}}'; sleep 60"#;
        let late = Arc::new(LateAnswers::default());
        let hooks = Hooks {
            changed: Arc::new(|| {}),
            heard: Arc::new(|_| {}),
            ended: Box::new(|_| {}),
            late: Arc::clone(&late),
        };
        let command = ["sh".to_owned(), "-c".to_owned(), script.to_owned()];
        let client = StdioClient::spawn("u", &command, &[], hooks, Credentials::default()).unwrap();
        let (first, first_rx) = channel();
        let id = client.next_id.fetch_add(1, Ordering::Relaxed);
        assert_eq!(id, 1);
        assert!(matches!(
            client.waiting_on(Some("k"), &first, id, (None, false)),
            Waiting::New
        ));
        client.lock_pending().insert(
            id,
            Waiter {
                to: Some(first),
                hears: false,
                key: Some("k".into()),
                asks: false,
                parked: None,
                questions: 0,
                waiter: id,
            },
        );
        client
            .send(&json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {} }))
            .unwrap();
        let (second, second_rx) = channel();
        let own = TAKERS + client.takers.fetch_add(1, Ordering::Relaxed);
        assert!(matches!(
            client.waiting_on(Some("k"), &second, own, (None, false)),
            Waiting::Earlier(earlier, None) if earlier == id
        ));
        // (Only the client holds the second's sender now: a cleared place ends its
        // wait.)
        drop(second);
        (client, late, first_rx, second_rx, (id, own))
    }

    /// A requester that gives up a request another one took up since leaves that
    /// one waiting for it: its answer comes to the one that waits, not kept late
    /// (before, the first one's give-up cleared the second's place, as over HTTP
    /// until 557f797).
    #[test]
    fn a_give_up_leaves_the_requester_that_took_the_request_up_waiting() {
        let (client, late, first_rx, second_rx, (id, _)) = taken_up_while_waited_for();
        assert!(matches!(
            client.give_up((id, id), (true, 0), &first_rx, None),
            Err(RecvTimeoutError::Timeout)
        ));
        // The upstream answers now.
        client
            .send(&json!({ "jsonrpc": "2.0", "method": "notifications/go" }))
            .unwrap();
        let answer = second_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the answer did not come to the requester that waits");
        assert_eq!(answer["result"], json!({ "n": 1 }));
        assert_eq!(late.take("k"), None, "not kept late");
    }

    /// The upstream's question that a requester read and parks after another one
    /// took its request up goes to the one that waits now (before, it was parked
    /// only on the giver's own place, so it was dropped: the upstream waited for
    /// an answer nobody was asked for).
    #[test]
    fn a_question_parked_after_a_take_up_goes_to_the_requester_that_waits() {
        let (client, _late, first_rx, second_rx, (id, _)) = taken_up_while_waited_for();
        let question =
            json!({ "jsonrpc": "2.0", "id": 70, "method": "elicitation/create", "params": {} });
        assert!(matches!(
            client.park((id, id), (question.clone(), 1), &first_rx),
            Err(RecvTimeoutError::Disconnected)
        ));
        assert_eq!(
            second_rx.recv_timeout(Duration::from_secs(30)).ok(),
            Some(question),
            "the question did not reach the requester that waits"
        );
        assert!(!client.asking("k"), "not parked: someone waits for it");
    }

    #[test]
    fn a_response_without_result_or_error_is_no_answer() {
        let answer = answer_of("u", "tools/call", json!({ "jsonrpc": "2.0", "id": 3 }));
        assert!(
            matches!(&answer, Err(ClientError::Lost(m)) if m.contains("neither a result nor an error")),
            "{answer:?}"
        );
        // The opposite cases: a result, an error.
        let ok = answer_of(
            "u",
            "tools/call",
            json!({ "id": 3, "result": { "content": [] } }),
        );
        assert_eq!(ok, Ok(json!({ "content": [] })));
        let refused = answer_of(
            "u",
            "tools/call",
            json!({ "id": 3, "error": { "code": -1 } }),
        );
        assert_eq!(refused, Err(ClientError::Refused(json!({ "code": -1 }))));
    }
}
