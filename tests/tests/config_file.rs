//! `justonce.toml` through the CLI: found next to `--db` or given with `--config`, per
//! tool limits applied, and a bad file refused with the key named.

use std::path::Path;
use std::process::Output;

use crate::support::cli::{json_of, justonce_command};

fn justonce(args: &[&str], db: Option<&Path>) -> Output {
    justonce_command(db)
        .args(args)
        .output()
        .expect("run justonce")
}

const ARGS: &str =
    r#"{"orders":[{"order_id":4417,"email":"ada@example.com","amount_cents":1299}]}"#;

#[test]
fn a_config_next_to_the_database_sets_per_tool_limits() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    std::fs::write(
        dir.path().join("justonce.toml"),
        "[tools.send_receipt]\nmax_args_bytes = 40\n",
    )
    .unwrap();
    let out = justonce(&["run", "send_receipt", "--args", ARGS], Some(&db));
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json_of(&out);
    assert_eq!(v["error"]["kind"], "invalid_arguments");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains("limit of 40 bytes"), "{message}");
    // Other tools keep the defaults.
    let out = justonce(
        &[
            "run",
            "refund",
            "--args",
            r#"{"order_id":1,"amount_cents":1}"#,
        ],
        Some(&db),
    );
    assert_ne!(json_of(&out)["error"]["kind"], "invalid_arguments");
}

#[test]
fn config_names_the_database_and_the_flag_wins_over_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("custom.toml");
    std::fs::write(&config, "database = \"from-config.db\"\n").unwrap();
    let config_arg = config.to_str().unwrap();
    let out = justonce(
        &[
            "--config",
            config_arg,
            "run",
            "send_receipt",
            "--args",
            ARGS,
        ],
        None,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        dir.path().join("from-config.db").is_file(),
        "relative to the config file"
    );

    let flag_db = dir.path().join("flag.db");
    let out = justonce(
        &[
            "--config",
            config_arg,
            "run",
            "send_receipt",
            "--args",
            ARGS,
        ],
        Some(&flag_db),
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(flag_db.is_file(), "--db wins over the configuration");
}

/// A `justonce.toml` in the directory a command runs in, but not beside its
/// database, is not read: the command says so and where the file is read from.
#[test]
fn a_config_in_the_working_directory_that_is_not_read_is_named() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("justonce.toml"),
        "[tools.send_receipt]\nmax_args_bytes = 40\n",
    )
    .unwrap();
    let tools = |db: &Path| {
        let out = justonce_command(Some(db))
            .arg("tools")
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let elsewhere = dir.path().join(".justonce").join("state.db");
    let said = tools(&elsewhere);
    assert!(
        said.contains("./justonce.toml is not read") && said.contains(".justonce/justonce.toml"),
        "{said}"
    );
    // The opposite: beside the database, it is read, and nothing is said.
    let said = tools(&dir.path().join("state.db"));
    assert!(!said.contains("not read"), "{said}");
}

#[test]
fn a_bad_config_is_bad_input_that_names_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let config = dir.path().join("justonce.toml");
    for (text, key) in [
        ("[limits]\ndeadline = 5\n", "deadline"),
        ("[limits]\nmemory_mib = \"lots\"\n", "limits.memory_mib"),
        ("[tools.echo]\ndeadline_ms = 0\n", "tools.echo.deadline_ms"),
    ] {
        std::fs::write(&config, text).unwrap();
        let out = justonce(&["run", "send_receipt", "--args", ARGS], Some(&db));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text}: {stderr}");
        assert!(stderr.contains(key), "{text}: {stderr}");
        assert!(stderr.contains("justonce.toml"), "names the file: {stderr}");
    }
    assert!(!db.exists(), "nothing was opened or stored");
    let out = justonce(&["--config", "/no/such/justonce.toml", "tools"], Some(&db));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/no/such/justonce.toml"));
}

#[test]
fn with_normal_durability_each_run_process_saves_its_outcome_before_it_exits() {
    // `Normal` commits every answer before it is returned.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    std::fs::write(
        dir.path().join("justonce.toml"),
        "durability = \"normal\"\n",
    )
    .unwrap();
    let run = |tool: &str, args: &str| {
        let out = justonce(
            &["run", tool, "--args", args, "--conversation", "c"],
            Some(&db),
        );
        (out.status.code(), json_of(&out))
    };
    // A sent email and a refused one (a tool error: the mailbox rejects the address)
    // are outcomes, saved and replayed.
    let refused = r#"{"orders":[{"order_id":7,"email":"nobody","amount_cents":5}]}"#;
    for (tool, args, code) in [("send_receipt", ARGS, 0), ("send_receipt", refused, 1)] {
        let (first_code, first) = run(tool, args);
        let (again_code, again) = run(tool, args);
        assert_eq!(
            (first_code, again_code),
            (Some(code), Some(code)),
            "{first} {again}"
        );
        assert_eq!(first["replayed"], false, "{first}");
        assert_eq!(
            again["replayed"], true,
            "the next process found it saved: {again}"
        );
        assert_eq!(again["key"], first["key"]);
        assert_eq!(again["result"], first["result"]);
        assert_eq!(again["error"], first["error"]);
    }
}

#[test]
fn tools_shows_each_tools_effective_policy_from_one_place() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    std::fs::write(
        dir.path().join("justonce.toml"),
        "[limits]\nmemory_mib = 32\nmax_effects = 7\n\
         [tools.refund]\ndeadline_ms = 1500\nfuel = 5000000\nallow = [\"payments\", \"http://127.0.0.1:9\"]\nmcp = false\n",
    )
    .unwrap();
    let http = dir.path().join("http.json");
    std::fs::write(
        &http,
        r#"{"services": {"payments": "https://api.payments.example"}}"#,
    )
    .unwrap();
    let out = justonce(
        &["--http-config", http.to_str().unwrap(), "tools", "--json"],
        Some(&db),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tools = json_of(&out);
    let policy = |name: &str| {
        tools
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {tools}"))["policy"]
            .clone()
    };
    let refund = policy("refund");
    assert_eq!(refund["deadline_ms"], 1500);
    assert_eq!(refund["fuel"], 5_000_000);
    assert_eq!(refund["memory_mib"], 32, "from [limits]");
    assert_eq!(refund["max_effects"], 7, "from [limits]");
    assert_eq!(
        refund["allow"],
        serde_json::json!(["https://api.payments.example:443", "http://127.0.0.1:9"])
    );
    assert_eq!(refund["mcp"], false);
    let receipt = policy("send_receipt");
    assert_eq!(receipt["deadline_ms"], 10_000);
    assert_eq!(receipt["fuel"], serde_json::Value::Null);
    assert_eq!(receipt["allow"], serde_json::json!([]));
    assert_eq!(receipt["mcp"], true);

    // An entry that is neither an origin nor a service is named.
    std::fs::write(
        dir.path().join("justonce.toml"),
        "[tools.refund]\nallow = [\"ledger\"]\n",
    )
    .unwrap();
    let out = justonce(&["tools"], Some(&db));
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("tools.refund.allow") && said.contains("`ledger` is neither"),
        "{said}"
    );
}
