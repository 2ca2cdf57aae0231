//! A throwaway PostgreSQL cluster for tests: started once per test binary from the
//! server binaries found on the machine, listening on a free port of 127.0.0.1 with
//! a data directory under the temporary directory, and stopped when the test binary
//! exits. Each test takes a database (or, in-crate, a schema) of its own.
//!
//! Where no PostgreSQL is found, [`cluster`] returns `None` and the caller skips,
//! saying so; with `CI=true` that is a failure instead. `JUSTONCE_TEST_PG_URL`
//! (`postgres://user@host:port/db` of a superuser) uses a running server instead.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

/// A running PostgreSQL server the tests may create databases on.
#[derive(Debug)]
pub struct Cluster {
    host: String,
    port: u16,
    user: String,
    admin_db: String,
}

static CLUSTER: OnceLock<Option<Cluster>> = OnceLock::new();

/// The role [`Cluster::password_login`] logs in as.
pub const PASSWORD_ROLE: &str = "justonce_pw";

/// Its password, with a colon and a backslash so that `.pgpass` escapes are tested
/// against a real login.
pub const PASSWORD: &str = "pw:with\\back";
static NEXT: AtomicU32 = AtomicU32::new(0);

/// The cluster of this test binary, started on first use; `None` (after printing why
/// `test` is skipped) where there is no PostgreSQL. Panics under `CI=true` instead.
pub fn cluster(test: &str) -> Option<&'static Cluster> {
    let found = CLUSTER
        .get_or_init(|| match start() {
            Ok(cluster) => Some(cluster),
            Err(why) => {
                if std::env::var("CI").is_ok_and(|v| v == "true") {
                    panic!("CI=true and no PostgreSQL for the tests: {why}");
                }
                eprintln!("no PostgreSQL for the tests: {why}");
                None
            }
        })
        .as_ref();
    if found.is_none() {
        eprintln!("skipped (no PostgreSQL): {test}");
    }
    found
}

impl Cluster {
    /// A URL of the server's administrative database.
    pub fn admin_url(&self) -> String {
        self.url_of(&self.admin_db)
    }

    fn url_of(&self, db: &str) -> String {
        format!("postgres://{}@{}:{}/{db}", self.user, self.host, self.port)
    }

    fn admin(&self) -> postgres::Client {
        postgres::Client::connect(&self.admin_url(), postgres::NoTls)
            .expect("connect to the test cluster")
    }

    /// `url` (a database of [`Cluster::database`]) for [`PASSWORD_ROLE`], a superuser
    /// that must log in with [`PASSWORD`] (`scram-sha-256` from 127.0.0.1), made on
    /// first use; no password in the URL. `None` (after saying why) where this
    /// process cannot require a password of the server (its `pg_hba.conf` is not a
    /// file here).
    pub fn password_login(&self, url: &str) -> Option<String> {
        static READY: OnceLock<Result<(), String>> = OnceLock::new();
        if let Err(why) = READY.get_or_init(|| self.require_password()) {
            eprintln!("cannot require a password of the test server: {why}");
            return None;
        }
        let db = url.rsplit('/').next()?;
        Some(format!(
            "postgres://{PASSWORD_ROLE}@{}:{}/{db}",
            self.host, self.port
        ))
    }

    fn require_password(&self) -> Result<(), String> {
        let mut admin = self.admin();
        let literal = PASSWORD.replace('\'', "''");
        admin
            .batch_execute(&format!(
                "DROP ROLE IF EXISTS {PASSWORD_ROLE};
                 CREATE ROLE {PASSWORD_ROLE} LOGIN SUPERUSER PASSWORD '{literal}';"
            ))
            .map_err(|e| e.to_string())?;
        let hba: String = admin
            .query_one("SHOW hba_file", &[])
            .map_err(|e| e.to_string())?
            .get(0);
        let text = std::fs::read_to_string(&hba).map_err(|e| format!("{hba}: {e}"))?;
        let line = format!("host all {PASSWORD_ROLE} 127.0.0.1/32 scram-sha-256\n");
        if !text.contains(&line) {
            // The first matching line wins: before the `trust` lines.
            std::fs::write(&hba, format!("{line}{text}")).map_err(|e| format!("{hba}: {e}"))?;
        }
        admin
            .batch_execute("SELECT pg_reload_conf()")
            .map_err(|e| e.to_string())?;
        // The server rereads the file after the call returns: wait until a login
        // without the password is refused.
        let url = format!(
            "postgres://{PASSWORD_ROLE}@{}:{}/{}",
            self.host, self.port, self.admin_db
        );
        for _ in 0..250 {
            if postgres::Client::connect(&url, postgres::NoTls).is_err() {
                return Ok(());
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Err("the server still lets the role in without a password".into())
    }

    /// A fresh, empty database; its URL.
    pub fn database(&self) -> String {
        let name = format!(
            "t_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        );
        self.admin()
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .expect("create a test database");
        self.url_of(&name)
    }

    /// A fresh, empty schema in the administrative database: a configuration whose
    /// connections use it (cheaper than a database, for the many in-crate tests).
    pub fn schema(&self) -> postgres::Config {
        let name = format!(
            "s_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        );
        self.admin()
            .batch_execute(&format!("CREATE SCHEMA {name}"))
            .expect("create a test schema");
        let mut config: postgres::Config = self.admin_url().parse().expect("test URL");
        config.options(&format!("-c search_path={name}"));
        config
    }
}

fn start() -> Result<Cluster, String> {
    if let Ok(url) = std::env::var("JUSTONCE_TEST_PG_URL") {
        let config: postgres::Config = url.parse().map_err(|e| format!("{e}"))?;
        let host = match config.get_hosts().first() {
            Some(postgres::config::Host::Tcp(h)) => h.clone(),
            _ => "127.0.0.1".into(),
        };
        return Ok(Cluster {
            host,
            port: config.get_ports().first().copied().unwrap_or(5432),
            user: config.get_user().unwrap_or("postgres").into(),
            admin_db: config.get_dbname().unwrap_or("postgres").into(),
        });
    }
    let bin = server_binaries().ok_or("no initdb and pg_ctl in /usr/lib/postgresql/*/bin")?;
    let dir = std::env::temp_dir().join(format!("justonce-pg-{}", std::process::id()));
    start_in(&bin, &dir).inspect_err(|_| {
        let _ = std::fs::remove_dir_all(dir.as_path());
    })
}

/// An empty `dir` for data directories, given to `postgres` when this process is
/// root (initdb and pg_ctl refuse root: a cluster belongs to `postgres`); whether
/// this process is root.
pub(crate) fn fresh_dir(dir: &Path) -> Result<bool, String> {
    let as_root = is_root();
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if as_root {
        let status = Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(dir)
            .status()
            .map_err(|e| format!("chown: {e}"))?;
        if !status.success() {
            return Err("cannot give the data directory to the postgres user".into());
        }
    }
    Ok(as_root)
}

/// `initdb` of `data` for the superuser `postgres`, trusted from anywhere it listens.
fn initdb(as_root: bool, bin: &Path, data: &Path) -> Result<(), String> {
    run(
        as_root,
        &bin.join("initdb"),
        &[
            "-D",
            &data.to_string_lossy(),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        ],
    )
}

fn start_in(bin: &Path, dir: &Path) -> Result<Cluster, String> {
    let as_root = fresh_dir(dir)?;
    let data = dir.join("data");
    let port = free_port()?;
    let user = "postgres";
    initdb(as_root, bin, &data)?;
    let options = format!(
        "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300",
        dir.display()
    );
    ctl_start(as_root, bin, &data, &options, &dir.join("log"))?;
    stop_at_exit(as_root, bin, dir, &data);
    Ok(Cluster {
        host: "127.0.0.1".into(),
        port,
        user: user.into(),
        admin_db: "postgres".into(),
    })
}

/// `pg_ctl start` of the cluster in `data` with the server's `options`, its log in
/// `log`; returns once it takes connections.
fn ctl_start(
    as_root: bool,
    bin: &Path,
    data: &Path,
    options: &str,
    log: &Path,
) -> Result<(), String> {
    run(
        as_root,
        &bin.join("pg_ctl"),
        &[
            "-D",
            &data.to_string_lossy(),
            "-o",
            options,
            "-l",
            &log.to_string_lossy(),
            "-w",
            "start",
        ],
    )
}

/// The server binaries for `test`, which starts servers of its own; `None` (after
/// printing why `test` is skipped) where there are none. Panics under `CI=true`
/// instead.
pub(crate) fn server_binaries_for(test: &str) -> Option<PathBuf> {
    let found = server_binaries();
    if found.is_none() {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("CI=true and no PostgreSQL server binaries for {test}");
        }
        eprintln!("skipped (no PostgreSQL server binaries): {test}");
    }
    found
}

/// A directory under the temporary directory, `PREFIX-PID-N`, N from `next`.
pub(crate) fn numbered_dir(prefix: &str, next: &AtomicU32) -> PathBuf {
    std::env::temp_dir().join(format!(
        "{prefix}-{}-{}",
        std::process::id(),
        next.fetch_add(1, Ordering::SeqCst)
    ))
}

fn server_binaries() -> Option<PathBuf> {
    if let Ok(dir) = std::env::var("JUSTONCE_PG_BIN") {
        return Some(PathBuf::from(dir));
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|bin| bin.join("initdb").exists() && bin.join("pg_ctl").exists())
        .collect();
    found.sort();
    found.pop()
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// A port of 127.0.0.1 that was free a moment ago (the registry tests use it too).
pub(crate) fn free_port() -> Result<u16, String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| e.to_string())
}

pub(crate) fn command(as_root: bool, program: &Path) -> Command {
    if as_root {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

pub(crate) fn run(as_root: bool, program: &Path, args: &[&str]) -> Result<(), String> {
    let out = command(as_root, program)
        .args(args)
        .current_dir("/")
        .output()
        .map_err(|e| format!("{}: {e}", program.display()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{} failed: {}{}",
            program.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// A watchdog that outlives nothing: it stops the server and removes its directory
/// once this process is gone (a test binary has no reliable exit hook).
fn stop_at_exit(as_root: bool, bin: &Path, dir: &Path, data: &Path) {
    let script = format!(
        "while [ -d /proc/{pid} ]; do sleep 1; done; {ctl} -D {data} stop -m immediate >/dev/null 2>&1; rm -rf {dir}",
        pid = std::process::id(),
        ctl = bin.join("pg_ctl").display(),
        data = data.display(),
        dir = dir.display(),
    );
    let mut c = command(as_root, Path::new("/bin/sh"));
    c.args(["-c", &script])
        .current_dir("/")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let _ = c.spawn();
}

/// A primary and a standby streaming from it, on ports of 127.0.0.1, for the
/// failover tests: the standby is a `pg_basebackup -R` of the primary, and, when
/// `synchronous`, the primary waits for it on every commit
/// (`synchronous_standby_names = '*'`, given to the primary alone, so the standby
/// promoted does not wait for a standby it does not have). Both are stopped and
/// their directory removed when it is dropped (and, failing that, when the test
/// binary exits).
#[derive(Debug)]
pub struct Replicated {
    bin: PathBuf,
    dir: PathBuf,
    as_root: bool,
    /// The primary's port.
    pub primary_port: u16,
    /// The standby's port.
    pub standby_port: u16,
}

static NEXT_PAIR: AtomicU32 = AtomicU32::new(0);

/// A fresh primary and standby (see [`Replicated`]); `None` (after printing why
/// `test` is skipped) where there are no PostgreSQL server binaries. Panics under
/// `CI=true` instead. `JUSTONCE_TEST_PG_URL` does not help here: a failover needs
/// servers the test may kill.
pub fn replicated(test: &str, synchronous: bool) -> Option<Replicated> {
    let bin = server_binaries_for(test)?;
    let dir = numbered_dir("justonce-pg-pair", &NEXT_PAIR);
    match start_pair(&bin, &dir, synchronous) {
        Ok(pair) => Some(pair),
        Err(why) => {
            let _ = std::fs::remove_dir_all(&dir);
            panic!("cannot start a primary and a standby for {test}: {why}");
        }
    }
}

fn start_pair(bin: &Path, dir: &Path, synchronous: bool) -> Result<Replicated, String> {
    let as_root = fresh_dir(dir)?;
    let (primary, standby) = (dir.join("primary"), dir.join("standby"));
    let pair = Replicated {
        bin: bin.to_path_buf(),
        dir: dir.to_path_buf(),
        as_root,
        primary_port: free_port()?,
        standby_port: free_port()?,
    };
    stop_at_exit(as_root, bin, dir, &primary);
    stop_at_exit(as_root, bin, dir, &standby);
    initdb(as_root, bin, &primary)?;
    // fsync off: the test kills processes, never the machine, so what a process
    // wrote survives it in the page cache; what the test loses it loses to
    // replication alone. A standby that lost its primary looks for WAL again every
    // 100 ms, not 5 s: a promotion asked meanwhile may wait for that look.
    let common = format!(
        "-k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100 \
         -c wal_sender_timeout=5s -c wal_receiver_status_interval=1s \
         -c wal_retrieve_retry_interval=100ms",
        dir.display()
    );
    let sync = if synchronous {
        " -c synchronous_standby_names=*"
    } else {
        ""
    };
    pair.ctl_start(
        &primary,
        &format!("-p {} {common}{sync}", pair.primary_port),
        "primary.log",
    )?;
    run(
        as_root,
        &bin.join("pg_basebackup"),
        &[
            "-h",
            "127.0.0.1",
            "-p",
            &pair.primary_port.to_string(),
            "-U",
            "postgres",
            "-D",
            &standby.to_string_lossy(),
            "-R",
            "-c",
            "fast",
            "--no-sync",
        ],
    )?;
    pair.ctl_start(
        &standby,
        &format!("-p {} {common}", pair.standby_port),
        "standby.log",
    )?;
    // Streaming (and, synchronous, counted as the synchronous standby) before the
    // test writes anything.
    let mut admin = postgres::Client::connect(&pair.url_of(pair.primary_port), postgres::NoTls)
        .map_err(|e| e.to_string())?;
    let wanted = if synchronous { "sync" } else { "async" };
    for _ in 0..500 {
        let n: i64 = admin
            .query_one(
                "SELECT count(*) FROM pg_stat_replication
                  WHERE state = 'streaming' AND sync_state = $1",
                &[&wanted],
            )
            .map_err(|e| e.to_string())?
            .get(0);
        if n == 1 {
            return Ok(pair);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Err(format!("the standby never streamed ({wanted})"))
}

impl Replicated {
    fn ctl_start(&self, data: &Path, options: &str, log: &str) -> Result<(), String> {
        ctl_start(self.as_root, &self.bin, data, options, &self.dir.join(log))
    }

    fn url_of(&self, port: u16) -> String {
        format!("postgres://postgres@127.0.0.1:{port}/postgres")
    }

    /// The URL of the primary alone.
    pub fn primary_url(&self) -> String {
        self.url_of(self.primary_port)
    }

    /// The URL of the standby alone (the primary once promoted).
    pub fn standby_url(&self) -> String {
        self.url_of(self.standby_port)
    }

    /// The URL a host follows the primary with: both servers, the session on
    /// whichever of them takes writes.
    pub fn url(&self) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/postgres?target_session_attrs=read-write",
            self.primary_port, self.standby_port
        )
    }

    /// `kill -9` of the primary's postmaster and every process it started, in one
    /// `kill`: the machine died. (The postmaster alone would let its backends and
    /// WAL sender finish what they were doing first.) Nothing it had not sent to the
    /// standby reaches it.
    pub fn kill_primary(&self) {
        let pid_file = self.dir.join("primary").join("postmaster.pid");
        let text = std::fs::read_to_string(&pid_file)
            .unwrap_or_else(|e| panic!("{}: {e}", pid_file.display()));
        let pid = text.lines().next().unwrap_or("").trim().to_string();
        let mut pids = vec![pid.clone()];
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // `pid (comm) state ppid …`: the name may hold spaces, not a `)`.
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1));
            if ppid == Some(pid.as_str()) {
                pids.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        // A child that ended meanwhile makes `kill` fail for its pid alone.
        let _ = Command::new("kill").arg("-9").args(&pids).status();
        let stat = PathBuf::from(format!("/proc/{pid}/stat"));
        let dead = (0..500).any(|_| {
            let gone = match std::fs::read_to_string(&stat) {
                Err(_) => true,
                Ok(s) => s
                    .rsplit_once(')')
                    .is_some_and(|(_, r)| r.trim_start().starts_with('Z')),
            };
            gone || {
                std::thread::sleep(std::time::Duration::from_millis(10));
                false
            }
        });
        assert!(dead, "the primary's postmaster {pid} outlived kill -9");
        // Its sessions end on their own once they see the postmaster gone; the pid
        // file goes now, so that no later `pg_ctl stop` signals a process that
        // reused the number.
        let _ = std::fs::remove_file(&pid_file);
    }

    /// `pg_ctl promote`, waiting until the standby takes writes.
    pub fn promote(&self) {
        run(
            self.as_root,
            &self.bin.join("pg_ctl"),
            &[
                "-D",
                &self.dir.join("standby").to_string_lossy(),
                "-w",
                "promote",
            ],
        )
        .unwrap_or_else(|e| panic!("promote: {e}"));
    }
}

impl Drop for Replicated {
    fn drop(&mut self) {
        for data in ["standby", "primary"] {
            let _ = command(self.as_root, &self.bin.join("pg_ctl"))
                .args(["-D"])
                .arg(self.dir.join(data))
                .args(["stop", "-m", "immediate"])
                .current_dir("/")
                .output();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A server of its own that takes TLS connections alone (`hostssl` lines only in
/// its `pg_hba.conf`), for the TLS tests. Roles: `postgres` (trusted),
/// [`PASSWORD_ROLE`] (with [`PASSWORD`]) and [`CERT_ROLE`] (by a client certificate
/// of the authority the server was given). Stopped, and its directory removed, when
/// dropped (and, failing that, when the test binary exits).
#[derive(Debug)]
pub struct TlsServer {
    bin: PathBuf,
    dir: PathBuf,
    as_root: bool,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

/// The role of [`TlsServer`] that logs in by a client certificate (its common name).
pub const CERT_ROLE: &str = "justonce_cert";

static NEXT_TLS: AtomicU32 = AtomicU32::new(0);

/// A fresh [`TlsServer`] whose certificate and key are the PEM files `cert` and
/// `key`, and which trusts client certificates of the authority `client_ca`; `None`
/// (after printing why `test` is skipped) where there are no PostgreSQL server
/// binaries. Panics under `CI=true` instead.
pub fn tls_server(test: &str, cert: &Path, key: &Path, client_ca: &Path) -> Option<TlsServer> {
    let bin = server_binaries_for(test)?;
    let dir = numbered_dir("justonce-pg-tls", &NEXT_TLS);
    match start_tls(&bin, &dir, cert, key, client_ca) {
        Ok(server) => Some(server),
        Err(why) => {
            let _ = std::fs::remove_dir_all(&dir);
            panic!("cannot start a TLS server for {test}: {why}");
        }
    }
}

fn start_tls(
    bin: &Path,
    dir: &Path,
    cert: &Path,
    key: &Path,
    client_ca: &Path,
) -> Result<TlsServer, String> {
    let as_root = fresh_dir(dir)?;
    let data = dir.join("data");
    let server = TlsServer {
        bin: bin.to_path_buf(),
        dir: dir.to_path_buf(),
        as_root,
        port: free_port()?,
    };
    initdb(as_root, bin, &data)?;
    let copy = |from: &Path, to: &str| {
        let to = data.join(to);
        std::fs::copy(from, &to).map_err(|e| format!("{}: {e}", from.display()))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o600))
                .map_err(|e| format!("{}: {e}", to.display()))?;
        }
        Ok::<_, String>(())
    };
    copy(cert, "server.crt")?;
    copy(key, "server.key")?;
    copy(client_ca, "root.crt")?;
    // No `host` line: a session without TLS finds no entry and is refused.
    let hba = format!(
        "local all all trust\n\
         hostssl all {CERT_ROLE} 127.0.0.1/32 cert\n\
         hostssl all {PASSWORD_ROLE} 127.0.0.1/32 scram-sha-256\n\
         hostssl all all 127.0.0.1/32 trust\n"
    );
    std::fs::write(data.join("pg_hba.conf"), hba).map_err(|e| e.to_string())?;
    if as_root {
        let status = Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(&data)
            .status()
            .map_err(|e| format!("chown: {e}"))?;
        if !status.success() {
            return Err("cannot give the certificates to the postgres user".into());
        }
    }
    stop_at_exit(as_root, bin, dir, &data);
    let options = format!(
        "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c ssl=on \
         -c ssl_cert_file=server.crt -c ssl_key_file=server.key -c ssl_ca_file=root.crt",
        server.port,
        dir.display()
    );
    ctl_start(as_root, bin, &data, &options, &dir.join("log"))?;
    let literal = PASSWORD.replace('\'', "''");
    server
        .local()
        .map_err(|e| e.to_string())?
        .batch_execute(&format!(
            "CREATE ROLE {PASSWORD_ROLE} LOGIN PASSWORD '{literal}';
             CREATE ROLE {CERT_ROLE} LOGIN;"
        ))
        .map_err(|e| e.to_string())?;
    Ok(server)
}

impl TlsServer {
    /// A session of `postgres` over the server's Unix socket (no TLS there).
    pub fn local(&self) -> Result<postgres::Client, postgres::Error> {
        postgres::Config::new()
            .host_path(&self.dir)
            .port(self.port)
            .user("postgres")
            .dbname("postgres")
            .connect(postgres::NoTls)
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = command(self.as_root, &self.bin.join("pg_ctl"))
            .args(["-D"])
            .arg(self.dir.join("data"))
            .args(["stop", "-m", "immediate"])
            .current_dir("/")
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
