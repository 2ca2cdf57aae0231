//! `/healthz`, `/livez` and `/readyz` (issue 55): open to any prober on the MCP
//! listener and the `--metrics` one and saying nothing but a word or a reason; ready
//! only while not draining, with tools, and with a journal that answers (a real
//! PostgreSQL made unreachable and back, the metrics then saying so and keeping the
//! gauges read from it); and the drain on SIGTERM: not ready, no new session, the
//! calls in flight finished, its start and end in the log.

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;

use justonce::__private::{HttpOptions, MetricsServer};
use serde_json::json;

use crate::metrics::{scrape, value};
use crate::support::gate::Gate;
use crate::support::mcp::McpProcess;
use crate::support::mcp_http::{HttpClient, HttpFixture, HttpProcess, Reply, read_reply};
use crate::support::prometheus::free_port;
use crate::support::{FakePayments, Fault, test_host};

/// `METHOD PATH` on `addr` without a token, with `extra` header lines.
fn probe_with(addr: SocketAddr, method: &str, path: &str, extra: &str) -> Reply {
    let request =
        format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{extra}Connection: close\r\n\r\n");
    read_reply(&mut HttpClient::new(addr, None).send_raw(request.as_bytes()))
}

/// `GET PATH` on `addr` without a token: the status and the body.
pub(crate) fn probe(addr: SocketAddr, path: &str) -> (u16, String) {
    let reply = probe_with(addr, "GET", path, "");
    (reply.status, reply.body)
}

fn ok() -> (u16, String) {
    (200, "ok\n".to_owned())
}

/// Opens a gate when dropped: a test that fails while a call waits at it ends,
/// instead of stopping a server that waits for that call.
struct OpenOnDrop(Arc<Gate>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.open();
    }
}

#[test]
fn the_probes_answer_anyone_on_the_mcp_listener_and_tell_nothing_else() {
    let host = Arc::new(test_host(|b| b).host);
    let http = HttpFixture::start(host, HttpOptions::default(), &["agent"]);
    let addr = http.running.addr();

    for path in ["/healthz", "/livez", "/readyz", "/readyz?verbose=1"] {
        let reply = probe_with(addr, "GET", path, "");
        assert_eq!((reply.status, reply.body.as_str()), (200, "ok\n"), "{path}");
        assert_eq!(reply.header("cache-control"), Some("no-store"), "{path}");
    }
    // A page of another site may probe as well: the answer says nothing.
    let foreign = probe_with(addr, "GET", "/readyz", "Origin: https://evil.example\r\n");
    assert_eq!((foreign.status, foreign.body.as_str()), (200, "ok\n"));
    let head = probe_with(addr, "HEAD", "/healthz", "");
    assert_eq!((head.status, head.body.as_str()), (200, ""));
    let posted = probe_with(addr, "POST", "/readyz", "Content-Length: 0\r\n");
    assert_eq!(posted.status, 405);
    assert_eq!(posted.header("allow"), Some("GET, HEAD"));

    // The opposite: what is beside them still needs a token.
    assert_eq!(probe(addr, "/metrics").0, 401);
    assert_eq!(probe(addr, "/healthz/more").0, 404);
}

#[test]
fn a_draining_server_is_not_ready_and_opens_no_session_while_its_calls_in_flight_finish() {
    let gate = Arc::new(Gate::default());
    let host = Arc::new(test_host(|b| b.provider("payments", gate.clone())).host);
    let http = HttpFixture::start(Arc::clone(&host), HttpOptions::default(), &["agent"]);
    let metrics = MetricsServer::new(Arc::clone(&host), None)
        .spawn(TcpListener::bind("127.0.0.1:0").unwrap())
        .unwrap();
    let _open = OpenOnDrop(Arc::clone(&gate));
    let listeners = [http.running.addr(), metrics.addr()];
    for addr in listeners {
        assert_eq!(probe(addr, "/readyz"), ok(), "{addr} before the drain");
    }
    let mut opened = http.client("agent");
    assert_eq!(opened.initialize("2025-06-18").status, 200);
    let mut caller = http.client("agent");
    let in_flight = std::thread::spawn(move || {
        caller.call(
            "payments_refund",
            json!({ "order_id": 1, "amount_cents": 500 }),
            json!({}),
        )
    });
    gate.wait_entered(1);

    // What SIGTERM does in `serve`.
    http.shutdown.stop();

    for addr in listeners {
        assert_eq!(
            probe(addr, "/readyz"),
            (503, "draining\n".to_owned()),
            "{addr}"
        );
        assert_eq!(
            probe(addr, "/healthz"),
            ok(),
            "{addr}: the process still serves"
        );
    }
    let refused = http.client("agent").initialize("2025-06-18");
    assert_eq!(refused.status, 503, "{refused:?}");
    assert_eq!(refused.header("retry-after"), Some("1"));
    assert_eq!(refused.header("mcp-session-id"), None);
    let why = refused.message()["error"]["message"].to_string();
    assert!(why.contains("draining"), "{why}");
    let new_call = http
        .client("agent")
        .call("echo", json!({ "message": "hi" }), json!({}));
    assert_eq!(new_call.status, 503, "{new_call:?}");
    let why = new_call.message()["error"]["message"].to_string();
    assert!(
        why.contains("draining") && why.contains("safe to retry"),
        "{why}"
    );
    // The session opened before goes on being answered.
    let ping = opened.request("ping", json!({}));
    assert_eq!(ping.status, 200, "{ping:?}");
    assert!(ping.message().get("error").is_none(), "{ping:?}");

    gate.open();
    let answered = in_flight.join().unwrap().tool_result();
    assert_eq!(answered["structuredContent"]["refund_id"], "re_0001");
    assert_eq!(gate.applied(), 1);
}

#[test]
fn a_host_drained_through_the_library_stops_its_mcp_server_as_well() {
    let host = Arc::new(test_host(|b| b).host);
    let http = HttpFixture::start(Arc::clone(&host), HttpOptions::default(), &["agent"]);
    assert!(host.drain(), "the drain begins");
    assert!(!host.drain(), "and begins once");

    assert_eq!(
        probe(http.running.addr(), "/readyz"),
        (503, "draining\n".to_owned())
    );
    assert_eq!(http.client("agent").initialize("2025-06-18").status, 503);
    let call = http
        .client("agent")
        .call("echo", json!({ "message": "hi" }), json!({}));
    assert_eq!(call.status, 503, "{call:?}");
}

#[test]
fn a_host_without_tools_is_not_ready_but_alive() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("tools");
    std::fs::create_dir(&empty).unwrap();
    let server = HttpProcess::spawn(
        &dir.path().join("state.db"),
        &["--tools", empty.to_str().unwrap()],
    );
    assert_eq!(
        probe(server.addr, "/readyz"),
        (503, "no tools loaded\n".to_owned())
    );
    assert_eq!(probe(server.addr, "/livez"), ok());
}

#[test]
fn sigterm_drains_serve_and_logs_the_drain_at_the_default_level() {
    let dir = tempfile::tempdir().unwrap();
    let metrics: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let mut server = McpProcess::spawn(
        &dir.path().join("state.db"),
        &["--metrics", &metrics.to_string(), "--deliver-every-ms", "0"],
        // The default filter of the log.
        "warn",
    );
    server.client.initialize("2025-06-18");
    assert_eq!(probe(metrics, "/readyz"), ok());

    let (code, log) = server.signal_and_wait("TERM");
    assert_eq!(code, Some(0), "{log}");
    let draining = log.find("draining: ").unwrap_or_else(|| panic!("{log}"));
    let drained = log.find("drained: ").unwrap_or_else(|| panic!("{log}"));
    assert!(draining < drained, "{log}");
    assert!(log.contains("in_flight=0"), "{log}");
}

#[test]
fn readyz_and_the_metrics_follow_a_postgresql_journal_going_away_and_coming_back() {
    let Some(cluster) = justonce::__private::postgres_testing::cluster(
        "readyz_and_the_metrics_follow_a_postgresql_journal_going_away_and_coming_back",
    ) else {
        return;
    };
    let url = cluster.database();
    let db = url.rsplit('/').next().unwrap().to_owned();
    let payments = Arc::new(FakePayments::new(Fault::AlwaysTimeout));
    let host = Arc::new(test_host(|b| b.provider("payments", payments).database(&url)).host);
    let http = HttpFixture::start(host, HttpOptions::default(), &["agent"]);
    let addr = http.running.addr();
    let token = http.tokens["agent"].clone();
    assert_eq!(probe(addr, "/readyz"), ok());
    // An effect whose outcome stays unknown, for gauges that are not zero.
    let told = http
        .client("agent")
        .call(
            "payments_refund",
            json!({ "order_id": 1, "amount_cents": 500 }),
            json!({}),
        )
        .message();
    assert!(told.to_string().contains("outcome_unknown"), "{told}");
    let up = scrape(addr, Some(&token), "GET").body;
    assert_eq!(value(&up, "justonce_journal_up"), 1.0);
    assert_eq!(value(&up, "justonce_effects_pending"), 1.0);
    let version = format!(
        r#"justonce_build_info{{version="{}"}}"#,
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(value(&up, &version), 1.0);

    let mut admin = postgres::Client::connect(&cluster.admin_url(), postgres::NoTls).unwrap();
    admin
        .batch_execute(&format!(
            "ALTER DATABASE {db} ALLOW_CONNECTIONS false;
             SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{db}';"
        ))
        .unwrap();
    let (status, body) = probe(addr, "/readyz");
    assert_eq!(status, 503, "{body}");
    assert!(body.starts_with("journal unreachable: "), "{body}");
    assert_eq!(body.lines().count(), 1, "{body}");
    assert!(!body.contains(&db) && !body.contains("postgres"), "{body}");
    assert_eq!(probe(addr, "/healthz"), ok(), "alive all the same");
    let down = scrape(addr, Some(&token), "GET");
    assert_eq!(down.status, 200, "{down:?}");
    let down = down.body;
    assert_eq!(value(&down, "justonce_journal_up"), 0.0);
    for series in [
        "justonce_effects_pending",
        "justonce_effects_unresolved",
        "justonce_calls_stuck",
        r#"justonce_outbox_messages{state="pending"}"#,
    ] {
        assert_eq!(value(&down, series), value(&up, series), "{series} kept");
    }
    assert_eq!(value(&down, &version), 1.0);

    admin
        .batch_execute(&format!("ALTER DATABASE {db} ALLOW_CONNECTIONS true"))
        .unwrap();
    assert_eq!(probe(addr, "/readyz"), ok(), "ready again once it is back");
    let back = scrape(addr, Some(&token), "GET").body;
    assert_eq!(value(&back, "justonce_journal_up"), 1.0);
}

/// Forwards every connection to `listener` to the local port `to`, both ways: a
/// database server coming up, on the port its URL names.
fn forward(listener: TcpListener, to: u16) {
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(server) = std::net::TcpStream::connect(("127.0.0.1", to)) else {
                continue;
            };
            for (mut from, mut into) in [
                (client.try_clone().unwrap(), server.try_clone().unwrap()),
                (server, client),
            ] {
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from, &mut into);
                    let _ = into.shutdown(std::net::Shutdown::Both);
                });
            }
        }
    });
}

/// `serve --http 127.0.0.1:PORT` on `db` with `args`, its output piped.
fn serve_on(db: &str, port: u16, args: &[&str]) -> std::process::Child {
    crate::support::cli::justonce_command(Some(std::path::Path::new(db)))
        .args(["serve", "--http", &format!("127.0.0.1:{port}")])
        .args(["--deliver-every-ms", "0"])
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start justonce serve --http")
}

/// What `child` wrote on stderr, once killed.
fn log_of(mut child: std::process::Child) -> (Option<i32>, String) {
    let _ = child.kill();
    ended(child)
}

/// Its exit code and what it wrote on stderr, once `child` ended.
fn ended(mut child: std::process::Child) -> (Option<i32>, String) {
    let status = child.wait().unwrap();
    let mut log = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut log).unwrap();
    (status.code(), log)
}

#[test]
fn serve_waits_for_a_postgresql_journal_that_is_not_up_yet_alive_and_not_ready_meanwhile() {
    let Some(cluster) = justonce::__private::postgres_testing::cluster(
        "serve_waits_for_a_postgresql_journal_that_is_not_up_yet_alive_and_not_ready_meanwhile",
    ) else {
        return;
    };
    let url = cluster.database();
    let (server, db) = url.rsplit_once('/').unwrap();
    let real_port: u16 = server.rsplit_once(':').unwrap().1.parse().unwrap();
    // The URL names a port where nothing listens yet: connections are refused.
    let db_port = free_port();
    let waiting_url = format!("{}:{db_port}/{db}", server.rsplit_once(':').unwrap().0);
    let http_port = free_port();
    let addr: SocketAddr = format!("127.0.0.1:{http_port}").parse().unwrap();
    let mut child = serve_on(&waiting_url, http_port, &["--journal-wait-ms", "60000"]);

    // Alive and not ready while it waits.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "serve exited instead of waiting: {:?}",
            log_of(child)
        );
        assert!(std::time::Instant::now() < deadline, "serve never listened");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(probe(addr, "/healthz"), ok());
    assert_eq!(
        probe(addr, "/readyz"),
        (503, "journal unreachable: store_unavailable\n".to_owned())
    );

    // The database comes up on that port: serve starts, prints its URL, is ready.
    forward(
        TcpListener::bind(("127.0.0.1", db_port)).unwrap(),
        real_port,
    );
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), format!("http://{addr}/mcp"));
    assert_eq!(probe(addr, "/readyz"), ok());
    let (_, log) = log_of(child);
    assert!(log.contains("waiting for the journal: "), "{log}");
    assert!(log.contains("the journal answers: starting"), "{log}");
}

#[test]
fn serve_exits_5_for_a_journal_that_never_answers_and_at_once_for_one_that_refuses_it() {
    let Some(cluster) = justonce::__private::postgres_testing::cluster(
        "serve_exits_5_for_a_journal_that_never_answers_and_at_once_for_one_that_refuses_it",
    ) else {
        return;
    };
    let url = cluster.database();
    let (server, db) = url.rsplit_once('/').unwrap();
    let nowhere = format!(
        "{}:{}/{db}",
        server.rsplit_once(':').unwrap().0,
        free_port()
    );
    let (code, log) = ended(serve_on(
        &nowhere,
        free_port(),
        &["--journal-wait-ms", "300"],
    ));
    assert_eq!(code, Some(5), "{log}");
    assert!(log.contains("waiting for the journal: "), "{log}");
    assert!(
        log.contains("the journal did not answer within 300 ms"),
        "{log}"
    );

    // A login the server refuses is not waited for.
    let refused = url.replacen("postgres://postgres@", "postgres://no_such_role@", 1);
    let (code, log) = ended(serve_on(
        &refused,
        free_port(),
        &["--journal-wait-ms", "60000"],
    ));
    assert_eq!(code, Some(5), "{log}");
    assert!(!log.contains("waiting for the journal"), "{log}");
    assert!(log.contains("no_such_role"), "{log}");
}
