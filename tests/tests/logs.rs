//! The CLI's log: JSON lines that carry the call's key with
//! `JUSTONCE_LOG_FORMAT=json`, and no colour codes when stderr is not a terminal.

use std::process::Output;

use justonce_tests::guests::CHATTY_COMPONENT;
use serde_json::Value;

use crate::support::cli::{json_of, justonce_command};

fn run_chatty(format: Option<&str>) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let mut command = justonce_command(Some(&dir.path().join("state.db")));
    command
        .args(["run", CHATTY_COMPONENT, "--args", r#"{"lines":2}"#])
        .env("JUSTONCE_LOG", "info");
    match format {
        Some(format) => command.env("JUSTONCE_LOG_FORMAT", format),
        None => command.env_remove("JUSTONCE_LOG_FORMAT"),
    };
    command.output().unwrap()
}

#[test]
fn json_lines_carry_the_invocation_key_of_the_call() {
    let out = run_chatty(Some("json"));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let key = json_of(&out)["key"].as_str().unwrap().to_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<Value> = stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let guest: Vec<&Value> = lines
        .iter()
        .filter(|l| l["target"] == "justonce::guest")
        .collect();
    assert!(!guest.is_empty(), "the tool's output is logged: {stderr}");
    for line in guest {
        assert_eq!(line["spans"][0]["name"], "call", "{line}");
        assert_eq!(line["spans"][0]["invocation"], key.as_str(), "{line}");
        assert_eq!(line["spans"][0]["tool"], "chatty", "{line}");
    }
}

#[test]
fn text_lines_have_no_colour_codes_off_a_terminal() {
    let out = run_chatty(None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("chatty: the quick brown fox"),
        "logged: {stderr}"
    );
    assert!(!stderr.contains('\u{1b}'), "no ANSI escapes: {stderr:?}");
}

#[test]
fn an_unknown_log_format_is_bad_input() {
    let out = run_chatty(Some("xml"));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`xml`"));
}

/// One line per call at `info` (issue 40), with the fields an operator greps for and
/// the host named by `--host-name`; a bad name is refused before anything runs.
#[test]
fn each_call_logs_one_line_naming_its_host() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let run = |name: &str| {
        let mut command = justonce_command(Some(&db));
        command
            .args(["--host-name", name, "run", CHATTY_COMPONENT])
            .args(["--args", r#"{"lines":1}"#, "--conversation", "order-7"])
            .env("JUSTONCE_LOG", "warn,justonce::call=info")
            .env("JUSTONCE_LOG_FORMAT", "json");
        command.output().unwrap()
    };
    let out = run("web-1");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let key = json_of(&out)["key"].as_str().unwrap().to_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let calls: Vec<Value> = stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["target"] == "justonce::call")
        .collect();
    assert_eq!(calls.len(), 1, "{stderr}");
    let fields = &calls[0]["fields"];
    assert_eq!(calls[0]["level"], "INFO");
    assert_eq!(fields["message"], "call answered");
    assert_eq!(fields["host"], "web-1");
    assert_eq!(fields["tool"], "chatty");
    assert_eq!(fields["key"], key.as_str());
    assert_eq!(fields["conversation"], "order-7");
    assert_eq!(fields["outcome"], "success");
    assert_eq!(fields["replayed"], false);
    assert_eq!(fields["runs"], 1);

    let again = run("web-2");
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(
        stderr.contains(r#""replayed":true"#) && stderr.contains(r#""runs":0"#),
        "{stderr}"
    );

    let bad = run("web 1");
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("a host name must be"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}

/// `journal --state` filters by what a person looks for, and the list ends with its
/// count.
#[test]
fn journal_filters_by_state_and_counts_what_it_lists() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let out = justonce_command(Some(&db))
        .args(["run", CHATTY_COMPONENT, "--args", r#"{"lines":1}"#])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let journal = |state: &str| {
        let out = justonce_command(Some(&db))
            .args(["journal", "--state", state])
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, completed) = journal("completed");
    assert_eq!(code, Some(0));
    assert!(completed.contains("chatty"), "{completed}");
    assert!(completed.trim_end().ends_with("1 call(s)"), "{completed}");
    let (_, running) = journal("running");
    assert!(running.contains("(no invocations)"), "{running}");
    let (code, expired) = journal("expired");
    assert_eq!(code, Some(0), "a state to filter by");
    assert!(
        expired.contains("(no invocations)"),
        "inside its window: {expired}"
    );
    let (code, _) = journal("stuck");
    assert_eq!(code, Some(2), "an unknown state is bad input");
}

/// `gc --retention-hours 0` is refused saying what it could not do and what does;
/// what gc removed says the rest is kept for its own windows.
#[test]
fn gc_refuses_a_zero_window_and_says_what_it_keeps() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let out = justonce_command(Some(&db))
        .args(["run", CHATTY_COMPONENT, "--args", r#"{"lines":1}"#])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let zero = justonce_command(Some(&db))
        .args(["gc", "--retention-hours", "0"])
        .output()
        .unwrap();
    assert_eq!(zero.status.code(), Some(2));
    let said = String::from_utf8_lossy(&zero.stderr);
    assert!(
        said.contains("justonce forget KEY") && said.contains("their own"),
        "{said}"
    );
    let gc = justonce_command(Some(&db))
        .args(["gc", "--retention-hours", "1"])
        .output()
        .unwrap();
    assert_eq!(gc.status.code(), Some(0));
    let said = String::from_utf8_lossy(&gc.stdout);
    assert!(
        said.contains("removed 0 expired invocation(s)")
            && said.contains("kept until its own window ends"),
        "{said}"
    );
}

/// The runbook (docs/operators.md, "Incident runbook") quotes what a host writes when
/// a refund's answers are lost until its retries run out, and when the agent's retry
/// then resumes the call: each quoted line is one a host wrote in that story, but for
/// keys, durations, the payments API's origin and the span prefix (`…`).
#[test]
fn the_runbooks_outcome_unknown_lines_are_what_the_host_writes() {
    use justonce::__private::{Behaviour, LocalApi};

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let payments = LocalApi::start().unwrap();
    payments.script([Behaviour::ApplyThenDrop; 3]);
    let config = dir.path().join("http.json");
    std::fs::write(
        &config,
        serde_json::json!({
            "services": { "payments": payments.url() },
            "allow": { "refund": [payments.url()] },
        })
        .to_string(),
    )
    .unwrap();
    let mut logged = String::new();
    for (host, exit) in [("web-1", 3), ("web-2", 0)] {
        let out = justonce_command(Some(&db))
            .arg("--http-config")
            .arg(&config)
            .args(["run", "refund", "--conversation", "order-4417", "--args"])
            .arg(r#"{"order_id":4417,"amount_cents":1299}"#)
            .env("JUSTONCE_LOG", "info")
            .env("JUSTONCE_HOST_NAME", host)
            .env_remove("JUSTONCE_LOG_FORMAT")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(exit), "{stderr}");
        logged.push_str(&stderr);
    }
    let written: Vec<String> = logged.lines().map(shape).collect();

    let guide = include_str!("../../docs/operators.md");
    let marker = "the payments API loses its answers until the retries run out";
    let after = &guide[guide.find(marker).expect("the runbook's story")..];
    let block = after
        .split("```text\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("its log block");
    let quoted: Vec<&str> = block.lines().collect();
    assert!(quoted.len() >= 5, "{block}");
    for line in quoted {
        assert!(
            written.contains(&shape(line)),
            "the runbook quotes\n  {line}\nwhich no host wrote; they wrote (shaped):\n{}",
            written.join("\n")
        );
    }
}

/// A log line without what differs from run to run: its time, the span prefix
/// (shown `…`), keys, durations and the payments API's origin.
fn shape(line: &str) -> String {
    // The timestamp, where the line has one.
    let line = match line.split_once("Z  ") {
        Some((time, rest)) if time.starts_with("20") => rest,
        _ => line,
    };
    let line = line.trim_start();
    // `WARN call{…}:effect{…}: justonce::…` as `WARN …: justonce::…`.
    let line = match line.split_once(' ') {
        Some((level, rest)) if !rest.starts_with("justonce::") => match rest.find(": justonce::") {
            Some(at) => format!("{level} …{}", &rest[at..]),
            None => line.to_owned(),
        },
        _ => line.to_owned(),
    };
    let mut out = String::new();
    let mut rest = line.as_str();
    while let Some(c) = rest.chars().next() {
        let hex = rest
            .bytes()
            .take_while(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
            .count();
        if hex == 32 && !rest[32..].starts_with(|c: char| c.is_ascii_alphanumeric()) {
            out.push_str("KEY");
            rest = &rest[32..];
        } else if let Some(tail) = rest.strip_prefix("duration_ms=") {
            out.push_str("duration_ms=N");
            rest = tail.trim_start_matches(|c: char| c.is_ascii_digit());
        } else if rest.starts_with("http://") || rest.starts_with("https://") {
            let scheme = rest.find("//").unwrap() + 2;
            let path = rest[scheme..].find('/').map_or(rest.len(), |p| scheme + p);
            out.push_str("ORIGIN");
            rest = &rest[path..];
        } else {
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}
