//! The alerting rules and the Grafana dashboard of `docs/deploy/` (issue 55):
//! `promtool` accepts the rules and their unit tests pass (each alert fires on the
//! series it is for, and not on the opposite case), and every series and label they
//! name is one a running `serve --metrics` exports.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::metrics::scrape;
use crate::support::mcp::McpProcess;
use crate::support::prometheus::{free_port, promtool};

const RULES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../docs/deploy/prometheus/justonce-rules.yml"
);
const RULE_TESTS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../docs/deploy/prometheus/justonce-rules.test.yml"
);
const DASHBOARD: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../docs/deploy/grafana/justonce.json"
);

/// Runs `promtool ARGS`; panics with what it printed unless it succeeds.
fn promtool_succeeds(test: &str, args: &[&str]) {
    let Some(bin) = promtool(test) else {
        return;
    };
    let out = Command::new(&bin)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", bin.display()));
    assert!(
        out.status.success(),
        "promtool {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn promtool_accepts_the_rules() {
    promtool_succeeds("promtool_accepts_the_rules", &["check", "rules", RULES]);
}

#[test]
fn the_rules_unit_tests_pass() {
    promtool_succeeds("the_rules_unit_tests_pass", &["test", "rules", RULE_TESTS]);
}

#[test]
fn every_alert_has_a_unit_test_where_it_fires_and_one_where_it_does_not() {
    let rules = read(RULES);
    let tests = read(RULE_TESTS);
    let alerts: Vec<&str> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert:"))
        .map(str::trim)
        .collect();
    assert!(alerts.len() >= 7, "{alerts:?}");
    // (alert, whether a case expects it to fire)
    let mut cases = BTreeSet::new();
    let lines: Vec<&str> = tests.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let Some(alert) = line.trim().strip_prefix("alertname:") else {
            continue;
        };
        let expected = lines.get(i + 1).map(|l| l.trim()).unwrap_or_default();
        let fires = match expected {
            "exp_alerts: []" => false,
            "exp_alerts:" => true,
            other => panic!("{alert}: exp_alerts expected after alertname, found {other:?}"),
        };
        cases.insert((alert.trim(), fires));
    }
    for alert in alerts {
        for fires in [true, false] {
            assert!(
                cases.contains(&(alert, fires)),
                "no case of {RULE_TESTS} where {alert} {}",
                if fires { "fires" } else { "stays silent" }
            );
        }
    }
}

#[test]
fn the_rules_and_the_dashboard_name_only_series_and_labels_the_host_exports() {
    let exported = exported();
    let rules = rule_exprs(&read(RULES));
    assert!(rules.len() >= 7, "{rules:?}");
    let dashboard: Value = serde_json::from_str(&read(DASHBOARD)).expect("the dashboard is JSON");
    let mut panels = Vec::new();
    dashboard_exprs(&dashboard, &mut panels);
    assert!(!panels.is_empty(), "no expr in {DASHBOARD}");

    let mut shown = BTreeSet::new();
    for (file, expr) in rules
        .iter()
        .map(|e| (RULES, e))
        .chain(panels.iter().map(|e| (DASHBOARD, e)))
    {
        let named = Named::of(expr);
        assert!(!named.metrics.is_empty(), "{file}: no series in {expr}");
        if let Err(why) = exported.check(&named) {
            panic!("{file}: {expr}\n{why}");
        }
        if file == DASHBOARD {
            shown.extend(named.metrics);
        }
    }
    // What an operator looks at first has a panel.
    for series in [
        "justonce_calls_total",
        "justonce_journal_commit_seconds_bucket",
        "justonce_journal_up",
        "justonce_calls_stuck",
        "justonce_effects_pending",
    ] {
        assert!(shown.contains(series), "the dashboard shows no {series}");
    }
}

/// The parser of this file finds what a typo hides, and reads what the rules use.
#[test]
fn a_misspelt_series_or_label_is_caught() {
    let exported = Exported::from_scrape(
        "# TYPE justonce_calls_total counter\n\
         justonce_calls_total{tool=\"echo\",outcome=\"success\"} 0\n\
         justonce_calls_total{tool=\"echo\",outcome=\"trap\"} 0\n\
         # TYPE justonce_journal_commit_seconds histogram\n\
         justonce_journal_commit_seconds_bucket{le=\"+Inf\"} 0\n",
    );
    let good = r#"sum by (job, tool) (rate(justonce_calls_total{job="justonce",outcome=~"success|trap"}[5m])) / on (job) group_left sum(rate(justonce_calls_total[$__rate_interval])) > 0.05 and up == 1
        or histogram_quantile(0.99, sum by (le) (rate(justonce_journal_commit_seconds_bucket[5m])))"#;
    assert_eq!(exported.check(&Named::of(good)), Ok(()));
    assert_eq!(
        Named::of(good).metrics,
        BTreeSet::from([
            "justonce_calls_total".to_owned(),
            "justonce_journal_commit_seconds_bucket".to_owned(),
            "up".to_owned()
        ])
    );
    for bad in [
        "justonce_call_total",
        "justonce_journal_commit_seconds",
        r#"justonce_calls_total{outcom="trap"}"#,
        r#"justonce_calls_total{outcome="traps"}"#,
        r#"justonce_calls_total{outcome=~"success|unknown"}"#,
        "sum by (tools) (justonce_calls_total)",
    ] {
        assert!(exported.check(&Named::of(bad)).is_err(), "{bad} passed");
    }
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {path}: {e}"))
}

/// What a real `serve --metrics` exports after a call (so the effect series by tool
/// have rows too).
fn exported() -> Exported {
    let dir = tempfile::tempdir().unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let mut server = McpProcess::spawn(
        &dir.path().join("state.db"),
        &["--metrics", &addr.to_string(), "--deliver-every-ms", "0"],
        "warn",
    );
    server.client.initialize("2025-06-18");
    let args =
        json!({ "orders": [{ "order_id": 1, "email": "ada@example.com", "amount_cents": 100 }] });
    let call = server.client.call(
        "send_receipt",
        args,
        json!({ "dev.justonce/conversation": "c" }),
    );
    assert!(call["result"].is_object(), "{call}");
    let reply = scrape(addr, None, "GET");
    assert_eq!(reply.status, 200, "{reply:?}");
    let (_, code, log) = server.close();
    assert_eq!(code, Some(0), "{log}");
    Exported::from_scrape(&reply.body)
}

/// The series names, label names and label values of a scrape.
#[derive(Debug, Default)]
struct Exported {
    names: BTreeSet<String>,
    labels: BTreeMap<String, BTreeSet<String>>,
}

/// The labels Prometheus adds to every series it scrapes: their values are the
/// operator's.
const TARGET_LABELS: [&str; 2] = ["job", "instance"];

impl Exported {
    fn from_scrape(text: &str) -> Self {
        let mut exported = Self::default();
        // Prometheus' own series of each target.
        exported.names.insert("up".to_owned());
        for line in text.lines() {
            if let Some(family) = line.strip_prefix("# TYPE ") {
                let (name, kind) = family.split_once(' ').expect("# TYPE name kind");
                // A histogram has no series of its family's own name.
                if kind == "histogram" {
                    for suffix in ["_bucket", "_sum", "_count"] {
                        exported.names.insert(format!("{name}{suffix}"));
                    }
                } else {
                    exported.names.insert(name.to_owned());
                }
            } else if line.starts_with('#') {
                continue;
            } else if let Some((_, labels)) = line.split_once('{') {
                let labels = labels.rsplit_once('}').expect("a closing brace").0;
                for pair in labels.split("\",") {
                    let (label, value) = pair.split_once("=\"").expect("label=\"value\"");
                    exported
                        .labels
                        .entry(label.to_owned())
                        .or_default()
                        .insert(value.trim_end_matches('"').to_owned());
                }
            }
        }
        exported
    }

    /// Whether every series, label and label value `named` names is exported.
    fn check(&self, named: &Named) -> Result<(), String> {
        for metric in &named.metrics {
            if !self.names.contains(metric) {
                return Err(format!("no series {metric}; exported: {:?}", self.names));
            }
        }
        let known = |label: &str| TARGET_LABELS.contains(&label) || self.labels.contains_key(label);
        for label in &named.grouping {
            if !known(label) {
                return Err(format!(
                    "no label {label}; exported: {:?}",
                    self.labels.keys()
                ));
            }
        }
        for (label, op, value) in &named.matchers {
            if TARGET_LABELS.contains(&label.as_str()) {
                continue;
            }
            let Some(values) = self.labels.get(label) else {
                return Err(format!(
                    "no label {label}; exported: {:?}",
                    self.labels.keys()
                ));
            };
            let alternatives: Vec<&str> = if op.ends_with('~') {
                value.split('|').collect()
            } else {
                vec![value]
            };
            for alternative in alternatives {
                if !alternative
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    return Err(format!(
                        "{label}{op}\"{value}\": only alternatives of plain values can be checked"
                    ));
                }
                if !values.contains(alternative) {
                    return Err(format!(
                        "{label} is never \"{alternative}\"; it is one of {values:?}"
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The `expr` of each rule in a rules file (one line, or a `|` block under it).
/// There is no YAML parser among the dependencies; the count against the rules
/// found makes a form this does not read fail the test instead of passing unread.
fn rule_exprs(yaml: &str) -> Vec<String> {
    let lines: Vec<&str> = yaml.lines().collect();
    let mut exprs = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let Some(rest) = trimmed.strip_prefix("expr:") else {
            continue;
        };
        let rest = rest.trim();
        if rest.starts_with('|') || rest.starts_with('>') {
            let indent = line.len() - trimmed.len();
            let block: Vec<&str> = lines[i + 1..]
                .iter()
                .take_while(|l| l.trim().is_empty() || l.len() - l.trim_start().len() > indent)
                .copied()
                .collect();
            exprs.push(block.join("\n"));
        } else if let Some(quoted) = rest.strip_prefix('\'') {
            exprs.push(quoted.trim_end_matches('\'').replace("''", "'"));
        } else {
            assert!(!rest.starts_with('"'), "write {rest} unquoted or in '…'");
            exprs.push(rest.to_owned());
        }
    }
    let rules = lines
        .iter()
        .filter(|l| {
            let l = l.trim_start();
            l.starts_with("- alert:") || l.starts_with("- record:")
        })
        .count();
    assert_eq!(exprs.len(), rules, "an expr per rule: {exprs:?}");
    exprs
}

/// Every `expr` of a dashboard's targets.
fn dashboard_exprs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(fields) => {
            for (key, field) in fields {
                match (key.as_str(), field) {
                    ("expr", Value::String(expr)) => out.push(expr.clone()),
                    _ => dashboard_exprs(field, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| dashboard_exprs(i, out)),
        _ => {}
    }
}

/// What a PromQL expression names: series, label matchers and grouping labels.
#[derive(Debug, Default)]
struct Named {
    metrics: BTreeSet<String>,
    /// (label, operator, value)
    matchers: Vec<(String, String, String)>,
    grouping: BTreeSet<String>,
}

#[derive(Debug, PartialEq)]
enum Token {
    Word(String),
    Str(String),
    Punct(String),
    /// A number, a duration or a Grafana variable.
    Other,
}

/// Words that are not series (besides [`GROUPING`]): keywords, and aggregations
/// written before `by (…)`.
const KEYWORDS: [&str; 20] = [
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "inf",
    "nan",
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
];

/// The words followed by a list of labels in parentheses (`group_left` may be not).
const GROUPING: [&str; 6] = [
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

fn punct(p: &str) -> Token {
    Token::Punct(p.to_owned())
}

fn tokens(expr: &str) -> Vec<Token> {
    let chars: Vec<char> = expr.chars().collect();
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let start = i;
        if c.is_whitespace() {
            i += 1;
        } else if c == '#' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if matches!(c, '"' | '\'' | '`') {
            let mut s = String::new();
            i += 1;
            while i < chars.len() && chars[i] != c {
                if chars[i] == '\\' && c != '`' {
                    i += 1;
                }
                s.push(chars[i]);
                i += 1;
            }
            i += 1;
            out.push(Token::Str(s));
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            while i < chars.len() && word(chars[i]) {
                i += 1;
            }
            out.push(Token::Word(chars[start..i].iter().collect()));
        } else if c.is_ascii_digit() || c == '.' || c == '$' {
            i += 1;
            while i < chars.len() && (word(chars[i]) || chars[i] == '.') {
                i += 1;
            }
            out.push(Token::Other);
        } else {
            let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
            let len = if ["=~", "!~", "!=", "==", ">=", "<="].contains(&two.as_str()) {
                2
            } else {
                1
            };
            out.push(Token::Punct(chars[i..i + len].iter().collect()));
            i += len;
        }
    }
    out
}

impl Named {
    fn of(expr: &str) -> Self {
        let tokens = tokens(expr);
        let mut named = Self::default();
        let mut i = 0;
        while i < tokens.len() {
            match &tokens[i] {
                // A range or a subquery's: durations only.
                Token::Punct(p) if p == "[" => {
                    while i < tokens.len() && tokens[i] != punct("]") {
                        i += 1;
                    }
                }
                Token::Punct(p) if p == "{" => {
                    i += 1;
                    while i < tokens.len() && tokens[i] != punct("}") {
                        match &tokens[i..] {
                            [Token::Word(label), Token::Punct(op), Token::Str(value), ..] => {
                                named
                                    .matchers
                                    .push((label.clone(), op.clone(), value.clone()));
                                i += 3;
                            }
                            [Token::Punct(comma), ..] if comma == "," => i += 1,
                            rest => panic!("cannot read the matchers of {expr} at {rest:?}"),
                        }
                    }
                }
                Token::Word(word) => {
                    let call = tokens.get(i + 1) == Some(&punct("("));
                    if call && GROUPING.contains(&word.as_str()) {
                        i += 2;
                        while i < tokens.len() && tokens[i] != punct(")") {
                            if let Token::Word(label) = &tokens[i] {
                                named.grouping.insert(label.clone());
                            }
                            i += 1;
                        }
                    } else if !call
                        && !KEYWORDS.contains(&word.as_str())
                        && !GROUPING.contains(&word.as_str())
                    {
                        named.metrics.insert(word.clone());
                    }
                }
                _ => {}
            }
            i += 1;
        }
        named
    }
}

#[test]
fn the_files_are_where_the_operators_guide_says() {
    let guide = read(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/operators.md"));
    for file in [RULES, RULE_TESTS, DASHBOARD] {
        let relative = file.split("/../").nth(1).expect("under the repository");
        assert!(Path::new(file).is_file(), "{file}");
        let named = relative.trim_start_matches("docs/");
        assert!(
            guide.contains(named),
            "docs/operators.md does not name {named}"
        );
    }
}
