//! Loading while serving: `serve` checks the tools directory, `justonce.toml` and
//! its lock file every `--watch-interval-ms` (by size, modification time and inode,
//! so a file replaced by a rename counts), and reloads once a change has settled (the
//! files looked the same at two checks in a row, so a file caught half written, say
//! truncated by `std::fs::write` or a shell's `>`, is not loaded), and on `SIGHUP` at
//! once. A reload
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

/// Whether a change of the watched files has settled: a reload waits until the
/// files look the same at two checks in a row, so a file caught while it is being
/// written (truncated, half its bytes) is never loaded.
#[derive(Debug)]
struct Settle {
    /// How the files looked when they were last loaded.
    loaded: Fingerprint,
    /// How they looked at the last check, when that differed from `loaded`.
    changing: Option<Fingerprint>,
}

impl Settle {
    fn new(loaded: Fingerprint) -> Self {
        Self {
            loaded,
            changing: None,
        }
    }

    /// Takes how the files look `now`; true when they changed since they were loaded
    /// and look as they did at the last check: reload now (they count as loaded).
    fn settled(&mut self, now: Fingerprint) -> bool {
        if now == self.loaded {
            self.changing = None;
            return false;
        }
        if self.changing.as_ref() == Some(&now) {
            self.changing = None;
            self.loaded = now;
            return true;
        }
        self.changing = Some(now);
        false
    }

    /// The files were loaded as they look `now` (a `SIGHUP`).
    fn loaded(&mut self, now: Fingerprint) {
        self.loaded = now;
        self.changing = None;
    }
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
/// reloads when they changed and then looked the same at the next check; each message on `hangups` (`SIGHUP`) reloads at once.
/// Ends when `hangups` closes.
pub(super) fn spawn(
    (sources, since): (Sources, Fingerprint),
    host: Arc<Host>,
    catalog: Arc<Catalog>,
    interval: Option<Duration>,
    hangups: Receiver<()>,
) -> Result<(), Error> {
    let mut last = Settle::new(since);
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
                        last.loaded(sources.fingerprint());
                        sources.reload(&host, &catalog, "SIGHUP");
                    }
                    Err(RecvTimeoutError::Timeout) => {
                        if last.settled(sources.fingerprint()) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn looks(files: &[(&str, u64)]) -> Fingerprint {
        Fingerprint(
            files
                .iter()
                .map(|(p, len)| (PathBuf::from(p), Some((*len, None, 1))))
                .collect(),
        )
    }

    #[test]
    fn a_change_reloads_once_the_files_look_the_same_at_two_checks_in_a_row() {
        let mut settle = Settle::new(looks(&[("justonce.toml", 120)]));
        assert!(!settle.settled(looks(&[("justonce.toml", 120)])));
        // Caught half written (truncated by a plain write): not loaded.
        assert!(!settle.settled(looks(&[("justonce.toml", 0)])));
        // Written out: changed again since the last check, so still not loaded.
        assert!(!settle.settled(looks(&[("justonce.toml", 60)])));
        // The same at the next check: loaded, once.
        assert!(settle.settled(looks(&[("justonce.toml", 60)])));
        assert!(!settle.settled(looks(&[("justonce.toml", 60)])));
    }

    #[test]
    fn a_change_undone_before_it_settled_reloads_nothing_and_a_sighup_counts_as_loaded() {
        let mut settle = Settle::new(looks(&[("justonce.toml", 120)]));
        assert!(!settle.settled(looks(&[("justonce.toml", 0)])));
        assert!(!settle.settled(looks(&[("justonce.toml", 120)])));
        assert!(!settle.settled(looks(&[("justonce.toml", 120)])));
        settle.loaded(looks(&[("justonce.toml", 90)]));
        assert!(!settle.settled(looks(&[("justonce.toml", 90)])));
    }
}
