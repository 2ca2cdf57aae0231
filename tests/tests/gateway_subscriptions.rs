//! Subscriptions to an upstream's resources through the gateway over Streamable
//! HTTP, and when they end: a stateless client's `subscriptions/listen` stream hears
//! what a session's `resources/subscribe` does, and an HTTP session that is deleted
//! or expires unsubscribes upstream what only it held. The upstream is a small MCP
//! server in plain Python (`RECORDER`) that writes down each subscription it is
//! asked for, and on each read says the resources it holds subscriptions to were
//! updated and its list changed.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use justonce::__private::HttpOptions;
use justonce::upstream::UpstreamConfig;
use serde_json::{Value, json};

use crate::mcp_gateway::{needed, python};
use crate::support::mcp_http::{
    HttpClient, HttpFixture, HttpProcess, MODERN, add_token, read_reply,
};
use crate::support::test_host;

/// A bound on a hang, not a timing assertion.
const WAIT: Duration = Duration::from_secs(60);

/// An MCP server of two resources, `rec://x` and `rec://y` (and any other URI one
/// subscribes to), that appends `METHOD URI` to the file `$RECORD` for each
/// `resources/subscribe` and `unsubscribe`, and before it answers a
/// `resources/read` sends `notifications/resources/updated` for each URI it holds a
/// subscription to, then `notifications/resources/list_changed`.
const RECORDER: &str = r#"
import json, os, sys
held = set()
def send(message):
    print(json.dumps(message), flush=True)
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    method, params = message["method"], message.get("params") or {}
    result = {}
    if method == "initialize":
        result = {"protocolVersion": "2025-06-18", "serverInfo": {"name": "recorder", "version": "1"},
                  "capabilities": {"tools": {}, "resources": {"subscribe": True, "listChanged": True}}}
    elif method == "tools/list":
        result = {"tools": []}
    elif method == "resources/list":
        result = {"resources": [{"uri": "rec://x", "name": "x"}, {"uri": "rec://y", "name": "y"}]}
    elif method == "resources/templates/list":
        result = {"resourceTemplates": []}
    elif method in ("resources/subscribe", "resources/unsubscribe"):
        uri = params["uri"]
        (held.add if method == "resources/subscribe" else held.discard)(uri)
        with open(os.environ["RECORD"], "a") as record:
            record.write(method.split("/")[1] + " " + uri + "\n")
    elif method == "resources/read":
        for uri in sorted(held):
            send({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}})
        send({"jsonrpc": "2.0", "method": "notifications/resources/list_changed"})
        result = {"contents": [{"uri": params["uri"], "text": "read"}]}
    send({"jsonrpc": "2.0", "id": message["id"], "result": result})
"#;

/// The lines the recorder wrote so far.
fn recorded(record: &Path) -> Vec<String> {
    std::fs::read_to_string(record)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Waits until the recorder wrote `lines` (in this order, and nothing else);
/// asserts it at the deadline.
fn wait_for_record(record: &Path, lines: &[&str]) {
    let deadline = Instant::now() + WAIT;
    while recorded(record) != lines && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(recorded(record), lines);
}

/// `[upstreams.rec]` running the recorder with `python`, writing to `record`.
fn recorder_section(python: &Path, record: &Path) -> String {
    format!(
        "[upstreams.rec]\ncommand = [{:?}, \"-c\", {RECORDER:?}]\nenv = {{ RECORD = {:?} }}\n",
        python.display().to_string(),
        record.display().to_string()
    )
}

/// A gateway's directory whose `justonce.toml` offers the recorder as `rec`, and
/// the file it records to; `None` (skipped) without Python, but under CI=true.
fn recorder_gateway() -> Option<(tempfile::TempDir, PathBuf)> {
    let python = needed("Python", &python())?;
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("record");
    std::fs::write(
        dir.path().join("justonce.toml"),
        recorder_section(&python, &record),
    )
    .unwrap();
    Some((dir, record))
}

/// Waits until the gateway lists the recorder's resources (it is ready).
fn wait_until_listed(client: &mut HttpClient, stateless: bool) {
    let deadline = Instant::now() + WAIT;
    loop {
        let listed = if stateless {
            client.stateless("resources/list", json!({}))
        } else {
            client.request("resources/list", json!({}))
        }
        .message();
        if listed["result"]["resources"]
            .as_array()
            .is_some_and(|r| r.len() == 2)
        {
            return;
        }
        assert!(Instant::now() < deadline, "never listed: {listed}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// An open `subscriptions/listen` stream: the messages read from it so far.
struct Stream {
    tcp: TcpStream,
    read: String,
}

impl Stream {
    /// The next message whose `method` is `method`, reading on (up to [`WAIT`]).
    fn next(&mut self, method: &str) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            let found = self
                .read
                .lines()
                .filter_map(|l| l.strip_prefix("data: "))
                .filter_map(|data| serde_json::from_str::<Value>(data).ok())
                .find(|m| m["method"] == method);
            if let Some(message) = found {
                // What was read up to that message is consumed.
                let marker = message.to_string();
                if let Some(at) = self.read.find(&marker) {
                    self.read.drain(..at + marker.len());
                }
                return message;
            }
            assert!(Instant::now() < deadline, "no {method} in {:?}", self.read);
            let mut buffer = [0u8; 4096];
            match self.tcp.read(&mut buffer) {
                Ok(0) => panic!("the stream ended before {method}: {:?}", self.read),
                Ok(n) => self.read.push_str(&String::from_utf8_lossy(&buffer[..n])),
                Err(e) => panic!("reading the stream for {method}: {e}: {:?}", self.read),
            }
        }
    }
}

/// A stateless `subscriptions/listen` request `id` asking for `notifications`.
fn listen_request(id: &str, notifications: Value) -> Value {
    json!({
        "jsonrpc": "2.0", "id": id, "method": "subscriptions/listen",
        "params": {
            "notifications": notifications,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    })
}

/// Sends the `subscriptions/listen` `request`; the connection its stream (or
/// refusal) comes on.
fn send_listen(client: &HttpClient, request: &Value) -> TcpStream {
    let tcp = client.send_raw(&client.post_bytes(
        &request.to_string(),
        &[
            ("MCP-Protocol-Version", MODERN),
            ("Mcp-Method", "subscriptions/listen"),
        ],
    ));
    tcp.set_read_timeout(Some(WAIT)).unwrap();
    tcp
}

/// A stateless client's `subscriptions/listen` stream hears the updates of the
/// upstream resource it named and the upstream's list changes, each stamped with
/// the stream's id, after an acknowledgement that leaves out a URI no upstream
/// has; when it hangs up, the upstream is unsubscribed. Before, `subscriptions/listen`
/// was an unknown method (404, -32601).
#[test]
fn a_stateless_listen_stream_hears_its_upstream_resources_updates_and_unsubscribes_when_it_ends() {
    let Some((dir, record)) = recorder_gateway() else {
        return;
    };
    let db = dir.path().join("state.db");
    let token = add_token(&db, "agent");
    let process = HttpProcess::spawn(&db, &[]);
    let mut client = HttpClient::new(process.addr, Some(token.clone()));
    wait_until_listed(&mut client, true);
    let discovered = client.stateless("server/discover", json!({})).message();
    assert_eq!(
        discovered["result"]["capabilities"]["resources"]["subscribe"], true,
        "{discovered}"
    );
    let x = "justonce://rec/rec://x";
    let listen = listen_request(
        "listen-7",
        json!({
            "resourcesListChanged": true,
            "resourceSubscriptions": [x, "justonce://nowhere/z"],
        }),
    );
    let tcp = send_listen(&client, &listen);
    let mut stream = Stream {
        tcp,
        read: String::new(),
    };
    let ack = stream.next("notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"],
        json!({
            "notifications": { "resourcesListChanged": true, "resourceSubscriptions": [x] },
            "_meta": { "io.modelcontextprotocol/subscriptionId": "listen-7" },
        }),
        "the URI no upstream has is left out: {ack}"
    );
    wait_for_record(&record, &["subscribe rec://x"]);
    // A read makes the recorder tell its news.
    let read = client
        .stateless("resources/read", json!({ "uri": x }))
        .message();
    assert_eq!(read["result"]["contents"][0]["uri"], x, "{read}");
    let updated = stream.next("notifications/resources/updated");
    assert_eq!(
        updated["params"],
        json!({ "uri": x, "_meta": { "io.modelcontextprotocol/subscriptionId": "listen-7" } })
    );
    let changed = stream.next("notifications/resources/list_changed");
    assert_eq!(
        changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "listen-7"
    );
    // The client hangs up: its subscription ends upstream (once the server finds
    // the stream closed: each read makes news it fails to send there).
    drop(stream);
    let ended = ["subscribe rec://x", "unsubscribe rec://x"];
    let deadline = Instant::now() + WAIT;
    while recorded(&record) != ended && Instant::now() < deadline {
        client.stateless("resources/read", json!({ "uri": x }));
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(recorded(&record), ended);
    // A client that takes no stream is told why.
    let mut json_only = listen.clone();
    json_only["id"] = json!(8);
    let bytes = client.post_bytes(
        &json_only.to_string(),
        &[
            ("MCP-Protocol-Version", MODERN),
            ("Mcp-Method", "subscriptions/listen"),
        ],
    );
    let bytes = String::from_utf8(bytes).unwrap().replacen(
        "Accept: application/json, text/event-stream",
        "Accept: application/json",
        1,
    );
    let refused = read_reply(&mut client.send_raw(bytes.as_bytes()));
    assert_eq!(refused.status, 406, "{refused:?}");
    assert!(
        refused.body.contains("accept text/event-stream"),
        "{refused:?}"
    );
}

/// `DELETE /mcp` of `client`'s session; its status.
fn delete(client: &HttpClient, (addr, token): (std::net::SocketAddr, &str)) -> u16 {
    let request = format!(
        "DELETE /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nMcp-Session-Id: {}\r\nConnection: close\r\n\r\n",
        client.session.as_deref().unwrap()
    );
    let mut tcp = client.send_raw(request.as_bytes());
    tcp.flush().unwrap();
    read_reply(&mut tcp).status
}

/// A session's subscriptions end upstream when it ends, deleted or expired (on the
/// host's clock), each URI only when no other session holds it: session A holds x
/// and y, B holds x, C holds z. A deleted unsubscribes y, not x; C expired
/// unsubscribes z while B, used since, stays; B deleted unsubscribes x. Before, an
/// expired session's subscriptions stayed upstream (the deletion already ended
/// them).
#[test]
fn a_deleted_or_expired_session_unsubscribes_upstream_what_only_it_held() {
    let Some(python) = needed("Python", &python()) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let record: PathBuf = dir.path().join("record");
    let mut config = UpstreamConfig::command(vec![
        python.display().to_string(),
        "-c".into(),
        RECORDER.into(),
    ]);
    config
        .env
        .insert("RECORD".into(), record.display().to_string());
    let t = test_host(|b| b.upstream("rec", config));
    let clock = t.clock.clone();
    let idle = Duration::from_secs(60);
    let options = HttpOptions {
        session_idle_timeout: idle,
        ..HttpOptions::default()
    };
    let http = HttpFixture::start(Arc::new(t.host), options, &["agent"]);
    let session = || {
        let mut client = http.client("agent");
        assert_eq!(client.initialize("2025-11-25").status, 200);
        client
    };
    let (mut a, mut b, mut c) = (session(), session(), session());
    wait_until_listed(&mut a, false);
    let subscribe = |client: &mut HttpClient, uri: &str| {
        let uri = format!("justonce://rec/{uri}");
        let answer = client
            .request("resources/subscribe", json!({ "uri": uri }))
            .message();
        assert_eq!(answer["result"], json!({}), "{answer}");
    };
    subscribe(&mut a, "rec://x");
    subscribe(&mut a, "rec://y");
    subscribe(&mut b, "rec://x");
    subscribe(&mut c, "rec://z");
    let mut expected = vec![
        "subscribe rec://x",
        "subscribe rec://y",
        "subscribe rec://x",
        "subscribe rec://z",
    ];
    wait_for_record(&record, &expected);
    // Deleted: y was A's alone, x is B's too.
    assert_eq!(
        delete(&a, (http.running.addr(), &http.tokens["agent"])),
        204
    );
    expected.push("unsubscribe rec://y");
    wait_for_record(&record, &expected);
    // B is used halfway through the idle bound; C is not, and expires.
    clock.advance(idle / 2);
    wait_until_listed(&mut b, false);
    clock.advance(idle / 2);
    wait_until_listed(&mut b, false);
    expected.push("unsubscribe rec://z");
    wait_for_record(&record, &expected);
    let gone = c.request("resources/list", json!({}));
    assert_eq!(gone.status, 404, "C expired: {gone:?}");
    // B deleted: the last subscription to x.
    assert_eq!(
        delete(&b, (http.running.addr(), &http.tokens["agent"])),
        204
    );
    expected.push("unsubscribe rec://x");
    wait_for_record(&record, &expected);
}

/// Over stdio, a stateless client ends its listen stream by cancelling its
/// request: the upstream is unsubscribed, and the stream hears no more. Before,
/// `subscriptions/listen` was an unknown method (-32601).
#[test]
fn a_stdio_listen_stream_cancelled_by_its_client_unsubscribes_upstream() {
    use crate::support::mcp::McpProcess;
    let Some((dir, record)) = recorder_gateway() else {
        return;
    };
    let mut server = McpProcess::spawn(&dir.path().join("state.db"), &[], "warn");
    let envelope = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let deadline = Instant::now() + WAIT;
    loop {
        let listed = server
            .client
            .request("resources/list", json!({ "_meta": envelope }));
        if listed["result"]["resources"]
            .as_array()
            .is_some_and(|r| r.len() == 2)
        {
            break;
        }
        assert!(Instant::now() < deadline, "never listed: {listed}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let x = "justonce://rec/rec://x";
    server.client.send_request(
        json!("listen-1"),
        "subscriptions/listen",
        json!({ "notifications": { "resourceSubscriptions": [x] }, "_meta": envelope }),
    );
    let ack = server.client.next_message();
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    assert_eq!(
        ack["params"]["notifications"]["resourceSubscriptions"],
        json!([x])
    );
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "listen-1"
    );
    wait_for_record(&record, &["subscribe rec://x"]);
    server.client.notify(
        "notifications/cancelled",
        json!({ "requestId": "listen-1" }),
    );
    wait_for_record(&record, &["subscribe rec://x", "unsubscribe rec://x"]);
    // A read makes the recorder tell its news: nothing comes on the ended stream.
    let read = server
        .client
        .request("resources/read", json!({ "uri": x, "_meta": envelope }));
    assert_eq!(read["result"]["contents"][0]["uri"], x, "{read}");
    let (after, _, _) = server.close();
    assert!(
        after
            .iter()
            .all(|m| m["method"] != "notifications/resources/updated"),
        "{after:?}"
    );
}

/// One principal holds at most 16 `subscriptions/listen` streams at once (each
/// holds a connection and listeners): the next is refused 429 naming the cap,
/// another principal still opens one, and a stream that ended gives its place
/// back. Before, a principal opened streams without end.
#[test]
fn a_principal_holds_at_most_sixteen_listen_streams_and_one_that_ended_frees_its_place() {
    let Some((dir, _record)) = recorder_gateway() else {
        return;
    };
    let db = dir.path().join("state.db");
    let (agent, other) = (add_token(&db, "agent"), add_token(&db, "other"));
    let process = HttpProcess::spawn(&db, &[]);
    let mut client = HttpClient::new(process.addr, Some(agent.clone()));
    wait_until_listed(&mut client, true);
    let open = |token: &str, n: usize| -> TcpStream {
        let client = HttpClient::new(process.addr, Some(token.to_owned()));
        let request = listen_request(
            &format!("listen-{n}"),
            json!({ "resourcesListChanged": true }),
        );
        send_listen(&client, &request)
    };
    let acknowledged = |tcp: TcpStream| -> Stream {
        let mut stream = Stream {
            tcp,
            read: String::new(),
        };
        stream.next("notifications/subscriptions/acknowledged");
        stream
    };
    let mut held: Vec<Stream> = (0..16).map(|n| acknowledged(open(&agent, n))).collect();
    let refused_text = |mut tcp: TcpStream| -> String {
        let mut text = String::new();
        let _ = tcp.read_to_string(&mut text);
        text
    };
    let refused = refused_text(open(&agent, 16));
    assert!(refused.starts_with("HTTP/1.1 429"), "{refused}");
    assert!(
        refused.contains("16 subscriptions/listen streams are open already"),
        "the cap named: {refused}"
    );
    // Another principal has its own.
    acknowledged(open(&other, 17));
    // One ends (its client hangs up): once the server finds it closed (a read
    // makes news it fails to send there), its place is free again.
    drop(held.pop());
    let deadline = Instant::now() + WAIT;
    loop {
        let read = client
            .stateless("resources/read", json!({ "uri": "justonce://rec/rec://x" }))
            .message();
        assert!(read.get("result").is_some(), "{read}");
        let tcp = open(&agent, 18);
        let mut stream = Stream {
            tcp,
            read: String::new(),
        };
        let mut head = [0u8; 12];
        stream.tcp.read_exact(&mut head).unwrap();
        if head.starts_with(b"HTTP/1.1 200") {
            stream.read.push_str(&String::from_utf8_lossy(&head));
            stream.next("notifications/subscriptions/acknowledged");
            break;
        }
        assert!(Instant::now() < deadline, "the place never came back");
        std::thread::sleep(Duration::from_millis(50));
    }
}
