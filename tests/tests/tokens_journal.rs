//! Tokens on a PostgreSQL journal: the journal keeps them for every host, so a token
//! revoked through one host's `justonce token revoke` is refused by every host at its
//! next request; a tokens file's are brought over once with `justonce token import`.
//! Skipped, by name, where there is no PostgreSQL; with `CI=true` that is a failure.

use std::path::Path;

use justonce::__private::postgres_testing::cluster;
use justonce::__private::tokens::{Role, add_with_role};

use crate::support::mcp::VERSION;
use crate::support::mcp_http::{HttpClient, HttpProcess, add_token, token};

fn status(host: &HttpProcess, token: &str) -> u16 {
    HttpClient::new(host.addr, Some(token.to_owned()))
        .initialize(VERSION)
        .status
}

#[test]
fn a_token_revoked_through_one_hosts_cli_is_refused_by_every_host_at_its_next_request() {
    let Some(cluster) = cluster(
        "a_token_revoked_through_one_hosts_cli_is_refused_by_every_host_at_its_next_request",
    ) else {
        return;
    };
    let url = cluster.database();
    let db = Path::new(&url);
    let dir = tempfile::tempdir().unwrap();
    // The hosts' own files (their memory of the journal) live beside this.
    let config = dir.path().join("justonce.toml");
    std::fs::write(&config, "").unwrap();
    let config = config.to_str().unwrap();

    let old_file = dir.path().join("tokens.json");
    let bob = add_with_role(&old_file, "bob", Role::Agent).unwrap();
    // Until a file is imported, the hosts read their files: the journal keeps
    // tokens from the import on (then `add` goes to the journal too).
    let imported = token(db, &["import", "--tokens", old_file.to_str().unwrap()]);
    assert!(imported.contains("imported 1 token(s)"), "{imported}");
    let alice = add_token(db, "alice");
    assert!(token(db, &["list"]).contains("bob"));

    let a = HttpProcess::spawn(db, &["--config", config]);
    let b = HttpProcess::spawn(db, &["--config", config]);
    for host in [&a, &b] {
        assert_eq!(status(host, &alice), 200, "added through the CLI");
        assert_eq!(status(host, &bob), 200, "imported from a file");
    }

    token(db, &["revoke", "alice"]);
    assert_eq!(status(&b, &alice), 401, "refused by B at its next request");
    assert_eq!(status(&a, &alice), 401, "and by A");
    assert_eq!(status(&b, &bob), 200, "the other token still works");

    // A file is not what these hosts read: a token only in a file is refused.
    let carol = add_with_role(&old_file, "carol", Role::Agent).unwrap();
    assert_eq!(status(&b, &carol), 401);
}
