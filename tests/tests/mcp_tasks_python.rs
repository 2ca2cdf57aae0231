//! The official MCP Python SDK (tests/mcp/tasks_client.py, on the `mcp` of
//! tests/mcp/requirements.txt) as a client of the Tasks extension, against two
//! `justonce serve --http` hosts of one PostgreSQL journal: a call started on one
//! host outlives its connection and that host, and the other host answers its task.
//!
//! Skipped, with a message, without PostgreSQL or the SDK; under `CI=true` either is
//! a failure.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use justonce::__private::postgres_testing::cluster;
use serde_json::Value;

use crate::support::cli::justonce_command;
use crate::support::db::mailbox_count;

const CLIENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/mcp/tasks_client.py");

/// A bound on a hang, not a timing assertion.
const WAIT: Duration = Duration::from_secs(60);

/// `justonce serve --http` on the journal at `url`, in `dir` (its tokens and the
/// hosts' shared test mailbox are in `dir/.justonce/`), killed when dropped.
struct Host {
    child: Child,
    url: String,
}

impl Host {
    fn start(dir: &Path, db: &str, tools: &Path) -> Self {
        let mut child = justonce_command(Some(Path::new(db)))
            .current_dir(dir)
            .args(["serve", "--http", "127.0.0.1:0", "--deliver-every-ms", "0"])
            .arg("--tools")
            .arg(tools)
            // A killed host's calls are free to resume a second later.
            .env("JUSTONCE_LEASE_MS", "1000")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start justonce serve --http");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .expect("read the URL");
        Self {
            child,
            url: line.trim().to_owned(),
        }
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// tasks_client.py `args`, its report.
fn client(python: &Path, args: &[&str]) -> Value {
    let out = Command::new(python)
        .arg(CLIENT)
        .args(args)
        .output()
        .expect("run tasks_client.py");
    assert!(
        out.status.success(),
        "tasks_client.py {args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

/// Waits until `query` (one integer) on the journal at `db` is `want`.
fn wait_until(db: &str, query: &str, key: &str, want: i64) {
    let mut journal = postgres::Client::connect(db, postgres::NoTls).unwrap();
    let start = Instant::now();
    loop {
        let n: i64 = journal.query_one(query, &[&key]).unwrap().get(0);
        if n == want {
            return;
        }
        if start.elapsed() > WAIT {
            let row = journal
                .query_one(
                    "SELECT state || ' ' || COALESCE(lease_expires_at::TEXT, '-') || ' ' || \
                     (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT::TEXT \
                     FROM invocations WHERE key = $1",
                    &[&key],
                )
                .map(|r| r.get::<_, String>(0));
            panic!("{query} ({key}) stayed {n}, not {want}: {row:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

const COMPLETED: &str = "SELECT COUNT(*) FROM invocations WHERE key = $1 AND state = 'completed'";
const LEASE_OVER: &str = "SELECT COUNT(*) FROM invocations WHERE key = $1 \
    AND lease_expires_at < (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT";
/// The call's email is claimed in the journal (its answer is written with the
/// call's next commit).
const CLAIMED: &str = "SELECT COUNT(*) FROM effects WHERE invocation_key = $1";

#[test]
fn a_task_started_on_one_host_is_fetched_from_the_other_after_the_first_was_killed() {
    let python = match &*crate::mcp_python::PYTHON {
        Ok(python) => python.clone(),
        Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("no Python with the MCP SDK under CI: {e}")
        }
        Err(e) => {
            eprintln!("skipping the Python SDK's tasks test: {e}");
            return;
        }
    };
    let Some(cluster) =
        cluster("a_task_started_on_one_host_is_fetched_from_the_other_after_the_first_was_killed")
    else {
        return;
    };
    let db = cluster.database();
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools");
    std::fs::create_dir(&tools).unwrap();
    let guest = Path::new(justonce_tests::guests::SLOW_MAIL_COMPONENT);
    std::fs::copy(guest, tools.join(guest.file_name().unwrap())).unwrap();
    let out = justonce_command(Some(Path::new(&db)))
        .current_dir(dir.path())
        .args(["token", "add", "alice"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token = String::from_utf8(out.stdout).unwrap().trim().to_owned();

    let first = Host::start(dir.path(), &db, &tools);
    let second = Host::start(dir.path(), &db, &tools);

    // Two calls start on the first host; each client leaves with its task.
    let done = client(
        &python,
        &["start", &first.url, &token, "ada@example.com", "3"],
    );
    let finished = done["task_id"].as_str().expect("a task").to_owned();
    assert_eq!(done["status"], "working", "{done}");
    let cut = client(
        &python,
        &["start", &first.url, &token, "bea@example.com", "3"],
    );
    let interrupted = cut["task_id"].as_str().expect("a task").to_owned();
    assert_ne!(interrupted, finished, "two calls, two tasks");

    // The first finishes on its host after its client left; the second has sent its
    // email, and is sleeping, when the host is killed.
    wait_until(&db, COMPLETED, &finished, 1);
    wait_until(&db, CLAIMED, &interrupted, 1);
    let mailbox = dir.path().join(".justonce/mailbox.db");
    let start = Instant::now();
    while mailbox_count(&mailbox) < 2 {
        assert!(start.elapsed() < WAIT, "the second email never went out");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(first);
    let stopped: i64 = postgres::Client::connect(&db, postgres::NoTls)
        .unwrap()
        .query_one(COMPLETED, &[&interrupted])
        .unwrap()
        .get(0);
    assert_eq!(
        stopped, 0,
        "the call was still running when its host was killed"
    );

    // The other host answers both from the journal.
    let got = client(&python, &["fetch", &second.url, &token, &finished]);
    assert_eq!(got["status"], "completed", "{got}");
    assert_eq!(
        got["result"]["_meta"]["dev.justonce/key"],
        finished.as_str()
    );
    assert!(
        got["result"]["structuredContent"]["message_id"].is_string(),
        "{got}"
    );

    // The interrupted call: once the killed host's lease is over, the client's retry
    // on the other host is the same task, which resumes it there without sending
    // its email again.
    wait_until(&db, LEASE_OVER, &interrupted, 1);
    let again = client(
        &python,
        &["start", &second.url, &token, "bea@example.com", "3"],
    );
    assert_eq!(again["task_id"], interrupted.as_str(), "{again}");
    let got = client(&python, &["fetch", &second.url, &token, &interrupted]);
    assert_eq!(got["status"], "completed", "{got}");
    // One email per call: the resumed run's attempt was under the same key.
    assert_eq!(mailbox_count(&mailbox), 2);
}
