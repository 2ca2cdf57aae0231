//! Streams over Streamable HTTP: a session's call is answered on a stream that says
//! what happens as it happens (progress, the host waiting for a duplicate), and a
//! client whose stream broke before the answer fetches the rest with `GET` and
//! `Last-Event-ID`, the effect performed once. Ids of another session, or none of
//! this server's, are refused.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use justonce::__private::{HttpOptions, ServerConfig};
use serde_json::{Value, json};

use crate::support::gate::Gate;
use crate::support::mcp::{VERSION, serve_in_process};
use crate::support::mcp_http::{HttpClient, HttpFixture, Reply, read_reply};
use crate::support::{receipt_args, test_host, test_host_with_mail};

/// A bound on a hang, not a timing assertion.
const WAIT: Duration = Duration::from_secs(60);

fn refund(order: u64) -> Value {
    json!({ "order_id": order, "amount_cents": 500 })
}

fn gated(options: HttpOptions) -> (Arc<Gate>, HttpFixture) {
    let gate = Arc::new(Gate::default());
    let host = Arc::new(test_host(|b| b.provider("payments", gate.clone())).host);
    (gate, HttpFixture::start(host, options, &["alice", "bob"]))
}

fn streaming() -> HttpOptions {
    HttpOptions {
        prefer_sse: true,
        ..HttpOptions::default()
    }
}

/// Reads from `stream` until what was read contains `needle` and ends an event
/// (bounded); all of it.
fn read_until(stream: &mut TcpStream, needle: &str) -> String {
    stream.set_read_timeout(Some(WAIT)).unwrap();
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        let text = String::from_utf8_lossy(&seen);
        if text.contains(needle) && text.ends_with("\n\n") {
            return text.into_owned();
        }
        drop(text);
        match stream.read(&mut byte) {
            Ok(0) => panic!(
                "the stream ended before {needle:?}: {}",
                String::from_utf8_lossy(&seen)
            ),
            Ok(_) => seen.push(byte[0]),
            Err(e) => panic!("reading the stream: {e}"),
        }
    }
}

/// The `id:` of every event in `text`, in order.
fn event_ids(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .map(str::to_owned)
        .collect()
}

/// The messages of the events in `text`.
fn messages(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

/// `GET /mcp` on `client`'s session with `Last-Event-ID: last`.
fn resume(http: &HttpFixture, principal: &str, client: &HttpClient, last: &str) -> Reply {
    let mut head = format!(
        "GET /mcp HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\nAuthorization: Bearer {}\r\nLast-Event-ID: {last}\r\nConnection: close\r\n",
        http.running.addr(),
        http.tokens[principal],
    );
    if let Some(session) = &client.session {
        head.push_str(&format!("Mcp-Session-Id: {session}\r\n"));
    }
    head.push_str("\r\n");
    let mut stream = TcpStream::connect(http.running.addr()).unwrap();
    stream.write_all(head.as_bytes()).unwrap();
    read_reply(&mut stream)
}

#[test]
fn a_stream_broken_before_the_answer_is_resumed_with_last_event_id_and_the_effect_ran_once() {
    let (gate, http) = gated(streaming());
    let mut alice = http.client("alice");
    assert_eq!(alice.initialize("2025-11-25").status, 200);
    let call = alice.message(
        "tools/call",
        json!({ "name": "payments_refund", "arguments": refund(7) }),
    );
    let mut stream = alice.send_raw(&alice.post_bytes(&call.to_string(), &[]));
    // The priming event comes at once, before the call answers: an id to resume from.
    let primed = read_until(&mut stream, "data:");
    assert!(primed.contains("text/event-stream"), "{primed}");
    assert!(primed.contains("retry: "), "{primed}");
    let ids = event_ids(&primed);
    assert_eq!(ids.len(), 1, "{primed}");
    gate.wait_entered(1);
    // The connection breaks before the answer.
    drop(stream);
    gate.open();

    let resumed = resume(&http, "alice", &alice, &ids[0]);
    assert_eq!(resumed.status, 200, "{resumed:?}");
    assert_eq!(resumed.header("content-type"), Some("text/event-stream"));
    let heard = messages(&resumed.body);
    let answer = heard.last().expect("the answer");
    assert_eq!(answer["id"], call["id"], "{heard:?}");
    assert_eq!(
        answer["result"]["structuredContent"]["refund_id"], "re_0001",
        "{answer}"
    );
    assert_eq!(gate.applied(), 1, "one refund");
    assert_eq!(gate.attempts().len(), 1, "one attempt");
    // Every event resumed has an id after the one resumed from.
    let later = event_ids(&resumed.body);
    assert!(!later.is_empty() && !later.contains(&ids[0]), "{later:?}");

    // Redelivered on asking again, still without running anything.
    let again = resume(&http, "alice", &alice, &ids[0]);
    assert_eq!(messages(&again.body).last(), Some(answer));
    assert_eq!(gate.attempts().len(), 1);
}

#[test]
fn unknown_and_foreign_event_ids_are_refused_and_no_session_reads_anothers_events() {
    let (gate, http) = gated(streaming());
    gate.open();
    let mut alice = http.client("alice");
    assert_eq!(alice.initialize("2025-11-25").status, 200);
    let answered = alice.request(
        "tools/call",
        json!({ "name": "echo", "arguments": { "message": "mine" } }),
    );
    let ids = event_ids(&answered.body);
    assert_eq!(ids.len(), 2, "priming and answer: {answered:?}");
    let priming = &ids[0];

    let malformed = resume(&http, "alice", &alice, "nonsense");
    assert_eq!(malformed.status, 400, "{malformed:?}");
    assert!(
        malformed.message()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not an event id of this server"),
        "{malformed:?}"
    );
    let (_, rest) = priming.split_once('-').unwrap();
    let foreign = resume(&http, "alice", &alice, &format!("0123456789abcdef-{rest}"));
    assert_eq!(foreign.status, 404, "{foreign:?}");
    assert!(
        foreign.message()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not an event of this session"),
        "{foreign:?}"
    );

    // Alice's other session cannot read the first one's events with its ids.
    let mut other = http.client("alice");
    assert_eq!(other.initialize("2025-11-25").status, 200);
    let elsewhere = resume(&http, "alice", &other, priming);
    assert_eq!(elsewhere.status, 404, "{elsewhere:?}");
    assert!(!elsewhere.body.contains("mine"), "{elsewhere:?}");
    // Nor bob, with alice's session id: no such session for him.
    let mut bob = http.client("bob");
    bob.session = alice.session.clone();
    let bobs = resume(&http, "bob", &bob, priming);
    assert_eq!(bobs.status, 404, "{bobs:?}");
    assert!(!bobs.body.contains("mine"), "{bobs:?}");

    // The opposite case: the session's own id reads its answer.
    let own = resume(&http, "alice", &alice, priming);
    assert_eq!(own.status, 200, "{own:?}");
    assert_eq!(
        messages(&own.body)[0]["result"]["structuredContent"]["echo"],
        "mine"
    );
}

#[test]
fn a_held_stream_is_ended_after_priming_and_the_answer_fetched_with_last_event_id() {
    let (gate, http) = gated(HttpOptions {
        stream_hold: Some(Duration::ZERO),
        ..streaming()
    });
    let mut alice = http.client("alice");
    assert_eq!(alice.initialize("2025-11-25").status, 200);
    let call = alice.message(
        "tools/call",
        json!({ "name": "payments_refund", "arguments": refund(9) }),
    );
    // The stream ends after its priming event while the call is held.
    let polled = alice.post(&call, &[]);
    assert_eq!(polled.status, 200);
    assert!(messages(&polled.body).is_empty(), "{polled:?}");
    let ids = event_ids(&polled.body);
    assert_eq!(ids.len(), 1, "{polled:?}");
    gate.wait_entered(1);
    gate.open();
    let resumed = resume(&http, "alice", &alice, &ids[0]);
    let answer = messages(&resumed.body).pop().expect("the answer");
    assert_eq!(
        answer["result"]["structuredContent"]["refund_id"],
        "re_0001"
    );
    assert_eq!(gate.applied(), 1);

    // A session at an older revision gets no priming event: no id to come back
    // with, so its stream is held to the answer.
    let mut older = http.client("alice");
    assert_eq!(older.initialize("2025-06-18").status, 200);
    let whole = older.request(
        "tools/call",
        json!({ "name": "echo", "arguments": { "message": "held" } }),
    );
    assert_eq!(
        messages(&whole.body)[0]["result"]["structuredContent"]["echo"],
        "held"
    );
}

#[test]
fn over_http_a_waiting_duplicate_hears_the_host_say_so_before_the_answer_is_ready() {
    let (gate, http) = gated(HttpOptions::default());
    let mut alice = http.client("alice");
    assert_eq!(alice.initialize("2025-11-25").status, 200);
    let first = alice.message(
        "tools/call",
        json!({ "name": "payments_refund", "arguments": refund(3) }),
    );
    let mut first = alice.send_raw(&alice.post_bytes(&first.to_string(), &[]));
    gate.wait_entered(1);

    let duplicate = alice.message(
        "tools/call",
        json!({ "name": "payments_refund", "arguments": refund(3), "_meta": { "progressToken": "w" } }),
    );
    let mut duplicate = alice.send_raw(&alice.post_bytes(&duplicate.to_string(), &[]));
    // Heard while the first call is still held at the downstream: live, not
    // gathered with the answer.
    let heard = read_until(&mut duplicate, "waiting for the first call with this key");
    let progress = messages(&heard).pop().unwrap();
    assert_eq!(progress["method"], "notifications/progress", "{progress}");
    assert_eq!(progress["params"]["progressToken"], "w");
    assert_eq!(progress["params"]["progress"], 0.0);
    assert_eq!(gate.applied(), 0, "the answer is not ready yet");

    gate.open();
    let mut rest = String::new();
    duplicate.read_to_string(&mut rest).unwrap();
    let answer = messages(&rest).pop().expect("the answer");
    assert_eq!(
        answer["result"]["_meta"]["dev.justonce/replayed"], true,
        "{answer}"
    );
    assert_eq!(
        answer["result"]["structuredContent"]["refund_id"],
        "re_0001"
    );
    let first = read_reply(&mut first);
    assert_eq!(
        first.tool_result()["structuredContent"]["refund_id"],
        "re_0001"
    );
    assert_eq!(gate.applied(), 1);
}

#[test]
fn over_stdio_an_effect_retried_under_its_key_is_told_as_progress() {
    // The mailbox loses its first answer per key: the host retries under the key.
    let host = Arc::new(test_host_with_mail(1, |b| b).host);
    let (mut client, _server) = serve_in_process(host, ServerConfig::default());
    client.initialize(VERSION);
    let args: Value = serde_json::from_str(&receipt_args(11, "ada@example.com")).unwrap();
    let answer = client.call("send_receipt", args.clone(), json!({ "progressToken": 5 }));
    assert!(answer.get("result").is_some(), "{answer}");
    let held = client.next_message();
    assert_eq!(held["method"], "notifications/progress", "{held}");
    assert_eq!(held["params"]["progressToken"], 5);
    let message = held["params"]["message"].as_str().unwrap();
    assert!(
        message.contains("retrying effect #0 (mail) under the same key, attempt 2"),
        "{message}"
    );

    // The opposite case: no token, nothing told.
    let quiet = client.call(
        "send_receipt",
        args,
        json!({ "dev.justonce/conversation": "other" }),
    );
    assert!(quiet.get("result").is_some(), "{quiet}");
    let rest = client.close();
    assert!(
        rest.iter().all(|m| m.get("method").is_none()),
        "no other notification: {rest:?}"
    );
}
