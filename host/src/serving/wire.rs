//! What an endpoint (the MCP exchange, the console, `/metrics`) sees of HTTP: a
//! request head (from hyper's parsed request), and a response to send as JSON, as an
//! SSE stream, as text, or empty.
//!
//! hyper does the HTTP/1.1 itself: parsing, `Content-Length` and chunked framing,
//! keep-alive, `Expect: 100-continue`, and the caps on head size and header count.

use std::borrow::Cow;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use std::sync::Arc;

use crate::serving::sse::LiveEvents;
use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};

use super::deadline::Phase;

/// A request head.
#[derive(Debug)]
pub(crate) struct Head {
    /// `GET`, `POST`, …
    pub method: String,
    /// The request target.
    pub path: String,
    /// Header names (lowercase) and values, in order.
    pub headers: Vec<(String, String)>,
}

impl Head {
    /// The head of a request hyper parsed.
    pub fn of<B>(request: &hyper::Request<B>) -> Self {
        Self {
            method: request.method().as_str().to_owned(),
            path: request.uri().path_and_query().map_or_else(
                || request.uri().path().to_owned(),
                |p| p.as_str().to_owned(),
            ),
            headers: request
                .headers()
                .iter()
                .map(|(n, v)| {
                    (
                        n.as_str().to_owned(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect(),
        }
    }

    /// A POST to `/mcp` with `headers` (lowercase names), for tests.
    #[cfg(test)]
    pub fn with_headers(headers: &[(&str, &str)]) -> Self {
        Self {
            method: "POST".into(),
            path: "/mcp".into(),
            headers: headers
                .iter()
                .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    /// The first value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// How many times header `name` (lowercase) occurs.
    pub fn count(&self, name: &str) -> usize {
        self.headers.iter().filter(|(n, _)| n == name).count()
    }
}

/// How a response's body goes out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `application/json` with a length.
    Json,
    /// One `message` event of `text/event-stream`, chunked: the stream ends with the
    /// response and the connection stays usable.
    Sse,
    /// Text of this content type, with a length (`/metrics`).
    Text(&'static str),
    /// No body.
    Empty,
    /// A body of its own type (named in the headers), with a length.
    Plain,
}

/// A response to send.
#[derive(Debug)]
pub(crate) struct Response {
    /// The status code.
    pub status: u16,
    /// Extra headers (lowercase names).
    pub headers: Vec<(Cow<'static, str>, String)>,
    /// How the body goes out.
    pub kind: Kind,
    /// The JSON of the body, if any.
    pub body: Vec<u8>,
    /// Messages sent as events before the body's, on a stream (the call's log
    /// lines).
    pub notes: Vec<serde_json::Value>,
    /// A stream whose events come as a call runs: `body` holds its first bytes.
    pub live: Option<Box<Live>>,
}

/// What a response's body keeps until it is dropped.
pub(crate) type Held = Box<dyn std::any::Any + Send + Sync>;

/// A response's stream of events.
#[derive(Debug)]
pub(crate) struct Live {
    /// Its events, as they come.
    events: LiveEvents,
    /// Kept as long as the body is sent, dropped when it ends (its client hung up,
    /// or `events` ended): what a stream holds open for its client.
    held: Option<Held>,
}

/// JSON-RPC's "Invalid Request" code, which every refusal of the server carries.
const INVALID_REQUEST: i64 = -32600;

impl Response {
    /// A refusal with the body `/mcp`'s refusals have (a JSON-RPC error without an
    /// id), so a client reads one shape of error from the server whichever path it
    /// asked.
    pub fn refusal(status: u16, message: &str) -> Self {
        let body = serde_json::json!({
            "jsonrpc": "2.0",
            "id": null,
            "error": { "code": INVALID_REQUEST, "message": message },
        });
        Self::message(status, Kind::Json, &body)
    }

    /// A status with no body.
    pub fn empty(status: u16) -> Self {
        Self {
            status,
            headers: Vec::new(),
            kind: Kind::Empty,
            body: Vec::new(),
            notes: Vec::new(),
            live: None,
        }
    }

    /// A status with a JSON body, sent as `kind` (JSON or SSE).
    pub fn message(status: u16, kind: Kind, body: &serde_json::Value) -> Self {
        Self {
            status,
            headers: Vec::new(),
            kind,
            body: body.to_string().into_bytes(),
            notes: Vec::new(),
            live: None,
        }
    }

    /// A `200` event stream: `first`, then the events `live` carries until it ends.
    pub fn live(first: Bytes, live: LiveEvents) -> Self {
        Self {
            status: 200,
            headers: Vec::new(),
            kind: Kind::Sse,
            body: first.to_vec(),
            notes: Vec::new(),
            live: Some(Box::new(Live {
                events: live,
                held: None,
            })),
        }
    }

    /// A status with a body of `content_type` (none when empty: the headers name it).
    pub fn plain(status: u16, content_type: &'static str, body: Vec<u8>) -> Self {
        let mut headers = Vec::new();
        if !content_type.is_empty() {
            headers.push((Cow::Borrowed("content-type"), content_type.to_owned()));
        }
        Self {
            status,
            headers,
            kind: Kind::Plain,
            body,
            notes: Vec::new(),
            live: None,
        }
    }

    /// Keeps `held` until the body of this stream ([`Response::live`]) is dropped.
    pub fn holding(mut self, held: Held) -> Self {
        if let Some(live) = &mut self.live {
            live.held = Some(held);
        }
        self
    }

    /// Adds a header.
    pub fn with(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((Cow::Borrowed(name), value.into()));
        self
    }

    /// The bytes of this response on a connection that closes after it, for the
    /// few answers written before hyper has the connection (503) or after it gave
    /// up on it (408).
    pub fn to_closing_bytes(&self) -> Vec<u8> {
        let reason = hyper::StatusCode::from_u16(self.status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("");
        let mut out = format!("HTTP/1.1 {} {reason}\r\n", self.status);
        for (name, value) in &self.headers {
            out.push_str(&format!("{name}: {value}\r\n"));
        }
        if self.kind == Kind::Json {
            out.push_str("content-type: application/json\r\n");
        }
        out.push_str(&format!(
            "content-length: {}\r\nconnection: close\r\n\r\n",
            self.body.len()
        ));
        let mut bytes = out.into_bytes();
        bytes.extend_from_slice(&self.body);
        bytes
    }

    /// This response for hyper; with `close`, the connection closes after it.
    pub fn into_hyper(self, close: bool) -> hyper::Response<Payload> {
        let mut builder = hyper::Response::builder().status(self.status);
        for (name, value) in &self.headers {
            builder = builder.header(name.as_ref(), value.as_str());
        }
        if close {
            builder = builder.header("connection", "close");
        }
        let payload = match self.kind {
            Kind::Empty => Payload::sized(Bytes::new()),
            Kind::Plain => Payload::sized(Bytes::from(self.body)),
            Kind::Json => {
                builder = builder.header("content-type", "application/json");
                Payload::sized(Bytes::from(self.body))
            }
            Kind::Text(content_type) => {
                builder = builder.header("content-type", content_type);
                Payload::sized(Bytes::from(self.body))
            }
            Kind::Sse => {
                builder = builder
                    .header("content-type", "text/event-stream")
                    .header("cache-control", "no-store");
                if let Some(live) = self.live {
                    let mut payload = Payload::events(Bytes::from(self.body), live.events);
                    payload.held = live.held;
                    return builder.body(payload).unwrap_or_else(|e| failed(&e));
                }
                let mut events = Vec::new();
                for note in &self.notes {
                    events.extend_from_slice(b"event: message\ndata: ");
                    events.extend_from_slice(note.to_string().as_bytes());
                    events.extend_from_slice(b"\n\n");
                }
                events.extend_from_slice(b"event: message\ndata: ");
                events.extend_from_slice(&self.body);
                events.extend_from_slice(b"\n\n");
                Payload::streamed(Bytes::from(events))
            }
        };
        builder.body(payload).unwrap_or_else(|e| failed(&e))
    }
}

/// A 500 for a response that could not be built.
fn failed(e: &hyper::http::Error) -> hyper::Response<Payload> {
    tracing::error!("building a response: {e}");
    let mut fallback = hyper::Response::new(Payload::sized(Bytes::new()));
    *fallback.status_mut() = hyper::StatusCode::INTERNAL_SERVER_ERROR;
    fallback
}

/// A response body of one piece: with its length, or (an SSE stream) chunked; or a
/// session's standalone stream, whose events come as the server sends them.
#[derive(Debug)]
pub(crate) struct Payload {
    data: Option<Bytes>,
    sized: bool,
    events: Option<LiveEvents>,
    /// Told when the body is done (dropped): the connection's request is over.
    on_end: Option<Arc<Phase>>,
    /// Dropped with the body ([`Response::holding`]).
    held: Option<Held>,
}

impl Payload {
    fn sized(data: Bytes) -> Self {
        Self {
            data: Some(data),
            sized: true,
            events: None,
            on_end: None,
            held: None,
        }
    }

    fn streamed(data: Bytes) -> Self {
        Self {
            data: Some(data),
            sized: false,
            events: None,
            on_end: None,
            held: None,
        }
    }

    /// `first`, then every event `events` carries, until it ends.
    pub fn events(first: Bytes, events: LiveEvents) -> Self {
        Self {
            data: Some(first),
            sized: false,
            events: Some(events),
            on_end: None,
            held: None,
        }
    }

    /// Whether this is a session's standalone stream (it lasts past its response).
    pub fn is_event_stream(&self) -> bool {
        self.events.is_some()
    }

    /// Tells `phase` the request is over when this body is done, not when its
    /// response began.
    pub fn end_with(&mut self, phase: Arc<Phase>) {
        self.on_end = Some(phase);
    }
}

impl Drop for Payload {
    fn drop(&mut self) {
        if let Some(phase) = self.on_end.take() {
            phase.request_ended();
        }
    }
}

/// A session's standalone stream as a response.
pub(crate) fn event_stream(first: Bytes, events: LiveEvents) -> hyper::Response<Payload> {
    let mut response = hyper::Response::new(Payload::events(first, events));
    let headers = response.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(
        hyper::header::CACHE_CONTROL,
        hyper::header::HeaderValue::from_static("no-store"),
    );
    response
}

impl Body for Payload {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(data) = self.data.take().filter(|d| !d.is_empty()) {
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        match &mut self.events {
            None => Poll::Ready(None),
            Some(events) => events
                .poll_recv(cx)
                .map(|event| event.map(|e| Ok(Frame::data(e)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.sized && self.data.as_ref().is_none_or(Bytes::is_empty) && self.events.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        match (&self.data, self.sized) {
            (Some(d), true) => SizeHint::with_exact(d.len() as u64),
            (None, true) => SizeHint::with_exact(0),
            (_, false) => SizeHint::default(),
        }
    }
}
