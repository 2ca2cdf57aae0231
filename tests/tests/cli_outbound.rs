//! `justonce run`, `deliver` and `--http-config` as separate processes, against a
//! payments API and a webhook receiver on 127.0.0.1.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use justonce::__private::{Behaviour, LocalApi};
use serde_json::{Value, json};

use crate::support::cli::{json_of, justonce_command};
use crate::support::mcp::{McpProcess, VERSION, result};

fn justonce(db: &Path, config: &Path, args: &[&str]) -> Command {
    let mut command = justonce_command(Some(db));
    command.arg("--http-config").arg(config).args(args);
    command
}

fn write_config(dir: &Path, config: &Value) -> PathBuf {
    let path = dir.join("http.json");
    std::fs::write(&path, config.to_string()).unwrap();
    path
}

fn outbox_row(db: &Path) -> (String, String, i64) {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row("SELECT effect_key, state, attempts FROM outbox", [], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?))
    })
    .unwrap()
}

/// A database, a webhook receiver, and a config that lets `notify` reach it.
fn webhook_setup() -> (tempfile::TempDir, PathBuf, LocalApi, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let receiver = LocalApi::start().unwrap();
    let config = write_config(
        dir.path(),
        &json!({ "services": { "webhooks": receiver.url() }, "allow": { "notify": [receiver.url()] } }),
    );
    (dir, db, receiver, config)
}

#[test]
fn killing_the_delivery_process_mid_send_and_restarting_it_delivers_once() {
    let (_dir, db, receiver, config) = webhook_setup();
    let queued = justonce(
        &db,
        &config,
        &["run", "notify", "--args", r#"{"event":"refund.issued"}"#],
    )
    .output()
    .unwrap();
    assert_eq!(json_of(&queued)["result"]["state"], "pending");

    // The receiver records the webhook and never answers; the sender is killed.
    receiver.script([Behaviour::ApplyThenHang]);
    let mut sender = justonce(&db, &config, &["deliver"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while receiver.applied().is_empty() {
        assert!(
            Instant::now() < deadline,
            "the first delivery never arrived"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    sender.kill().unwrap();
    sender.wait().unwrap();
    let (key, state, attempts) = outbox_row(&db);
    assert_eq!(
        (state.as_str(), attempts),
        ("pending", 1),
        "the killed send is on record"
    );

    // Restarted, the deliverer sends it again at once: the lock died with the process.
    let restarted = justonce(&db, &config, &["deliver"]).output().unwrap();
    assert!(
        restarted.status.success(),
        "{}",
        String::from_utf8_lossy(&restarted.stderr)
    );
    let report = json_of(&restarted);
    assert_eq!(report["delivered"], 1, "{report}");

    // Both sends carried the same key, the receiver recorded the webhook once, and
    // the delivery is recorded.
    let keys: Vec<Option<String>> = receiver.requests().into_iter().map(|r| r.key).collect();
    assert_eq!(keys, vec![Some(key.clone()); 2]);
    assert_eq!(receiver.applied().len(), 1);
    assert_eq!(report["attempts"][0]["key"], key.as_str());
    assert_eq!(outbox_row(&db), (key, "delivered".into(), 2));
    // A further pass sends nothing.
    let idle = json_of(&justonce(&db, &config, &["deliver"]).output().unwrap());
    assert_eq!(idle["attempts"], json!([]));
}

#[test]
fn token_add_before_the_journal_makes_a_private_database_directory_and_deliver_an_owner_only_lock()
{
    use std::os::unix::fs::PermissionsExt as _;
    let (dir, _, _receiver, config) = webhook_setup();
    let db = dir.path().join("data/state.db");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;

    // The tokens file goes next to the database: its directory is made here first.
    let added = justonce_command(Some(&db))
        .args(["token", "add", "ops", "--role", "operator"])
        .output()
        .unwrap();
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
    let data = dir.path().join("data");
    assert_eq!(mode(&data), 0o700, "as the journal makes it");
    assert_eq!(mode(&data.join("tokens.json")), 0o600);

    let delivered = justonce(&db, &config, &["deliver"]).output().unwrap();
    assert!(
        delivered.status.success(),
        "{}",
        String::from_utf8_lossy(&delivered.stderr)
    );
    assert_eq!(mode(&data.join("state.db")), 0o600);
    assert_eq!(mode(&data.join("state.db.deliver.lock")), 0o600);
}

#[test]
fn run_refunds_over_http_once_when_the_response_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let payments = LocalApi::start().unwrap();
    payments.script([Behaviour::ApplyThenDrop]);
    let config = write_config(
        dir.path(),
        &json!({ "services": { "payments": payments.url() }, "allow": { "refund": [payments.url()] } }),
    );
    let args = r#"{"order_id":4417,"amount_cents":1299}"#;
    let run = |call: &str| {
        justonce(
            &db,
            &config,
            &["run", "refund", "--args", args, "--call-id", call],
        )
        .output()
        .unwrap()
    };

    let first = run("call_1");
    assert_eq!(
        first.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let first = json_of(&first);
    let second = json_of(&run("call_2"));

    assert_eq!(
        payments.requests().len(),
        2,
        "one retry inside the first run"
    );
    let keys: Vec<Option<String>> = payments.requests().into_iter().map(|r| r.key).collect();
    assert!(keys[0].is_some() && keys[0] == keys[1], "{keys:?}");
    assert_eq!(payments.applied().len(), 1);
    assert_eq!(
        first["result"]["refund_id"],
        payments.applied()[0].id.as_str()
    );
    assert_eq!(
        (second["replayed"].clone(), second["result"].clone()),
        (json!(true), first["result"].clone())
    );
}

#[test]
fn a_bad_http_config_file_is_refused_with_the_entry_named() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    for (config, needle) in [
        (
            json!({ "allow": { "refund": ["http://127.0.0.1:9/path"] } }),
            "allow.refund",
        ),
        (
            json!({ "services": { "payments": "ftp://127.0.0.1" } }),
            "services.payments",
        ),
        (json!({ "alow": {} }), "unknown field `alow`"),
    ] {
        let path = write_config(dir.path(), &config);
        let out = justonce(
            &db,
            &path,
            &[
                "run",
                "refund",
                "--args",
                r#"{"order_id":1,"amount_cents":1}"#,
            ],
        )
        .output()
        .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains(needle) && stderr.contains("http.json"),
            "{needle}: {stderr}"
        );
    }
    let missing = justonce(&db, &dir.path().join("nope.json"), &["deliver"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&missing.stderr).contains("cannot read the http config"));
}

#[test]
fn serve_delivers_queued_webhooks_in_the_background() {
    let (_dir, db, receiver, config) = webhook_setup();
    let config = config.to_str().unwrap();
    let mut server = McpProcess::spawn(
        &db,
        &["--http-config", config, "--deliver-every-ms", "20"],
        "warn",
    );
    server.client.initialize(VERSION);

    let told = server
        .client
        .call("notify", json!({ "event": "refund.issued" }), json!({}));
    assert_eq!(result(&told)["isError"], false, "{told}");
    let deadline = Instant::now() + Duration::from_secs(60);
    while outbox_row(&db).1 != "delivered" {
        assert!(
            Instant::now() < deadline,
            "not delivered: {:?}",
            outbox_row(&db)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let (_, code, log) = server.close();

    assert_eq!(code, Some(0), "{log}");
    let (key, _, attempts) = outbox_row(&db);
    assert_eq!(attempts, 1);
    let keys: Vec<Option<String>> = receiver.requests().into_iter().map(|r| r.key).collect();
    assert_eq!(keys, [Some(key)]);
    assert_eq!(receiver.applied().len(), 1);
}
