//! Hostile tools (issue 28): a tool that waits inside a WASI call, escapes its
//! service's paths, echoes secrets, floods its error or its logs, or reads another
//! tenant's keys is contained. Each test failed before its fix.

use std::path::Path;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use justonce::{CallRequest, Host, Limits, Outcome, Runtime};
use serde_json::json;

use crate::support::{assert_still_serving, test_host};

/// The saved trap's reason and message, or a panic with what came instead.
fn trap(outcome: &Outcome) -> (&str, &str) {
    match outcome {
        Outcome::Trap { reason, message } => (reason, message),
        other => panic!("expected a trap, got {other:?}"),
    }
}

/// A deadline short enough for a test, long enough for a loaded machine to start a call.
const SHORT_DEADLINE: Duration = Duration::from_secs(1);

/// Runs `call` on a thread and waits at most `bound` for it: a call that hangs
/// fails the test instead of hanging it.
fn within<T: Send + 'static>(bound: Duration, call: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(call());
    });
    rx.recv_timeout(bound)
        .unwrap_or_else(|_| panic!("the call was still running after {bound:?}"))
}

#[test]
fn a_tool_sleeping_in_a_wasi_call_is_stopped_at_its_deadline() {
    let limits = Limits {
        deadline: SHORT_DEADLINE,
        ..Limits::default()
    };
    let t = Arc::new(test_host(|b| b.tool_limits("sleep_forever", limits)));
    let request = CallRequest::new("sleep_forever", r#"{"seconds":3600}"#);
    let started = Instant::now();
    let host = Arc::clone(&t);
    let first = within(SHORT_DEADLINE + Duration::from_secs(1), move || {
        host.host.call(&request)
    })
    .unwrap();
    let took = started.elapsed();
    let (reason, message) = trap(&first.outcome);
    assert_eq!(reason, "deadline_exceeded", "{message}");
    assert!(message.contains("deadline of 1000 ms"), "{message}");
    assert!(
        took >= SHORT_DEADLINE,
        "stopped at the deadline, not before: {took:?}"
    );
    let retry = t
        .host
        .call(&CallRequest::new("sleep_forever", r#"{"seconds":3600}"#))
        .unwrap();
    assert!(retry.replayed, "the trap is the saved outcome");
    assert_still_serving(&t.host);
}

/// A runtime of its own, so that filling its call slots does not slow other tests.
fn sleepers_runtime(deadline: Duration) -> Arc<Runtime> {
    let mut runtime = Runtime::new(Limits {
        deadline,
        ..Limits::default()
    })
    .expect("runtime");
    for path in [
        justonce_tests::guests::SLEEP_FOREVER_COMPONENT,
        justonce_tests::guests::ECHO_COMPONENT,
    ] {
        runtime.load_file(Path::new(path)).expect("guest loads");
    }
    Arc::new(runtime)
}

#[test]
fn sleeping_calls_in_every_slot_do_not_keep_a_fresh_call_from_being_served() {
    // Long enough for 128 calls to start on a loaded machine before the first ends.
    let deadline = Duration::from_secs(3);
    let runtime = sleepers_runtime(deadline);
    let host: Arc<Host> = Arc::new(
        Host::builder()
            .runtime(Arc::clone(&runtime))
            .build()
            .expect("host"),
    );
    let slots = justonce::__private::CONCURRENT_CALLS;
    let sleepers: Vec<_> = (0..slots)
        .map(|tag| {
            let host = Arc::clone(&host);
            std::thread::spawn(move || {
                let args = json!({ "seconds": 3600, "tag": tag }).to_string();
                host.call(&CallRequest::new("sleep_forever", args))
            })
        })
        .collect();
    // Every slot taken by a sleeper before the fresh call comes.
    let filling = Instant::now();
    while runtime.free_call_slots() > 0 {
        assert!(
            filling.elapsed() < deadline,
            "the sleepers did not fill the slots: {} free",
            runtime.free_call_slots()
        );
        std::thread::yield_now();
    }
    let started = Instant::now();
    let fresh = Arc::clone(&host);
    let answer = within(deadline * 2, move || {
        fresh.call(&CallRequest::new("echo", r#"{"message":"fresh"}"#))
    });
    let took = started.elapsed();
    let answer = answer.expect("the fresh call is served");
    assert!(answer.outcome.is_success(), "{answer:?}");
    eprintln!("a fresh call behind {slots} sleepers was answered in {took:?}");
    for sleeper in sleepers {
        let outcome = sleeper.join().unwrap().expect("a sleeper ends").outcome;
        assert_eq!(trap(&outcome).0, "deadline_exceeded");
    }
}

const PAY_TOKEN: &str = "tok_live_hostile_5d1c9e07b3a4";

/// `pay` = `<api>/v1` with a bearer token, and `http_fetch` allowed the API's origin.
fn pay_service(api: &justonce::__private::LocalApi) -> justonce::HttpConfig {
    justonce::HttpConfig::default()
        .service("pay", format!("{}/v1", api.url()))
        .service_header("pay", "Authorization", format!("Bearer {PAY_TOKEN}"))
        .allow("http_fetch", api.url())
}

fn fetch(urls: &[String]) -> CallRequest {
    let requests: Vec<_> = urls
        .iter()
        .map(|url| json!({ "method": "GET", "url": url, "record": true }))
        .collect();
    CallRequest::new("http_fetch", json!({ "requests": requests }).to_string())
}

#[test]
fn a_service_secret_stays_on_the_services_paths() {
    let api = justonce::__private::LocalApi::start().unwrap();
    let t = test_host(|b| b.http(pay_service(&api)));
    let base = api.url();
    let response = t
        .host
        .call(&fetch(&[
            format!("{base}/v1/refunds"),
            format!("{base}/v1/../admin/delete"),
            format!("{base}/v1/%2e%2e/admin/encoded"),
            format!("{base}/v1/..%2Fadmin/slash"),
        ]))
        .unwrap();
    let result = crate::support::success(&response.outcome).clone();
    let seen = api.requests();
    let auth = |path: &str| {
        seen.iter()
            .find(|r| r.path == path)
            .unwrap_or_else(|| panic!("no request to {path}: {seen:?}"))
            .headers
            .get("authorization")
            .cloned()
    };
    assert_eq!(auth("/v1/refunds"), Some(format!("Bearer {PAY_TOKEN}")));
    assert_eq!(
        auth("/admin/delete"),
        None,
        "sent normalized, without the secret"
    );
    assert!(
        seen.iter()
            .all(|r| !r.path.contains("..") && !r.path.contains('%')),
        "no request left with dot-segments or encoded separators: {seen:?}"
    );
    for refused in &result.as_array().unwrap()[2..] {
        let error = refused["error"].as_str().unwrap_or_default();
        assert!(error.contains("hides"), "{refused}");
    }
}

#[test]
fn a_secret_the_downstream_echoes_is_stripped_before_it_is_saved_or_returned() {
    let api = justonce::__private::LocalApi::start().unwrap();
    let t = test_host(|b| b.http(pay_service(&api)));
    let response = t
        .host
        .call(&fetch(&[format!("{}/v1/echo", api.url())]))
        .unwrap();
    let seen = api.requests();
    assert_eq!(
        seen[0].headers.get("authorization"),
        Some(&format!("Bearer {PAY_TOKEN}")),
        "the downstream got the secret"
    );
    let agent = response.to_json().to_string();
    assert!(!agent.contains(PAY_TOKEN), "returned to the guest: {agent}");
    assert!(agent.contains("[redacted]"), "{agent}");
    let journal = crate::support::journal_snapshot(&t.host).to_string();
    assert!(
        !journal.contains(PAY_TOKEN),
        "saved in the journal: {journal}"
    );
    let retry = t
        .host
        .call(&fetch(&[format!("{}/v1/echo", api.url())]))
        .unwrap();
    assert!(retry.replayed);
    assert!(!retry.to_json().to_string().contains(PAY_TOKEN));
}

#[test]
fn a_huge_tool_error_is_the_tools_result_too_large_trap_never_saved_whole() {
    let t = test_host(|b| b);
    let request = CallRequest::new("hostile_outputs", r#"{"error_bytes":20000000}"#);
    let first = t.host.call(&request).unwrap();
    let (reason, message) = trap(&first.outcome);
    assert_eq!(reason, "result_too_large");
    assert!(message.contains("error of 20000"), "{message}");
    let journal = crate::support::journal_snapshot(&t.host).to_string();
    assert!(journal.len() < 1 << 20, "saved {} bytes", journal.len());
    let retry = t.host.call(&request).unwrap();
    assert!(retry.replayed);
    assert_eq!(retry.outcome, first.outcome);
}

#[test]
fn kv_keys_of_one_tool_or_principal_are_out_of_reach_of_another() {
    let t = test_host(|b| b);
    let put = |value: &str, principal: Option<&str>| {
        let args = json!({ "entries": [{ "key": "shared", "value": value }] }).to_string();
        let mut request = CallRequest::new("kv_put", args);
        if let Some(principal) = principal {
            request = request.principal(principal);
        }
        let response = t.host.call(&request).unwrap();
        crate::support::success(&response.outcome)[0]["previous"].clone()
    };
    assert_eq!(put("alice's", Some("alice")), json!(null));
    assert_eq!(
        put("mallory's", Some("mallory")),
        json!(null),
        "alice's value is not read"
    );
    assert_eq!(
        put("alice's again", Some("alice")),
        json!("alice's"),
        "nor overwritten"
    );
    assert_eq!(
        put("local", None),
        json!(null),
        "a local call has its own keys"
    );
    assert_eq!(put("local again", None), json!("local"), "and keeps them");
}

#[test]
fn the_journal_and_its_directory_are_private_to_the_user() {
    use std::os::unix::fs::PermissionsExt as _;
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("state");
    let db = dir.join("state.db");
    let host = Host::builder()
        .runtime(crate::support::RUNTIME.clone())
        .database(&db)
        .build()
        .expect("host");
    host.call(&CallRequest::new("echo", r#"{"message":"private"}"#))
        .unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700, "{}", dir.display());
    for file in ["state.db", "state.db-wal", "state.db-shm"] {
        let path = dir.join(file);
        if path.exists() {
            assert_eq!(mode(&path), 0o600, "{}", path.display());
        }
    }
    assert!(
        dir.join("state.db-wal").exists(),
        "the journal is in WAL mode"
    );
}

/// A log sink the test reads back.
#[derive(Clone, Default)]
struct LogSink(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for LogSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn guest_logs_have_a_budget_per_call_and_cannot_forge_a_host_line() {
    let t = test_host(|b| b);
    let sink = LogSink::default();
    let writer = sink.clone();
    // The host's text log format, on this thread only (the call runs on it).
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    let response = tracing::subscriber::with_default(subscriber, || {
        t.host.call(&CallRequest::new(
            "hostile_outputs",
            // 4 MiB through the log import, 64 times the default budget of 64 KiB.
            r#"{"log_lines":1024,"line_bytes":4096,"forge":true}"#,
        ))
    })
    .unwrap();
    assert_eq!(
        response.outcome,
        Outcome::Success {
            result: json!(null),
            content: None,
        }
    );
    let log = String::from_utf8_lossy(&sink.0.lock().unwrap()).into_owned();
    assert!(
        log.len() < 256 << 10,
        "{} bytes of log for a 64 KiB budget",
        log.len()
    );
    assert!(log.contains("dropped"), "says that lines were dropped");
    for line in log.lines() {
        assert!(
            !line.starts_with("INFO justonce: FORGED"),
            "a guest forged a host line: {line}"
        );
    }
    assert!(
        log.contains("FORGED-HOST-LINE"),
        "the line is logged, escaped"
    );
}

/// `http_fetch` allowed `origins`, and nothing else configured.
fn fetching(origins: &[String]) -> justonce::HttpConfig {
    origins
        .iter()
        .fold(justonce::HttpConfig::default(), |config, origin| {
            config.allow("http_fetch", origin)
        })
}

#[test]
fn a_name_that_resolves_to_loopback_is_refused_unless_the_config_names_the_address() {
    let api = justonce::__private::LocalApi::start().unwrap();
    let port = api.url().rsplit(':').next().unwrap().to_owned();
    let by_name = format!("http://localhost:{port}");
    let request = fetch(&[format!("{by_name}/internal")]);

    // Allowed by name only: `localhost` is 127.0.0.1, which nothing names.
    let t = test_host(|b| b.http(fetching(std::slice::from_ref(&by_name))));
    let err = t.host.call(&request).unwrap_err();
    let told = err.to_string();
    assert!(
        matches!(err, justonce::Error::NotPerformed { .. }),
        "{err:?}"
    );
    assert!(told.contains("resolves to"), "{told}");
    assert!(told.contains("loopback"), "{told}");
    assert_eq!(api.connections(), 0, "nothing reached the loopback API");

    // The opposite: the config names 127.0.0.1 as a literal, so the name may reach it.
    let t = test_host(|b| b.http(fetching(&[by_name.clone(), api.url()])));
    let response = t.host.call(&request).unwrap();
    let result = crate::support::success(&response.outcome);
    assert!(result[0]["status"].is_u64(), "an answer: {result}");
    assert_eq!(api.requests()[0].path, "/internal");
}

#[test]
fn a_tool_may_not_send_a_cloud_metadata_header() {
    let api = justonce::__private::LocalApi::start().unwrap();
    let t = test_host(|b| b.http(fetching(&[api.url()])));
    let step = |headers: serde_json::Value| {
        json!({ "method": "PUT", "url": format!("{}/computeMetadata/v1/token", api.url()),
                "headers": headers, "body": "x" })
    };
    let call = |headers| {
        CallRequest::new(
            "http_fetch",
            json!({ "requests": [step(headers)] }).to_string(),
        )
    };
    for header in [
        "Metadata-Flavor",
        "metadata",
        "X-aws-ec2-metadata-token-ttl-seconds",
    ] {
        let response = t.host.call(&call(json!({ header: "Google" }))).unwrap();
        let result = crate::support::success(&response.outcome);
        let error = result[0]["error"].as_str().unwrap_or_default();
        assert!(error.contains("cloud metadata"), "{header}: {result}");
    }
    assert_eq!(api.connections(), 0, "no request was sent");
    // The opposite: an ordinary header goes.
    let response = t.host.call(&call(json!({ "X-Tenant": "acme" }))).unwrap();
    assert!(response.outcome.is_success(), "{response:?}");
    assert_eq!(
        api.requests()[0]
            .headers
            .get("x-tenant")
            .map(String::as_str),
        Some("acme")
    );
}

#[test]
fn a_tool_leaking_handles_ends_in_its_own_saved_handle_limit_trap() {
    let t = test_host(|b| b);
    let request = CallRequest::new("leak_handles", r#"{"handles":2000000}"#);
    let first = t
        .host
        .call(&request)
        .expect("the tool's trap, not a host failure");
    let (reason, message) = trap(&first.outcome);
    assert_eq!(reason, "handle_limit", "{message}");
    assert!(message.contains("10000 handles"), "{message}");
    let retry = t.host.call(&request).unwrap();
    assert!(retry.replayed, "the trap is the saved outcome, not re-run");
    assert_eq!(retry.outcome, first.outcome);
    // The opposite: a tool that holds fewer handles than the cap returns.
    let fewer = t
        .host
        .call(&CallRequest::new("leak_handles", r#"{"handles":1000}"#))
        .unwrap();
    assert_eq!(crate::support::success(&fewer.outcome), &json!(1000));
    assert_still_serving(&t.host);
}

/// `component` with a name section naming a core module `libpython3.14.so`, as
/// CPython's is named: the import policy takes it for a component that embeds CPython.
fn disguised_as_cpython(component: &[u8]) -> Vec<u8> {
    let module = b"libpython3.14.so";
    // A `name` custom section whose module-name subsection (0) holds `module`; every
    // length here is below 128, so each LEB128 is one byte.
    let mut subsection = vec![module.len() as u8];
    subsection.extend_from_slice(module);
    let mut payload = vec![4];
    payload.extend_from_slice(b"name");
    payload.extend_from_slice(&[0, subsection.len() as u8]);
    payload.extend_from_slice(&subsection);
    let mut bytes = component.to_vec();
    bytes.extend_from_slice(&[0, payload.len() as u8]);
    bytes.extend_from_slice(&payload);
    bytes
}

#[test]
fn a_guest_disguised_as_cpython_loads_but_its_sockets_deny_whatever_wasi_allows() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("open_socket.wasm");
    let bytes = std::fs::read(justonce_tests::guests::OPEN_SOCKET_COMPONENT).unwrap();
    std::fs::write(&path, disguised_as_cpython(&bytes)).unwrap();
    let mut runtime = Runtime::new(Limits::default()).unwrap();
    // A WASI context that would let every socket through.
    runtime.open_wasi_network_context();
    runtime
        .load_file(&path)
        .expect("taken for CPython by its name, it loads");
    let host = Host::builder().runtime(Arc::new(runtime)).build().unwrap();
    let args = json!({ "address": address }).to_string();
    let response = host.call(&CallRequest::new("open_socket", args)).unwrap();
    let out = crate::support::success(&response.outcome);
    assert_eq!(out["connected"], false, "{out}");
    let error = out["error"].as_str().unwrap_or_default().to_lowercase();
    assert!(error.contains("denied"), "a refusal: {out}");
    assert!(
        matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "nothing connected to {address}"
    );
}

/// `payments_refund` against a payments API that never answers, with `attempts`
/// attempts a second apart, under a wall-clock cap of `cap`.
fn refund_never_answered(
    attempts: u32,
    cap: Duration,
) -> (crate::support::TestHost, Arc<crate::support::FakePayments>) {
    let payments = Arc::new(crate::support::FakePayments::new(
        crate::support::Fault::AlwaysTimeout,
    ));
    let second = Duration::from_secs(1);
    let t = test_host(|b| {
        b.provider("payments", payments.clone())
            .retry_policy(justonce::RetryPolicy {
                max_attempts: attempts,
                initial_backoff: second,
                max_backoff: second,
                max_retry_after: second,
            })
            .tool_limits(
                "payments_refund",
                Limits {
                    wall_clock: cap,
                    ..Limits::default()
                },
            )
    });
    (t, payments)
}

#[test]
fn an_effect_retrying_past_the_calls_wall_clock_cap_stops_there_on_the_hosts_clock() {
    use justonce::Clock as _;
    let refund = || CallRequest::new("payments_refund", r#"{"order_id":7,"amount_cents":100}"#);
    let (t, payments) = refund_never_answered(50, Duration::from_millis(2500));
    let started = t.clock.now_ms();
    let err = t.host.call(&refund()).unwrap_err();
    assert!(
        matches!(err, justonce::Error::OutcomeUnknown { .. }),
        "{err:?}"
    );
    let told = err.to_string();
    assert!(told.contains("wall-clock cap of 2500 ms"), "{told}");
    // Attempts at 0, 1 and 2 s of the host's (manual) clock; the pause before a
    // fourth would end past the cap. Every attempt under the one key.
    let attempts = payments.attempts();
    assert_eq!(attempts.len(), 3, "{attempts:?}");
    assert!(
        attempts.iter().all(|key| key == &attempts[0]),
        "{attempts:?}"
    );
    assert!(t.clock.now_ms() - started < 2500, "no wait past the cap");

    // The opposite: under the default cap (60 s) the retry budget is what ends it.
    let (t, payments) = refund_never_answered(5, Limits::default().wall_clock);
    let err = t.host.call(&refund()).unwrap_err();
    assert!(!err.to_string().contains("wall-clock"), "{err}");
    assert_eq!(payments.attempts().len(), 5);
}

#[test]
fn time_inside_effects_counts_toward_the_calls_wall_clock_cap() {
    // A provider that takes 300 ms per effect, a tool that asks for one effect per
    // order: past the 500 ms cap the guest is stopped, though its own running time
    // is far inside its 10 s deadline.
    let limits = Limits {
        wall_clock: Duration::from_millis(500),
        ..Limits::default()
    };
    let t = test_host(|b| {
        b.tool_limits("send_receipt", limits).provider(
            "mail",
            Arc::new(crate::sandbox::SlowMail(Duration::from_millis(300))),
        )
    });
    let orders: Vec<_> = (1..=5)
        .map(|i| json!({ "order_id": i, "email": "a@example.com", "amount_cents": 1 }))
        .collect();
    let request = CallRequest::new("send_receipt", json!({ "orders": orders }).to_string());
    let response = within(Duration::from_secs(5), {
        let t = Arc::new(t);
        move || t.host.call(&request)
    })
    .unwrap();
    let (reason, message) = trap(&response.outcome);
    assert_eq!(reason, "deadline_exceeded", "{message}");
    assert!(message.contains("wall-clock cap of 500 ms"), "{message}");
    assert!(message.contains("inside effects"), "{message}");
}

#[test]
fn a_tool_not_granted_a_service_does_not_get_its_credentials_on_the_same_origin() {
    let api = justonce::__private::LocalApi::start().unwrap();
    let refunds = format!("{}/v1/refunds", api.url());
    let authorization = |config: justonce::HttpConfig| {
        let before = api.requests().len();
        let t = test_host(|b| b.http(config));
        let response = t.host.call(&fetch(std::slice::from_ref(&refunds))).unwrap();
        assert!(response.outcome.is_success(), "{response:?}");
        let seen = api.requests();
        assert_eq!(seen.len(), before + 1, "the request was sent");
        seen[before].headers.get("authorization").cloned()
    };
    // `pay` is granted to `payments_refund` only; `http_fetch` may reach the origin.
    assert_eq!(
        authorization(pay_service(&api).grant("pay", "payments_refund")),
        None,
        "an ungranted tool's request goes without the service's secret"
    );
    // The opposite: granted, the same request carries it.
    assert_eq!(
        authorization(pay_service(&api).grant("pay", "http_fetch")),
        Some(format!("Bearer {PAY_TOKEN}"))
    );
}

#[test]
fn the_built_in_mailbox_file_is_private_to_the_user() {
    use std::os::unix::fs::PermissionsExt as _;
    let root = tempfile::tempdir().unwrap();
    let path = root.path().join("state").join("mailbox.db");
    let _mail = justonce::__private::MailProvider::open(
        Some(&path),
        Arc::new(justonce::ManualClock::default()),
        Duration::from_secs(60),
    )
    .unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(path.parent().unwrap()), 0o700);
}
