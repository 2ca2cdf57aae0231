//! The console as a person uses it: a real Chromium (Debian's `chromium`) driven by
//! Playwright (PyPI `playwright`, pinned in tests/console/requirements.txt; its own
//! browser download is not used).
//!
//! - tests/console/walk.py: log in, open a call's story, find the stuck effect, be
//!   refused as a viewer, resolve it as an operator, see a new call appear live, and
//!   have the operator's open session refused once its token is revoked.
//! - tests/console/resume.py, the operator's bad day (issue 40): two `serve --http`
//!   hosts on one PostgreSQL, a refund held by host A whose payments API hangs, A
//!   killed with SIGKILL; on host B's console the operator finds the call in "needs
//!   attention", sees the dead holder and its ended lease, presses "resume now" and
//!   sees it complete under the same key, with one refund downstream.
//!
//! Screenshots of each page are kept in `target/console-screenshots/`.
//!
//! The browser is `$JUSTONCE_CHROMIUM`, else /usr/bin/chromium; the interpreter
//! `$JUSTONCE_PLAYWRIGHT_PYTHON` (set by `.ci/run`), else a virtual environment made
//! under `target/tmp`. Without either the test is skipped with a message, and fails
//! under `CI=true`.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use justonce::__private::postgres_testing::cluster;
use justonce::__private::tokens::{Role, add_with_role, revoke};
use justonce::CallRequest;
use serde_json::{Value, json};

use crate::console::Fixture;
use crate::support::install;
use crate::support::mcp_http::{HttpClient, HttpProcess};

const WALK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/console/walk.py");
const RESUME: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/console/resume.py");
const REQUIREMENTS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/console/requirements.txt"
);

/// Chromium and a Python with Playwright, or why there are none.
fn browser() -> Result<(PathBuf, PathBuf), String> {
    let chromium = match install::from_env("JUSTONCE_CHROMIUM") {
        Some(found) => found?,
        None => PathBuf::from("/usr/bin/chromium"),
    };
    if !chromium.is_file() {
        return Err(format!(
            "no Chromium at {} (Debian: apt-get install chromium; or set JUSTONCE_CHROMIUM)",
            chromium.display()
        ));
    }
    let python = match install::from_env("JUSTONCE_PLAYWRIGHT_PYTHON") {
        Some(found) => found?,
        None => {
            let help = "install python3 with venv and pip (Debian: python3-venv), or set \
                JUSTONCE_PLAYWRIGHT_PYTHON to a Python that has the packages of \
                tests/console/requirements.txt (see .ci/run)";
            install::venv_bin(
                &install::venv("playwright-venv", Path::new(REQUIREMENTS), help)?,
                "python",
            )
        }
    };
    Ok((chromium, python))
}

/// Chromium and Playwright's Python, or `None` (skipped, saying why; a failure under
/// `CI=true`).
fn browser_or_skip() -> Option<(PathBuf, PathBuf)> {
    match browser() {
        Ok(found) => Some(found),
        Err(why) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("CI=true and no browser for the console test: {why}")
        }
        Err(why) => {
            eprintln!("skipped (no browser for the console test): {why}");
            None
        }
    }
}

/// Where the screenshots go: `target/console-screenshots/`.
fn shots_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .join("console-screenshots")
}

#[test]
fn a_person_walks_the_console_in_chromium_resolves_a_stuck_effect_and_sees_a_call_live() {
    let Some((chromium, python)) = browser_or_skip() else {
        return;
    };
    let f = Fixture::start("", false).unwrap();
    let (key, effect) = f.stuck_refund(11);
    let shots = shots_dir();
    let mut walk = Command::new(python)
        .arg(WALK)
        .arg(&chromium)
        .arg(format!("http://{}", f.addr()))
        .args([&f.viewer, &f.operator, &key, &effect])
        .arg(&shots)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start walk.py");
    let mut said = Vec::new();
    let mut lines = BufReader::new(walk.stdout.take().unwrap()).lines();
    for line in lines.by_ref() {
        let line = line.unwrap();
        said.push(line.clone());
        if line == "WAITING" {
            // A new call while the calls page is open.
            f.t.clock.advance(std::time::Duration::from_secs(1));
            let request = CallRequest::new(
                "echo",
                json!({"message": "made while watching"}).to_string(),
            );
            f.t.host.call(&request).unwrap();
            let new_key = f.t.host.key_for(&request).unwrap().to_string();
            writeln!(walk.stdin.as_mut().unwrap(), "{new_key}").unwrap();
        }
        if line == "REVOKE" {
            revoke(&f.tokens_file, "ops").unwrap();
            writeln!(walk.stdin.as_mut().unwrap(), "revoked").unwrap();
        }
    }
    let status = walk.wait().unwrap();
    assert!(
        status.success(),
        "walk.py failed ({status}); it said {said:?}"
    );
    assert_eq!(said.last().map(String::as_str), Some("OK"), "{said:?}");

    // What the browser did is in the journal: resolved by the operator's principal.
    let story =
        f.t.host
            .story(&justonce::InvocationKey::parse(&key).unwrap())
            .unwrap();
    let operation = story.operations.last().expect("recorded");
    assert_eq!(
        (operation.action.as_str(), operation.by.as_str()),
        ("resolve", "ops")
    );
    for shot in [
        "02-calls",
        "03-story",
        "05-viewer-refused",
        "07-resolved",
        "09-live",
        "11-revoked",
    ] {
        assert!(
            shots.join(format!("{shot}.png")).is_file(),
            "{shot}.png kept"
        );
    }
}

/// How long a host's lease lasts in the scenario: host A's ends this long after it
/// was killed (real time: two processes, no shared clock), so B's console shows it
/// stopped within seconds.
const LEASE_MS: &str = "1500";

/// `serve --http` on the PostgreSQL journal `url` as host `name`, logging at info.
fn serve(url: &str, name: &str, tokens: &Path, http_config: &Path) -> HttpProcess {
    HttpProcess::spawn_logged(
        Path::new(url),
        &["--tokens", tokens.to_str().unwrap()],
        &[
            ("JUSTONCE_LOG", "info"),
            ("JUSTONCE_HOST_NAME", name),
            ("JUSTONCE_LEASE_MS", LEASE_MS),
            ("JUSTONCE_HTTP_CONFIG", http_config.to_str().unwrap()),
        ],
    )
}

/// The refund of `order` in conversation `order-ORDER`, as the agent sends it.
fn refund(client: &mut HttpClient, order: u64) -> Value {
    client
        .call(
            "refund",
            json!({"order_id": order, "amount_cents": 1299}),
            json!({"_meta": {"dev.justonce/conversation": format!("order-{order}")}}),
        )
        .tool_result()
}

/// The lines of `log` an operator reads in an incident: each call's line, the
/// warnings, and the operators' actions.
fn operator_lines(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| {
            l.contains("justonce::call") || l.contains("justonce::operator") || l.contains(" WARN ")
        })
        .collect()
}

#[test]
fn an_operator_finds_the_call_of_a_killed_host_in_chromium_and_resumes_it_once_downstream() {
    let Some((chromium, python)) = browser_or_skip() else {
        return;
    };
    let Some(cluster) = cluster(
        "an_operator_finds_the_call_of_a_killed_host_in_chromium_and_resumes_it_once_downstream",
    ) else {
        return;
    };
    let url = cluster.database();
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.json");
    let operator = add_with_role(&tokens, "ops", Role::Operator).unwrap();
    let agent = add_with_role(&tokens, "bot", Role::Agent).unwrap();
    // A keyed payments API that takes the first refund and then never answers.
    let (payments, http_config) = crate::handover::hanging_payments(dir.path());
    let host_a = serve(&url, "web-a", &tokens, &http_config);
    let host_b = serve(&url, "web-b", &tokens, &http_config);

    // The agent asks host A for a refund; A sends it and waits on the hanging API.
    let on_a = HttpClient::new(host_a.addr, Some(agent.clone()));
    let waiting = std::thread::spawn(move || {
        on_a.refund_to_the_end(
            json!({"order_id": 4417, "amount_cents": 1299}),
            "order-4417",
        )
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while payments.requests().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the refund never reached the payments API"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // kill -9 of host A, mid-request: the agent is never answered.
    let log_a = host_a.stop_for_log();
    assert_eq!(
        String::from_utf8_lossy(&waiting.join().unwrap()),
        "",
        "host A died before it answered"
    );
    let key = {
        let calls = get_json(host_b.addr, "/console/api/calls", &operator);
        assert_eq!(calls.as_array().map(Vec::len), Some(1), "{calls}");
        assert!(
            calls[0]["lease_owner"]
                .as_str()
                .is_some_and(|o| o.starts_with("web-a@")),
            "host A holds it: {calls}"
        );
        calls[0]["key"].as_str().unwrap().to_owned()
    };

    // The operator, in Chromium, on host B's console.
    let shots = shots_dir();
    let walk = Command::new(python)
        .arg(RESUME)
        .arg(&chromium)
        .arg(format!("http://{}", host_b.addr))
        .args([&operator, &key])
        .arg(&shots)
        .output()
        .expect("start resume.py");
    let said = String::from_utf8_lossy(&walk.stdout);
    assert!(
        walk.status.success() && said.trim_end().ends_with("OK"),
        "resume.py failed ({}): {said}\n{}",
        walk.status,
        String::from_utf8_lossy(&walk.stderr)
    );

    // Downstream: two requests (A's, then B's resumed one), both under the one key
    // the journal holds, and one refund applied.
    let requests = payments.requests();
    let keys: Vec<Option<String>> = requests.iter().map(|r| r.key.clone()).collect();
    assert_eq!(keys.len(), 2, "A's request and the resumed one: {keys:?}");
    assert!(keys[0].is_some() && keys[0] == keys[1], "{keys:?}");
    let story = get_json(
        host_b.addr,
        &format!("/console/api/call?key={key}"),
        &operator,
    );
    assert_eq!(story["entry"]["state"], "completed", "{story}");
    assert_eq!(
        story["entry"]["effects"][0]["key"].as_str(),
        keys[0].as_deref(),
        "the key sent is the journaled one"
    );
    assert_eq!(payments.applied().len(), 1, "one refund");
    // The journal keeps who resumed it, on which host, and whose lease had ended.
    let resumed = &story["operations"][0];
    assert_eq!(
        (resumed["action"].as_str(), resumed["by"].as_str()),
        (Some("resume"), Some("ops")),
        "{story}"
    );
    assert_eq!(resumed["detail"]["on_host"], "web-b", "{story}");
    assert!(
        resumed["detail"]["was"]
            .as_str()
            .is_some_and(|w| w.contains("web-a") && w.contains("lease ended")),
        "{story}"
    );
    // The agent's retry (on B) is told the refund the API applied, replayed.
    let mut on_b = HttpClient::new(host_b.addr, Some(agent.clone()));
    let told = refund(&mut on_b, 4417);
    assert_eq!(
        told["structuredContent"]["refund_id"],
        payments.applied()[0].id.as_str(),
        "{told}"
    );
    assert_eq!(payments.requests().len(), 2, "the retry sent nothing");
    // The opposite: another order is another refund.
    let other = refund(&mut on_b, 4418);
    assert_eq!(other["isError"], false, "{other}");
    assert_eq!(payments.applied().len(), 2, "a different call happens too");

    // What an operator reads in host B's log: the takeover from web-a, the resume
    // by ops, and the call's own line.
    let log_b = host_b.stop_for_log();
    let lines = operator_lines(&log_b);
    eprintln!("host A's log (killed):\n{log_a}\nhost B's operator lines:");
    for line in &lines {
        eprintln!("{line}");
    }
    assert!(
        lines
            .iter()
            .any(|l| l.contains("took over") && l.contains("web-a")),
        "{log_b}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("operator ops: resume") && l.contains(&key)),
        "{log_b}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("justonce::call") && l.contains(&key)),
        "{log_b}"
    );
    for shot in [
        "20-attention",
        "21-story-stopped",
        "22-confirm-resume",
        "23-resumed",
        "24-story-completed",
    ] {
        assert!(
            shots.join(format!("{shot}.png")).is_file(),
            "{shot}.png kept"
        );
    }
}

/// GET `target` on `addr` with a bearer `token`: its JSON.
fn get_json(addr: std::net::SocketAddr, target: &str, token: &str) -> Value {
    let request = format!(
        "GET {target} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    );
    let reply = crate::support::mcp_http::read_reply(
        &mut HttpClient::new(addr, None).send_raw(request.as_bytes()),
    );
    assert_eq!(reply.status, 200, "{target}: {reply:?}");
    serde_json::from_str(&reply.body).unwrap()
}
