use std::time::Duration;

use super::*;

fn value(text: &str, series: &str) -> Option<f64> {
    sample(text, series)
}

fn rendered(metrics: &CallMetrics) -> String {
    metrics.rendered()
}

#[test]
fn a_call_is_counted_once_under_its_outcome_and_a_replay_as_replayed() {
    let metrics = CallMetrics::default();
    metrics.tool("send").answered("success");
    metrics.tool("send").answered("replayed");
    metrics.tool("send").answered("replayed");
    let text = rendered(&metrics);
    assert_eq!(
        value(
            &text,
            r#"justonce_calls_total{tool="send",outcome="success"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &text,
            r#"justonce_calls_total{tool="send",outcome="replayed"}"#
        ),
        Some(2.0)
    );
    assert_eq!(
        value(&text, r#"justonce_calls_total{tool="send",outcome="trap"}"#),
        Some(0.0),
        "every outcome of a tool seen is a series, zero until it happens"
    );
}

#[test]
fn an_error_kind_without_a_series_of_its_own_counts_as_error() {
    let metrics = CallMetrics::default();
    metrics.tool("t").answered("store_unavailable");
    metrics.tool("t").answered("mismatch");
    metrics.refused("unknown_tool");
    metrics.refused("host_failed");
    let text = rendered(&metrics);
    assert_eq!(
        value(&text, r#"justonce_calls_total{tool="t",outcome="error"}"#),
        Some(1.0)
    );
    assert_eq!(
        value(
            &text,
            r#"justonce_calls_total{tool="t",outcome="mismatch"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &text,
            r#"justonce_calls_refused_total{reason="unknown_tool"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        value(&text, r#"justonce_calls_refused_total{reason="error"}"#),
        Some(1.0)
    );
}

#[test]
fn effects_attempts_and_retries_are_counted_by_provider() {
    let metrics = CallMetrics::default();
    let http = metrics.provider("http");
    http.attempt_ended("unknown");
    http.retried("unknown");
    http.attempt_ended("ok");
    http.effect_ended("ok");
    metrics.tool("t").took_over();
    let text = rendered(&metrics);
    for (series, expected) in [
        (
            r#"justonce_effects_total{provider="http",result="ok"}"#,
            1.0,
        ),
        (
            r#"justonce_effects_total{provider="http",result="outcome_unknown"}"#,
            0.0,
        ),
        (
            r#"justonce_effect_attempts_total{provider="http",result="unknown"}"#,
            1.0,
        ),
        (
            r#"justonce_effect_attempts_total{provider="http",result="ok"}"#,
            1.0,
        ),
        (
            r#"justonce_effect_retries_total{provider="http",after="unknown"}"#,
            1.0,
        ),
        (
            r#"justonce_effect_retries_total{provider="http",after="earlier_run"}"#,
            0.0,
        ),
        (r#"justonce_lease_takeovers_total{tool="t"}"#, 1.0),
    ] {
        assert_eq!(value(&text, series), Some(expected), "{series} in\n{text}");
    }
}

#[test]
fn resolutions_are_counted_by_who_decided() {
    let metrics = CallMetrics::default();
    let text = rendered(&metrics);
    for decided_by in ["probe", "person", "operator"] {
        let series = format!(r#"justonce_resolutions_total{{decided_by="{decided_by}"}}"#);
        assert_eq!(value(&text, &series), Some(0.0), "at zero from the start");
    }
    metrics.resolved("probe");
    metrics.resolved("probe");
    metrics.resolved("operator");
    metrics.resolved("person");
    let text = rendered(&metrics);
    assert_eq!(
        value(&text, r#"justonce_resolutions_total{decided_by="person"}"#),
        Some(1.0)
    );
    assert_eq!(
        value(&text, r#"justonce_resolutions_total{decided_by="probe"}"#),
        Some(2.0)
    );
    assert_eq!(
        value(
            &text,
            r#"justonce_resolutions_total{decided_by="operator"}"#
        ),
        Some(1.0)
    );
}

#[test]
fn a_call_is_in_flight_until_its_guard_is_dropped() {
    let metrics = CallMetrics::default();
    let first = metrics.in_flight();
    let second = metrics.in_flight();
    assert_eq!(
        value(&rendered(&metrics), "justonce_calls_in_flight"),
        Some(2.0)
    );
    drop(first);
    drop(second);
    assert_eq!(
        value(&rendered(&metrics), "justonce_calls_in_flight"),
        Some(0.0)
    );
}

#[test]
fn a_histogram_is_cumulative_with_its_sum_and_count() {
    let journal = JournalMetrics::default();
    journal.committed(Duration::from_micros(40));
    journal.committed(Duration::from_millis(3));
    journal.committed(Duration::from_secs(60));
    let mut text = Text::default();
    journal.render(&mut text);
    let text = text.finish();
    let bucket = |le: &str| {
        value(
            &text,
            &format!("justonce_journal_commit_seconds_bucket{{le=\"{le}\"}}"),
        )
    };
    assert_eq!(bucket("0.00005"), Some(1.0));
    assert_eq!(bucket("0.0025"), Some(1.0), "3 ms is above 2.5 ms");
    assert_eq!(bucket("0.005"), Some(2.0));
    assert_eq!(bucket("5"), Some(2.0));
    assert_eq!(bucket("+Inf"), Some(3.0));
    assert_eq!(
        value(&text, "justonce_journal_commit_seconds_count"),
        Some(3.0)
    );
    let sum = value(&text, "justonce_journal_commit_seconds_sum").unwrap();
    assert!((sum - 60.00304).abs() < 1e-9, "{sum}");
    assert_eq!(
        value(&text, "justonce_journal_fsync_seconds_count"),
        Some(0.0)
    );
}

#[test]
fn families_are_typed_and_label_values_escaped() {
    let mut text = Text::default();
    text.family("x_total", "counter", "A help\\text\nover two lines.");
    text.sample("x_total", &[("tool", "a\"b\\c\nd"), ("k", "v")], 7);
    assert_eq!(
        text.finish(),
        "# HELP x_total A help\\\\text\\nover two lines.\n# TYPE x_total counter\n\
         x_total{tool=\"a\\\"b\\\\c\\nd\",k=\"v\"} 7\n"
    );
}

#[test]
fn the_outbox_depth_is_a_gauge_per_state() {
    let mut text = Text::default();
    OutboxDepth {
        pending: 2,
        retrying: 1,
        failed: 0,
    }
    .render(&mut text);
    let text = text.finish();
    assert!(text.contains("# TYPE justonce_outbox_messages gauge"));
    assert_eq!(
        value(&text, r#"justonce_outbox_messages{state="pending"}"#),
        Some(2.0)
    );
    assert_eq!(
        value(&text, r#"justonce_outbox_messages{state="retrying"}"#),
        Some(1.0)
    );
    assert_eq!(
        value(&text, r#"justonce_outbox_messages{state="failed"}"#),
        Some(0.0)
    );
}

#[test]
fn the_service_of_an_effect_is_its_configured_service_else_its_host_else_its_provider() {
    use serde_json::json;
    assert_eq!(
        service_of("http", &json!({"service": "payments", "path": "/v1"})),
        "payments"
    );
    assert_eq!(
        service_of(
            "http",
            &json!({"url": "https://u:p@API.example.com:8443/v1?x=1"})
        ),
        "api.example.com"
    );
    assert_eq!(
        service_of("http", &json!({"url": "http://[::1]:80/x"})),
        "::1"
    );
    assert_eq!(service_of("mail", &json!({"to": "a@b"})), "mail");
    assert_eq!(
        service_of("mail", &json!({"service": "chosen-by-the-tool"})),
        "mail",
        "only an HTTP request's payload names a service"
    );
}

#[test]
fn services_a_tool_makes_up_stop_growing_the_series_at_the_cap() {
    let metrics = CallMetrics::default();
    for n in 0..MAX_EFFECT_ROWS + 50 {
        metrics
            .effect("http", &format!("host-{n}.example"), "scan")
            .attempt_ended("ok");
    }
    assert_eq!(
        metrics.by_tool.rows().len(),
        MAX_EFFECT_ROWS + 1,
        "the cap, and one overflow row"
    );
    // The opposite case: a service seen before the cap keeps its own row.
    metrics
        .effect("http", "host-0.example", "scan")
        .attempt_ended("ok");
    let text = rendered(&metrics);
    let series = |service: &str| {
        value(
            &text,
            &format!(
                r#"justonce_tool_effect_attempts_total{{tool="scan",provider="http",service="{service}",result="ok"}}"#
            ),
        )
    };
    assert_eq!(series(OTHER_SERVICE), Some(50.0));
    assert_eq!(series("host-0.example"), Some(2.0));
    assert_eq!(
        series(&format!("host-{}.example", MAX_EFFECT_ROWS + 1)),
        None
    );
}

#[test]
fn a_tools_effect_series_name_the_service_and_two_services_are_two_series() {
    let metrics = CallMetrics::default();
    let payments = metrics.effect("http", "payments", "refund");
    payments.attempt_ended("unknown");
    payments.retried("unknown");
    payments.attempt_ended("ok");
    metrics
        .effect("http", "ledger", "refund")
        .attempt_ended("ok");
    let text = rendered(&metrics);
    let series = |service: &str, result: &str| {
        value(
            &text,
            &format!(
                r#"justonce_tool_effect_attempts_total{{tool="refund",provider="http",service="{service}",result="{result}"}}"#
            ),
        )
    };
    assert_eq!(series("payments", "ok"), Some(1.0));
    assert_eq!(series("payments", "unknown"), Some(1.0));
    assert_eq!(series("ledger", "ok"), Some(1.0));
    assert_eq!(series("ledger", "unknown"), Some(0.0));
    assert_eq!(
        value(
            &text,
            r#"justonce_tool_effect_retries_total{tool="refund",provider="http",service="payments",after="unknown"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &text,
            r#"justonce_effect_attempts_total{provider="http",result="ok"}"#
        ),
        Some(2.0),
        "the provider's own series add both services up"
    );
}
