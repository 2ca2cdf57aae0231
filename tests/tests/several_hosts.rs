//! Several hosts, one PostgreSQL journal: separate `justonce` processes on one
//! database of a throwaway cluster (see `journal/postgres/testing.rs`). Skipped, by
//! name, where there is no PostgreSQL; with `CI=true` that is a failure.

use std::path::Path;
use std::process::{Command, Stdio};

use justonce::__private::postgres_testing::{PASSWORD, cluster};
use serde_json::Value;

use crate::support::cli::{json_of, justonce_command};
use crate::support::db::mailbox_count;

const ARGS: &str =
    r#"{"orders":[{"order_id":4417,"email":"ada@example.com","amount_cents":1299}]}"#;

/// `justonce --db URL ARGS…` in `dir` (where the hosts' shared test mailbox lives).
fn host(dir: &Path, url: &str, args: &[&str]) -> Command {
    let mut command = justonce_command(Some(Path::new(url)));
    command
        .current_dir(dir)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

fn mails(dir: &Path) -> i64 {
    mailbox_count(&dir.join(".justonce/mailbox.db"))
}

fn effect_keys(url: &str) -> Vec<String> {
    let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
    client
        .query("SELECT key FROM effects ORDER BY key", &[])
        .unwrap()
        .into_iter()
        .map(|r| r.get(0))
        .collect()
}

#[test]
fn four_hosts_racing_one_call_perform_one_effect_and_all_answer_it() {
    let Some(cluster) = cluster("four_hosts_racing_one_call_perform_one_effect_and_all_answer_it")
    else {
        return;
    };
    let url = cluster.database();
    let dir = tempfile::tempdir().unwrap();
    let run = [
        "run",
        "send_receipt",
        "--args",
        ARGS,
        "--conversation",
        "c1",
    ];
    let children: Vec<_> = (0..4)
        .map(|_| host(dir.path(), &url, &run).spawn().unwrap())
        .collect();
    let results: Vec<Value> = children
        .into_iter()
        .map(|c| json_of(&c.wait_with_output().unwrap()))
        .collect();

    assert!(results.iter().all(|r| r["ok"] == true), "{results:?}");
    assert!(
        results.iter().all(|r| r["result"] == results[0]["result"]),
        "one answer told to all: {results:?}"
    );
    assert_eq!(
        results.iter().filter(|r| r["replayed"] != true).count(),
        1,
        "one host ran it: {results:?}"
    );
    assert_eq!(mails(dir.path()), 1, "one effect");
    assert_eq!(effect_keys(&url).len(), 1, "one effect record");

    // The opposite: another conversation is another call, performed too.
    let out = host(
        dir.path(),
        &url,
        &[
            "run",
            "send_receipt",
            "--args",
            ARGS,
            "--conversation",
            "c2",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(json_of(&out)["ok"], true);
    assert_eq!(mails(dir.path()), 2, "a different call happens");
}

#[test]
fn one_explicit_key_with_other_arguments_on_two_hosts_is_a_mismatch() {
    let Some(cluster) = cluster("one_explicit_key_with_other_arguments_on_two_hosts_is_a_mismatch")
    else {
        return;
    };
    let url = cluster.database();
    let dir = tempfile::tempdir().unwrap();
    let other = ARGS.replace("4417", "4418");
    let spawn = |args: &str| {
        host(
            dir.path(),
            &url,
            &[
                "run",
                "send_receipt",
                "--args",
                args,
                "--key",
                "order-batch-7",
            ],
        )
        .spawn()
        .unwrap()
    };
    let (a, b) = (spawn(ARGS), spawn(&other));
    let results: Vec<Value> = [a, b]
        .into_iter()
        .map(|c| json_of(&c.wait_with_output().unwrap()))
        .collect();
    let successes = results.iter().filter(|r| r["ok"] == true).count();
    let mismatches = results
        .iter()
        .filter(|r| r["error"]["kind"] == "mismatch")
        .count();
    assert_eq!((successes, mismatches), (1, 1), "{results:?}");
    assert_eq!(mails(dir.path()), 1, "one effect");
}

// Needs the fault-injection points, which release builds have only with the feature.
#[cfg(any(debug_assertions, feature = "fault-injection"))]
#[test]
fn a_host_killed_holding_the_lease_is_taken_over_under_the_same_key() {
    let Some(cluster) = cluster("a_host_killed_holding_the_lease_is_taken_over_under_the_same_key")
    else {
        return;
    };
    let url = cluster.database();
    let dir = tempfile::tempdir().unwrap();
    let run = [
        "--lease-ms",
        "300",
        "run",
        "send_receipt",
        "--args",
        ARGS,
        "--conversation",
        "crash",
    ];
    // Host A sends the mail and dies before it records the answer.
    let killed = host(dir.path(), &url, &run)
        .env(justonce::__private::FAULT_ENV, "after_provider")
        .output()
        .unwrap();
    assert_eq!(killed.status.code(), None, "killed by a signal");
    assert!(killed.stdout.is_empty(), "A answered nothing");
    let keys = effect_keys(&url);
    assert_eq!(keys.len(), 1, "A journaled the effect before sending");
    assert_eq!(mails(dir.path()), 1);

    // Host B retries the same call: it waits out A's lease, takes over and retries
    // the effect under the key A journaled; the keyed mailbox sends nothing new.
    let out = host(dir.path(), &url, &run).output().unwrap();
    let answer = json_of(&out);
    assert_eq!(answer["ok"], true, "{answer}");
    assert_eq!(effect_keys(&url), keys, "the same key");
    assert_eq!(mails(dir.path()), 1, "the effect happened once");
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let row = client
        .query_one("SELECT state, runs FROM invocations", &[])
        .unwrap();
    assert_eq!(
        (row.get::<_, String>(0), row.get::<_, i32>(1)),
        ("completed".to_string(), 2),
        "B resumed A's run"
    );
}

#[test]
fn a_call_one_host_forgets_runs_again_on_another_and_its_story_says_who() {
    let Some(cluster) =
        cluster("a_call_one_host_forgets_runs_again_on_another_and_its_story_says_who")
    else {
        return;
    };
    let url = cluster.database();
    let dir = tempfile::tempdir().unwrap();
    let run = ["run", "send_receipt", "--args", ARGS, "--conversation", "c"];
    let story = |key: &str| {
        let out = host(dir.path(), &url, &["journal", key, "--json"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        json_of(&out)
    };
    let first = json_of(&host(dir.path(), &url, &run).output().unwrap());
    let key = first["key"].as_str().unwrap().to_string();
    // A retry on another host replays it, and the shared journal counts it.
    let retry = json_of(&host(dir.path(), &url, &run).output().unwrap());
    assert_eq!(retry["replayed"], true, "{retry}");
    let before = story(&key);
    assert_eq!(before["entry"]["replays"], 1, "{before}");
    assert_eq!(
        before["entry"]["arguments"],
        serde_json::from_str::<Value>(ARGS).unwrap()
    );
    let old_effect_key = before["entry"]["effects"][0]["key"].clone();

    let forgot = host(dir.path(), &url, &["forget", &key, "--by", "grace"])
        .output()
        .unwrap();
    assert_eq!(forgot.status.code(), Some(0), "{forgot:?}");
    let again = json_of(&host(dir.path(), &url, &run).output().unwrap());

    assert_eq!(
        again["replayed"], false,
        "forget lets it run again: {again}"
    );
    assert_eq!(
        mails(dir.path()),
        2,
        "sent again: that is what forget means"
    );
    let after = story(&key);
    assert_ne!(after["entry"]["effects"][0]["key"], old_effect_key);
    let op = &after["operations"][0];
    assert_eq!(
        (&op["action"], &op["by"]),
        (&"forget".into(), &"grace".into())
    );
    assert_eq!(op["detail"]["effects"][0]["key"], old_effect_key);
    // The opposite: a call that completed with an outcome of its own cannot be
    // abandoned, on any host (exit 2), and nothing is recorded.
    let refused = host(dir.path(), &url, &["abandon", &key, "--by", "grace"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert_eq!(story(&key)["operations"].as_array().unwrap().len(), 1);
}

#[test]
fn a_host_logs_in_with_the_password_file_its_configuration_names() {
    const NAME: &str = "a_host_logs_in_with_the_password_file_its_configuration_names";
    let Some(cluster) = cluster(NAME) else {
        return;
    };
    let Some(url) = cluster.password_login(&cluster.database()) else {
        eprintln!("skipped (no password login on the test server): {NAME}");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let run = ["run", "send_receipt", "--args", ARGS, "--conversation", "c"];
    let config = dir.path().join("justonce.toml");
    std::fs::write(
        &config,
        format!("database = \"{url}\"\npassword_file = \"secrets/db\"\n"),
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("secrets")).unwrap();
    let with_config = |args: &[&str]| {
        let mut command = justonce_command(None);
        command
            .current_dir(dir.path())
            .env_remove("PGPASSWORD")
            .env("PGPASSFILE", dir.path().join("no-pgpass"))
            .arg("--config")
            .arg(&config)
            .args(args);
        command.output().unwrap()
    };

    // Without the file the host cannot log in, and says which file it wanted.
    let refused = with_config(&run);
    let stderr = String::from_utf8_lossy(&refused.stderr).into_owned();
    assert_ne!(refused.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("secrets/db"), "{stderr}");

    std::fs::write(dir.path().join("secrets/db"), format!("{PASSWORD}\n")).unwrap();
    let out = with_config(&run);
    let answer = json_of(&out);
    assert_eq!(answer["ok"], true, "{answer}");
    assert_eq!(mails(dir.path()), 1);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains(PASSWORD), "never logged: {stderr}");
    // journal reads the same database with the same file.
    let journal = with_config(&["journal", "--json"]);
    assert_eq!(journal.status.code(), Some(0), "{journal:?}");
    assert!(String::from_utf8_lossy(&journal.stdout).contains(answer["key"].as_str().unwrap()));
}

/// libpq's environment through the CLI (issue 55): a URL without a user, as
/// pg_auto_failover prints it, logs in as `PGUSER` with the password of its
/// `PGPASSFILE` line; without `PGUSER` it is the operating system's user, and is
/// refused. A bad `sslmode` stops the host naming it (exit 5); `require` against a
/// server without TLS is refused saying so.
#[test]
fn a_url_without_a_user_logs_in_as_pguser_with_the_pgpass_password() {
    const NAME: &str = "a_url_without_a_user_logs_in_as_pguser_with_the_pgpass_password";
    let Some(cluster) = cluster(NAME) else {
        return;
    };
    let Some(url) = cluster.password_login(&cluster.database()) else {
        eprintln!("skipped (no password login on the test server): {NAME}");
        return;
    };
    let (login, rest) = url
        .strip_prefix("postgres://")
        .and_then(|u| u.split_once('@'))
        .expect("postgres://USER@HOST:PORT/DB");
    let (server, db) = rest.split_once('/').unwrap();
    let no_user = format!("postgres://{rest}");
    let dir = tempfile::tempdir().unwrap();
    let pgpass = dir.path().join("pgpass");
    let escaped = PASSWORD.replace('\\', "\\\\").replace(':', "\\:");
    std::fs::write(&pgpass, format!("{server}:{db}:{login}:{escaped}\n")).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let run = ["run", "send_receipt", "--args", ARGS, "--conversation", "c"];
    let with_env = |url: &str, user: Option<&str>| {
        let mut command = host(dir.path(), url, &run);
        command
            .env_remove("PGPASSWORD")
            .env_remove("PGSSLMODE")
            .env("PGPASSFILE", &pgpass);
        match user {
            Some(user) => command.env("PGUSER", user),
            None => command.env_remove("PGUSER"),
        };
        let out = command.output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out, text)
    };

    let (out, text) = with_env(&no_user, Some(login));
    assert_eq!(json_of(&out)["ok"], true, "{text}");
    assert_eq!(mails(dir.path()), 1);
    assert!(!text.contains(PASSWORD), "never shown: {text}");

    let (out, text) = with_env(&no_user, None);
    assert_ne!(out.status.code(), Some(0), "{text}");
    assert!(!text.contains(PASSWORD), "never shown: {text}");

    let (out, text) = with_env(&format!("{url}?sslmode=verify-everything"), None);
    assert_eq!(out.status.code(), Some(5), "{text}");
    assert!(
        text.contains("sslmode=verify-everything is not one of disable, allow, prefer, require, verify-ca, verify-full"),
        "{text}"
    );
    // The test cluster has no TLS.
    let (out, text) = with_env(&format!("{no_user}?sslmode=require"), Some(login));
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(text.contains("TLS"), "{text}");
}
