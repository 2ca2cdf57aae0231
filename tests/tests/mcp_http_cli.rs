//! `justonce serve --http` as a process: tokens issued and revoked with `justonce
//! token`, calls keyed by principal, and `journal --principal`.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Stdio};

use serde_json::{Value, json};

use crate::support::cli::{json_of, justonce_command};
use crate::support::mcp_http::HttpClient;

/// `justonce serve --http 127.0.0.1:0`, killed when dropped.
pub struct HttpProcess {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
}

impl HttpProcess {
    /// Starts it on `db` with `args` and reads the URL it prints.
    pub fn spawn(db: &Path, args: &[&str]) -> Self {
        let mut child = justonce_command(Some(db))
            .args(["serve", "--http", "127.0.0.1:0", "--deliver-every-ms", "0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start justonce serve --http");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .expect("read the URL");
        let addr = line
            .trim()
            .strip_prefix("http://")
            .and_then(|rest| rest.strip_suffix("/mcp"))
            .unwrap_or_else(|| panic!("not an endpoint URL: {line:?}"))
            .parse()
            .expect("an address");
        Self { child, addr }
    }
}

impl Drop for HttpProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `justonce --db DB token add NAME`: the token it printed.
pub fn add_token(db: &Path, name: &str) -> String {
    let out = justonce_command(Some(db))
        .args(["token", "add", name])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn receipt(order: u64) -> Value {
    json!({ "orders": [{ "order_id": order, "email": "ada@example.com", "amount_cents": 100 }] })
}

#[test]
fn tokens_from_the_cli_name_principals_whose_calls_the_journal_tells_apart() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let alice = add_token(&db, "alice");
    let bob = add_token(&db, "bob");
    let stored = std::fs::read_to_string(dir.path().join("tokens.json")).unwrap();
    assert!(
        !stored.contains(&alice) && !stored.contains(&bob),
        "only hashes are stored"
    );
    let listed = json_of(
        &justonce_command(Some(&db))
            .args(["token", "list", "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(listed.as_array().unwrap().len(), 2);

    let server = HttpProcess::spawn(&db, &[]);
    let key = json!({ "idempotencyKey": "order-1", "_meta": { "dev.justonce/conversation": "c" } });
    let a = HttpClient::new(server.addr, Some(alice.clone()))
        .call("send_receipt", receipt(1), key.clone())
        .tool_result();
    let b = HttpClient::new(server.addr, Some(bob))
        .call("send_receipt", receipt(1), key.clone())
        .tool_result();
    assert_ne!(
        a["_meta"]["dev.justonce/key"],
        b["_meta"]["dev.justonce/key"]
    );
    assert_eq!(crate::support::db::mailbox_count(&db), 2, "one email each");

    let journal = |args: &[&str]| {
        json_of(
            &justonce_command(Some(&db))
                .arg("journal")
                .args(args)
                .arg("--json")
                .output()
                .unwrap(),
        )
    };
    let alices = journal(&["--principal", "alice"]);
    assert_eq!(alices.as_array().unwrap().len(), 1, "{alices}");
    assert_eq!(alices[0]["key"], a["_meta"]["dev.justonce/key"]);
    assert_eq!(alices[0]["scope"], r#"["alice","c"]"#);
    let in_conversation = journal(&["--principal", "bob", "--conversation", "c"]);
    assert_eq!(in_conversation[0]["key"], b["_meta"]["dev.justonce/key"]);
    assert!(
        journal(&["--principal", "carol"])
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert_eq!(journal(&[]).as_array().unwrap().len(), 2);

    // Revoked while the server runs: refused from the next request on.
    let out = justonce_command(Some(&db))
        .args(["token", "revoke", "alice"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let refused = HttpClient::new(server.addr, Some(alice)).call("send_receipt", receipt(2), key);
    assert_eq!(refused.status, 401);
    assert_eq!(crate::support::db::mailbox_count(&db), 2);
}
