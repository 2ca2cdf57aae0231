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
    let refused = send(
        addr,
        "POST",
        "/console/upstream",
        Some(&eve_cookie),
        &[("csrf", &eve_csrf), ("name", "shop"), ("action", "restart")],
    );
    assert_eq!(refused.status, 403, "{refused:?}");
    assert_eq!(
        upstream_json(addr, &viewer, "shop")["starts"],
        1,
        "a viewer restarts nothing"
    );

    let operate = |action: &str| {
        send(
            addr,
            "POST",
            "/console/upstream",
            Some(&ops_cookie),
            &[("csrf", &ops_csrf), ("name", "shop"), ("action", action)],
        )
    };
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
    let broken = text
        .lines()
        .position(|l| l.starts_with("broken: failing, 0 tool(s)"))
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
    assert_eq!(listed[1]["state"], "failing");
    assert!(listed[1]["last_error"].is_string(), "{listed}");
}
