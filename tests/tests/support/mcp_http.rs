//! MCP over HTTP for tests: an in-process [`justonce::__private::http_server`] on
//! 127.0.0.1 with a tokens file of its own, and a raw HTTP/1.1 client that can send
//! exactly the bytes a test needs (and hang up where it wants).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::time::Duration;

use justonce::__private::Running;
use justonce::__private::tokens::{self, Tokens};
use justonce::__private::{HttpOptions, Server, ServerConfig, Shutdown, http_server};
use justonce::Host;
use serde_json::{Value, json};

use super::cli::justonce_command;

/// A bound on a hang, not a timing assertion.
const WAIT: Duration = Duration::from_secs(60);

/// The stateless revision.
pub const MODERN: &str = "2026-07-28";

/// A server for `host` with a token for each of `principals`.
pub struct HttpFixture {
    /// The running server.
    pub running: Running,
    /// Each principal's token.
    pub tokens: HashMap<String, String>,
    /// The tokens file.
    pub tokens_file: std::path::PathBuf,
    /// What SIGTERM stops in `serve` (the drain).
    pub shutdown: Arc<Shutdown>,
    _dir: tempfile::TempDir,
}

impl HttpFixture {
    /// Serves `host` on 127.0.0.1 with `options`.
    pub fn start(host: Arc<Host>, options: HttpOptions, principals: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let tokens_file = dir.path().join("tokens.json");
        let tokens = principals
            .iter()
            .map(|p| ((*p).to_owned(), tokens::add(&tokens_file, p).unwrap()))
            .collect();
        let server = Server::new(host, ServerConfig::default());
        let shutdown = server.shutdown();
        let running = http_server(server, Tokens::open(&tokens_file).unwrap(), options)
            .spawn(TcpListener::bind("127.0.0.1:0").unwrap())
            .unwrap();
        Self {
            running,
            tokens,
            tokens_file,
            shutdown,
            _dir: dir,
        }
    }

    /// A client calling as `principal`.
    pub fn client(&self, principal: &str) -> HttpClient {
        HttpClient::new(self.running.addr(), Some(self.tokens[principal].clone()))
    }
}

/// One HTTP response.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// Header names (lowercase) and values.
    pub headers: Vec<(String, String)>,
    /// The body as sent (chunked framing included).
    pub body: String,
}

impl Reply {
    /// The first value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC message: the body, or the `data:` of its SSE event.
    pub fn message(&self) -> Value {
        let text = if self
            .header("content-type")
            .is_some_and(|t| t.starts_with("text/event-stream"))
        {
            self.body
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .unwrap_or_else(|| panic!("no data line in {:?}", self.body))
        } else {
            self.body.as_str()
        };
        serde_json::from_str(text)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {} {:?}", self.status, self.body))
    }

    /// The tool result of a `tools/call`, failing on a protocol error.
    pub fn tool_result(&self) -> Value {
        assert_eq!(self.status, 200, "{self:?}");
        let message = self.message();
        assert!(message.get("error").is_none(), "protocol error: {message}");
        message["result"].clone()
    }
}

/// Reads one response to its end (the server closes after it: `Connection: close`).
pub fn read_reply(stream: &mut TcpStream) -> Reply {
    stream.set_read_timeout(Some(WAIT)).unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read the response");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no response head in {text:?}"));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Reply {
        status,
        headers,
        body: body.to_owned(),
    }
}

/// A client on a fresh connection per request.
#[derive(Clone)]
pub struct HttpClient {
    addr: SocketAddr,
    token: Option<String>,
    /// The session id from `initialize`, sent with later requests.
    pub session: Option<String>,
    next_id: i64,
}

impl HttpClient {
    /// A client of the server at `addr` presenting `token`.
    pub fn new(addr: SocketAddr, token: Option<String>) -> Self {
        Self {
            addr,
            token,
            session: None,
            next_id: 0,
        }
    }

    /// A connection with `request` (a whole HTTP request) sent on it.
    pub fn send_raw(&self, request: &[u8]) -> TcpStream {
        let mut stream = TcpStream::connect(self.addr).expect("connect");
        stream.write_all(request).expect("send");
        stream
    }

    /// The bytes of a POST of `body` with the usual headers and `extra` ones.
    pub fn post_bytes(&self, body: &str, extra: &[(&str, &str)]) -> Vec<u8> {
        let mut head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nConnection: close\r\nContent-Length: {}\r\n",
            self.addr,
            body.len()
        );
        if let Some(token) = &self.token {
            head.push_str(&format!("Authorization: Bearer {token}\r\n"));
        }
        if let Some(session) = &self.session {
            head.push_str(&format!("Mcp-Session-Id: {session}\r\n"));
        }
        for (name, value) in extra {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(body.as_bytes());
        bytes
    }

    /// POSTs `message` and reads the reply.
    pub fn post(&self, message: &Value, extra: &[(&str, &str)]) -> Reply {
        let mut stream = self.send_raw(&self.post_bytes(&message.to_string(), extra));
        read_reply(&mut stream)
    }

    /// A JSON-RPC request message with a fresh id.
    pub fn message(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        json!({ "jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params })
    }

    /// A request on the session (or before one).
    pub fn request(&mut self, method: &str, params: Value) -> Reply {
        let message = self.message(method, params);
        self.post(&message, &[])
    }

    /// `initialize` at `version`; keeps the session id.
    pub fn initialize(&mut self, version: &str) -> Reply {
        let reply = self.request(
            "initialize",
            json!({ "protocolVersion": version, "capabilities": {}, "clientInfo": { "name": "justonce-tests", "version": "0" } }),
        );
        self.session = reply.header("mcp-session-id").map(str::to_owned);
        reply
    }

    /// A stateless (2026-07-28) request: the envelope in `_meta` and the routing
    /// headers.
    pub fn stateless(&mut self, method: &str, mut params: Value) -> Reply {
        params["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!(MODERN);
        params["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({});
        let name = params["name"].as_str().unwrap_or("").to_owned();
        let message = self.message(method, params);
        let mut headers = vec![("MCP-Protocol-Version", MODERN), ("Mcp-Method", method)];
        if method == "tools/call" {
            headers.push(("Mcp-Name", name.as_str()));
        }
        self.post(&message, &headers)
    }

    /// A stateless `tools/call` of `refund` with `arguments` in `conversation`, and
    /// every byte the server sent back until it closed the connection: nothing, when
    /// it died or stopped before it answered.
    pub fn refund_to_the_end(&self, arguments: Value, conversation: &str) -> Vec<u8> {
        let mut stream = self.send_raw(
            &self.post_bytes(
                &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                    "name": "refund",
                    "arguments": arguments,
                    "_meta": {
                        "dev.justonce/conversation": conversation,
                        "io.modelcontextprotocol/protocolVersion": MODERN,
                        "io.modelcontextprotocol/clientCapabilities": {},
                    },
                }})
                .to_string(),
                &[
                    ("MCP-Protocol-Version", MODERN),
                    ("Mcp-Method", "tools/call"),
                    ("Mcp-Name", "refund"),
                ],
            ),
        );
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer);
        answer
    }

    /// A stateless `tools/call` of `tool` with `arguments` and `extra` params.
    pub fn call(&mut self, tool: &str, arguments: Value, extra: Value) -> Reply {
        let mut params = json!({ "name": tool, "arguments": arguments });
        if let Value::Object(extra) = extra {
            params.as_object_mut().unwrap().extend(extra);
        }
        self.stateless("tools/call", params)
    }
}

/// `justonce serve --http 127.0.0.1:0`, killed when dropped.
pub struct HttpProcess {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
}

impl HttpProcess {
    /// Starts it on `db` with `args` and reads the URL it prints.
    pub fn spawn(db: &Path, args: &[&str]) -> Self {
        Self::start(db, args, &[], Stdio::inherit())
    }

    /// Starts it with `env` set and its log (stderr) kept for [`Self::stop_for_log`].
    pub fn spawn_logged(db: &Path, args: &[&str], env: &[(&str, &str)]) -> Self {
        Self::start(db, args, env, Stdio::piped())
    }

    /// Kills it and returns what it logged (started with [`Self::spawn_logged`]).
    pub fn stop_for_log(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut log = String::new();
        if let Some(mut stderr) = self.child.stderr.take() {
            stderr.read_to_string(&mut log).expect("read the log");
        }
        log
    }

    fn start(db: &Path, args: &[&str], env: &[(&str, &str)], stderr: Stdio) -> Self {
        let mut child = justonce_command(Some(db))
            .args(["serve", "--http", "127.0.0.1:0", "--deliver-every-ms", "0"])
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("start justonce serve --http");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .expect("read the URL");
        let addr = line
            .trim()
            .strip_prefix("http://")
            .and_then(|rest| rest.strip_suffix("/mcp"))
            .unwrap_or_else(|| panic!("not an endpoint URL: {line:?}"))
            .parse()
            .expect("an address");
        Self { child, addr }
    }
}

impl HttpProcess {
    /// Sends it SIGTERM (it drains), without waiting.
    pub fn send_term(&self) {
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -TERM failed");
    }

    /// Waits for the process to end by itself (its stderr closing, then its exit):
    /// its exit code and what it logged (started with [`Self::spawn_logged`]).
    pub fn wait_for_log(mut self) -> (Option<i32>, String) {
        let mut log = String::new();
        if let Some(mut stderr) = self.child.stderr.take() {
            stderr.read_to_string(&mut log).expect("read the log");
        }
        let status = self.child.wait().expect("wait for justonce serve");
        (status.code(), log)
    }

    /// Sends SIGTERM and waits (at most a minute) for the process to end: its exit code.
    pub fn terminate(mut self) -> Option<i32> {
        self.send_term();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for justonce serve") {
                return status.code();
            }
            assert!(
                std::time::Instant::now() < deadline,
                "serve --http did not stop after SIGTERM"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

impl Drop for HttpProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `justonce --db DB token add NAME`: the token it printed.
pub fn add_token(db: &Path, name: &str) -> String {
    token(db, &["add", name]).trim().to_owned()
}

/// `justonce --db DB token ARGS…`: what it printed, once it succeeded.
pub fn token(db: &Path, args: &[&str]) -> String {
    let out = justonce_command(Some(db))
        .arg("token")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
