//! A journal's connection settings as libpq reads them: the `postgres://` URL, with
//! what it leaves out filled in from libpq's environment (`PGHOST`, `PGPORT`,
//! `PGUSER`, `PGPASSWORD`, `PGDATABASE`, `PGAPPNAME`, `PGCONNECT_TIMEOUT`,
//! `PGSSLMODE`, `PGSSLROOTCERT`, `PGSSLCERT`, `PGSSLKEY`, `PGPASSFILE`). The URL wins
//! where both say. The environment is a lookup function, so that tests need not
//! change the process's own.
//!
//! tokio-postgres parses the URL, but refuses what it does not know (`verify-ca`,
//! `sslrootcert`, …): those parameters are taken out of the URL first, and given to
//! [`tls::Connector`].

use std::path::PathBuf;
use std::time::Duration;

use super::tls::{self, SslMode, TlsError, TlsFiles};

/// The environment: the value of a variable, if set (`std::env::var(..).ok()` in
/// production, a map in tests).
pub(crate) type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The URL's parameters libpq knows and tokio-postgres does not (or not all of their
/// values): the TLS connector's, and the password file.
const OURS: [&str; 5] = ["sslmode", "sslrootcert", "sslcert", "sslkey", "passfile"];

/// What is wrong with a journal's connection settings. Never quotes a password.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SettingsError {
    /// The URL cannot be parsed.
    #[error(
        "the database URL is not a valid postgres:// URL (expected postgres://USER@HOST:PORT/DB[?sslmode=…]): {0}"
    )]
    Url(String),
    /// A variable of the environment has a value libpq would refuse.
    #[error("{name}: {problem}")]
    Env {
        /// The variable.
        name: &'static str,
        /// What is wrong with its value.
        problem: String,
    },
    /// The TLS settings are wrong (the URL's, or the environment's).
    #[error("{0}")]
    Tls(#[from] TlsError),
}

/// A journal's connection settings, ready to connect with.
#[derive(Debug)]
pub(crate) struct Settings {
    /// tokio-postgres's settings (without the password files' password).
    pub config: postgres::Config,
    /// The TLS connector every connection uses.
    pub tls: tls::Connector,
    /// libpq's password file (`passfile`, `PGPASSFILE`, else `~/.pgpass`).
    pub passfile: Option<PathBuf>,
}

/// The settings of `url`, filled in from `env` where it says nothing.
pub(crate) fn settings(url: &str, env: Env<'_>) -> Result<Settings, SettingsError> {
    let (rest, ours) = take_ours(url)?;
    let rest = with_env_ports(&rest, env)?;
    let mut config: postgres::Config = rest.parse().map_err(|e: postgres::Error| {
        let mut text = e.to_string();
        let mut cause = std::error::Error::source(&e);
        while let Some(inner) = cause {
            text.push_str(": ");
            text.push_str(&inner.to_string());
            cause = inner.source();
        }
        SettingsError::Url(text)
    })?;
    let given = |key: &str| {
        ours.iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    fill_from_env(&mut config, env)?;

    let mode = match (given("sslmode"), env("PGSSLMODE")) {
        (Some(mode), _) => SslMode::parse(&mode)?,
        (None, Some(mode)) => SslMode::parse(&mode).map_err(|e| SettingsError::Env {
            name: "PGSSLMODE",
            problem: e.to_string(),
        })?,
        // libpq's default.
        (None, None) => SslMode::Prefer,
    };
    let file = |key: &str, var: &str| {
        given(key)
            .or_else(|| env(var))
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let files = TlsFiles {
        root_cert: file("sslrootcert", "PGSSLROOTCERT"),
        cert: file("sslcert", "PGSSLCERT"),
        key: file("sslkey", "PGSSLKEY"),
    };
    let home = env("HOME").map(PathBuf::from);
    let tls = tls::Connector::new(mode, &files, home.as_deref())?;
    tls.negotiate_in(&mut config);
    let passfile = file("passfile", "PGPASSFILE").or_else(|| home.map(|h| h.join(".pgpass")));
    Ok(Settings {
        config,
        tls,
        passfile,
    })
}

/// Where the URL says nothing: hosts, ports, user, password, database, application
/// name and connect timeout from libpq's variables.
fn fill_from_env(config: &mut postgres::Config, env: Env<'_>) -> Result<(), SettingsError> {
    let set = |name: &str| env(name).filter(|v| !v.is_empty());
    if config.get_hosts().is_empty()
        && let Some(hosts) = set("PGHOST")
    {
        for host in hosts.split(',') {
            if host.starts_with('/') {
                config.host_path(host);
            } else {
                config.host(host);
            }
        }
    }
    if config.get_ports().is_empty()
        && let Some(ports) = set("PGPORT")
    {
        for port in ports.split(',') {
            let port = port.parse::<u16>().map_err(|_| SettingsError::Env {
                name: "PGPORT",
                problem: format!("{port:?} is not a port number"),
            })?;
            config.port(port);
        }
    }
    if config.get_user().is_none()
        && let Some(user) = set("PGUSER")
    {
        config.user(&user);
    }
    if config.get_password().is_none()
        && let Some(password) = set("PGPASSWORD")
    {
        config.password(password);
    }
    if config.get_dbname().is_none()
        && let Some(db) = set("PGDATABASE")
    {
        config.dbname(&db);
    }
    if config.get_application_name().is_none()
        && let Some(app) = set("PGAPPNAME")
    {
        config.application_name(&app);
    }
    if config.get_connect_timeout().is_none()
        && let Some(timeout) = set("PGCONNECT_TIMEOUT")
    {
        let seconds = timeout
            .trim()
            .parse::<u64>()
            .map_err(|_| SettingsError::Env {
                name: "PGCONNECT_TIMEOUT",
                problem: format!("{timeout:?} is not a number of seconds"),
            })?;
        // libpq: 0 waits forever, and less than 2 s is 2 s.
        if seconds > 0 {
            config.connect_timeout(Duration::from_secs(seconds.max(2)));
        }
    }
    Ok(())
}

/// The URL with `PGPORT`'s ports written after its hosts, where neither its hosts
/// nor a `port` parameter name one (tokio-postgres would read such a host as on
/// 5432). One port is every host's; a list gives each host its own.
fn with_env_ports(url: &str, env: Env<'_>) -> Result<String, SettingsError> {
    let Some(ports) = env("PGPORT").filter(|p| !p.is_empty()) else {
        return Ok(url.to_string());
    };
    let ports = ports
        .split(',')
        .map(|port| {
            port.parse::<u16>().map_err(|_| SettingsError::Env {
                name: "PGPORT",
                problem: format!("{port:?} is not a port number"),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let Some((scheme, after)) = url.split_once("://") else {
        return Ok(url.to_string());
    };
    let end = after.find(['/', '?']).unwrap_or(after.len());
    let (authority, tail) = after.split_at(end);
    let (login, hosts) = match authority.rfind('@') {
        Some(at) => authority.split_at(at + 1),
        None => ("", authority),
    };
    let query = tail.split_once('?').map_or("", |(_, q)| q);
    let port_param = query.split('&').any(|p| p.starts_with("port="));
    let has_port = |chunk: &str| match chunk.rfind(']') {
        Some(close) => chunk[close..].contains(':'),
        None => chunk.contains(':'),
    };
    let chunks: Vec<&str> = hosts.split(',').collect();
    if hosts.is_empty() || port_param || chunks.iter().any(|c| has_port(c)) {
        return Ok(url.to_string());
    }
    if ports.len() != 1 && ports.len() != chunks.len() {
        return Err(SettingsError::Env {
            name: "PGPORT",
            problem: format!(
                "{} ports for the URL's {} hosts (give one, or one per host)",
                ports.len(),
                chunks.len()
            ),
        });
    }
    let hosts: Vec<String> = chunks
        .iter()
        .enumerate()
        .map(|(i, chunk)| format!("{chunk}:{}", ports.get(i).unwrap_or(&ports[0])))
        .collect();
    Ok(format!("{scheme}://{login}{}{tail}", hosts.join(",")))
}

/// The URL without [`OURS`], and those parameters' decoded values, in order.
fn take_ours(url: &str) -> Result<(String, Vec<(String, String)>), SettingsError> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_string(), Vec::new()));
    };
    let mut kept = Vec::new();
    let mut ours = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        if OURS.contains(&key) {
            let value = percent_decode(value).ok_or_else(|| {
                SettingsError::Url(format!(
                    "the value of {key} is not valid percent-encoded UTF-8"
                ))
            })?;
            ours.push((key.to_string(), value));
        } else {
            kept.push(pair);
        }
    }
    let rest = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((rest, ours))
}

/// `%XX` escapes decoded (a URL's query value), `None` when they are not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::super::test_certs::{Authority, write_private};
    use super::*;

    /// An environment of `vars` alone.
    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| vars.get(name).cloned()
    }

    fn ok(url: &str, vars: &[(&str, &str)]) -> Settings {
        settings(url, &env(vars)).unwrap_or_else(|e| panic!("{url}: {e}"))
    }

    fn err(url: &str, vars: &[(&str, &str)]) -> String {
        match settings(url, &env(vars)) {
            Ok(s) => panic!("{url} with {vars:?} accepted: {s:?}"),
            Err(e) => e.to_string(),
        }
    }

    fn tcp_hosts(config: &postgres::Config) -> Vec<String> {
        config
            .get_hosts()
            .iter()
            .map(|h| match h {
                postgres::config::Host::Tcp(name) => name.clone(),
                #[cfg(unix)]
                postgres::config::Host::Unix(path) => path.display().to_string(),
            })
            .collect()
    }

    const ALL: &[(&str, &str)] = &[
        ("PGHOST", "env-host"),
        ("PGPORT", "6543"),
        ("PGUSER", "env-user"),
        ("PGPASSWORD", "env-pw"),
        ("PGDATABASE", "env-db"),
        ("PGAPPNAME", "env-app"),
        ("PGCONNECT_TIMEOUT", "7"),
        ("PGSSLMODE", "disable"),
        ("PGPASSFILE", "/env/pgpass"),
    ];

    #[test]
    fn the_environment_fills_in_what_the_url_leaves_out() {
        // pg_auto_failover's URL names no user.
        let s = ok(
            "postgres://db1:5432,db2:5433/journal?target_session_attrs=read-write",
            ALL,
        );
        assert_eq!(tcp_hosts(&s.config), ["db1", "db2"]);
        assert_eq!(s.config.get_ports(), [5432, 5433]);
        assert_eq!(s.config.get_user(), Some("env-user"));
        assert_eq!(s.config.get_password(), Some(&b"env-pw"[..]));
        assert_eq!(s.config.get_dbname(), Some("journal"));
        assert_eq!(s.config.get_application_name(), Some("env-app"));
        assert_eq!(
            s.config.get_connect_timeout(),
            Some(&Duration::from_secs(7))
        );
        assert_eq!(s.tls.mode(), SslMode::Disable);
        assert_eq!(s.passfile, Some(PathBuf::from("/env/pgpass")));

        // A URL of nothing but the scheme takes everything from the environment.
        let s = ok("postgres://", ALL);
        assert_eq!(tcp_hosts(&s.config), ["env-host"]);
        assert_eq!(s.config.get_ports(), [6543]);
        assert_eq!(s.config.get_dbname(), Some("env-db"));
        let s = ok("postgres://", &[("PGHOST", "/run/postgresql,db3")]);
        assert_eq!(tcp_hosts(&s.config), ["/run/postgresql", "db3"]);
        // A URL's host without a port is on PGPORT's (tokio-postgres alone: 5432).
        let s = ok("postgres://ada@db1/journal?sslmode=disable", ALL);
        assert_eq!(s.config.get_ports(), [6543]);
        let s = ok("postgres://[::1],db2/journal", &[("PGPORT", "1,2")]);
        assert_eq!(tcp_hosts(&s.config), ["::1", "db2"]);
        assert_eq!(s.config.get_ports(), [1, 2]);
        let s = ok("postgres://db1/journal?port=7", ALL);
        assert_eq!(
            s.config.get_ports(),
            [5432, 7],
            "tokio-postgres's own reading"
        );
        let e = err("postgres://a,b,c/journal", &[("PGPORT", "1,2")]);
        assert!(e.contains("PGPORT: 2 ports for the URL's 3 hosts"), "{e}");
    }

    #[test]
    fn the_url_wins_over_the_environment() {
        let s = ok(
            "postgres://url-user:url-pw@url-host:1111/url-db?application_name=url-app&connect_timeout=3&sslmode=require&passfile=/url/pgpass",
            ALL,
        );
        assert_eq!(tcp_hosts(&s.config), ["url-host"]);
        assert_eq!(s.config.get_ports(), [1111]);
        assert_eq!(s.config.get_user(), Some("url-user"));
        assert_eq!(s.config.get_password(), Some(&b"url-pw"[..]));
        assert_eq!(s.config.get_dbname(), Some("url-db"));
        assert_eq!(s.config.get_application_name(), Some("url-app"));
        assert_eq!(
            s.config.get_connect_timeout(),
            Some(&Duration::from_secs(3))
        );
        assert_eq!(s.tls.mode(), SslMode::Require);
        assert_eq!(s.passfile, Some(PathBuf::from("/url/pgpass")));
    }

    #[test]
    fn the_password_file_is_passfile_then_pgpassfile_then_home() {
        let home = [("HOME", "/home/ada")];
        assert_eq!(
            ok("postgres://h/db", &home).passfile,
            Some(PathBuf::from("/home/ada/.pgpass"))
        );
        assert_eq!(
            ok(
                "postgres://h/db",
                &[("HOME", "/home/ada"), ("PGPASSFILE", "/p")]
            )
            .passfile,
            Some(PathBuf::from("/p"))
        );
        assert_eq!(
            ok(
                "postgres://h/db?passfile=%2Fsecrets%2Fpg%20pass",
                &[("PGPASSFILE", "/p")]
            )
            .passfile,
            Some(PathBuf::from("/secrets/pg pass"))
        );
        assert_eq!(ok("postgres://h/db", &[]).passfile, None);
    }

    #[test]
    fn every_sslmode_is_accepted_and_prefer_is_the_default() {
        let dir = tempfile::tempdir().unwrap();
        let ca = Authority::new(dir.path(), "ca");
        let root = format!("sslrootcert={}", ca.cert.display());
        for (mode, expected, negotiated) in [
            (
                "disable",
                SslMode::Disable,
                postgres::config::SslMode::Disable,
            ),
            ("allow", SslMode::Allow, postgres::config::SslMode::Prefer),
            ("prefer", SslMode::Prefer, postgres::config::SslMode::Prefer),
            (
                "require",
                SslMode::Require,
                postgres::config::SslMode::Require,
            ),
            (
                "verify-ca",
                SslMode::VerifyCa,
                postgres::config::SslMode::Require,
            ),
            (
                "verify-full",
                SslMode::VerifyFull,
                postgres::config::SslMode::Require,
            ),
        ] {
            let s = ok(&format!("postgres://h/db?sslmode={mode}&{root}"), &[]);
            assert_eq!(s.tls.mode(), expected, "{mode}");
            assert_eq!(s.config.get_ssl_mode(), negotiated, "{mode}");
            // The same from the environment.
            let s = ok(
                "postgres://h/db",
                &[
                    ("PGSSLMODE", mode),
                    ("PGSSLROOTCERT", &ca.cert.to_string_lossy()),
                ],
            );
            assert_eq!(s.tls.mode(), expected, "PGSSLMODE={mode}");
        }
        let s = ok("postgres://h/db", &[]);
        assert_eq!(s.tls.mode(), SslMode::Prefer);
        assert_eq!(s.tls.checks(), SslMode::Prefer);
        // As libpq: `require` given a root certificate checks the chain.
        let s = ok(&format!("postgres://h/db?sslmode=require&{root}"), &[]);
        assert_eq!(s.tls.checks(), SslMode::VerifyCa);
        let s = ok("postgres://h/db?sslmode=require", &[]);
        assert_eq!(s.tls.checks(), SslMode::Require);
        // So does libpq's default root certificate, where it exists.
        let home = dir.path().join("home");
        std::fs::create_dir_all(home.join(".postgresql")).unwrap();
        std::fs::copy(&ca.cert, home.join(".postgresql/root.crt")).unwrap();
        let home = home.to_string_lossy();
        let s = ok("postgres://h/db?sslmode=verify-full", &[("HOME", &home)]);
        assert_eq!(s.tls.checks(), SslMode::VerifyFull);
        let s = ok("postgres://h/db?sslmode=require", &[("HOME", &home)]);
        assert_eq!(s.tls.checks(), SslMode::VerifyCa);
    }

    #[test]
    fn bad_values_are_refused_naming_what_is_wrong() {
        let e = err("postgres://h/db?sslmode=verify-everything", &[]);
        assert!(
            e.contains("sslmode=verify-everything is not one of disable, allow, prefer, require, verify-ca, verify-full"),
            "{e}"
        );
        let e = err("postgres://h/db", &[("PGSSLMODE", "on")]);
        assert!(e.starts_with("PGSSLMODE: sslmode=on is not one of"), "{e}");
        let e = err("postgres://h/db", &[("PGPORT", "54x")]);
        assert!(e.contains("PGPORT") && e.contains("54x"), "{e}");
        let e = err("postgres://h/db", &[("PGCONNECT_TIMEOUT", "soon")]);
        assert!(e.contains("PGCONNECT_TIMEOUT"), "{e}");

        // verify-* need a root certificate: none given, and none in ~/.postgresql.
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().to_string_lossy();
        for mode in ["verify-ca", "verify-full"] {
            let e = err(
                &format!("postgres://h/db?sslmode={mode}"),
                &[("HOME", &home)],
            );
            assert!(
                e.contains(&format!(
                    "sslmode={mode} checks the server's certificate, but no sslrootcert is given"
                )) && e.contains(".postgresql/root.crt"),
                "{e}"
            );
        }
        let missing = dir.path().join("missing.crt");
        let e = err(
            &format!(
                "postgres://h/db?sslmode=verify-full&sslrootcert={}",
                missing.display()
            ),
            &[],
        );
        assert!(
            e.starts_with(&format!(
                "sslrootcert {}: cannot read it",
                missing.display()
            )),
            "{e}"
        );
        let not_pem = dir.path().join("not.pem");
        std::fs::write(&not_pem, "hello").unwrap();
        let e = err(
            "postgres://h/db?sslmode=verify-ca",
            &[("PGSSLROOTCERT", &not_pem.to_string_lossy())],
        );
        assert!(
            e.contains("sslrootcert") && e.contains("holds no certificate"),
            "{e}"
        );

        // Client certificates: both files, and a key only its owner may read.
        let ca = Authority::new(dir.path(), "ca");
        let client = ca.sign(dir.path(), "client", &[], "ada");
        let e = err(
            &format!("postgres://h/db?sslcert={}", client.cert.display()),
            &[],
        );
        assert!(e.contains("sslcert is given without sslkey"), "{e}");
        let e = err(
            "postgres://h/db",
            &[("PGSSLKEY", &client.key.to_string_lossy())],
        );
        assert!(e.contains("sslkey is given without sslcert"), "{e}");
        let both = format!(
            "postgres://h/db?sslmode=require&sslcert={}&sslkey={}",
            client.cert.display(),
            client.key.display()
        );
        ok(&both, &[]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&client.key, std::fs::Permissions::from_mode(0o644)).unwrap();
            let e = err(&both, &[]);
            assert!(
                e.contains(&format!(
                    "sslkey {}: group or others may read it",
                    client.key.display()
                )),
                "{e}"
            );
        }
        write_private(&client.key, "not a key");
        let e = err(&both, &[]);
        assert!(
            e.contains("holds no private key") && !e.contains("not a key"),
            "{e}"
        );

        // tokio-postgres's own refusals still say what, never the password.
        let e = err("postgres://u:s3cret@h/db?no_such_option=1", &[]);
        assert!(e.contains("no_such_option") && !e.contains("s3cret"), "{e}");
    }
}
