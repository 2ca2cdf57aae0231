//! A throwaway OCI registry for tests: Debian's `docker-registry` (the CNCF
//! distribution registry) started on a free port of 127.0.0.1 with its storage in a
//! directory of its own, stopped when the [`TestRegistry`] is dropped (or, should the
//! test binary be killed, when it is gone).
//!
//! Where no registry binary is found, [`TestRegistry::start`] returns `None` and the
//! caller skips, saying so; with `CI=true` that is a failure instead.
//! `JUSTONCE_REGISTRY_BIN` names the binary.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use super::reference::Digest;
use crate::journal::postgres::testing::free_port;

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A running registry, stopped on drop.
#[derive(Debug)]
pub struct TestRegistry {
    child: Option<Child>,
    dir: PathBuf,
    port: u16,
}

impl TestRegistry {
    /// Starts a registry for `test`; `None` (after printing why `test` is skipped)
    /// where there is none. Panics under `CI=true` instead.
    pub fn start(test: &str) -> Option<Self> {
        match start() {
            Ok(registry) => Some(registry),
            Err(why) => {
                if std::env::var("CI").is_ok_and(|v| v == "true") {
                    panic!("CI=true and no OCI registry for the tests: {why}");
                }
                eprintln!("skipped (no OCI registry: {why}): {test}");
                None
            }
        }
    }

    /// `127.0.0.1:PORT`, as a reference names it.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The file the registry keeps the blob `digest` in (tests alter it).
    pub fn blob_file(&self, digest: &Digest) -> PathBuf {
        let hex = digest.hex();
        self.dir
            .join("data/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    /// Stops the registry now (its port then refuses connections).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for TestRegistry {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn binary() -> Option<PathBuf> {
    if let Ok(bin) = std::env::var("JUSTONCE_REGISTRY_BIN") {
        return Some(PathBuf::from(bin));
    }
    [
        "/usr/bin/docker-registry",
        "/usr/local/bin/docker-registry",
        "/usr/bin/registry",
    ]
    .into_iter()
    .map(PathBuf::from)
    .find(|p| p.is_file())
}

fn start() -> Result<TestRegistry, String> {
    let bin = binary().ok_or(
        "no docker-registry binary (apt-get install docker-registry, or set JUSTONCE_REGISTRY_BIN)",
    )?;
    let dir = std::env::temp_dir().join(format!(
        "justonce-registry-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let port = free_port()?;
    let config = dir.join("config.yml");
    std::fs::write(
        &config,
        format!(
            "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n  secret: justonce-tests\n",
            dir.join("data").display()
        ),
    )
    .map_err(|e| e.to_string())?;
    let child = Command::new(&bin)
        .arg("serve")
        .arg(&config)
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("log")).map_err(|e| e.to_string())?)
        .spawn()
        .map_err(|e| format!("{}: {e}", bin.display()))?;
    watchdog(child.id(), &dir);
    let mut registry = TestRegistry {
        child: Some(child),
        dir,
        port,
    };
    wait_ready(&mut registry)?;
    Ok(registry)
}

/// Waits until `GET /v2/` answers; the error holds the registry's log.
fn wait_ready(registry: &mut TestRegistry) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let url = format!("http://{}/v2/", registry.address());
    while Instant::now() < deadline {
        if ureq::get(&url).call().is_ok() {
            return Ok(());
        }
        if let Some(child) = &mut registry.child
            && let Ok(Some(status)) = child.try_wait()
        {
            let log = std::fs::read_to_string(registry.dir.join("log")).unwrap_or_default();
            return Err(format!("the registry exited ({status}): {log}"));
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    Err("the registry did not answer within 20 s".into())
}

/// Kills the registry `pid` (if that pid is still the registry of `dir`) and removes
/// `dir` once this process is gone.
fn watchdog(pid: u32, dir: &Path) {
    let script = format!(
        "while [ -d /proc/{me} ]; do sleep 1; done; \
         grep -q {dir} /proc/{pid}/cmdline 2>/dev/null && kill {pid}; rm -rf {dir}",
        me = std::process::id(),
        dir = dir.display(),
    );
    let _ = Command::new("/bin/sh")
        .args(["-c", &script])
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
}
