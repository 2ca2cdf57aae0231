//! TLS to a real server (issue 55): a throwaway cluster that takes TLS sessions
//! alone, with a certificate of an authority the test makes, and every `sslmode`
//! against it, the environment's user and password file, a client certificate.

use std::collections::HashMap;
use std::path::Path;

use super::test_certs::{Authority, Leaf, write_private};
use super::testing::{self, CERT_ROLE, PASSWORD, PASSWORD_ROLE, TlsServer};
use super::{Durability, PostgresJournal, PostgresTarget};
use crate::error::Error;
use crate::journal::Journal;

/// A TLS server whose certificate names `localhost` alone, signed by `ca`; `other`
/// is an authority the server never saw; `client` is a certificate of `ca` for
/// [`CERT_ROLE`].
struct Setup {
    server: TlsServer,
    dir: tempfile::TempDir,
    ca: Authority,
    other: Authority,
    client: Leaf,
}

fn setup(test: &str) -> Option<Setup> {
    let dir = tempfile::tempdir().unwrap();
    let ca = Authority::new(dir.path(), "ca");
    let other = Authority::new(dir.path(), "other-ca");
    let server_cert = ca.sign(dir.path(), "server", &["localhost"], "localhost");
    let client = ca.sign(dir.path(), "client", &[], CERT_ROLE);
    let server = testing::tls_server(test, &server_cert.cert, &server_cert.key, &ca.cert)?;
    Some(Setup {
        server,
        dir,
        ca,
        other,
        client,
    })
}

impl Setup {
    /// A URL of the server's `postgres` database as `user` on `host`, with `params`.
    fn url(&self, user: &str, host: &str, params: &str) -> String {
        format!(
            "postgres://{user}@{host}:{}/postgres?{params}",
            self.server.port
        )
    }
}

/// An environment of `vars` alone.
fn env(vars: &[(&str, String)]) -> impl Fn(&str) -> Option<String> {
    let vars: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    move |name| vars.get(name).cloned()
}

/// A session as the journal makes them (the target's connector and password
/// files), or the error a journal would report, with its causes.
fn connect(url: &str, vars: &[(&str, String)]) -> Result<postgres::Client, String> {
    let target = PostgresTarget::from_url(url, &env(vars))
        .and_then(|t| t.password_from_files(None))
        .map_err(|e| e.to_string())?;
    target.connect().map_err(|source| {
        Error::Postgres {
            target: target.shown.clone(),
            source,
        }
        .to_string()
    })
}

/// Whether the session is encrypted, as the server sees it.
fn encrypted(client: &mut postgres::Client) -> bool {
    client
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .unwrap()
        .get(0)
}

fn root(ca: &Path) -> String {
    format!("sslrootcert={}", ca.display())
}

/// `require` encrypts without checking the certificate, and a journal opened with it
/// uses TLS on every connection it makes: its pool's, and its listener's (the
/// server refuses any other).
#[test]
fn require_encrypts_every_session_of_a_journal() {
    let Some(s) = setup("require_encrypts_every_session_of_a_journal") else {
        return;
    };
    // 127.0.0.1 is not a name the certificate holds, and its authority is not given.
    let url = s.url("postgres", "127.0.0.1", "sslmode=require");
    let mut client = connect(&url, &[]).unwrap();
    assert!(encrypted(&mut client), "require: the session is encrypted");

    let target = PostgresTarget::from_url(&url, &|_| None).unwrap();
    let journal = PostgresJournal::open(target, Durability::Full).unwrap();
    assert!(journal.entries(None, 10).unwrap().is_empty());
    let listening = (0..500).any(|_| {
        journal.listener_live() || {
            std::thread::sleep(std::time::Duration::from_millis(10));
            false
        }
    });
    assert!(listening, "the journal's listener connected over TLS");
    let plain: i64 = s
        .server
        .local()
        .unwrap()
        .query_one(
            "SELECT count(*) FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
              WHERE a.application_name LIKE 'justonce%' AND NOT s.ssl",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(plain, 0, "no session of the journal is plain");
}

/// `verify-full` connects with the authority that signed the server's certificate
/// and to a host the certificate names; another authority, or another name of the
/// same server, is refused naming why. `verify-ca` checks the chain, not the name;
/// `require` given a root certificate checks the chain as well (libpq's rule).
#[test]
fn verify_full_checks_the_chain_and_the_host_name() {
    let Some(s) = setup("verify_full_checks_the_chain_and_the_host_name") else {
        return;
    };
    let (ca, other) = (root(&s.ca.cert), root(&s.other.cert));

    let mut client = connect(
        &s.url(
            "postgres",
            "localhost",
            &format!("sslmode=verify-full&{ca}"),
        ),
        &[],
    )
    .unwrap();
    assert!(encrypted(&mut client));

    let e = connect(
        &s.url(
            "postgres",
            "127.0.0.1",
            &format!("sslmode=verify-full&{ca}"),
        ),
        &[],
    )
    .map(drop)
    .unwrap_err();
    assert!(
        e.contains("sslmode=verify-full: the server's certificate is not valid for host 127.0.0.1"),
        "{e}"
    );
    assert!(
        e.contains("(it names localhost)"),
        "it says what the certificate names: {e}"
    );

    for (mode, host) in [("verify-full", "localhost"), ("verify-ca", "localhost")] {
        let e = connect(
            &s.url("postgres", host, &format!("sslmode={mode}&{other}")),
            &[],
        )
        .map(drop)
        .unwrap_err();
        assert!(
            e.contains(&format!(
                "sslmode={mode}: the certificate of {host} is not signed by a certificate authority of sslrootcert"
            )),
            "{e}"
        );
    }
    let e = connect(
        &s.url("postgres", "localhost", &format!("sslmode=require&{other}")),
        &[],
    )
    .map(drop)
    .unwrap_err();
    assert!(
        e.contains("sslmode=verify-ca: the certificate of localhost is not signed"),
        "{e}"
    );

    // verify-ca: the chain is the server's, the name is not checked; from the
    // environment too.
    let mut client = connect(
        &s.url("postgres", "127.0.0.1", ""),
        &[
            ("PGSSLMODE", "verify-ca".into()),
            ("PGSSLROOTCERT", s.ca.cert.display().to_string()),
        ],
    )
    .unwrap();
    assert!(encrypted(&mut client));
}

/// A server that takes TLS sessions alone refuses `disable`; `prefer` and `allow`
/// encrypt with it, and fall back to a plain session with a server without TLS,
/// which `require` refuses.
#[test]
fn disable_is_refused_where_tls_is_required_and_prefer_falls_back() {
    let Some(s) = setup("disable_is_refused_where_tls_is_required_and_prefer_falls_back") else {
        return;
    };
    let e = connect(&s.url("postgres", "127.0.0.1", "sslmode=disable"), &[])
        .map(drop)
        .unwrap_err();
    assert!(e.contains("no encryption"), "{e}");
    for mode in ["prefer", "allow"] {
        let mut client = connect(
            &s.url("postgres", "127.0.0.1", &format!("sslmode={mode}")),
            &[],
        )
        .unwrap();
        assert!(encrypted(&mut client), "{mode}");
    }
    // libpq's default is prefer.
    let mut client = connect(&s.url("postgres", "127.0.0.1", ""), &[]).unwrap();
    assert!(encrypted(&mut client), "the default");

    // The shared test cluster has no TLS.
    let Some(plain) =
        testing::cluster("disable_is_refused_where_tls_is_required_and_prefer_falls_back")
    else {
        return;
    };
    let url = plain.admin_url();
    let mut client = connect(&format!("{url}?sslmode=prefer"), &[]).unwrap();
    assert!(!encrypted(&mut client), "prefer falls back to plain");
    let e = connect(&format!("{url}?sslmode=require"), &[])
        .map(drop)
        .unwrap_err();
    assert!(
        e.contains("?sslmode=require: error performing TLS handshake: server does not support TLS"),
        "{e}"
    );
}

/// A URL with no user (as pg_auto_failover prints it) logs in as `PGUSER`, with the
/// password of the `PGPASSFILE` line for it; the host, port, database and sslmode
/// may come from the environment alone.
#[test]
fn a_user_from_pguser_logs_in_with_the_passfile_password() {
    let Some(s) = setup("a_user_from_pguser_logs_in_with_the_passfile_password") else {
        return;
    };
    let port = s.server.port;
    let passfile = s.dir.path().join("pgpass");
    let escaped = PASSWORD.replace('\\', "\\\\").replace(':', "\\:");
    write_private(
        &passfile,
        &format!("127.0.0.1:{port}:postgres:{PASSWORD_ROLE}:{escaped}\n"),
    );
    let user = [
        ("PGUSER", PASSWORD_ROLE.to_string()),
        ("PGPASSFILE", passfile.display().to_string()),
    ];
    let url = format!("postgres://127.0.0.1:{port}/postgres?sslmode=require");
    let mut client = connect(&url, &user).unwrap();
    let who: String = client
        .query_one("SELECT current_user::text", &[])
        .unwrap()
        .get(0);
    assert_eq!(who, PASSWORD_ROLE);
    assert!(encrypted(&mut client));

    // Everything from the environment.
    let mut all = user.to_vec();
    all.extend([
        ("PGHOST", "127.0.0.1".to_string()),
        ("PGPORT", port.to_string()),
        ("PGDATABASE", "postgres".to_string()),
        ("PGSSLMODE", "require".to_string()),
    ]);
    let mut client = connect("postgres://", &all).unwrap();
    let who: String = client
        .query_one("SELECT current_user::text", &[])
        .unwrap()
        .get(0);
    assert_eq!(who, PASSWORD_ROLE);

    // The opposite: without the password file, the server wants a password.
    let e = connect(&url, &user[..1]).map(drop).unwrap_err();
    assert!(e.contains("password"), "{e}");
    assert!(!e.contains(PASSWORD), "{e}");
}

/// `sslcert` and `sslkey` log in a role the server admits by certificate alone; the
/// same role without them is refused.
#[test]
fn a_client_certificate_logs_in() {
    let Some(s) = setup("a_client_certificate_logs_in") else {
        return;
    };
    let params = format!(
        "sslmode=verify-full&{}&sslcert={}&sslkey={}",
        root(&s.ca.cert),
        s.client.cert.display(),
        s.client.key.display()
    );
    let mut client = connect(&s.url(CERT_ROLE, "localhost", &params), &[]).unwrap();
    let who: String = client
        .query_one("SELECT current_user::text", &[])
        .unwrap()
        .get(0);
    assert_eq!(who, CERT_ROLE);
    let e = connect(
        &s.url(
            CERT_ROLE,
            "localhost",
            &format!("sslmode=verify-full&{}", root(&s.ca.cert)),
        ),
        &[],
    )
    .map(drop)
    .unwrap_err();
    assert!(e.contains("certificate"), "{e}");
}
