//! The web console over HTTP, as a browser uses it: a session opened with a token,
//! pages that render untrusted text as text, and operator actions that need the
//! operator's role and the session's CSRF token and are recorded with its principal.
//! On SQLite and, where there is one, PostgreSQL.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use justonce::__private::postgres_testing::cluster;
use justonce::__private::tokens::{Role, Tokens, add_with_role, revoke};
use justonce::__private::{Admission, Console, HttpServer, Running, ServerOptions};
use justonce::{CallRequest, Clock, ProviderClass};
use serde_json::{Value, json};

use crate::support::cli::justonce_command;
use crate::support::mcp_http::{HttpClient, HttpProcess, Reply, read_reply};
use crate::support::{FakePayments, Fault, TestHost, test_host};

/// How long a session lasts in these tests (on the test's clock).
const TTL: Duration = Duration::from_secs(3600);

/// A host with a payments API whose unkeyed refunds time out (a stuck effect), and
/// its console alone on 127.0.0.1 with an operator's, a viewer's and an agent's token.
pub(crate) struct Fixture {
    pub t: TestHost,
    running: Running,
    pub operator: String,
    pub viewer: String,
    agent: String,
    /// The tokens file the console and the server read.
    pub tokens_file: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Fixture {
    /// On SQLite; on PostgreSQL with `postgres` (`None`: skipped, no PostgreSQL).
    pub fn start(test: &str, postgres: bool) -> Option<Self> {
        let url = match postgres {
            true => Some(cluster(test)?.database()),
            false => None,
        };
        Some(Self::on(url, ProviderClass::Unkeyed))
    }

    /// On the journal `url` (a PostgreSQL URL or a SQLite file; `None`: in memory),
    /// with refunds of `class` that always time out.
    fn on(url: Option<String>, class: ProviderClass) -> Self {
        let payments = Arc::new(FakePayments::with_class(class, Fault::AlwaysTimeout));
        let t = test_host(|b| {
            let b = b.provider("payments", payments.clone());
            match &url {
                Some(url) if url.starts_with("postgres") => {
                    b.database(url).database_clock_is_host_clock()
                }
                Some(path) => b.database(path),
                None => b,
            }
        });
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("tokens.json");
        let operator = add_with_role(&file, "ops", Role::Operator).unwrap();
        let viewer = add_with_role(&file, "eve", Role::Viewer).unwrap();
        let agent = add_with_role(&file, "bot", Role::Agent).unwrap();
        let console = Console::for_host(
            &t.host,
            Tokens::open(&file).unwrap(),
            i64::try_from(TTL.as_millis()).unwrap(),
        );
        let running = HttpServer::new(Tokens::open(&file).unwrap(), ServerOptions::default())
            .with_routes(Arc::new(console))
            .spawn(TcpListener::bind("127.0.0.1:0").unwrap())
            .unwrap();
        Self {
            t,
            running,
            operator,
            viewer,
            agent,
            tokens_file: file,
            _dir: dir,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.running.addr()
    }

    /// A refund whose unkeyed effect is stuck with an unknown outcome: its key and
    /// the effect's.
    pub fn stuck_refund(&self, order: u64) -> (String, String) {
        let request = CallRequest::new(
            "payments_refund",
            json!({"order_id": order, "amount_cents": 500}).to_string(),
        )
        .conversation("c");
        assert!(
            self.t.host.call(&request).is_err(),
            "the outcome is unknown"
        );
        let key = self.t.host.key_for(&request).unwrap().to_string();
        let effects = self.t.host.unresolved(self.t.clock.now_ms()).unwrap();
        let effect = effects.iter().find(|e| e.invocation == key).unwrap();
        (key, effect.key.clone())
    }

    /// Gives `name`'s token `role` in the file, in place: the token (its digest)
    /// stays the same.
    fn set_role(&self, name: &str, role: &str) {
        let mut doc: Value =
            serde_json::from_slice(&std::fs::read(&self.tokens_file).unwrap()).unwrap();
        for entry in doc["tokens"].as_array_mut().unwrap() {
            if entry["name"] == name {
                entry["role"] = json!(role);
            }
        }
        std::fs::write(&self.tokens_file, doc.to_string()).unwrap();
    }

    fn unresolved(&self) -> usize {
        self.t.host.unresolved(self.t.clock.now_ms()).unwrap().len()
    }
}

/// One request on a fresh connection, with the session `cookie` if any.
pub(crate) fn send(
    addr: SocketAddr,
    method: &str,
    target: &str,
    cookie: Option<&str>,
    form: &[(&str, &str)],
) -> Reply {
    let body: String = form_body(form);
    let mut head = format!(
        "{method} {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !form.is_empty() {
        head.push_str("Content-Type: application/x-www-form-urlencoded\r\n");
    }
    if let Some(cookie) = cookie {
        head.push_str(&format!("Cookie: {cookie}\r\n"));
    }
    head.push_str("\r\n");
    let mut stream = HttpClient::new(addr, None).send_raw(format!("{head}{body}").as_bytes());
    read_reply(&mut stream)
}

fn form_body(form: &[(&str, &str)]) -> String {
    form.iter()
        .map(|(n, v)| format!("{n}={}", percent(v)))
        .collect::<Vec<_>>()
        .join("&")
}

fn percent(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Logs in with `token`: the session cookie (`name=value`) and the page's CSRF token.
pub(crate) fn login(addr: SocketAddr, token: &str) -> (String, String) {
    let reply = send(addr, "POST", "/console/login", None, &[("token", token)]);
    assert_eq!(reply.status, 303, "{reply:?}");
    let set = reply
        .header("set-cookie")
        .expect("a session cookie")
        .to_owned();
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/console"] {
        assert!(set.contains(flag), "{flag} in {set}");
    }
    let cookie = set.split(';').next().unwrap().to_owned();
    let page = send(addr, "GET", "/console", Some(&cookie), &[]);
    assert_eq!(page.status, 200, "{page:?}");
    (cookie, csrf_of(&page.body))
}

fn csrf_of(page: &str) -> String {
    let marker = "name=\"csrf\" value=\"";
    let at = page.find(marker).expect("a CSRF field") + marker.len();
    page[at..].split('"').next().unwrap().to_owned()
}

fn resolve_form<'a>(csrf: &'a str, effect: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("csrf", csrf),
        ("action", "resolve-not-performed"),
        ("key", effect),
    ]
}

#[test]
fn nothing_works_without_a_session_and_a_session_ends_at_its_time_on_the_clock() {
    let f = Fixture::start("", false).unwrap();
    let addr = f.addr();
    let (key, effect) = f.stuck_refund(1);
    for (method, target) in [
        ("GET", "/console"),
        ("GET", "/console/unresolved"),
        ("GET", &*format!("/console/call?key={key}")),
        ("GET", "/console/api/calls"),
        ("POST", "/console/act"),
    ] {
        let reply = send(addr, method, target, Some("justonce_console=forged"), &[]);
        assert_eq!(reply.status, 401, "{method} {target}: {reply:?}");
        assert!(
            !reply.body.contains(&effect),
            "nothing of the journal shown"
        );
    }
    let unknown = send(
        addr,
        "POST",
        "/console/login",
        None,
        &[("token", "jo_guess")],
    );
    assert_eq!(unknown.status, 401);
    assert!(unknown.header("set-cookie").is_none());
    let agent = send(addr, "POST", "/console/login", None, &[("token", &f.agent)]);
    assert_eq!(agent.status, 403, "an agent's token opens no console");
    assert!(agent.header("set-cookie").is_none());

    let (cookie, _) = login(addr, &f.viewer);
    let plain = send(
        addr,
        "POST",
        "/console/login",
        None,
        &[("token", &f.viewer)],
    );
    assert!(!plain.header("set-cookie").unwrap().contains("Secure"));
    let body = format!("token={}", percent(&f.viewer));
    let behind_tls = format!(
        "POST /console/login HTTP/1.1\r\nHost: {addr}\r\nX-Forwarded-Proto: https\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    let proxied = read_reply(&mut HttpClient::new(addr, None).send_raw(behind_tls.as_bytes()));
    assert!(
        proxied.header("set-cookie").unwrap().ends_with("; Secure"),
        "{proxied:?}"
    );
    f.t.clock.advance(TTL - Duration::from_millis(1));
    assert_eq!(
        send(addr, "GET", "/console", Some(&cookie), &[]).status,
        200
    );
    f.t.clock.advance(Duration::from_millis(1));
    assert_eq!(
        send(addr, "GET", "/console", Some(&cookie), &[]).status,
        401,
        "ended at its time"
    );
}

#[test]
fn a_session_acts_with_its_tokens_role_now_and_ends_when_its_token_is_revoked() {
    let f = Fixture::start("", false).unwrap();
    let addr = f.addr();
    let (key, effect) = f.stuck_refund(4);
    let (operator, csrf) = login(addr, &f.operator);

    // Downgraded to viewer in the file (the same token): the session reads, no more.
    f.set_role("ops", "viewer");
    let page = send(addr, "GET", "/console/unresolved", Some(&operator), &[]);
    assert_eq!(page.status, 200, "{page:?}");
    assert!(
        !page.body.contains("/console/confirm"),
        "no action offered to a viewer"
    );
    let demoted = send(
        addr,
        "POST",
        "/console/act",
        Some(&operator),
        &resolve_form(&csrf, &effect),
    );
    assert_eq!(demoted.status, 403, "{demoted:?}");
    assert_eq!(f.unresolved(), 1, "the demoted session changed nothing");

    // Revoked: every page, and any action, is refused, and the cookie is cleared.
    f.set_role("ops", "operator");
    revoke(&f.tokens_file, "ops").unwrap();
    let ended = send(addr, "GET", "/console", Some(&operator), &[]);
    assert_eq!(ended.status, 401, "{ended:?}");
    assert!(ended.body.contains("revoked"), "{}", ended.body);
    assert!(
        ended
            .header("set-cookie")
            .is_some_and(|c| c.contains("Max-Age=0")),
        "{ended:?}"
    );
    let forgotten = send(
        addr,
        "POST",
        "/console/act",
        Some(&operator),
        &[("csrf", &csrf), ("action", "forget"), ("key", &key)],
    );
    assert_eq!(forgotten.status, 401, "{forgotten:?}");
    let story =
        f.t.host
            .story(&justonce::InvocationKey::parse(&key).unwrap())
            .unwrap();
    assert!(story.operations.is_empty(), "nothing recorded by=ops");
    assert_eq!(f.unresolved(), 1);

    // Re-issued (a new token for the same name): the old session stays ended.
    let new = add_with_role(&f.tokens_file, "ops", Role::Operator).unwrap();
    assert_eq!(
        send(addr, "GET", "/console", Some(&operator), &[]).status,
        401,
        "a session belongs to its token, not to its name"
    );
    let (fresh, fresh_csrf) = login(addr, &new);
    let done = send(
        addr,
        "POST",
        "/console/act",
        Some(&fresh),
        &resolve_form(&fresh_csrf, &effect),
    );
    assert_eq!(done.status, 200, "{done:?}");
}

#[test]
fn a_viewers_login_flood_is_rate_limited_and_logs_out_nobody_else() {
    let f = Fixture::start("", false).unwrap();
    let addr = f.addr();
    let (operator, _) = login(addr, &f.operator);
    // The review's flood was 4 100 logins (the table held 4 096); stop at the first 429.
    let mut first_refusal = None;
    for n in 1..=4200 {
        let reply = send(
            addr,
            "POST",
            "/console/login",
            None,
            &[("token", &f.viewer)],
        );
        if reply.status == 429 {
            first_refusal = Some((n, reply));
            break;
        }
        assert_eq!(reply.status, 303, "{reply:?}");
    }
    let (n, refused) = first_refusal.expect("logins are rate-limited");
    assert!(n <= 11, "refused after a small burst, not after {n}");
    assert!(refused.header("retry-after").is_some(), "{refused:?}");
    assert!(
        refused.body.contains("Too many logins as eve"),
        "{}",
        refused.body
    );
    assert_eq!(
        send(addr, "GET", "/console", Some(&operator), &[]).status,
        200,
        "the operator is still logged in"
    );

    // At the login rate, a principal keeps its newest sessions: its oldest go, and
    // still no one else's.
    let mut viewers = Vec::new();
    for _ in 0..20 {
        f.t.clock.advance(Duration::from_secs(60));
        viewers.push(login(addr, &f.viewer).0);
    }
    let open = |cookie: &String| send(addr, "GET", "/console", Some(cookie), &[]).status == 200;
    assert!(!open(&viewers[0]), "its own oldest session was closed");
    assert!(open(viewers.last().unwrap()));
    assert_eq!(viewers.iter().filter(|c| open(c)).count(), 16);
    assert!(open(&operator), "and not the operator's");

    // Unknown tokens share a rate of their own, which leaves valid logins alone.
    let unknown = (0..40)
        .map(|_| {
            send(
                addr,
                "POST",
                "/console/login",
                None,
                &[("token", "jo_guess")],
            )
            .status
        })
        .collect::<Vec<_>>();
    assert_eq!(unknown.first(), Some(&401));
    assert_eq!(unknown.last(), Some(&429), "{unknown:?}");
    login(addr, &f.operator);
}

#[test]
fn the_json_api_answers_what_the_clis_json_prints_to_a_session_or_a_consoles_bearer_token() {
    let f = Fixture::start("", false).unwrap();
    let addr = f.addr();
    let (key, _) = f.stuck_refund(2);
    let (cookie, _) = login(addr, &f.viewer);
    let calls = send(addr, "GET", "/console/api/calls", Some(&cookie), &[]);
    assert_eq!(calls.status, 200);
    let cli_json = serde_json::to_value(f.t.host.journal(None, 100).unwrap()).unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&calls.body).unwrap(),
        cli_json
    );
    let story = send(
        addr,
        "GET",
        &format!("/console/api/call?key={key}"),
        Some(&cookie),
        &[],
    );
    let cli_story = serde_json::to_value(
        f.t.host
            .story(&justonce::InvocationKey::parse(&key).unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&story.body).unwrap(),
        cli_story
    );

    let charts = send(addr, "GET", "/console/charts", Some(&cookie), &[]);
    assert_eq!(charts.status, 200);
    // payments_refund: 1 call, 0 replays, 0 retried, 1 unknown, 0 failed.
    assert!(
        charts
            .body
            .contains("<td>payments_refund</td><td>1</td><td>0</td><td>0</td><td>1</td><td>0</td>"),
        "{}",
        charts.body
    );
    let bearer = |token: &str| {
        let request = format!(
            "GET /console/api/unresolved HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
        );
        read_reply(&mut HttpClient::new(addr, None).send_raw(request.as_bytes()))
    };
    let unresolved = bearer(&f.operator);
    assert_eq!(unresolved.status, 200);
    // As `journal --unresolved --json` prints them: each unkeyed one with what it
    // waits for (here, with no configuration, a person).
    let mut cli_unresolved =
        serde_json::to_value(f.t.host.unresolved(f.t.clock.now_ms()).unwrap()).unwrap();
    for effect in cli_unresolved.as_array_mut().unwrap() {
        if effect["class"] == "unkeyed" {
            effect["pending"] = json!("person");
        }
    }
    assert_eq!(
        serde_json::from_str::<Value>(&unresolved.body).unwrap(),
        cli_unresolved
    );
    assert_eq!(
        bearer(&f.agent).status,
        401,
        "an agent's token reads no console"
    );
}

#[test]
fn the_unresolved_page_and_api_list_a_call_stuck_on_a_keyed_effect_as_the_cli_does() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("journal.db");
    let f = Fixture::on(Some(db.to_str().unwrap().to_owned()), ProviderClass::Keyed);
    let addr = f.addr();
    let request = CallRequest::new(
        "payments_refund",
        json!({"order_id": 7, "amount_cents": 500}).to_string(),
    )
    .conversation("c")
    .principal("bot");
    assert!(f.t.host.call(&request).is_err(), "the outcome is unknown");
    let key = f.t.host.key_for(&request).unwrap().to_string();
    let story =
        f.t.host
            .story(&justonce::InvocationKey::parse(&key).unwrap())
            .unwrap();
    let effect = story.entry.unwrap().effects[0].key.clone();

    let cli = justonce_command(Some(&db))
        .args(["journal", "--unresolved", "--json"])
        .output()
        .unwrap();
    assert!(cli.status.success(), "{cli:?}");
    let cli: Value = serde_json::from_slice(&cli.stdout).unwrap();
    assert_eq!(cli[0]["key"], json!(effect), "the CLI lists it: {cli}");
    assert_eq!(cli[0]["class"], json!("keyed"));

    let (cookie, _) = login(addr, &f.operator);
    let api = send(addr, "GET", "/console/api/unresolved", Some(&cookie), &[]);
    assert_eq!(api.status, 200, "{api:?}");
    assert_eq!(serde_json::from_str::<Value>(&api.body).unwrap(), cli);
    let page = send(addr, "GET", "/console/unresolved", Some(&cookie), &[]);
    assert!(
        page.body.contains(&format!("<tr data-key=\"{effect}\">")),
        "{}",
        page.body
    );
    assert!(
        page.body
            .contains(&format!("/console/confirm?action=abandon&amp;key={key}")),
        "an operator is offered to abandon the stuck call: {}",
        page.body
    );
}

/// A viewer reads the stuck effect but its action is refused; an operator's action
/// without the CSRF token too; then the operator resolves it, recorded as its own.
fn a_viewer_is_refused_and_an_operators_resolve_is_recorded_with_its_principal(f: &Fixture) {
    let addr = f.addr();
    let (key, effect) = f.stuck_refund(3);

    let (viewer, viewer_csrf) = login(addr, &f.viewer);
    let listed = send(addr, "GET", "/console/unresolved", Some(&viewer), &[]);
    assert!(
        listed.body.contains(&effect),
        "the viewer sees the stuck effect"
    );
    assert!(!listed.body.contains("/console/confirm"), "and no action");
    let confirm = format!("/console/confirm?action=resolve-not-performed&key={effect}");
    assert_eq!(send(addr, "GET", &confirm, Some(&viewer), &[]).status, 403);
    let refused = send(
        addr,
        "POST",
        "/console/act",
        Some(&viewer),
        &resolve_form(&viewer_csrf, &effect),
    );
    assert_eq!(refused.status, 403, "{refused:?}");
    assert_eq!(f.unresolved(), 1, "the viewer changed nothing");

    let (operator, csrf) = login(addr, &f.operator);
    let page = send(addr, "GET", &confirm, Some(&operator), &[]);
    assert_eq!(page.status, 200);
    assert_eq!(
        csrf_of(&page.body),
        csrf,
        "the confirmation carries the CSRF token"
    );
    let without = send(
        addr,
        "POST",
        "/console/act",
        Some(&operator),
        &resolve_form("", &effect)[1..],
    );
    assert_eq!(without.status, 403, "{without:?}");
    let forged = send(
        addr,
        "POST",
        "/console/act",
        Some(&operator),
        &resolve_form(&viewer_csrf, &effect),
    );
    assert_eq!(forged.status, 403, "another session's CSRF token");
    assert_eq!(f.unresolved(), 1, "nothing changed without the token");

    let done = send(
        addr,
        "POST",
        "/console/act",
        Some(&operator),
        &resolve_form(&csrf, &effect),
    );
    assert_eq!(done.status, 200, "{done:?}");
    assert_eq!(f.unresolved(), 0);
    let story =
        f.t.host
            .story(&justonce::InvocationKey::parse(&key).unwrap())
            .unwrap();
    let operation = story.operations.last().expect("recorded");
    assert_eq!(
        (operation.action.as_str(), operation.by.as_str()),
        ("resolve", "ops")
    );
    let page = send(
        addr,
        "GET",
        &format!("/console/call?key={key}"),
        Some(&viewer),
        &[],
    );
    assert!(
        page.body.contains("<td class=\"by\">ops</td>"),
        "the story shows who"
    );

    // The operator abandons the call; resolving its effect then is refused with the
    // journal's reason (409), not a server error.
    let abandon = [
        ("csrf", csrf.as_str()),
        ("action", "abandon"),
        ("key", key.as_str()),
    ];
    let abandoned = send(addr, "POST", "/console/act", Some(&operator), &abandon);
    assert_eq!(abandoned.status, 200, "{abandoned:?}");
    let story =
        f.t.host
            .story(&justonce::InvocationKey::parse(&key).unwrap())
            .unwrap();
    let operation = story.operations.last().unwrap();
    assert_eq!(
        (operation.action.as_str(), operation.by.as_str()),
        ("abandon", "ops")
    );
    let again = send(
        addr,
        "POST",
        "/console/act",
        Some(&operator),
        &resolve_form(&csrf, &effect),
    );
    assert_eq!(again.status, 409, "{again:?}");
    assert!(again.body.contains("abandoned"), "{}", again.body);
}

#[test]
fn a_viewer_is_refused_and_an_operators_resolve_is_recorded_with_its_principal_on_sqlite() {
    let f = Fixture::start("", false).unwrap();
    a_viewer_is_refused_and_an_operators_resolve_is_recorded_with_its_principal(&f);
}

#[test]
fn a_viewer_is_refused_and_an_operators_resolve_is_recorded_with_its_principal_on_postgres() {
    let test =
        "a_viewer_is_refused_and_an_operators_resolve_is_recorded_with_its_principal_on_postgres";
    if let Some(f) = Fixture::start(test, true) {
        a_viewer_is_refused_and_an_operators_resolve_is_recorded_with_its_principal(&f);
    }
}

#[test]
fn a_calls_story_says_when_its_record_expires_and_that_it_has() {
    let f = Fixture::start("", false).unwrap();
    let addr = f.addr();
    let request = CallRequest::new("echo", json!({"message": "kept"}).to_string());
    f.t.host.call(&request).unwrap();
    let key = f.t.host.key_for(&request).unwrap();
    let entry = f.t.host.story(&key).unwrap().entry.unwrap();
    let expires_at = entry.expires_at.expect("a completed call's record expires");
    assert!(expires_at > entry.completed_at.unwrap());
    let shown = serde_json::to_value(&entry).unwrap()["expires_at"]
        .as_str()
        .unwrap()
        .to_owned();
    let (cookie, _) = login(addr, &f.viewer);
    let page = || {
        send(
            addr,
            "GET",
            &format!("/console/call?key={key}"),
            Some(&cookie),
            &[],
        )
        .body
    };

    let before = page();
    assert!(
        before.contains(&format!("<dt>Expires</dt><dd><time datetime=\"{shown}\"")),
        "{before}"
    );
    assert!(!before.contains("expired:"), "{before}");
    let now = f.t.host.clock().now_ms();
    f.t.clock
        .advance(Duration::from_millis((expires_at - now) as u64));
    let after = page();
    assert!(
        after.contains("(expired: the same call runs again as a new one)"),
        "{after}"
    );
}

#[test]
fn hostile_arguments_and_queries_render_as_text() {
    let f = Fixture::start("", false).unwrap();
    let addr = f.addr();
    let hostile = "<script>alert(1)</script><img src=x onerror=alert(2)>\"'&";
    let huge = "A".repeat(1_000_000);
    let bytes = "invalid UTF-8 as sent: \\xff\\xfe \u{fffd} \u{0} \u{202e}";
    let request = CallRequest::new(
        "echo",
        json!({"message": format!("{hostile}{bytes}{huge}")}).to_string(),
    );
    f.t.host.call(&request).unwrap();
    let key = f.t.host.key_for(&request).unwrap().to_string();
    let (cookie, _) = login(addr, &f.viewer);
    for target in [
        "/console".to_owned(),
        format!("/console/call?key={key}"),
        "/console?q=%FF%3Cscript%3Ealert(3)%3C%2Fscript%3E&tool=%3Cb%3E".to_owned(),
    ] {
        let page = send(addr, "GET", &target, Some(&cookie), &[]);
        assert_eq!(page.status, 200, "{target}");
        assert!(
            !page.body.contains("<script>alert"),
            "{target}: a script tag"
        );
        assert!(!page.body.contains("<img src=x"), "{target}: an element");
        assert!(!page.body.contains("<b>"), "{target}: an element");
        assert!(
            page.body.len() < 200_000,
            "{target}: the huge argument is cut ({} bytes)",
            page.body.len()
        );
    }
    let story = send(
        addr,
        "GET",
        &format!("/console/call?key={key}"),
        Some(&cookie),
        &[],
    );
    assert!(
        story
            .body
            .contains("&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;")
    );
    assert!(
        story.body.contains("\\\\xff\\\\xfe \u{fffd}"),
        "shown as text"
    );
    assert!(story.body.contains("more characters not shown"));
    let search = send(
        addr,
        "GET",
        "/console?q=%FF%3Cscript%3E",
        Some(&cookie),
        &[],
    );
    assert!(
        search.body.contains("value=\"\u{fffd}&lt;script&gt;\""),
        "the invalid byte is shown replaced"
    );
    for header in ["content-security-policy", "x-content-type-options"] {
        assert!(story.header(header).is_some(), "{header}");
    }
}

/// `justonce` with `args` on `db`, to success: its stdout.
fn cli(db: &std::path::Path, args: &[&str]) -> String {
    let out = justonce_command(Some(db)).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// GET `target` with a bearer `token`.
pub(crate) fn get_with_token(addr: SocketAddr, target: &str, token: &str) -> Reply {
    let request = format!(
        "GET {target} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    );
    read_reply(&mut HttpClient::new(addr, None).send_raw(request.as_bytes()))
}

#[test]
fn serve_http_has_the_console_beside_mcp_and_justonce_console_serves_it_alone() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let ops = cli(&db, &["token", "add", "ops", "--role", "operator"])
        .trim()
        .to_owned();
    cli(&db, &["token", "add", "bot"]);
    let listed: Value = serde_json::from_str(&cli(&db, &["token", "list", "--json"])).unwrap();
    let roles: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["operator", "agent"], "the default role is agent");
    // A refund with no payments service configured: recorded, not performed.
    let refund = r#"{"order_id":7,"amount_cents":5,"currency":"EUR","reason":"<b>"}"#;
    let ran = justonce_command(Some(&db))
        .args(["run", "refund", "--args", refund])
        .output()
        .unwrap();
    assert_eq!(ran.status.code(), Some(3), "{ran:?}");
    let journal: Value = serde_json::from_str(&cli(&db, &["journal", "--json"])).unwrap();
    assert_eq!(journal.as_array().map(Vec::len), Some(1), "{journal}");

    let served = HttpProcess::spawn(&db, &[]);
    let calls = get_with_token(served.addr, "/console/api/calls", &ops);
    assert_eq!(calls.status, 200, "{calls:?}");
    assert_eq!(serde_json::from_str::<Value>(&calls.body).unwrap(), journal);
    drop(served);

    let mut alone = justonce_command(Some(&db))
        .args(["console", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(alone.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr: SocketAddr = line
        .trim()
        .strip_prefix("http://")
        .and_then(|rest| rest.strip_suffix("/console"))
        .unwrap_or_else(|| panic!("not the console's URL: {line:?}"))
        .parse()
        .unwrap();
    let calls = get_with_token(addr, "/console/api/calls", &ops);
    let mcp = get_with_token(addr, "/mcp", &ops);
    let _ = alone.kill();
    let _ = alone.wait();
    assert_eq!(calls.status, 200, "{calls:?}");
    assert_eq!(serde_json::from_str::<Value>(&calls.body).unwrap(), journal);
    assert_eq!(mcp.status, 404, "no MCP on the console alone");
}

/// A forget the journal refuses (an effect's outcome is unknown) is offered forced,
/// with the warning, from the refusal; forced, it is done and recorded as forced by
/// the operator. "Resume now" is refused by a console that runs no calls, and a
/// stopped call is first on "needs attention".
#[test]
fn a_refused_forget_offers_force_with_its_warning_and_a_console_without_a_host_does_not_resume() {
    let f = Fixture::start("", false).unwrap();
    let addr = f.addr();
    let (key, _) = f.stuck_refund(21);
    let (cookie, csrf) = login(addr, &f.operator);
    let attention = send(addr, "GET", "/console/attention", Some(&cookie), &[]);
    assert_eq!(attention.status, 200);
    assert!(
        attention.body.contains(&format!("<tr data-key=\"{key}\">"))
            && attention.body.contains("outcome is unknown"),
        "{}",
        attention.body
    );

    let forget = |force: Option<&str>| {
        let mut form = vec![
            ("csrf", csrf.as_str()),
            ("action", "forget"),
            ("key", key.as_str()),
        ];
        if let Some(force) = force {
            form.push(("force", force));
        }
        send(addr, "POST", "/console/act", Some(&cookie), &form)
    };
    let refused = forget(None);
    assert_eq!(refused.status, 409, "{refused:?}");
    let forced_path = format!("/console/confirm?action=forget&amp;key={key}&amp;force=1");
    assert!(refused.body.contains(&forced_path), "{}", refused.body);
    let confirm = send(
        addr,
        "GET",
        &forced_path.replace("&amp;", "&"),
        Some(&cookie),
        &[],
    );
    assert_eq!(confirm.status, 200);
    assert!(
        confirm.body.contains("<strong>Forced.</strong>")
            && confirm.body.contains("it may happen twice")
            && confirm.body.contains("name=\"force\" value=\"1\""),
        "{}",
        confirm.body
    );
    assert!(
        f.t.host
            .story(&justonce::InvocationKey::parse(&key).unwrap())
            .unwrap()
            .entry
            .is_some(),
        "nothing forgotten before the forced form"
    );
    let done = forget(Some("1"));
    assert_eq!(done.status, 200, "{done:?}");
    assert!(done.body.contains("forgotten, forced"), "{}", done.body);
    assert!(!done.body.contains("\"result\""), "rendered, not raw JSON");
    let story =
        f.t.host
            .story(&justonce::InvocationKey::parse(&key).unwrap())
            .unwrap();
    assert!(story.entry.is_none());
    let operation = story.operations.last().unwrap();
    assert_eq!(
        (operation.action.as_str(), operation.by.as_str()),
        ("forget", "ops")
    );
    assert_eq!(operation.detail["forced"], true, "{:?}", operation.detail);

    // The opposite: another stuck call, resumed on a console that runs no calls.
    let (other, _) = f.stuck_refund(22);
    let resume = send(
        addr,
        "POST",
        "/console/act",
        Some(&cookie),
        &[("csrf", &csrf), ("action", "resume"), ("key", &other)],
    );
    assert_eq!(resume.status, 409, "{resume:?}");
    assert!(
        resume.body.contains("does not run calls"),
        "{}",
        resume.body
    );
    assert!(
        f.t.host
            .story(&justonce::InvocationKey::parse(&other).unwrap())
            .unwrap()
            .entry
            .is_some_and(|e| e.state != "completed"),
        "not run"
    );
}

/// Issue 54: a call an operator resumes ("Resume now") is one of its principal's
/// calls in flight, counted in the cap the MCP endpoint shares. With alice's one
/// place taken, resuming her stopped call is refused (429) and nothing runs; bob's
/// runs meanwhile (the opposite case), and hers runs once her place is free.
#[test]
fn a_call_an_operator_resumes_counts_against_its_principals_cap_and_not_anothers() {
    let payments = Arc::new(FakePayments::with_class(
        ProviderClass::Unkeyed,
        Fault::AlwaysTimeout,
    ));
    let t = test_host(|b| b.provider("payments", payments.clone()));
    let host = Arc::new(t.host);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens.json");
    let operator = add_with_role(&file, "ops", Role::Operator).unwrap();
    let admission = Admission::new(1);
    let console = Console::for_host(
        &host,
        Tokens::open(&file).unwrap(),
        i64::try_from(TTL.as_millis()).unwrap(),
    )
    .resuming_on(Arc::clone(&host))
    .admitting(admission.clone());
    let running = HttpServer::new(Tokens::open(&file).unwrap(), ServerOptions::default())
        .with_routes(Arc::new(console))
        .spawn(TcpListener::bind("127.0.0.1:0").unwrap())
        .unwrap();
    let addr = running.addr();
    // A refund of each principal, stopped with its outcome unknown.
    let stopped = |principal: &str| {
        let request = CallRequest::new(
            "payments_refund",
            json!({"order_id": 7, "amount_cents": 500}).to_string(),
        )
        .conversation("c")
        .principal(principal);
        assert!(host.call(&request).is_err(), "the outcome is unknown");
        host.key_for(&request).unwrap()
    };
    let (alices, bobs) = (stopped("alice"), stopped("bob"));
    let runs = |key: &justonce::InvocationKey| host.story(key).unwrap().entry.unwrap().runs;
    let (cookie, csrf) = login(addr, &operator);
    let resume = |key: &justonce::InvocationKey| {
        let key = key.to_string();
        let form = [
            ("csrf", csrf.as_str()),
            ("action", "resume"),
            ("key", key.as_str()),
        ];
        send(addr, "POST", "/console/act", Some(&cookie), &form)
    };

    let in_flight = admission.enter("alice").expect("alice's one place");
    let refused = resume(&alices);
    assert_eq!(refused.status, 429, "{refused:?}");
    assert!(
        refused.body.contains("alice has 1 calls in flight"),
        "the operator was told: {}",
        refused.body
    );
    assert_eq!(runs(&alices), 1, "nothing ran");
    let bobs_resume = resume(&bobs);
    assert_eq!(bobs_resume.status, 200, "{bobs_resume:?}");
    assert_eq!(runs(&bobs), 2, "bob's call ran again");

    drop(in_flight);
    let resumed = resume(&alices);
    assert_eq!(resumed.status, 200, "{resumed:?}");
    assert_eq!(runs(&alices), 2, "alice's call ran again");
    assert!(
        admission.enter("alice").is_some(),
        "the resumed run gave its place back"
    );
}
