//! A blocking MCP client over one child process's stdio: newline-delimited JSON-RPC,
//! a reader thread that hands each response to the request waiting for it, the
//! child's stderr into our log.
//!
//! Hand-written rather than rmcp's client: the surface it needs is four messages
//! (`initialize`, `notifications/initialized`, `tools/list`, `tools/call`), the guard
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
use crate::runtime::log_listener;

/// The MCP revision this client asks for; an upstream may answer an older one.
pub(crate) const PROTOCOL_VERSION: &str = "2025-06-18";

/// The parameters of the `initialize` this client sends an upstream, over either
/// transport.
pub(crate) fn initialize_params() -> Value {
    json!({
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {},
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
    /// The effect key it carries, if any: an answer that comes when nobody waits
    /// is kept under it ([`LateAnswers`]), and a later attempt under the same key
    /// waits for this request instead of sending another.
    key: Option<String>,
}

type Pending = Arc<Mutex<HashMap<u64, Waiter>>>;

/// What a request under an effect key waits for (over either transport).
pub(super) enum Waiting {
    /// The answer kept for the key, which came after an earlier request gave up.
    Kept(Value),
    /// The earlier request (by id) under the key, still running upstream.
    Earlier(u64),
    /// Nothing yet: a new request is sent.
    New,
}

/// Called (on the thread that reads the upstream) when it says its tools changed.
pub(crate) type ListChanged = Arc<dyn Fn() + Send + Sync>;

/// Called (on the thread that reads the upstream) when its output closed, before
/// the requests waiting on it learn that no answer comes: why.
pub(crate) type Ended = Box<dyn Fn(&str) + Send>;

/// What a stdio client tells its upstream's owner.
pub(crate) struct Hooks {
    /// It said its tools changed.
    pub(crate) changed: ListChanged,
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
        let result = self.request("initialize", initialize_params(), timeout, None, None)?;
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
    pub(crate) fn request(
        &self,
        method: &str,
        mut params: Value,
        timeout: Duration,
        key: Option<&str>,
        progress_of: Option<&str>,
    ) -> Result<Value, ClientError> {
        let (tx, rx): (Sender<Value>, Receiver<Value>) = channel();
        let id = match self.waiting_on(key, &tx) {
            Waiting::Kept(message) => return answer_of(&self.upstream, method, message),
            Waiting::Earlier(id) => {
                tracing::info!(target: "justonce::upstream", upstream = %self.upstream, "a {method} under the same key is still running upstream: waiting for its answer rather than sending it again");
                id
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
                        key: key.map(str::to_owned),
                    },
                );
                let sent = self.send(
                    &json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }),
                );
                if let Err(e) = sent {
                    self.forget(id);
                    return Err(e);
                }
                id
            }
        };
        let progress_of = progress_of.filter(|_| log_listener::listening());
        let deadline = Instant::now() + timeout;
        let answer = progress::await_answer(&rx, deadline, progress_of, |message| {
            match message.get("method") {
                Some(_) => Ok(message),
                None => Err(message),
            }
        });
        let answer = match answer {
            Err(RecvTimeoutError::Timeout) => self.give_up(id, key.is_some(), &rx),
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
            Err(RecvTimeoutError::Disconnected) => Err(ClientError::Lost(format!(
                "upstream `{}` ended before answering {method}",
                self.upstream
            ))),
        }
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
    /// request under it still running (its answers now go to `to`), or a new one.
    fn waiting_on(&self, key: Option<&str>, to: &Sender<Value>) -> Waiting {
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
                Waiting::Earlier(*id)
            }
            None => Waiting::New,
        }
    }

    /// The requester of `id` gives up waiting: a request with a key stays
    /// registered, its answer kept when it comes; one without is forgotten. An
    /// answer that came meanwhile is taken instead.
    fn give_up(
        &self,
        id: u64,
        keyed: bool,
        rx: &Receiver<Value>,
    ) -> Result<Value, RecvTimeoutError> {
        let mut pending = self.lock_pending();
        // Answered just now (the reader hands answers on under this lock).
        while let Ok(message) = rx.try_recv() {
            if message.get("method").is_none() {
                return Ok(message);
            }
        }
        match pending.get_mut(&id) {
            Some(waiter) if keyed => waiter.to = None,
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
    ended: Ended,
    closing: Arc<AtomicBool>,
    /// Stripped from every message before it is handed on or logged.
    credentials: Credentials,
    /// Where an answer is kept that comes when its requester gave up.
    late: Arc<LateAnswers>,
}

impl Reader {
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
            // A request of the upstream's (roots, sampling, elicitation, ping).
            (Some(method), Some(id)) => {
                let reply = reply_to_request(method, id);
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
            (Some("notifications/message"), None) => {
                let params = message.get("params").cloned().unwrap_or(Value::Null);
                tracing::info!(target: "justonce::upstream", upstream = %self.upstream, "{}", field(&params.to_string()));
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

/// The gateway's reply to a request an upstream sends it (`id` its id): `ping` is
/// answered, anything else (roots, sampling, elicitation) is not offered.
pub(super) fn reply_to_request(method: &str, id: &Value) -> Value {
    if method == "ping" {
        json!({ "jsonrpc": "2.0", "id": id, "result": {} })
    } else {
        json!({ "jsonrpc": "2.0", "id": id, "error": {
            "code": -32601,
            "message": format!("justonce does not offer {method} to upstreams"),
        } })
    }
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

    #[test]
    fn a_long_line_that_is_not_json_rpc_is_logged_cut_not_whole() {
        // A process whose input the reader may answer on (it answers nothing here).
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
            ended: Box::new(|_| {}),
            closing: Arc::new(AtomicBool::new(true)),
            credentials: Credentials::default(),
            late: Arc::default(),
        };
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
