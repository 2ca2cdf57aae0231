//! Racing duplicates: many threads, and many processes on one SQLite file, send the
//! same call (one effect, one outcome for all) or distinct calls (one effect each).
//! No caller may see `database is locked` or any other error.
//!
//! The multi-process tests re-run this test binary as worker processes: the ignored
//! test [`worker`] does the calling when `JUSTONCE_WORKER_DB` is set.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use justonce::Durability;
use justonce::{CallRequest, Host};
use serde_json::{Value, json};

use crate::support::process::Db;
use crate::support::{RUNTIME, receipt_args};

const THREADS: usize = 32;
const PROCESSES: usize = 4;
const THREADS_PER_PROCESS: usize = 8;
const DISTINCT_CALLS: u64 = 64;

/// Generous, so that a slow machine shows up as a slow test, not `in_progress`.
const WAIT_BOUND: Duration = Duration::from_secs(300);

fn request(order: u64) -> CallRequest {
    CallRequest::new("send_receipt", receipt_args(order, "ada@example.com")).conversation("race")
}

/// What one call ended as, in a form that crosses process boundaries.
fn answer(order: u64, result: Result<justonce::CallResponse, justonce::Error>) -> Value {
    match result {
        Ok(r) => json!({
            "order": order,
            "key": r.key.as_str(),
            "replayed": r.replayed,
            "outcome": r.outcome.to_agent_json(),
        }),
        Err(e) => json!({ "order": order, "error": format!("{}: {e}", e.kind()) }),
    }
}

/// Sends `orders[t]` from thread `t`, all released at once; returns every answer.
fn race(host: Arc<Host>, orders: Vec<Vec<u64>>) -> Vec<Value> {
    let barrier = Arc::new(Barrier::new(orders.len()));
    let handles: Vec<_> = orders
        .into_iter()
        .map(|mine| {
            let (host, barrier) = (host.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                mine.into_iter()
                    .map(|order| answer(order, host.call(&request(order))))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    handles
        .into_iter()
        .flat_map(|h| h.join().expect("a caller thread panicked"))
        .collect()
}

/// Checks that every answer is a success, that all answers to one order agree and
/// exactly one of them ran it, and that the mailbox holds one email per order.
fn assert_once_per_order(answers: &[Value], orders: u64, db: &Path) {
    let errors: Vec<&Value> = answers
        .iter()
        .filter(|a| a.get("error").is_some())
        .collect();
    assert!(
        errors.is_empty(),
        "{} callers got an error: {errors:?}",
        errors.len()
    );
    let mut by_order: BTreeMap<u64, Vec<&Value>> = BTreeMap::new();
    for a in answers {
        by_order
            .entry(a["order"].as_u64().unwrap())
            .or_default()
            .push(a);
    }
    assert_eq!(by_order.len() as u64, orders);
    let mailbox = Db::open(db).mailbox();
    let mails: BTreeMap<&str, &str> = mailbox
        .iter()
        .map(|m| (m.message_id.as_str(), m.key.as_str()))
        .collect();
    for (order, answers) in &by_order {
        let first = answers[0];
        assert_eq!(first["outcome"]["ok"], true, "{first}");
        assert!(
            answers
                .iter()
                .all(|a| a["outcome"] == first["outcome"] && a["key"] == first["key"]),
            "order {order}: the callers were told different things: {answers:?}"
        );
        let ran = answers.iter().filter(|a| a["replayed"] == false).count();
        assert_eq!(
            ran, 1,
            "order {order}: exactly one caller ran it: {answers:?}"
        );
        let message_id = first["outcome"]["result"]["sent"][0]["message_id"]
            .as_str()
            .unwrap();
        assert!(
            mails.contains_key(message_id),
            "order {order}: {message_id} is in the mailbox"
        );
    }
    assert_eq!(mailbox.len() as u64, orders, "one email per distinct call");
    let keys: BTreeSet<&str> = mailbox.iter().map(|m| m.key.as_str()).collect();
    assert_eq!(keys.len() as u64, orders, "each email under its own key");
}

fn file_host(db: &Path) -> Arc<Host> {
    Arc::new(
        Host::builder()
            .database(db)
            .runtime(RUNTIME.clone())
            .wait_bound(WAIT_BOUND)
            .build()
            .expect("host"),
    )
}

#[test]
fn thirty_two_threads_sending_the_same_call_make_one_effect_and_agree() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let answers = race(file_host(&db), vec![vec![7]; THREADS]);
    assert_eq!(answers.len(), THREADS);
    assert_once_per_order(&answers, 1, &db);
    assert_eq!(
        Db::open(&db).requests().len(),
        1,
        "the mailbox was asked once"
    );
}

#[test]
fn thirty_two_threads_sending_sixty_four_distinct_calls_make_sixty_four_effects() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let per_thread = DISTINCT_CALLS / THREADS as u64;
    let orders = (0..THREADS as u64)
        .map(|t| (0..per_thread).map(|i| t * per_thread + i).collect())
        .collect();
    let answers = race(file_host(&db), orders);
    assert_eq!(answers.len() as u64, DISTINCT_CALLS);
    assert_once_per_order(&answers, DISTINCT_CALLS, &db);
}

/// Runs `PROCESSES` workers of `THREADS_PER_PROCESS` threads on `db`; `orders(w, t)`
/// is what thread `t` of worker `w` sends. Returns every answer of every worker.
fn race_processes(db: &Path, orders: impl Fn(usize, usize) -> Vec<u64>) -> Vec<Value> {
    // Create the journal and mailbox once, as a deployment does before it serves.
    drop(
        justonce::Host::builder()
            .database(db)
            .durability(Durability::default())
            .build()
            .unwrap(),
    );
    let dir = db.parent().unwrap();
    let workers: Vec<_> = (0..PROCESSES)
        .map(|w| {
            let plan: Vec<Vec<u64>> = (0..THREADS_PER_PROCESS).map(|t| orders(w, t)).collect();
            let out = dir.join(format!("worker-{w}.json"));
            let child = Command::new(std::env::current_exe().unwrap())
                .args([
                    "concurrency::worker",
                    "--exact",
                    "--ignored",
                    "--nocapture",
                    "--test-threads",
                    "1",
                ])
                .env("JUSTONCE_WORKER_DB", db)
                .env(
                    "JUSTONCE_WORKER_PLAN",
                    serde_json::to_string(&plan).unwrap(),
                )
                .env("JUSTONCE_WORKER_OUT", &out)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("start a worker process");
            (child, out)
        })
        .collect();
    let mut answers = Vec::new();
    for (child, out) in workers {
        let output = child.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "worker failed: {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let text = std::fs::read_to_string(&out).expect("the worker wrote its answers");
        let mine: Vec<Value> = serde_json::from_str(&text).unwrap();
        answers.extend(mine);
    }
    answers
}

#[test]
fn four_processes_of_eight_threads_sending_the_same_call_make_one_effect_and_agree() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let answers = race_processes(&db, |_, _| vec![11]);
    assert_eq!(answers.len(), PROCESSES * THREADS_PER_PROCESS);
    assert_once_per_order(&answers, 1, &db);
    assert_eq!(
        Db::open(&db).requests().len(),
        1,
        "the mailbox was asked once"
    );
}

#[test]
fn four_processes_of_eight_threads_sending_sixty_four_distinct_calls_twice_make_sixty_four_effects()
{
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    // Every call is sent by two processes: worker w sends the calls of slots w and
    // w + 1 (mod 4), each slot being 16 of the 64 calls, two per thread.
    let per_thread = DISTINCT_CALLS / (PROCESSES * THREADS_PER_PROCESS) as u64;
    let slot = |w: usize, t: usize| -> Vec<u64> {
        let base = (w * THREADS_PER_PROCESS + t) as u64 * per_thread;
        (base..base + per_thread).collect()
    };
    let answers = race_processes(&db, |w, t| {
        let mut mine = slot(w, t);
        mine.extend(slot((w + 1) % PROCESSES, t));
        mine
    });
    assert_eq!(answers.len() as u64, 2 * DISTINCT_CALLS);
    assert_once_per_order(&answers, DISTINCT_CALLS, &db);
}

/// Not a test: the body of a worker process started by the tests above.
#[test]
#[ignore = "runs only as a worker process of the multi-process tests"]
fn worker() {
    let Some(db) = std::env::var_os("JUSTONCE_WORKER_DB") else {
        return;
    };
    let plan: Vec<Vec<u64>> =
        serde_json::from_str(&std::env::var("JUSTONCE_WORKER_PLAN").unwrap()).unwrap();
    let out = std::env::var_os("JUSTONCE_WORKER_OUT").unwrap();
    // Only the example tools: each worker compiles what it calls, not every guest.
    let host = Host::builder()
        .database(Path::new(&db))
        .example_tools()
        .wait_bound(WAIT_BOUND)
        .build()
        .expect("worker host");
    let answers = race(Arc::new(host), plan);
    std::fs::write(out, serde_json::to_string(&answers).unwrap()).unwrap();
}
