//! A line-oriented MCP client for tests: talks JSON-RPC over a real pipe to
//! `justonce serve` (a child process) or to an in-process [`justonce::__private::Server`].

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::Duration;

use justonce::__private::{Server, ServerConfig};
use justonce::Host;
use serde_json::{Value, json};

/// How long to wait for a message before failing the test. A bound on a hang, not
/// a timing assertion: a healthy server answers in milliseconds.
const WAIT: Duration = Duration::from_secs(60);

/// The MCP revision the tests speak unless they say otherwise.
pub const VERSION: &str = "2025-11-25";

/// One end of an MCP conversation.
pub struct McpClient {
    input: Option<Box<dyn Write + Send>>,
    lines: Receiver<String>,
    held: Vec<Value>,
    next_id: i64,
}

impl McpClient {
    /// A client writing to `input` and reading the server's lines from `output`.
    pub fn new(input: impl Write + Send + 'static, output: impl Read + Send + 'static) -> Self {
        Self {
            input: Some(Box::new(input)),
            lines: lines_of(output),
            held: Vec::new(),
            next_id: 1000,
        }
    }

    /// Writes one raw line.
    pub fn send_line(&mut self, line: &str) {
        let input = self.input.as_mut().expect("the input is open");
        writeln!(input, "{line}")
            .and_then(|()| input.flush())
            .expect("write to the server");
    }

    /// Sends a request with `id` without waiting for its response.
    pub fn send_request(&mut self, id: Value, method: &str, params: Value) {
        let message = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        self.send_line(&message.to_string());
    }

    /// Sends a notification.
    pub fn notify(&mut self, method: &str, params: Value) {
        let message = json!({ "jsonrpc": "2.0", "method": method, "params": params });
        self.send_line(&message.to_string());
    }

    /// Sends a request and waits for its response (the whole message).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = json!(self.next_id);
        self.send_request(id.clone(), method, params);
        self.response(&id)
    }

    /// `initialize` at `version`, then `notifications/initialized`; the result.
    pub fn initialize(&mut self, version: &str) -> Value {
        let response = self.request(
            "initialize",
            json!({ "protocolVersion": version, "capabilities": {}, "clientInfo": { "name": "justonce-tests", "version": "0" } }),
        );
        self.notify("notifications/initialized", json!({}));
        response["result"].clone()
    }

    /// Waits until `tools/list` says every upstream MCP server is ready
    /// (`_meta["dev.justonce/upstreams"]`), between lists for the server's
    /// `notifications/tools/list_changed` (each change of a state is one): the
    /// last `tools/list` response.
    pub fn wait_for_upstreams(&mut self) -> Value {
        loop {
            let listed = self.request("tools/list", json!({}));
            let states = &listed["result"]["_meta"]["dev.justonce/upstreams"];
            let ready = states
                .as_object()
                .is_none_or(|states| states.values().all(|upstream| upstream["state"] == "ready"));
            if ready {
                return listed;
            }
            self.wait_for_list_changed();
        }
    }

    /// Waits for the server's next `notifications/tools/list_changed`.
    pub fn wait_for_list_changed(&mut self) {
        while self.next_message()["method"] != "notifications/tools/list_changed" {}
    }

    /// `tools/call`; the whole response message.
    pub fn call(&mut self, tool: &str, arguments: Value, meta: Value) -> Value {
        self.request(
            "tools/call",
            json!({ "name": tool, "arguments": arguments, "_meta": meta }),
        )
    }

    /// Waits for the response to request `id`, keeping other messages for later.
    pub fn response(&mut self, id: &Value) -> Value {
        if let Some(i) = self.held.iter().position(|m| m.get("id") == Some(id)) {
            return self.held.remove(i);
        }
        loop {
            let message = self
                .receive()
                .unwrap_or_else(|| panic!("the server ended without answering {id}"));
            if message.get("id") == Some(id) {
                return message;
            }
            self.held.push(message);
        }
    }

    /// The next message, held ones first.
    pub fn next_message(&mut self) -> Value {
        if !self.held.is_empty() {
            return self.held.remove(0);
        }
        self.receive().expect("the server ended")
    }

    fn receive(&mut self) -> Option<Value> {
        match self.lines.recv_timeout(WAIT) {
            Ok(line) => Some(serde_json::from_str(&line).unwrap_or_else(|e| {
                panic!("the server wrote a line that is not JSON ({e}): {line}")
            })),
            Err(RecvTimeoutError::Disconnected) => None,
            Err(RecvTimeoutError::Timeout) => panic!("no message from the server within {WAIT:?}"),
        }
    }

    /// Closes the input (the client hangs up) and returns every message the server
    /// wrote until it ended.
    pub fn close(mut self) -> Vec<Value> {
        self.input = None;
        let mut rest = std::mem::take(&mut self.held);
        while let Some(message) = self.receive() {
            rest.push(message);
        }
        rest
    }
}

/// The lines of `output`, handed over by a thread of their own as they are read.
pub fn lines_of(output: impl Read + Send + 'static) -> Receiver<String> {
    let (tx, lines) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(output).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    lines
}

/// `justonce serve` as a child process on real pipes.
pub struct McpProcess {
    /// The client end.
    pub client: McpClient,
    child: Child,
    stderr: Receiver<String>,
}

impl McpProcess {
    /// Starts `justonce --db DB serve ARGS…` with `JUSTONCE_LOG=log`.
    pub fn spawn(db: &Path, args: &[&str], log: &str) -> Self {
        let mut child = super::cli::justonce_command(Some(db))
            .arg("serve")
            .args(args)
            .env("JUSTONCE_LOG", log)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start justonce serve");
        let client = McpClient::new(child.stdin.take().unwrap(), child.stdout.take().unwrap());
        let mut err = child.stderr.take().unwrap();
        let (tx, stderr) = channel();
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = err.read_to_string(&mut text);
            let _ = tx.send(text);
        });
        Self {
            client,
            child,
            stderr,
        }
    }

    /// The process id (to signal it).
    pub fn child_id(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` (`TERM`, `INT`) with the client still connected, and waits (at
    /// most a minute) for the process to end: its exit code and log.
    pub fn signal_and_wait(mut self, signal: &str) -> (Option<i32>, String) {
        let sent = std::process::Command::new("kill")
            .args([format!("-{signal}"), self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -{signal} failed");
        let deadline = std::time::Instant::now() + WAIT;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait for justonce serve") {
                break status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "serve did not stop after SIGTERM"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let log = self.stderr.recv_timeout(WAIT).unwrap_or_default();
        drop(self.client);
        (status.code(), log)
    }

    /// Hangs up; the messages written after the last awaited one, the exit code and
    /// the log (stderr).
    pub fn close(mut self) -> (Vec<Value>, Option<i32>, String) {
        let rest = self.client.close();
        let status = self.child.wait().expect("wait for justonce serve");
        let log = self.stderr.recv_timeout(WAIT).unwrap_or_default();
        (rest, status.code(), log)
    }
}

/// An in-process server for `host` on real OS pipes; the client and the thread
/// serving it.
pub fn serve_in_process(
    host: Arc<Host>,
    config: ServerConfig,
) -> (McpClient, std::thread::JoinHandle<std::io::Result<()>>) {
    let (server_in, client_out) = std::io::pipe().expect("pipe");
    let (client_in, server_out) = std::io::pipe().expect("pipe");
    let server = Server::new(host, config);
    let handle = std::thread::spawn(move || server.serve(BufReader::new(server_in), server_out));
    (McpClient::new(client_out, client_in), handle)
}

/// The result of a `tools/call` response, failing the test on a protocol error.
pub fn result(response: &Value) -> &Value {
    assert!(
        response.get("error").is_none(),
        "protocol error: {response}"
    );
    &response["result"]
}

/// `_meta["dev.justonce/replayed"]` of a tool result.
pub fn replayed(response: &Value) -> bool {
    result(response)["_meta"]["dev.justonce/replayed"]
        .as_bool()
        .expect("replayed is a bool")
}

/// `_meta["dev.justonce/key"]` of a tool result.
pub fn key(response: &Value) -> String {
    result(response)["_meta"]["dev.justonce/key"]
        .as_str()
        .expect("a key")
        .to_owned()
}

/// Whether a content item is the host's note for the model (see [`note`]).
fn is_note(item: &Value) -> bool {
    item["_meta"]["dev.justonce/note"] == true
}

/// A tool result's content without the host's note: the tool's own items, as saved.
pub fn tool_items(result: &Value) -> Value {
    let items = result["content"].as_array().expect("content is an array");
    Value::Array(items.iter().filter(|i| !is_note(i)).cloned().collect())
}

/// The text of the host's note for the model: the last content item, marked
/// `_meta["dev.justonce/note"]` (a replay, a retry-safe error); `None` without one.
pub fn note(result: &Value) -> Option<String> {
    let last = result["content"].as_array()?.last()?;
    // A replay's note is an embedded text resource, an error's a text item.
    let text = last["text"].as_str().or(last["resource"]["text"].as_str());
    is_note(last).then(|| text.unwrap_or_default().to_owned())
}
