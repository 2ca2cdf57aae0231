//! A host's memory of how far the journals it served reached (see
//! [`crate::journal::JournalMark`]), in a small file beside its state: a journal
//! restored from a backup older than what the host saw is refused at start, naming
//! the problem, unless the operator says they know (`serve
//! --accept-restored-journal`); the retries of calls it lost would run again under
//! new keys, which the downstreams cannot recognise.
//!
//! The host reads the mark at start and every few seconds while it serves (the
//! maintenance loop), so what it remembers is at most that old: a backup taken
//! within the last few seconds before a host stopped may not be told apart.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::clock::rfc3339;
use crate::error::{Error, Result};
use crate::host::Host;
use crate::journal::JournalMark;

/// The file's name, in the host's state directory.
pub const MARKS_FILE: &str = "journal-marks.json";

/// What the file holds: the newest call this host saw of each journal, by its id.
#[derive(Debug, Default, Serialize, Deserialize)]
struct MarksDoc {
    journals: BTreeMap<String, Seen>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Seen {
    /// The journal's mark when this host last read it (ms since the epoch).
    newest_call_at: i64,
}

/// This host's memory of the journal of `host`, kept in the file at `path`.
#[derive(Debug)]
pub struct JournalMarks {
    path: PathBuf,
    host: Arc<Host>,
    /// The mark last written to the file.
    written: Mutex<Option<JournalMark>>,
}

impl JournalMarks {
    /// The memory of `host`'s journal in the file at `path` (made when first
    /// written).
    pub fn new(path: PathBuf, host: Arc<Host>) -> Self {
        Self {
            path,
            host,
            written: Mutex::new(None),
        }
    }

    /// At start: refuses a journal whose mark is behind what this host saw of it,
    /// unless `accept` (then it says so in the log and remembers the journal as it
    /// is now); otherwise remembers the mark read now.
    pub fn check(&self, accept: bool) -> Result<JournalMark> {
        let mark = self.host.journal_mark()?;
        let mut doc = self.read()?;
        if let Some(seen) = doc.journals.get(&mark.id)
            && mark.newest_call_at < seen.newest_call_at
        {
            let problem = behind(&mark, *seen, &self.path);
            if !accept {
                return Err(Error::Config {
                    path: self.path.clone(),
                    reason: format!(
                        "{problem}. Serve the newer copy if there is one; or, once you know what the journal lost, start with --accept-restored-journal"
                    ),
                });
            }
            tracing::warn!(
                "{problem}; serving it as --accept-restored-journal says, and remembering it as it is now"
            );
        }
        doc.journals.insert(
            mark.id.clone(),
            Seen {
                newest_call_at: mark.newest_call_at,
            },
        );
        self.write(&doc)?;
        *self.lock() = Some(mark.clone());
        Ok(mark)
    }

    /// While serving: reads the mark and remembers it when it moved on. A journal
    /// that went behind under a running host (restored beneath it) is logged as an
    /// error, and not remembered lower: the next start refuses it.
    pub fn record(&self) {
        let mark = match self.host.journal_mark() {
            Ok(mark) => mark,
            Err(e) => {
                tracing::warn!("reading the journal's mark (the next check tries again): {e}");
                return;
            }
        };
        let last = self.lock().clone();
        match &last {
            Some(last) if *last == mark => return,
            Some(last) if last.id == mark.id && mark.newest_call_at < last.newest_call_at => {
                let seen = Seen {
                    newest_call_at: last.newest_call_at,
                };
                tracing::error!(
                    "{} while this host serves it; the next start refuses it",
                    behind(&mark, seen, &self.path)
                );
                return;
            }
            _ => {}
        }
        let written = self.read().and_then(|mut doc| {
            doc.journals.insert(
                mark.id.clone(),
                Seen {
                    newest_call_at: mark.newest_call_at,
                },
            );
            self.write(&doc)
        });
        match written {
            Ok(()) => *self.lock() = Some(mark),
            Err(e) => tracing::warn!("remembering the journal's mark: {e}"),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<JournalMark>> {
        self.written.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn read(&self) -> Result<MarksDoc> {
        let text = match std::fs::read(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(MarksDoc::default()),
            Err(e) => return Err(self.problem(e.to_string())),
        };
        serde_json::from_slice(&text).map_err(|e| self.problem(format!("not a marks file: {e}")))
    }

    /// Writes aside and renames into place, synced: a crash leaves the old file or
    /// the new one.
    fn write(&self, doc: &MarksDoc) -> Result<()> {
        let written = write_synced(
            &self.path,
            &serde_json::to_vec_pretty(doc).unwrap_or_default(),
        );
        written.map_err(|e| self.problem(e.to_string()))
    }

    fn problem(&self, reason: String) -> Error {
        Error::Config {
            path: self.path.clone(),
            reason,
        }
    }
}

/// The problem, in words: `mark` is behind what this host saw (`seen`, kept in
/// `file`).
fn behind(mark: &JournalMark, seen: Seen, file: &Path) -> String {
    format!(
        "the journal {} is behind what this host saw of it: its newest call was created at {}, \
         and this host saw one created at {} ({}). It was restored from an older backup (or lost \
         its last commits): calls made since are not in it, and their retries would run again \
         under new keys",
        mark.id,
        rfc3339(mark.newest_call_at),
        rfc3339(seen.newest_call_at),
        file.display()
    )
}

fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let aside = path.with_extension(format!("tmp{}", std::process::id()));
    let written = std::fs::File::create(&aside).and_then(|mut f| {
        f.write_all(bytes)?;
        f.sync_all()
    });
    written
        .and_then(|()| std::fs::rename(&aside, path))
        .inspect_err(|_| {
            let _ = std::fs::remove_file(&aside);
        })
}
