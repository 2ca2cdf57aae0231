//! MCP on Streamable HTTP, in process on 127.0.0.1: who may call (tokens, origins),
//! whose keys are whose (principals), and what a misbehaving client gets (caps,
//! timeouts, a hang-up mid-call), each with the case that must pass beside it.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use justonce::__private::{HttpOptions, ServerOptions};
use justonce::Host;
use serde_json::{Value, json};

use crate::support::gate::Gate;
use crate::support::mcp_http::{HttpClient, HttpFixture, read_reply};
use crate::support::{FakePayments, Fault, invocation_count, test_host};

fn refund(order: u64) -> Value {
    json!({ "order_id": order, "amount_cents": 500 })
}

fn conversation(id: &str) -> Value {
    json!({ "_meta": { "dev.justonce/conversation": id } })
}

fn payments_host(payments: Arc<FakePayments>) -> Arc<Host> {
    Arc::new(test_host(|b| b.provider("payments", payments)).host)
}

/// A server whose tools reach a downstream that answers, with the default options.
fn plain(principals: &[&str]) -> HttpFixture {
    HttpFixture::start(
        payments_host(Arc::new(FakePayments::new(Fault::None))),
        HttpOptions::default(),
        principals,
    )
}

/// Sends a stateless (2026-07-28) `payments_refund` of `order` on a connection of its
/// own and returns the connection unread: the call runs while the test goes on.
fn send_refund(client: &mut HttpClient, order: u64) -> TcpStream {
    let message = client.message("tools/call", json!({ "name": "payments_refund", "arguments": refund(order), "_meta": { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} } }));
    let headers = [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "payments_refund"),
    ];
    client.send_raw(&client.post_bytes(&message.to_string(), &headers))
}

fn meta(result: &Value, key: &str) -> Value {
    result["_meta"][format!("dev.justonce/{key}")].clone()
}

#[test]
fn two_principals_sending_the_same_call_and_key_each_get_their_own_effect_and_answer() {
    let payments = Arc::new(FakePayments::new(Fault::None));
    let host = payments_host(payments.clone());
    let http = HttpFixture::start(host.clone(), HttpOptions::default(), &["alice", "bob"]);
    let same =
        json!({ "idempotencyKey": "refund-4417", "_meta": { "dev.justonce/conversation": "c" } });

    let alice = http
        .client("alice")
        .call("payments_refund", refund(4417), same.clone())
        .tool_result();
    let bob = http
        .client("bob")
        .call("payments_refund", refund(4417), same.clone())
        .tool_result();
    assert_eq!(payments.applied().len(), 2, "one refund each");
    assert_ne!(
        meta(&alice, "key"),
        meta(&bob, "key"),
        "keys are scoped by principal"
    );
    assert_eq!(meta(&alice, "replayed"), false);
    assert_eq!(
        meta(&bob, "replayed"),
        false,
        "bob's call ran, it was not alice's replayed"
    );
    assert_eq!(alice["structuredContent"]["refund_id"], "re_0001");
    assert_eq!(bob["structuredContent"]["refund_id"], "re_0002");

    // The opposite case: the same principal again is one call.
    let again = http
        .client("alice")
        .call("payments_refund", refund(4417), same)
        .tool_result();
    assert_eq!(meta(&again, "replayed"), true);
    assert_eq!(meta(&again, "key"), meta(&alice, "key"));
    assert_eq!(again["structuredContent"], alice["structuredContent"]);
    assert_eq!(payments.applied().len(), 2, "the retry sent nothing");

    // The journal says whose each call was.
    let alices = host.journal_of_principal("alice", 10).unwrap();
    assert_eq!(alices.len(), 1);
    assert_eq!(alices[0].conversation, r#"["alice","c"]"#);
    assert_eq!(host.journal(None, 10).unwrap().len(), 2);
}

#[test]
fn derived_keys_are_scoped_by_principal_too_and_the_meta_key_equals_the_param() {
    let payments = Arc::new(FakePayments::new(Fault::None));
    let http = HttpFixture::start(
        payments_host(payments.clone()),
        HttpOptions::default(),
        &["alice", "bob"],
    );
    let a = http
        .client("alice")
        .call("payments_refund", refund(1), conversation("c"))
        .tool_result();
    let b = http
        .client("bob")
        .call("payments_refund", refund(1), conversation("c"))
        .tool_result();
    assert_ne!(meta(&a, "key"), meta(&b, "key"));
    assert_eq!(payments.applied().len(), 2);

    let by_param = http
        .client("alice")
        .call(
            "payments_refund",
            refund(2),
            json!({ "idempotencyKey": "k-2" }),
        )
        .tool_result();
    let by_meta = http
        .client("alice")
        .call(
            "payments_refund",
            refund(2),
            json!({ "_meta": { "dev.justonce/idempotency-key": "k-2" } }),
        )
        .tool_result();
    assert_eq!(meta(&by_meta, "key"), meta(&by_param, "key"));
    assert_eq!(meta(&by_meta, "replayed"), true);
    assert_eq!(payments.applied().len(), 3);
}

#[test]
fn a_missing_or_unknown_token_is_401_with_www_authenticate_and_nothing_runs() {
    let payments = Arc::new(FakePayments::new(Fault::None));
    let host = payments_host(payments.clone());
    let http = HttpFixture::start(host.clone(), HttpOptions::default(), &["alice"]);
    let addr = http.running.addr();

    let anonymous = HttpClient::new(addr, None).call("payments_refund", refund(1), json!({}));
    assert_eq!(anonymous.status, 401);
    assert_eq!(
        anonymous.header("www-authenticate"),
        Some("Bearer realm=\"justonce\"")
    );
    let forged =
        HttpClient::new(addr, Some("jo_0000".into())).call("payments_refund", refund(1), json!({}));
    assert_eq!(forged.status, 401);
    assert!(
        forged
            .header("www-authenticate")
            .unwrap()
            .contains("invalid_token")
    );
    assert_eq!(forged.message()["error"]["code"], -32600);
    assert!(payments.attempts().is_empty(), "nothing ran");
    assert_eq!(invocation_count(&host), 0, "nothing was journaled");

    // The opposite case: the same call with a valid token runs.
    http.client("alice")
        .call("payments_refund", refund(1), json!({}))
        .tool_result();
    assert_eq!(payments.applied().len(), 1);

    // A revoked token is refused from the next request on.
    justonce::__private::tokens::revoke(&http.tokens_file, "alice").unwrap();
    assert_eq!(
        http.client("alice")
            .call("payments_refund", refund(2), json!({}))
            .status,
        401
    );
    assert_eq!(payments.applied().len(), 1);
}

#[test]
fn a_viewers_or_operators_token_is_403_at_mcp_and_nothing_runs() {
    use justonce::__private::tokens::{Role, add_with_role};
    let payments = Arc::new(FakePayments::new(Fault::None));
    let host = payments_host(payments.clone());
    let http = HttpFixture::start(host.clone(), HttpOptions::default(), &["alice"]);
    let addr = http.running.addr();
    for role in [Role::Viewer, Role::Operator] {
        let token = add_with_role(&http.tokens_file, role.as_str(), role).unwrap();
        let refused =
            HttpClient::new(addr, Some(token)).call("payments_refund", refund(1), json!({}));
        assert_eq!(refused.status, 403, "{refused:?}");
        assert!(refused.body.contains("/console"), "{}", refused.body);
    }
    assert!(payments.attempts().is_empty(), "nothing ran");
    assert_eq!(invocation_count(&host), 0, "nothing was journaled");
    // The opposite case: an agent's token (the default role) calls.
    http.client("alice")
        .call("payments_refund", refund(1), json!({}))
        .tool_result();
    assert_eq!(payments.applied().len(), 1);
}

#[test]
fn a_foreign_origin_or_host_is_refused_and_a_local_page_is_served() {
    let payments = Arc::new(FakePayments::new(Fault::None));
    let http = HttpFixture::start(
        payments_host(payments.clone()),
        HttpOptions::default(),
        &["alice"],
    );
    let mut client = http.client("alice");
    let list = client.message("tools/list", json!({ "_meta": { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} } }));
    let routing = [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/list"),
    ];
    let with = |extra: &[(&'static str, &'static str)]| {
        let mut headers = routing.to_vec();
        headers.extend_from_slice(extra);
        client.post(&list, &headers)
    };
    assert_eq!(with(&[("Origin", "https://evil.example")]).status, 403);
    assert_eq!(with(&[("Origin", "http://localhost:5173")]).status, 200);
    assert_eq!(with(&[]).status, 200, "no Origin: not a browser");

    let rebound = format!(
        "POST /mcp HTTP/1.1\r\nHost: evil.example\r\nContent-Type: application/json\r\nAuthorization: Bearer {}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}",
        http.tokens["alice"]
    );
    assert_eq!(
        read_reply(&mut client.send_raw(rebound.as_bytes())).status,
        421
    );
}

/// A request naming the stateless revision in its header without the envelope in
/// its body (none, or one without the protocol version) has invalid params
/// (-32602), as 2026-07-28 says, not an invalid request for want of a session.
#[test]
fn a_stateless_request_without_its_envelope_has_invalid_params() {
    let payments = Arc::new(FakePayments::new(Fault::None));
    let http = HttpFixture::start(
        payments_host(payments.clone()),
        HttpOptions::default(),
        &["alice"],
    );
    let mut client = http.client("alice");
    let routing = [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/list"),
    ];
    for params in [
        json!({}),
        json!({ "_meta": { "io.modelcontextprotocol/clientCapabilities": {} } }),
    ] {
        let message = client.message("tools/list", params.clone());
        let reply = client.post(&message, &routing);
        let message = reply.message();
        assert_eq!(message["error"]["code"], -32602, "{params}: {message}");
    }
    // The opposite: with its envelope the same request is served.
    let list = client.message("tools/list", json!({ "_meta": { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} } }));
    let served = client.post(&list, &routing).message();
    assert!(served["result"]["tools"].is_array(), "{served}");
}

#[test]
fn oversized_bodies_and_heads_are_refused_before_anything_runs() {
    let payments = Arc::new(FakePayments::new(Fault::None));
    let host = payments_host(payments.clone());
    let options = HttpOptions {
        server: ServerOptions {
            max_body_bytes: 1024,
            max_header_bytes: 2048,
            ..ServerOptions::default()
        },
        ..HttpOptions::default()
    };
    let http = HttpFixture::start(host.clone(), options, &["alice"]);
    let mut client = http.client("alice");
    let big = client.call(
        "payments_refund",
        json!({ "order_id": 1, "amount_cents": 5, "pad": "x".repeat(2000) }),
        json!({}),
    );
    assert_eq!(big.status, 413);
    let padding = "y".repeat(4000);
    let long_head = client.post(&json!({}), &[("X-Padding", padding.as_str())]);
    assert_eq!(long_head.status, 431);
    assert!(payments.attempts().is_empty());
    assert_eq!(invocation_count(&host), 0);
    // The opposite case: a call within the caps runs.
    client
        .call("payments_refund", refund(1), json!({}))
        .tool_result();
}

#[test]
fn a_principal_over_its_cap_gets_429_with_retry_after_and_another_principal_is_served() {
    let gate = Arc::new(Gate::default());
    let host = Arc::new(test_host(|b| b.provider("payments", gate.clone())).host);
    let options = HttpOptions {
        max_calls_per_principal: 1,
        ..HttpOptions::default()
    };
    let http = HttpFixture::start(host, options, &["alice", "bob"]);
    let mut alice = http.client("alice");
    let mut in_flight = send_refund(&mut alice, 1);
    gate.wait_entered(1);

    let full = http
        .client("alice")
        .call("echo", json!({ "message": "hi" }), json!({}));
    assert_eq!(full.status, 429);
    assert_eq!(full.header("retry-after"), Some("1"));
    assert_eq!(
        full.message()["error"]["code"],
        justonce::__private::TOO_MANY_CALLS
    );
    // The opposite case: bob has room of his own.
    let bobs = http
        .client("bob")
        .call("echo", json!({ "message": "hi" }), json!({}))
        .tool_result();
    assert_eq!(bobs["structuredContent"]["echo"], "hi");

    gate.open();
    let done = read_reply(&mut in_flight);
    assert_eq!(
        done.tool_result()["structuredContent"]["refund_id"],
        "re_0001"
    );
    // Alice's call finished, so she has room again.
    http.client("alice")
        .call("echo", json!({ "message": "again" }), json!({}))
        .tool_result();
}

#[test]
fn calls_held_in_their_tools_keep_no_other_client_waiting_and_each_finishes_once() {
    // The server reads every connection on one runtime thread: a call that blocks
    // must not hold it, however many block at once.
    let gate = Arc::new(Gate::default());
    let host = Arc::new(test_host(|b| b.provider("payments", gate.clone())).host);
    let http = HttpFixture::start(host, HttpOptions::default(), &["alice"]);
    let mut held: Vec<_> = (1..=3)
        .map(|order| send_refund(&mut http.client("alice"), order))
        .collect();
    gate.wait_entered(3);

    // Three calls are inside their tool; a fourth client is answered meanwhile.
    let echoed = http
        .client("alice")
        .call("echo", json!({ "message": "meanwhile" }), json!({}))
        .tool_result();
    assert_eq!(echoed["structuredContent"]["echo"], "meanwhile");
    assert_eq!(gate.applied(), 0, "no held call has finished yet");

    gate.open();
    let mut refunds: Vec<String> = held
        .iter_mut()
        .map(|stream| {
            read_reply(stream).tool_result()["structuredContent"]["refund_id"]
                .as_str()
                .expect("a refund id")
                .to_owned()
        })
        .collect();
    refunds.sort();
    refunds.dedup();
    assert_eq!(
        refunds.len(),
        3,
        "three different calls, three refunds: {refunds:?}"
    );
    assert_eq!(gate.applied(), 3);
    assert_eq!(gate.attempts().len(), 3, "each downstream call once");
}

#[test]
fn a_client_that_hangs_up_mid_call_does_not_cancel_it_and_the_retry_gets_its_outcome() {
    let gate = Arc::new(Gate::default());
    let host = Arc::new(test_host(|b| b.provider("payments", gate.clone())).host);
    let http = HttpFixture::start(host.clone(), HttpOptions::default(), &["alice"]);
    let mut client = http.client("alice");
    let stream = send_refund(&mut client, 7);
    gate.wait_entered(1);
    drop(stream);
    gate.open();

    // The retry meets the first call in the guard (or its record) and gets its outcome.
    let retry = client
        .call("payments_refund", refund(7), json!({}))
        .tool_result();
    assert_eq!(meta(&retry, "replayed"), true, "{retry}");
    assert_eq!(retry["structuredContent"]["refund_id"], "re_0001");
    assert_eq!(gate.applied(), 1, "one refund");
    assert_eq!(
        gate.attempts().len(),
        1,
        "the retry never reached the downstream"
    );
    assert_eq!(host.journal(None, 10).unwrap()[0].state, "completed");
}

#[test]
fn a_client_too_slow_to_send_its_request_is_cut_off_and_a_prompt_one_served() {
    let http = HttpFixture::start(
        payments_host(Arc::new(FakePayments::new(Fault::None))),
        HttpOptions {
            server: ServerOptions {
                request_timeout: Duration::from_millis(200),
                ..ServerOptions::default()
            },
            ..HttpOptions::default()
        },
        &["alice"],
    );
    let client = http.client("alice");
    let bytes = client.post_bytes("{}", &[]);
    let mut slow = client.send_raw(&bytes[..20]);
    // The server answers 408 and closes once its bound passes: no sleep here.
    let reply = read_reply(&mut slow);
    assert_eq!(reply.status, 408);
    let mut rest = Vec::new();
    assert_eq!(slow.read_to_end(&mut rest).unwrap(), 0, "closed");
    assert_eq!(
        http.client("alice")
            .call("echo", json!({"message": "m"}), json!({}))
            .status,
        200
    );
}

#[test]
fn a_session_is_opened_by_initialize_required_after_it_and_its_openers_alone() {
    let http = plain(&["alice", "bob"]);
    let mut alice = http.client("alice");
    assert_eq!(
        alice.request("tools/list", json!({})).status,
        400,
        "no session yet"
    );
    let init = alice.initialize("2025-06-18");
    assert_eq!(init.status, 200);
    assert_eq!(init.message()["result"]["protocolVersion"], "2025-06-18");
    let session = alice.session.clone().expect("an Mcp-Session-Id");
    let list = alice.request("tools/list", json!({}));
    assert_eq!(list.status, 200);
    assert!(list.message()["result"]["tools"].as_array().unwrap().len() > 1);
    // Any revision the server speaks is accepted on the session, as the official
    // SDKs do (the conformance suite's server-sse-multiple-streams sends 2025-03-26
    // on a 2025-11-25 session); an unknown one is 400.
    for (version, status) in [("2031-01-01", 400), ("2025-03-26", 200)] {
        let message = alice.message("ping", json!({}));
        let reply = alice.post(&message, &[("MCP-Protocol-Version", version)]);
        assert_eq!(reply.status, status, "{version}: {reply:?}");
    }
    let call = alice.request(
        "tools/call",
        json!({ "name": "echo", "arguments": { "message": "s" } }),
    );
    assert_eq!(call.tool_result()["structuredContent"]["echo"], "s");

    let mut bob = http.client("bob");
    bob.session = Some(session.clone());
    assert_eq!(
        bob.request("tools/list", json!({})).status,
        404,
        "alice's session is not bob's"
    );

    let delete = format!(
        "DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\nMcp-Session-Id: {session}\r\nConnection: close\r\n\r\n",
        http.tokens["alice"]
    );
    assert_eq!(
        read_reply(&mut alice.send_raw(delete.as_bytes())).status,
        204
    );
    assert_eq!(alice.request("tools/list", json!({})).status, 404, "ended");
}

#[test]
fn a_stateless_request_must_repeat_its_body_in_the_routing_headers() {
    let http = plain(&["alice"]);
    let mut client = http.client("alice");
    let ok = client.call("echo", json!({ "message": "x" }), json!({}));
    assert_eq!(ok.tool_result()["resultType"], "complete");
    let message = client.message("tools/call", json!({ "name": "echo", "arguments": { "message": "x" }, "_meta": { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} } }));
    let lying = client.post(
        &message,
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "other"),
        ],
    );
    assert_eq!(lying.status, 400);
    assert_eq!(lying.message()["error"]["code"], -32020);
    let unknown = client.stateless("no/such", json!({}));
    assert_eq!(unknown.status, 404);
    assert_eq!(unknown.message()["error"]["code"], -32601);
}

#[test]
fn a_client_that_takes_only_a_stream_gets_one_event_and_the_connection_stays_usable() {
    let http = plain(&["alice"]);
    let mut client = http.client("alice");
    let init = client.message("initialize", json!({ "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "t", "version": "0" } }));
    let body = init.to_string();
    let request = |body: &str, session: Option<&str>| {
        format!(
            "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\nAuthorization: Bearer {}\r\n{}Content-Length: {}\r\n\r\n{body}",
            http.tokens["alice"],
            session
                .map(|s| format!("Mcp-Session-Id: {s}\r\n"))
                .unwrap_or_default(),
            body.len()
        )
    };
    let mut stream = client.send_raw(request(&body, None).as_bytes());
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    while !seen.ends_with(b"0\r\n\r\n") {
        assert_eq!(
            stream.read(&mut byte).unwrap(),
            1,
            "the stream ended early: {:?}",
            String::from_utf8_lossy(&seen)
        );
        seen.push(byte[0]);
    }
    let text = String::from_utf8(seen).unwrap();
    assert!(text.contains("content-type: text/event-stream"), "{text}");
    assert!(text.contains("event: message\ndata: {"), "{text}");
    let session = text
        .lines()
        .find_map(|l| l.strip_prefix("mcp-session-id: "))
        .expect("a session id")
        .to_owned();
    // The same connection carries the next request.
    let ping = client.message("ping", json!({}));
    stream
        .write_all(request(&ping.to_string(), Some(&session)).as_bytes())
        .unwrap();
    let mut more = [0u8; 256];
    let n = stream.read(&mut more).unwrap();
    assert!(String::from_utf8_lossy(&more[..n]).starts_with("HTTP/1.1 200"));
}

#[test]
fn a_client_that_waits_for_a_go_ahead_gets_one_before_it_sends_its_body() {
    let http = plain(&["alice"]);
    let mut client = http.client("alice");
    let message = client.message("tools/call", json!({ "name": "echo", "arguments": { "message": "e" }, "_meta": { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} } }));
    let body = message.to_string();
    let bytes = client.post_bytes(
        &body,
        &[
            ("Expect", "100-continue"),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "echo"),
        ],
    );
    let head_len = bytes.len() - body.len();
    let mut stream = client.send_raw(&bytes[..head_len]);
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut interim = [0u8; 25];
    stream.read_exact(&mut interim).unwrap();
    assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
    stream.write_all(body.as_bytes()).unwrap();
    assert_eq!(
        read_reply(&mut stream).tool_result()["structuredContent"]["echo"],
        "e"
    );
}

#[test]
fn two_hundred_silent_half_heads_do_not_keep_an_authenticated_initialize_from_being_answered() {
    let http = plain(&["alice"]);
    let addr = http.running.addr();
    // Each sends half a request head, unauthenticated, and goes quiet.
    let silent: Vec<std::net::TcpStream> = (0..200)
        .map(|_| {
            let mut s = std::net::TcpStream::connect(addr).expect("connect");
            s.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty")
                .expect("send half a head");
            s
        })
        .collect();
    let mut alice = http.client("alice");
    let init = alice.initialize("2025-11-25");
    assert_eq!(init.status, 200, "{init:?}");
    assert_eq!(init.message()["result"]["protocolVersion"], "2025-11-25");
    assert!(alice.session.is_some(), "a session was opened");
    // Answered while the 200 sockets are still open on this side.
    assert_eq!(silent.len(), 200);
    assert_eq!(alice.request("tools/list", json!({})).status, 200);
    drop(silent);
}

#[test]
fn one_principals_many_initializes_cannot_end_another_principals_session() {
    let http = HttpFixture::start(
        payments_host(Arc::new(FakePayments::new(Fault::None))),
        HttpOptions {
            max_sessions: 4,
            ..HttpOptions::default()
        },
        &["alice", "bob"],
    );
    let mut bob = http.client("bob");
    assert_eq!(bob.initialize("2025-11-25").status, 200);
    let mut refused = Vec::new();
    for _ in 0..10 {
        let mut alice = http.client("alice");
        let init = alice.initialize("2025-11-25");
        if init.status != 200 {
            refused.push(init);
        }
    }
    assert!(!refused.is_empty(), "alice's sessions are capped");
    for reply in &refused {
        assert!(
            matches!(reply.status, 429 | 503),
            "refused with 429 (her cap) or 503 (the server's): {reply:?}"
        );
        let message = reply.message()["error"]["message"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(message.contains("sessions"), "{message}");
        assert!(reply.header("mcp-session-id").is_none());
    }
    // Bob's session was not forgotten to make room for alice's.
    assert_eq!(bob.request("tools/list", json!({})).status, 200);
}
