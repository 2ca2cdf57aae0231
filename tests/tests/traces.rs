//! Traces: `justonce run` exports a `call` span, an `effect` span and one `attempt`
//! span per attempt over OTLP/HTTP to the collector the standard variables (or
//! justonce.toml) name, each carrying the keys; and sends nothing when none is named.

use std::net::TcpListener;
use std::process::{Command, Output};

use justonce::__private::{Behaviour, LocalApi};
use serde_json::{Value, json};

use crate::support::cli::{json_of, justonce_command};
use crate::support::mcp::{McpProcess, VERSION};
use crate::support::mcp_http::{HttpClient, HttpProcess, add_token};
use crate::support::otlp::{Collector, Span};

/// The payments API's token, which the host sends from its environment.
const TOKEN: &str = "tok_live_traces_5e1f0c9a2b7d";

/// A payments API that needs the token, and (in a fresh directory) an HTTP config
/// that sends it.
struct Setup {
    dir: tempfile::TempDir,
    payments: LocalApi,
}

impl Setup {
    fn new() -> Self {
        let (dir, payments) = (tempfile::tempdir().unwrap(), LocalApi::start().unwrap());
        payments.require_header("Authorization", &format!("Bearer {TOKEN}"));
        let service = json!({
            "url": payments.url(),
            "headers": { "Authorization": "Bearer ${TRACES_TEST_TOKEN}" }
        });
        let config = json!({
            "services": { "payments": service },
            "allow": { "refund": [payments.url()] }
        });
        std::fs::write(dir.path().join("http.json"), config.to_string()).unwrap();
        Self { dir, payments }
    }

    /// `justonce run refund` with the token, logging everything, and no collector
    /// unless `configure` names one.
    fn refund(&self, configure: impl FnOnce(&mut Command)) -> Output {
        let mut command = justonce_command(Some(&self.dir.path().join("state.db")));
        command
            .arg("--http-config")
            .arg(self.dir.path().join("http.json"))
            .args([
                "run",
                "refund",
                "--args",
                r#"{"order_id":4417,"amount_cents":1299}"#,
            ])
            .env("TRACES_TEST_TOKEN", TOKEN)
            .env("JUSTONCE_LOG", "debug");
        configure(&mut command);
        command.output().unwrap()
    }

    fn config_file(&self) -> std::path::PathBuf {
        self.dir.path().join("justonce.toml")
    }
}

fn ran(out: &Output) -> Value {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json_of(out)
}

fn named<'a>(spans: &'a [Span], name: &str) -> Vec<&'a Span> {
    spans.iter().filter(|s| s.name == name).collect()
}

fn exporting_to(collector: &Collector) -> impl FnOnce(&mut Command) + '_ {
    |command| {
        command.env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url());
    }
}

#[test]
fn a_retried_effect_is_one_call_one_effect_and_two_attempts_under_the_same_keys() {
    let setup = Setup::new();
    let collector = Collector::start();
    // The first response is lost: the host retries under the same key.
    setup.payments.script([Behaviour::ApplyThenDrop]);
    let answer = ran(&setup.refund(exporting_to(&collector)));
    let invocation = answer["key"].as_str().unwrap();

    // The retry happened under one key, and the refund was made once.
    let sent: Vec<Option<String>> = setup
        .payments
        .requests()
        .into_iter()
        .map(|r| r.key)
        .collect();
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert!(sent[0].is_some() && sent[0] == sent[1], "{sent:?}");
    assert_eq!(setup.payments.applied().len(), 1);
    let effect_key = sent[0].clone().unwrap();

    // Exported before the process exited.
    let spans = collector.spans();
    let calls = named(&spans, "call");
    let effects = named(&spans, "effect");
    let mut attempts = named(&spans, "attempt");
    assert_eq!(
        (calls.len(), effects.len(), attempts.len()),
        (1, 1, 2),
        "{spans:#?}"
    );
    let (call, effect) = (calls[0], effects[0]);
    attempts.sort_by_key(|a| a.attr("attempt").to_owned());

    // Parented call > effect > attempt, in one trace.
    assert_eq!(call.parent_span_id, "", "the call is the root");
    assert_eq!(effect.parent_span_id, call.span_id);
    for attempt in &attempts {
        assert_eq!(attempt.parent_span_id, effect.span_id, "{attempt:?}");
    }
    assert!(spans.iter().all(|s| s.trace_id == call.trace_id));
    assert_eq!(call.service, "justonce");

    // Every span names the invocation; the effect and its attempts the key the
    // payments API saw.
    for span in [call, effect, attempts[0], attempts[1]] {
        assert_eq!(span.attr("invocation"), invocation, "{span:?}");
    }
    for span in [effect, attempts[0], attempts[1]] {
        assert_eq!(span.attr("effect"), effect_key, "{span:?}");
    }
    assert_eq!(call.attr("tool"), "refund");
    assert_eq!(call.attr("outcome"), "success");
    assert_eq!(call.attr("replayed"), "false");
    assert_eq!(effect.attr("provider"), "http");
    assert_eq!(effect.attr("seq"), "0");
    assert_eq!(
        attempts
            .iter()
            .map(|a| (a.attr("attempt"), a.attr("result")))
            .collect::<Vec<_>>(),
        [("1", "unknown"), ("2", "ok")]
    );

    // The service's credentials reach no span (nor anything else sent).
    for export in collector.exports() {
        let body = String::from_utf8_lossy(&export.body);
        assert!(!body.contains(TOKEN), "the token was exported: {body}");
    }

    // The same call again is replayed: a call span saying so, and no effect.
    let before = spans.len();
    let again = ran(&setup.refund(exporting_to(&collector)));
    assert_eq!(again["replayed"], true);
    let later: Vec<Span> = collector.spans().split_off(before);
    assert_eq!(
        later
            .iter()
            .map(|s| (s.name.as_str(), s.attr("invocation"), s.attr("replayed")))
            .collect::<Vec<_>>(),
        [("call", invocation, "true")],
        "{later:#?}"
    );
}

#[test]
fn the_configuration_files_otlp_endpoint_is_used_when_no_variable_names_one() {
    let setup = Setup::new();
    let collector = Collector::start();
    std::fs::write(
        setup.config_file(),
        format!("[telemetry]\notlp_endpoint = \"{}\"\n", collector.url()),
    )
    .unwrap();
    let answer = ran(&setup.refund(|_| {}));
    let spans = collector.spans();
    let call = named(&spans, "call");
    assert_eq!(call.len(), 1, "{spans:#?}");
    assert_eq!(call[0].attr("invocation"), answer["key"].as_str().unwrap());
    assert_eq!(named(&spans, "attempt").len(), 1, "{spans:#?}");
}

#[test]
fn nothing_is_sent_without_an_endpoint_or_when_the_sdk_is_disabled() {
    let setup = Setup::new();
    // A collector on the default OTLP/HTTP port, where an exporter that ignored the
    // missing endpoint would send (when the port is free on this machine).
    let default_port = TcpListener::bind("127.0.0.1:4318").ok().map(Collector::on);
    let collector = Collector::start();

    let answer = ran(&setup.refund(|command| {
        command.env("OTEL_SERVICE_NAME", "justonce-test");
    }));
    assert_eq!(answer["ok"], true, "{answer}");
    // Named, but switched off.
    let again = ran(&setup.refund(|command| {
        command
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url())
            .env("OTEL_SDK_DISABLED", "true");
    }));
    assert_eq!(again["replayed"], true, "{again}");

    assert_eq!(collector.exports().len(), 0);
    if let Some(default_port) = default_port {
        assert_eq!(default_port.exports().len(), 0);
    }
}

#[test]
fn a_bad_endpoint_is_bad_input_naming_the_variable() {
    let setup = Setup::new();
    let out = setup.refund(|command| {
        command.env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "not a url");
    });
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
        "{stderr}"
    );
    assert!(setup.payments.requests().is_empty(), "nothing ran");
}

/// A database directory whose justonce.toml exports to `collector`.
fn exporting_directory(collector: &Collector) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("justonce.toml"),
        format!("[telemetry]\notlp_endpoint = \"{}\"\n", collector.url()),
    )
    .unwrap();
    dir
}

fn receipt(order: u64) -> Value {
    json!({ "orders": [{ "order_id": order, "email": "ada@example.com", "amount_cents": 100 }] })
}

/// The call spans `collector` holds: (tool, outcome).
fn calls(collector: &Collector) -> Vec<(String, String)> {
    named(&collector.spans(), "call")
        .into_iter()
        .map(|s| (s.attr("tool").to_owned(), s.attr("outcome").to_owned()))
        .collect()
}

#[test]
fn serve_sends_its_spans_when_it_stops_on_sigterm() {
    // On stdio: the batch would wait seconds more; the signal sends it.
    let collector = Collector::start();
    let dir = exporting_directory(&collector);
    let mut server = McpProcess::spawn(&dir.path().join("state.db"), &[], "warn");
    server.client.initialize(VERSION);
    server.client.call("send_receipt", receipt(1), json!({}));
    let (code, log) = server.signal_and_wait("TERM");
    assert_eq!(code, Some(0), "{log}");
    assert_eq!(
        calls(&collector),
        [("send_receipt".to_owned(), "success".to_owned())],
        "{log}"
    );

    // Over HTTP: the same.
    let collector = Collector::start();
    let dir = exporting_directory(&collector);
    let db = dir.path().join("state.db");
    let token = add_token(&db, "ops");
    let server = HttpProcess::spawn(&db, &[]);
    let answered = HttpClient::new(server.addr, Some(token))
        .call("send_receipt", receipt(2), json!({}))
        .tool_result();
    assert_ne!(answered["isError"], true, "{answered}");
    assert_eq!(server.terminate(), Some(0));
    assert_eq!(
        calls(&collector),
        [("send_receipt".to_owned(), "success".to_owned())]
    );
}
