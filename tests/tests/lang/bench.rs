//! The figures of docs/tool-authors.md ("What differs"): for the same no-effect call (echo)
//! and one-effect call (one email) in Rust, Python and JavaScript, the cold load
//! (compile and `describe`, no cache), the warm call latency, and the linear memory a
//! call needs. Ignored by default; run it with
//!
//! ```text
//! cargo test -p justonce --test integration lang::bench -- --ignored --nocapture
//! ```
//!
//! (add `--release` for release figures).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use justonce::{CallRequest, Host, Outcome};
use justonce::{Limits, Runtime};
use serde_json::json;

use super::{JAVASCRIPT, PYTHON, limits};

const WARM_CALLS: u32 = 20;

struct Subject {
    language: &'static str,
    component: String,
    echo: Box<dyn Fn(u32) -> CallRequest>,
    mail: Box<dyn Fn(u32) -> CallRequest>,
}

fn subjects() -> Vec<Subject> {
    let probe = |tool: &'static str| {
        (
            Box::new(move |i: u32| {
                CallRequest::new(
                    tool,
                    json!({ "op": "echo", "message": format!("m{i}") }).to_string(),
                )
            }) as Box<dyn Fn(u32) -> CallRequest>,
            Box::new(move |i: u32| {
                CallRequest::new(
                    tool,
                    json!({ "op": "mail", "message": format!("m{i}"), "email": "a@example.com" })
                        .to_string(),
                )
            }) as Box<dyn Fn(u32) -> CallRequest>,
        )
    };
    let (py_echo, py_mail) = probe("probe_py");
    let (js_echo, js_mail) = probe("probe_js");
    vec![
        Subject {
            language: "rust (echo, send_receipt)",
            component: justonce_tests::guests::ECHO_COMPONENT.into(),
            echo: Box::new(|i| {
                CallRequest::new("echo", json!({ "message": format!("m{i}") }).to_string())
            }),
            mail: Box::new(|i| {
                CallRequest::new(
                    "send_receipt",
                    crate::support::receipt_args(u64::from(i), "a@example.com"),
                )
            }),
        },
        Subject {
            language: "python",
            component: PYTHON.probe.to_string_lossy().into(),
            echo: py_echo,
            mail: py_mail,
        },
        Subject {
            language: "javascript",
            component: JAVASCRIPT.probe.to_string_lossy().into(),
            echo: js_echo,
            mail: js_mail,
        },
    ]
}

fn runtime_with(components: &[&str]) -> (Runtime, Duration) {
    let mut runtime = Runtime::new(limits()).unwrap();
    let started = Instant::now();
    for c in components {
        runtime.load_file(Path::new(c)).unwrap();
    }
    (runtime, started.elapsed())
}

fn host(runtime: Arc<Runtime>, memory: usize) -> Host {
    let mail = Arc::new(
        justonce::__private::MailProvider::open(
            None,
            Arc::new(justonce::SystemClock),
            Duration::from_secs(3600),
        )
        .unwrap(),
    );
    Host::builder()
        .runtime(runtime)
        .limits(Limits {
            memory_bytes: memory,
            ..limits()
        })
        .provider("mail", mail)
        .build()
        .unwrap()
}

/// The median time of a call, each with fresh arguments (so each one runs).
fn warm(host: &Host, request: &dyn Fn(u32) -> CallRequest) -> Duration {
    for i in 0..3 {
        assert!(
            host.call(&request(1_000_000 + i))
                .unwrap()
                .outcome
                .is_success()
        );
    }
    let mut times: Vec<Duration> = (0..WARM_CALLS)
        .map(|i| {
            let started = Instant::now();
            let response = host.call(&request(i)).unwrap();
            let took = started.elapsed();
            assert!(response.outcome.is_success(), "{:?}", response.outcome);
            took
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

/// The least linear memory, in MiB, under which the call succeeds.
fn memory_mib(runtime: &Arc<Runtime>, request: &dyn Fn(u32) -> CallRequest) -> usize {
    let (mut low, mut high) = (0usize, limits().memory_bytes >> 20);
    let mut i = 2_000_000;
    while high - low > 1 {
        let mid = (low + high) / 2;
        i += 1;
        let outcome = host(runtime.clone(), mid << 20)
            .call(&request(i))
            .unwrap()
            .outcome;
        match outcome {
            Outcome::Success { .. } => high = mid,
            _ => low = mid,
        }
    }
    high
}

#[test]
#[ignore = "prints docs/tool-authors.md's figures; run with --ignored --nocapture"]
fn figures() {
    println!(
        "| language | cold load | echo: warm call | echo: memory | one email: warm call | one email: memory |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    for s in subjects() {
        let mut components = vec![s.component.as_str()];
        if s.language.starts_with("rust") {
            // send_receipt is an example tool, embedded in the host.
            components.clear();
            components.push(justonce_tests::guests::ECHO_COMPONENT);
        }
        let (mut runtime, cold) = runtime_with(&components);
        if s.language.starts_with("rust") {
            for (name, bytes) in justonce::__private::EXAMPLE_TOOLS {
                runtime.load(Path::new(name), bytes).unwrap();
            }
        }
        let runtime = Arc::new(runtime);
        let h = host(runtime.clone(), limits().memory_bytes);
        let (echo, mail) = (warm(&h, &*s.echo), warm(&h, &*s.mail));
        let (echo_mem, mail_mem) = (
            memory_mib(&runtime, &*s.echo),
            memory_mib(&runtime, &*s.mail),
        );
        println!(
            "| {} | {:.2} s | {:.2} ms | {echo_mem} MiB | {:.2} ms | {mail_mem} MiB |",
            s.language,
            cold.as_secs_f64(),
            echo.as_secs_f64() * 1e3,
            mail.as_secs_f64() * 1e3,
        );
    }
}
