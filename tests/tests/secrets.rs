//! Service credentials from the host's environment or a secrets file: the host adds
//! them to the service's requests (HTTP and webhook delivery), and their values
//! appear nowhere else: not in the journal's files, not in any output.

use std::path::Path;
use std::process::Output;

use justonce::__private::LocalApi;
use serde_json::json;

use crate::support::cli::{json_of, justonce_command};

const TOKEN_VARIABLE: &str = "JUSTONCE_TEST_PAYMENTS_TOKEN";
const PAYMENTS_TOKEN: &str = "tok_live_9f3c1a7e5b2d48c6a0e1";
const WEBHOOK_SECRET: &str = "whsec_0b7d2e4f6a8c1e3d5f7a";
const REFUND_ARGS: &str = r#"{"order_id":4417,"amount_cents":1299}"#;

struct Setup {
    dir: tempfile::TempDir,
    payments: LocalApi,
    receiver: LocalApi,
}

impl Setup {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let payments = LocalApi::start().unwrap();
        payments.require_header("Authorization", &format!("Bearer {PAYMENTS_TOKEN}"));
        let receiver = LocalApi::start().unwrap();
        receiver.require_header("X-Webhook-Secret", WEBHOOK_SECRET);
        std::fs::write(
            dir.path().join("secrets.env"),
            format!("# delivered by the ops team\nWEBHOOK_SECRET={WEBHOOK_SECRET}\n"),
        )
        .unwrap();
        let config = json!({
            "secrets_file": "secrets.env",
            "services": {
                "payments": {
                    "url": payments.url(),
                    "headers": { "Authorization": format!("Bearer ${{{TOKEN_VARIABLE}}}") }
                },
                "webhooks": {
                    "url": receiver.url(),
                    "headers": { "X-Webhook-Secret": "${WEBHOOK_SECRET}" }
                }
            },
            "allow": { "refund": [payments.url()], "notify": [receiver.url()] }
        });
        std::fs::write(dir.path().join("http.json"), config.to_string()).unwrap();
        Self {
            dir,
            payments,
            receiver,
        }
    }

    /// `justonce --http-config http.json ARGS…`, logging everything, with the token in
    /// the environment when `token` is set.
    fn justonce(&self, token: bool, args: &[&str]) -> Output {
        let mut command = justonce_command(Some(&self.dir.path().join("state.db")));
        command
            .arg("--http-config")
            .arg(self.dir.path().join("http.json"))
            .args(args)
            .env("JUSTONCE_LOG", "justonce=trace,warn");
        if token {
            command.env(TOKEN_VARIABLE, PAYMENTS_TOKEN);
        } else {
            command.env_remove(TOKEN_VARIABLE);
        }
        command.output().unwrap()
    }
}

/// Every byte of every file in `dir` (the database, its WAL and shared memory, the
/// compile cache), except the secrets file itself.
fn bytes_under(dir: &Path) -> Vec<u8> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            all.extend(bytes_under(&path));
        } else if path.file_name().is_some_and(|n| n != "secrets.env") {
            all.extend(std::fs::read(&path).unwrap());
        }
    }
    all
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[test]
fn service_credentials_reach_the_downstream_and_nowhere_else() {
    let setup = Setup::new();
    let mut outputs = Vec::new();

    let refund = setup.justonce(true, &["run", "refund", "--args", REFUND_ARGS]);
    outputs.push(refund.clone());
    assert_eq!(
        json_of(&refund)["ok"],
        true,
        "{}",
        String::from_utf8_lossy(&refund.stderr)
    );
    let seen = setup.payments.requests();
    assert_eq!(
        seen[0].headers.get("authorization").map(String::as_str),
        Some(format!("Bearer {PAYMENTS_TOKEN}").as_str()),
        "the host added the credential"
    );
    assert_eq!(setup.payments.applied().len(), 1);

    let queued = setup.justonce(
        true,
        &["run", "notify", "--args", r#"{"event":"refund.issued"}"#],
    );
    assert_eq!(json_of(&queued)["result"]["state"], "pending");
    outputs.push(queued);
    let delivered = setup.justonce(true, &["deliver"]);
    assert_eq!(
        json_of(&delivered)["delivered"],
        1,
        "{}",
        String::from_utf8_lossy(&delivered.stdout)
    );
    outputs.push(delivered);
    assert_eq!(
        setup.receiver.requests()[0]
            .headers
            .get("x-webhook-secret")
            .map(String::as_str),
        Some(WEBHOOK_SECRET),
        "the secrets file filled in the webhook's header"
    );
    assert_eq!(setup.receiver.applied().len(), 1);

    for args in [
        &["journal"][..],
        &["journal", "--json"],
        &["journal", "--unresolved"],
        &["tools"],
    ] {
        outputs.push(setup.justonce(true, args));
    }
    // A failing request and a denied one: their errors carry no credential either.
    outputs.push(setup.justonce(
        true,
        &[
            "run",
            "refund",
            "--args",
            r#"{"order_id":1,"amount_cents":0}"#,
        ],
    ));

    let files = bytes_under(setup.dir.path());
    assert!(
        contains(&files, "refund.issued") && contains(&files, "4417"),
        "the scan reads what the journal holds"
    );
    for secret in [PAYMENTS_TOKEN, WEBHOOK_SECRET] {
        assert!(
            !contains(&files, secret),
            "{secret} is in the journal's files"
        );
        for output in &outputs {
            for stream in [&output.stdout, &output.stderr] {
                assert!(
                    !contains(stream, secret),
                    "{secret} was printed: {}",
                    String::from_utf8_lossy(stream)
                );
            }
        }
    }
}

#[test]
fn a_missing_secret_is_a_config_error_naming_the_variable_and_nothing_is_sent() {
    let setup = Setup::new();
    let out = setup.justonce(false, &["run", "refund", "--args", REFUND_ARGS]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(TOKEN_VARIABLE)
            && stderr.contains("services.payments.headers.Authorization")
            && stderr.contains("http.json"),
        "{stderr}"
    );
    assert!(setup.payments.requests().is_empty());

    // Without the host's header the downstream refuses: the credential is what let
    // the first test through.
    std::fs::write(
        setup.dir.path().join("http.json"),
        json!({
            "services": { "payments": setup.payments.url() },
            "allow": { "refund": [setup.payments.url()] }
        })
        .to_string(),
    )
    .unwrap();
    let out = setup.justonce(true, &["run", "refund", "--args", REFUND_ARGS]);
    assert_eq!(
        json_of(&out)["ok"],
        false,
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(setup.payments.applied().len(), 0);
}
