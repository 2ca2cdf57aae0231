//! The units of `docs/deploy/` (issue 55) say only what the binary does: every
//! `justonce` command in the Dockerfile, the compose file, the systemd unit and the
//! Kubernetes example parses, their probes are the server's on the port it listens
//! on, their grace periods outlast the drain, their configuration files load, and
//! `systemd-analyze verify` finds nothing to say about the unit. (The image itself is
//! built and run by image.rs.)

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::support::cli::justonce_command;

const DOCKERFILE: &str = include_str!("../../docs/deploy/Dockerfile");
const IMAGE_CONFIG: &str = include_str!("../../docs/deploy/justonce.toml");
const COMPOSE: &str = include_str!("../../docs/deploy/compose/compose.yaml");
const COMPOSE_CONFIG: &str = include_str!("../../docs/deploy/compose/justonce.toml");
const UNIT: &str = include_str!("../../docs/deploy/systemd/justonce.service");
const KUBERNETES: &str = include_str!("../../docs/deploy/kubernetes/justonce.yaml");

/// How long a drain may take: the calls in flight run to their end, each within its
/// `wall_clock_ms` (the default's).
fn drain_bound() -> Duration {
    justonce::Limits::default().wall_clock
}

/// The value after `key` (`key: value` or `key=value`) on each line that has it.
fn values<'a>(text: &'a str, key: &str) -> Vec<&'a str> {
    text.lines()
        .filter_map(|line| line.trim().trim_start_matches("- ").strip_prefix(key))
        .map(|rest| rest.trim_start_matches([':', '=']).trim())
        .collect()
}

/// The one value of `key` in `text`.
fn value<'a>(text: &'a str, file: &str, key: &str) -> &'a str {
    match values(text, key).as_slice() {
        [one] => one,
        found => panic!("{file}: {key} once, found {found:?}"),
    }
}

fn words(json: &str) -> Vec<String> {
    serde_json::from_str(json).unwrap_or_else(|e| panic!("{json}: not a JSON array: {e}"))
}

/// Every command the files give the binary: (where, its words).
fn commands() -> Vec<(&'static str, Vec<String>)> {
    let mut commands = vec![(
        "Dockerfile CMD",
        words(value(DOCKERFILE, "Dockerfile", "CMD ")),
    )];
    let healthcheck = value(DOCKERFILE, "Dockerfile", "HEALTHCHECK ");
    let probe = words(healthcheck.split_once("CMD ").expect("HEALTHCHECK CMD").1);
    assert_eq!(probe[0], "/usr/local/bin/justonce");
    commands.push(("Dockerfile HEALTHCHECK", probe[1..].to_vec()));
    for command in values(COMPOSE, "command") {
        commands.push(("compose.yaml command", words(command)));
    }
    let exec = value(UNIT, "justonce.service", "ExecStart");
    let exec: Vec<String> = exec.split_whitespace().map(str::to_owned).collect();
    assert_eq!(exec[0], "/usr/local/bin/justonce");
    commands.push(("justonce.service ExecStart", exec[1..].to_vec()));
    for args in values(KUBERNETES, "args") {
        commands.push(("justonce.yaml args", words(args)));
    }
    commands
}

#[test]
fn every_command_in_the_units_is_one_the_binary_takes() {
    let commands = commands();
    assert_eq!(commands.len(), 5, "{commands:?}");
    for (place, words) in commands {
        let out = justonce_command(None)
            .args(&words)
            .arg("--help")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{place}: `justonce {}` is refused: {}",
            words.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The port of `--http ADDR:PORT` in `words`.
fn http_port(words: &[String]) -> &str {
    let at = words.iter().position(|w| w == "--http").expect("--http");
    words[at + 1].rsplit(':').next().unwrap()
}

#[test]
fn the_probes_are_the_servers_on_the_port_it_listens_on() {
    let cmd = words(value(DOCKERFILE, "Dockerfile", "CMD "));
    let port = http_port(&cmd);
    let healthcheck = value(DOCKERFILE, "Dockerfile", "HEALTHCHECK ");
    assert!(
        healthcheck.contains(&format!("\"http://127.0.0.1:{port}/healthz\"")),
        "the healthcheck probes /healthz on the port CMD serves: {healthcheck}"
    );
    assert_eq!(value(DOCKERFILE, "Dockerfile", "EXPOSE "), port);

    let args = words(value(KUBERNETES, "justonce.yaml", "args"));
    let port = http_port(&args);
    assert!(
        KUBERNETES.contains(&format!("{{ name: mcp, containerPort: {port} }}")),
        "the probes' named port `mcp` is the one --http serves"
    );
    let probes: Vec<&str> = values(KUBERNETES, "httpGet");
    assert_eq!(
        probes,
        [
            "{ path: /livez, port: mcp }",
            "{ path: /livez, port: mcp }",
            "{ path: /readyz, port: mcp }"
        ],
        "startup and liveness on /livez, readiness on /readyz"
    );
}

/// `75s`, `75` or `1m15s` as a duration.
fn seconds(text: &str) -> Duration {
    let text = text.trim();
    let (minutes, rest) = text.split_once('m').unwrap_or(("0", text));
    let secs: u64 = rest.trim_end_matches('s').parse().unwrap_or(0);
    Duration::from_secs(minutes.parse::<u64>().unwrap() * 60 + secs)
}

#[test]
fn every_grace_period_outlasts_the_drain_and_the_stop_signal_is_sigterm() {
    let bound = drain_bound();
    for (place, grace) in [
        (
            "compose.yaml stop_grace_period",
            value(COMPOSE, "compose.yaml", "stop_grace_period"),
        ),
        (
            "justonce.service TimeoutStopSec",
            value(UNIT, "justonce.service", "TimeoutStopSec"),
        ),
        (
            "justonce.yaml terminationGracePeriodSeconds",
            value(KUBERNETES, "justonce.yaml", "terminationGracePeriodSeconds"),
        ),
    ] {
        let grace = seconds(grace);
        assert!(
            grace > bound,
            "{place}: {grace:?} is not longer than the drain ({bound:?}): the SIGKILL would land mid-drain"
        );
    }
    assert_eq!(value(DOCKERFILE, "Dockerfile", "STOPSIGNAL "), "SIGTERM");
    assert_eq!(value(COMPOSE, "compose.yaml", "stop_signal"), "SIGTERM");
    assert_eq!(value(UNIT, "justonce.service", "KillSignal"), "SIGTERM");
    assert_eq!(
        value(UNIT, "justonce.service", "KillMode"),
        "mixed",
        "SIGTERM to justonce alone: an upstream it started serves the drain"
    );
}

#[test]
fn the_configuration_files_load() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("justonce.toml");
    let image = justonce::Config::parse(IMAGE_CONFIG, &path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        image.database.as_deref(),
        Some(Path::new("/var/lib/justonce/state.db"))
    );
    let compose = justonce::Config::parse(COMPOSE_CONFIG, &path).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        compose
            .database
            .unwrap()
            .to_string_lossy()
            .starts_with("postgres://justonce@postgres:5432/")
    );
    assert_eq!(
        compose.tokens_file.as_deref(),
        Some(Path::new("/run/secrets/tokens.json"))
    );
    // The ConfigMap's justonce.toml: the indented block after its key.
    let start = KUBERNETES
        .find("justonce.toml: |\n")
        .expect("the ConfigMap")
        + 17;
    let block: String = KUBERNETES[start..]
        .lines()
        .take_while(|l| l.starts_with("    "))
        .map(|l| format!("{}\n", &l[4..]))
        .collect();
    let kubernetes = justonce::Config::parse(&block, &path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        kubernetes.tokens_file.as_deref(),
        Some(Path::new("/etc/justonce/tokens/tokens.json"))
    );
}

#[test]
fn systemd_analyze_verifies_the_unit() {
    let Some(analyze) = ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"]
        .into_iter()
        .map(Path::new)
        .find(|p| p.is_file())
    else {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("CI=true and no systemd-analyze (apt-get install systemd)");
        }
        eprintln!("skipped (no systemd-analyze): systemd_analyze_verifies_the_unit");
        return;
    };
    // verify wants ExecStart's binary to exist: this test's build stands in for it.
    let bin = std::env::var("JUSTONCE_TEST_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_justonce").to_owned());
    let dir = tempfile::tempdir().unwrap();
    let unit = dir.path().join("justonce.service");
    std::fs::write(&unit, UNIT.replace("/usr/local/bin/justonce", &bin)).unwrap();
    let out = Command::new(analyze)
        .arg("verify")
        .arg(&unit)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && said.trim().is_empty(),
        "systemd-analyze verify: {said}"
    );
}
