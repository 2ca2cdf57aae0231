//! A throwaway Prometheus for tests: Debian's `prometheus` started on a free port of
//! 127.0.0.1 with its data in a directory of its own, scraping the targets a test
//! names, stopped when the [`TestPrometheus`] is dropped.
//!
//! Where no binary is found, [`TestPrometheus::start`] (and [`promtool`]) returns
//! `None` and the caller skips, saying so; with `CI=true` that is a failure instead.
//! `JUSTONCE_PROMETHEUS_BIN` and `JUSTONCE_PROMTOOL_BIN` name the binaries.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A bound on how long Prometheus may take to start, or to scrape what a test
/// waits for: a bound on a hang, not a timing assertion.
const WAIT: Duration = Duration::from_secs(90);

/// A running Prometheus, stopped on drop.
pub struct TestPrometheus {
    child: Child,
    dir: tempfile::TempDir,
    port: u16,
}

/// One target to scrape: `host:port`, and the bearer token it wants, if any.
pub struct Target<'a> {
    /// `127.0.0.1:PORT`.
    pub address: String,
    /// Sent as `Authorization: Bearer …`.
    pub token: Option<&'a str>,
}

impl TestPrometheus {
    /// Starts Prometheus scraping `target` every second; `None` (after printing why
    /// `test` is skipped) where there is no Prometheus. Panics under `CI=true`
    /// instead.
    pub fn start(test: &str, target: &Target<'_>) -> Option<Self> {
        let bin = binary_or_skip(test, "prometheus", "JUSTONCE_PROMETHEUS_BIN")?;
        let dir = tempfile::tempdir().expect("a temporary directory");
        let port = free_port();
        let authorization = target
            .token
            .map(|t| format!("    authorization:\n      credentials: '{t}'\n"))
            .unwrap_or_default();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: justonce\n    scrape_interval: 1s\n    scrape_timeout: 1s\n{authorization}    static_configs:\n      - targets: ['{}']\n",
                target.address
            ),
        )
        .expect("write the config");
        let log = std::fs::File::create(dir.path().join("log")).expect("the log file");
        let child = Command::new(&bin)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", bin.display()));
        let mut prometheus = Self { child, dir, port };
        prometheus.wait_ready();
        Some(prometheus)
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + WAIT;
        let url = format!("http://127.0.0.1:{}/-/ready", self.port);
        while Instant::now() < deadline {
            if ureq::get(&url).call().is_ok() {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("prometheus exited ({status}): {}", self.log());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("prometheus was not ready within {WAIT:?}: {}", self.log());
    }

    /// What Prometheus logged.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }

    /// `GET /api/v1/<path>` with `query` parameters: the `data` of the answer.
    pub fn api(&self, path: &str, query: &[(&str, &str)]) -> Value {
        let url = format!("http://127.0.0.1:{}/api/v1/{path}", self.port);
        let mut request = ureq::get(&url);
        for (name, value) in query {
            request = request.query(*name, *value);
        }
        let body = request
            .call()
            .unwrap_or_else(|e| panic!("GET {url}: {e}"))
            .body_mut()
            .read_to_string()
            .expect("read the answer");
        let answer: Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(answer["status"], "success", "{answer}");
        answer["data"].clone()
    }

    /// The value of the instant query `promql` (one series), once it is `expected`:
    /// polls until Prometheus has scraped it, within a bound; the panic says what
    /// the query and the scrape target last showed.
    pub fn wait_for_value(&self, promql: &str, expected: f64) {
        let deadline = Instant::now() + WAIT;
        let mut last = Value::Null;
        while Instant::now() < deadline {
            last = self.api("query", &[("query", promql)]);
            let value = last["result"][0]["value"][1]
                .as_str()
                .and_then(|v| v.parse::<f64>().ok());
            if value == Some(expected) {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let targets = self.api("targets", &[]);
        panic!(
            "{promql} never became {expected} within {WAIT:?}; last answer: {last}; targets: {targets}; log: {}",
            self.log()
        );
    }
}

impl Drop for TestPrometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Debian's `promtool` (the same package as `prometheus`); `None` (after printing why
/// `test` is skipped) where there is none. Panics under `CI=true` instead.
pub fn promtool(test: &str) -> Option<PathBuf> {
    binary_or_skip(test, "promtool", "JUSTONCE_PROMTOOL_BIN")
}

/// The binary `name` (or the one `env` names); `None` after printing why `test` is
/// skipped where there is none, a panic under `CI=true`.
fn binary_or_skip(test: &str, name: &str, env: &str) -> Option<PathBuf> {
    let found = match std::env::var(env) {
        Ok(bin) => Some(PathBuf::from(bin)),
        Err(_) => [format!("/usr/bin/{name}"), format!("/usr/local/bin/{name}")]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.is_file()),
    };
    if found.is_none() {
        let why = format!("no {name} binary (apt-get install prometheus, or set {env})");
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("CI=true and {why}");
        }
        eprintln!("skipped ({why}): {test}");
    }
    found
}

/// A port of 127.0.0.1 free now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}
