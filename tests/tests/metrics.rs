//! `/metrics`: the numbers a scrape shows after real calls over MCP (a run, a
//! replay, a retried effect), who may scrape, `serve --metrics` beside stdio, and a
//! real Prometheus scraping the server and answering a query with the calls made.

use std::net::SocketAddr;
use std::sync::Arc;

use justonce::__private::{HttpOptions, MetricsServer};
use serde_json::{Value, json};

use crate::support::mcp::McpProcess;
use crate::support::mcp_http::{HttpClient, HttpFixture, Reply, read_reply};
use crate::support::prometheus::{Target, TestPrometheus, free_port};
use crate::support::{FakePayments, Fault, test_host};

fn refund(order: u64) -> Value {
    json!({ "order_id": order, "amount_cents": 500 })
}

/// `GET /metrics` on `addr`, with `token` as a bearer token if any.
pub(crate) fn scrape(addr: SocketAddr, token: Option<&str>, method: &str) -> Reply {
    let auth = token.map(|t| ("Authorization", format!("Bearer {t}")));
    scrape_with(addr, method, &addr.to_string(), auth)
}

/// `METHOD /metrics` on `addr` with the `Host` header `host` and one more header if
/// any.
fn scrape_with(
    addr: SocketAddr,
    method: &str,
    host: &str,
    header: Option<(&str, String)>,
) -> Reply {
    let header = header
        .map(|(name, value)| format!("{name}: {value}\r\n"))
        .unwrap_or_default();
    let request =
        format!("{method} /metrics HTTP/1.1\r\nHost: {host}\r\n{header}Connection: close\r\n\r\n");
    read_reply(&mut HttpClient::new(addr, None).send_raw(request.as_bytes()))
}

/// The value of `series` (`name{labels}`, labels in the order the host writes them).
pub(crate) fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
}

/// A server whose payments downstream loses the first response of each key (so
/// every first call retries its effect once), with three calls made: order 1 run,
/// order 1 again (a replay), order 2 run.
fn three_calls() -> (HttpFixture, Arc<FakePayments>) {
    let payments = Arc::new(FakePayments::new(Fault::LoseFirst(1)));
    let host = Arc::new(test_host(|b| b.provider("payments", payments.clone())).host);
    let http = HttpFixture::start(host, HttpOptions::default(), &["agent", "prometheus"]);
    let mut agent = http.client("agent");
    let first = agent
        .call("payments_refund", refund(1), json!({}))
        .tool_result();
    let again = agent
        .call("payments_refund", refund(1), json!({}))
        .tool_result();
    agent
        .call("payments_refund", refund(2), json!({}))
        .tool_result();
    assert_eq!(first["_meta"]["dev.justonce/replayed"], false);
    assert_eq!(again["_meta"]["dev.justonce/replayed"], true);
    (http, payments)
}

#[test]
fn a_scrape_counts_each_call_once_a_replay_as_replayed_and_each_attempt() {
    let (http, payments) = three_calls();
    assert_eq!(payments.applied().len(), 2);

    let reply = scrape(http.running.addr(), Some(&http.tokens["prometheus"]), "GET");
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(
        reply.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let text = &reply.body;
    let calls = |outcome: &str| {
        value(
            text,
            &format!(r#"justonce_calls_total{{tool="payments_refund",outcome="{outcome}"}}"#),
        )
    };
    assert_eq!(calls("success"), 2.0, "two calls ran");
    assert_eq!(calls("replayed"), 1.0, "one was answered from the journal");
    assert_eq!(calls("outcome_unknown"), 0.0);
    let attempts = |result: &str| {
        value(
            text,
            &format!(r#"justonce_effect_attempts_total{{provider="payments",result="{result}"}}"#),
        )
    };
    assert_eq!(attempts("unknown"), 2.0, "each first response was lost");
    assert_eq!(attempts("ok"), 2.0);
    assert_eq!(
        value(
            text,
            r#"justonce_effect_retries_total{provider="payments",after="unknown"}"#
        ),
        2.0
    );
    assert_eq!(
        value(
            text,
            r#"justonce_effects_total{provider="payments",result="ok"}"#
        ),
        2.0
    );
    // Tools never called have their series too, at zero.
    assert_eq!(
        value(
            text,
            r#"justonce_calls_total{tool="echo",outcome="success"}"#
        ),
        0.0
    );
    assert_eq!(value(text, "justonce_calls_in_flight"), 0.0);
    assert!(value(text, "justonce_journal_commit_seconds_count") >= 2.0);
    assert_eq!(
        value(text, r#"justonce_journal_commit_seconds_bucket{le="+Inf"}"#),
        value(text, "justonce_journal_commit_seconds_count")
    );
    assert_eq!(
        value(text, r#"justonce_outbox_messages{state="pending"}"#),
        0.0
    );
    assert_eq!(value(text, "justonce_effects_unresolved"), 0.0);
    assert_eq!(
        value(text, "justonce_effects_pending"),
        0.0,
        "every effect was answered"
    );
}

#[test]
fn an_effect_whose_outcome_stays_unknown_shows_as_pending_and_its_call_as_outcome_unknown() {
    let payments = Arc::new(FakePayments::new(Fault::AlwaysTimeout));
    let host = Arc::new(test_host(|b| b.provider("payments", payments.clone())).host);
    let http = HttpFixture::start(host, HttpOptions::default(), &["agent"]);
    let before = scrape(http.running.addr(), Some(&http.tokens["agent"]), "GET").body;
    assert_eq!(value(&before, "justonce_effects_pending"), 0.0);

    let told = http
        .client("agent")
        .call("payments_refund", refund(1), json!({}))
        .message();
    assert!(told.to_string().contains("outcome_unknown"), "{told}");

    let text = scrape(http.running.addr(), Some(&http.tokens["agent"]), "GET").body;
    let tried = payments.attempts().len() as f64;
    assert!(tried > 1.0, "the effect was retried: {tried}");
    for (series, expected) in [
        (
            r#"justonce_calls_total{tool="payments_refund",outcome="outcome_unknown"}"#,
            1.0,
        ),
        (
            r#"justonce_calls_total{tool="payments_refund",outcome="success"}"#,
            0.0,
        ),
        ("justonce_effects_pending", 1.0),
        (
            r#"justonce_effects_total{provider="payments",result="outcome_unknown"}"#,
            1.0,
        ),
        (
            r#"justonce_effect_attempts_total{provider="payments",result="unknown"}"#,
            tried,
        ),
        (
            r#"justonce_effect_retries_total{provider="payments",after="unknown"}"#,
            tried - 1.0,
        ),
    ] {
        assert_eq!(value(&text, series), expected, "{series}");
    }
}

#[test]
fn a_scrape_needs_a_valid_token_and_a_get() {
    let (http, _) = three_calls();
    let addr = http.running.addr();

    let anonymous = scrape(addr, None, "GET");
    assert_eq!(anonymous.status, 401);
    assert_eq!(
        anonymous.header("www-authenticate"),
        Some("Bearer realm=\"justonce\"")
    );
    assert!(!anonymous.body.contains("justonce_calls_total"));
    let forged = scrape(addr, Some("jo_0000"), "GET");
    assert_eq!(forged.status, 401);
    assert!(!forged.body.contains("justonce_calls_total"));
    let posted = scrape(addr, Some(&http.tokens["agent"]), "POST");
    assert_eq!(posted.status, 405);
    assert_eq!(posted.header("allow"), Some("GET"));
    // The opposite case: any valid token, an agent's too, may read them.
    let read = scrape(addr, Some(&http.tokens["agent"]), "GET");
    assert_eq!(read.status, 200);
    assert!(read.body.contains("justonce_calls_total"));
}

#[test]
fn serve_over_stdio_serves_metrics_on_a_loopback_listener_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let mut server = McpProcess::spawn(
        &db,
        &["--metrics", &addr.to_string(), "--deliver-every-ms", "0"],
        "warn",
    );
    server.client.initialize("2025-06-18");
    let args =
        json!({ "orders": [{ "order_id": 1, "email": "ada@example.com", "amount_cents": 100 }] });
    let meta = json!({ "dev.justonce/conversation": "c" });
    let first = server
        .client
        .call("send_receipt", args.clone(), meta.clone());
    let again = server.client.call("send_receipt", args, meta);
    assert_eq!(
        first["result"]["_meta"]["dev.justonce/replayed"], false,
        "{first}"
    );
    assert_eq!(
        again["result"]["_meta"]["dev.justonce/replayed"], true,
        "{again}"
    );

    let reply = scrape(addr, None, "GET");
    assert_eq!(reply.status, 200, "open on loopback: {reply:?}");
    let calls = |outcome: &str| {
        value(
            &reply.body,
            &format!(r#"justonce_calls_total{{tool="send_receipt",outcome="{outcome}"}}"#),
        )
    };
    assert_eq!((calls("success"), calls("replayed")), (1.0, 1.0));
    assert_eq!(
        value(
            &reply.body,
            r#"justonce_effects_total{provider="mail",result="ok"}"#
        ),
        1.0
    );
    let elsewhere = read_reply(&mut HttpClient::new(addr, None).send_raw(
        format!("GET /mcp HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
    ));
    assert_eq!(elsewhere.status, 404, "it serves /metrics only");
    let (_, code, log) = server.close();
    assert_eq!(code, Some(0), "{log}");
}

/// `GET /metrics` on `addr` with the `Host` header `host` and an `Origin` if any.
fn scrape_from(addr: SocketAddr, host: &str, origin: Option<&str>) -> Reply {
    scrape_with(addr, "GET", host, origin.map(|o| ("Origin", o.to_owned())))
}

#[test]
fn a_metrics_listener_refuses_a_rebound_host_and_a_foreign_origin_as_the_http_server_does() {
    let host = Arc::new(test_host(|b| b).host);
    let running = MetricsServer::new(host, None)
        .with_allowed_origins(vec!["https://dashboard.example.com".into()])
        .spawn(std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .unwrap();
    let addr = running.addr();
    let port = addr.port();

    // A page on evil.example whose name now resolves to 127.0.0.1 (DNS rebinding).
    let rebound = scrape_from(addr, &format!("evil.example:{port}"), None);
    // (The body is not printed: on a failure it is the whole page of figures.)
    assert_eq!(rebound.status, 421, "a rebound Host was answered");
    assert!(!rebound.body.contains("justonce_calls_total"));
    let foreign = scrape_from(
        addr,
        &addr.to_string(),
        Some(&format!("http://evil.example:{port}")),
    );
    assert_eq!(foreign.status, 403, "a foreign Origin was answered");
    assert!(!foreign.body.contains("justonce_calls_total"));

    // The opposite cases: Prometheus (no Origin), a local page, an allowed origin.
    for (host, origin) in [
        (addr.to_string(), None),
        (
            format!("localhost:{port}"),
            Some(format!("http://localhost:{port}")),
        ),
        (
            addr.to_string(),
            Some("https://dashboard.example.com".to_owned()),
        ),
    ] {
        let reply = scrape_from(addr, &host, origin.as_deref());
        assert_eq!(reply.status, 200, "{host} {origin:?}: {reply:?}");
        assert!(reply.body.contains("justonce_calls_total"));
    }
}

#[test]
fn metrics_beyond_loopback_without_a_token_are_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let out = crate::support::cli::justonce_command(Some(&db))
        .args(["serve", "--metrics", "0.0.0.0:0"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("bearer token") && stderr.contains("justonce token add"),
        "{stderr}"
    );
}

#[test]
fn a_real_prometheus_scrapes_the_server_and_a_query_returns_the_calls_made() {
    let (http, _) = three_calls();
    let target = Target {
        address: http.running.addr().to_string(),
        token: Some(&http.tokens["prometheus"]),
    };
    let Some(prometheus) = TestPrometheus::start(
        "a_real_prometheus_scrapes_the_server_and_a_query_returns_the_calls_made",
        &target,
    ) else {
        return;
    };
    prometheus.wait_for_value(r#"up{job="justonce"}"#, 1.0);
    prometheus.wait_for_value(
        r#"sum(justonce_calls_total{job="justonce",tool="payments_refund",outcome="success"})"#,
        2.0,
    );
    prometheus.wait_for_value(
        r#"justonce_calls_total{job="justonce",tool="payments_refund",outcome="replayed"}"#,
        1.0,
    );
    // A call made now shows in a later scrape.
    http.client("agent")
        .call("payments_refund", refund(3), json!({}))
        .tool_result();
    prometheus.wait_for_value(
        r#"sum(justonce_calls_total{job="justonce",outcome="success"})"#,
        3.0,
    );
}
