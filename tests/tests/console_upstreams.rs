//! Upstream MCP servers seen and operated (issue 58): the console's Upstreams page
//! lists each upstream with its state, tools and last error, with buttons for an
//! operator only; an operator's restart starts it again now, a disable leaves its
//! tools out and refuses its calls naming the operator, an enable brings it back;
//! `/metrics` has its state and starts; `justonce upstreams` prints the same.

use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use justonce::__private::tokens::{Role, Tokens, add_with_role};
use justonce::__private::{Console, HttpServer, ServerOptions};
use justonce::CallRequest;
use justonce::upstream::UpstreamConfig;
use serde_json::{Value, json};

use crate::console::{get_with_token, login, send};
use crate::support::cli::justonce_command;
use crate::support::mcp_http::{HttpProcess, add_token, token};
use crate::support::test_host;

/// A stdio upstream that answers `initialize`, lists the tool `pay`, then reads on.
const HEALTHY: &str = r#"read -r l; echo '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"t","version":"0"}}}'; read -r l; read -r l; echo '{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"pay","inputSchema":{"type":"object"}}]}}'; while read -r l; do :; done"#;

/// The console's `/console/api/upstreams` entry of `name`.
fn upstream_json(addr: std::net::SocketAddr, token: &str, name: &str) -> Value {
    let reply = get_with_token(addr, "/console/api/upstreams", token);
    assert_eq!(reply.status, 200, "{reply:?}");
    let all: Value = serde_json::from_str(&reply.body).unwrap();
    all.as_array()
        .unwrap()
        .iter()
        .find(|u| u["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("{all}"))
}

/// Polls the API until `name` is in `state` with `starts` starts (a bound on a hang,
/// not a timed assertion).
fn wait_for(
    addr: std::net::SocketAddr,
    token: &str,
    name: &str,
    state: &str,
    starts: u64,
) -> Value {
    let bound = Instant::now() + Duration::from_secs(60);
    loop {
        let now = upstream_json(addr, token, name);
        if now["state"] == state && now["starts"] == starts {
            return now;
        }
        assert!(
            Instant::now() < bound,
            "never {state} after {starts} starts: {now}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// An operator's `action` on the upstream `name` through the console at `addr`, in
/// the session `cookie` with its `csrf` token.
fn act_on(
    addr: std::net::SocketAddr,
    (cookie, csrf): (&str, &str),
    name: &str,
    action: &str,
) -> crate::support::mcp_http::Reply {
    send(
        addr,
        "POST",
        "/console/upstream",
        Some(cookie),
        &[("csrf", csrf), ("name", name), ("action", action)],
    )
}

/// Asserts `metrics` has the line `series` (a series and its value).
fn assert_has(metrics: &str, series: &str) {
    assert!(
        metrics.lines().any(|l| l == series),
        "{series} in {metrics}"
    );
}

#[test]
fn an_operator_restarts_and_disables_an_upstream_from_the_console_and_a_viewer_only_sees_it() {
    let config = UpstreamConfig::command(vec!["sh".into(), "-c".into(), HEALTHY.into()]);
    let t = test_host(|b| b.upstream("shop", config));
    // Started, its first start waited for.
    let offered: Vec<String> = t
        .host
        .upstream_tools()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(offered, ["pay"]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens.json");
    let operator = add_with_role(&file, "ops", Role::Operator).unwrap();
    let viewer = add_with_role(&file, "eve", Role::Viewer).unwrap();
    let console = Console::for_host(&t.host, Tokens::open(&file).unwrap(), 3_600_000);
    let running = HttpServer::new(Tokens::open(&file).unwrap(), ServerOptions::default())
        .with_routes(Arc::new(console))
        .spawn(TcpListener::bind("127.0.0.1:0").unwrap())
        .unwrap();
    let addr = running.addr();

    // Both see it; only the operator has the buttons.
    let (ops_cookie, ops_csrf) = login(addr, &operator);
    let (eve_cookie, eve_csrf) = login(addr, &viewer);
    let page = send(addr, "GET", "/console/upstreams", Some(&ops_cookie), &[]);
    assert_eq!(page.status, 200, "{page:?}");
    for shown in [
        "<h2>shop</h2>",
        "state-ready\">ready",
        "<code>pay</code>",
        "Starts: 1",
        "value=\"restart\"",
        "value=\"disable\"",
    ] {
        assert!(page.body.contains(shown), "{shown} in {}", page.body);
    }
    let seen = send(addr, "GET", "/console/upstreams", Some(&eve_cookie), &[]);
    assert!(
        seen.body.contains("<h2>shop</h2>") && seen.body.contains("ready"),
        "{}",
        seen.body
    );
    assert!(
        !seen.body.contains("value=\"restart\""),
        "a viewer has no button: {}",
        seen.body
    );
    let refused = act_on(addr, (&eve_cookie, &eve_csrf), "shop", "restart");
    assert_eq!(refused.status, 403, "{refused:?}");
    assert_eq!(
        upstream_json(addr, &viewer, "shop")["starts"],
        1,
        "a viewer restarts nothing"
    );

    let operate = |action: &str| act_on(addr, (&ops_cookie, &ops_csrf), "shop", action);
    // The operator restarts it: started again now, ready again.
    let restarted = operate("restart");
    assert_eq!(restarted.status, 200, "{restarted:?}");
    assert!(
        restarted.body.contains("being started again now"),
        "{}",
        restarted.body
    );
    let ready = wait_for(addr, &operator, "shop", "ready", 2);
    assert_eq!(ready["tool_names"], json!(["pay"]), "{ready}");
    let metrics = t.host.metrics_text();
    assert_has(
        &metrics,
        "justonce_upstream_starts_total{upstream=\"shop\"} 2",
    );
    assert_has(
        &metrics,
        "justonce_upstream_state{upstream=\"shop\",state=\"ready\"} 1",
    );

    // Disabled: its tools left out, its call refused naming the operator, nothing sent.
    let disabled = operate("disable");
    assert_eq!(disabled.status, 200, "{disabled:?}");
    assert!(t.host.upstream_tools().is_empty());
    let refused = t
        .host
        .call(&CallRequest::new("pay", "{}").conversation("c"))
        .unwrap_err();
    assert_eq!(refused.kind(), "not_performed", "{refused}");
    assert!(
        refused
            .to_string()
            .contains("disabled by the operator `ops`"),
        "{refused}"
    );
    let now = upstream_json(addr, &operator, "shop");
    assert_eq!(
        (now["state"].as_str(), now["disabled_by"].as_str()),
        (Some("disabled"), Some("ops")),
        "{now}"
    );
    let page = send(addr, "GET", "/console/upstreams", Some(&ops_cookie), &[]);
    assert!(
        page.body.contains("value=\"enable\"") && !page.body.contains("value=\"restart\""),
        "{}",
        page.body
    );
    // The refused call waits on it.
    assert_eq!(now["waiting"].as_array().map(Vec::len), Some(1), "{now}");
    let metrics = t.host.metrics_text();
    assert_has(
        &metrics,
        "justonce_upstream_state{upstream=\"shop\",state=\"disabled\"} 1",
    );
    assert_has(
        &metrics,
        "justonce_upstream_state{upstream=\"shop\",state=\"ready\"} 0",
    );

    // Enabled: started again, and the refused call goes through on its retry's path.
    let enabled = operate("enable");
    assert_eq!(enabled.status, 200, "{enabled:?}");
    wait_for(addr, &operator, "shop", "ready", 3);
    assert_eq!(t.host.upstream_tools().len(), 1);
}

#[test]
fn justonce_upstreams_prints_each_upstreams_state_tools_and_last_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("justonce.toml"),
        format!(
            "[upstreams.shop]\ncommand = [\"sh\", \"-c\", {HEALTHY:?}]\n\n\
             [upstreams.broken]\ncommand = [\"sh\", \"-c\", \"echo 'not json'; exit 3\"]\nprefix = \"broken_\"\n"
        ),
    )
    .unwrap();
    let out = justonce_command(Some(&dir.path().join("state.db")))
        .arg("upstreams")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "one is not ready: {text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("shop: ready, 1 tool(s), ready in "), "{text}");
    // Failing, or (on a loaded machine, past its first backoff of 100 ms) starting
    // again: either way with its last error.
    let broken = text
        .lines()
        .position(|l| {
            l.starts_with("broken: failing, 0 tool(s)")
                || l.starts_with("broken: starting, 0 tool(s)")
        })
        .unwrap_or_else(|| panic!("{text}"));
    let error = text.lines().nth(broken + 1).unwrap_or_default();
    assert!(
        error.starts_with("  last error: ") && error.len() > "  last error: ".len(),
        "{text}"
    );

    let out = justonce_command(Some(&dir.path().join("state.db")))
        .args(["upstreams", "--json"])
        .output()
        .unwrap();
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed[0]["name"], "shop");
    assert_eq!(listed[0]["state"], "ready");
    assert_eq!(listed[0]["tools"], 1);
    assert!(
        listed[1]["state"] == "failing" || listed[1]["state"] == "starting",
        "{listed}"
    );
    assert!(listed[1]["last_error"].is_string(), "{listed}");
}

/// A console for `host` over HTTP (its tokens in `tokens`), and an operator's
/// session on it: (the server, its cookie, its CSRF token).
fn console_of(
    host: &justonce::Host,
    tokens: &std::path::Path,
    operator: &str,
) -> (justonce::__private::Running, String, String) {
    let console = Console::for_host(host, Tokens::open(tokens).unwrap(), 3_600_000);
    let running = HttpServer::new(Tokens::open(tokens).unwrap(), ServerOptions::default())
        .with_routes(Arc::new(console))
        .spawn(TcpListener::bind("127.0.0.1:0").unwrap())
        .unwrap();
    let (cookie, csrf) = login(running.addr(), operator);
    (running, cookie, csrf)
}

/// Polls `host` until its upstream `name` is in `state` (a bound on a hang: a host
/// follows the journal's disables every second).
fn wait_state(host: &justonce::Host, name: &str, state: &str) -> justonce::upstream::UpstreamState {
    let bound = Instant::now() + Duration::from_secs(60);
    loop {
        let now = host.upstreams().named(name).unwrap().state();
        if now.name() == state {
            return now;
        }
        assert!(Instant::now() < bound, "{name} never {state}: {now:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs a test on a SQLite journal file and on a PostgreSQL database.
macro_rules! on_both_journals {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(#[test]
            fn $name() {
                let dir = tempfile::tempdir().unwrap();
                super::$name(&dir.path().join("state.db").display().to_string());
            })*
        }
        mod postgres {
            $(#[test]
            fn $name() {
                if let Some(cluster) = justonce::__private::postgres_testing::cluster(stringify!($name)) {
                    super::$name(&cluster.database());
                }
            })*
        }
    };
}

on_both_journals!(
    a_disabled_upstream_stays_disabled_after_a_restart_and_on_every_host_until_enabled
);

fn a_disabled_upstream_stays_disabled_after_a_restart_and_on_every_host_until_enabled(
    journal: &str,
) {
    let config = || UpstreamConfig::command(vec!["sh".into(), "-c".into(), HEALTHY.into()]);
    let host = || test_host(|b| b.upstream("shop", config()).database(journal));
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.json");
    let operator = add_with_role(&tokens, "ops", Role::Operator).unwrap();
    // Two hosts of the journal, both serving the upstream.
    let first = host();
    let other = host();
    assert_eq!(first.host.upstream_tools().len(), 1);
    assert_eq!(other.host.upstream_tools().len(), 1);
    let (console, cookie, csrf) = console_of(&first.host, &tokens, &operator);
    let operate = |action: &str| {
        let done = act_on(console.addr(), (&cookie, &csrf), "shop", action);
        assert_eq!(done.status, 200, "{done:?}");
        done.body
    };

    let told = operate("disable");
    assert!(told.contains("disabled (by `ops`"), "{told}");
    // The other host follows: disabled by the same operator, its tools left out.
    let followed = wait_state(&other.host, "shop", "disabled");
    assert!(
        matches!(&followed, justonce::upstream::UpstreamState::Disabled { by, .. } if by == "ops"),
        "{followed:?}"
    );
    assert!(other.host.upstream_tools().is_empty());

    // A host started after the disable (a restart): the upstream is never started,
    // and a call of its tool is refused, not performed, naming the disable.
    let restarted = host();
    assert!(restarted.host.upstream_tools().is_empty());
    let report = restarted.host.upstreams().named("shop").unwrap().report();
    assert_eq!(report.starts, 0, "a disabled upstream is not started");
    let json = report.to_json();
    assert_eq!(
        (json["state"].as_str(), json["disabled_by"].as_str()),
        (Some("disabled"), Some("ops")),
        "{json}"
    );
    assert!(json["disabled_at"].is_string(), "{json}");
    let refused = restarted
        .host
        .call(&CallRequest::new("pay", "{}").conversation("c-disabled"))
        .unwrap_err();
    assert_eq!(refused.kind(), "not_performed", "{refused}");
    assert!(
        refused
            .to_string()
            .contains("was disabled by the operator `ops`"),
        "{refused}"
    );

    // An operator's enable on one host brings it back on every host.
    let told = operate("enable");
    assert!(told.contains("was enabled"), "{told}");
    wait_state(&first.host, "shop", "ready");
    wait_state(&other.host, "shop", "ready");
    wait_state(&restarted.host, "shop", "ready");
    assert_eq!(restarted.host.upstream_tools().len(), 1);
    // And stays enabled for a host started now.
    let later = host();
    assert_eq!(later.host.upstream_tools().len(), 1);
}

/// A server on 127.0.0.1 that answers every request 404 (not a justonce console).
fn not_a_console() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut request = [0u8; 4096];
            let _ = std::io::Read::read(&mut stream, &mut request);
            let _ = std::io::Write::write_all(
                &mut stream,
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    addr
}

#[test]
fn justonce_upstreams_url_prints_a_running_servers_upstreams_and_says_why_it_cannot() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("justonce.toml");
    std::fs::write(
        &config,
        format!("[upstreams.shop]\ncommand = [\"sh\", \"-c\", {HEALTHY:?}]\n"),
    )
    .unwrap();
    let db = dir.path().join("state.db");
    let operator = token(&db, &["add", "ops", "--role", "operator"])
        .trim()
        .to_owned();
    let viewer = token(&db, &["add", "eve", "--role", "viewer"])
        .trim()
        .to_owned();
    let agent = add_token(&db, "bot");
    let served = HttpProcess::spawn(&db, &["--config", config.to_str().unwrap()]);
    let addr = served.addr;
    wait_for(addr, &operator, "shop", "ready", 1);
    let upstreams = |url: &str, args: &[&str], env: &[(&str, &str)]| {
        justonce_command(None)
            .args(["upstreams", "--url", url])
            .args(args)
            .envs(env.iter().copied())
            .output()
            .unwrap()
    };
    let mcp_url = format!("http://{addr}/mcp");

    // Ready: printed as the local form prints it, exit 0.
    let out = upstreams(&mcp_url, &["--token", &viewer], &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        text.starts_with("shop: ready, 1 tool(s), ready in "),
        "{text}"
    );

    // Disabled by an operator: who and when, exit 1 (not every one is ready); the
    // JSON is the console API's, the token from the environment.
    let (cookie, csrf) = login(addr, &operator);
    let disabled = act_on(addr, (&cookie, &csrf), "shop", "disable");
    assert_eq!(disabled.status, 200, "{disabled:?}");
    let out = upstreams(&mcp_url, &[], &[("JUSTONCE_TOKEN", &viewer)]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(text.starts_with("shop: disabled, 1 tool(s)"), "{text}");
    assert!(text.contains("\n  disabled by ops at "), "{text}");
    let out = upstreams(
        &format!("http://{addr}"),
        &["--json"],
        &[("JUSTONCE_TOKEN", &viewer)],
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let api = upstream_json(addr, &viewer, "shop");
    assert_eq!(listed[0]["name"], "shop", "{listed}");
    for field in [
        "state",
        "disabled_by",
        "disabled_at",
        "tool_names",
        "starts",
    ] {
        assert_eq!(listed[0][field], api[field], "{field}: {listed} {api}");
    }

    // What it cannot do, each named.
    let refused = |out: &std::process::Output, code: i32, said: &str| {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{stderr}");
        assert!(stderr.contains(said), "{said} in {stderr}");
        assert!(out.stdout.is_empty(), "{out:?}");
    };
    refused(
        &upstreams(&mcp_url, &["--token", &agent], &[]),
        2,
        "refused the token",
    );
    refused(
        &upstreams(&mcp_url, &["--token", "not-a-token"], &[]),
        2,
        "refused the token (401)",
    );
    refused(
        &upstreams(&mcp_url, &[], &[]),
        2,
        "--url needs a viewer's or operator's token",
    );
    let nothing = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    refused(
        &upstreams(&format!("http://{nothing}"), &["--token", &viewer], &[]),
        5,
        "did not answer",
    );
    refused(
        &upstreams(
            &format!("http://{}", not_a_console()),
            &["--token", &viewer],
            &[],
        ),
        2,
        "answered 404, not the console's list of upstreams",
    );
    refused(
        &upstreams("ftp://example.org", &["--token", &viewer], &[]),
        2,
        "not an http:// or https:// URL",
    );
}
