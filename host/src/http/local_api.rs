//! A payments API and webhook receiver on 127.0.0.1, for `justonce demo` and the
//! tests: it deduplicates by idempotency key as Stripe does, counts what it applied,
//! and can be scripted to lose a response, hang, or answer an error.
//!
//! It listens on the loopback interface only, handles one connection at a time,
//! stops after a bounded number of connections, and stops when dropped.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::config::DEFAULT_IDEMPOTENCY_HEADER;

/// Connections served before the server stops by itself.
const MAX_CONNECTIONS: usize = 10_000;
/// How long a connection may take to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long [`Behaviour::ApplyThenHang`] holds a connection at most.
const HANG_LIMIT: Duration = Duration::from_secs(30);
/// The largest request accepted (head and body each).
const MAX_REQUEST_BYTES: usize = 1 << 20;

/// What the server does with the next request, in script order; once the script is
/// used up every request is [`Behaviour::Answer`]ed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// Applies the request (once per idempotency key) and answers.
    Answer,
    /// Applies the request, then closes the connection without answering: the
    /// sender cannot tell whether it took effect.
    ApplyThenDrop,
    /// Closes the connection without applying or answering: the request was lost on
    /// its way, and the sender cannot tell.
    Drop,
    /// Applies the request, then holds the connection without answering until the
    /// sender goes away (or a bound passes): a sender killed mid-request.
    ApplyThenHang,
    /// Answers `status` without applying anything, with `Retry-After: <seconds>`
    /// when given (a 503 or 429 asks to come back; a 500 is a definitive failure).
    Status {
        /// The status code.
        status: u16,
        /// The `Retry-After` header's seconds.
        retry_after: Option<u64>,
    },
}

/// One request as the server received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenRequest {
    /// The method.
    pub method: String,
    /// The path and query.
    pub path: String,
    /// The idempotency key header, if the request carried one.
    pub key: Option<String>,
    /// Every header, names in lower case.
    pub headers: BTreeMap<String, String>,
    /// The body as text.
    pub body: String,
}

/// One effect the server applied: a refund issued or a webhook recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    /// The id the server gave it (`re_0001` for a refund, `evt_0001` otherwise).
    pub id: String,
    /// The idempotency key it was applied under, if any.
    pub key: Option<String>,
    /// The path it was posted to.
    pub path: String,
    /// The request body, as JSON when it was JSON.
    pub body: Value,
}

#[derive(Default)]
struct ApiState {
    script: VecDeque<Behaviour>,
    requests: Vec<SeenRequest>,
    applied: Vec<Applied>,
    answers: HashMap<String, String>,
    connections: usize,
    required: Option<(String, String)>,
}

/// The server; see the module docs. Dropping it stops it.
pub struct LocalApi {
    addr: SocketAddr,
    state: Arc<Mutex<ApiState>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for LocalApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalApi")
            .field("addr", &self.addr)
            .finish()
    }
}

impl LocalApi {
    /// Starts a server on 127.0.0.1 at a free port that deduplicates by
    /// `Idempotency-Key`.
    pub fn start() -> io::Result<Self> {
        Self::start_with_key_header(DEFAULT_IDEMPOTENCY_HEADER)
    }

    /// Starts a server that reads the key from `header` instead.
    pub fn start_with_key_header(header: &str) -> io::Result<Self> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(ApiState::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let state = Arc::clone(&state);
            let stop = Arc::clone(&stop);
            let header = header.to_ascii_lowercase();
            std::thread::Builder::new()
                .name("justonce-local-api".into())
                .spawn(move || serve(&listener, &state, &stop, &header))?
        };
        Ok(Self {
            addr,
            state,
            stop,
            thread: Some(thread),
        })
    }

    /// `http://127.0.0.1:<port>`, the server's origin.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Queues behaviours for the next requests, in order.
    pub fn script(&self, behaviours: impl IntoIterator<Item = Behaviour>) {
        self.lock().script.extend(behaviours);
    }

    /// Answers `401` without applying anything to a request that does not carry
    /// `header` with `value` (a credential the host adds for a service).
    pub fn require_header(&self, header: &str, value: &str) {
        self.lock().required = Some((header.to_ascii_lowercase(), value.to_owned()));
    }

    /// Every request received, in order.
    pub fn requests(&self) -> Vec<SeenRequest> {
        self.lock().requests.clone()
    }

    /// Every effect applied, in order: one per distinct key.
    pub fn applied(&self) -> Vec<Applied> {
        self.lock().applied.clone()
    }

    /// How many connections were accepted.
    pub fn connections(&self) -> usize {
        self.lock().connections
    }

    fn lock(&self) -> MutexGuard<'_, ApiState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for LocalApi {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept; the server sees the flag and returns.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve(listener: &TcpListener, state: &Mutex<ApiState>, stop: &AtomicBool, header: &str) {
    for _ in 0..MAX_CONNECTIONS {
        let Ok((stream, _)) = listener.accept() else {
            continue;
        };
        if stop.load(Ordering::SeqCst) {
            return;
        }
        state.lock().unwrap_or_else(|p| p.into_inner()).connections += 1;
        let _ = handle(stream, state, stop, header);
    }
}

struct Parsed {
    method: String,
    path: String,
    key: Option<String>,
    headers: BTreeMap<String, String>,
    body: Vec<u8>,
}

fn handle(
    stream: TcpStream,
    state: &Mutex<ApiState>,
    stop: &AtomicBool,
    header: &str,
) -> io::Result<()> {
    stream.set_read_timeout(Some(READ_TIMEOUT))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut stream = stream;
    let request = match read_request(&mut reader, header)? {
        Ok(request) => request,
        Err((status, message)) => {
            return respond(&mut stream, status, &json!({ "error": message }), None);
        }
    };
    let body_text = String::from_utf8_lossy(&request.body).into_owned();
    let (behaviour, answer) = {
        let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
        state.requests.push(SeenRequest {
            method: request.method.clone(),
            path: request.path.clone(),
            key: request.key.clone(),
            headers: request.headers.clone(),
            body: body_text.clone(),
        });
        let refused = state
            .required
            .as_ref()
            .filter(|(name, value)| request.headers.get(name) != Some(value))
            .map(|(name, _)| format!("missing or wrong `{name}` header"));
        if let Some(message) = refused {
            drop(state);
            return respond(&mut stream, 401, &json!({ "error": message }), None);
        }
        if request.path.ends_with("/echo") {
            drop(state);
            // A careless downstream: it answers the request's headers back, in the body
            // and as a cookie (to test that the host strips its secrets).
            let cookie = request
                .headers
                .get("authorization")
                .map(|auth| format!("Set-Cookie: session={auth}\r\n"))
                .unwrap_or_default();
            let echoed = json!({ "headers": request.headers });
            return respond_with_head(&mut stream, 200, &echoed, &cookie);
        }
        let behaviour = state.script.pop_front().unwrap_or(Behaviour::Answer);
        if matches!(behaviour, Behaviour::Answer)
            && let Some(found) = refund_of_order(&state, &request)
        {
            drop(state);
            return match found {
                Some(refund) => respond(&mut stream, 200, &refund, None),
                None => respond(&mut stream, 404, &json!({ "error": "no refund" }), None),
            };
        }
        let answer = match behaviour {
            Behaviour::Status { .. } | Behaviour::Drop => None,
            _ => Some(apply(&mut state, &request, &body_text)),
        };
        (behaviour, answer)
    };
    match (behaviour, answer) {
        (
            Behaviour::Status {
                status,
                retry_after,
            },
            _,
        ) => respond(
            &mut stream,
            status,
            &json!({ "error": format!("scripted status {status}") }),
            retry_after,
        ),
        (Behaviour::ApplyThenDrop | Behaviour::Drop, _) => Ok(()),
        (Behaviour::ApplyThenHang, _) => {
            hang(&mut reader, stop);
            Ok(())
        }
        (Behaviour::Answer, Some(answer)) => {
            let answer: Value = serde_json::from_str(&answer).unwrap_or(Value::Null);
            respond(&mut stream, 200, &answer, None)
        }
        (Behaviour::Answer, None) => Ok(()),
    }
}

/// A `GET /v1/refunds/by-order/ORDER` (a status request, for a payments API that
/// takes no key): `Some` with the refund applied for that `order_id`, if any.
fn refund_of_order(state: &ApiState, request: &Parsed) -> Option<Option<Value>> {
    let order = request.path.strip_prefix("/v1/refunds/by-order/")?;
    let order: u64 = order.parse().ok()?;
    if request.method != "GET" {
        return None;
    }
    Some(
        state
            .applied
            .iter()
            .find(|a| a.path.starts_with("/v1/refunds") && a.body["order_id"] == order)
            .map(|a| {
                json!({
                    "refund_id": a.id,
                    "status": "succeeded",
                    "order_id": a.body["order_id"],
                    "amount_cents": a.body.get("amount_cents").cloned().unwrap_or(Value::Null),
                })
            }),
    )
}

/// Applies a request once per key and returns the answer (the saved one for a key
/// seen before). Safe methods apply nothing.
fn apply(state: &mut ApiState, request: &Parsed, body: &str) -> String {
    if matches!(request.method.as_str(), "GET" | "HEAD" | "OPTIONS") {
        return json!({ "applied": state.applied.len() }).to_string();
    }
    if let Some(saved) = request.key.as_ref().and_then(|k| state.answers.get(k)) {
        return saved.clone();
    }
    let n = state.applied.len() + 1;
    let body_json: Value =
        serde_json::from_str(body).unwrap_or_else(|_| Value::String(body.to_owned()));
    let (id, answer) = if request.path.starts_with("/v1/refunds") {
        let id = format!("re_{n:04}");
        let answer = json!({
            "refund_id": id,
            "status": "succeeded",
            "amount_cents": body_json.get("amount_cents").cloned().unwrap_or(Value::Null),
        });
        (id, answer)
    } else {
        let id = format!("evt_{n:04}");
        (id.clone(), json!({ "id": id, "received": true }))
    };
    state.applied.push(Applied {
        id,
        key: request.key.clone(),
        path: request.path.clone(),
        body: body_json,
    });
    let answer = answer.to_string();
    if let Some(key) = &request.key {
        state.answers.insert(key.clone(), answer.clone());
    }
    answer
}

/// Holds the connection until the peer closes it, the server stops, or the bound.
fn hang(reader: &mut BufReader<TcpStream>, stop: &AtomicBool) {
    let started = Instant::now();
    let _ = reader
        .get_ref()
        .set_read_timeout(Some(Duration::from_millis(50)));
    let mut buf = [0u8; 256];
    while started.elapsed() < HANG_LIMIT && !stop.load(Ordering::SeqCst) {
        match reader.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return,
        }
    }
}

type BadRequest = (u16, String);

fn read_request(
    reader: &mut BufReader<TcpStream>,
    header: &str,
) -> io::Result<Result<Parsed, BadRequest>> {
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let (Some(method), Some(path)) = (parts.next(), parts.next()) else {
        return Ok(Err((400, "no request line".into())));
    };
    let (method, path) = (method.to_owned(), path.to_owned());
    let mut key = None;
    let mut headers = BTreeMap::new();
    let mut length = 0usize;
    let mut head_bytes = line.len();
    loop {
        line.clear();
        let n = reader.read_line(&mut line)?;
        head_bytes += n;
        if n == 0 || head_bytes > MAX_REQUEST_BYTES {
            return Ok(Err((400, "incomplete or oversized request head".into())));
        }
        let trimmed = line.trim_end();
        if trimmed.is_empty() {
            break;
        }
        let Some((name, value)) = trimmed.split_once(':') else {
            return Ok(Err((400, format!("malformed header line `{trimmed}`"))));
        };
        let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
        headers.insert(name.clone(), value.to_owned());
        if name == header {
            key = Some(value.to_owned());
        } else if name == "content-length" {
            length = value.parse().unwrap_or(usize::MAX);
        } else if name == "transfer-encoding" {
            return Ok(Err((411, "send a Content-Length".into())));
        }
    }
    if length > MAX_REQUEST_BYTES {
        return Ok(Err((413, "request body too large".into())));
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body)?;
    Ok(Ok(Parsed {
        method,
        path,
        key,
        headers,
        body,
    }))
}

fn respond(
    stream: &mut TcpStream,
    status: u16,
    body: &Value,
    retry_after: Option<u64>,
) -> io::Result<()> {
    let extra = retry_after
        .map(|seconds| format!("Retry-After: {seconds}\r\n"))
        .unwrap_or_default();
    respond_with_head(stream, status, body, &extra)
}

/// Answers `status` with `body`, `extra` (whole header lines) added to the head.
fn respond_with_head(
    stream: &mut TcpStream,
    status: u16,
    body: &Value,
    extra: &str,
) -> io::Result<()> {
    let body = body.to_string();
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        411 => "Length Required",
        413 => "Content Too Large",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    };
    let mut head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    head.push_str(extra);
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    stream.flush()
}
