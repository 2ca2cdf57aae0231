//! Loading while serving: `serve` checks the tools directory, `justonce.toml` and
//! its lock file every `--watch-interval-ms` (by size, modification time and inode,
//! so a file replaced by a rename counts), and reloads on `SIGHUP` too. A reload
//! reads the configuration again and swaps in what changed ([`HostBuilder::reload`]);
//! then the server's [`Catalog`] tells the clients when the tools changed. A
//! configuration that no longer reads, or a component that fails to load, leaves
//! what runs serving and is logged with why.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crossbeam_channel::{Receiver, RecvTimeoutError};

use crate::builder::HostBuilder;
use crate::config::{self, Config};
use crate::error::Error;
use crate::host::Host;
use crate::mcp::Catalog;
use crate::registry::lock_path_beside;

/// What a reload reads: the configuration file (read again each time), and the
/// tools directory the host was built with.
#[derive(Debug, Clone)]
pub(super) struct Sources {
    /// `justonce.toml` (it may not exist yet).
    pub config: PathBuf,
    /// The tools directory, if the host has one.
    pub tools_dir: Option<PathBuf>,
    /// `--tools` was given: the configuration's `tools_dir` does not count.
    pub tools_flag: bool,
}

/// What a file looked like: size, modification time, inode.
type Seen = Option<(u64, Option<SystemTime>, u64)>;

/// What the watched files looked like, by path.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Fingerprint(BTreeMap<PathBuf, Seen>);

fn seen(path: &Path) -> Seen {
    use std::os::unix::fs::MetadataExt as _;
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.len(), meta.modified().ok(), meta.ino()))
}

impl Sources {
    /// How the watched files look now.
    pub(super) fn fingerprint(&self) -> Fingerprint {
        let mut files = BTreeMap::new();
        for path in [self.config.clone(), lock_path_beside(&self.config)] {
            let look = seen(&path);
            files.insert(path, look);
        }
        if let Some(dir) = &self.tools_dir {
            files.insert(dir.clone(), seen(dir));
            if let Ok(entries) = std::fs::read_dir(dir) {
                for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
                    if path.extension().is_some_and(|x| x == "wasm") {
                        let look = seen(&path);
                        files.insert(path, look);
                    }
                }
            }
        }
        Fingerprint(files)
    }

    /// A builder from the configuration as it reads now.
    fn builder(&self) -> Result<HostBuilder, Error> {
        let mut builder = Host::builder();
        if self.config.is_file() {
            let config = Config::load(&self.config)?;
            if !self.tools_flag && config.tools_dir != self.tools_dir {
                tracing::warn!(
                    "{}: a changed tools_dir takes effect at restart; still watching {}",
                    self.config.display(),
                    self.tools_dir
                        .as_deref()
                        .map_or_else(|| "none".into(), |d| d.display().to_string())
                );
            }
            builder = builder.config(&config);
        }
        Ok(builder)
    }

    /// Reloads `host`'s tools from what the files say now, and refreshes `catalog`.
    fn reload(&self, host: &Host, catalog: &Catalog, why: &str) {
        tracing::info!(why, "reloading the tools");
        let reloaded = self
            .builder()
            .and_then(|builder| builder.reload(host, self.tools_dir.as_deref()));
        match reloaded {
            Ok(report) => {
                if catalog.refresh() || report.changed() {
                    tracing::info!(
                        swapped = report.swapped.len(),
                        retired = report.retired.len(),
                        refused = report.refused.len(),
                        "reloaded"
                    );
                }
            }
            Err(e) => tracing::warn!("reload failed; the tools that ran keep serving: {e:#}"),
        }
    }
}

/// The configuration file `serve` reads again on a reload: the one read at start,
/// else the one that would be read (beside the database).
pub(super) fn config_path(read: Option<&Config>, db: &Path) -> PathBuf {
    read.map_or_else(
        || db.parent().unwrap_or(Path::new("")).join(config::FILE_NAME),
        |c| c.path.clone(),
    )
}

/// Watches on a thread of its own: every `interval` (never, for `None`) it compares
/// the files with how they looked (`since`, taken before the host was built), and
/// reloads when they changed; each message on `hangups` (`SIGHUP`) reloads at once.
/// Ends when `hangups` closes.
pub(super) fn spawn(
    (sources, since): (Sources, Fingerprint),
    host: Arc<Host>,
    catalog: Arc<Catalog>,
    interval: Option<Duration>,
    hangups: Receiver<()>,
) -> Result<(), Error> {
    let mut last = since;
    std::thread::Builder::new()
        .name("justonce-watch".into())
        .spawn(move || {
            loop {
                let woke = match interval {
                    Some(every) => hangups.recv_timeout(every),
                    None => hangups.recv().map_err(|_| RecvTimeoutError::Disconnected),
                };
                match woke {
                    Ok(()) => {
                        last = sources.fingerprint();
                        sources.reload(&host, &catalog, "SIGHUP");
                    }
                    Err(RecvTimeoutError::Timeout) => {
                        let now = sources.fingerprint();
                        if now != last {
                            last = now;
                            sources.reload(
                                &host,
                                &catalog,
                                "the tools directory or the configuration changed",
                            );
                        }
                    }
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            }
        })
        .map_err(|e| Error::Host(anyhow::anyhow!("cannot start the watcher thread: {e}")))?;
    Ok(())
}
