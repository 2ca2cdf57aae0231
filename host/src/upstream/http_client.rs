//! A blocking MCP client over Streamable HTTP: each request one `POST` of a JSON-RPC
//! message, answered as JSON or as a Server-Sent Events stream that carries the
//! response; the session the server names at `initialize` (`Mcp-Session-Id`) and the
//! negotiated revision (`MCP-Protocol-Version`) sent with every later request, the
//! configured headers (credentials from the secrets file) with each, and a
//! `tools/call`'s effect key as `Idempotency-Key` too.
//!
//! A request answered HTTP 404 for its session was not processed (the server ended
//! or forgot the session, MCP's Streamable HTTP transport): a new session is
//! started (`initialize`, without the old id) and the request sent once more on it,
//! even a `tools/call` that is not safe to repeat, since the first was not
//! performed. Where the server offers one, a `GET` stream (`stream`) hears what it
//! says between requests: `notifications/tools/list_changed`, and the end of its
//! session.

use std::io::{BufRead, BufReader, Read};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use ureq::Agent;
use ureq::http::Request;

use super::client::{ClientError, initialize_params};
use super::credentials::Credentials;
use super::stream::{self, HttpHooks, Stream, with_session};
use crate::provider::ClientRequests;
use crate::runtime::log_listener;

/// The largest response read from an upstream.
const MAX_RESPONSE_BYTES: u64 = 16 << 20;

/// What a `POST` got.
enum Posted {
    /// An answer (the response to the request, when one was awaited).
    Answer(Option<Value>),
    /// HTTP 404 for the session it carried: not processed; the session sent.
    SessionLost(String),
}

/// One session with one Streamable HTTP upstream.
pub(crate) struct HttpClient {
    upstream: String,
    url: String,
    headers: Vec<(String, String)>,
    agent: Agent,
    session: Mutex<Option<String>>,
    protocol: Mutex<Option<String>>,
    next_id: AtomicU64,
    /// Cleared when the server forgot the session and a new one did not start, or
    /// refused its credentials (401, 403): its supervisor starts anew, with the
    /// configuration read again.
    alive: Arc<AtomicBool>,
    /// The credentials filled into `headers` (and the secrets file's), stripped
    /// from every answer and every error's text.
    credentials: Credentials,
    /// Held while a new session starts after the server forgot one: one at a time.
    renewing: Mutex<()>,
    /// Told of its tools changing and its session ending (none: no `GET` stream).
    hooks: Option<HttpHooks>,
    /// Set to stop the `GET` stream of the session now.
    stream_stop: Mutex<Option<Arc<AtomicBool>>>,
}

impl HttpClient {
    /// A client of the server at `url`, sending `headers` with every request.
    pub(crate) fn new(upstream: &str, url: &str, headers: Vec<(String, String)>) -> Self {
        let config = Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .max_redirects_will_error(false)
            .user_agent(concat!("justonce/", env!("CARGO_PKG_VERSION")))
            .build();
        Self {
            upstream: upstream.to_owned(),
            url: url.to_owned(),
            headers,
            agent: Agent::new_with_config(config),
            session: Mutex::new(None),
            protocol: Mutex::new(None),
            next_id: AtomicU64::new(1),
            alive: Arc::new(AtomicBool::new(true)),
            credentials: Credentials::default(),
            renewing: Mutex::new(()),
            hooks: None,
            stream_stop: Mutex::new(None),
        }
    }

    /// Tells `hooks` when it says its tools changed and when its session ends, as
    /// heard on a `GET` stream opened after each `initialize`.
    pub(crate) fn hooked(mut self, hooks: HttpHooks) -> Self {
        self.hooks = Some(hooks);
        self
    }

    /// The session now.
    fn session(&self) -> Option<String> {
        self.session
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Strips `credentials` (those filled into its headers) from every answer it
    /// reads and the text of every error it reports, as the `http` provider does
    /// from what it saves.
    pub(crate) fn stripping(mut self, credentials: Credentials) -> Self {
        self.credentials = credentials;
        self
    }

    /// `text` (an error's, holding a body read up to a cap) without the
    /// credentials it was sent.
    fn stripped(&self, text: String) -> String {
        self.credentials.text_maybe_cut(text)
    }

    /// Whether the session still stands.
    pub(crate) fn alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }

    /// `initialize` (keeping the session and revision it answers) and
    /// `notifications/initialized`, a new session (no session id is sent); then its
    /// `GET` stream is opened, when it has hooks.
    pub(crate) fn initialize(&self, timeout: Duration) -> Result<Value, ClientError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let message = json!({ "jsonrpc": "2.0", "id": id, "method": "initialize", "params": initialize_params() });
        let answer = match self.post(&message, timeout, None, Some((id, None, None)), true)? {
            Posted::Answer(Some(answer)) => answer,
            Posted::Answer(None) | Posted::SessionLost(_) => {
                return Err(ClientError::Lost(format!(
                    "upstream `{}` answered initialize without a response",
                    self.upstream
                )));
            }
        };
        let result = super::client::answer_of(&self.upstream, "initialize", answer)?;
        if let Some(version) = result.get("protocolVersion").and_then(Value::as_str) {
            *self.protocol.lock().unwrap_or_else(|p| p.into_inner()) = Some(version.to_owned());
        }
        let initialized = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
        if let Posted::SessionLost(_) = self.post(&initialized, timeout, None, None, false)? {
            return Err(ClientError::NotSent(format!(
                "upstream `{}` forgot the session it had just started (HTTP 404)",
                self.upstream
            )));
        }
        self.open_stream();
        Ok(result)
    }

    /// Opens the `GET` stream of the session now (the one before it is stopped),
    /// when it has hooks to tell what it hears.
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
        stream::spawn(Stream {
            upstream: self.upstream.clone(),
            url: self.url.clone(),
            headers: self.headers.clone(),
            agent: self.agent.clone(),
            session: self.session(),
            protocol: self
                .protocol
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
            credentials: self.credentials.clone(),
            hooks,
            stop,
            alive: Arc::clone(&self.alive),
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
                tracing::info!(target: "justonce::upstream", upstream = %self.upstream, "the server forgot its session (HTTP 404); a new one started");
                if let Some(hooks) = &self.hooks {
                    (hooks.changed)();
                }
                Ok(())
            }
            Err(e) => {
                self.alive.store(false, Ordering::SeqCst);
                Err(match e {
                    ClientError::Misconfigured(reason) => ClientError::Misconfigured(reason),
                    e => ClientError::NotSent(format!(
                        "upstream `{}` forgot its session (HTTP 404) and a new one did not start: {e}",
                        self.upstream
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
        let mut posted = self.post(&message, timeout, key, Some((id, progress_of, asks)), false)?;
        if let Posted::SessionLost(lost) = posted {
            // Not processed (the transport's rule for a 404 to a session's request):
            // sent again, once, on a new session.
            self.renew(&lost, timeout)?;
            posted = self.post(&message, timeout, key, Some((id, progress_of, asks)), false)?;
        }
        let answer = match posted {
            Posted::Answer(Some(answer)) => answer,
            Posted::Answer(None) => {
                return Err(ClientError::Lost(format!(
                    "upstream `{}` answered {method} without a response",
                    self.upstream
                )));
            }
            Posted::SessionLost(_) => {
                self.alive.store(false, Ordering::SeqCst);
                return Err(ClientError::NotSent(format!(
                    "upstream `{}` forgot the new session too (HTTP 404); it is started again",
                    self.upstream
                )));
            }
        };
        super::client::answer_of(&self.upstream, method, answer)
    }

    /// POSTs `message` (without a session id when `fresh`); the response to request
    /// `id`, if one is awaited (and the progress reports on the way handed on as the
    /// tool's it names).
    fn post(
        &self,
        message: &Value,
        timeout: Duration,
        key: Option<&str>,
        id: Option<(u64, Option<&str>, Option<&dyn ClientRequests>)>,
        fresh: bool,
    ) -> Result<Posted, ClientError> {
        let session = if fresh { None } else { self.session() };
        let protocol = self
            .protocol
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
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
        let body = message.to_string();
        let request = builder
            .body(body.as_bytes())
            .map_err(|e| ClientError::NotSent(format!("upstream `{}`: {e}", self.upstream)))?;
        let request = self
            .agent
            .configure_request(request)
            .timeout_global(Some(timeout))
            .build();
        let mut response = self.agent.run(request).map_err(|e| self.transport(e))?;
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
        let reader = response.body_mut().as_reader().take(MAX_RESPONSE_BYTES);
        match status {
            200..=299 => {}
            // The server ended or forgot the session: nothing was processed under it.
            404 if session.is_some() => {
                return Ok(Posted::SessionLost(session.unwrap_or_default()));
            }
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
                    _ => format!(
                        "upstream `{}` refused the host's credentials (HTTP {status}: {}); fix its `headers` or secrets file, and the same call goes through",
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
        let Some((id, progress_of, asks)) = id else {
            return Ok(Posted::Answer(None));
        };
        if streamed {
            return self
                .response_in_stream(reader, (id, progress_of), asks, timeout)
                .map(|answer| Posted::Answer(Some(answer)));
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
        Ok(Posted::Answer(Some(answer)))
    }

    /// Reads Server-Sent Events until the one whose data is the response to `id`,
    /// handing progress reports on the way on as `progress_of`'s, and answering
    /// (POSTed within `timeout`) the requests of the upstream's on it through `asks`.
    fn response_in_stream(
        &self,
        reader: impl Read,
        (id, progress_of): (u64, Option<&str>),
        asks: Option<&dyn ClientRequests>,
        timeout: Duration,
    ) -> Result<Value, ClientError> {
        let mut data = String::new();
        // Coalesced as they come (a report held past its turn goes with the next
        // event, or before the answer).
        let mut reports = super::progress::of_tool(progress_of.unwrap_or_default());
        let mut logs = super::log_messages::CallLogs::new(&self.upstream);
        for line in BufReader::new(reader).lines() {
            let line = line.map_err(|e| {
                ClientError::Lost(format!(
                    "upstream `{}`: the stream broke before the response: {e}",
                    self.upstream
                ))
            })?;
            if let Some(rest) = line.strip_prefix("data:") {
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(rest.strip_prefix(' ').unwrap_or(rest));
                continue;
            }
            if !line.is_empty() || data.is_empty() {
                continue;
            }
            let event = std::mem::take(&mut data);
            let Ok(mut message) = serde_json::from_str::<Value>(&event) else {
                continue;
            };
            self.credentials.json(&mut message);
            reports.tick(std::time::Instant::now());
            if message.get("method").and_then(Value::as_str) == Some("notifications/progress") {
                if progress_of.is_some() {
                    reports.report(message, std::time::Instant::now());
                }
            } else if message.get("method").is_some() && message.get("id").is_some() {
                // A request on a response stream cannot wait past it: never parked.
                if let Some(reply) =
                    super::client::answer_for_client(&self.upstream, asks, &message, false)
                {
                    // Not answered: the upstream's own request fails, and its tool with it.
                    let _ = self.post(&reply, timeout, None, None, false);
                }
            } else if super::log_messages::is_log(&message) {
                // On the request's own stream: the call's, heard by its client.
                match progress_of {
                    Some(tool) => logs.hand_on(tool, &message),
                    None => super::log_messages::to_log(&self.upstream, &message),
                }
            } else if let Some(method) = message.get("method").and_then(Value::as_str)
                && message.get("id").is_none()
                && super::client::is_surface_news(method)
                && let Some(hooks) = &self.hooks
            {
                (hooks.heard)(&message);
            } else if message.get("id").and_then(Value::as_u64) == Some(id)
                && message.get("method").is_none()
            {
                reports.flush();
                return Ok(message);
            }
        }
        Err(ClientError::Lost(format!(
            "upstream `{}`: the stream ended before the response",
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
        let protocol = self
            .protocol
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let request = with_session(
            Request::builder().method("DELETE").uri(self.url.as_str()),
            Some(&session),
            protocol.as_deref(),
            &self.headers,
        )
        .body(());
        if let Ok(request) = request {
            let request = self
                .agent
                .configure_request(request)
                .timeout_global(Some(stream::DELETE_TIMEOUT))
                .build();
            let _ = self.agent.run(request);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            \n";
        let found = client
            .response_in_stream(stream.as_bytes(), (7, None), None, Duration::from_secs(5))
            .unwrap();
        assert_eq!(found["result"]["content"], json!([]));
        let cut = "data: {\"jsonrpc\":\"2.0\",\"id\":6,\"result\":{}}\n\n";
        assert!(matches!(
            client.response_in_stream(cut.as_bytes(), (7, None), None, Duration::from_secs(5)),
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
}
