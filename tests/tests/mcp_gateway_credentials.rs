//! Nothing of an operator's credential reaches an agent, the journal or the log,
//! whatever an upstream echoes (DESIGN.md, "Upstream MCP servers"). The upstream is
//! the tests' own hostile server on the official Python SDK
//! (tests/mcp/upstreams/echo_server.py): it gives back the credential the host
//! handed it (a stdio upstream's `env`, an HTTP upstream's `headers`, both filled in
//! from a secrets file) in a result, verbatim, base64- and percent-encoded, in an
//! `isError` result, in a JSON-RPC error, and on its stderr. What it says of its own,
//! and a setting written out in its `env` (`ECHO_FLAG = "true"`), pass untouched.

use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};

use crate::mcp_gateway::{HttpUpstream, needed, python};
use crate::support::mcp::{McpClient, VERSION, lines_of};

const ECHO: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/mcp/upstreams/echo_server.py"
);

/// The credential, in the secrets file only; `/` and `+` make its percent-encoding
/// differ from it.
const TOKEN: &str = "tok/live+7c1e9a05d3b8";

/// A run of the credential every encoding the server uses keeps as it is.
const TOKEN_TAIL: &str = "7c1e9a05d3b8";

/// What the upstream says of its own (echo_server.py's `PLAIN`).
const PLAIN: &str = "plain answer 4242";

/// A bound on a hang, not a timing assertion.
const WAIT: Duration = Duration::from_secs(60);

/// Whether `text` gives the credential back, verbatim, percent- or base64-encoded
/// (alone or after `Bearer `, as the server encodes what it was handed).
fn leaks(text: &str) -> bool {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    text.contains(TOKEN_TAIL)
        || text.contains(&b64(TOKEN)[..20])
        || text.contains(&b64(&format!("Bearer {TOKEN}"))[..24])
        || text.contains(&b64(&format!("Bearer {TOKEN}"))[8..28])
}

/// `justonce serve` of a directory holding `justonce.toml` and the database, its
/// log (`JUSTONCE_LOG=info`) handed over line by line as it is written.
pub(crate) struct Served {
    pub(crate) client: McpClient,
    child: Child,
    log: Receiver<String>,
    read: Vec<String>,
}

impl Served {
    pub(crate) fn start(dir: &Path) -> Self {
        let mut child = crate::support::cli::justonce_command(Some(&dir.join("state.db")))
            .args(["serve", "--conversation", "conv-credentials"])
            .env("JUSTONCE_LOG", "info")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start justonce serve");
        let mut client = McpClient::new(child.stdin.take().unwrap(), child.stdout.take().unwrap());
        let log = lines_of(child.stderr.take().unwrap());
        client.initialize(VERSION);
        client.wait_for_upstreams();
        Self {
            client,
            child,
            log,
            read: Vec::new(),
        }
    }

    /// The first line of the log holding `text`, waited for.
    pub(crate) fn logged(&mut self, text: &str) -> String {
        if let Some(line) = self.read.iter().find(|l| l.contains(text)) {
            return line.clone();
        }
        loop {
            let line = self
                .log
                .recv_timeout(WAIT)
                .unwrap_or_else(|_| panic!("no log line with {text:?}: {:#?}", self.read));
            self.read.push(line.clone());
            if line.contains(text) {
                return line;
            }
        }
    }

    /// Hangs up; the whole log.
    pub(crate) fn close(mut self) -> String {
        drop(self.client);
        let _ = self.child.wait();
        self.read.extend(self.log.iter());
        self.read.join("\n")
    }
}

/// The upstream `echo`'s section: over stdio (its `env`) or at `url` (its
/// `headers`), the credential from the secrets file beside it.
fn configure(dir: &Path, python: &Path, url: Option<&str>) {
    std::fs::write(dir.join("echo.env"), format!("ECHO_TOKEN={TOKEN}\n")).unwrap();
    let reached = match url {
        Some(url) => {
            format!("url = {url:?}\nheaders = {{ Authorization = \"Bearer ${{ECHO_TOKEN}}\" }}")
        }
        None => format!(
            "command = [{:?}, {ECHO:?}]\nenv = {{ ECHO_TOKEN = \"${{ECHO_TOKEN}}\", ECHO_FLAG = \"true\" }}",
            python.display().to_string()
        ),
    };
    std::fs::write(
        dir.join("justonce.toml"),
        format!("[upstreams.echo]\n{reached}\nsecrets_file = \"echo.env\"\n"),
    )
    .unwrap();
}

/// The calls' responses: `echo`, `fail` (an `isError` result), `refuse` (a JSON-RPC
/// error), each stripped and with what is not a credential untouched.
fn call_each(served: &mut Served, flag: &str) -> Vec<Value> {
    let echo = served.client.call("echo", json!({}), json!({}));
    let result = &echo["result"];
    assert_eq!(result["isError"], false, "{echo}");
    let structured = &result["structuredContent"];
    assert_eq!(
        structured["verbatim"], "the credential is [redacted]",
        "{echo}"
    );
    for encoded in ["base64", "percent"] {
        assert_eq!(structured[encoded], "[redacted]", "{encoded}: {echo}");
    }
    assert_eq!(structured["plain"], PLAIN, "not a credential: {echo}");
    assert_eq!(
        structured["flag"], flag,
        "under 4 bytes, not stripped: {echo}"
    );

    let fail = served.client.call("fail", json!({}), json!({}));
    assert_eq!(fail["result"]["isError"], true, "{fail}");
    let text = fail["result"].to_string();
    assert!(
        text.contains("failed with [redacted]") && text.contains(PLAIN),
        "{fail}"
    );

    let refuse = served.client.call("refuse", json!({}), json!({}));
    assert_eq!(refuse["result"]["isError"], true, "{refuse}");
    let text = refuse["result"].to_string();
    assert!(
        text.contains("upstream_refused") && text.contains("refused with [redacted]"),
        "{refuse}"
    );
    assert!(text.contains(PLAIN), "{refuse}");
    vec![echo, fail, refuse]
}

/// Neither `justonce journal --json` nor the database's files hold the credential;
/// the saved answers hold what the agent was told.
fn assert_journal_clean(dir: &Path) {
    let out = crate::support::cli::justonce_command(Some(&dir.join("state.db")))
        .args(["journal", "--json"])
        .output()
        .unwrap();
    let journal = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{journal}");
    assert!(
        journal.contains("[redacted]") && journal.contains(PLAIN),
        "{journal}"
    );
    assert!(!leaks(&journal), "the journal: {journal}");
    for file in ["state.db", "state.db-wal"] {
        let Ok(bytes) = std::fs::read(dir.join(file)) else {
            continue;
        };
        let text = String::from_utf8_lossy(&bytes);
        assert!(!leaks(&text), "{file} holds the credential");
    }
}

#[test]
fn a_credential_an_upstream_over_stdio_echoes_reaches_no_agent_journal_or_log() {
    let Some(python) = needed("Python with the MCP SDK", &python()) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    configure(dir.path(), &python, None);
    let mut served = Served::start(dir.path());
    let responses = call_each(&mut served, "true");
    for response in &responses {
        assert!(!leaks(&response.to_string()), "the agent: {response}");
    }
    // Its stderr, in the log: the line is there, stripped.
    let line = served.logged("handed the credential");
    assert!(line.contains("handed the credential [redacted]"), "{line}");
    // A retry is answered from the journal: stripped as well.
    let again = served.client.call("echo", json!({}), json!({}));
    assert_eq!(
        again["result"]["_meta"]["dev.justonce/replayed"], true,
        "{again}"
    );
    assert_eq!(
        again["result"]["structuredContent"],
        responses[0]["result"]["structuredContent"]
    );
    let log = served.close();
    assert!(!leaks(&log), "the log: {log}");
    assert_journal_clean(dir.path());
}

#[test]
fn a_credential_an_upstream_over_http_echoes_from_its_headers_reaches_no_agent_or_journal() {
    let Some(python) = needed("Python with the MCP SDK", &python()) else {
        return;
    };
    let http = HttpUpstream::start(&python, &[ECHO.as_ref(), "http".as_ref()]);
    let dir = tempfile::tempdir().unwrap();
    configure(dir.path(), &python, Some(&http.url));
    let mut served = Served::start(dir.path());
    let responses = call_each(&mut served, "");
    for response in &responses {
        assert!(!leaks(&response.to_string()), "the agent: {response}");
    }
    let log = served.close();
    assert!(!leaks(&log), "the log: {log}");
    assert_journal_clean(dir.path());
}
