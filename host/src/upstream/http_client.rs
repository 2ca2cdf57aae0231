//! A blocking MCP client over Streamable HTTP: each request one `POST` of a JSON-RPC
//! message, answered as JSON or as a Server-Sent Events stream that carries the
//! response; the session the server names at `initialize` (`Mcp-Session-Id`) and the
//! negotiated revision (`MCP-Protocol-Version`) sent with every later request, the
//! configured headers (credentials from the secrets file) with each, and a
//! `tools/call`'s effect key as `Idempotency-Key` too.
//!
//! A request under an effect key is followed past its timeout: its `POST` is read on
//! a thread of its own, the requester waits up to the timeout, and when it gives up
//! the thread reads on (at most [`FOLLOW_FOR`] more, at most [`MAX_FOLLOWED`] such
//! requests at once) and keeps the answer that comes as a late answer
//! ([`LateAnswers`]), by the key. A later request under the same key waits for that
//! one instead of sending another, as over stdio.
//!
//! A request answered HTTP 404 for its session was not processed (the server ended
//! or forgot the session, MCP's Streamable HTTP transport): a new session is
//! started (`initialize`, without the old id) and the request sent once more on it,
//! even a `tools/call` that is not safe to repeat, since the first was not
//! performed. Where the server offers one, a `GET` stream (`stream`) hears what it
//! says between requests: `notifications/tools/list_changed`, and the end of its
//! session.
//!
//! With `[upstreams.NAME.oauth]`, each request carries the access token its
//! [`Bearer`] holds; a request answered HTTP 401 was not processed either: its
//! token is given up, and the request sent once more (even a `tools/call`) with a
//! new one. A second 401 is the configuration's fault, told as such.

use std::collections::HashMap;
use std::io::{BufReader, Read};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use ureq::Agent;
use ureq::http::Request;

use super::client::{ClientError, Waiting, initialize_params, no_answer_within};
use super::credentials::Credentials;
use super::drain::{Drain, Rest};
use super::http_agent::agent;
use super::late::LateAnswers;
use super::oauth::{Bearer, TokenError};
use super::progress;
use super::sse::{Events, MAX_EVENT_BYTES};
use super::stream::{self, HttpHooks, Stream, with_session};
use super::threads::Threads;
use crate::provider::ClientRequests;
use crate::runtime::log_listener;

/// The largest response read from an upstream.
const MAX_RESPONSE_BYTES: u64 = 16 << 20;

/// The most requests given up past their timeout that one session still follows
/// (each holds a thread and a connection until its answer comes): past it, a new
/// request under a key is not sent until one of them ends.
pub(crate) const MAX_FOLLOWED: usize = 64;

/// How long past its timeout a request given up is still followed: then its
/// connection is closed, and its answer is no longer awaited.
pub(crate) const FOLLOW_FOR: Duration = Duration::from_secs(600);

/// What a `POST` got.
enum Posted {
    /// An answer (the response to the request, when one was awaited).
    Answer(Option<Value>),
    /// HTTP 404 for the session it carried: not processed; the session sent.
    SessionLost(String),
}

/// What the thread reading a followed request's `POST` hands its requester.
enum Heard {
    /// A progress report on the way.
    Note(Value),
    /// What the `POST` got, in the end.
    Done(Result<Posted, ClientError>),
}

/// Where and how a session's requests are sent: shared by its client and the
/// threads that read the requests it follows.
struct Wire {
    upstream: String,
    url: String,
    headers: Vec<(String, String)>,
    agent: Agent,
    session: Mutex<Option<String>>,
    protocol: Mutex<Option<String>>,
    /// Cleared when the server forgot the session and a new one did not start, or
    /// refused its credentials (401, 403): its supervisor starts anew, with the
    /// configuration read again.
    alive: Arc<AtomicBool>,
    /// The credentials filled into `headers` (and the secrets file's), stripped
    /// from every answer and every error's text.
    credentials: Credentials,
    /// Its OAuth access tokens, when it has `oauth`.
    bearer: Option<Arc<Bearer>>,
    /// Reads the rest of each response stream after its answer.
    drain: Drain,
}

/// A request whose `POST` a thread reads: one under an effect key, or a call whose
/// client answers what the upstream asks of it meanwhile.
struct Follow {
    /// The effect key it carries, if any (then it is followed past its timeout).
    key: Option<String>,
    /// Where its progress and answer go while someone waits for it; `None` once its
    /// requester gave up (past the timeout).
    to: Option<Sender<Heard>>,
    /// Who waits for it (or last did): the id of the requester's own request, so
    /// that one that gives up clears only its own place, never that of a later
    /// requester that took the request up meanwhile.
    waiter: u64,
    /// The questions of the upstream's its requesters answered so far
    /// ([`ClientRequests::questions`]), handed to the one that takes it up.
    questions: u32,
    /// Whether its requester answers what the upstream asks of the client (a
    /// `tools/call` of a guarded call): a request the upstream sends on its
    /// standalone stream, which names no call, goes to it.
    asks: bool,
}

/// The requests of a session followed by their threads, by request id.
#[derive(Default)]
struct Followed(Mutex<HashMap<u64, Follow>>);

impl Followed {
    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Follow>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Where the request `id`'s progress goes now, if someone waits for it.
    fn to_of(&self, id: u64) -> Option<Sender<Heard>> {
        self.lock().get(&id).and_then(|f| f.to.clone())
    }

    /// Hands the upstream's request `message` (of `method`), which came on the
    /// session's standalone stream and names no call, to the one call in flight
    /// whose client answers such requests ([`super::client::to_the_one_call`]).
    fn to_the_call(&self, upstream: &str, method: &str, message: Value) -> Result<(), Value> {
        let requests = self.lock();
        let calls = requests
            .values()
            .filter(|f| f.asks)
            .filter_map(|f| f.to.as_ref());
        let over = (upstream, "its standalone stream (GET)");
        super::client::to_the_one_call(over, method, message, calls, Heard::Note)
    }

    /// The request `id` under `key` got `posted`: handed to its requester, or, when
    /// it gave up, kept as a late answer in `late` (an answer; anything else is no
    /// news: the call stays unknown). Without a key, nobody waits for it any more.
    fn done(
        &self,
        id: u64,
        key: Option<&str>,
        posted: Result<Posted, ClientError>,
        wire: &Wire,
        late: &Arc<LateAnswers>,
    ) {
        let mut requests = self.lock();
        let posted = match requests.remove(&id).and_then(|f| f.to) {
            Some(to) => match to.send(Heard::Done(posted)) {
                Ok(()) => return,
                Err(unsent) => match unsent.0 {
                    Heard::Done(posted) => posted,
                    Heard::Note(_) => return,
                },
            },
            None => posted,
        };
        let Some(key) = key else {
            return;
        };
        match posted {
            Ok(Posted::Answer(Some(message))) => {
                // Kept under the lock a requester takes to look for it: an answer
                // is either kept already or comes to the requester.
                let kept = late.keep(key, message);
                drop(requests);
                late.told(&wire.upstream, key, kept);
            }
            Ok(Posted::Answer(None)) | Ok(Posted::SessionLost(_)) => {}
            Err(e) => {
                drop(requests);
                tracing::info!(target: "justonce::upstream", upstream = %wire.upstream, effect = %key, "a request given up past its timeout ended without an answer ({}); its call stays unknown", super::log_field::field(&e.to_string()));
            }
        }
    }
}

/// One session with one Streamable HTTP upstream.
pub(crate) struct HttpClient {
    wire: Arc<Wire>,
    next_id: AtomicU64,
    /// Held while a new session starts after the server forgot one: one at a time.
    renewing: Mutex<()>,
    /// Told of its tools changing and its session ending (none: no `GET` stream).
    hooks: Option<HttpHooks>,
    /// Set to stop the `GET` stream of the session now.
    stream_stop: Mutex<Option<Arc<AtomicBool>>>,
    /// The requests under a key whose `POST` a thread reads.
    followed: Arc<Followed>,
    /// Where the answers that came after their requester gave up are kept.
    late: Arc<LateAnswers>,
    /// The threads that read the requests under a key, kept between calls.
    threads: Threads,
}

impl HttpClient {
    /// A client of the server at `url`, sending `headers` with every request.
    pub(crate) fn new(upstream: &str, url: &str, headers: Vec<(String, String)>) -> Self {
        Self {
            wire: Arc::new(Wire {
                upstream: upstream.to_owned(),
                url: url.to_owned(),
                headers,
                agent: agent(),
                session: Mutex::new(None),
                protocol: Mutex::new(None),
                alive: Arc::new(AtomicBool::new(true)),
                credentials: Credentials::default(),
                bearer: None,
                drain: Drain::new(format!("upstream-{upstream}-drain")),
            }),
            next_id: AtomicU64::new(1),
            renewing: Mutex::new(()),
            hooks: None,
            stream_stop: Mutex::new(None),
            followed: Arc::default(),
            late: Arc::default(),
            threads: Threads::new(format!("upstream-{upstream}-call")),
        }
    }

    /// Tells `hooks` when it says its tools changed and when its session ends, as
    /// heard on a `GET` stream opened after each `initialize`.
    pub(crate) fn hooked(mut self, hooks: HttpHooks) -> Self {
        self.hooks = Some(hooks);
        self
    }

    /// Keeps the answers that come after their requester gave up in `late`.
    pub(crate) fn keeping_late(mut self, late: Arc<LateAnswers>) -> Self {
        self.late = late;
        self
    }

    /// Strips `credentials` (those filled into its headers) from every answer it
    /// reads and the text of every error it reports, as the `http` provider does
    /// from what it saves. Before its first request.
    pub(crate) fn stripping(mut self, credentials: Credentials) -> Self {
        match Arc::get_mut(&mut self.wire) {
            Some(wire) => wire.credentials = credentials,
            None => unreachable!("a client is told what to strip before it sends anything"),
        }
        self
    }

    /// Sends the access tokens of `bearer` (its `oauth`) with every request.
    /// Before its first request.
    pub(crate) fn bearing(mut self, bearer: Option<Arc<Bearer>>) -> Self {
        match Arc::get_mut(&mut self.wire) {
            Some(wire) => wire.bearer = bearer,
            None => unreachable!("a client is given its tokens before it sends anything"),
        }
        self
    }

    /// The session now.
    fn session(&self) -> Option<String> {
        self.wire.session()
    }

    /// Whether the session still stands.
    pub(crate) fn alive(&self) -> bool {
        self.wire.alive.load(Ordering::SeqCst)
    }

    /// `initialize` (keeping the session and revision it answers) and
    /// `notifications/initialized`, a new session (no session id is sent); then its
    /// `GET` stream is opened, when it has hooks.
    pub(crate) fn initialize(&self, timeout: Duration) -> Result<Value, ClientError> {
        let wire = &self.wire;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let message = json!({ "jsonrpc": "2.0", "id": id, "method": "initialize", "params": initialize_params() });
        let answer = match wire.post(&message, timeout, None, Some(id), true, &mut |_| {})? {
            Posted::Answer(Some(answer)) => answer,
            Posted::Answer(None) | Posted::SessionLost(_) => {
                return Err(ClientError::Lost(format!(
                    "upstream `{}` answered initialize without a response",
                    wire.upstream
                )));
            }
        };
        let result = super::client::answer_of(&wire.upstream, "initialize", answer)?;
        if let Some(version) = result.get("protocolVersion").and_then(Value::as_str) {
            *wire.protocol.lock().unwrap_or_else(|p| p.into_inner()) = Some(version.to_owned());
        }
        let initialized = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
        if let Posted::SessionLost(_) =
            wire.post(&initialized, timeout, None, None, false, &mut |_| {})?
        {
            return Err(ClientError::NotSent(format!(
                "upstream `{}` forgot the session it had just started (HTTP 404)",
                wire.upstream
            )));
        }
        self.open_stream();
        Ok(result)
    }

    /// Opens the `GET` stream of the session now (the one before it is stopped),
    /// when it has hooks to tell what it hears; a request of the upstream's on it
    /// goes to the one call in flight whose client answers them.
    fn open_stream(&self) {
        let Some(hooks) = self.hooks.clone() else {
            return;
        };
        let stop = Arc::new(AtomicBool::new(false));
        let before = self
            .stream_stop
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .replace(Arc::clone(&stop));
        if let Some(before) = before {
            before.store(true, Ordering::SeqCst);
        }
        let wire = &self.wire;
        stream::spawn(Stream {
            upstream: wire.upstream.clone(),
            url: wire.url.clone(),
            headers: wire.headers.clone(),
            agent: wire.agent.clone(),
            session: self.session(),
            protocol: wire.protocol(),
            credentials: wire.credentials.clone(),
            bearer: wire.bearer.clone(),
            hooks,
            to_the_call: {
                let (followed, upstream) = (Arc::clone(&self.followed), wire.upstream.clone());
                Arc::new(move |method, message| followed.to_the_call(&upstream, method, message))
            },
            stop,
            alive: Arc::clone(&wire.alive),
        });
    }

    /// The server answered 404 for the session `lost`: a new session is started
    /// (unless another request started one already), and told to the hooks (its
    /// tools may have changed with it). When it cannot start, the client is no
    /// longer alive: its supervisor starts anew.
    fn renew(&self, lost: &str, timeout: Duration) -> Result<(), ClientError> {
        let _one = self.renewing.lock().unwrap_or_else(|p| p.into_inner());
        if self.session().as_deref() != Some(lost) {
            return Ok(()); // another request started one
        }
        match self.initialize(timeout) {
            Ok(_) => {
                tracing::info!(target: "justonce::upstream", upstream = %self.wire.upstream, "the server forgot its session (HTTP 404); a new one started");
                if let Some(hooks) = &self.hooks {
                    (hooks.changed)();
                }
                Ok(())
            }
            Err(e) => {
                self.wire.alive.store(false, Ordering::SeqCst);
                Err(match e {
                    ClientError::Misconfigured(reason) => ClientError::Misconfigured(reason),
                    e => ClientError::NotSent(format!(
                        "upstream `{}` forgot its session (HTTP 404) and a new one did not start: {e}",
                        self.wire.upstream
                    )),
                })
            }
        }
    }

    /// Sends request `method`, with `key` as `Idempotency-Key` when given, and waits
    /// up to `timeout` for its result. With `progress_of` (a tool's name) and someone
    /// listening on this thread, the upstream is asked for progress and the reports
    /// in its answer's stream are handed on as that tool's. What the upstream asks of
    /// the client on that stream (it belongs to this request) is answered by `asks`.
    ///
    /// A request under a `key` is followed past its timeout (see the module's
    /// docs): a later one under the same key waits for it, or is answered at once
    /// with the answer it got late.
    pub(crate) fn request(
        &self,
        method: &str,
        mut params: Value,
        timeout: Duration,
        (key, progress_of): (Option<&str>, Option<&str>),
        asks: Option<&dyn ClientRequests>,
    ) -> Result<Value, ClientError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let progress_of = progress_of.filter(|_| log_listener::listening());
        if progress_of.is_some()
            && let Some(params) = params.as_object_mut()
        {
            let meta = params.entry("_meta").or_insert_with(|| json!({}));
            if let Some(meta) = meta.as_object_mut() {
                meta.insert("progressToken".into(), json!(id));
            }
        }
        let message = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        // A call whose client answers the upstream's requests is read on a thread of
        // its own too: what the upstream asks on its standalone stream reaches it.
        let send = || match (key, asks) {
            (None, None) => self.waited_post(&message, id, timeout, progress_of),
            _ => self.followed_post(&message, (method, id), timeout, key, (progress_of, asks)),
        };
        let mut posted = send()?;
        if let Posted::SessionLost(lost) = posted {
            // Not processed (the transport's rule for a 404 to a session's request):
            // sent again, once, on a new session.
            self.renew(&lost, timeout)?;
            posted = send()?;
        }
        let answer = match posted {
            Posted::Answer(Some(answer)) => answer,
            Posted::Answer(None) => {
                return Err(ClientError::Lost(format!(
                    "upstream `{}` answered {method} without a response",
                    self.wire.upstream
                )));
            }
            Posted::SessionLost(_) => {
                self.wire.alive.store(false, Ordering::SeqCst);
                return Err(ClientError::NotSent(format!(
                    "upstream `{}` forgot the new session too (HTTP 404); it is started again",
                    self.wire.upstream
                )));
            }
        };
        super::client::answer_of(&self.wire.upstream, method, answer)
    }

    /// The `POST` of request `id` under no key, read on this thread up to `timeout`
    /// (then given up and dropped), its progress handed on as `progress_of`'s.
    fn waited_post(
        &self,
        message: &Value,
        id: u64,
        timeout: Duration,
        progress_of: Option<&str>,
    ) -> Result<Posted, ClientError> {
        let mut reports = progress::of_tool(progress_of.unwrap_or_default());
        let mut logs = super::log_messages::CallLogs::new(&self.wire.upstream);
        let posted = self
            .wire
            .post(message, timeout, None, Some(id), false, &mut |note| {
                let now = Instant::now();
                reports.tick(now);
                if let Some(report) = self.heard(note, progress_of, &mut logs, None, timeout) {
                    reports.report(report, now);
                }
            });
        reports.flush();
        posted
    }

    /// What the upstream sent on a request's response stream besides its answer,
    /// heard by the requester: a progress report given back (to be handed on, when
    /// `progress_of` names the tool), a log message handed to the call's client, a
    /// request of the upstream's answered through `asks` (POSTed within `timeout`;
    /// a response stream cannot wait, so it is never parked), news of its resources
    /// told to the hooks.
    fn heard(
        &self,
        note: Value,
        progress_of: Option<&str>,
        logs: &mut super::log_messages::CallLogs,
        asks: Option<&dyn ClientRequests>,
        timeout: Duration,
    ) -> Option<Value> {
        let method = note.get("method").and_then(Value::as_str).unwrap_or("");
        if method == "notifications/progress" {
            return progress_of.map(|_| note);
        }
        if note.get("id").is_some() {
            if let Some(reply) =
                super::client::answer_for_client(&self.wire.upstream, asks, &note, false)
            {
                // Not answered: the upstream's own request fails, and its tool with it.
                let _ = self
                    .wire
                    .post(&reply, timeout, None, None, false, &mut |_| {});
            }
        } else if super::log_messages::is_log(&note) {
            match progress_of {
                Some(tool) => logs.hand_on(tool, &note),
                None => super::log_messages::to_log(&self.wire.upstream, &note),
            }
        } else if super::client::is_surface_news(method)
            && let Some(hooks) = &self.hooks
        {
            (hooks.heard)(&note);
        }
        None
    }

    /// The `POST` of request `id` (of `method`) under `key`, read on a thread that
    /// follows it past `timeout`; or, when an earlier request under `key` runs still,
    /// that one's answer; or the answer it got late, kept. Without a key (a read
    /// whose client answers the upstream's requests), read on a thread up to
    /// `timeout`, and no further.
    fn followed_post(
        &self,
        message: &Value,
        (method, id): (&str, u64),
        timeout: Duration,
        key: Option<&str>,
        (progress_of, asks): (Option<&str>, Option<&dyn ClientRequests>),
    ) -> Result<Posted, ClientError> {
        let (tx, rx) = channel();
        let own = id;
        let waiting = match key {
            Some(key) => self.waiting_on(key, &tx, own, asks),
            None => Waiting::New,
        };
        let id = match waiting {
            Waiting::Kept(answer) => return Ok(Posted::Answer(Some(answer))),
            Waiting::Earlier(earlier, _) => {
                tracing::info!(target: "justonce::upstream", upstream = %self.wire.upstream, "a {method} under the same key is still running upstream: waiting for its answer rather than sending it again");
                earlier
            }
            // (Over HTTP a request is never parked, so none is only taken up.)
            Waiting::New | Waiting::Gone => {
                self.follow(message, (id, key), timeout, (tx, asks.is_some()))?;
                id
            }
        };
        let deadline = Instant::now() + timeout;
        let mut logs = super::log_messages::CallLogs::new(&self.wire.upstream);
        let heard = progress::await_answer(&rx, deadline, progress_of, |heard| match heard {
            Heard::Note(note) => Ok(self.heard(note, progress_of, &mut logs, asks, timeout)),
            done => Err(done),
        });
        let heard = match heard {
            Err(RecvTimeoutError::Timeout) => {
                let questions = asks.map_or(0, |asks| asks.questions());
                self.give_up((id, own), questions, &rx, timeout)
            }
            heard => heard,
        };
        match heard {
            Ok(Heard::Done(posted)) => posted,
            Ok(Heard::Note(_)) | Err(RecvTimeoutError::Timeout) => Err(no_answer_within(
                &self.wire.upstream,
                method,
                timeout,
                key.is_some(),
            )),
            Err(RecvTimeoutError::Disconnected) => Err(ClientError::Lost(format!(
                "upstream `{}`: the request {method} ended without an answer",
                self.wire.upstream
            ))),
        }
    }

    /// What a request under `key` waits for: the answer kept for it, an earlier
    /// request under it still followed (its answer now goes to `to`, the requester
    /// of request `own`, whose `asks` is told the questions asked on it so far), or
    /// a new one.
    fn waiting_on(
        &self,
        key: &str,
        to: &Sender<Heard>,
        own: u64,
        asks: Option<&dyn ClientRequests>,
    ) -> Waiting {
        // Under the lock the thread of a request holds while it hands its answer on
        // or keeps it: an answer is either kept already or comes to `to`.
        let mut requests = self.followed.lock();
        if let Some(answer) = self.late.take(key) {
            return Waiting::Kept(answer);
        }
        match requests
            .iter_mut()
            .find(|(_, f)| f.key.as_deref() == Some(key))
        {
            Some((id, follow)) => {
                follow.to = Some(to.clone());
                follow.waiter = own;
                if let Some(asks) = asks {
                    asks.taking_up(follow.questions);
                }
                follow.asks = asks.is_some();
                Waiting::Earlier(*id, None)
            }
            None => Waiting::New,
        }
    }

    /// Sends request `id` under `key` on a thread of its own, which reads its
    /// answer at most [`FOLLOW_FOR`] past `timeout` (without a key, `timeout`) and
    /// hands it to `to` (or to whoever waits for it then, or keeps it late). `asks`:
    /// its requester answers the upstream's requests of the client. Not sent while
    /// [`MAX_FOLLOWED`] requests given up still run.
    fn follow(
        &self,
        message: &Value,
        (id, key): (u64, Option<&str>),
        timeout: Duration,
        (to, asks): (Sender<Heard>, bool),
    ) -> Result<(), ClientError> {
        {
            let mut requests = self.followed.lock();
            let given_up = requests.values().filter(|f| f.to.is_none()).count();
            if given_up >= MAX_FOLLOWED {
                return Err(ClientError::NotSent(format!(
                    "upstream `{}` has {given_up} requests still running past their timeout (the most the host follows at once): not sent until one of them ends",
                    self.wire.upstream
                )));
            }
            requests.insert(
                id,
                Follow {
                    key: key.map(str::to_owned),
                    to: Some(to),
                    waiter: id,
                    questions: 0,
                    asks,
                },
            );
        }
        let (wire, followed, late) = (
            Arc::clone(&self.wire),
            Arc::clone(&self.followed),
            Arc::clone(&self.late),
        );
        let (message, key) = (message.clone(), key.map(str::to_owned));
        let reads_for = match key {
            Some(_) => timeout.saturating_add(FOLLOW_FOR),
            None => timeout,
        };
        let news = self.hooks.as_ref().map(|hooks| Arc::clone(&hooks.heard));
        let spawned = self.threads.run(Box::new(move || {
            let mut rest = None;
            let posted = wire.post_leaving_rest(
                &message,
                reads_for,
                (key.as_deref(), Some(id)),
                false,
                &mut |note| {
                    let note = match followed.to_of(id) {
                        // A requester that gave up since: as if none waited.
                        Some(to) => match to.send(Heard::Note(note)) {
                            Ok(()) => return,
                            Err(unsent) => match unsent.0 {
                                Heard::Note(note) => note,
                                Heard::Done(_) => return,
                            },
                        },
                        None => note,
                    };
                    wire.unheard(&note, timeout, news.as_ref());
                },
                &mut rest,
            );
            let rest = rest.map(|rest| wire.drain.hold(rest));
            followed.done(id, key.as_deref(), posted, &wire, &late);
            // Its requester has the answer: the rest is read here, on this thread
            // (no other woken for it), within the drain's bounds.
            if let Some(rest) = rest {
                rest.read_here();
            }
        }));
        if let Err(e) = spawned {
            self.followed.lock().remove(&id);
            return Err(ClientError::NotSent(format!(
                "upstream `{}`: no thread to send the request on: {e}",
                self.wire.upstream
            )));
        }
        Ok(())
    }

    /// The requester (of request `own`) waiting for request `id` gives up, having
    /// answered `questions` of the upstream's ([`ClientRequests::questions`]): its
    /// thread reads on, and keeps the answer when it comes, unless another
    /// requester took it up since (it waits for it now). An answer that came
    /// meanwhile is taken instead.
    fn give_up(
        &self,
        (id, own): (u64, u64),
        questions: u32,
        rx: &Receiver<Heard>,
        timeout: Duration,
    ) -> Result<Heard, RecvTimeoutError> {
        let mut requests = self.followed.lock();
        // Answered just now (the thread hands its answer on under this lock); what
        // else came meanwhile is nobody's now (an upstream's request is refused).
        let news = self.hooks.as_ref().map(|hooks| &hooks.heard);
        while let Ok(heard) = rx.try_recv() {
            match heard {
                Heard::Done(_) => return Ok(heard),
                Heard::Note(note) => self.wire.unheard(&note, timeout, news),
            }
        }
        match requests.get_mut(&id) {
            // Not followed past its timeout: its thread's answer is nobody's.
            Some(follow) if follow.key.is_none() => {
                requests.remove(&id);
            }
            // Unless another requester took it up since (it waits for it now).
            Some(follow) if follow.waiter == own => {
                follow.to = None;
                follow.questions = questions;
            }
            _ => {}
        }
        Err(RecvTimeoutError::Timeout)
    }

    /// Whether a request under `key` was sent on it and is not answered yet.
    pub(crate) fn running(&self, key: &str) -> bool {
        self.followed
            .lock()
            .values()
            .any(|f| f.key.as_deref() == Some(key))
    }
}

impl Wire {
    /// What came on a followed request's stream once nobody waits for it: the
    /// upstream's own request refused (no call's client to ask it; POSTed within
    /// `timeout`), a log message to the host's log, news of its resources to
    /// `news`; progress is dropped.
    fn unheard(&self, note: &Value, timeout: Duration, news: Option<&super::client::Heard>) {
        let method = note.get("method").and_then(Value::as_str).unwrap_or("");
        if note.get("id").is_some() {
            if let Some(reply) = super::client::answer_for_client(&self.upstream, None, note, false)
            {
                let _ = self.post(&reply, timeout, None, None, false, &mut |_| {});
            }
        } else if super::log_messages::is_log(note) {
            super::log_messages::to_log(&self.upstream, note);
        } else if super::client::is_surface_news(method)
            && let Some(news) = news
        {
            news(note);
        }
    }

    /// The session now.
    fn session(&self) -> Option<String> {
        self.session
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The negotiated revision.
    fn protocol(&self) -> Option<String> {
        self.protocol
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// `text` (an error's, holding a body read up to a cap) without the
    /// credentials it was sent.
    fn stripped(&self, text: String) -> String {
        self.credentials.text_maybe_cut(text)
    }

    /// POSTs `message` (without a session id when `fresh`), reading for at most
    /// `timeout`; the response to request `id`, if one is awaited, the progress
    /// reports on the way handed to `notes`. The rest of a response stream is read
    /// on the drain's thread.
    fn post(
        &self,
        message: &Value,
        timeout: Duration,
        key: Option<&str>,
        id: Option<u64>,
        fresh: bool,
        notes: &mut dyn FnMut(Value),
    ) -> Result<Posted, ClientError> {
        let mut rest = None;
        let posted = self.post_leaving_rest(message, timeout, (key, id), fresh, notes, &mut rest);
        if let Some(rest) = rest {
            self.drain.finish(rest);
        }
        posted
    }

    /// [`Wire::post`], the rest of a response stream (after its response) left in
    /// `rest` for the caller to have read ([`Drain`]).
    fn post_leaving_rest(
        &self,
        message: &Value,
        timeout: Duration,
        (key, id): (Option<&str>, Option<u64>),
        fresh: bool,
        notes: &mut dyn FnMut(Value),
        rest: &mut Option<Rest>,
    ) -> Result<Posted, ClientError> {
        let Some(bearer) = &self.bearer else {
            let posted = self.post_as(message, timeout, (key, id), fresh, None, notes, rest)?;
            return Ok(posted.unwrap_or(Posted::Answer(None)));
        };
        for last in [false, true] {
            let token = bearer.token().map_err(|e| match e {
                TokenError::Refused(why) => ClientError::Misconfigured(self.stripped(why)),
                TokenError::Unavailable(why) => ClientError::NotSent(self.stripped(why)),
            })?;
            let bearing = Some((token.as_str(), last));
            if let Some(posted) =
                self.post_as(message, timeout, (key, id), fresh, bearing, notes, rest)?
            {
                return Ok(posted);
            }
            // HTTP 401: not processed; sent again with a new token.
            bearer.rejected(&token);
            tracing::info!(target: "justonce::upstream", upstream = %self.upstream, "it refused its OAuth access token (HTTP 401); a new one is fetched and the request sent again");
        }
        unreachable!("the last attempt answers")
    }

    /// [`Wire::post_leaving_rest`] with `bearing`'s token (and whether it is the
    /// last one tried): `None` when the upstream refused a token that was not the
    /// last (HTTP 401, nothing processed).
    #[allow(clippy::too_many_arguments)]
    fn post_as(
        &self,
        message: &Value,
        timeout: Duration,
        (key, id): (Option<&str>, Option<u64>),
        fresh: bool,
        bearing: Option<(&str, bool)>,
        notes: &mut dyn FnMut(Value),
        rest: &mut Option<Rest>,
    ) -> Result<Option<Posted>, ClientError> {
        let session = if fresh { None } else { self.session() };
        let protocol = self.protocol();
        let mut builder = with_session(
            Request::builder()
                .method("POST")
                .uri(self.url.as_str())
                .header("Content-Type", "application/json")
                .header("Accept", "application/json, text/event-stream"),
            session.as_deref(),
            protocol.as_deref(),
            &self.headers,
        );
        if let Some(key) = key {
            builder = builder.header("Idempotency-Key", key);
        }
        if let Some((token, _)) = bearing {
            builder = builder.header("Authorization", format!("Bearer {token}"));
        }
        let body = message.to_string();
        let request = builder
            .body(body.as_bytes())
            .map_err(|e| ClientError::NotSent(format!("upstream `{}`: {e}", self.upstream)))?;
        let request = self
            .agent
            .configure_request(request)
            .timeout_global(Some(timeout))
            .build();
        let response = self.agent.run(request).map_err(|e| self.transport(e))?;
        let status = response.status().as_u16();
        if let Some(session) = response.headers().get("mcp-session-id") {
            *self.session.lock().unwrap_or_else(|p| p.into_inner()) =
                Some(String::from_utf8_lossy(session.as_bytes()).into_owned());
        }
        let streamed = response
            .headers()
            .get("content-type")
            .is_some_and(|t| t.as_bytes().starts_with(b"text/event-stream"));
        let location = response
            .headers()
            .get("location")
            .map(|l| String::from_utf8_lossy(l.as_bytes()).into_owned());
        let reader = response.into_body().into_reader().take(MAX_RESPONSE_BYTES);
        match status {
            200..=299 => {}
            // The server ended or forgot the session: nothing was processed under it.
            404 if session.is_some() => {
                return Ok(Some(Posted::SessionLost(session.unwrap_or_default())));
            }
            401 if bearing.is_some_and(|(_, last)| !last) => return Ok(None),
            // Refused before it was processed (too many requests; the service is
            // unavailable): not performed, whatever the tool; retried under its key
            // within the call's budget, never saved.
            429 | 503 => {
                return Err(ClientError::NotSent(format!(
                    "upstream `{}` answered HTTP {status} (it did not process the request)",
                    self.upstream
                )));
            }
            408 | 409 | 425 | 500..=599 => {
                return Err(ClientError::Lost(format!(
                    "upstream `{}` answered HTTP {status}",
                    self.upstream
                )));
            }
            300..=399 | 401 | 403 => {
                // The host's configuration (its credentials, its `url`), not the
                // call: nothing was processed. A new session, with the secrets file
                // read again, is started by the next call.
                let mut text = String::new();
                let _ = reader.take(4096).read_to_string(&mut text);
                self.alive.store(false, Ordering::SeqCst);
                let why = match (status, location) {
                    (300..=399, Some(to)) => format!(
                        "upstream `{}` answered HTTP {status}, redirecting to {to}; the host follows no redirects: set its `url` to where the server is",
                        self.upstream
                    ),
                    (300..=399, None) => format!(
                        "upstream `{}` answered HTTP {status} (a redirect); the host follows none: set its `url` to where the server is",
                        self.upstream
                    ),
                    (401, _) if bearing.is_some() => format!(
                        "upstream `{}` refused its OAuth access token, a newly fetched one too (HTTP 401: {}); fix its `oauth`, and the same call goes through",
                        self.upstream,
                        text.trim()
                    ),
                    _ => format!(
                        "upstream `{}` refused the host's credentials (HTTP {status}: {}); fix its `headers`, `oauth` or secrets file, and the same call goes through",
                        self.upstream,
                        text.trim()
                    ),
                };
                return Err(ClientError::Misconfigured(self.stripped(why)));
            }
            _ => {
                let mut text = String::new();
                let _ = reader.take(4096).read_to_string(&mut text);
                let message = self.stripped(format!(
                    "upstream `{}` answered HTTP {status}: {}",
                    self.upstream,
                    text.trim()
                ));
                return Err(ClientError::Refused(json!({
                    "code": -32000,
                    "message": message,
                    "data": { "status": status },
                })));
            }
        }
        let Some(id) = id else {
            return Ok(Some(Posted::Answer(None)));
        };
        if streamed {
            let (answer, unread) = self.response_in_stream(reader, id, notes)?;
            // To be read to its end, so its connection is kept (see `drain`).
            *rest = Some(Box::new(unread));
            return Ok(Some(Posted::Answer(Some(answer))));
        }
        let mut text = String::new();
        let mut reader = reader;
        reader.read_to_string(&mut text).map_err(|e| {
            ClientError::Lost(format!(
                "upstream `{}`: the response was cut off: {e}",
                self.upstream
            ))
        })?;
        let mut answer: Value = serde_json::from_str(&text).map_err(|e| {
            ClientError::Lost(format!(
                "upstream `{}` answered something that is not JSON-RPC ({e})",
                self.upstream
            ))
        })?;
        self.credentials.json(&mut answer);
        Ok(Some(Posted::Answer(Some(answer))))
    }

    /// Reads Server-Sent Events until the one whose data is the response to `id`,
    /// handing what else comes on it (progress, log messages, the upstream's own
    /// requests, news of its resources) to `notes`: the response, and the stream's
    /// rest, unread. An event over [`MAX_EVENT_BYTES`] may have been the response:
    /// no answer, naming the cap.
    fn response_in_stream<R: Read>(
        &self,
        reader: R,
        id: u64,
        notes: &mut dyn FnMut(Value),
    ) -> Result<(Value, BufReader<R>), ClientError> {
        let mut reader = BufReader::new(reader);
        let mut events = Events::new(&self.upstream, "response stream", MAX_EVENT_BYTES);
        while let Some(event) = events.next(&mut reader) {
            let event = event.map_err(|oversized| ClientError::Lost(oversized.to_string()))?;
            let Ok(mut message) = serde_json::from_str::<Value>(&event) else {
                continue;
            };
            self.credentials.json(&mut message);
            if message.get("method").is_some() {
                // Progress, the upstream's requests, log messages and news: its
                // requester's.
                notes(message);
            } else if message.get("id").and_then(Value::as_u64) == Some(id)
                && message.get("method").is_none()
            {
                return Ok((message, reader));
            }
        }
        Err(ClientError::Lost(format!(
            "upstream `{}`: the stream ended (or broke) before the response",
            self.upstream
        )))
    }

    /// A transport failure: before anything was sent (no connection) or after.
    fn transport(&self, error: ureq::Error) -> ClientError {
        let refused = matches!(
            &error,
            ureq::Error::HostNotFound | ureq::Error::ConnectionFailed
        ) || matches!(&error, ureq::Error::Io(e) if e.kind() == std::io::ErrorKind::ConnectionRefused);
        let message = self.stripped(format!(
            "upstream `{}` at {}: {error}",
            self.upstream, self.url
        ));
        if refused {
            ClientError::NotSent(message)
        } else {
            ClientError::Lost(message)
        }
    }
}

impl Drop for HttpClient {
    /// Stops its `GET` stream and ends its session at the server (`DELETE`, as the
    /// transport asks of a client done with one), so the server lets the stream go.
    fn drop(&mut self) {
        if let Some(stop) = self
            .stream_stop
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            stop.store(true, Ordering::SeqCst);
        }
        let Some(session) = self.session() else {
            return;
        };
        let wire = &self.wire;
        let protocol = wire.protocol();
        let request = with_session(
            Request::builder().method("DELETE").uri(wire.url.as_str()),
            Some(&session),
            protocol.as_deref(),
            &wire.headers,
        )
        .body(());
        if let Ok(request) = request {
            let request = wire
                .agent
                .configure_request(request)
                .timeout_global(Some(stream::DELETE_TIMEOUT))
                .build();
            let _ = wire.agent.run(request);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the upstream asks on its standalone stream (no call named) goes to the
    /// one call in flight whose client answers such requests: with none it is
    /// refused (-32601), with several too (-32603), and a ping is answered.
    #[test]
    fn a_request_on_the_standalone_stream_goes_to_the_one_call_that_asks() {
        let followed = Followed::default();
        let roots = json!({ "jsonrpc": "2.0", "id": 4, "method": "roots/list" });
        let code = |reply: Result<(), Value>| reply.unwrap_err()["error"]["code"].clone();
        let to_the_call =
            |message: &Value| followed.to_the_call("u", "roots/list", message.clone());
        assert_eq!(code(to_the_call(&roots)), -32601, "no call in flight");
        let follow = |asks: bool, key: Option<&str>| {
            let (to, from) = channel();
            let follow = Follow {
                key: key.map(str::to_owned),
                to: Some(to),
                waiter: 0,
                questions: 0,
                asks,
            };
            (follow, from)
        };
        let (listing, listed) = follow(false, None);
        let (call, asked) = follow(true, None);
        followed.lock().insert(1, listing);
        followed.lock().insert(2, call);
        assert_eq!(to_the_call(&roots), Ok(()));
        match asked.try_recv() {
            Ok(Heard::Note(note)) => assert_eq!(note, roots, "to the call that asks"),
            _ => panic!("the call heard nothing"),
        }
        assert!(
            listed.try_recv().is_err(),
            "not to a request that does not ask"
        );
        let ping = followed.to_the_call("u", "ping", json!({ "id": 3, "method": "ping" }));
        assert_eq!(ping.unwrap_err()["result"], json!({}));
        // A keyed call given up (nobody waits) asks nothing; another that waits does.
        let (mut given_up, _gone) = follow(true, Some("k"));
        given_up.to = None;
        followed.lock().insert(3, given_up);
        assert_eq!(to_the_call(&roots), Ok(()));
        let (other, _other) = follow(true, Some("k2"));
        followed.lock().insert(4, other);
        let several = to_the_call(&roots).unwrap_err();
        assert_eq!(several["error"]["code"], -32603);
        let message = several["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("2 calls in flight") && message.contains("standalone stream"),
            "{message}"
        );
    }

    #[test]
    fn the_response_is_found_among_the_events_of_a_stream() {
        let client = HttpClient::new("t", "http://127.0.0.1:9/mcp", Vec::new());
        let stream = "event: message\n\
            data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\
            \n\
            : a comment\n\
            data: {\"jsonrpc\":\"2.0\",\"id\":6,\"result\":{}}\n\
            \n\
            data: {\"jsonrpc\":\"2.0\",\n\
            data:  \"id\":7,\"result\":{\"content\":[]}}\n\
            \n\
            data: after\n\
            \n";
        let (found, mut rest) = client
            .wire
            .response_in_stream(stream.as_bytes(), 7, &mut |_| {})
            .unwrap();
        assert_eq!(found["result"]["content"], json!([]));
        // What follows the response is left to be read (to its end, by the drain).
        let mut after = String::new();
        rest.read_to_string(&mut after).unwrap();
        assert_eq!(after, "data: after\n\n");
        let cut = "data: {\"jsonrpc\":\"2.0\",\"id\":6,\"result\":{}}\n\n";
        assert!(matches!(
            client
                .wire
                .response_in_stream(cut.as_bytes(), 7, &mut |_| {}),
            Err(ClientError::Lost(_))
        ));
    }

    #[test]
    fn a_refused_connection_is_not_sent_and_nothing_is_lost() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let answer = tools_call(&format!("http://127.0.0.1:{port}/mcp"));
        assert!(matches!(answer, Err(ClientError::NotSent(_))), "{answer:?}");
    }

    /// An upstream that answers every request on a connection kept open, each with
    /// a chunked Server-Sent Events stream holding its response (and then its end,
    /// as servers do): its URL and how many connections it accepted.
    fn streaming_on_kept_connections() -> (String, Arc<AtomicU64>) {
        use std::io::Write;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let accepted = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&accepted);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                counted.fetch_add(1, Ordering::SeqCst);
                std::thread::spawn(move || {
                    let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
                    loop {
                        let received = super::super::test_http::receive(&mut reader);
                        if received.line.is_empty() {
                            return;
                        }
                        let message: Value = serde_json::from_slice(&received.body).unwrap();
                        let event = format!(
                            "data: {}\n\n",
                            json!({ "jsonrpc": "2.0", "id": message["id"], "result": { "content": [] } })
                        );
                        let answer = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{event}\r\n",
                            event.len()
                        );
                        if stream.write_all(answer.as_bytes()).is_err() {
                            return;
                        }
                        // The stream's end, written after its response.
                        if stream.write_all(b"0\r\n\r\n").is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (url, accepted)
    }

    /// A response stream read up to its response is read to its end afterwards, off
    /// the requester's way, so its connection serves the next request (it was closed
    /// and a new one opened for every call, 1.2 ms of a gateway's call here).
    #[test]
    fn a_connection_whose_response_stream_ended_after_its_response_is_kept() {
        let (url, accepted) = streaming_on_kept_connections();
        let client = HttpClient::new("t", &url, Vec::new());
        let calls = 12;
        for n in 0..calls {
            // Under a key (read on a kept thread) and without (on the requester's).
            let key = format!("k{n}");
            let key = (n % 2 == 0).then_some(key.as_str());
            let answer = client
                .request(
                    "tools/call",
                    json!({}),
                    Duration::from_secs(5),
                    (key, None),
                    None,
                )
                .unwrap();
            assert_eq!(answer["content"], json!([]), "{answer}");
            // (A call that starts before the last one's rest was read opens another
            // connection: a race the gateway's next call, a commit later, wins.)
            until("the rest of the stream was not read", || {
                client.wire.drain.idle()
            });
        }
        // One connection; another only where the machine stalled a call past the
        // 2 s a connection may idle (a loaded test machine), never one a call.
        let accepted = accepted.load(Ordering::SeqCst);
        assert!(
            accepted <= 3,
            "{accepted} connections for {calls} calls: the connection was not kept"
        );
    }

    /// One `tools/call` to the upstream at `url`, under the key `k`.
    fn tools_call(url: &str) -> Result<Value, ClientError> {
        HttpClient::new("t", url, Vec::new()).request(
            "tools/call",
            json!({}),
            Duration::from_secs(5),
            (Some("k"), None),
            None,
        )
    }

    /// An upstream that answers every request with HTTP `status`, once per
    /// connection, for `requests` requests.
    fn answering(status: u16, requests: usize) -> String {
        use std::io::{BufRead, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for stream in listener.incoming().take(requests) {
                let mut stream = stream.unwrap();
                let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    reader.read_line(&mut line).unwrap();
                    if let Some(n) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = n.trim().parse().unwrap();
                    }
                    if line == "\r\n" || line.is_empty() {
                        break;
                    }
                }
                let mut body = vec![0; length];
                std::io::Read::read_exact(&mut reader, &mut body).unwrap();
                let answer = format!(
                    "HTTP/1.1 {status} Whatever\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                );
                stream.write_all(answer.as_bytes()).unwrap();
            }
        });
        url
    }

    /// 429 and 503 say the request was not processed: not performed (a keyed or
    /// unkeyed call alike goes on, nothing saved); a 502 or 504 may come after the
    /// upstream did it: no answer, unknown.
    #[test]
    fn too_many_requests_and_unavailable_are_not_sent_and_a_bad_gateway_is_lost() {
        for (status, not_sent) in [(429, true), (503, true), (502, false), (504, false)] {
            match tools_call(&answering(status, 1)) {
                Err(ClientError::NotSent(m)) if not_sent => {
                    assert!(m.contains(&format!("HTTP {status}")), "{m}")
                }
                Err(ClientError::Lost(_)) if !not_sent => {}
                other => panic!("HTTP {status}: {other:?}"),
            }
        }
    }

    /// An upstream that answers each `POST` once the test says so (its answer: the
    /// request's id and `n`), holding the request until then; the `POST`s it got
    /// (their `Idempotency-Key`), and how to let the next one be answered.
    fn answering_when_told() -> (String, Arc<Mutex<Vec<String>>>, Sender<u64>) {
        use std::io::Write;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let posted: Arc<Mutex<Vec<String>>> = Arc::default();
        let (told, tells) = channel::<u64>();
        let seen = Arc::clone(&posted);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
                let received = super::super::test_http::receive(&mut reader);
                let key = received
                    .headers
                    .get("idempotency-key")
                    .cloned()
                    .unwrap_or_default();
                let body = received.body;
                let message: Value = serde_json::from_slice(&body).unwrap();
                seen.lock().unwrap().push(key);
                let Ok(n) = tells.recv() else { return };
                let answer = json!({ "jsonrpc": "2.0", "id": message["id"], "result": { "n": n } })
                    .to_string();
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                    answer.len()
                );
            }
        });
        (url, posted, told)
    }

    /// An upstream that answers a request with a response stream whose events the
    /// test writes (each a JSON-RPC message, the stream closed after a response),
    /// and a `POST` of a response (the client's reply to the upstream's request)
    /// with 202; the replies it got, and how to write the next event.
    fn streaming_when_told() -> (String, Arc<Mutex<Vec<Value>>>, Sender<Value>) {
        use std::io::Write;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let replies: Arc<Mutex<Vec<Value>>> = Arc::default();
        let (told, tells) = channel::<Value>();
        let tells = Arc::new(Mutex::new(tells));
        let got = Arc::clone(&replies);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let (got, tells) = (Arc::clone(&got), Arc::clone(&tells));
                std::thread::spawn(move || {
                    let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
                    let received = super::super::test_http::receive(&mut reader);
                    let message: Value = serde_json::from_slice(&received.body).unwrap();
                    if message.get("method").is_none() {
                        got.lock().unwrap().push(message);
                        let _ = write!(
                            stream,
                            "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                        );
                        return;
                    }
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
                    );
                    let _ = stream.flush();
                    let tells = tells.lock().unwrap();
                    while let Ok(event) = tells.recv() {
                        let _ = write!(stream, "data: {event}\n\n");
                        let _ = stream.flush();
                        if event.get("result").is_some() {
                            return;
                        }
                    }
                });
            }
        });
        (url, replies, told)
    }

    /// Polls `done` until it holds; a bound on a hang, not a timed assertion.
    fn until(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !done() {
            assert!(Instant::now() < deadline, "never: {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The upstream's `elicitation/create` with id `id`.
    fn elicitation(id: u64) -> Value {
        json!({ "jsonrpc": "2.0", "id": id, "method": "elicitation/create",
            "params": { "message": "Who?", "requestedSchema": { "type": "object" } } })
    }

    /// What comes on a followed request's stream once its requester gave up, or in
    /// the moment it gives up, is handled: the upstream's own request refused (left
    /// unanswered, it held the upstream's tool and the following thread up to
    /// `FOLLOW_FOR`), news of its resources told to the hooks (it was dropped).
    #[test]
    fn what_comes_on_a_followed_stream_nobody_waits_for_is_refused_or_told() {
        let (url, replies, told) = streaming_when_told();
        let news: Arc<Mutex<Vec<Value>>> = Arc::default();
        let heard = Arc::clone(&news);
        let client = HttpClient::new("t", &url, Vec::new()).hooked(HttpHooks {
            changed: Arc::new(|| {}),
            heard: Arc::new(move |note| heard.lock().unwrap().push(note.clone())),
            ended: Arc::new(|_| {}),
        });
        let timeout = Duration::from_millis(200);
        let call = client.request("tools/call", json!({}), timeout, (Some("k"), None), None);
        assert!(matches!(call, Err(ClientError::Lost(_))), "{call:?}");
        assert!(client.running("k"), "given up, followed");

        // Once the requester gave up.
        let updated = json!({ "jsonrpc": "2.0", "method": "notifications/resources/updated",
            "params": { "uri": "file:///a" } });
        told.send(elicitation(90)).unwrap();
        told.send(updated.clone()).unwrap();
        until("the request after the give-up refused", || {
            replies.lock().unwrap().iter().any(|r| r["id"] == 90)
        });
        until("the resource news told", || {
            news.lock().unwrap().contains(&updated)
        });
        told.send(json!({ "jsonrpc": "2.0", "id": 1, "result": {} }))
            .unwrap();
        until("it ended", || !client.running("k"));

        // In the moment it gives up: the upstream's request, handed to a requester
        // that has stopped reading, is refused when it gives up.
        let id = client.next_id.fetch_add(1, Ordering::Relaxed);
        let message = json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {} });
        let (tx, rx) = channel();
        client
            .follow(&message, (id, Some("k2")), timeout, (tx, false))
            .unwrap();
        told.send(elicitation(91)).unwrap();
        let Ok(Heard::Note(note)) = rx.recv() else {
            panic!("the upstream's request was not handed on");
        };
        let (unread, pending) = channel();
        unread.send(Heard::Note(note)).unwrap();
        assert!(matches!(
            client.give_up((id, id), 0, &pending, timeout),
            Err(RecvTimeoutError::Timeout)
        ));
        until("the request in the give-up refused", || {
            replies.lock().unwrap().iter().any(|r| r["id"] == 91)
        });
        for reply in replies.lock().unwrap().iter() {
            assert_eq!(reply["error"]["code"], -32601, "refused: {reply}");
        }
        told.send(json!({ "jsonrpc": "2.0", "id": id, "result": {} }))
            .unwrap();
        until("it ended", || !client.running("k2"));
    }

    /// A requester that gives up a request another one took up since leaves that
    /// one waiting for it: its answer comes to the one that waits (before, the
    /// first one's give-up cleared the second's place, and the answer that came
    /// in its time was kept late, the call told it is unknown).
    #[test]
    fn a_give_up_leaves_the_requester_that_took_the_request_up_waiting() {
        let (url, _replies, told) = streaming_when_told();
        let client = HttpClient::new("t", &url, Vec::new());
        let timeout = Duration::from_secs(1);
        let id = client.next_id.fetch_add(1, Ordering::Relaxed);
        let message = json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {} });
        let (first, first_rx) = channel();
        client
            .follow(&message, (id, Some("k")), timeout, (first, false))
            .unwrap();
        // A second attempt under the key takes it up while the first still waits;
        // then the first gives up.
        let second_id = client.next_id.fetch_add(1, Ordering::Relaxed);
        let (second, second_rx) = channel();
        assert!(matches!(
            client.waiting_on("k", &second, second_id, None),
            Waiting::Earlier(earlier, None) if earlier == id
        ));
        assert!(matches!(
            client.give_up((id, id), 0, &first_rx, timeout),
            Err(RecvTimeoutError::Timeout)
        ));

        told.send(json!({ "jsonrpc": "2.0", "id": id, "result": { "n": 1 } }))
            .unwrap();
        until("it ended", || !client.running("k"));
        match second_rx.try_recv() {
            Ok(Heard::Done(Ok(Posted::Answer(Some(answer))))) => {
                assert_eq!(answer["result"], json!({ "n": 1 }));
            }
            _ => panic!("the answer did not come to the requester that waits"),
        }
        assert_eq!(client.late.take("k"), None, "not kept late");
    }

    /// The call's client as a test sees it: it accepts every question, counts them
    /// (from the count it is told when it takes a request up), and numbers them.
    #[derive(Default)]
    struct Counting {
        asked: std::cell::Cell<u32>,
        taken_up: std::cell::Cell<Option<u32>>,
        numbers: std::cell::RefCell<Vec<(String, u32)>>,
    }

    impl ClientRequests for Counting {
        fn request(&self, _: &str, params: &Value, _: bool) -> crate::provider::ClientReply {
            self.asked.set(self.asked.get() + 1);
            let message = params["message"].as_str().unwrap_or_default().to_owned();
            self.numbers.borrow_mut().push((message, self.asked.get()));
            crate::provider::ClientReply::Result(json!({ "action": "accept" }))
        }
        fn questions(&self) -> u32 {
            self.asked.get()
        }
        fn taking_up(&self, questions: u32) {
            self.taken_up.set(Some(questions));
            self.asked.set(self.asked.get().max(questions));
        }
    }

    /// The upstream's `elicitation/create` with id `id` asking `message`.
    fn asking(id: u64, message: &str) -> Value {
        json!({ "jsonrpc": "2.0", "id": id, "method": "elicitation/create",
            "params": { "message": message, "requestedSchema": { "type": "object" } } })
    }

    /// An attempt that takes up an earlier one's request (past its timeout) is told
    /// how many of the upstream's questions were answered on it: the upstream's next
    /// question is its second, not its first again (before, the count started from
    /// zero, and the guard read the second question as a divergence from the
    /// first's record, or answered it with the first's answer).
    #[test]
    fn an_attempt_that_takes_a_request_up_is_told_the_questions_asked_on_it() {
        let (url, replies, told) = streaming_when_told();
        let client = HttpClient::new("t", &url, Vec::new());
        let call = |asks: &Counting, timeout: Duration| {
            client.request(
                "tools/call",
                json!({}),
                timeout,
                (Some("k"), None),
                Some(asks),
            )
        };
        // The first question comes as soon as the request runs; the first attempt
        // answers it, and gives up.
        told.send(asking(90, "first")).unwrap();
        let first = Counting::default();
        let given_up = call(&first, Duration::from_secs(2));
        assert!(
            matches!(given_up, Err(ClientError::Lost(_))),
            "{given_up:?}"
        );
        assert_eq!(*first.numbers.borrow(), [("first".to_owned(), 1)]);
        until("the first answer POSTed", || {
            replies.lock().unwrap().iter().any(|r| r["id"] == 90)
        });

        std::thread::scope(|scope| {
            let second = scope.spawn(|| {
                let second = Counting::default();
                let answer = call(&second, Duration::from_secs(60));
                (answer, second.taken_up.get(), second.numbers.take())
            });
            until("the second attempt took it up", || {
                client.followed.lock().values().any(|f| f.to.is_some())
            });
            told.send(asking(91, "second")).unwrap();
            told.send(json!({ "jsonrpc": "2.0", "id": 1, "result": { "n": 1 } }))
                .unwrap();
            let (answer, taken_up, numbers) = second.join().unwrap();
            assert_eq!(answer, Ok(json!({ "n": 1 })));
            assert_eq!(taken_up, Some(1), "told of the first question");
            assert_eq!(numbers, [("second".to_owned(), 2)], "the second question");
        });
        assert_eq!(
            client.late.take("k"),
            None,
            "answered in time, not kept late"
        );
    }

    /// A request under a key past its timeout is followed: a later one under the
    /// same key waits for it and sends nothing, and its answer, when it comes, is
    /// kept by the key and answers the next one (before, each attempt was another
    /// `POST` and the late answer was dropped). The opposite: another key is sent.
    #[test]
    fn a_request_under_a_key_past_its_timeout_is_followed_and_its_late_answer_kept() {
        let (url, posted, told) = answering_when_told();
        let late: Arc<LateAnswers> = Arc::default();
        let client = HttpClient::new("t", &url, Vec::new()).keeping_late(Arc::clone(&late));
        let call = |key: &str| {
            client.request(
                "tools/call",
                json!({}),
                Duration::from_millis(200),
                (Some(key), None),
                None,
            )
        };
        for attempt in 1..=2 {
            match call("k") {
                Err(ClientError::Lost(m)) => assert!(
                    m.contains("its answer, if it comes, answers the retry"),
                    "attempt {attempt}: {m}"
                ),
                other => panic!("attempt {attempt}: {other:?}"),
            }
            assert!(client.running("k"), "still followed");
        }
        assert_eq!(*posted.lock().unwrap(), ["k"], "sent once");

        told.send(7).unwrap();
        // A bound on a hang: the thread that follows it keeps the answer.
        let deadline = Instant::now() + Duration::from_secs(60);
        while client.running("k") {
            assert!(Instant::now() < deadline, "never answered");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(call("k"), Ok(json!({ "n": 7 })), "the late answer");
        assert_eq!(late.take("k"), None, "taken once");

        // The opposite: another key is another request.
        told.send(8).unwrap();
        assert_eq!(call("k2"), Ok(json!({ "n": 8 })));
        assert_eq!(*posted.lock().unwrap(), ["k", "k2"]);
    }
}
