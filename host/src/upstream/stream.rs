//! The `GET` stream of a Streamable HTTP upstream's session: what the server says
//! outside its answers' streams. Its `notifications/tools/list_changed` is told to the upstream
//! (its tools are listed again), a request of the server's (`roots/list`,
//! `sampling/createMessage`: it names no call) goes to the one call of the session
//! in flight whose client answers them, as over stdio, and is refused when there
//! is none or several (`ping` is answered), and a stream that ends is
//! opened again at once: a server that then no longer knows the session (HTTP 404)
//! or no longer answers has ended it, and the upstream's supervisor starts anew.
//! A server that offers no stream (HTTP 405) is heard only in its answers.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;
use ureq::Agent;
use ureq::http::Request;

use super::client::{Heard, ListChanged, is_surface_news};
use super::credentials::Credentials;
use super::log_field::field;
use super::sse::{Events, MAX_EVENT_BYTES};

/// How long the `DELETE` that ends a session at the server may take.
pub(super) const DELETE_TIMEOUT: Duration = Duration::from_secs(2);

/// How long an answer to a request of the server's may take.
const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// The most times in a row a stream that closed without saying anything is opened
/// again: a server that closes each one at once is not asked forever.
const MAX_EMPTY_REOPENS: u32 = 3;

/// Called (on the thread of its `GET` stream) when its session ended: why.
pub(crate) type SessionEnded = Arc<dyn Fn(&str) + Send + Sync>;

/// Hands a request of the server's (its method, the message) to the one call of
/// the session in flight that answers such requests; `Err` with the reply to POST
/// when there is none (or several, or it is a `ping`).
pub(super) type ToTheCall = Arc<dyn Fn(&str, Value) -> Result<(), Value> + Send + Sync>;

/// What an HTTP client tells its upstream's owner.
#[derive(Clone)]
pub(crate) struct HttpHooks {
    /// It said its tools changed, or a new session started (they may have).
    pub(crate) changed: ListChanged,
    /// It said its resources or prompts changed, or a resource was updated.
    pub(crate) heard: Heard,
    /// Its session ended, as its `GET` stream found.
    pub(crate) ended: SessionEnded,
}

/// `builder` with what every request of a session carries: its id, the revision,
/// the configured headers.
pub(super) fn with_session(
    mut builder: ureq::http::request::Builder,
    session: Option<&str>,
    protocol: Option<&str>,
    headers: &[(String, String)],
) -> ureq::http::request::Builder {
    if let Some(session) = session {
        builder = builder.header("Mcp-Session-Id", session);
    }
    if let Some(version) = protocol {
        builder = builder.header("MCP-Protocol-Version", version);
    }
    for (name, value) in headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    builder
}

/// One session's `GET` stream, read on a thread of its own.
pub(super) struct Stream {
    pub(super) upstream: String,
    pub(super) url: String,
    pub(super) headers: Vec<(String, String)>,
    pub(super) agent: Agent,
    pub(super) session: Option<String>,
    pub(super) protocol: Option<String>,
    /// Stripped from everything it says before anything reads it.
    pub(super) credentials: Credentials,
    /// The session's OAuth access tokens (the one held is sent), if it has `oauth`.
    pub(super) bearer: Option<Arc<super::oauth::Bearer>>,
    pub(super) hooks: HttpHooks,
    /// Where a request of the server's goes.
    pub(super) to_the_call: ToTheCall,
    /// Set when the session is replaced or its client dropped.
    pub(super) stop: Arc<AtomicBool>,
    /// The client's: cleared when the stream finds the session ended.
    pub(super) alive: Arc<AtomicBool>,
}

/// What opening the stream got.
enum Opened {
    /// The stream, to read.
    Stream(ureq::Body),
    /// HTTP 405: the server offers none.
    NotOffered,
    /// The session is gone (HTTP 404), or the server no longer answers: why.
    Ended(String),
    /// Something else (another status): why no stream is read.
    Refused(String),
}

/// Reads `stream` on a thread of its own, until it is stopped or the session ends.
pub(super) fn spawn(stream: Stream) {
    let name = format!("upstream-{}-stream", stream.upstream);
    if let Err(e) = std::thread::Builder::new()
        .name(name)
        .spawn(move || stream.run())
    {
        tracing::warn!(target: "justonce::upstream", "cannot read an upstream's stream: {e}");
    }
}

impl Stream {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    fn run(self) {
        let mut empty = 0u32;
        while !self.stopped() {
            match self.open() {
                Opened::Stream(body) => {
                    if self.read(body) {
                        empty = 0;
                    } else {
                        empty += 1;
                        if empty > MAX_EMPTY_REOPENS {
                            tracing::warn!(target: "justonce::upstream", upstream = %self.upstream, "its stream closed {empty} times in a row without a message; it is not opened again (its tools are listed again when its session starts again)");
                            return;
                        }
                    }
                }
                Opened::NotOffered => return,
                Opened::Ended(why) => {
                    if !self.stopped() {
                        self.alive.store(false, Ordering::SeqCst);
                        (self.hooks.ended)(&why);
                    }
                    return;
                }
                Opened::Refused(why) => {
                    if !self.stopped() {
                        tracing::warn!(target: "justonce::upstream", upstream = %self.upstream, "its stream was not opened: {}; what it says between requests is not heard", field(&why));
                    }
                    return;
                }
            }
        }
    }

    /// `builder` with the access token the session holds now, if it has one.
    fn bearing(&self, builder: ureq::http::request::Builder) -> ureq::http::request::Builder {
        match self.bearer.as_ref().and_then(|b| b.held()) {
            Some(token) => builder.header("Authorization", format!("Bearer {token}")),
            None => builder,
        }
    }

    /// `GET` with the session's headers.
    fn open(&self) -> Opened {
        let request = with_session(
            Request::builder()
                .method("GET")
                .uri(self.url.as_str())
                .header("Accept", "text/event-stream"),
            self.session.as_deref(),
            self.protocol.as_deref(),
            &self.headers,
        );
        let request = self.bearing(request).body(());
        let request = match request {
            Ok(request) => request,
            Err(e) => return Opened::Refused(e.to_string()),
        };
        let request = self
            .agent
            .configure_request(request)
            .timeout_global(None)
            .build();
        let response = match self.agent.run(request) {
            Ok(response) => response,
            Err(e) => {
                let why = self.credentials.text(format!(
                    "its stream broke and the server did not answer again ({e})"
                ));
                return Opened::Ended(why);
            }
        };
        let status = response.status().as_u16();
        let streamed = response
            .headers()
            .get("content-type")
            .is_some_and(|t| t.as_bytes().starts_with(b"text/event-stream"));
        match status {
            200..=299 if streamed => Opened::Stream(response.into_body()),
            405 => Opened::NotOffered,
            404 if self.session.is_some() => {
                Opened::Ended("the server ended its session (HTTP 404 on its stream)".into())
            }
            _ => Opened::Refused(format!("HTTP {status}")),
        }
    }

    /// Reads events until the stream ends or the client stops it; whether it said
    /// anything.
    fn read(&self, body: ureq::Body) -> bool {
        let mut reader = std::io::BufReader::new(body.into_reader());
        let mut events = Events::new(&self.upstream, "GET stream", MAX_EVENT_BYTES);
        let mut said = false;
        while let Some(event) = events.next(&mut reader) {
            if self.stopped() {
                return said;
            }
            let event = match event {
                Ok(event) => event,
                Err(oversized) => {
                    tracing::warn!(target: "justonce::upstream", upstream = %self.upstream, "{}", field(&oversized.to_string()));
                    continue;
                }
            };
            let Ok(mut message) = serde_json::from_str::<Value>(&event) else {
                continue;
            };
            said = true;
            self.credentials.json(&mut message);
            self.hear(message);
        }
        said
    }

    /// One message of the server's.
    fn hear(&self, message: Value) {
        let method = message.get("method").and_then(Value::as_str);
        match (method, message.get("id")) {
            (Some("notifications/tools/list_changed"), None) => (self.hooks.changed)(),
            (Some(method), None) if is_surface_news(method) => (self.hooks.heard)(&message),
            (Some("notifications/message"), None) => {
                super::log_messages::to_log(&self.upstream, &message);
            }
            (Some(method), Some(_)) => {
                let method = method.to_owned();
                if let Err(reply) = (self.to_the_call)(&method, message) {
                    self.reply(&reply);
                }
            }
            _ => {}
        }
    }

    /// POSTs `reply` (to a request of the server's) on the session.
    fn reply(&self, reply: &Value) {
        let body = reply.to_string();
        let request = with_session(
            Request::builder()
                .method("POST")
                .uri(self.url.as_str())
                .header("Content-Type", "application/json")
                .header("Accept", "application/json, text/event-stream"),
            self.session.as_deref(),
            self.protocol.as_deref(),
            &self.headers,
        );
        let request = self.bearing(request).body(body.as_bytes());
        if let Ok(request) = request {
            let request = self
                .agent
                .configure_request(request)
                .timeout_global(Some(REPLY_TIMEOUT))
                .build();
            let _ = self.agent.run(request);
        }
    }
}
