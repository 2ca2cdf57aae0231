//! The hand-over on SIGTERM (issue 55): two `serve --http` hosts on one journal
//! (PostgreSQL, and a SQLite file two processes share), a refund hung at a payments
//! API on host A, SIGTERM to A with a short `--drain-timeout-ms`. A stops taking
//! work, says so, waits out its drain, then hands the call over: its lease ends at
//! once, journaled as A's hand-over. The agent's retry on host B, which answers
//! `in_progress` after 1 s while a live lease holds the call, is then answered with
//! the refund, taken over under the key A journaled: one refund downstream, the
//! same key on both attempts, and B's log says A handed it over.

use std::path::Path;
use std::time::{Duration, Instant};

use justonce::__private::tokens::{Role, add_with_role};
use justonce::__private::{Behaviour, LocalApi};
use serde_json::{Value, json};

use crate::health::probe;
use crate::support::mcp_http::{HttpClient, HttpProcess};

/// How long a duplicate on B waits for a live lease before it answers `in_progress`.
const ANSWER_WITHIN_MS: &str = "1000";
/// How long A's drain lets its calls finish before it hands them over.
const DRAIN_TIMEOUT_MS: &str = "1500";

/// `serve --http` on `db` as host `name`, with the payments API of `http_config`.
fn serve(db: &str, name: &str, tokens: &Path, http_config: &Path) -> HttpProcess {
    HttpProcess::spawn_logged(
        Path::new(db),
        &[
            "--tokens",
            tokens.to_str().unwrap(),
            "--answer-within-ms",
            ANSWER_WITHIN_MS,
            "--drain-timeout-ms",
            DRAIN_TIMEOUT_MS,
        ],
        &[
            ("JUSTONCE_LOG", "info"),
            ("JUSTONCE_HOST_NAME", name),
            ("JUSTONCE_HTTP_CONFIG", http_config.to_str().unwrap()),
        ],
    )
}

/// A keyed payments API (it applies each Idempotency-Key once) that takes the first
/// refund and then does not answer while its sender is there, and the `http`
/// configuration (in `dir`) that lets `refund` reach it as `payments`.
pub(crate) fn hanging_payments(dir: &Path) -> (LocalApi, std::path::PathBuf) {
    let payments = LocalApi::start().unwrap();
    payments.script([Behaviour::ApplyThenHang]);
    let http_config = dir.join("http.json");
    std::fs::write(
        &http_config,
        json!({"services": {"payments": payments.url()}, "allow": {"refund": [payments.url()]}})
            .to_string(),
    )
    .unwrap();
    (payments, http_config)
}

/// The refund of order 4417, as the agent sends it each time.
fn refund(client: &mut HttpClient) -> Value {
    client
        .call(
            "refund",
            json!({"order_id": 4417, "amount_cents": 1299}),
            json!({"_meta": {"dev.justonce/conversation": "order-4417"}}),
        )
        .tool_result()
}

fn a_drained_host_hands_its_hung_call_over_to_the_next_hosts_retry(db: &str) {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.json");
    let agent = add_with_role(&tokens, "bot", Role::Agent).unwrap();
    let (payments, http_config) = hanging_payments(dir.path());
    let host_a = serve(db, "web-a", &tokens, &http_config);
    let host_b = serve(db, "web-b", &tokens, &http_config);

    // The agent asks A; A sends the refund and waits on the hanging API.
    let on_a = HttpClient::new(host_a.addr, Some(agent.clone()));
    let first = std::thread::spawn(move || {
        on_a.refund_to_the_end(
            json!({"order_id": 4417, "amount_cents": 1299}),
            "order-4417",
        )
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    while payments.requests().is_empty() {
        assert!(
            Instant::now() < deadline,
            "the refund never reached the API"
        );
        std::thread::sleep(Duration::from_millis(10));
    }

    // The agent's retry on B while A holds the call: a live lease, so B waits its
    // 1 s and says the call is in progress (retry-safe). Nothing is sent.
    let mut on_b = HttpClient::new(host_b.addr, Some(agent));
    let waited = refund(&mut on_b);
    assert_eq!(
        waited["structuredContent"]["error"]["kind"], "in_progress",
        "{waited}"
    );
    assert_eq!(waited["structuredContent"]["error"]["retry_safe"], true);
    assert_eq!(payments.requests().len(), 1, "B sent nothing");

    // SIGTERM to A: it drains (not ready), waits out its drain timeout with the
    // refund still hung, hands the call over and exits 0.
    host_a.send_term();
    // Not ready once it took the signal (which a loaded machine may deliver late).
    let deadline = Instant::now() + Duration::from_secs(30);
    let (status, body) = loop {
        let (status, body) = probe(host_a.addr, "/readyz");
        if status != 200 || Instant::now() > deadline {
            break (status, body);
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!((status, body.as_str()), (503, "draining\n"));
    let (code, log_a) = host_a.wait_for_log();
    let drain_ended = Instant::now();
    assert_eq!(code, Some(0), "{log_a}");
    assert!(log_a.contains("draining: stopping"), "{log_a}");
    assert!(
        log_a.contains("handed over call ")
            && log_a.contains("drained: 1 call(s) still running after 1500 ms handed over"),
        "{log_a}"
    );
    assert_eq!(
        String::from_utf8_lossy(&first.join().unwrap()),
        "",
        "A answered nothing for the call it handed over"
    );

    // The agent's retry on B: taken over at once (a live lease would have kept it
    // `in_progress` past B's 1 s), resumed under the key A journaled, answered.
    let answered = refund(&mut on_b);
    println!(
        "B answered the handed-over call {} ms after A's drain ended",
        drain_ended.elapsed().as_millis()
    );
    assert_eq!(answered["isError"], false, "{answered}");
    assert_eq!(
        answered["structuredContent"]["status"], "succeeded",
        "{answered}"
    );
    assert_eq!(
        answered["_meta"]["dev.justonce/key"], waited["_meta"]["dev.justonce/key"],
        "one call, one key"
    );
    let keys: Vec<Option<String>> = payments.requests().into_iter().map(|r| r.key).collect();
    assert_eq!(keys.len(), 2, "A's request and B's: {keys:?}");
    assert!(keys[0].is_some() && keys[0] == keys[1], "{keys:?}");
    assert_eq!(payments.applied().len(), 1, "one refund");

    // The opposite: another refund is another call, performed too.
    let other = on_b
        .call(
            "refund",
            json!({"order_id": 4418, "amount_cents": 1299}),
            json!({"_meta": {"dev.justonce/conversation": "order-4418"}}),
        )
        .tool_result();
    assert_eq!(other["isError"], false, "{other}");
    assert_eq!(payments.applied().len(), 2, "a different refund happens");
    let log_b = host_b.stop_for_log();
    assert!(
        log_b.contains("took over a call that web-a (pid ") && log_b.contains("as it drained"),
        "{log_b}"
    );
}

#[test]
fn a_drained_host_hands_its_hung_call_over_on_postgresql() {
    let Some(cluster) = justonce::__private::postgres_testing::cluster(
        "a_drained_host_hands_its_hung_call_over_on_postgresql",
    ) else {
        return;
    };
    a_drained_host_hands_its_hung_call_over_to_the_next_hosts_retry(&cluster.database());
}

#[test]
fn a_drained_host_hands_its_hung_call_over_on_a_shared_sqlite_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    a_drained_host_hands_its_hung_call_over_to_the_next_hosts_retry(db.to_str().unwrap());
}
