//! Loading while serving, through `justonce serve` as a process: a component replaced
//! in the tools directory (or, with `SIGHUP`, whatever changed) is swapped in; the
//! client gets `notifications/tools/list_changed` (stdio, and the GET stream of an
//! HTTP session); a call in flight finishes on its build, the next runs the new one,
//! and the journal names the build of each; a retry across the swap replays; a
//! component that fails to load leaves the old build serving and the log says why;
//! a removed tool is offered to no new call.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use justonce::registry::Digest;
use justonce_tests::guests::{
    DIVERGE_COMPONENT, DIVERGE_V2_COMPONENT, ECHO_COMPONENT, HTTP_FETCH_COMPONENT,
};
use serde_json::{Value, json};

use crate::support::db::{journal, mailbox_count};
use crate::support::mcp::{McpClient, McpProcess, VERSION, replayed, result};
use crate::support::mcp_http::{HttpClient, HttpProcess, add_token, read_reply};

/// A bound on a wait, not a timing assertion.
const WAIT: Duration = Duration::from_secs(60);

/// The same tool, another build: the component with a custom section added, so
/// its bytes (and digest) differ and it behaves the same.
fn rebuilt(path: &str) -> Vec<u8> {
    let mut bytes = std::fs::read(path).unwrap();
    let name = b"justonce-test-build";
    let payload = b"v2";
    bytes.push(0); // a custom section
    bytes.push(u8::try_from(1 + name.len() + payload.len()).unwrap());
    bytes.push(u8::try_from(name.len()).unwrap());
    bytes.extend_from_slice(name);
    bytes.extend_from_slice(payload);
    bytes
}

/// Replaces `name` in `dir` with `bytes` at once (written beside, then renamed), as
/// a deployment should.
fn put(dir: &Path, name: &str, bytes: &[u8]) {
    let staged = dir.join(format!(".{name}.partial"));
    std::fs::write(&staged, bytes).unwrap();
    std::fs::rename(&staged, dir.join(name)).unwrap();
}

/// A tools directory holding `files` (name, component path).
fn tools_dir(root: &Path, files: &[(&str, &str)]) -> PathBuf {
    let dir = root.join("tools");
    std::fs::create_dir(&dir).unwrap();
    for (name, component) in files {
        std::fs::copy(component, dir.join(name)).unwrap();
    }
    dir
}

/// The journal's entry whose arguments carry `field: value`.
fn entry(db: &Path, tool: &str, field: &str, value: &Value) -> Option<Value> {
    journal(db)
        .into_iter()
        .find(|e| e["tool"] == tool && e["arguments"][field] == *value)
}

/// Waits for the next `list_changed`, keeping the other messages in `kept`.
fn await_list_changed(client: &mut McpClient, kept: &mut Vec<Value>) {
    loop {
        let message = client.next_message();
        if message["method"] == "notifications/tools/list_changed" {
            return;
        }
        kept.push(message);
    }
}

/// A downstream that holds its first request until the test lets it answer, and
/// answers the others at once: where a call stays in flight.
struct HeldDownstream {
    url: String,
    arrived: std::sync::mpsc::Receiver<()>,
    release: std::sync::mpsc::Sender<()>,
}

impl HeldDownstream {
    fn start() -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (arrive, arrived) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            for (n, stream) in listener.incoming().enumerate() {
                let Ok(mut stream) = stream else { return };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                    line.clear();
                }
                if n == 0 {
                    let _ = arrive.send(());
                    let _ = released.recv_timeout(WAIT);
                }
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\nconnection: close\r\n\r\nheld",
                );
            }
        });
        Self {
            url,
            arrived,
            release,
        }
    }
}

#[test]
fn a_replaced_component_is_swapped_in_while_a_call_in_flight_finishes_on_the_old_one() {
    let root = tempfile::tempdir().unwrap();
    let db = root.path().join("state.db");
    let dir = tools_dir(root.path(), &[("http_fetch.wasm", HTTP_FETCH_COMPONENT)]);
    let downstream = HeldDownstream::start();
    let http_config = root.path().join("http.json");
    std::fs::write(
        &http_config,
        json!({ "allow": { "http_fetch": [downstream.url] } }).to_string(),
    )
    .unwrap();
    let mut serve = McpProcess::spawn(
        &db,
        &[
            "--tools",
            dir.to_str().unwrap(),
            "--http-config",
            http_config.to_str().unwrap(),
            "--watch-interval-ms",
            "25",
        ],
        "warn",
    );
    let init = serve.client.initialize(VERSION);
    assert_eq!(init["capabilities"]["tools"]["listChanged"], true, "{init}");

    // v1 runs a call that the downstream holds.
    serve.client.send_request(
        json!("slow"),
        "tools/call",
        json!({ "name": "http_fetch", "arguments": { "requests": [{ "method": "GET", "url": downstream.url }] } }),
    );
    downstream
        .arrived
        .recv_timeout(WAIT)
        .expect("the slow call reached its downstream");

    let v2 = rebuilt(HTTP_FETCH_COMPONENT);
    put(&dir, "http_fetch.wasm", &v2);
    let mut kept = Vec::new();
    await_list_changed(&mut serve.client, &mut kept);
    assert!(
        kept.is_empty(),
        "the slow call is still in flight: {kept:?}"
    );

    let fresh = serve
        .client
        .call("http_fetch", json!({ "requests": [] }), json!({}));
    assert_eq!(result(&fresh)["isError"], false, "{fresh}");
    downstream.release.send(()).unwrap();
    let slow = serve.client.response(&json!("slow"));
    assert_eq!(result(&slow)["isError"], false, "{slow}");
    assert!(slow.to_string().contains("held"), "{slow}");

    let (_, _, log) = serve.close();
    let v1 = Digest::of(&std::fs::read(HTTP_FETCH_COMPONENT).unwrap()).to_string();
    let v2 = Digest::of(&v2).to_string();
    let ran = |requests: usize| {
        journal(&db)
            .into_iter()
            .find(|e| e["arguments"]["requests"].as_array().map(Vec::len) == Some(requests))
            .unwrap_or_else(|| panic!("no call with {requests} requests: {log}"))
    };
    assert_eq!(ran(1)["component"], v1, "{log}");
    assert_eq!(ran(1)["state"], "completed");
    assert_eq!(ran(0)["component"], v2, "{log}");
}

#[test]
fn a_component_that_fails_to_load_leaves_the_old_build_serving_and_the_log_says_why() {
    let root = tempfile::tempdir().unwrap();
    let db = root.path().join("state.db");
    let dir = tools_dir(root.path(), &[("echo.wasm", ECHO_COMPONENT)]);
    let mut serve = McpProcess::spawn(
        &db,
        &[
            "--tools",
            dir.to_str().unwrap(),
            "--watch-interval-ms",
            "25",
        ],
        "warn",
    );
    serve.client.initialize(VERSION);
    // One reload: echo's new file is broken, and a new tool arrives (so the client
    // is told of the change).
    put(&dir, "echo.wasm", b"\0asm not really");
    std::fs::copy(DIVERGE_COMPONENT, root.path().join("diverge.wasm")).unwrap();
    std::fs::rename(root.path().join("diverge.wasm"), dir.join("diverge.wasm")).unwrap();
    await_list_changed(&mut serve.client, &mut Vec::new());

    let listed = serve.client.request("tools/list", json!({}));
    let names: Vec<&str> = result(&listed)["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["diverge", "echo"], "echo still served");
    let echoed = serve
        .client
        .call("echo", json!({ "message": "still here" }), json!({}));
    assert_eq!(result(&echoed)["isError"], false, "{echoed}");

    let (_, code, log) = serve.close();
    assert_eq!(code, Some(0), "{log}");
    let why = log
        .lines()
        .find(|l| l.contains("echo.wasm was not loaded"))
        .unwrap_or_else(|| panic!("the log does not say why: {log}"));
    assert!(why.contains("kept what runs"), "{why}");
    let echo = entry(&db, "echo", "message", &json!("still here")).unwrap();
    assert_eq!(
        echo["component"],
        Digest::of(&std::fs::read(ECHO_COMPONENT).unwrap()).to_string()
    );
}

#[test]
fn sighup_reloads_and_a_retry_across_the_swap_replays_while_a_new_call_runs_the_new_build() {
    let root = tempfile::tempdir().unwrap();
    let db = root.path().join("state.db");
    let dir = tools_dir(root.path(), &[("diverge.wasm", DIVERGE_COMPONENT)]);
    // No polling: only SIGHUP reloads.
    let mut serve = McpProcess::spawn(
        &db,
        &["--tools", dir.to_str().unwrap(), "--watch-interval-ms", "0"],
        "warn",
    );
    serve.client.initialize(VERSION);
    let keyed =
        json!({ "dev.justonce/conversation": "c", "dev.justonce/idempotency-key": "order-7" });
    let first = serve
        .client
        .call("diverge", json!({ "variant": "a" }), keyed.clone());
    assert!(!replayed(&first), "{first}");

    put(
        &dir,
        "diverge.wasm",
        &std::fs::read(DIVERGE_V2_COMPONENT).unwrap(),
    );
    // Polling is off: nothing is swapped until the signal.
    let before = serve.client.request("tools/list", json!({}));
    assert!(
        !result(&before)["tools"][0]["description"]
            .as_str()
            .unwrap()
            .contains("(v2)"),
        "{before}"
    );
    let sent = std::process::Command::new("kill")
        .args(["-HUP", &serve.child_id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let mut kept = Vec::new();
    await_list_changed(&mut serve.client, &mut kept);
    assert!(kept.is_empty(), "{kept:?}");
    let after = serve.client.request("tools/list", json!({}));
    assert!(
        result(&after)["tools"][0]["description"]
            .as_str()
            .unwrap()
            .contains("(v2)"),
        "{after}"
    );

    // The same call again: the name is the identity, so it replays v1's answer.
    let retry = serve
        .client
        .call("diverge", json!({ "variant": "a" }), keyed);
    assert!(replayed(&retry), "{retry}");
    assert_eq!(
        result(&retry)["structuredContent"],
        result(&first)["structuredContent"]
    );
    let fresh = serve.client.call(
        "diverge",
        json!({ "variant": "b" }),
        json!({ "dev.justonce/conversation": "c" }),
    );
    assert!(!replayed(&fresh), "{fresh}");
    let (_, _, log) = serve.close();
    assert_eq!(
        mailbox_count(&db),
        2,
        "one mail per call, none for the retry: {log}"
    );
    let a = entry(&db, "diverge", "variant", &json!("a")).unwrap();
    let b = entry(&db, "diverge", "variant", &json!("b")).unwrap();
    assert_eq!(
        a["component"],
        Digest::of(&std::fs::read(DIVERGE_COMPONENT).unwrap()).to_string()
    );
    assert_eq!(
        b["component"],
        Digest::of(&std::fs::read(DIVERGE_V2_COMPONENT).unwrap()).to_string()
    );
}

/// Opens the GET stream of `session`; the reader of its lines.
fn open_stream(addr: std::net::SocketAddr, token: &str, session: &str) -> BufReader<TcpStream> {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    write!(
        stream,
        "GET /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nAccept: text/event-stream\r\nMcp-Session-Id: {session}\r\n\r\n"
    )
    .unwrap();
    let mut reader = BufReader::new(stream);
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    reader
}

/// The next `data:` of the stream, as JSON.
fn next_event(stream: &mut BufReader<TcpStream>) -> Value {
    loop {
        let mut line = String::new();
        let n = stream.read_line(&mut line).expect("read the stream");
        assert!(n > 0, "the stream ended");
        if let Some(data) = line.trim_end().strip_prefix("data: ") {
            return serde_json::from_str(data).unwrap();
        }
    }
}

#[test]
fn over_http_a_session_stream_is_told_of_a_removed_tool_which_new_calls_no_longer_find() {
    let root = tempfile::tempdir().unwrap();
    let db = root.path().join("state.db");
    let dir = tools_dir(
        root.path(),
        &[
            ("echo.wasm", ECHO_COMPONENT),
            ("diverge.wasm", DIVERGE_COMPONENT),
        ],
    );
    let token = add_token(&db, "alice");
    let server = HttpProcess::spawn(
        &db,
        &[
            "--tools",
            dir.to_str().unwrap(),
            "--watch-interval-ms",
            "25",
        ],
    );
    let mut client = HttpClient::new(server.addr, Some(token.clone()));
    let init = client.initialize(VERSION).message();
    assert_eq!(init["result"]["capabilities"]["tools"]["listChanged"], true);
    let session = client.session.clone().expect("a session");
    let mut stream = open_stream(server.addr, &token, &session);

    std::fs::remove_file(dir.join("echo.wasm")).unwrap();
    let event = next_event(&mut stream);
    assert_eq!(
        event["method"], "notifications/tools/list_changed",
        "{event}"
    );

    let listed = client.request("tools/list", json!({})).message();
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["diverge"]);
    let gone = client
        .request(
            "tools/call",
            json!({ "name": "echo", "arguments": { "message": "hi" } }),
        )
        .message();
    assert_eq!(gone["error"]["code"], -32602, "{gone}");
    assert!(
        gone["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown tool `echo`"),
        "{gone}"
    );

    // Ending the session ends its stream: the last chunk follows.
    let delete = format!(
        "DELETE /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {token}\r\nMcp-Session-Id: {session}\r\nConnection: close\r\n\r\n",
        server.addr
    );
    let ended = read_reply(&mut client.send_raw(delete.as_bytes()));
    assert_eq!(ended.status, 204);
    loop {
        let mut line = String::new();
        let n = stream.read_line(&mut line).expect("read the stream");
        assert!(n > 0 && !line.starts_with("data:"), "{line:?}");
        if line == "0\r\n" {
            break;
        }
    }
}
