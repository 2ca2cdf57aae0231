//! A pg_auto_failover formation for the failover tests: a monitor and two nodes
//! (`pg_autoctl`, Debian's `postgresql-NN-auto-failover`), on free ports of
//! 127.0.0.1, in a directory of their own, run as the `postgres` user when the tests
//! run as root. The formation replicates synchronously (`ANY 1` of its standby), as
//! pg_auto_failover sets it up for two nodes, and its failover is tuned to take a few
//! seconds instead of the defaults' 50 (docs/operators.md, "Failover"): the monitor
//! checks every second and calls a node unhealthy after 2 s, a primary that cannot
//! be reached is given 3 s to demote itself, and a node that cannot reach the
//! monitor or its peer waits 3 s before it demotes itself.
//!
//! Everything it started is killed, and its directory removed, when it is dropped
//! (and, failing that, when the test binary exits).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicU32;
use std::time::{Duration, Instant};

use super::testing::{command, free_port, fresh_dir, numbered_dir, run, server_binaries_for};

/// The monitor's settings that make a failover take seconds (defaults in comments).
const MONITOR_SETTINGS: &[(&str, &str)] = &[
    ("pgautofailover.health_check_period", "1000"), // 5000 ms
    ("pgautofailover.health_check_timeout", "1000"), // 5000 ms
    ("pgautofailover.health_check_retry_delay", "500"), // 2000 ms
    ("pgautofailover.health_check_max_retries", "1"), // 2
    ("pgautofailover.node_considered_unhealthy_timeout", "2000"), // 20000 ms
    ("pgautofailover.primary_demote_timeout", "3000"), // 30000 ms
];

/// How long a node that reaches neither the monitor nor its peer waits before it
/// demotes itself, in seconds (default 20).
const NETWORK_PARTITION_TIMEOUT: &str = "3";

/// How long the formation may take to start, or to fail over.
const BOUND: Duration = Duration::from_secs(90);

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A running formation (see the module docs).
#[derive(Debug)]
pub(crate) struct Formation {
    dir: PathBuf,
    as_root: bool,
    pg_autoctl: PathBuf,
    bin: PathBuf,
    monitor_port: u16,
    /// The nodes' ports; the first is the primary at the start.
    pub node_ports: [u16; 2],
    /// The `pg_autoctl run` of the monitor and of each node, each the leader of a
    /// process group with the PostgreSQL it started.
    keepers: Vec<Child>,
}

/// `pg_autoctl`, where it is installed.
fn pg_autoctl() -> Option<PathBuf> {
    ["/usr/bin/pg_autoctl", "/usr/local/bin/pg_autoctl"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// A fresh formation; `None` (after printing why `test` is skipped) where there is no
/// `pg_autoctl` or no PostgreSQL server. Panics under `CI=true` instead.
pub(crate) fn formation(test: &str) -> Option<Formation> {
    let bin = server_binaries_for(test)?;
    let Some(pg_autoctl) = pg_autoctl() else {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("CI=true and no pg_autoctl (postgresql-NN-auto-failover) for {test}");
        }
        eprintln!("skipped (no pg_autoctl): {test}");
        return None;
    };
    let dir = numbered_dir("justonce-paf", &NEXT);
    match Formation::start(&bin, &pg_autoctl, &dir) {
        Ok(formation) => Some(formation),
        Err(why) => {
            let _ = std::fs::remove_dir_all(&dir);
            panic!("cannot start a pg_auto_failover formation for {test}: {why}");
        }
    }
}

impl Formation {
    fn start(bin: &Path, pg_autoctl: &Path, dir: &Path) -> Result<Self, String> {
        let as_root = fresh_dir(dir)?;
        let mut formation = Self {
            dir: dir.to_path_buf(),
            as_root,
            pg_autoctl: pg_autoctl.to_path_buf(),
            bin: bin.to_path_buf(),
            monitor_port: free_port()?,
            node_ports: [free_port()?, free_port()?],
            keepers: Vec::new(),
        };
        formation.watchdog();
        let monitor = dir.join("monitor");
        formation.autoctl(&[
            "create",
            "monitor",
            "--pgdata",
            &monitor.to_string_lossy(),
            "--pgport",
            &formation.monitor_port.to_string(),
            "--hostname",
            "127.0.0.1",
            "--auth",
            "trust",
            "--no-ssl",
        ])?;
        formation.keep("monitor", &["run", "--pgdata", &monitor.to_string_lossy()])?;
        formation.tune_monitor()?;
        for (i, port) in formation.node_ports.into_iter().enumerate() {
            let name = format!("node{}", i + 1);
            let data = dir.join(&name).to_string_lossy().into_owned();
            formation.autoctl(&[
                "create",
                "postgres",
                "--pgdata",
                &data,
                "--pgport",
                &port.to_string(),
                "--hostname",
                "127.0.0.1",
                "--name",
                &name,
                "--auth",
                "trust",
                "--no-ssl",
                "--monitor",
                &formation.monitor_url(),
            ])?;
            formation.autoctl(&[
                "config",
                "set",
                "--pgdata",
                &data,
                "timeout.network_partition_timeout",
                NETWORK_PARTITION_TIMEOUT,
            ])?;
            formation.keep(&name, &["run", "--pgdata", &data])?;
            let wanted: &[&str] = if i == 0 {
                &["single"]
            } else {
                &["primary", "secondary"]
            };
            formation.wait_for_states(wanted)?;
        }
        Ok(formation)
    }

    /// Runs `pg_autoctl ARGS` to its end.
    fn autoctl(&self, args: &[&str]) -> Result<String, String> {
        let out = self
            .autoctl_command()
            .args(args)
            .output()
            .map_err(|e| format!("pg_autoctl: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "pg_autoctl {} failed: {}{}",
                args.join(" "),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    /// `pg_autoctl`, with its state and configuration in the formation's directory
    /// and the server binaries on its path.
    fn autoctl_command(&self) -> Command {
        let mut c = command(self.as_root, &self.pg_autoctl);
        let path = format!(
            "{}:{}",
            self.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        c.env("PATH", path)
            .env("XDG_CONFIG_HOME", self.dir.join("config"))
            .env("XDG_DATA_HOME", self.dir.join("data"))
            .env("XDG_RUNTIME_DIR", self.dir.join("run"))
            .env_remove("PGUSER")
            .current_dir("/")
            .stdin(Stdio::null());
        c
    }

    /// Starts `pg_autoctl ARGS` in a process group of its own, its log in `name.log`.
    fn keep(&mut self, name: &str, args: &[&str]) -> Result<(), String> {
        use std::os::unix::process::CommandExt as _;
        let log = std::fs::File::create(self.dir.join(format!("{name}.log")))
            .map_err(|e| format!("{name}.log: {e}"))?;
        let err = log.try_clone().map_err(|e| e.to_string())?;
        let child = self
            .autoctl_command()
            .args(args)
            .stdout(log)
            .stderr(err)
            .process_group(0)
            .spawn()
            .map_err(|e| format!("pg_autoctl {}: {e}", args.join(" ")))?;
        // For the watchdog: the group to kill should this process die first.
        std::fs::write(
            self.dir.join(format!("{name}.group")),
            child.id().to_string(),
        )
        .map_err(|e| format!("{name}.group: {e}"))?;
        self.keepers.push(child);
        Ok(())
    }

    /// Makes the monitor fail over in seconds (see [`MONITOR_SETTINGS`]).
    fn tune_monitor(&self) -> Result<(), String> {
        let mut admin = self.wait_for(|| {
            postgres::Client::connect(
                &format!(
                    "postgres://postgres@127.0.0.1:{}/pg_auto_failover",
                    self.monitor_port
                ),
                postgres::NoTls,
            )
            .map_err(|e| e.to_string())
        })?;
        for (name, value) in MONITOR_SETTINGS {
            admin
                .batch_execute(&format!("ALTER SYSTEM SET {name} = {value}"))
                .map_err(|e| format!("{name}: {e}"))?;
        }
        admin
            .batch_execute("SELECT pg_reload_conf()")
            .map_err(|e| e.to_string())
    }

    /// Polls `attempt` until it succeeds, for at most [`BOUND`].
    fn wait_for<T>(&self, mut attempt: impl FnMut() -> Result<T, String>) -> Result<T, String> {
        let started = Instant::now();
        loop {
            match attempt() {
                Ok(value) => return Ok(value),
                Err(e) if started.elapsed() > BOUND => {
                    return Err(format!("{e} (after {BOUND:?})"));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    /// The monitor's URL, for the nodes.
    fn monitor_url(&self) -> String {
        format!(
            "postgres://autoctl_node@127.0.0.1:{}/pg_auto_failover?sslmode=disable",
            self.monitor_port
        )
    }

    /// The states the monitor says the nodes are in (reported and assigned), in the
    /// order of their ids.
    pub(crate) fn states(&self) -> Result<Vec<(String, String)>, String> {
        let mut monitor = postgres::Client::connect(
            &format!(
                "postgres://postgres@127.0.0.1:{}/pg_auto_failover",
                self.monitor_port
            ),
            postgres::NoTls,
        )
        .map_err(|e| e.to_string())?;
        Ok(monitor
            .query(
                "SELECT reportedstate::text, goalstate::text FROM pgautofailover.node ORDER BY nodeid",
                &[],
            )
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect())
    }

    /// Waits until every node reports, and is assigned, the state `wanted` lists for
    /// it in the order of the nodes' ids.
    fn wait_for_states(&self, wanted: &[&str]) -> Result<(), String> {
        self.wait_for(|| {
            let states = self.states()?;
            let settled = states.len() == wanted.len()
                && states
                    .iter()
                    .zip(wanted)
                    .all(|((reported, goal), w)| reported == w && goal == w);
            if settled {
                Ok(())
            } else {
                Err(format!("the nodes are {states:?}, not {wanted:?}"))
            }
        })
    }

    /// The URL applications connect with, as `pg_autoctl show uri --formation
    /// default` prints it: both nodes, `target_session_attrs=read-write`, no user.
    pub(crate) fn uri(&self) -> String {
        self.autoctl(&[
            "show",
            "uri",
            "--pgdata",
            &self.dir.join("monitor").to_string_lossy(),
            "--formation",
            "default",
        ])
        .unwrap_or_else(|e| panic!("{e}"))
        .trim()
        .to_owned()
    }

    /// The URL of node `i` (0 or 1) alone.
    pub(crate) fn node_url(&self, i: usize) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/postgres",
            self.node_ports[i]
        )
    }

    /// `kill -9` of the first node's keeper and the PostgreSQL it runs (one process
    /// group): the machine died, and no keeper restarts its server.
    pub(crate) fn kill_primary(&mut self) {
        let keeper = &mut self.keepers[1];
        let group = keeper.id();
        let _ = Command::new("kill")
            .args(["-9", "--", &format!("-{group}")])
            .status();
        let _ = keeper.wait();
    }

    /// Waits until the second node is the primary, taking writes alone
    /// (`wait_primary`: its standby is gone, so it does not wait for one).
    pub(crate) fn wait_promoted(&self) {
        self.wait_for(|| {
            let states = self.states()?;
            match states.get(1) {
                Some((reported, _)) if reported == "wait_primary" || reported == "primary" => {
                    Ok(())
                }
                _ => Err(format!("the nodes are {states:?}")),
            }
        })
        .unwrap_or_else(|e| panic!("the standby was never promoted: {e}"));
    }

    /// A shell that kills every keeper's process group (the ids [`Formation::keep`]
    /// wrote down), stops the servers and removes the directory once this test
    /// binary is gone.
    fn watchdog(&self) {
        let script = format!(
            "while [ -d /proc/{pid} ]; do sleep 1; done; \
             for g in {dir}/*.group; do kill -9 -- -$(cat $g) >/dev/null 2>&1; done; \
             for d in {dir}/monitor {dir}/node1 {dir}/node2; do {ctl} -D $d stop -m immediate >/dev/null 2>&1; done; \
             rm -rf {dir}",
            pid = std::process::id(),
            dir = self.dir.display(),
            ctl = self.bin.join("pg_ctl").display(),
        );
        let _ = run_detached(self.as_root, &script);
    }
}

/// Starts `/bin/sh -c script` in the background, as `postgres` when root.
fn run_detached(as_root: bool, script: &str) -> std::io::Result<Child> {
    command(as_root, Path::new("/bin/sh"))
        .args(["-c", script])
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
}

impl Drop for Formation {
    fn drop(&mut self) {
        for keeper in &mut self.keepers {
            // The first node's is gone already once the test killed it.
            let _ = Command::new("kill")
                .args(["-9", "--", &format!("-{}", keeper.id())])
                .stderr(Stdio::null())
                .status();
            let _ = keeper.wait();
        }
        for data in ["monitor", "node1", "node2"] {
            let _ = run(
                self.as_root,
                &self.bin.join("pg_ctl"),
                &[
                    "-D",
                    &self.dir.join(data).to_string_lossy(),
                    "stop",
                    "-m",
                    "immediate",
                ],
            );
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
