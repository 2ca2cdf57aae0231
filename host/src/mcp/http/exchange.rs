//! One HTTP request to `/mcp`, from its head to its response, once the server has
//! checked its origin and token: refused early when its method, framing, content
//! type or size is wrong; otherwise its JSON-RPC message goes through the same
//! [`Session`] and [`Server::run_call`] as stdio's.

use std::sync::Arc;

use crate::serving::sse::live_channel;
use bytes::Bytes;
use serde_json::Value;

use super::McpEndpoint;
use super::sessions::{Found, Refused};
use crate::call::CallRequest;
use crate::mcp::elicit::{self, CannotAsk};
use crate::mcp::mrtr;
use crate::mcp::protocol::{
    self, ErrorCode, ErrorData, INVALID_REQUEST, Incoming, MISSING_CAPABILITY, MODERN_VERSIONS,
    PROTOCOL_VERSION_META_KEY, Params, ProtocolVersion, RequestId, SERVER_BUSY, TOO_MANY,
    handshake_versions, version_list,
};
use crate::mcp::session::{Dispatch, Era, Session};
use crate::mcp::tools::{CONVERSATION_HEADER, FromHeaders, IDEMPOTENCY_KEY_HEADER, Scoping};
use crate::mcp::{Server, Shutdown};
use crate::serving::Answer;
use crate::serving::admission::Permit;
use crate::serving::wire::{Head, Kind, Response};

/// What an `initialize` is told while the server drains.
const DRAINING_NO_SESSION: &str = "the server is draining (stopping): it opens no new session; initialize again, on another host or once this one is back";

/// A session's call whose answer goes out on a stream: what its blocking thread
/// takes along.
struct LiveCall {
    id: RequestId,
    request: CallRequest,
    /// The log level and progress token of the call.
    #[allow(deprecated)] // SEP-2577 deprecates logging; revisions up to 2025-11-25 have it.
    heard: (
        Option<rmcp::model::LoggingLevel>,
        Option<rmcp::model::ProgressToken>,
    ),
    /// Its place among its principal's calls in flight, until it finishes.
    permit: Permit,
    /// What the session's client declared (`elicitation`, `sampling`, `roots`): its
    /// tool may ask it, on this call's stream.
    declared: elicit::Declared,
    /// Counts it among the calls a stopping server waits for.
    shutdown: Arc<Shutdown>,
}

/// How a request's reply is framed, and to whom: what the reply needs of the
/// request once the call has run, owned so the call can run elsewhere.
struct ReplyTo {
    id: RequestId,
    /// A stateless request's error has the HTTP status of its code; a session's is
    /// `200`.
    stateless: bool,
    /// The framing the client asked for.
    kind: Kind,
    /// Whether the client accepts a stream (for what the tool said before its answer).
    takes_stream: bool,
}

impl ReplyTo {
    fn new(head: &Head, id: &RequestId, stateless: bool, kind: Kind) -> Self {
        Self {
            id: id.clone(),
            stateless,
            kind,
            takes_stream: reply_kind(head, true) == Some(Kind::Sse),
        }
    }

    /// The response carrying `reply`, and before it `notes` (what the tool said) as
    /// events when the client takes a stream.
    fn finish(self, reply: Result<Value, ErrorData>, notes: Vec<Value>) -> Response {
        let status = match &reply {
            Err(error) if self.stateless => status_of(error.code),
            _ => 200,
        };
        let message = protocol::reply(&self.id, reply);
        // A call's log lines go out as events before its answer: on a stream, which
        // a client that accepts one gets whenever there are lines to send.
        let kind = match status {
            200 if self.takes_stream && !notes.is_empty() => Kind::Sse,
            200 => self.kind,
            _ => Kind::Json,
        };
        let mut response = Response::message(status, kind, &message);
        if kind == Kind::Sse {
            response.notes = notes;
        }
        if status == 429 {
            response = response.with("retry-after", "1");
        }
        response
    }
}

/// A JSON-RPC error as the body of an HTTP error.
pub(super) fn refusal(
    status: u16,
    id: Option<&RequestId>,
    code: ErrorCode,
    message: &str,
) -> Response {
    let body = protocol::error_response(id, &ErrorData::new(code, message.to_owned(), None));
    Response::message(status, Kind::Json, &body)
}

impl McpEndpoint {
    /// Checks a POST's head: framing, content type, what the client accepts, and
    /// size; `Ok` has the length of the body to read.
    pub(super) fn admit_post(&self, head: &Head) -> Result<usize, Response> {
        if head.header("transfer-encoding").is_some() {
            return Err(refusal(
                501,
                None,
                INVALID_REQUEST,
                "send the body with a Content-Length",
            ));
        }
        let content_type = head
            .header("content-type")
            .unwrap_or("")
            .to_ascii_lowercase();
        if content_type.split(';').next().map(str::trim) != Some("application/json") {
            return Err(refusal(
                415,
                None,
                INVALID_REQUEST,
                "the body must be application/json",
            ));
        }
        if reply_kind(head, false).is_none() {
            return Err(refusal(
                406,
                None,
                INVALID_REQUEST,
                "accept application/json or text/event-stream",
            ));
        }
        let Some(length) = head.header("content-length") else {
            return Err(refusal(
                411,
                None,
                INVALID_REQUEST,
                "a Content-Length is required",
            ));
        };
        let length: usize = length.trim().parse().map_err(|_| {
            refusal(
                400,
                None,
                INVALID_REQUEST,
                "the Content-Length is not a number",
            )
        })?;
        if length > self.options.server.max_body_bytes {
            return Err(refusal(
                413,
                None,
                INVALID_REQUEST,
                &format!(
                    "the body is larger than {} bytes",
                    self.options.server.max_body_bytes
                ),
            ));
        }
        Ok(length)
    }

    /// Answers a POSTed message of `principal`: at once, or (a tool call, a task's
    /// journal query) with work for a blocking thread.
    pub(super) fn post(&self, head: &Head, principal: &str, body: &[u8]) -> Answer<Response> {
        let kind = reply_kind(head, self.options.prefer_sse).unwrap_or(Kind::Json);
        let Ok(text) = std::str::from_utf8(body) else {
            return Answer::Ready(refusal(
                400,
                None,
                ErrorCode::PARSE_ERROR,
                "the body is not valid UTF-8",
            ));
        };
        Answer::Ready(match protocol::parse(text.trim()) {
            Err(malformed) => {
                let body = protocol::error_response(malformed.id.as_ref(), &malformed.error);
                Response::message(400, Kind::Json, &body)
            }
            Ok(Incoming::Response { id, outcome }) => self.answer(head, principal, &id, outcome),
            Ok(Incoming::Notification { method, params }) => {
                if method == "notifications/cancelled" {
                    // As over stdio: the call runs to its outcome and keeps its record;
                    // its POST's response goes to a client that stopped listening. A
                    // question it waits on is not answered now: the call ends without
                    // it (resumable).
                    tracing::info!("call cancelled by the client; it runs to its outcome");
                    if let Some(call) = params
                        .get("requestId")
                        .and_then(|id| RequestId::try_from(id).ok())
                        && let Some(session_id) = head.header("mcp-session-id")
                        && let Some(found) = self.sessions.lookup(session_id, principal, self.now())
                    {
                        found.pending.cancel_call(&call);
                    }
                }
                Response::empty(202)
            }
            Ok(Incoming::Request { id, method, params }) => {
                return self.request(head, principal, &id, &method, &params, kind);
            }
        })
    }

    /// A client's response to a question a call of its session asked
    /// (`elicitation/create`, on the call's stream): handed to the call waiting for
    /// it, by id. The session must be the principal's, as for a request.
    fn answer(
        &self,
        head: &Head,
        principal: &str,
        id: &RequestId,
        outcome: elicit::Outcome,
    ) -> Response {
        let Some(session_id) = head.header("mcp-session-id") else {
            tracing::debug!(%id, "a response without a session: no question of the server's waits for it");
            return Response::empty(202);
        };
        let Some(found) = self.sessions.lookup(session_id, principal, self.now()) else {
            return refusal(
                404,
                None,
                INVALID_REQUEST,
                "no such session (it ended or was never opened): its questions ended with it",
            );
        };
        if !found.pending.respond(id, outcome) {
            tracing::debug!(%id, "a response to no question waiting for one; ignored");
        }
        Response::empty(202)
    }

    fn request(
        &self,
        head: &Head,
        principal: &str,
        id: &RequestId,
        method: &str,
        params: &Params,
        kind: Kind,
    ) -> Answer<Response> {
        let server = &self.server;
        let tools = server.tools();
        let from_headers = match scope_headers(head) {
            Ok(found) => found,
            Err(why) => {
                return Answer::Ready(refusal(400, Some(id), ErrorCode::INVALID_PARAMS, &why));
            }
        };
        let scoping = Scoping {
            headers: Some(&from_headers),
            session: head.header("mcp-session-id"),
            ..server.config().scoping()
        };
        let enveloped = params
            .get("_meta")
            .and_then(Value::as_object)
            .is_some_and(|m| m.contains_key(PROTOCOL_VERSION_META_KEY));
        let mut found = None;
        let (mut session, opening) = match head.header("mcp-session-id") {
            Some(session_id) => {
                let Some(entry) = self.sessions.lookup(session_id, principal, self.now()) else {
                    return Answer::Ready(refusal(
                        404,
                        Some(id),
                        INVALID_REQUEST,
                        "no such session (it ended or was never opened): initialize again",
                    ));
                };
                // Any revision this server speaks is accepted on a session, as the
                // official SDKs do; only an unknown one is refused.
                if let (Era::Handshake(_), Some(header)) =
                    (entry.era, head.header("mcp-protocol-version"))
                    && !handshake_versions().iter().any(|v| v.as_str() == header)
                {
                    return Answer::Ready(refusal(
                        400,
                        Some(id),
                        INVALID_REQUEST,
                        &format!(
                            "MCP-Protocol-Version {header:?} is not supported; this server speaks {}",
                            version_list(handshake_versions())
                        ),
                    ));
                }
                let resumed = Session::resume(tools, scoping, entry.era, entry.log_level)
                    .declaring(entry.declared)
                    .with_upstreams(server.upstreams())
                    .passing(server.host());
                found = Some(entry);
                (resumed, false)
            }
            None if enveloped => {
                if let Some(why) = routing_mismatch(head, method, params) {
                    return Answer::Ready(refusal(400, Some(id), ErrorCode::HEADER_MISMATCH, &why));
                }
                (
                    Session::new(tools, scoping)
                        .with_upstreams(server.upstreams())
                        .passing(server.host()),
                    false,
                )
            }
            // Draining (SIGTERM): a client is sent to another host, not given a
            // session that would end with this process.
            None if method == "initialize" && server.shutdown().stopping() => {
                return Answer::Ready(
                    refusal(503, Some(id), SERVER_BUSY, DRAINING_NO_SESSION)
                        .with("retry-after", "1"),
                );
            }
            None if method == "initialize" => (
                Session::new(tools, scoping)
                    .with_upstreams(server.upstreams())
                    .passing(server.host()),
                true,
            ),
            // A request that names a stateless revision in its header but carries no
            // envelope (or one without its version) has invalid params, as the
            // revision says (-32602), not an invalid request for want of a session.
            None if head
                .header("mcp-protocol-version")
                .is_some_and(|v| MODERN_VERSIONS.iter().any(|m| m.as_str() == v)) =>
            {
                let why = crate::mcp::session::envelope_refusal(params);
                return Answer::Ready(refusal(400, Some(id), why.code, &why.message));
            }
            None => {
                return Answer::Ready(refusal(
                    400,
                    Some(id),
                    INVALID_REQUEST,
                    "an Mcp-Session-Id header is required: initialize first, or send the 2026-07-28 _meta envelope",
                ));
            }
        };
        // The Tasks extension's methods, on the stateless wire (`mcp::tasks`): they
        // read the journal, on a blocking thread.
        if method.starts_with("tasks/")
            && !matches!(session.era(), Era::Handshake(_))
            && crate::mcp::session::stateless_envelope_error(params).is_none()
        {
            let reply_to = ReplyTo::new(head, id, true, kind);
            let (server, method, params) = (server.clone(), method.to_owned(), params.clone());
            let principal = principal.to_owned();
            // A task resumed by tasks/update counts among its principal's calls.
            let admission = self.admission.clone();
            return Answer::Blocking(Box::new(move || {
                let reply =
                    crate::mcp::tasks::request(&server, &method, &params, &principal, &admission);
                reply_to.finish(reply, Vec::new())
            }));
        }
        let before = session.log_level();
        let dispatch = session.request(method, params);
        if session.log_level() != before
            && let Some(session_id) = head.header("mcp-session-id")
        {
            self.sessions
                .set_log_level(session_id, principal, session.log_level());
        }
        let reply_to = ReplyTo::new(head, id, session.era() == Era::Stateless, kind);
        let reply = match dispatch {
            Dispatch::Reply(reply) => reply,
            // Passed on to an upstream: it may wait for one, on a blocking thread.
            Dispatch::Surface {
                method,
                params,
                stateless,
            } => {
                let host = Arc::clone(server.host());
                let subscribed = found.as_ref().map(|found| Arc::clone(&found.subscribed));
                return Answer::Blocking(Box::new(move || {
                    let reply =
                        crate::mcp::surface::answer(&host, &method, &params, subscribed.as_deref());
                    let reply = crate::mcp::session::passed_on(&method, reply, stateless);
                    reply_to.finish(reply, Vec::new())
                }));
            }
            Dispatch::Listen(params) => return self.listen((id, principal), params, reply_to),
            Dispatch::Call {
                request,
                stateless,
                log_level,
                progress_token,
                input,
            } => 'call: {
                let request = request.principal(principal);
                let Some(permit) = self.admission.enter(principal) else {
                    return Answer::Ready(
                        refusal(429, Some(id), TOO_MANY, &self.admission.full(principal))
                            .with("retry-after", "1"),
                    );
                };
                // Stopping (SIGTERM): the calls running finish, no new one starts.
                let shutdown = server.shutdown();
                if !shutdown.start() {
                    return Answer::Ready(refusal(
                        503,
                        Some(id),
                        SERVER_BUSY,
                        "the server is draining (stopping): nothing was run; the same call is safe to retry, on another host or once this one is back",
                    )
                    .with("retry-after", "1"));
                }
                // A call that may become a task (`mcp::tasks`) runs on to its outcome.
                if stateless && crate::mcp::tasks::applies(server, &request, params) {
                    let done = move || {
                        shutdown.finish();
                        drop(permit);
                    };
                    let (server, params) = (server.clone(), params.clone());
                    return Answer::Blocking(Box::new(move || {
                        let reply = crate::mcp::tasks::call(&server, &request, &params, done);
                        reply_to.finish(reply, Vec::new())
                    }));
                }
                // A session's client that takes a stream hears the call as it runs
                // (and is asked its tool's questions there), and may come back for
                // what it missed (`Last-Event-ID`).
                let may_hear = log_level.is_some() || progress_token.is_some();
                if let Some(found) = &found
                    && reply_kind(
                        head,
                        self.options.prefer_sse || may_hear || found.declared.elicitation,
                    ) == Some(Kind::Sse)
                {
                    let call = LiveCall {
                        id: id.clone(),
                        request,
                        heard: (log_level, progress_token),
                        permit,
                        declared: found.declared,
                        shutdown,
                    };
                    return Answer::Ready(self.stream_call(server, found, call));
                }
                // A replay answered from memory never blocks: it is answered here
                // (not for a request with a state: its check reads the journal, in
                // the blocking work, `mrtr::run`).
                if !input.as_ref().is_some_and(mrtr::Input::has_state)
                    && let Some(reply) = server.replay_from_memory(&request, stateless, true)
                {
                    shutdown.finish();
                    drop(permit);
                    break 'call reply;
                }
                // A session's client answered without a stream cannot be asked.
                let cannot_ask = found.as_ref().map(|found| {
                    CannotAsk(if found.declared.elicitation {
                        elicit::NO_STREAM
                    } else {
                        elicit::NOT_DECLARED
                    })
                });
                // The guard blocks: the call runs where it holds up no other
                // connection, and runs to its outcome even if the client hangs up
                // meanwhile (the record is kept and a retry gets the outcome). What
                // the tool says is collected, and sent as events before the answer.
                let server = server.clone();
                return Answer::Blocking(Box::new(move || {
                    let heard = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
                    let sink = std::rc::Rc::clone(&heard);
                    let run = || {
                        server.run_call_logged(
                            &request,
                            stateless,
                            true,
                            (log_level, progress_token),
                            // Bounded as a stream's queue is: past it, the
                            // last progress report replaces the one before.
                            move |note| {
                                let mut heard = sink.borrow_mut();
                                if heard.len() < crate::serving::sse::LIVE_EVENTS {
                                    heard.push(note);
                                } else if let Some(last) = heard.last_mut() {
                                    *last = note;
                                }
                            },
                        )
                    };
                    let reply = match (cannot_ask, input) {
                        (Some(asker), _) => crate::ask::with_asker(std::rc::Rc::new(asker), run),
                        // Stateless: asked through its result, answered by its retry.
                        (None, Some(input)) => mrtr::run(input, server.host(), &request, run),
                        (None, None) => run(),
                    };
                    shutdown.finish();
                    drop(permit);
                    reply_to.finish(reply, heard.take())
                }));
            }
        };
        let ok = reply.is_ok();
        let mut response = reply_to.finish(reply, Vec::new());
        if opening && ok {
            match self.sessions.open(principal, session.era(), self.now()) {
                Ok(session_id) => {
                    self.sessions
                        .set_declared(&session_id, principal, session.declared());
                    response = response.with("mcp-session-id", session_id)
                }
                Err(refused) => {
                    tracing::warn!("initialize refused: {refused}");
                    let (status, code) = match refused {
                        Refused::PrincipalFull { .. } => (429, TOO_MANY),
                        Refused::ServerFull(_) => (503, SERVER_BUSY),
                        Refused::Random => (500, ErrorCode::INTERNAL_ERROR),
                    };
                    return Answer::Ready(
                        refusal(status, Some(id), code, &refused.to_string())
                            .with("retry-after", "1"),
                    );
                }
            }
        }
        Answer::Ready(response)
    }

    /// Answers a session's call on a stream of its own, at once: a priming event
    /// (on a session at 2025-11-25 or later), then what the tool says as it says it,
    /// then the answer. The call runs on a blocking thread to its outcome whatever
    /// becomes of the stream; every event is kept in the session's record, so a
    /// client whose stream broke gets the rest with `Last-Event-ID`. Past
    /// [`super::HttpOptions::stream_hold`] the server ends the stream itself and the
    /// client comes back for the rest (SSE polling).
    fn stream_call(&self, server: &Server, found: &Found, call: LiveCall) -> Response {
        let events = Arc::clone(&found.events);
        let (stream, priming, live) = events.open();
        let primed = matches!(found.era, Era::Handshake(version) if *version >= ProtocolVersion::V_2025_11_25);
        // Without a priming event the client has no id to come back with: held.
        let hold = self.options.stream_hold.filter(|_| primed);
        if hold.is_some_and(|hold| hold.is_zero()) {
            // Before the call starts, so even an answer at once is fetched with
            // `Last-Event-ID`.
            events.detach(stream);
        }
        let server = server.clone();
        let record = Arc::clone(&events);
        let pending = Arc::clone(&found.pending);
        tokio::task::spawn_blocking(move || {
            let LiveCall {
                id,
                request,
                heard,
                permit,
                declared,
                shutdown,
            } = call;
            let notes = Arc::clone(&record);
            // The tool's questions go out on this stream, kept for `Last-Event-ID`
            // as its other events; the client POSTs its answers to the session.
            let questions = Arc::clone(&record);
            let asker = elicit::session_asker(
                (declared, id.clone()),
                pending,
                move |question| questions.append(stream, question, false),
                server.config().ask_timeout,
            );
            let reply = crate::ask::with_asker(asker, || {
                server.run_call_logged(&request, false, true, heard, move |note| {
                    notes.append(stream, &note, false)
                })
            });
            shutdown.finish();
            drop(permit);
            record.append(stream, &protocol::reply(&id, reply), true);
        });
        if let Some(hold) = hold.filter(|hold| !hold.is_zero()) {
            tokio::spawn(async move {
                tokio::time::sleep(hold).await;
                events.detach(stream);
            });
        }
        let first = if primed { priming } else { Bytes::new() };
        Response::live(first, live)
    }

    /// Opens a `subscriptions/listen` stream of `principal` (`mcp/listen.rs`; at most
    /// [`crate::mcp::listen::MAX_LISTENS`] of its at once), on a blocking thread
    /// (it subscribes upstream): its response is an event stream that lasts until
    /// the client hangs up or the server stops, and its subscriptions end with it.
    /// A client that does not take a stream is refused: there is nothing else to
    /// answer.
    fn listen(
        &self,
        (id, principal): (&RequestId, &str),
        params: Params,
        reply_to: ReplyTo,
    ) -> Answer<Response> {
        if !reply_to.takes_stream {
            return Answer::Ready(refusal(
                406,
                Some(id),
                INVALID_REQUEST,
                "subscriptions/listen answers with a stream: accept text/event-stream",
            ));
        }
        // Given back with the stream, as its entry is.
        let Some(place) = self.listen_cap.enter(principal) else {
            return Answer::Ready(refusal(
                429,
                Some(id),
                TOO_MANY,
                &crate::mcp::listen::too_many_listens(),
            ));
        };
        let number = self
            .next_listen
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // The entry is closed when `opened` is dropped: with the stream's body when
        // the client hangs up, or here when the listen is refused.
        let (live, opened) = self.listens.open_held(&format!("listen-{number}"));
        let (listens, server, id) = (Arc::clone(&self.listens), self.server.clone(), id.clone());
        Answer::Blocking(Box::new(move || {
            let name = opened.name().to_owned();
            let sink: crate::mcp::listen::Sink =
                Arc::new(move |note: &Value| listens.send_to(&name, note));
            let host = Arc::clone(server.host());
            match crate::mcp::listen::open(
                (&host, server.relay(), &server.catalog()),
                &id,
                &params,
                sink,
            ) {
                Ok(listening) => {
                    Response::live(Bytes::new(), live).holding(Box::new((listening, opened, place)))
                }
                Err(refused) => reply_to.finish(Err(refused), Vec::new()),
            }
        }))
    }

    /// Opens the stream of the server's own messages to a session (GET): the
    /// response lasts until the session ends, the server stops or the client hangs
    /// up. Without a session there is no stream (`405`).
    pub(super) fn open_stream(
        &self,
        head: &Head,
        principal: &str,
    ) -> Result<hyper::Response<crate::serving::wire::Payload>, Response> {
        let accept = head.header("accept").unwrap_or("").to_ascii_lowercase();
        if !accept.contains("text/event-stream") {
            return Err(refusal(
                406,
                None,
                INVALID_REQUEST,
                "GET /mcp is a text/event-stream: accept it",
            ));
        }
        let Some(id) = head.header("mcp-session-id") else {
            return Err(refusal(
                405,
                None,
                INVALID_REQUEST,
                "only a session has a stream of the server's messages: initialize, then GET with its Mcp-Session-Id",
            )
            .with("allow", "GET, POST, DELETE"));
        };
        let Some(found) = self.sessions.lookup(id, principal, self.now()) else {
            return Err(refusal(
                404,
                None,
                INVALID_REQUEST,
                "no such session (it ended or was never opened): initialize again",
            ));
        };
        if let Some(last) = head.header("last-event-id") {
            // The rest of one of the session's POST streams, not its own stream.
            return match found.events.resume(last) {
                Ok((replay, live)) => {
                    tracing::debug!("a session resumed a stream after {last}");
                    let live = live.unwrap_or_else(|| live_channel().1);
                    Ok(crate::serving::wire::event_stream(replay, live))
                }
                Err(refused) => {
                    tracing::info!("{refused}");
                    Err(refusal(
                        refused.status(),
                        None,
                        INVALID_REQUEST,
                        &refused.to_string(),
                    ))
                }
            };
        }
        let events = self.streams.open(id);
        tracing::debug!("a session opened its stream of the server's messages");
        Ok(crate::serving::wire::event_stream(
            bytes::Bytes::from_static(b": justonce: notifications follow\n\n"),
            events,
        ))
    }

    /// Ends a session (DELETE), and its stream.
    pub(super) fn delete(&self, head: &Head, principal: &str) -> Response {
        match head.header("mcp-session-id") {
            None => refusal(
                400,
                None,
                INVALID_REQUEST,
                "DELETE needs an Mcp-Session-Id header",
            ),
            Some(id) => match self.sessions.close(id, principal) {
                Some(subscribed) => {
                    self.streams.close(id);
                    // Unsubscribing waits for upstreams: off this thread.
                    let host = Arc::clone(self.server.host());
                    let _ = std::thread::Builder::new()
                        .name("justonce-mcp-unsubscribe".into())
                        .spawn(move || subscribed.end(&host));
                    Response::empty(204)
                }
                None => refusal(404, None, INVALID_REQUEST, "no such session"),
            },
        }
    }
}

/// JSON for a client that accepts it (or says nothing), else an SSE stream; with
/// `prefer_sse`, a stream whenever the client accepts one. `None` if it accepts
/// neither.
fn reply_kind(head: &Head, prefer_sse: bool) -> Option<Kind> {
    let accept = head.header("accept").unwrap_or("").to_ascii_lowercase();
    let json = accept.is_empty()
        || accept.contains("application/json")
        || accept.contains("application/*")
        || accept.contains("*/*");
    let sse = accept.contains("text/event-stream");
    match (json, sse) {
        (_, true) if prefer_sse || !json => Some(Kind::Sse),
        (true, _) => Some(Kind::Json),
        (false, false) => None,
        (false, true) => Some(Kind::Sse),
    }
}

/// The HTTP status of a 2026-07-28 error response.
fn status_of(code: ErrorCode) -> u16 {
    match code {
        ErrorCode::PARSE_ERROR
        | ErrorCode::INVALID_REQUEST
        | ErrorCode::INVALID_PARAMS
        | ErrorCode::HEADER_MISMATCH
        | ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
        | MISSING_CAPABILITY => 400,
        ErrorCode::METHOD_NOT_FOUND => 404,
        // A task's run refused past its principal's cap (`tasks/update`), as a call.
        TOO_MANY => 429,
        _ => 200,
    }
}

/// Why a 2026-07-28 request's routing headers disagree with its body, if they do:
/// `MCP-Protocol-Version` is the envelope's version, `Mcp-Method` the method, and
/// `Mcp-Name` a `tools/call`'s tool (plain or `=?base64?…?=`).
fn routing_mismatch(head: &Head, method: &str, params: &Params) -> Option<String> {
    let envelope = params
        .get("_meta")
        .and_then(|m| m.get(PROTOCOL_VERSION_META_KEY))
        .and_then(Value::as_str);
    if head.header("mcp-protocol-version") != envelope || envelope.is_none() {
        return Some("the MCP-Protocol-Version header does not match the request envelope's protocol version".into());
    }
    if head.header("mcp-method") != Some(method) {
        return Some("the Mcp-Method header does not match the request body's method".into());
    }
    if method == "tools/call"
        && let Some(name) = params.get("name").and_then(Value::as_str)
        && head
            .header("mcp-name")
            .and_then(decode_header_value)
            .as_deref()
            != Some(name)
    {
        return Some("the Mcp-Name header does not match the request body's \"name\"".into());
    }
    // The Tasks extension routes its methods by task id (SEP-2663).
    if matches!(method, "tasks/get" | "tasks/update" | "tasks/cancel")
        && let Some(task) = params.get("taskId").and_then(Value::as_str)
        && head
            .header("mcp-name")
            .and_then(decode_header_value)
            .as_deref()
            != Some(task)
    {
        return Some("the Mcp-Name header does not match the request body's \"taskId\"".into());
    }
    None
}

/// The conversation and key a request's headers name ([`CONVERSATION_HEADER`],
/// [`IDEMPOTENCY_KEY_HEADER`]), or why one cannot be read. The key is the IETF
/// draft's structured-field string (`"…"`, with `\\` and `\"` escapes) or, as Stripe
/// and most clients send it, the bare value.
fn scope_headers(head: &Head) -> Result<FromHeaders, String> {
    let conversation = match head.header(&CONVERSATION_HEADER.to_ascii_lowercase()) {
        None => None,
        Some(value) => match decode_header_value(value.trim()) {
            Some(conversation) if !conversation.is_empty() => Some(conversation),
            _ => {
                return Err(format!(
                    "the {CONVERSATION_HEADER} header must be a non-empty conversation id (or =?base64?…?= of one)"
                ));
            }
        },
    };
    let key = match head.header(&IDEMPOTENCY_KEY_HEADER.to_ascii_lowercase()) {
        None => None,
        Some(value) => Some(unquote(value.trim()).filter(|k| !k.is_empty()).ok_or_else(|| {
            format!("the {IDEMPOTENCY_KEY_HEADER} header must be a non-empty key, bare or as a quoted string")
        })?),
    };
    Ok(FromHeaders { conversation, key })
}

/// An RFC 8941 string (`"…"`) unquoted, or a bare value as it is; `None` for a
/// quoted string that is malformed.
fn unquote(value: &str) -> Option<String> {
    let Some(inner) = value.strip_prefix('"') else {
        return Some(value.to_owned());
    };
    let inner = inner.strip_suffix('"')?;
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next()? {
                escaped @ ('"' | '\\') => out.push(escaped),
                _ => return None,
            },
            '"' => return None,
            c => out.push(c),
        }
    }
    Some(out)
}

/// A header value as sent: verbatim, or `=?base64?…?=` for text that is not plain
/// ASCII. A malformed encoding decodes to nothing, so it never matches.
fn decode_header_value(value: &str) -> Option<String> {
    use base64::Engine as _;
    match value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    {
        None => Some(value.to_owned()),
        Some(payload) => base64::engine::general_purpose::STANDARD
            .decode(payload)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_unless_the_client_takes_only_a_stream_or_the_server_prefers_one() {
        let both = Head::with_headers(&[("accept", "application/json, text/event-stream")]);
        assert_eq!(reply_kind(&both, false), Some(Kind::Json));
        assert_eq!(reply_kind(&both, true), Some(Kind::Sse));
        assert_eq!(
            reply_kind(
                &Head::with_headers(&[("accept", "text/event-stream")]),
                false
            ),
            Some(Kind::Sse)
        );
        assert_eq!(reply_kind(&Head::with_headers(&[]), true), Some(Kind::Json));
        assert_eq!(
            reply_kind(&Head::with_headers(&[("accept", "text/html")]), false),
            None
        );
    }

    #[test]
    fn the_servers_own_refusals_have_the_shape_of_the_endpoints() {
        for (status, message) in [(401, "a bearer token is required"), (408, "late")] {
            let endpoints = refusal(status, None, INVALID_REQUEST, message);
            let servers = Response::refusal(status, message);
            assert_eq!(servers.status, endpoints.status);
            assert_eq!(servers.body, endpoints.body);
        }
    }

    #[test]
    fn the_scope_headers_are_read_and_a_malformed_one_is_refused() {
        let head = Head::with_headers(&[
            ("justonce-conversation", "=?base64?w6ljaG8=?="),
            ("idempotency-key", "\"k-\\\"1\\\"\""),
        ]);
        assert_eq!(
            scope_headers(&head).unwrap(),
            FromHeaders {
                conversation: Some("écho".into()),
                key: Some("k-\"1\"".into())
            }
        );
        let bare = Head::with_headers(&[("idempotency-key", "refund-4417")]);
        assert_eq!(
            scope_headers(&bare).unwrap().key.as_deref(),
            Some("refund-4417")
        );
        assert_eq!(
            scope_headers(&Head::with_headers(&[])).unwrap(),
            FromHeaders::default()
        );
        for (name, value) in [
            ("idempotency-key", "\"open"),
            ("idempotency-key", "\"\""),
            ("justonce-conversation", ""),
            ("justonce-conversation", "=?base64?***?="),
        ] {
            let why = scope_headers(&Head::with_headers(&[(name, value)])).unwrap_err();
            assert!(why.contains("header"), "{why}");
        }
    }

    #[test]
    fn routing_headers_must_repeat_the_body() {
        let params: Params = json!({
            "name": "écho",
            "_meta": { PROTOCOL_VERSION_META_KEY: "2026-07-28" },
        })
        .as_object()
        .unwrap()
        .clone();
        let good = Head::with_headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "=?base64?w6ljaG8=?="),
        ]);
        assert_eq!(routing_mismatch(&good, "tools/call", &params), None);
        let wrong_name = Head::with_headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "other"),
        ]);
        assert!(routing_mismatch(&wrong_name, "tools/call", &params).is_some());
        let no_version = Head::with_headers(&[("mcp-method", "tools/call"), ("mcp-name", "écho")]);
        assert!(routing_mismatch(&no_version, "tools/call", &params).is_some());
        assert!(routing_mismatch(&good, "tools/list", &params).is_some());
    }
}
